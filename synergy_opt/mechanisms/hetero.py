"""The mechanisms on a heterogeneous round (formulations/heterogeneous.md, section 5; SPEC 7).

Each mechanism's *type rule* says which type every job runs on; on the round of those types, fixed, each
type's homogeneous round is allocated by the mechanism exactly as today and the allocations are joined.

=============================================  ====================================================
mechanism                                      type rule on a type-free round
=============================================  ====================================================
proportional, greedy, tune, tune-artifact,     the baseline type (what a heterogeneity-agnostic or
drf, tetris                                    policy-chosen GPU allocation gave the job)
opt                                            the type-free ideal ILP's (then placement and rounding
                                               per type, :mod:`synergy_opt.placement.hetero`)
near-opt                                       chosen (:mod:`synergy_opt.mechanisms.near_opt.hetero`)
=============================================  ====================================================

On a type-fixed round every rule gives the fixed types. The policy's ``order`` is kept within each type.
Every job keeps its floor: on its baseline type the floor is the type's own; on a type it was moved to, that
type's proportional share reaches it (H0), and each type's mechanism keeps its jobs at or above that share's
throughput where it promises floors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from synergy_opt.hetero import HeteroRound, join_allocations, run_per_type, split_allocation
from synergy_opt.instance import Allocation
from synergy_opt.mechanisms.demand import renamed_threshold
from synergy_opt.mechanisms.near_opt.hetero import solve_hetero_near_opt
from synergy_opt.mechanisms.spare import spend_spare, split_spare_option
from synergy_opt.placement.solve import solve_opt
from synergy_opt.validation import check_keyword_options

RunType = Callable[..., Allocation]
TYPE_RULES = {
    "proportional": "baseline",
    "greedy": "baseline",
    "tune": "baseline",
    "tune-artifact": "baseline",
    "drf": "baseline",
    "tetris": "baseline",
    "opt": "ideal",
    "near-opt": "chosen",
}


def run_hetero_mechanism(instance: HeteroRound, name: str, order: np.ndarray, run_type: RunType,
                         **options: Any) -> Allocation:
    """Mechanism ``name`` on ``instance`` by its type rule (module docstring); ``run_type`` is
    :func:`~synergy_opt.mechanisms.run_mechanism`, run on each type's homogeneous round."""
    ids = [instance.jobs[int(j)].id for j in order]
    if instance.type_fixed or TYPE_RULES[name] == "baseline":
        return run_per_type(instance.at_baseline(), ids, lambda sub, ranked: run_type(sub, name, ranked, **options))
    if name == "near-opt":
        checked = check_keyword_options(solve_hetero_near_opt, renamed_threshold(solve_hetero_near_opt, options),
                                        skip=("instance", "order"))
        return solve_hetero_near_opt(instance, order, **checked).allocation
    own, spare = split_spare_option(options)
    allocation = solve_opt(instance, **check_keyword_options(solve_opt, own, skip=("instance",),
                                                             also=("spend_spare",))).allocation
    return spend_spare_per_type(instance, allocation) if spare else allocation


def spend_spare_per_type(instance: HeteroRound, allocation: Allocation) -> Allocation:
    """The spare-capacity step (:func:`~synergy_opt.mechanisms.spare.spend_spare`) on each type's servers."""
    fixed = instance.with_types(types_of(instance, allocation))
    parts = split_allocation(instance.cluster, allocation)
    return join_allocations(instance.cluster, {kind: spend_spare(sub, parts[kind])
                                               for kind, sub in fixed.per_type().items() if sub.jobs})


def types_of(instance: HeteroRound, allocation: Allocation) -> list[str]:
    """The type each job of ``instance`` runs on in ``allocation`` (its baseline when unplaced)."""
    cluster = instance.cluster
    return [cluster.type_of_server(allocation.jobs[job.id][0].server) if job.id in allocation.jobs
            else job.baseline_type for job in instance.jobs]
