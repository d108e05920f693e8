"""The joint model of a heterogeneous round solved (formulations/heterogeneous.md, section 3; SPEC 7).

Methods (``solve_joint(round, method=...)`` on a :class:`~synergy_opt.hetero.HeteroRound`):

- ``"per-type"`` (type-fixed rounds): each type's homogeneous round by today's :func:`solve_joint`, summed.
- ``"direct"``: the type-free MILP (:mod:`~synergy_opt.joint.hetero_model`) handed to any backend.
- ``"decomposition"`` (type-free rounds): types as an outer layer over today's decomposition. Since a job on a
  type keeps that type's share (H6), the type-free optimum is the best choice of admissible types followed by
  today's joint model on each type (H8). Bound: the type-free ideal ILP's, solved within the joint's
  ``mip_gap`` (and ``upper_bound``). Incumbents: the types chosen by the type-free ideal ILP and, when they do
  not place every job, by the ideal LP rounded and then the baseline (:mod:`~synergy_opt.joint.hetero_types`);
  each choice's value is today's decomposition on every type (proven per type; a type's round once). When
  the best meets the bound within ``mip_gap`` it is optimal; otherwise the branch-and-price across types
  (:mod:`~synergy_opt.joint.hetero_bp`) searches from it with the time left, its nodes' types combining the
  rounds solved here: OPTIMAL when it proves the best within ``mip_gap``, else FEASIBLE with its bound;
  INFEASIBLE when that search is exhausted without a solution, NO_SOLUTION when it stopped first (the time
  limit) with none.
- ``"auto"``: per-type on a type-fixed round; on a type-free one the decomposition when it applies (HiGHS,
  floors fixed, no backend options), else direct.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import Evaluation, evaluate
from synergy_opt.hetero import HeteroRound, join_allocations, split_allocation
from synergy_opt.ideal import solve_ideal
from synergy_opt.ideal.model import Objective
from synergy_opt.instance import Allocation
from synergy_opt.joint.branching import cutoff_of
from synergy_opt.joint.hetero_bp import prove_across_types, typed_columns
from synergy_opt.joint.hetero_model import HeteroJointModel, build_hetero_joint
from synergy_opt.joint.hetero_types import TypeSearch
from synergy_opt.joint.model import JointReductions, direct_params
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import relative_gap
from synergy_opt.solvers.registry import band_scale

HETERO_METHODS = ("auto", "per-type", "decomposition", "direct")
# Share of the time limit the decomposition's type-free ideal ILP (its bound and first type choice) may take, and
# share of the time left each type choice may take (what they leave is the branch-and-price across types'). On the
# 3 x 128-GPU rounds (seeds 0-9) the ideal ILP is proven within 1e-4 in at most 2 s or not at all: multi-GPU seed 5
# finds no solution in 15 s (nor in 1 s, with the same bound), time the branch-and-price then lacks; a tenth.
IDEAL_SHARE, CHOICE_SHARE = 0.1, 0.35
# Share of the time left a type choice may take while none has placed every job: each type's first incumbent
# takes about 0.45 s on 1024 GPUs whatever its limit, so at 3 x 1024 GPUs a 3 s limit ended with none (a share of
# 0.35 left the last type 1 ms).
FIRST_CHOICE_SHARE = 0.7
# Seconds per GPU of the round the type-free ideal ILP may take at most (within its share). On the 3 x 128-GPU rounds
# (seeds 0-19, both traces) it is proven within 1e-4 in at most 1 s or not at all: on the five it does not prove
# (multi 5, 16, 18, single 12, 15) its bound at 1 s is the same as at 6 s, and the solutions it finds by 6 s (two
# of the five) are below the type choices'; the seconds go to the proof. 1.5 s at 3 x 128 GPUs; at 3 x 1024 (12 s)
# the share of the time limit is the cap, as before.
IDEAL_SECONDS_PER_GPU = 4e-3
# Seconds a type choice must have left for its types not proven to be solved again.
SECOND_PASS_SECONDS = 1.0


@dataclass(frozen=True, eq=False)
class HeteroJointResult:
    """:func:`solve_joint` on a heterogeneous round. ``per_type`` holds each type's homogeneous result
    (per-type and decomposition: those of the best type choice); ``types`` the type of every job there."""

    status: Status
    objective: float | None
    bound: float | None
    instance: HeteroRound
    method: str
    seconds: float
    message: str
    allocation: Allocation | None
    model: HeteroJointModel | None = None
    solve: SolveResult | None = None
    per_type: Mapping[str, Any] | None = None
    types: tuple[str, ...] | None = None
    phases: dict[str, float] = field(default_factory=dict)
    consolidate: bool = False  # the rule solved, as JointResult.consolidate: every job that fits one server on one

    @property
    def has_solution(self) -> bool:
        return self.allocation is not None

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    @property
    def build_seconds(self) -> float:
        """Building the direct model (0 for the methods that build per type: their time is all solve)."""
        return self.model.build_seconds if self.model is not None else 0.0

    @property
    def solve_seconds(self) -> float:
        return self.seconds - self.build_seconds

    @cached_property
    def evaluation(self) -> Evaluation | None:
        return None if self.allocation is None else evaluate(self.instance, self.allocation)


def solve_hetero_joint(
    instance: HeteroRound,
    solver: str,
    consolidate: bool,
    split_penalty: float,
    params: SolverParams,
    objective: Objective,
    reductions: JointReductions,
    upper_bound: float | None,
    method: str,
    solve_type: Callable[..., Any],
    formulation: str = "patterns",
    given: Allocation | None = None,
) -> HeteroJointResult:
    """What :func:`~synergy_opt.joint.solve.solve_joint` does with a heterogeneous round (module docstring);
    ``solve_type`` is :func:`solve_joint` itself, for each type's round. ``formulation`` and the start ``given``
    are each type's (type-fixed rounds solved per type only, which the caller checks)."""
    if method not in HETERO_METHODS:
        raise InvalidInputError("method", method, f"on a heterogeneous round choose one of {', '.join(HETERO_METHODS)}")
    decomposable = solver == DEFAULT_SOLVER and reductions.fix_below_floor and not params.options
    if method == "auto":
        method = "per-type" if instance.type_fixed else ("decomposition" if decomposable else "direct")
    start = time.perf_counter()
    # Each type's round solved so far, by its type and jobs: type choices often share a type's jobs (the ideal
    # ILP's and the LP's choices differ on a few jobs), and that type's solve is then not repeated.
    solved: dict[tuple[str, tuple[str, ...]], Any] = {}

    def each_type(fixed: HeteroRound, limit: float | None) -> tuple[dict[str, Any], float | None, bool]:
        """Today's joint on every type of ``fixed``: results, total (None if one has no solution), all proven.
        Within ``limit`` seconds in all: each type gets an equal share of what is left when it starts; then the
        types not proven share what the others left, each solved again from its allocation (a type whose ideal
        configs are placed takes a second, another may need all the time there is)."""
        rounds = [(kind, sub) for kind, sub in fixed.per_type().items() if sub.jobs]
        starts = {} if given is None else _start_by_type(fixed, given)
        end = None if limit is None else time.perf_counter() + limit
        results: dict[str, Any] = {}

        def solve(kind: str, sub: Any, position: int, count: int, start: Allocation | None = None) -> None:
            key = (kind, tuple(job.id for job in sub.jobs))
            before = solved.get(key)
            if start is None and before is not None:
                results[kind] = before
                return
            share = None if end is None else max((end - time.perf_counter()) / (count - position), 1e-3)
            result = solve_type(sub, solver, consolidate, split_penalty, share, params.mip_gap, objective=objective,
                                reductions=reductions, threads=params.threads, seed=params.seed,
                                verbose=params.verbose, options=dict(params.options), formulation=formulation,
                                start=start if start is not None else starts.get(kind))
            if before is None or before.objective is None or \
                    (result.objective is not None and result.objective >= before.objective):
                results[kind] = solved[key] = result

        for position, (kind, sub) in enumerate(rounds):
            solve(kind, sub, position, len(rounds))
        again = [(kind, sub) for kind, sub in rounds if results[kind].status is not Status.OPTIMAL
                 and results[kind].status is not Status.INFEASIBLE]
        for position, (kind, sub) in enumerate(again):
            if end is not None and end - time.perf_counter() < SECOND_PASS_SECONDS:
                break
            solve(kind, sub, position, len(again), start=results[kind].allocation)
        values = [r.objective for r in results.values()]
        total = None if None in values else float(sum(v for v in values if v is not None))
        return results, total, all(r.status is Status.OPTIMAL for r in results.values())

    if method == "per-type":
        if not instance.type_fixed:
            raise InvalidInputError("method", method, "a type-free round does not split by type (fix its types "
                                    "first: with_types or at_baseline)")
        results, total, proven = each_type(instance, params.time_limit)
        bounds = [r.bound for r in results.values()]
        bound = None if None in bounds else float(sum(b for b in bounds if b is not None))
        allocation = _joined(instance, results)
        if any(r.status is Status.INFEASIBLE for r in results.values()):
            status = Status.INFEASIBLE  # one type's round has no solution: nor has the round
        else:
            status = Status.OPTIMAL if proven else (Status.FEASIBLE if allocation is not None else Status.NO_SOLUTION)
        return HeteroJointResult(status, total, bound, instance, "per-type", time.perf_counter() - start,
                                 "; ".join(f"{k}: {r.message}" for k, r in results.items()), allocation,
                                 per_type=results, types=instance.baselines)
    if method == "direct":
        joint = build_hetero_joint(instance, consolidate=consolidate, split_penalty=split_penalty,
                                   objective=objective, reductions=reductions, upper_bound=upper_bound)
        result = solve_model(joint.model, solver, direct_params(solver, params, patterns=True))  # per-type loads
        allocation = joint.allocation(result.solution()) if result.has_solution else None
        return HeteroJointResult(result.status, result.objective, result.bound, instance, "direct",
                                 time.perf_counter() - start, result.message, allocation, joint, result)
    if not decomposable:
        raise InvalidInputError("method", method, "the decomposition runs on HiGHS with floors fixed and no backend "
                                "options")
    if instance.type_fixed:
        return replace(solve_hetero_joint(instance, solver, consolidate, split_penalty, params, objective,
                                          reductions, upper_bound, "per-type", solve_type), method="decomposition")
    factor = band_scale(instance.largest_throughput(), instance.median_throughput)
    if factor != 1.0:
        # Throughputs of unusual units: the branch-and-price's slack and HiGHS's tolerances are absolute (at 1e-9
        # a round 7.5% below its optimum was called optimal), so the round is solved at ordinary size; a power of
        # two scales every value exactly. Each type's results are those of the scaled round, so none are kept.
        found = solve_hetero_joint(instance.scaled(factor), solver, consolidate, split_penalty, params,
                                   objective, reductions, None if upper_bound is None else upper_bound * factor,
                                   method, solve_type)
        return replace(found, instance=instance, per_type=None,
                       objective=None if found.objective is None else found.objective / factor,
                       bound=None if found.bound is None else found.bound / factor,
                       message=f"{found.message} (solved with every throughput times {factor:g})")
    return _decomposition(instance, params, objective, upper_bound, each_type, solved, start, consolidate,
                          split_penalty, reductions)


def _decomposition(instance: HeteroRound, params: SolverParams, objective: Objective, upper_bound: float | None,
                   each_type: Callable[[HeteroRound, float | None], tuple[dict[str, Any], float | None, bool]],
                   solved: Mapping[tuple[str, tuple[str, ...]], Any], start: float, consolidate: bool,
                   split_penalty: float, reductions: JointReductions) -> HeteroJointResult:
    """Types as an outer layer over today's decomposition, then the branch-and-price across types (module
    docstring); ``solved`` holds every type's round ``each_type`` solved, by the type and its jobs' ids."""
    deadline = None if params.time_limit is None else start + params.time_limit
    phases: dict[str, float] = {}

    def left(share: float = 1.0) -> float | None:
        return None if deadline is None else max(share * (deadline - time.perf_counter()), 1e-3)

    # The ideal ILP within the joint's own gap: its bound is valid, and closing it further proves nothing more.
    ideal_limit = None if deadline is None else \
        min(IDEAL_SHARE * (deadline - start), IDEAL_SECONDS_PER_GPU * instance.cluster.total_gpus)
    ideal = solve_ideal(instance, objective=objective, mip_gap=params.mip_gap, time_limit=ideal_limit)
    phases["ideal"] = time.perf_counter() - start
    bounds = [b for b in (ideal.bound, upper_bound) if b is not None]
    bound = min(bounds) if bounds else None
    search = TypeSearch(instance, ideal)
    best: tuple[float, dict[str, Any], tuple[str, ...], bool] | None = None
    tried = 0
    def settled() -> bool:
        return (deadline is not None and time.perf_counter() > deadline) or \
            (best is not None and _meets(best[0], bound, params.mip_gap))

    # Type choices (the first is the ideal ILP's), each for a share of the time left, until one meets the bound;
    # settled is asked before the next choice is computed (some take an ideal solve).
    for types in search.candidates():
        if settled():
            break
        tried += 1
        results, total, proven = each_type(instance.with_types(types),
                                           left(CHOICE_SHARE if best is not None else FIRST_CHOICE_SHARE))
        if total is not None and (best is None or total > best[0]):
            best = (total, results, tuple(types), proven)
        search.tell(types, total)
        if settled():
            break
    phases["types"] = time.perf_counter() - start
    allocation = None if best is None else _joined(instance, best[1])
    value = -math.inf if best is None else best[0]
    proof = None
    if bound is not None and not _meets(value, bound, params.mip_gap) and \
            (deadline is None or time.perf_counter() < deadline):
        typed = typed_columns(instance, consolidate, split_penalty, objective, reductions)
        # The types' rounds the choices solved: a node's types may combine them.
        known = {key: (result.objective, result.allocation) for key, result in solved.items()
                 if result.allocation is not None}
        proof = prove_across_types(instance, typed, value, bound, params.mip_gap, deadline, known)
        bound = proof.bound
        if proof.allocation is not None:
            allocation, value = proof.allocation, proof.value
        phases["branch-and-price"] = time.perf_counter() - start
    seconds = time.perf_counter() - start
    if allocation is None and proof is not None and proof.outcome.complete:
        # The tree exhausted with no incumbent: no solution exists (as the homogeneous decomposition says).
        return HeteroJointResult(Status.INFEASIBLE, None, None, instance, "decomposition", seconds,
                                 "infeasible: the branch-and-price across types found no solution in any node",
                                 None, phases=phases)
    if allocation is None:
        searched = "" if proof is None else "; the branch-and-price across types stopped before it was complete"
        return HeteroJointResult(Status.NO_SOLUTION, None, bound, instance, "decomposition", seconds,
                                 f"no type choice placed every job{searched}", None, phases=phases)
    # Within the gap of the type-free bound is a proof, whether or not each type's solve proved its own optimum.
    met = _meets(value, bound, params.mip_gap)
    status = Status.OPTIMAL if met else Status.FEASIBLE
    if proof is None:
        assert best is not None
        message = (f"optimal: the best of {tried} type choices meets the type-free ideal bound" if met else
                   f"the best of {tried} type choices, {'proven' if best[3] else 'not all proven'} per type")
        return HeteroJointResult(status, value, bound, instance, "decomposition", seconds, message, allocation,
                                 per_type=best[1], types=best[2], phases=phases)
    where = "type choices" if proof.allocation is None else "branch-and-price across types"
    message = (f"{'optimal' if met else 'gap open'}: branch-and-price across types, {proof.outcome.nodes} nodes "
               f"(incumbent from the {where})")
    from_choice = proof.allocation is None and best is not None
    return HeteroJointResult(status, value, bound, instance, "decomposition", seconds, message, allocation,
                             per_type=best[1] if from_choice and best is not None else None,
                             types=_types_of(instance, allocation), phases=phases)


def _start_by_type(fixed: HeteroRound, start: Allocation) -> dict[str, Allocation]:
    """A type-fixed round's start split by type, each job on its own type (else an error naming ``start``, not
    the per-type solve's "an allocation of another round?")."""
    try:
        parts = split_allocation(fixed.cluster, start)
    except InvalidInputError as error:
        raise InvalidInputError(error.field.replace("allocation", "start", 1), error.value, error.reason) from None
    own = {job.id: next(iter(job.profiles)) for job in fixed.jobs}  # type-fixed: each job's one type
    for kind, part in parts.items():
        for job_id in part.jobs:
            if job_id in own and own[job_id] != kind:
                raise InvalidInputError(f"start.jobs[{job_id!r}]", kind, "is on another GPU type than the round "
                                        f"fixes ({own[job_id]})")
    return parts


def _types_of(instance: HeteroRound, allocation: Allocation) -> tuple[str, ...]:
    """The type of every job's servers (job order)."""
    cluster = instance.cluster
    return tuple(cluster.type_of_server(allocation.jobs[job.id][0].server) for job in instance.jobs)


def _meets(value: float, bound: float | None, mip_gap: float) -> bool:
    """Whether ``value`` is proven within ``mip_gap`` of ``bound``, with the branch-and-price's absolute slack
    (at an optimum of 0 a bound of float residue, 1e-14, is met)."""
    return bound is not None and bound <= cutoff_of(value, mip_gap)


def _joined(instance: HeteroRound, results: Mapping[str, Any]) -> Allocation | None:
    if any(r.allocation is None for r in results.values()):
        return None
    return join_allocations(instance.cluster, {kind: r.allocation for kind, r in results.items()})
