"""Every job's usable per-GPU configs, read once from the ideal ILP's columns, and CPU/memory prices.

The columns are those of :func:`synergy_opt.ideal.model.build_ideal` (the grid with the proportional point
inserted, configs below the floor and dominated configs removed, identical jobs merged into one class), so a
job's configs here are exactly the ideal ILP's choices for it. :func:`config_table` lays them out per job;
:func:`priced_targets` prices CPU and memory by the Lagrangian dual of the ideal ILP's two coupling rows
(:func:`synergy_opt.ideal.lagrangian.solve_dual`, whose bound equals the LP relaxation) and gives each job the config
that is best at those prices: the ideal LP's choice, up to the at most two jobs the LP splits between configs.

Public API
----------
``config_table(instance) -> ConfigTable``
``priced_targets(table, near=None) -> PricedTargets``
``fit_to_capacity(table, column) -> ndarray``
``placeable(table) -> ndarray``, ``placeable_caps(table) -> (float, float)``
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synergy_opt.ideal.core import solve_core
from synergy_opt.ideal.lagrangian import Knapsack, dual_from_near, solve_dual
from synergy_opt.ideal.model import IdealModel, build_ideal
from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.group_first import group_first
from synergy_opt.packing.state import FIT_TOLERANCE
from synergy_opt.solvers.base import SolverParams

# Relative slack when comparing per-GPU values with the proportional share and throughputs with each other.
_TOLERANCE = 1e-9
# The ideal ILP's relative gap when its solution serves as targets (the same as solve_ideal's default).
IDEAL_GAP = 1e-4



@dataclass(frozen=True, eq=False)
class ConfigTable:
    """Per-GPU configs by class of identical jobs: columns ``start[q]:start[q+1]`` belong to class ``q``.

    ``klass[j]`` is job ``j``'s class. Within a class the columns are sorted by CPUs, then memory.
    """

    ideal: IdealModel
    cpu: np.ndarray  # per column: CPUs per GPU
    mem: np.ndarray  # per column: GB per GPU
    tput: np.ndarray  # per column: W
    col_class: np.ndarray
    start: np.ndarray  # per class, first column; start[-1] = number of columns
    klass: np.ndarray  # per job, its class

    @property
    def instance(self) -> RoundInstance:
        return self.ideal.instance

    @cached_property
    def safe(self) -> np.ndarray:
        """Per class: its best column at or below the proportional share in both resources.

        It exists (the proportional point, or a config dominating it, is a column) and meets the floor; a
        server whose jobs all run at their safe column is within capacity.
        """
        c_p, m_p = self.instance.cluster.cpu_per_gpu, self.instance.cluster.mem_gb_per_gpu
        within = (self.cpu <= c_p * (1 + _TOLERANCE)) & (self.mem <= m_p * (1 + _TOLERANCE))
        score = np.where(within, self.tput, -np.inf)
        return best_per_class(self, score)

    @cached_property
    def knapsack(self) -> Knapsack:
        """The ideal ILP as a two-row knapsack (:mod:`synergy_opt.ideal.lagrangian`), read once."""
        return Knapsack.of(self.ideal)

    @cached_property
    def footprint(self) -> np.ndarray:
        """Per column: CPUs and memory per GPU as fractions of the proportional share, summed."""
        cluster = self.instance.cluster
        return self.cpu / cluster.cpu_per_gpu + self.mem / cluster.mem_gb_per_gpu


def config_table(instance: RoundInstance) -> ConfigTable:
    """The ideal ILP's columns of ``instance`` laid out per job (see the module docstring)."""
    ideal = build_ideal(instance)
    klass = np.empty(len(instance.jobs), dtype=np.int64)
    klass[ideal.class_jobs] = np.repeat(np.arange(ideal.num_classes), ideal.class_count)
    start = np.searchsorted(ideal.col_class, np.arange(ideal.num_classes + 1))
    return ConfigTable(ideal, ideal.col_cpu, ideal.col_mem, ideal.col_tput, ideal.col_class, start, klass)


def best_per_class(table: ConfigTable, score: np.ndarray, *tie_breaks: np.ndarray) -> np.ndarray:
    """Per class, its column of highest ``score``; ties go to the smallest ``tie_breaks`` in turn, then to the
    smallest footprint, then to the first column."""
    return group_first(table.start, (-score, *tie_breaks, table.footprint))


def fit_to_capacity(table: ConfigTable, column: np.ndarray) -> np.ndarray:
    """Per class columns whose total CPUs and memory fit the cluster, lowering as little throughput as possible.

    While a resource is over, every class is offered its column that uses less of it and no more of the other,
    at the least throughput lost per unit freed; the best offers are taken until the excess is covered. If that
    ever fails, every class takes its safe column (at most proportional), which always fits.
    """
    instance = table.instance
    ideal = table.ideal
    count = ideal.class_count.astype(float)
    gpus = np.zeros(count.size)
    gpus[table.klass] = instance.gpus
    cluster = instance.cluster
    capacity = np.array([cluster.total_cpus, cluster.total_mem_gb])
    column = column.copy()
    use_of = np.column_stack((table.cpu, table.mem)) * gpus[table.col_class][:, None]  # per job of the class
    for _ in range(4 * (table.start.size + 1)):
        total = (use_of[column] * count[:, None]).sum(axis=0)
        over = total - capacity * (1 - 1e-12)
        if np.all(over <= 0):
            return column
        d = int(np.argmax(over / capacity))
        now = column[table.col_class]
        freed = use_of[now, d] - use_of[:, d]
        grows = use_of[:, 1 - d] > use_of[now, 1 - d]
        lost = table.tput[now] - table.tput
        ok = (freed > 0) & ~grows
        if not ok.any():
            break
        ratio = np.where(ok, lost / np.where(ok, freed, 1.0), np.inf)
        best = best_per_class(table, -ratio, -freed)
        best_ratio = ratio[best]
        usable = np.flatnonzero(np.isfinite(best_ratio))
        usable = usable[np.argsort(best_ratio[usable], kind="stable")]
        covered = np.cumsum(freed[best[usable]] * count[usable])
        take = usable[: int(np.searchsorted(covered, over[d])) + 1]
        column[take] = best[take]
    return np.where(np.all((use_of[column] * count[:, None]).sum(axis=0) <= capacity * (1 + 1e-9)), column,
                    table.safe)


@dataclass(frozen=True)
class PricedTargets:
    """CPU and memory prices, the LP bound they prove, each class's best column at those prices, and per job
    that column raised while the cluster's totals have room (:func:`raise_to_capacity`)."""

    prices: np.ndarray  # (per CPU, per GB)
    bound: float  # the ideal LP relaxation's optimum: an upper bound on every realizable round
    column: np.ndarray  # per class
    job_column: np.ndarray  # per job
    # Per job, the targets from the LP's ties taken the other way when they differ (and fit), else None.
    other_job_column: np.ndarray | None = None


def priced_targets(table: ConfigTable, near: np.ndarray | None = None) -> PricedTargets:
    """Price CPU and memory by the ideal ILP's Lagrangian dual; each class takes its best column at the prices.

    Among columns of equal priced value the smallest footprint wins, so that the targets together stay within
    the cluster's CPUs and memory wherever the LP leaves a resource unpriced. ``near``: prices near the dual's
    minimum (another LP's), from which it is proven when it can be (:func:`dual_from_near`).
    """
    if table.start.size == 1:  # no jobs
        return PricedTargets(np.zeros(2), 0.0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    # Columns no GPU can run beside its server's other jobs are left out (a valid restriction: every realizable
    # round avoids them, so the LP's bound still bounds every one).
    knapsack = table.knapsack
    allowed = placeable(table)
    restricted = knapsack.restricted(allowed)
    dual = None if near is None else dual_from_near(restricted, near)
    dual = solve_dual(restricted) if dual is None else dual
    priced = knapsack.value - dual.multipliers[0] * knapsack.cpu - dual.multipliers[1] * knapsack.mem
    best = np.maximum.reduceat(np.where(allowed, priced, -np.inf), knapsack.starts)
    # Priced values within a hair of the best tie (floating sums of prices differ in the last bits); among
    # them, the least priced use (the LP's ties move use, not value), then the smallest footprint.
    score = np.where(allowed & (priced >= best[table.col_class] - 1e-9 * (1 + np.abs(best[table.col_class]))),
                     1.0, 0.0)
    priced_use = dual.multipliers[0] * table.cpu + dual.multipliers[1] * table.mem
    least = best_per_class(table, score, priced_use)
    column = fit_to_capacity(table, least)
    jobs = raise_to_capacity(table, column[table.klass], dual.multipliers)
    # The ties taken the other way (the most priced use: the LP's fractional classes rounded up), trimmed to fit
    # and raised: the better of the two. Where no class has a tie they are the same columns (and the same steps
    # give the same result, so they are not taken again).
    most = best_per_class(table, score, -priced_use)
    up = column if np.array_equal(most, least) else fit_to_capacity(table, most)
    jobs_up = jobs if np.array_equal(up, column) else raise_to_capacity(table, up[table.klass], dual.multipliers)
    other = None if np.array_equal(jobs_up, jobs) else jobs_up
    if table.tput[jobs_up].sum() > table.tput[jobs].sum() * (1 + 1e-12):
        column, jobs, other = up, jobs_up, jobs
    return PricedTargets(dual.multipliers, dual.bound, column, jobs, other)


def placeable(table: ConfigTable, packing_slack: bool = False) -> np.ndarray:
    """Per column, whether a GPU can run it on a server whose other GPUs run jobs too: at most ``C - k c_min``
    CPUs and ``M - k m_min`` GB per GPU, where ``k`` GPUs of a server besides this one must be in use (``G - 1``
    less the GPUs the round leaves idle) and ``c_min``, ``m_min`` are the least any column asks for."""
    if table.cpu.size == 0:
        return np.ones(0, dtype=bool)
    return placeable_point(table, table.cpu, table.mem, packing_slack)


def placeable_point(table: ConfigTable, cpu: np.ndarray, mem: np.ndarray, packing_slack: bool = False
                    ) -> np.ndarray:
    """Whether per-GPU points ``cpu``, ``mem`` are placeable (:func:`placeable`); with ``packing_slack`` up to
    the packing's own tolerance, ``FIT_TOLERANCE`` of a server's CPUs and memory (what TUNE may place: a bound
    on TUNE must allow it)."""
    cpu_cap, mem_cap = placeable_caps(table)
    cluster = table.instance.cluster
    cpu_room = cpu_cap * (1 + _TOLERANCE)
    mem_room = mem_cap * (1 + _TOLERANCE)
    if packing_slack:
        cpu_room = max(cpu_room, cpu_cap + FIT_TOLERANCE * cluster.cpus_per_server)
        mem_room = max(mem_room, mem_cap + FIT_TOLERANCE * cluster.mem_gb_per_server)
    return (cpu <= cpu_room) & (mem <= mem_room)


def placeable_caps(table: ConfigTable) -> tuple[float, float]:
    """The most CPUs and GB per GPU a placeable config may ask for (:func:`placeable`)."""
    instance = table.instance
    cluster = instance.cluster
    idle = max(cluster.total_gpus - int(instance.gpus.sum()), 0)
    others = max(cluster.gpus_per_server - 1 - idle, 0)
    if table.cpu.size == 0:
        return float(cluster.cpus_per_server), float(cluster.mem_gb_per_server)
    return (cluster.cpus_per_server - others * float(table.cpu.min()),
            cluster.mem_gb_per_server - others * float(table.mem.min()))


# Rounds of raise_to_capacity (each takes the best offers that fit together; later rounds take what is left).
RAISE_ROUNDS = 8


def raise_to_capacity(table: ConfigTable, column: np.ndarray, prices: np.ndarray) -> np.ndarray:
    """Per job columns (``column``, job order) raised to better ones while the cluster's total CPUs and memory
    have room for them.

    The priced targets take, among a class's columns of equal priced value, the least used; where the LP mixes
    such columns (ties at the prices, common on rounds of few distinct jobs) they leave part of the cluster's
    priced resources idle that the LP optimum uses. Here every job is offered its raise of the highest gain per
    priced extra use (the LP's exchange rate; ties to the larger gain) that fits the room left, and the best
    offers are taken, in that order, as far as they fit together; rounds repeat until no offer fits. Each raise
    adds throughput and stays within the totals.
    """
    instance = table.instance
    cluster = instance.cluster
    room = np.array([cluster.total_cpus, cluster.total_mem_gb]) * (1 - 1e-12)
    gpus = instance.gpus.astype(float)
    column = column.copy()
    klass = table.klass
    # Every (job, column of its class) pair.
    counts = table.start[klass + 1] - table.start[klass]
    job = np.repeat(np.arange(klass.size), counts)
    pair = table.start[klass][job] + (np.arange(job.size) - np.repeat(np.cumsum(counts) - counts, counts))
    starts = np.r_[0, np.cumsum(counts)]  # each job's pairs
    cpu, mem, tput = table.cpu[pair] * gpus[job], table.mem[pair] * gpus[job], table.tput[pair]
    allowed = placeable(table)[pair]
    scale = np.array([cluster.total_cpus, cluster.total_mem_gb])
    for _ in range(RAISE_ROUNDS):
        now = column[job]
        left = room - np.array([(table.cpu[column] * gpus).sum(), (table.mem[column] * gpus).sum()])
        extra_cpu, extra_mem = cpu - table.cpu[now] * gpus[job], mem - table.mem[now] * gpus[job]
        gain = tput - table.tput[now]
        ok = (gain > _TOLERANCE * (1 + table.tput[now])) & (extra_cpu <= left[0]) & (extra_mem <= left[1]) & allowed
        if not ok.any():
            break
        cost = (prices[0] * np.maximum(extra_cpu, 0) + prices[1] * np.maximum(extra_mem, 0)
                + 1e-9 * (np.maximum(extra_cpu, 0) / scale[0] + np.maximum(extra_mem, 0) / scale[1]))
        rate = np.where(ok, gain / np.maximum(cost, 1e-300), -np.inf)
        # Per job its best offer: highest rate, then largest gain.
        first = group_first(starts, (-rate, -gain))
        first = first[np.isfinite(rate[first])]
        first = first[np.lexsort((-gain[first], -rate[first]))]
        took = np.cumsum(extra_cpu[first]) <= left[0] * (1 + 1e-12)
        took &= np.cumsum(extra_mem[first]) <= left[1] * (1 + 1e-12)
        taken = first[: int(np.argmin(took)) if not took.all() else took.size]  # the first always fits
        column[job[taken]] = pair[taken]
    return column


def ideal_targets(table: ConfigTable) -> np.ndarray | None:
    """Per job, its column in an optimal solution of the ideal ILP (solved exactly through its core,
    :func:`synergy_opt.ideal.core.solve_core`); None when it has none."""
    if table.start.size == 1:
        return None
    result = solve_core(table.ideal, SolverParams(mip_gap=IDEAL_GAP))
    if result.x is None:
        return None
    return table.ideal.decode(result.x)
