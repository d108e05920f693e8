"""The ideal ILP seen as a two-row multiple-choice knapsack, and the Lagrangian dual of its two rows.

:func:`solve_dual` prices any number of coupling rows: it reads a knapsack through :class:`PricedKnapsack`, which
:class:`Knapsack` (CPU and memory) and the type-free model's
:class:`~synergy_opt.ideal.hetero_knapsack.TypedKnapsack` (GPU, CPU and memory of every type) both offer.

Pricing CPU and memory at multipliers ``lam = (lam_c, lam_m) >= 0`` gives, for every allocation ``y``,

    sum W y  =  L(lam) - sum rc y - lam . slack(y),      L(lam) = lam . cap + sum_j n_j max_k (W_jk - lam . u_jk)

with reduced costs ``rc_jk = max_k' (W_jk' - lam . u_jk') - (W_jk - lam . u_jk) >= 0``. So ``L(lam)`` bounds
the ILP from above for *any* ``lam``, and a solution's *penalty* ``L - sum W y`` is its reduced costs plus its
priced slack. At the minimising ``lam`` the bound equals the LP relaxation (the rows are the only coupling),
which is what :func:`solve_dual` finds: Kelley's cutting planes on the convex, piecewise-linear ``L``, whose
master LP (over the multipliers and theta, the estimate of ``L``) is solved by HiGHS. It ends exactly, because
``L`` has finitely many pieces (or when the master returns multipliers already evaluated: it can make no
progress at its own precision). :func:`dual_from_near` finds the same minimum from prices near it (a
neighbouring LP's) by one small LP instead, when that LP proves it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol

import numpy as np
from numba import njit

from synergy_opt.ideal.model import IdealModel
from synergy_opt.solvers.registry import row_unit_scale

# dual_from_near's columns: reduced cost at the prices at most this, relative to the largest value; at most this
# many LP solves. Measured from the type-free LP's prices on the 18 types of 3 x 1024-GPU development rounds:
# 1e-3 proved 17 (one LP's duals short of the proof by HiGHS's precision), 3e-3 all, 1.4-5.8 ms a type where
# the cutting planes took about 9.
NEAR_GAP = 3e-3
NEAR_ROUNDS = 3


class PricedKnapsack(Protocol):
    """What :func:`solve_dual` reads: columns grouped by class (contiguous, in class order) and the rows priced."""

    @property
    def value(self) -> np.ndarray: ...

    @property
    def col_class(self) -> np.ndarray: ...

    @property
    def class_count(self) -> np.ndarray: ...

    @property
    def capacity(self) -> np.ndarray: ...  # one entry per priced row

    @property
    def starts(self) -> np.ndarray: ...

    @property
    def bounds(self) -> np.ndarray: ...  # class q's columns: bounds[q]:bounds[q + 1]

    def priced(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def use(self, share: np.ndarray) -> np.ndarray: ...

    def positive_use(self) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class Knapsack:
    """Columns grouped by class (contiguous, in class order): value, CPU and memory use, class, count."""

    value: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    col_class: np.ndarray
    class_count: np.ndarray
    capacity: np.ndarray  # (CPUs, GB)

    @classmethod
    def of(cls, ideal: IdealModel, unit: float = 1.0) -> Knapsack:
        """``ideal``'s columns, their values times ``unit`` (the core search's power of two)."""
        model = ideal.model
        rows = [model.con_blocks[name].start for name in ("cpu", "mem")]
        usage = model.matrix[rows].toarray()
        return cls(
            value=model.objective * unit,
            cpu=usage[0],
            mem=usage[1],
            col_class=ideal.col_class,
            class_count=ideal.class_count.astype(float),
            capacity=model.row_upper[rows].astype(float),
        )

    @cached_property
    def usage(self) -> np.ndarray:
        """CPU and memory use stacked, (2, columns)."""
        return np.stack((self.cpu, self.mem))

    @cached_property
    def starts(self) -> np.ndarray:
        """First column of each class."""
        return np.flatnonzero(np.r_[True, self.col_class[1:] != self.col_class[:-1]])

    @cached_property
    def bounds(self) -> np.ndarray:
        """Class ``q``'s columns are ``bounds[q]:bounds[q + 1]``."""
        return np.r_[self.starts, self.value.size]

    def restricted(self, keep: np.ndarray) -> Knapsack:
        """The knapsack of the columns ``keep`` (a mask) only; every class must keep one."""
        return replace(self, value=self.value[keep], cpu=self.cpu[keep], mem=self.mem[keep],
                       col_class=self.col_class[keep])

    def lifted(self) -> Knapsack:
        """The same knapsack with each row whose capacity is below 1 (or very large) counted in a unit a power of
        two smaller (larger) (:func:`row_lift`)."""
        cpu_lift, mem_lift = row_lift(self.capacity)
        return replace(self, cpu=self.cpu * cpu_lift, mem=self.mem * mem_lift,
                       capacity=self.capacity * np.array([cpu_lift, mem_lift]))

    def without_row(self, row: int) -> Knapsack:
        """The relaxation that drops CPU (``row`` 0) or memory (1); prices still count that row's use."""
        usage = {"cpu": self.cpu, "mem": self.mem}
        usage[("cpu", "mem")[row]] = np.zeros_like(self.cpu)
        capacity = self.capacity.copy()
        capacity[row] = 0.0
        return replace(self, **usage, capacity=capacity)

    def priced(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every column's value net of its priced use, and each class's best such value."""
        return _priced(self.value, self.cpu, self.mem, float(lam[0]), float(lam[1]), self.bounds)

    def use(self, share: np.ndarray) -> np.ndarray:
        """CPU and memory used by ``share`` (a count per column)."""
        # einsum, not @: a BLAS dot of this length may wake BLAS threads, which costs milliseconds per call on a
        # shared machine (measured: 40-80 ms per evaluation at 4096 GPUs under load, 0.1 ms with einsum).
        return np.einsum("k,rk->r", share, self.usage)

    def positive_use(self) -> np.ndarray:
        """Every positive use of a row by a column."""
        return np.concatenate([self.cpu[self.cpu > 0], self.mem[self.mem > 0]])


def row_lift(capacity: np.ndarray) -> np.ndarray:
    """Per row, the power of two that brings a capacity in (0, 1), or of at least ``LARGE_ROW``, to [1, 2) (1 for
    the others): the core searches compare uses with slacks of at least 1e-9 (``row_tolerance``: relative only
    from a capacity of 1 up), so a row of 5e-7 CPUs read a tenth of a grid step as a tie (a helper's rounds in CPUs
    of 2^-24: one called INFEASIBLE, one OPTIMAL 0.8% below the optimum); and Kelley's master holds prices to
    HiGHS's tolerances, so memory in bytes (8e10) priced it near 1e-11 and the core search ended OPTIMAL 0.3%
    below the optimum with a bound of 0. A power of two changes no comparison but those slacks."""
    return row_unit_scale(np.asarray(capacity, dtype=float))


@njit(cache=True)
def _priced(value: np.ndarray, cpu: np.ndarray, mem: np.ndarray, cpu_price: float, mem_price: float,
            bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:meth:`Knapsack.priced` in one compiled pass (the operations of ``value - p_c cpu - p_m mem`` and of
    ``np.maximum.reduceat``, so the same values; a third of each Kelley iteration's evaluation before)."""
    priced = np.empty(value.size)
    best = np.empty(bounds.size - 1)
    for q in range(bounds.size - 1):
        most = -np.inf
        for k in range(bounds[q], bounds[q + 1]):
            priced[k] = value[k] - cpu_price * cpu[k] - mem_price * mem[k]
            most = most if priced[k] <= most else priced[k]
        best[q] = most
    return priced, best


@njit(cache=True)
def _even_share(priced: np.ndarray, best: np.ndarray, bounds: np.ndarray, class_count: np.ndarray
                ) -> np.ndarray:  # pragma: no cover - compiled
    """Per column, its class's count shared evenly among the class's best columns (0 elsewhere): numpy's
    ``(count / ties)[class] * is_best`` in one compiled pass, the same values."""
    share = np.zeros(priced.size)
    for q in range(bounds.size - 1):
        ties = 0.0
        for k in range(bounds[q], bounds[q + 1]):
            ties += 1.0 if priced[k] >= best[q] else 0.0
        for k in range(bounds[q], bounds[q + 1]):
            if priced[k] >= best[q]:
                share[k] = class_count[q] / ties
    return share


@dataclass(frozen=True, eq=False)
class Dual:
    """Multipliers, the bound ``L(lam)`` they give, the reduced cost of every column, and per class its
    first column of zero reduced cost (a best column at these prices: the one the searches change from)."""

    multipliers: np.ndarray
    bound: float
    reduced_cost: np.ndarray
    base_columns: np.ndarray
    iterations: int


def dual_value(knapsack: PricedKnapsack, lam: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``L(lam)``, and the use and value of an even mix of each class's best columns (a subgradient's data); a
    knapsack with a ``dual_value`` method of its own (a compiled one) is read through it."""
    own = getattr(knapsack, "dual_value", None)
    if own is not None:
        result: tuple[float, np.ndarray, float] = own(lam)
        return result
    priced, best = knapsack.priced(lam)
    # Any mix of best columns gives a subgradient; an even mix needs no tie-breaking.
    share = _even_share(priced, best, knapsack.bounds, knapsack.class_count)
    use = knapsack.use(share)
    value = float(np.einsum("k,k->", share, knapsack.value))
    return float(lam @ knapsack.capacity + np.einsum("q,q->", knapsack.class_count, best)), use, value


def solve_dual(
    knapsack: PricedKnapsack,
    tolerance: float = 1e-12,
    max_iterations: int = 500,
    start: np.ndarray | None = None,
    decide: float | None = None,
    smoothing: float = 0.0,
) -> Dual:
    """Minimise ``L`` over ``lam >= 0`` by Kelley's cutting planes (see the module docstring).

    Parameters
    ----------
    smoothing
        Evaluate ``smoothing * best + (1 - smoothing) *`` the master's minimiser instead of the minimiser itself
        (Wentges' stabilisation; when the cut made there does not cut the minimiser off, the minimiser itself
        next, so that the method still ends). Measured on the type-free model's nine rows: about 40% fewer
        cuts at 0.5. 0 is plain Kelley.
    start
        The first multipliers to evaluate (default zero).
    decide
        Stop as soon as it is known on which side of ``decide`` the minimum lies: when some ``L(lam) <=
        decide`` (then ``bound`` is that value) or when the master's lower bound on the minimum exceeds it
        (then ``bound > decide``). ``bound`` is always ``L`` at the returned multipliers, a valid upper bound.
    """
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import quiet_highs  # highspy on first use (no solver library at import)

    rows = knapsack.capacity.size
    master = quiet_highs()
    # Dual simplex from the last basis, without presolve: a cut is one row more, and presolving a three-column
    # LP costs more than solving it (the same iterates on every round measured, 16% less time).
    # One thread, set once: with HiGHS's default (0) each run counts the machine's cores once more, from sysfs
    # files (replaying the cuts of 3 x 1024-GPU rounds: a fifth less time a master solve, the same iterates).
    for option, setting in (("presolve", "off"), ("solver", "simplex"), ("simplex_strategy", 1), ("threads", 1)):
        master.setOptionValue(option, setting)
    highspy.Highs.resetGlobalScheduler(True)  # a pool of another size would refuse the option (solvers/highs.run)
    inf = highspy.kHighsInf
    # The master is bounded from the first cut on only inside a box; prices beyond it are never optimal
    # (a price above the largest value per unit of use makes every column worse than using nothing more).
    positive = np.concatenate([knapsack.positive_use(), [1.0]])
    box = 1e3 * (1.0 + np.abs(knapsack.value).max(initial=0.0)) / positive.min()
    # Variables: the multipliers, then theta (the master's estimate of L).
    columns = np.arange(rows + 1, dtype=np.int32)
    master.addVars(rows + 1, np.r_[np.zeros(rows), -inf], np.r_[np.full(rows, box), inf])
    master.changeColsCost(rows + 1, columns, np.r_[np.zeros(rows), 1.0])
    lam = np.zeros(rows) if start is None else np.maximum(np.asarray(start, dtype=float), 0.0)
    best_lam, best_bound = lam, np.inf
    target: np.ndarray | None = None  # the master's minimiser when the multipliers evaluated were smoothed
    theta = 0.0
    iteration = 0
    evaluated: set[bytes] = set()  # the multipliers evaluated (their cuts are in the master)
    cut = np.ones(rows + 1)  # a cut's coefficients, -slope then theta's 1 (addRow copies them)
    while iteration < max_iterations:
        iteration += 1
        evaluated.add(lam.tobytes())
        bound, use, value = dual_value(knapsack, lam)
        if bound < best_bound:
            best_lam, best_bound = lam, bound
        # L(mu) >= value + mu . (capacity - use) for every mu: a cut  theta - (capacity - use) . mu >= value.
        slope = knapsack.capacity - use
        # Did the cut made at smoothed multipliers cut the last minimiser off (theta below the cut there)?
        separated = target is None or value + slope @ target > theta + 1e-12 * max(1.0, abs(theta))
        np.negative(slope, out=cut[:rows])
        master.addRow(value, inf, rows + 1, columns, cut)
        if separated:
            master.run()
            solution = np.array(master.getSolution().col_value)
        # Else the cut keeps the master's minimiser (target, theta) feasible, hence its minimiser: not solved again.
        if best_bound - solution[rows] <= tolerance * max(1.0, abs(best_bound)):
            break
        if decide is not None and (best_bound <= decide or solution[rows] > decide):
            break
        lam = np.maximum(solution[:rows], 0.0)
        if smoothing and separated:
            smoothed = smoothing * best_lam + (1.0 - smoothing) * lam
            if smoothed.tobytes() not in evaluated:
                target, theta = lam, float(solution[rows])
                lam = smoothed
            else:  # its cut is in the master already: the minimiser itself
                target = None
        else:
            target = None
        # The master's minimiser evaluated before: its cut is in the master already, which would return it again
        # (Kelley stalls there, at the master LP's precision: measured 475 repeats of one point on a 1024-GPU type).
        if lam.tobytes() in evaluated:
            break
    return _dual_at(knapsack, best_lam, best_bound, iteration)


def _dual_at(knapsack: PricedKnapsack, lam: np.ndarray, bound: float, iterations: int) -> Dual:
    """The :class:`Dual` of multipliers ``lam``, whose ``L`` is ``bound``."""
    priced, best = knapsack.priced(lam)
    reduced_cost = np.maximum(best[knapsack.col_class] - priced, 0.0)
    zero = np.where(reduced_cost <= 0, np.arange(reduced_cost.size), reduced_cost.size)
    base_columns = np.minimum.reduceat(zero, knapsack.starts)
    return Dual(lam, bound, reduced_cost, base_columns, iterations)


def dual_from_near(knapsack: Knapsack, near: np.ndarray, gap: float = NEAR_GAP, rounds: int = NEAR_ROUNDS,
                   tolerance: float = 1e-12) -> Dual | None:
    """The minimum of ``L`` from multipliers ``near`` it (a neighbouring LP's: the type-free LP's prices of one
    type, whose LP differs by the few jobs split between types), without cutting planes; None when not proven.

    The LP over the columns within ``gap`` (relative to the largest value) of their class's best at ``near``
    (HiGHS's dual simplex, two coupling rows and one per class) is solved; its row duals minimise ``L`` when
    ``L`` there is within ``tolerance`` (relative, :func:`solve_dual`'s test) of its value, which the whole
    LP's optimum lies between (weak duality). Otherwise the columns within ``gap`` at those duals join, for
    at most ``rounds`` solves."""
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import quiet_highs, run  # highspy on first use

    n = knapsack.class_count.size
    lp = quiet_highs()
    lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
    lp.setOptionValue("solver", "simplex")
    lp.addRows(n + 2, np.r_[knapsack.class_count, -highspy.kHighsInf, -highspy.kHighsInf],
               np.r_[knapsack.class_count, knapsack.capacity], 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
               np.zeros(0))
    taken = np.zeros(knapsack.value.size, dtype=bool)
    lam = np.maximum(np.asarray(near, dtype=float), 0.0)
    for _ in range(rounds):
        cols = np.flatnonzero(_near_columns(knapsack, lam, gap) & ~taken)  # at first, each class's best
        if not cols.size:
            return None
        taken[cols] = True
        # Column by column: its class's row, the CPU row, the memory row.
        rows = np.column_stack([knapsack.col_class[cols], np.full(cols.size, n), np.full(cols.size, n + 1)])
        data = np.column_stack([np.ones(cols.size), knapsack.cpu[cols], knapsack.mem[cols]]).ravel()
        lp.addCols(cols.size, knapsack.value[cols], np.zeros(cols.size), np.full(cols.size, highspy.kHighsInf),
                   data.size, np.arange(0, data.size, 3, dtype=np.int32), rows.ravel().astype(np.int32), data)
        run(lp, 1)
        if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        lam = np.maximum(np.array(lp.getSolution().row_dual)[n:], 0.0)
        bound = dual_value(knapsack, lam)[0]
        if bound - lp.getInfo().objective_function_value <= tolerance * max(1.0, abs(bound)):
            return _dual_at(knapsack, lam, bound, 0)
    return None


def _near_columns(knapsack: Knapsack, lam: np.ndarray, gap: float) -> np.ndarray:
    """Per column, whether its priced value at ``lam`` is within ``gap`` (relative to the largest value) of
    its class's best."""
    priced, best = knapsack.priced(lam)
    return best[knapsack.col_class] - priced <= gap * float(np.abs(knapsack.value).max(initial=0.0))
