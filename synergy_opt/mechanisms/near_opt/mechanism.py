"""near-opt end to end: targets, placement, local search, per-server optimum and exchanges, spare capacity, TUNE
floor.

Why the result is valid: every job gets exactly its GPUs (the placement places every GPU of every job, and
the local search swaps entries of equal GPU counts); every config is one of the ideal ILP's columns, which
meet the job's floor; a server's configs come from a programme over resource units that are rounded up, so
no server exceeds its CPUs or memory (a whole job the programme left without a config, which the split-job
step rules out, would get its safe config). The spare-capacity step and the TUNE comparison only ever raise
the total. See ``formulations/near_opt.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.gc_pause import paused_gc
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.mechanisms.configs import (
    ConfigTable,
    PricedTargets,
    config_table,
    ideal_targets,
    priced_targets,
)
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands
from synergy_opt.mechanisms.near_opt.assign import assign_chunks, chunk_sizes, merge_entries
from synergy_opt.mechanisms.near_opt.exchange import Placed, exchange
from synergy_opt.mechanisms.near_opt.pinned import needs, pinned_raises
from synergy_opt.mechanisms.near_opt.rebalance import reassign_slots, rebalance
from synergy_opt.mechanisms.near_opt.server_dp import Units, choose_units
from synergy_opt.mechanisms.near_opt.tune_floor import TuneBound
from synergy_opt.mechanisms.spare import Parts, parts_of, spend_parts
from synergy_opt.mechanisms.tune import pack_tune_demands

# The TUNE bound is minimised over prices only when near-opt's total is within this fraction of its value at
# near-opt's prices.
TRY_MINIMUM = 0.02
# Clusters of at most this many servers are placed from three sets of targets (see _starts).
MULTI_START_SERVERS = 32
# Of those targets, how many are placed once more one GPU at a time (see _starts): all three (development rounds
# of the issue-22 family: mean 98.73 -> 98.89% of the joint optimum against the priced ones only, none lower).
SINGLE_STARTS = 3
# Of the starts' results, how many (the best ones) the pinned raises start from: each ends at a local optimum of
# its own (65 hard development rounds of the issue-22 family at 128 GPUs: 99.19% of the joint optimum from the
# best only, 99.37% from three, 99.45% from all six at 1.7 times the time of three, every job below its aim
# raised; with RAISES = 4 per pass, 99.38% from three).
RAISED_STARTS = 3


@dataclass(frozen=True, eq=False)
class NearOptResult:
    """near-opt on one round: the allocation returned, and what it was chosen from.

    ``source`` is ``"near-opt"``, or ``"tune"`` when TUNE's allocation was better. ``bound`` is the ideal LP
    relaxation's optimum, an upper bound on every realizable round; ``tune_bound`` bounds TUNE's total, and
    ``tune_objective`` (TUNE's total, after the spare-capacity step when ``spend_spare``) is None when near-opt's
    own total reached that bound (TUNE was not run).
    """

    allocation: Allocation
    source: str
    objective: float
    own_objective: float
    tune_objective: float | None
    tune_bound: float
    bound: float


def pack_near_opt(instance: RoundInstance, table: ConfigTable, prices: np.ndarray | None = None
                  ) -> tuple[Parts, PricedTargets]:
    """Steps 1-4 of the package docstring: near-opt's own allocation as :class:`Parts`, and the prices
    (``prices``: near them, as :func:`solve_near_opt` takes them)."""
    priced = priced_targets(table, prices)
    several = _several_starts(instance)
    ideal = ideal_targets(table) if several else None
    units = choose_units(table)
    found = [(_placed(instance, table, units, target, single), target)
             for target, single in _starts(table, priced, ideal)]
    best = 0
    for k, (placed, _) in enumerate(found):
        if placed.total > found[best][0].total * (1 + 1e-12):
            best = k
    configured = found[best][0]
    if ideal is not None:
        # Where the starts are many, so are the pinned raises (near_opt/pinned.py): from the best start and the
        # next RAISED_STARTS - 1 by total, each job aiming at the better of its start's target and its ideal
        # config; the best result is kept.
        others = sorted((k for k in range(len(found)) if k != best), key=lambda k: -found[k][0].total)
        for k in [best, *others][:RAISED_STARTS]:
            placed, target = found[k]
            aims = np.where(table.tput[ideal] >= table.tput[target], ideal, target)
            raised = pinned_raises(table, units, placed, aims)
            if raised.total > configured.total * (1 + 1e-12):
                configured = raised
    entries, column_of = configured.entries, configured.column
    order = np.argsort(entries.job, kind="stable")
    parts = Parts(entries.job[order], entries.server[order], entries.gpus[order], table.cpu[column_of],
                  table.mem[column_of], table.tput[column_of], np.ones(len(instance.jobs), dtype=bool))
    return parts, priced


def _several_starts(instance: RoundInstance) -> bool:
    """Whether near-opt places from several targets (and then tries pinned raises): few servers, multi-GPU jobs."""
    return instance.cluster.servers <= MULTI_START_SERVERS and bool(np.any(instance.gpus > 1))


def _starts(table: ConfigTable, priced: PricedTargets, ideal: np.ndarray | None) -> list[tuple[np.ndarray, bool]]:
    """The targets near-opt places from, each with whether every job is placed one GPU at a time: the priced
    ones; where ``ideal`` is given (the ideal ILP's configs: :func:`_several_starts`) also the LP's ties taken the
    other way and those ideal configs (each placement a local optimum of its own; on few servers they
    differ most, and cost least), and each of those placed again one GPU at a time. Those starts spread a job at
    the proportional share like any other: a large hungry job that must span servers (AlexNet at 12 CPUs, M5
    at 187.5 GB per GPU) then finds one free GPU on each of many servers, where whole 8-GPU chunks of neutral
    jobs would have filled some servers and crowded it (multi-spanning, development seed 45: 90.5% -> 100% of the
    joint optimum)."""
    starts = [priced.job_column]
    # Single-GPU rounds gain little from more starts (their worst round of the issue-22 tuning seeds: 99.35 ->
    # 99.76% of the joint optimum, three times the time); rounds with split jobs most.
    if ideal is not None:
        for other in (priced.other_job_column, ideal):
            if other is not None and not any(np.array_equal(other, known) for known in starts):
                starts.append(other)
        return [(target, False) for target in starts] + [(target, True) for target in starts[:SINGLE_STARTS]]
    return [(target, False) for target in starts]


def _placed(instance: RoundInstance, table: ConfigTable, units: Units, target: np.ndarray, single: bool = False
            ) -> Placed:
    """Steps 2-4 from per-job targets: placement, local search, exchanges, per-server optimum; with ``single``
    every job is placed one GPU at a time."""
    cpu, mem = table.cpu[target], table.mem[target]
    chunk = np.ones(len(instance.jobs), dtype=np.int64) if single else chunk_sizes(instance, cpu, mem)
    entries = assign_chunks(instance, cpu, mem, chunk)
    # A split job cannot do without its target (its config must fit on every one of its servers).
    demand = needs(table, target, entries.spans(len(instance.jobs)) > 1)
    entries = rebalance(instance, reassign_slots(instance, entries, demand), demand)
    entries = merge_entries(entries.job, entries.server, entries.gpus)
    return exchange(table, units, entries, target)


@paused_gc()  # its many small objects would trigger full collections (gc_pause.py)
def solve_near_opt(
    instance: RoundInstance,
    order: np.ndarray | None = None,
    spend_spare: bool = True,
    best_case_tolerance: float = DEFAULT_TOLERANCE,
    prices: np.ndarray | None = None,
) -> NearOptResult:
    """near-opt on ``instance`` (see the package docstring).

    Parameters
    ----------
    order
        The policy's priority order as job indices; near-opt places every job, so it only breaks TUNE's ties.
    spend_spare
        End with the spare-capacity step (on by default for near-opt).
    best_case_tolerance
        For the TUNE run that near-opt never falls below (its best-case demands).
    prices
        CPU and memory prices near those of the round's ideal LP (per CPU, per GB: the type-free LP's on one
        type of a heterogeneous round), which the LP's are then proven from when they can be, by a small LP
        instead of cutting planes (:func:`~synergy_opt.ideal.lagrangian.dual_from_near`).
    """
    order = np.arange(len(instance.jobs)) if order is None else order
    if not instance.jobs:
        return NearOptResult(Allocation({}), "near-opt", 0.0, 0.0, None, 0.0, 0.0)
    table = config_table(instance)
    own, priced = pack_near_opt(instance, table, prices)
    bound = priced.bound
    if spend_spare:
        spend_parts(instance, table, own)
    own_objective = float(own.tput.sum())
    # TUNE runs only when no bound on its total (at near-opt's prices, then the restricted LP's minimised) is
    # reached; the minimum is sought only when the first bound is close (it rarely falls by more than a few
    # percent), and only until it is known whether it reaches near-opt's total.
    demands = best_case_demands(instance, best_case_tolerance)
    tune_bound = TuneBound.of(table, *demands)
    ceiling = tune_bound.at(priced.prices)
    if ceiling * (1 - TRY_MINIMUM) <= own_objective < ceiling * (1 - 1e-12):
        ceiling = min(ceiling, tune_bound.minimum(start=priced.prices, decide=own_objective / (1 - 1e-12)))
    allocation = own.to_allocation(instance)
    if own_objective >= ceiling * (1 - 1e-12):
        return NearOptResult(allocation, "near-opt", own_objective, own_objective, None, ceiling, bound)
    # TUNE with the same spare-capacity step as near-opt's own allocation: its raw total may be below near-opt's
    # while the step lifts it above (a job TUNE left below its grid, at throughput 0, raised to its demand).
    tune = parts_of(instance, pack_tune_demands(instance, order, *demands).to_allocation())
    if spend_spare:
        spend_parts(instance, table, tune)
    tune_objective = float(tune.tput.sum())
    if tune_objective <= own_objective:
        return NearOptResult(allocation, "near-opt", own_objective, own_objective, tune_objective, ceiling, bound)
    return NearOptResult(tune.to_allocation(instance), "tune", tune_objective, own_objective, tune_objective,
                         ceiling, bound)
