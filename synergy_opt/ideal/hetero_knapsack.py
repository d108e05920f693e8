"""The type-free ideal ILP seen as a multiple-choice knapsack with three coupling rows per GPU type.

Rows are ordered as in the model (:data:`~synergy_opt.ideal.hetero_model.COUPLING`): the GPU rows of every type,
then the CPU rows, then the memory rows. A column uses only its own type's three rows, so pricing them at ``lam``
is three gathers per column (no dense ``rows x columns`` product: at 16384 GPUs that product is most of a
dual evaluation's time). :func:`~synergy_opt.ideal.lagrangian.solve_dual` prices all ``3T`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from numba import njit

from synergy_opt.ideal.hetero_model import HeteroIdealModel
from synergy_opt.ideal.lagrangian import Dual, Knapsack, row_lift


@dataclass(frozen=True, eq=False)
class TypedKnapsack:
    """Columns grouped by class (contiguous, in class order): value, type, GPU, CPU and memory use, class, count."""

    value: np.ndarray
    col_type: np.ndarray
    gpu: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    col_class: np.ndarray
    class_count: np.ndarray
    capacity: np.ndarray  # (3T,): GPUs, CPUs, GB of each type
    types: int

    @classmethod
    def of(cls, ideal: HeteroIdealModel, unit: float = 1.0) -> TypedKnapsack:
        """``ideal``'s columns, their values times ``unit`` (the core search's power of two)."""
        model = ideal.model
        offsets = np.concatenate([[0], np.cumsum(ideal.class_count)[:-1]]).astype(np.int64)
        class_gpus = ideal.instance.gpus[ideal.class_jobs[offsets]] if ideal.num_classes else np.zeros(0)
        gpus = class_gpus[ideal.col_class].astype(float)
        return cls(
            value=model.objective * unit, col_type=ideal.col_type, gpu=gpus, cpu=gpus * ideal.col_cpu,
            mem=gpus * ideal.col_mem, col_class=ideal.col_class, class_count=ideal.class_count.astype(float),
            capacity=model.row_upper[ideal.coupling_rows].astype(float), types=len(ideal.instance.cluster.types),
        )

    def lifted(self) -> TypedKnapsack:
        """The same knapsack with each row whose capacity is below 1 (or very large) counted in a unit a power of
        two smaller (larger) (:func:`~synergy_opt.ideal.lagrangian.row_lift`)."""
        lift = row_lift(self.capacity).reshape(3, self.types)
        return replace(self, gpu=self.gpu * lift[0, self.col_type], cpu=self.cpu * lift[1, self.col_type],
                       mem=self.mem * lift[2, self.col_type], capacity=self.capacity * lift.ravel())

    @cached_property
    def starts(self) -> np.ndarray:
        """First column of each class."""
        return np.flatnonzero(np.r_[True, self.col_class[1:] != self.col_class[:-1]])

    @cached_property
    def rows(self) -> np.ndarray:
        """``(3, columns)``: the row of each column's GPU, CPU and memory use."""
        return np.stack([self.col_type + r * self.types for r in range(3)])

    def priced(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every column's value net of its priced use, and each class's best such value (:func:`_priced`)."""
        return _priced(np.ascontiguousarray(lam, dtype=float), self.value, self.col_type, self.gpu, self.cpu,
                       self.mem, self.bounds, self.types)

    def use(self, share: np.ndarray) -> np.ndarray:
        """Each row's use by ``share`` (a count per column)."""
        used = np.flatnonzero(share)  # about one column per class: the sums over them only are 10x faster
        kinds, counts = self.col_type[used], share[used]
        return np.concatenate([np.bincount(kinds, weights=counts * use[used], minlength=self.types)
                               for use in (self.gpu, self.cpu, self.mem)])

    def positive_use(self) -> np.ndarray:
        return np.concatenate([use[use > 0] for use in (self.gpu, self.cpu, self.mem)])

    @cached_property
    def bounds(self) -> np.ndarray:
        """Each class's columns, ``[bounds[q], bounds[q + 1])``."""
        return np.append(self.starts, self.value.size).astype(np.int64)

    def dual_value(self, lam: np.ndarray) -> tuple[float, np.ndarray, float]:
        """:func:`~synergy_opt.ideal.lagrangian.dual_value` of this knapsack (which calls it): ``L(lam)``, use and
        value of an even mix of each class's best columns, in one compiled pass over the columns (numpy's took
        0.56 ms per evaluation on 36 thousand columns, about 100 per round, 0.06 ms this). Equal to numpy's
        formula up to the order of summation: the sums here run column by column, einsum's may group (``L`` and
        the value differ in the last bits; the use is the same)."""
        seg_bounds, seg_type, seg_gpu, class_segments = self.segments
        total, use, value = _dual_value(np.ascontiguousarray(lam, dtype=float), self.value, self.cpu, self.mem,
                                        seg_bounds, seg_type, seg_gpu, class_segments, self.class_count, self.types)
        return float(lam @ self.capacity + total), use, value

    @cached_property
    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Runs of columns of one class, type and GPU count (a class's columns are grouped by type): each run's
        bounds (``seg_bounds[s]:seg_bounds[s + 1]``), type and GPUs, and each class's runs
        (``class_segments[q]:class_segments[q + 1]``). The GPU price of a run is one product for all its columns."""
        col_class, col_type, gpu = self.col_class, self.col_type, self.gpu
        change = np.r_[True, (col_class[1:] != col_class[:-1]) | (col_type[1:] != col_type[:-1])
                       | (gpu[1:] != gpu[:-1])] if col_class.size else np.zeros(0, dtype=bool)
        starts = np.flatnonzero(change)
        seg_bounds = np.append(starts, col_class.size).astype(np.int64)
        class_segments = np.searchsorted(col_class[starts], np.arange(self.class_count.size + 1)).astype(np.int64)
        return seg_bounds, col_type[starts].astype(np.int64), gpu[starts].astype(float), class_segments

    def uses(self, columns: np.ndarray) -> np.ndarray:
        """``(len(columns), 3T)``: each column's use of every row."""
        out = np.zeros((columns.size, 3 * self.types))
        at = np.arange(columns.size)
        for r, use in enumerate((self.gpu, self.cpu, self.mem)):
            out[at, self.rows[r, columns]] = use[columns]
        return out

    def room(self, base: np.ndarray) -> np.ndarray:
        """Capacity left when every class takes its column ``base``."""
        counts = np.zeros(self.value.size)
        np.add.at(counts, base, self.class_count)
        return self.capacity - self.use(counts)

    def of_type(self, kind: int, classes: np.ndarray, columns: np.ndarray, dual: Dual, room: np.ndarray
                ) -> tuple[Knapsack, Dual]:
        """Type ``kind``'s homogeneous two-row knapsack (CPU, memory) of ``classes`` over ``columns`` (sorted, all
        on ``kind``, each class's base among them), priced as ``dual`` prices them, with ``room`` (CPUs, GB)
        left after every class's base; the homogeneous core search solves it."""
        local = np.searchsorted(classes, self.col_class[columns])
        base = np.searchsorted(columns, dual.base_columns[classes])
        counts = self.class_count[classes]
        capacity = room + np.array([counts @ self.cpu[columns[base]], counts @ self.mem[columns[base]]])
        knapsack = Knapsack(value=self.value[columns], cpu=self.cpu[columns], mem=self.mem[columns],
                            col_class=local, class_count=counts, capacity=capacity)
        lam = dual.multipliers
        priced = Dual(multipliers=np.array([lam[self.types + kind], lam[2 * self.types + kind]]), bound=dual.bound,
                      reduced_cost=dual.reduced_cost[columns], base_columns=base, iterations=dual.iterations)
        return knapsack, priced


@njit(cache=True, inline="always")
def _net(lam: np.ndarray, value: np.ndarray, col_type: np.ndarray, gpu: np.ndarray, cpu: np.ndarray,
         mem: np.ndarray, types: int, c: int) -> float:  # pragma: no cover - compiled
    """Column ``c``'s value net of its type's prices of its GPU, CPU and memory use (term by term, as numpy's
    ``value - p_g gpu - p_c cpu - p_m mem``)."""
    t = col_type[c]
    return value[c] - lam[t] * gpu[c] - lam[types + t] * cpu[c] - lam[2 * types + t] * mem[c]


@njit(cache=True)
def _priced(lam: np.ndarray, value: np.ndarray, col_type: np.ndarray, gpu: np.ndarray, cpu: np.ndarray,
            mem: np.ndarray, bounds: np.ndarray, types: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Every column's value net of its type's prices of its GPU, CPU and memory use (subtracted term by term, as
    numpy's ``value - p_g gpu - p_c cpu - p_m mem``), and each class's best (as ``np.maximum.reduceat``)."""
    priced = np.empty(value.size)
    best = np.empty(bounds.size - 1)
    for q in range(bounds.size - 1):
        if bounds[q] == bounds[q + 1]:  # a class without columns has no best (numpy's reduceat would have raised)
            raise ValueError("every class of a knapsack needs a column")
        most = -np.inf
        for c in range(bounds[q], bounds[q + 1]):
            priced[c] = _net(lam, value, col_type, gpu, cpu, mem, types, c)
            most = most if priced[c] <= most else priced[c]
        best[q] = most
    return priced, best


@njit(cache=True)
def _dual_value(lam: np.ndarray, value: np.ndarray, cpu: np.ndarray, mem: np.ndarray, seg_bounds: np.ndarray,
                seg_type: np.ndarray, seg_gpu: np.ndarray, class_segments: np.ndarray, class_count: np.ndarray,
                types: int) -> tuple[float, np.ndarray, float]:  # pragma: no cover - compiled
    """Per class its best priced value (as :func:`_priced` computes it: the GPU price's product is the same for
    a run of one type and GPU count, :attr:`TypedKnapsack.segments`, so it is taken once per run, the same
    values; a quarter less time than per column on 3 x 1024-GPU rounds) and its best columns, shared evenly: the
    sum over classes of count x best, the rows' use of the mix and its value. One pass keeps each class's first
    best column and how many tie with it; only a class with ties is read again (the priced values are not kept;
    a fifth less time than storing them and reading every class twice, on 3 x 1024-GPU rounds)."""
    use = np.zeros(3 * types)
    total = 0.0
    mixed = 0.0
    for q in range(class_segments.size - 1):
        if class_segments[q] == class_segments[q + 1]:  # a class without columns has no best
            raise ValueError("every class of a knapsack needs a column")
        most = -np.inf
        first, first_run, ties = -1, -1, 0
        for s in range(class_segments[q], class_segments[q + 1]):
            t = seg_type[s]
            gpu_price, cpu_price, mem_price = lam[t] * seg_gpu[s], lam[types + t], lam[2 * types + t]
            for c in range(seg_bounds[s], seg_bounds[s + 1]):
                priced = value[c] - gpu_price - cpu_price * cpu[c] - mem_price * mem[c]
                if priced > most:
                    most, first, first_run, ties = priced, c, s, 1
                elif priced == most:
                    ties += 1
        share = class_count[q] / ties
        for s in range(first_run, class_segments[q + 1] if ties > 1 else first_run + 1):
            t = seg_type[s]
            gpu_price, cpu_price, mem_price = lam[t] * seg_gpu[s], lam[types + t], lam[2 * types + t]
            for c in range(max(first, seg_bounds[s]), seg_bounds[s + 1] if ties > 1 else first + 1):
                if ties > 1 and value[c] - gpu_price - cpu_price * cpu[c] - mem_price * mem[c] < most:
                    continue
                use[t] += share * seg_gpu[s]
                use[types + t] += share * cpu[c]
                use[2 * types + t] += share * mem[c]
                mixed += share * value[c]
        total += class_count[q] * most
    return total, use, mixed
