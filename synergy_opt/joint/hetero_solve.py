"""The joint model of a heterogeneous round solved (formulations/heterogeneous.md, section 3; SPEC 7).

Methods (``solve_joint(round, method=...)`` on a :class:`~synergy_opt.hetero.HeteroRound`):

- ``"per-type"`` (type-fixed rounds): each type's homogeneous round by today's :func:`solve_joint`, summed.
- ``"direct"``: the type-free MILP (:mod:`~synergy_opt.joint.hetero_model`) handed to any backend.
- ``"decomposition"`` (type-free rounds): types as an outer layer over today's decomposition. Since a job on a
  type keeps that type's share (H6), the type-free optimum is the best choice of admissible types followed by
  today's joint model on each type (H8). Bound: the type-free ideal ILP's, solved within the joint's
  ``mip_gap`` (and ``upper_bound``). Incumbents:
  types chosen by the type-free ideal ILP, then those of a local search that moves single jobs between types
  along the ideal ILP's reduced costs (:mod:`~synergy_opt.joint.hetero_types`); each choice's value is today's
  decomposition on every type (proven per type). OPTIMAL when the best meets the bound within ``mip_gap``;
  otherwise FEASIBLE with the bound and gap.
- ``"auto"``: per-type on a type-fixed round; on a type-free one the decomposition when it applies (HiGHS,
  floors fixed, no backend options), else direct.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import Evaluation, evaluate
from synergy_opt.hetero import HeteroRound, join_allocations
from synergy_opt.ideal import solve_ideal
from synergy_opt.ideal.model import Objective
from synergy_opt.instance import Allocation
from synergy_opt.joint.hetero_model import HeteroJointModel, build_hetero_joint
from synergy_opt.joint.hetero_types import TypeSearch
from synergy_opt.joint.model import JointReductions
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import relative_gap

HETERO_METHODS = ("auto", "per-type", "decomposition", "direct")
# Share of the time limit the decomposition's type-free ideal ILP (its bound and first type choice) may take.
IDEAL_SHARE = 0.25


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

    @property
    def has_solution(self) -> bool:
        return self.allocation is not None

    @property
    def gap(self) -> float | None:
        return relative_gap(self.status, self.objective, self.bound)

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
) -> HeteroJointResult:
    """What :func:`~synergy_opt.joint.solve.solve_joint` does with a heterogeneous round (module docstring);
    ``solve_type`` is :func:`solve_joint` itself, for each type's round."""
    if method not in HETERO_METHODS:
        raise InvalidInputError("method", method, f"on a heterogeneous round choose one of {', '.join(HETERO_METHODS)}")
    decomposable = solver == DEFAULT_SOLVER and reductions.fix_below_floor and not params.options
    if method == "auto":
        method = "per-type" if instance.type_fixed else ("decomposition" if decomposable else "direct")
    start = time.perf_counter()

    def each_type(fixed: HeteroRound, limit: float | None) -> tuple[dict[str, Any], float | None, bool]:
        """Today's joint on every type of ``fixed``: results, total (None if one has no solution), all proven.
        Within ``limit`` seconds in all: each type gets an equal share of what is left when it starts."""
        rounds = [(kind, sub) for kind, sub in fixed.per_type().items() if sub.jobs]
        end = None if limit is None else time.perf_counter() + limit
        results = {}
        for position, (kind, sub) in enumerate(rounds):
            share = None if end is None else max((end - time.perf_counter()) / (len(rounds) - position), 1e-3)
            results[kind] = solve_type(sub, solver, consolidate, split_penalty, share, params.mip_gap,
                                       objective=objective, reductions=reductions, threads=params.threads,
                                       seed=params.seed, verbose=params.verbose, options=dict(params.options))
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
        status = Status.OPTIMAL if proven else (Status.FEASIBLE if allocation is not None else Status.NO_SOLUTION)
        return HeteroJointResult(status, total, bound, instance, "per-type", time.perf_counter() - start,
                                 "; ".join(f"{k}: {r.message}" for k, r in results.items()), allocation,
                                 per_type=results, types=instance.baselines)
    if method == "direct":
        joint = build_hetero_joint(instance, consolidate=consolidate, split_penalty=split_penalty,
                                   objective=objective, reductions=reductions, upper_bound=upper_bound)
        result = solve_model(joint.model, solver, params)
        allocation = joint.allocation(result.solution()) if result.has_solution else None
        return HeteroJointResult(result.status, result.objective, result.bound, instance, "direct",
                                 time.perf_counter() - start, result.message, allocation, joint, result)
    if not decomposable:
        raise InvalidInputError("method", method, "the decomposition runs on HiGHS with floors fixed and no backend "
                                "options")
    if instance.type_fixed:
        return replace(solve_hetero_joint(instance, solver, consolidate, split_penalty, params, objective,
                                          reductions, upper_bound, "per-type", solve_type), method="decomposition")
    return _decomposition(instance, params, objective, upper_bound, each_type, start)


def _decomposition(instance: HeteroRound, params: SolverParams, objective: Objective, upper_bound: float | None,
                   each_type: Callable[[HeteroRound, float | None], tuple[dict[str, Any], float | None, bool]],
                   start: float) -> HeteroJointResult:
    """Types as an outer layer over today's decomposition (module docstring)."""
    deadline = None if params.time_limit is None else start + params.time_limit
    phases: dict[str, float] = {}

    def left() -> float | None:
        return None if deadline is None else max(deadline - time.perf_counter(), 1e-3)

    # The ideal ILP within the joint's own gap: its bound is valid, and closing it further proves nothing more.
    ideal = solve_ideal(instance, objective=objective, mip_gap=params.mip_gap,
                        time_limit=None if deadline is None else IDEAL_SHARE * (deadline - start))
    phases["ideal"] = time.perf_counter() - start
    bounds = [b for b in (ideal.bound, upper_bound) if b is not None]
    bound = min(bounds) if bounds else None
    search = TypeSearch(instance, ideal)
    best: tuple[float, dict[str, Any], tuple[str, ...], bool] | None = None
    tried = 0
    for types in search.candidates():
        if deadline is not None and time.perf_counter() > deadline:
            break
        tried += 1
        results, total, proven = each_type(instance.with_types(types), left())
        if total is not None and (best is None or total > best[0]):
            best = (total, results, tuple(types), proven)
        if best is not None and _meets(best[0], bound, params.mip_gap):
            break
        search.tell(types, total)
    phases["types"] = time.perf_counter() - start
    seconds = time.perf_counter() - start
    if best is None:
        status = Status.NO_SOLUTION
        return HeteroJointResult(status, None, bound, instance, "decomposition", seconds, "no type choice placed "
                                 "every job", None, phases=phases)
    value, results, chosen, proven = best
    # Within the gap of the type-free bound is a proof, whether or not each type's solve proved its own optimum.
    met = _meets(value, bound, params.mip_gap)
    status = Status.OPTIMAL if met else Status.FEASIBLE
    message = (f"optimal: the best of {tried} type choices meets the type-free ideal bound" if met else
               f"the best of {tried} type choices, {'proven' if proven else 'not all proven'} per type")
    return HeteroJointResult(status, value, bound, instance, "decomposition", seconds, message,
                             _joined(instance, results), per_type=results, types=chosen, phases=phases)


def _meets(value: float, bound: float | None, mip_gap: float) -> bool:
    return bound is not None and value >= bound - mip_gap * abs(value)


def _joined(instance: HeteroRound, results: Mapping[str, Any]) -> Allocation | None:
    if any(r.allocation is None for r in results.values()):
        return None
    return join_allocations(instance.cluster, {kind: r.allocation for kind, r in results.items()})
