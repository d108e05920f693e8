"""Ideal-allocation ILP (paper section 4.1.1, eqs. 1-7; SPEC 2.1), built once, vectorised.

One super-machine with all ``C = s * C_i`` CPUs and ``M = s * M_i`` GB. Variable block ``y``: one column per
(job class, per-GPU config ``k = (c_k, m_k)``), integer in ``[0, |class|]`` (binary when the class is one job).

    (1) max   sum_j sum_k w_j W_j[k] y[j,k]            w_j = 1 (per job) or g_j (GPU-weighted)
    (2)       sum_j sum_k g_j c_k y[j,k] <= C            block "cpu"        build_ideal / _coupling_rows
    (3)       sum_j sum_k g_j m_k y[j,k] <= M            block "mem"        build_ideal / _coupling_rows
    (4)       sum_k y[j,k] = |class j|                   block "assign"     build_ideal
    (5)       sum_k W_j[k] y[j,k] >= floor_j             block "floor", or configs below the floor removed
    (6,7)     c*_j = g_j c_k, m*_j = g_j m_k             decoded by IdealModel.decode

Exact reductions (each switchable, see :class:`Reductions`): configs below the floor are removed (replacing
(5)); dominated configs (another with <= CPU, <= memory and >= W) are removed; jobs with identical
``(g_j, W_j)`` become one class with an integer count.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal

import numpy as np
from numba import njit

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import RoundInstance, grid_index, on_grid
from synergy_opt.io import round_instance
from synergy_opt.profile import share_for_hairs
from synergy_opt.profile_groups import ProfileGroup
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.validation import InstanceOf, OneOf, Optional, boolean, checked

Objective = Literal["job", "gpu"]
OBJECTIVES: tuple[Objective, ...] = ("job", "gpu")
OBJECTIVE = OneOf(OBJECTIVES)


@dataclass(frozen=True)
class Reductions:
    """Exact reductions of the ideal ILP; each is tested against the unreduced model."""

    fix_below_floor: bool = True
    drop_dominated: bool = True
    merge_identical: bool = True

    def __post_init__(self) -> None:
        for name in ("fix_below_floor", "drop_dominated", "merge_identical"):
            boolean(f"reductions.{name}", getattr(self, name))
        # A merged class has one assignment row, so a per-job floor row cannot be stated for it.
        if self.merge_identical and not self.fix_below_floor:
            raise InvalidInputError(
                "reductions.merge_identical", True, "merging identical jobs needs fix_below_floor=True"
            )

    @classmethod
    def none(cls) -> Reductions:
        return cls(fix_below_floor=False, drop_dominated=False, merge_identical=False)


@dataclass(frozen=True)
class JobConfig:
    """The per-GPU config chosen for one job, and the totals ``c*_j = g_j c_k``, ``m*_j = g_j m_k``."""

    job_id: str
    gpus: int
    cpu_per_gpu: float
    mem_gb_per_gpu: float
    throughput: float
    floor: float
    # On a heterogeneous round: the GPU type the job takes (its config is on that type's matrix).
    gpu_type: str | None = None

    @property
    def cpus(self) -> float:
        return self.gpus * self.cpu_per_gpu

    @property
    def mem_gb(self) -> float:
        return self.gpus * self.mem_gb_per_gpu


def check_core_solver(solver: str, default: str) -> None:
    """The core method runs on ``default`` (HiGHS: its prices and searches); another solver is refused by name
    (it ran HiGHS whatever was asked)."""
    if solver != default:
        raise InvalidInputError("solver", solver, f"the core method runs on {default} (its prices and searches); "
                                "another solver takes the whole model: method='direct'")


def configs_frame(configs: Iterable[JobConfig], typed: bool = False) -> Any:
    """The configs, one row per job (a pandas ``DataFrame`` indexed by job id): ``gpus`` (and ``gpu_type`` when
    ``typed``: a heterogeneous round's), ``cpu_per_gpu``, ``mem_gb_per_gpu``, ``cpus``, ``mem_gb``, ``throughput``,
    ``floor``."""
    import pandas as pd  # pandas only when asked for: `import synergy_opt` stays light

    chosen = list(configs)
    columns = ["job", "gpus", *(["gpu_type"] if typed else []), "cpu_per_gpu", "mem_gb_per_gpu", "cpus", "mem_gb",
               "throughput", "floor"]
    rows = [{"job": c.job_id, "gpus": c.gpus, "gpu_type": c.gpu_type, "cpu_per_gpu": c.cpu_per_gpu,
             "mem_gb_per_gpu": c.mem_gb_per_gpu, "cpus": c.cpus, "mem_gb": c.mem_gb, "throughput": c.throughput,
             "floor": c.floor} for c in chosen]
    return pd.DataFrame(rows, columns=columns).set_index("job")


@dataclass(frozen=True, eq=False)
class IdealModel:
    """The built ILP plus what is needed to read a solution back as per-job configs."""

    model: LinearModel
    instance: RoundInstance
    objective_kind: Objective
    reductions: Reductions
    col_class: np.ndarray  # class of each y column
    col_cpu: np.ndarray  # per-GPU CPUs of each column's config
    col_mem: np.ndarray  # per-GPU GB of each column's config
    col_tput: np.ndarray  # W of each column's config
    class_count: np.ndarray  # jobs per class
    class_jobs: np.ndarray  # job indices, grouped by class in class order
    build_seconds: float

    @property
    def num_classes(self) -> int:
        return int(self.class_count.size)

    def decode(self, y: np.ndarray) -> np.ndarray:
        """Column chosen for each job (job order) from an integral ``y``."""
        return columns_of_jobs(y, self.class_jobs)

    def fractional_classes(self, y: np.ndarray, tolerance: float = 1e-6) -> np.ndarray:
        """Classes with a non-integral value in any of their columns (for LP relaxations)."""
        fractional = np.abs(y - np.rint(y)) > tolerance
        return np.unique(self.col_class[fractional])

    @cached_property
    def class_offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.class_count)])


def columns_of_jobs(y: np.ndarray, class_jobs: np.ndarray) -> np.ndarray:
    """Column of each job (job order) from integral class counts ``y`` whose columns are ordered by class.

    Jobs of a class are interchangeable, so the class's jobs (``class_jobs``, grouped by class in class order)
    take its columns in turn, as many of each as the column's count.
    """
    counts = np.rint(y).astype(np.int64)
    slots = np.repeat(np.arange(counts.size), np.maximum(counts, 0))
    if slots.size != class_jobs.size:
        raise InvalidInputError("y", int(slots.size), f"integral y must assign {class_jobs.size} jobs")
    chosen = np.empty(class_jobs.size, dtype=np.int64)
    chosen[class_jobs] = slots
    return chosen


@checked(instance=round_instance, objective=OBJECTIVE, reductions=Optional(InstanceOf(Reductions)))
def build_ideal(
    instance: RoundInstance,
    *,
    objective: Objective = "job",
    reductions: Reductions | None = None,
) -> IdealModel:
    """Build the ideal-allocation ILP of ``instance`` (see the module docstring for the equations)."""
    start = time.perf_counter()
    reductions = reductions or Reductions()
    cluster = instance.cluster
    pieces = [group_columns(instance, group, reductions) for group in instance.profile_groups]
    # Classes are numbered across groups in the order the groups come.
    class_base = np.cumsum([0] + [p.class_count.size for p in pieces])
    pieces = [replace(p, col_class=p.col_class + base) for p, base in zip(pieces, class_base, strict=False)]

    def joined(name: str, dtype: type) -> np.ndarray:  # a round with no jobs has no pieces
        return np.concatenate([getattr(p, name) for p in pieces]) if pieces else np.zeros(0, dtype=dtype)

    col_class, class_count, class_gpus, class_jobs = (
        joined(name, np.int64) for name in ("col_class", "class_count", "class_gpus", "class_jobs")
    )
    col_cpu, col_mem, col_tput = (joined(name, float) for name in ("col_cpu", "col_mem", "col_tput"))
    held = fits_alone(class_gpus[col_class], col_cpu, col_mem, cluster.total_cpus, cluster.total_mem_gb)
    col_class, col_cpu, col_mem, col_tput = (a[held] for a in (col_class, col_cpu, col_mem, col_tput))
    col_gpus = class_gpus[col_class]

    builder = ModelBuilder("ideal_allocation", "max")
    weight = col_tput * (col_gpus if objective == "gpu" else 1.0)
    y = builder.add_vars(
        "y", col_class.size, lower=0.0, upper=class_count[col_class].astype(float), integer=True, objective=weight
    )
    columns = np.arange(y.start, y.stop)
    builder.add_rows("assign", col_class, columns, np.ones(col_class.size), lower=class_count, upper=class_count,
                     count=class_count.size)
    zeros = np.zeros(col_class.size, dtype=np.int64)
    builder.add_rows("cpu", zeros, columns, col_gpus * col_cpu, upper=cluster.total_cpus, count=1)
    builder.add_rows("mem", zeros, columns, col_gpus * col_mem, upper=cluster.total_mem_gb, count=1)
    if not reductions.fix_below_floor:
        floors = joined("class_floor", float)
        builder.add_rows("floor", col_class, columns, col_tput, lower=floors, count=class_count.size, equilibrate=True)
    model = builder.build()
    return IdealModel(
        model=model,
        instance=instance,
        objective_kind=objective,
        reductions=reductions,
        col_class=col_class,
        col_cpu=col_cpu,
        col_mem=col_mem,
        col_tput=col_tput,
        class_count=class_count,
        class_jobs=class_jobs,
        build_seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class _Columns:
    col_class: np.ndarray
    col_cpu: np.ndarray
    col_mem: np.ndarray
    col_tput: np.ndarray
    class_count: np.ndarray
    class_gpus: np.ndarray
    class_floor: np.ndarray
    class_jobs: np.ndarray


def group_columns(instance: RoundInstance, group: ProfileGroup, reductions: Reductions) -> _Columns:
    """The columns of one group of jobs sharing profile axes; jobs work on their distinct matrices only."""
    cluster = instance.cluster
    gpus = instance.gpus
    jobs, job_matrix, tput = group.jobs, group.row, group.tput  # tput: (distinct, A, B)
    cpu, mem = group.cpu_axis, group.mem_axis
    # Put the proportional point on the grid; new rows/columns read the grid below them (never over-claim).
    cpu, tput, a_p = _with_axis_value(cpu, tput, cluster.cpu_per_gpu, axis=1)
    mem, tput, b_p = _with_axis_value(mem, tput, cluster.mem_gb_per_gpu, axis=2)
    floor = tput[:, a_p, b_p]
    cpu, mem, tput = with_zero_config(cpu, mem, tput, floor)
    keep = offered(cpu, mem, floor)
    if reductions.fix_below_floor:
        keep &= tput >= floor[:, None, None]
    if reductions.drop_dominated:
        keep &= ~_dominated(tput)

    if reductions.merge_identical:
        # Equal matrices held by different objects are merged too.
        same_matrix = row_labels(tput.reshape(len(tput), -1))
        # Classes by (GPUs, matrix), in that order: one integer key (labels are below len(tput)).
        key = gpus[jobs] * len(tput) + same_matrix[job_matrix]
        _, first, inverse, count = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
        class_jobs = jobs[np.argsort(inverse.ravel(), kind="stable")]
        representatives = first
    else:
        count = np.ones(len(jobs), dtype=np.int64)
        class_jobs = jobs
        representatives = np.arange(len(jobs))
    class_matrix = job_matrix[representatives]

    klass, a, b = np.nonzero(keep[class_matrix])
    return _Columns(
        col_class=klass,
        col_cpu=cpu[a],
        col_mem=mem[b],
        col_tput=tput[class_matrix[klass], a, b],
        class_count=count.astype(np.int64),
        class_gpus=gpus[jobs[representatives]],
        class_floor=floor[class_matrix],
        class_jobs=class_jobs,
    )


def fits_alone(gpus: np.ndarray, cpu: np.ndarray, mem: np.ndarray, total_cpus: float, total_mem_gb: float
               ) -> np.ndarray:
    """Which columns (a job's GPUs, per-GPU CPUs and GB) fit the cluster's (or a type's) CPUs and memory by
    themselves. A column that does not is in no feasible solution (rows 2-3 with every other use >= 0), so the
    builders never make it, whatever the reductions: as a coefficient it only hurt (a grid point of 1e15 or
    1e20 CPUs, which the input rules accept, made HiGHS call 2.5 OPTIMAL on a round whose optimum is 1.6 and SCIP
    raise). A job's share column always fits (its GPUs fit). The slack only keeps a column that fills the
    cluster exactly but for rounding."""
    slack = 1.0 + 1e-9
    return (gpus * cpu <= total_cpus * slack) & (gpus * mem <= total_mem_gb * slack)


def config_columns(group: ProfileGroup, cpu_per_gpu: float, mem_gb_per_gpu: float, floors: np.ndarray,
                   reductions: Reductions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The configs of each member of ``group`` on servers of proportional share ``(cpu_per_gpu, mem_gb_per_gpu)``
    whose floors are ``floors`` (one per member, not necessarily that share's throughput): the share put on
    the grid, configs below the floor and dominated ones removed as ``reductions`` say.

    Returns ``(member, cpu, mem, tput)`` per column: the member's position in ``group.jobs``, the config's
    per-GPU CPUs and GB, and its throughput. The heterogeneous builder's columns of one type.
    """
    cpu, tput, _ = _with_axis_value(group.cpu_axis, group.tput, cpu_per_gpu, axis=1)
    mem, tput, _ = _with_axis_value(group.mem_axis, tput, mem_gb_per_gpu, axis=2)
    floors = np.asarray(floors, dtype=float)
    cpu, mem, tput = with_zero_config(cpu, mem, tput, floors)
    keep = (~_dominated(tput) if reductions.drop_dominated else np.ones(tput.shape, dtype=bool))[group.row]
    keep &= offered(cpu, mem, floors)
    if reductions.fix_below_floor:
        keep &= tput[group.row] >= floors[:, None, None]
    member, a, b = np.nonzero(keep)
    return member, cpu[a], mem[b], tput[group.row[member], a, b]


def row_labels(rows: np.ndarray) -> np.ndarray:
    """Each row's rank among the distinct rows in lexicographic order: ``np.unique(rows, axis=0,
    return_inverse=True)``'s labels, without its sort of whole rows when the first column already tells every row
    apart (noisy profiles: 2 ms saved at 1024 jobs)."""
    first = rows[:, 0] if rows.shape[1] else np.zeros(len(rows))
    order = np.argsort(first, kind="stable")
    if rows.shape[1] and np.all(first[order][1:] > first[order][:-1]):
        labels = np.empty(len(rows), dtype=np.int64)
        labels[order] = np.arange(len(rows))
        return labels
    return np.unique(rows, axis=0, return_inverse=True)[1].ravel()


def with_zero_config(cpu: np.ndarray, mem: np.ndarray, tput: np.ndarray, floors: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The axes and matrices with no CPUs and no memory put on the grid (throughput 0 there) when some job's
    floor is 0 (its grid starts above its share, or is 0 there): an allocation may starve such a job, its floor
    kept, and give its CPUs and memory to others (greedy and tetris do), so the models offer that config, or
    they would not bound it (SPEC 4). Left as they are otherwise: the config is below every positive floor."""
    if not (floors <= 0).any():
        return cpu, mem, tput
    cpu, tput, _ = _with_axis_value(cpu, tput, 0.0, axis=1)
    mem, tput, _ = _with_axis_value(mem, tput, 0.0, axis=2)
    return cpu, mem, tput


def offered(cpu: np.ndarray, mem: np.ndarray, floors: np.ndarray) -> np.ndarray:
    """Per job (``floors``' order) and config, whether its model offers it: every grid config, and those of no
    CPUs or no memory (``with_zero_config``'s; a grid's own values are > 0) to jobs of floor 0 only. Jobs whose
    axes are shared with such a job get them too, worth 0: below a positive floor, but an LP without
    ``fix_below_floor`` could mix them into its floor row, a looser bound."""
    added = (cpu == 0)[:, None] | (mem == 0)[None, :]
    return ~added[None] | (np.asarray(floors) <= 0)[:, None, None]


def _with_axis_value(
    axis_values: np.ndarray, tput: np.ndarray, value: float, axis: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Put ``value`` on one axis of a stack of matrices, and say where it is.

    Read as :meth:`Profile.throughput` reads it (``grid_index``): a value within tolerance of a grid value is
    that grid value; otherwise a slice is inserted that copies the slice below it (0 below the grid). A grid
    value a hair above ``value`` (within the tolerance) is moved down to it (``share_for_hairs``: the proportional
    share, which always fits, asked at the hair more would not fit the capacity rows).
    """
    if on_grid(axis_values, value):
        return share_for_hairs(axis_values, value), tput, int(grid_index(axis_values, value))
    at = int(grid_index(axis_values, value)) + 1
    below = np.take(tput, [at - 1], axis=axis) if at > 0 else np.zeros_like(np.take(tput, [0], axis=axis))
    stacked = np.concatenate(
        [np.take(tput, range(at), axis=axis), below, np.take(tput, range(at, tput.shape[axis]), axis=axis)],
        axis=axis,
    )
    return np.insert(axis_values, at, value), stacked, at


def _dominated(tput: np.ndarray) -> np.ndarray:
    """``dominated[j, a, b]``: some other config with <= CPU and <= memory has W >= ``tput[j, a, b]``.

    The best W over the lower-left quadrant excluding the point itself is the larger of the inclusive
    running maxima one step left and one step down; ties keep the cheaper config.
    """
    return _dominated_compiled(np.ascontiguousarray(tput, dtype=float))


@njit(cache=True)
def _larger(x: float, y: float) -> float:  # pragma: no cover - compiled
    """``np.maximum(x, y)``: the larger, NaN when either is."""
    return x if (x >= y or x != x) else y


@njit(cache=True)
def _dominated_compiled(tput: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`_dominated` in one compiled pass per matrix (the running maxima along both axes, one slice at a
    time in numpy, were about 8 ms of a 3 x 1024-GPU heterogeneous round; max is exact, so the same values)."""
    jobs, cpus, mems = tput.shape
    dominated = np.empty(tput.shape, dtype=np.bool_)
    running = np.empty((cpus, mems))  # the inclusive running maximum of the current matrix
    for j in range(jobs):
        for a in range(cpus):
            for b in range(mems):
                other = -np.inf
                if a > 0:
                    other = running[a - 1, b]
                if b > 0:
                    other = _larger(other, running[a, b - 1])
                value = tput[j, a, b]
                dominated[j, a, b] = value <= other
                running[a, b] = _larger(running[a - 1, b], value) if a > 0 else value
                if b > 0:
                    running[a, b] = _larger(running[a, b], running[a, b - 1])
    return dominated
