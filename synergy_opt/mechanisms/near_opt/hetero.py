"""near-opt on a heterogeneous round (formulations/heterogeneous.md, section 5; SPEC 7).

On a type-fixed round it runs on each type's round, as today. On a type-free round it chooses the types:
:func:`~synergy_opt.ideal.hetero_types.lp_types` gives every job a type (the type-free ideal LP's), near-opt
runs on each type's round of those types (on rounds of few jobs, ``ILP_TYPES_JOBS``, also on the type-free ideal
ILP's types, :func:`ilp_types`, the better kept), and Synergy-TUNE on the baseline types runs beside it: the better
total is returned, so near-opt is never below the paper's mechanism on the round (TUNE is not run when
near-opt's total reaches an upper bound on it: the baseline types' Lagrangian bound at the type-free LP's
prices, or, when that is above near-opt's total, their ideal LP, type by type). Each type's near-opt proves its
CPU and memory prices from the type-free LP's prices of that type when it can (one small LP instead of cutting
planes: that type's LP differs only by the jobs the type-free LP split between types). Floors hold: a chosen
type's proportional share keeps the job's floor (H0), and near-opt keeps every job at or above its type's
share's throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.gc_pause import paused_gc
from synergy_opt.hetero import HeteroRound, run_per_type
from synergy_opt.ideal.hetero_model import build_hetero_ideal
from synergy_opt.ideal.hetero_types import baseline_bound, lp_types, solve_lp
from synergy_opt.ideal.solve import solve_ideal
from synergy_opt.instance import Allocation, RoundInstance, job_throughputs
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE
from synergy_opt.mechanisms.near_opt.mechanism import solve_near_opt
from synergy_opt.mechanisms.spare import spend_spare as spend_spare_step
from synergy_opt.mechanisms.tune import pack_tune
from synergy_opt.packing.order import policy_order
from synergy_opt.packing.state import FIT_TOLERANCE

# On rounds of at most this many jobs the type-free ideal ILP's types are tried too, and the better of the two
# choices kept: an LP vertex splits up to three classes a type, and rounding them moves a large share of a small
# round (the heterogeneous round family at about 100 GPUs, formulations/heterogeneous.md section 7: near-opt at
# 96.3-99.5% of the joint on 15 of 130 rounds from the LP's types alone, the ILP's typically the joint's). The
# generator's rounds of 3 x 128 GPUs have 147 jobs and more.
ILP_TYPES_JOBS = 128


@dataclass(frozen=True, eq=False)
class HeteroNearOptResult:
    """near-opt on a heterogeneous round: the allocation, where it came from (``"near-opt"`` or ``"tune"``,
    TUNE on the baseline types), both totals, and the types near-opt chose (one per job, in job order)."""

    allocation: Allocation
    source: str
    objective: float
    own_objective: float
    tune_objective: float | None
    types: tuple[str, ...]


@paused_gc()  # its many small objects would trigger full collections (gc_pause.py)
def solve_hetero_near_opt(instance: HeteroRound, order: np.ndarray | None = None, spend_spare: bool = True,
                          best_case_tolerance: float = DEFAULT_TOLERANCE) -> HeteroNearOptResult:
    """near-opt on ``instance`` (module docstring); the options are :func:`solve_near_opt`'s."""
    ranked = [job.id for job in instance.jobs] if order is None else [instance.jobs[int(j)].id for j in order]
    totals: dict[str, float] = {}
    near: dict[str, np.ndarray] = {}  # a type's CPU and memory prices in the type-free LP

    def near_opt(sub: RoundInstance, ids: list[str]) -> Allocation:
        result = solve_near_opt(sub, policy_order(sub, ids), spend_spare, best_case_tolerance,
                                near.get(sub.metadata.get("gpu_type", "")))
        totals["near-opt"] = totals.get("near-opt", 0.0) + result.objective
        return result.allocation

    def tune(sub: RoundInstance, ids: list[str]) -> Allocation:
        allocation = pack_tune(sub, policy_order(sub, ids), best_case_tolerance).to_allocation()
        if spend_spare:
            allocation = spend_spare_step(sub, allocation)
        totals["tune"] = totals.get("tune", 0.0) + _total(sub, allocation)
        return allocation

    if instance.type_fixed:
        allocation = run_per_type(instance, ranked, near_opt)
        return HeteroNearOptResult(allocation, "near-opt", totals.get("near-opt", 0.0),
                                   totals.get("near-opt", 0.0), None, instance.baselines)
    model = build_hetero_ideal(instance)
    solution = solve_lp(model)
    types = tuple(instance.baselines if solution is None else lp_types(instance, model, solution))
    prices = None if solution is None else solution[1][model.coupling_rows]
    if prices is not None:  # each type's LP is the type-free one's but for the jobs it split between types
        for k, name in enumerate(instance.cluster.names):
            near[name] = prices.reshape(3, -1)[1:, k]
    own = run_per_type(instance, ranked, near_opt, types)
    own_total = totals.pop("near-opt", 0.0)
    if len(instance.jobs) <= ILP_TYPES_JOBS:
        exact = ilp_types(instance)
        if exact is not None and exact != types:
            other = run_per_type(instance, ranked, near_opt, exact)
            if totals.get("near-opt", 0.0) > own_total * (1 + 1e-12):
                own, own_total, types = other, totals["near-opt"], exact
    # TUNE on the baseline types runs only when no bound on its total (that round's ideal LP, or the Lagrangian
    # bound at the type-free LP's prices when that bound is already reached) is reached.
    # (TUNE's packing fits servers within FIT_TOLERANCE of their capacities: the bound allows that much more.)
    if own_total >= baseline_bound(model, prices, own_total / (1 - 1e-12), FIT_TOLERANCE) * (1 - 1e-12):
        return HeteroNearOptResult(own, "near-opt", own_total, own_total, None, types)
    baseline = run_per_type(instance, ranked, tune, instance.baselines)
    tune_total = totals.get("tune", 0.0)
    if tune_total > own_total:
        return HeteroNearOptResult(baseline, "tune", tune_total, own_total, tune_total, types)
    return HeteroNearOptResult(own, "near-opt", own_total, own_total, tune_total, types)


def ilp_types(instance: HeteroRound) -> tuple[str, ...] | None:
    """The types of the type-free ideal ILP's optimum, HiGHS on the whole model (one thread, no time limit:
    deterministic; on the heterogeneous family's rounds of up to 112 jobs 16 ms median, 1.2 s at most, where the
    core search took up to 3.8 s and found no solution on some), None when it finds none."""
    result = solve_ideal(instance, method="direct")
    return result.gpu_types if result.has_solution else None


def _total(instance: RoundInstance, allocation: Allocation) -> float:
    """Total throughput of an allocation that gives each job one per-GPU config on all its servers (TUNE's and
    the spare step's do), read as the evaluator reads it, vectorised."""
    cpu = np.zeros(len(instance.jobs))
    mem = np.zeros(len(instance.jobs))
    placed = np.zeros(len(instance.jobs), dtype=bool)
    for job_id, parts in allocation.jobs.items():
        j = instance.job_index[job_id]
        cpu[j], mem[j] = parts[0].cpus / parts[0].gpus, parts[0].mem_gb / parts[0].gpus
        placed[j] = sum(p.gpus for p in parts) == instance.jobs[j].gpus
    return float(job_throughputs(instance, cpu, mem)[placed].sum())
