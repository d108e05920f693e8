"""near-opt never returns less than Synergy-TUNE on the same round; these bounds often prove it without TUNE.

**What TUNE can give a job.** TUNE (:mod:`~synergy_opt.mechanisms.tune`) places every job at its best-case
demand ``d_j`` (:mod:`~synergy_opt.mechanisms.demand`) or at the proportional point ``(c_p, m_p)``
(:mod:`~synergy_opt.packing.place`); afterwards only demotion (:mod:`~synergy_opt.packing.demotion`)
changes a job's config, and only for a job above proportional: it either switches it to ``(c_p, m_p)`` or
*lowers* it to a grid config at most its current one in both resources, with ``W`` at least its floor. So at
the end each job is at ``d_j`` (throughput ``W_j(d_j)``), at ``(c_p, m_p)`` (its floor), or, if it was ever
lowered, at a grid config ``c <= d_j``. A job whose ``d_j`` is at most proportional is never demoted: it ends
at ``d_j``.

**Bound 1, the restricted LP** (any round). A config at most ``d_j`` is one of the ideal ILP's columns, or is
dominated by one (no more of either resource, no less throughput), itself at most ``d_j``. So TUNE's total is
at most the LP over, per job, its columns at most ``d_j`` and, if ``d_j`` is above proportional, one column more:
``(c_p, m_p)`` worth its floor. The Lagrangian dual function of that LP at *any* prices bounds it (weak
duality): ``L(lam) = lam . cap + sum_j max_{allowed c} (W_j(c) - lam . use_j(c))``. (Allowing every column at
most proportional instead, as a first version did, is looser: on noisy multi-GPU 1024-GPU rounds it left TUNE to
run on 4 rounds of 10, this on 1.)

**Placeable configs only** (both bounds). TUNE places every job of a round whose GPUs exist, so at most the
round's idle GPUs of a server are free and each of its configs runs beside its server's other jobs: it is
*placeable* (:func:`~synergy_opt.mechanisms.configs.placeable`). Columns and demands that are not are left
out of both bounds (on 4-GPU servers of 12 CPUs no GPU has more than 9 CPUs: the bound on multi-GPU 1024-GPU
rounds fell from 1-3% above near-opt to below it, so TUNE no longer runs there).

**Bound 2, the staged bound** (rounds whose jobs all have one GPU). The same Lagrangian argument with each
job's own set: ``two_j = max(W_j(d_j) - lam . use_j(d_j), floor_j - lam . use_j(c_p, m_p))`` for a job that
ends at ``d_j`` or ``(c_p, m_p)``, and ``low_j = max_{columns c <= d_j} (W_j(c) - lam . use_j(c))`` for one
that ends lowered. With at most ``K`` jobs lowered,

    TUNE's total  <=  lam . cap + sum_j two_j + (sum of the K largest max(low_j - two_j, 0))

(a job at most proportional contributes ``W_j(d_j) - lam . use_j(d_j)`` and nothing to the sum). Why ``K = S +
R`` lowered jobs at most, for ``S`` servers and ``R`` distinct best-case demands, when every job has one GPU:

- A job ends lowered only if some demotion lowered it (a later switch to ``(c_p, m_p)`` undoes it), and each
  lowering is made while room is being made on one server for a batch of jobs (``make_room``).
- Making room on a server is a loop: while the server is short of CPUs or memory, demotion either switches a
  job to ``(c_p, m_p)`` or lowers one job just enough to cover *all* of the shortfall, which ends the loop.
  So each loop lowers at most one job. (Covering is exact up to the 1e-9 relative slack of ``demotion._bound``
  and float rounding; the slack leaves at most ``1e-9`` times the server's capacity short, which is the loop's
  own tolerance, and rounding cannot push it over while every grid value and every gap between grid values is
  at least ``2e-5`` of a server's capacity: :func:`staged_applies` checks that, else only bound 1 is used.)
- With one GPU per job, TUNE makes room for a batch of jobs of one demand on one server with free GPUs, as
  many as the server has free GPUs: the batch either fills the server (whose GPUs are then never free again)
  or is the last of its run of equal demands. So there are at most ``S + R`` loops, one per server filled and
  one per run.

``K`` is taken as ``S + R`` (it was ``2 (S + R)``, a margin for an error in this count, which kept TUNE running
on 4-GPU-server rounds: with ``S`` large the margin is hundreds of jobs). ``tests/test_near_opt.py`` checks the
count (TUNE's lowered jobs against ``S + R``) and both bounds against TUNE's total on random rounds and on the
round family's crowded single-GPU members.

:class:`TuneBound` evaluates the smaller of the two bounds at given prices (near-opt tries the unrestricted LP's,
which it already has), or minimises bound 1 over the prices (the restricted LP's optimum, a few
milliseconds), stopping as soon as it is known to reach a given total or not. When near-opt's own total
reaches a bound, TUNE need not run. The packing fits a server within ``FIT_TOLERANCE`` (1e-9) of its CPUs and
memory, so both bounds take capacities that much larger and count a config placeable within that of a server
(at exact capacities a fuzzed round's grid point 2e-9 above the share let TUNE reach 0.002 against a bound of
0); the floors and demotion's comparisons keep their 1e-9 relative tolerances.

Public API
----------
``TuneBound.of(table, cpu, mem)``: the bounds for best-case demands ``cpu``, ``mem`` per GPU (per job);
``.at(prices)`` the smaller at prices, ``.minimum(start=None, decide=None)`` bound 1 minimised.
``staged_applies(instance) -> bool``
``tune_bound(table, best_case_tolerance, prices=None) -> float``: the same from the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from synergy_opt.ideal.lagrangian import Knapsack, dual_value, solve_dual
from synergy_opt.instance import RoundInstance, job_throughputs
from synergy_opt.mechanisms.configs import ConfigTable, placeable, placeable_point
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.packing.state import FIT_TOLERANCE

_TOLERANCE = 1e-9
# Grid values and the gaps between them, as fractions of a server's capacity, below which the staged bound's
# count of lowered jobs is not relied on (see the module docstring).
SMALLEST_VALUE = 1e-5
SMALLEST_GAP = 2e-5
# Lowered jobs allowed for, per server and per distinct demand: the count proven (was 2, a margin for an error
# in the count; the count is tested on random rounds and the family's, where it reached 0.88 of S + R; with the
# margin the bound stayed above near-opt on every 4-GPU-server 1024-GPU round, so TUNE ran there, 20 ms).
LOWERED_PER_LOOP = 1


@dataclass(frozen=True, eq=False)
class StagedBound:
    """Bound 2 of the module docstring, per class of identical jobs (jobs of a class share profile and GPUs)."""

    capacity: np.ndarray  # (CPUs, GB) of the cluster
    count: np.ndarray  # jobs per class
    demand: np.ndarray  # (classes, 3): W at d, CPUs and GB of d for all the job's GPUs
    proportional: np.ndarray  # (classes, 3): the floor, CPUs and GB at (c_p, m_p)
    above: np.ndarray  # per class: d above proportional (may end at (c_p, m_p) or lowered)
    lowered: Knapsack  # the columns at most d, by class
    lowered_class: np.ndarray  # per class, its index among the classes that have columns at most d
    most_lowered: int  # K

    def at(self, prices: np.ndarray) -> float:
        """The bound at ``prices`` (per CPU, per GB)."""
        lam = np.asarray(prices, dtype=float)
        at_demand = self.demand[:, 0] - lam[0] * self.demand[:, 1] - lam[1] * self.demand[:, 2]
        at_proportional = self.proportional[:, 0] - lam[0] * self.proportional[:, 1] - lam[1] * self.proportional[:, 2]
        two = np.where(self.above, np.maximum(at_demand, at_proportional), at_demand)
        _, low = self.lowered.priced(lam)
        gain = np.zeros(two.size)
        has = self.lowered_class >= 0
        gain[has] = np.maximum(low[self.lowered_class[has]] - two[has], 0.0)
        gain = np.where(self.above, gain, 0.0)
        # The K largest gains over jobs: classes by gain, each counted as often as it has jobs, up to K.
        order = np.argsort(-gain, kind="stable")
        taken = np.minimum(self.count[order], np.maximum(self.most_lowered - (np.cumsum(self.count[order])
                                                                             - self.count[order]), 0))
        return float(lam @ self.capacity + np.einsum("q,q->", self.count, two)
                     + np.einsum("q,q->", taken, gain[order]))


@dataclass(frozen=True, eq=False)
class TuneBound:
    """Bounds on TUNE's total for one round (see the module docstring)."""

    restricted: Knapsack
    staged: StagedBound | None

    @classmethod
    def of(cls, table: ConfigTable, cpu: np.ndarray, mem: np.ndarray) -> TuneBound:
        """For best-case demands ``cpu``, ``mem`` per GPU, in job order."""
        instance = table.instance
        cluster = instance.cluster
        # Per class, its first job (jobs of a class share their profile and GPU count, hence their demand).
        first = np.full(table.start.size - 1, -1)
        first[table.klass[::-1]] = np.arange(table.klass.size)[::-1]
        d_cpu, d_mem = cpu[first], mem[first]
        c_p, m_p = cluster.cpu_per_gpu, cluster.mem_gb_per_gpu
        above = (d_cpu > c_p * (1 + _TOLERANCE)) | (d_mem > m_p * (1 + _TOLERANCE))  # demotion's rule
        # TUNE's round is realizable with every job placed, so each of its configs is placeable (see
        # configs.placeable): the others, which no GPU can run beside its server's other jobs, are left out.
        fits = placeable(table, packing_slack=True)
        at_most_demand = ((table.cpu <= d_cpu[table.col_class] * (1 + _TOLERANCE))
                          & (table.mem <= d_mem[table.col_class] * (1 + _TOLERANCE)) & fits)
        # A job above proportional may also end at (c_p, m_p), worth its floor: one column more for its class (the
        # ideal ILP may have dropped that point as dominated).
        # TUNE's packing fits a server within FIT_TOLERANCE of its CPUs and memory: the bounds take capacities
        # that much larger (at exact ones a grid point a hair above the share let TUNE beat them on a fuzzed round:
        # 0.002 against a bound of 0).
        knapsack = replace(table.knapsack, capacity=table.knapsack.capacity * (1 + FIT_TOLERANCE))
        gpus = instance.gpus[first].astype(float)
        switched = np.flatnonzero(above)
        restricted = _with_columns(knapsack.restricted(at_most_demand), switched, instance.floors[first][switched],
                                   gpus[switched] * c_p, gpus[switched] * m_p)
        if np.unique(restricted.col_class).size < first.size:  # a class left without a column (never seen)
            at_most_proportional = (table.cpu <= c_p * (1 + _TOLERANCE)) & (table.mem <= m_p * (1 + _TOLERANCE))
            restricted = knapsack.restricted(at_most_demand | at_most_proportional)
        staged = None
        if staged_applies(instance):
            value = job_throughputs(instance, cpu, mem)[first]
            # A demand no GPU can run beside its server's other jobs is never where TUNE leaves a job.
            value = np.where(placeable_point(table, d_cpu, d_mem, packing_slack=True), value, -np.inf)
            has = np.zeros(first.size, dtype=bool)
            has[table.col_class[at_most_demand]] = True
            lowered_class = np.where(has, np.cumsum(has) - 1, -1)
            lowered = knapsack.restricted(at_most_demand)
            lowered = replace(lowered, col_class=lowered_class[lowered.col_class],
                              class_count=knapsack.class_count[has])
            runs = len(set(zip(cpu.tolist(), mem.tolist(), strict=True)))  # distinct demands
            staged = StagedBound(
                capacity=knapsack.capacity, count=knapsack.class_count,
                demand=np.column_stack((value, gpus * d_cpu, gpus * d_mem)),
                proportional=np.column_stack((instance.floors[first], gpus * c_p, gpus * m_p)),
                above=above, lowered=lowered, lowered_class=lowered_class,
                most_lowered=LOWERED_PER_LOOP * (cluster.servers + runs),
            )
        return cls(restricted, staged)

    def at(self, prices: np.ndarray) -> float:
        """The smaller bound at ``prices`` (per CPU, per GB)."""
        bound = dual_value(self.restricted, np.asarray(prices, dtype=float))[0]
        return bound if self.staged is None else min(bound, self.staged.at(prices))

    def minimum(self, start: np.ndarray | None = None, decide: float | None = None) -> float:
        """Bound 1 minimised (the restricted LP's optimum), from ``start``; with ``decide``, any value of it once
        that is ``<= decide``, or one above ``decide`` once the minimum is known to be."""
        return float(solve_dual(self.restricted, start=start, decide=decide).bound)


def staged_applies(instance: RoundInstance) -> bool:
    """Whether the staged bound's count of lowered jobs holds: every job has one GPU, and every profile's grid
    values and the gaps between them are at least ``SMALLEST_VALUE`` and ``SMALLEST_GAP`` of a server's CPUs
    or memory (see the module docstring)."""
    if not instance.jobs or np.any(instance.gpus != 1):
        return False
    cluster = instance.cluster
    for group in instance.profile_groups:
        for axis, capacity in ((group.cpu_axis, cluster.cpus_per_server), (group.mem_axis, cluster.mem_gb_per_server)):
            if axis[0] < SMALLEST_VALUE * capacity or np.any(np.diff(axis) < SMALLEST_GAP * capacity):
                return False
    return True


def _with_columns(knapsack: Knapsack, classes: np.ndarray, value: np.ndarray, cpu: np.ndarray,
                  mem: np.ndarray) -> Knapsack:
    """``knapsack`` with one more column for each of ``classes`` (columns stay grouped by class)."""
    col_class = np.concatenate((knapsack.col_class, classes))
    order = np.argsort(col_class, kind="stable")
    return replace(knapsack, value=np.concatenate((knapsack.value, value))[order],
                   cpu=np.concatenate((knapsack.cpu, cpu))[order], mem=np.concatenate((knapsack.mem, mem))[order],
                   col_class=col_class[order])


def tune_bound(table: ConfigTable, best_case_tolerance: float, prices: np.ndarray | None = None) -> float:
    """An upper bound on Synergy-TUNE's total on the round of ``table``: the smaller bound at ``prices``, or
    bound 1's minimum when ``prices`` is None (see the module docstring)."""
    bound = TuneBound.of(table, *best_case_demands(table.instance, best_case_tolerance))
    return bound.minimum() if prices is None else bound.at(prices)
