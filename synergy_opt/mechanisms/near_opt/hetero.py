"""near-opt on a heterogeneous round (formulations/heterogeneous.md, section 5; SPEC 7).

On a type-fixed round it runs on each type's round, as today. On a type-free round it chooses the types:
:func:`choose_types` gives every job a type (:mod:`~synergy_opt.mechanisms.near_opt.types`), near-opt runs on
each type's round of those types, and Synergy-TUNE on the baseline types runs beside it: the better total is
returned, so near-opt is never below the paper's mechanism on the round. Floors hold: a chosen type's
proportional share keeps the job's floor (H0), and near-opt keeps every job at or above its type's share's
throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.evaluation import evaluate
from synergy_opt.hetero import HeteroRound, run_per_type
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE
from synergy_opt.mechanisms.near_opt.mechanism import solve_near_opt
from synergy_opt.mechanisms.near_opt.types import choose_types
from synergy_opt.mechanisms.spare import spend_spare as spend_spare_step
from synergy_opt.mechanisms.tune import pack_tune
from synergy_opt.packing.order import policy_order


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


def solve_hetero_near_opt(instance: HeteroRound, order: np.ndarray | None = None, spend_spare: bool = True,
                          best_case_tolerance: float = DEFAULT_TOLERANCE) -> HeteroNearOptResult:
    """near-opt on ``instance`` (module docstring); the options are :func:`solve_near_opt`'s."""
    ranked = [job.id for job in instance.jobs] if order is None else [instance.jobs[int(j)].id for j in order]

    def near_opt(fixed: HeteroRound) -> Allocation:
        return run_per_type(fixed, ranked, lambda sub, ids: solve_near_opt(
            sub, policy_order(sub, ids), spend_spare, best_case_tolerance).allocation)

    if instance.type_fixed:
        allocation = near_opt(instance)
        total = evaluate(instance, allocation).objective
        return HeteroNearOptResult(allocation, "near-opt", total, total, None, instance.baselines)
    types = choose_types(instance)
    own = near_opt(instance.with_types(types))
    own_objective = evaluate(instance, own).objective

    def tune(sub: RoundInstance, ids: list[str]) -> Allocation:
        allocation = pack_tune(sub, policy_order(sub, ids), best_case_tolerance).to_allocation()
        return spend_spare_step(sub, allocation) if spend_spare else allocation

    baseline = run_per_type(instance.at_baseline(), ranked, tune)
    tune_objective = evaluate(instance, baseline).objective
    if tune_objective > own_objective:
        return HeteroNearOptResult(baseline, "tune", tune_objective, own_objective, tune_objective, tuple(types))
    return HeteroNearOptResult(own, "near-opt", own_objective, own_objective, tune_objective, tuple(types))
