"""``solve_joint``: the joint exact MILP (SPEC 2.4), solved directly by any registered backend or by the
decomposition (:mod:`synergy_opt.joint.decomposition`), decoded to an Allocation."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal, overload

from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import Evaluation, InvalidAllocationWarning, evaluate
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.model import OBJECTIVE, Objective
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.instance import allocation as allocation_rule
from synergy_opt.io import any_round
from synergy_opt.joint.decomposition import DecompositionReport, solve_decomposition
from synergy_opt.joint.hetero_solve import HeteroJointResult, solve_hetero_joint
from synergy_opt.joint.literal import LiteralJointModel, build_joint_literal
from synergy_opt.joint.model import (
    FORMULATIONS,
    JointModel,
    JointReductions,
    build_joint,
    check_options,
    direct_params,
    item_columns,
    server_patterns,
)
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import SolvedModel
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import InstanceOf, Number, OneOf, Optional, boolean, checked

JointFormulation = Literal["patterns", "servers", "literal"]
JointMethod = Literal["auto", "decomposition", "direct"]
METHODS: tuple[JointMethod, ...] = ("auto", "decomposition", "direct")
# ``auto`` lists the maximal server loads within this many partial loads: generated rounds that share a few
# profiles need at most ~6,200 partial loads in all, so listing stops quickly on rounds of many profiles, which
# go to the decomposition.
AUTO_PARTIAL_LOADS = 20_000
# ``auto`` solves the direct model only when the jobs are alike (at most this many classes per job) or few classes
# in all. With every job its own profile (noisy rounds) the direct model grows with the jobs while the
# decomposition's pricing does not: noisy 1024-GPU memory-bound rounds (few item types, so their loads are listed)
# ended without a solution after 30 s direct, the decomposition proves them in 0.6 s CPU; 128-GPU 4-GPU-server
# rounds 3.4-4.2 s direct, 0.6-0.9 s.
AUTO_CLASSES_PER_JOB, AUTO_FEW_CLASSES = 0.5, 16
# ... and only when its servers have at most this many maximal loads (the direct model grows with them, the
# decomposition's pricing does not; measured in formulations/joint.md, its opening section).
AUTO_DIRECT_PATTERNS = 1000
# Under a time limit, the direct model after the first incumbent runs only if at least this many seconds are left.
MIN_DIRECT_SECONDS = 1e-3


# A bound below a known solution by more than this (relative) is wrong.
BOUND_SLACK = 1e-7


@dataclass(frozen=True, eq=False)
class JointResult(SolvedModel):
    """Outcome of :func:`solve_joint`.

    ``objective`` and ``bound`` are the MILP's: the sum of (penalised, when ``split_penalty > 0``) throughput.
    ``bound`` is a valid upper bound on the optimum whenever it is not None (never above the ideal ILP's with the
    decomposition). ``evaluation`` is the one evaluator's verdict on ``allocation``; without a split penalty its
    objective equals ``objective``. ``method`` is the method that ran; ``report`` the decomposition's phases.
    ``consolidate`` is the placement rule that was solved: False (the default) lets any job be split over
    servers, as OPT does, so the optimum bounds every mechanism that keeps each job at its floor (a job of
    floor 0 may get no CPUs or memory: ideal.model.with_zero_config); True is the paper's rule (every
    job that fits on one server runs on one server).
    """

    status: Status
    objective: float | None
    bound: float | None
    joint: JointModel | LiteralJointModel | None
    solve: SolveResult
    method: str = "direct"
    report: DecompositionReport | None = None
    consolidate: bool = False

    @property
    def model_build_seconds(self) -> float:
        """Building the neutral model, with the pattern enumeration (the decomposition: its ideal ILP)."""
        return self.joint.build_seconds if self.report is None and self.joint is not None else 0.0

    @property
    def formulation(self) -> str:
        """The formulation solved (patterns may have fallen back to servers, see ``PATTERN_LIMIT``)."""
        if self.method == "decomposition":
            return "decomposition"
        return "" if self.joint is None else self.joint.formulation

    @cached_property
    def allocation(self) -> Allocation | None:
        """Where every job runs (None when the solve ended without a solution)."""
        if not self.has_solution or self.joint is None:
            return None
        return self.joint.allocation(self.solve.solution())

    @cached_property
    def evaluation(self) -> Evaluation | None:
        """The allocation scored by :func:`synergy_opt.evaluate` (None without one)."""
        if self.allocation is None or self.joint is None:
            return None
        return evaluate(self.joint.instance, self.allocation)

    @cached_property
    def penalised_objective(self) -> float | None:
        """The objective of the decoded allocation: ``sum W_j (1 - p [j split])`` (GPU-weighted if asked).

        At least ``objective`` (the decoder may place a job the MILP counted as split on one server), equal to
        it at an optimum.
        """
        if self.evaluation is None or self.joint is None:
            return None
        p = self.joint.split_penalty
        gpu = self.joint.objective_kind == "gpu"
        return float(sum(
            s.throughput * (s.gpus if gpu else 1) * (1 - p if s.split else 1) for s in self.evaluation.jobs.values()
        ))


@overload
def solve_joint(instance: RoundInstance, solver: str = ..., consolidate: bool = ..., split_penalty: float = ...,
                time_limit: float | None = ..., mip_gap: float = ..., *, objective: Objective = ...,
                reductions: JointReductions | None = ..., formulation: JointFormulation = ...,
                upper_bound: float | None = ..., threads: int | None = ..., seed: int = ..., verbose: bool = ...,
                options: Mapping[str, Any] | None = ..., method: str = ..., start: Allocation | None = ...,
                ) -> JointResult: ...


@overload
def solve_joint(instance: HeteroRound, solver: str = ..., consolidate: bool = ..., split_penalty: float = ...,
                time_limit: float | None = ..., mip_gap: float = ..., *, objective: Objective = ...,
                reductions: JointReductions | None = ..., formulation: JointFormulation = ...,
                upper_bound: float | None = ..., threads: int | None = ..., seed: int = ..., verbose: bool = ...,
                options: Mapping[str, Any] | None = ..., method: str = ..., start: Allocation | None = ...,
                ) -> HeteroJointResult: ...


@checked(instance=any_round, consolidate=boolean, split_penalty=Number(0, 1), objective=OBJECTIVE,
         reductions=Optional(InstanceOf(JointReductions)), formulation=OneOf((*FORMULATIONS, "literal")),
         upper_bound=Optional(Number()), start=Optional(allocation_rule), **SOLVER_ARGUMENTS)
def solve_joint(
    instance: RoundInstance | HeteroRound,
    solver: str = DEFAULT_SOLVER,
    consolidate: bool = False,
    split_penalty: float = 0.0,
    time_limit: float | None = None,
    mip_gap: float = 1e-4,
    *,
    objective: Objective = "job",
    reductions: JointReductions | None = None,
    formulation: JointFormulation = "patterns",
    upper_bound: float | None = None,
    start: Allocation | None = None,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
    method: str = "auto",
) -> JointResult | HeteroJointResult:
    """Choose every job's per-GPU config and its integral placement together, optimally (SPEC 2.4).

    On a heterogeneous round (:class:`~synergy_opt.hetero.HeteroRound`) a
    :class:`~synergy_opt.joint.hetero_solve.HeteroJointResult`: per type when the types are fixed, else the
    type-free model directly or types as an outer layer over the decomposition
    (:mod:`synergy_opt.joint.hetero_solve`; methods ``per-type``, ``direct``, ``decomposition``, ``auto``).

    Parameters
    ----------
    solver
        A registered backend that solves integer models (see :func:`synergy_opt.solvers.available_solvers`).
    consolidate
        False (default): any job may be split over servers, as OPT does, so that the optimum bounds every
        mechanism that keeps each job at its floor (the bench's and near-opt's reference). True: the paper's
        rule, every job whose GPUs fit on one server runs on one server; larger jobs may use any servers.
        ``JointResult.consolidate`` says which was solved.
    split_penalty
        ``p`` in ``[0, 1]``: a job spread over several servers counts ``(1 - p) W`` in the objective.
    time_limit, mip_gap
        Stop after this many seconds (status FEASIBLE with its gap, or NO_SOLUTION), or at this relative gap.
    objective
        ``"job"``: sum of per-job throughput; ``"gpu"``: GPU-weighted.
    reductions
        Exact reductions (all by default); ignored by the literal formulation, which has none.
    formulation
        ``"patterns"`` (servers counted per load pattern; default), ``"servers"`` (one variable per server and
        item type) or ``"literal"`` (SPEC 2.4 as written; small instances only).
    upper_bound
        A proven upper bound on the optimum (for instance the ideal ILP's), added as a cut-off row (the
        decomposition takes it as a bound). A value below the optimum is not a bound: the direct model then
        finds only solutions under it (or none: INFEASIBLE), and the decomposition raises
        :class:`~synergy_opt.errors.InvalidInputError` when it finds a solution above it.
    start
        A valid allocation of the round (e.g. near-opt's), checked (:class:`~synergy_opt.errors.InvalidInputError`
        naming ``start`` otherwise): the decomposition and ``auto`` take it as their first incumbent, returned
        alone when it meets the ideal ILP's bound and kept when nothing better is found in the time limit.
        ``method="direct"`` does not hand it to the backend: a direct solve that ends without a solution says so.
    method
        ``"direct"``: the model of ``formulation`` handed to ``solver``. ``"decomposition"``: server patterns
        priced exactly, a bound from them and the ideal ILP, incumbents, and a branch-and-price that proves
        the optimum (:mod:`synergy_opt.joint.decomposition`; HiGHS, floors fixed, no backend ``options``).
        ``"auto"``: direct when the jobs share a few profiles (at most ``AUTO_CLASSES_PER_JOB`` classes per
        job, or ``AUTO_FEW_CLASSES``) and the maximal server loads number at most ``AUTO_DIRECT_PATTERNS``, else
        the decomposition when it applies. Before a direct solve under a time limit (or from a ``start``) it
        takes the decomposition's first incumbent, returned (FEASIBLE, the tighter bound) when the direct model finds
        nothing as good in the time left, and alone when it meets the ideal ILP's bound. HiGHS solves the
        direct patterns model without presolve unless ``options`` set it
        (:func:`~synergy_opt.joint.model.direct_params`: less time overall on the rounds measured, the same
        optima, and HiGHS 1.16's presolve once called a wrong optimum there).

    Returns
    -------
    JointResult
        Status, objective, bound, gap, the decoded ``allocation`` and its ``evaluation``. Limits and
        infeasibility (e.g. jobs that cannot be consolidated) are statuses, never exceptions.
    """
    began = time.perf_counter()
    params = SolverParams(time_limit=time_limit, mip_gap=mip_gap, threads=threads, seed=seed, verbose=verbose,
                          options=dict(options or {}))
    if isinstance(instance, HeteroRound):
        # A type-fixed round is today's joint per type, which takes a formulation and a start; the models across
        # types are the patterns model (a formulation was once ignored there).
        if formulation not in (*FORMULATIONS, "literal"):
            raise InvalidInputError("formulation", formulation, "choose one of patterns, servers, literal")
        for name, value in (("start", "allocation" if start is not None else None), ("formulation", formulation)):
            if value not in (None, "patterns") and not (instance.type_fixed and method in ("auto", "per-type")):
                raise InvalidInputError(name, value, "is taken on rounds of one GPU type, or type-fixed rounds "
                                        "solved per type; the joint model across types is the patterns model")
        check_options(objective, split_penalty, upper_bound, "patterns")
        return replace(solve_hetero_joint(instance, solver, consolidate, split_penalty, params, objective,
                                          reductions or JointReductions(), upper_bound, method, solve_joint,
                                          formulation, start),
                       consolidate=consolidate)
    if method not in METHODS:
        raise InvalidInputError("method", method, f"choose one of {', '.join(METHODS)}")
    if start is not None:
        with warnings.catch_warnings():  # an invalid start is an error here, not a warning
            warnings.simplefilter("ignore", InvalidAllocationWarning)
            given = evaluate(instance, start)  # a job or server of another round raises here
        if not given.valid:
            raise InvalidInputError("start", "allocation", f"is not a valid allocation: {'; '.join(given.problems)}")
    if formulation not in (*FORMULATIONS, "literal"):
        raise InvalidInputError("formulation", formulation, "choose one of patterns, servers, literal")
    check_options(objective, split_penalty, upper_bound, "patterns")
    reductions = reductions or JointReductions()
    why_not = _decomposition_unsupported(solver, formulation, reductions, options)
    if method == "decomposition" and why_not:
        raise InvalidInputError("method", method, f"the decomposition does not apply here: {why_not}")
    joint: JointModel | LiteralJointModel | None = None
    started: JointResult | None = None  # the start as an incumbent, when auto solves the direct model after it
    if method == "auto":
        if why_not or not instance.jobs:
            method = "direct"
        else:
            items = item_columns(instance, consolidate, split_penalty, objective, reductions)
            alike = items.columns.count.size <= max(AUTO_CLASSES_PER_JOB * len(instance.jobs), AUTO_FEW_CLASSES)
            patterns = None if not alike else server_patterns(
                instance.cluster, items.item_size, items.item_cpu, items.item_mem, items.per_server,
                limit=AUTO_DIRECT_PATTERNS, partial_factor=max(1, AUTO_PARTIAL_LOADS // AUTO_DIRECT_PATTERNS))
            if patterns is None:
                method = "decomposition"
            elif start is not None or time_limit is not None:
                # The start may already meet the ideal ILP's bound (then no model need be solved); under a time
                # limit the first incumbent is the answer if the direct model finds none in time (3 jobs on a
                # 16-GPU server: 4,000 patterns, 4-6 s of HiGHS, NO_SOLUTION under a 1 s limit).
                found, result, report = solve_decomposition(
                    instance, params, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                    reductions=reductions, upper_bound=upper_bound, initial_allocation=start, only_incumbent=True)
                started = JointResult(status=result.status, objective=result.objective, bound=result.bound,
                                      joint=found, solve=result, method="decomposition", report=report,
                                      consolidate=consolidate)
                if result.status in (Status.OPTIMAL, Status.INFEASIBLE):  # settled without the direct model
                    return started
            if patterns is not None:
                method = "direct"
                joint = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty,
                                    objective=objective, reductions=reductions, upper_bound=upper_bound,
                                    patterns=patterns)
    if method == "decomposition" and instance.jobs:
        found, result, report = solve_decomposition(instance, params, consolidate=consolidate,
                                                    split_penalty=split_penalty, objective=objective,
                                                    reductions=reductions, upper_bound=upper_bound,
                                                    initial_allocation=start)
        return JointResult(status=result.status, objective=result.objective, bound=result.bound, joint=found,
                           solve=result, method="decomposition", report=report, consolidate=consolidate)
    if joint is None:
        joint = _direct_model(instance, consolidate, split_penalty, objective, reductions, formulation, upper_bound)
    if started is not None and time_limit is not None:  # the direct model gets what the first incumbent left
        left = time_limit - (time.perf_counter() - began)
        if left < MIN_DIRECT_SECONDS:  # the first incumbent took the whole limit
            return _limited(started)
        params = replace(params, time_limit=left)
    patterns_model = isinstance(joint, JointModel) and joint.formulation == "patterns"
    result = solve_model(joint.model, solver, direct_params(solver, params, patterns=patterns_model))
    direct = JointResult(status=result.status, objective=result.objective, bound=result.bound, joint=joint,
                         solve=result, method="direct", consolidate=consolidate)
    return direct if started is None else _better(direct, started)


def _limited(started: JointResult) -> JointResult:
    """The first incumbent as the answer when the time limit left nothing for the direct model."""
    status = Status.FEASIBLE if started.objective is not None else Status.NO_SOLUTION
    solve = replace(started.solve, status=status, message=f"{_first(started)}: the time limit left the direct "
                    "model no time")
    return replace(started, status=status, solve=solve)


def _better(direct: JointResult, started: JointResult) -> JointResult:
    """The direct model's result, or the start's when the direct solve ended without a solution or below it:
    the start, OPTIMAL when the direct model proved a bound within its gap (the start is then as close), else
    FEASIBLE, with the tighter of the two bounds. A bound below the start's objective is wrong (the start is a
    solution above it: HiGHS's presolve once called such a bound optimal) and is dropped. A direct result kept
    before its proof (a time limit) takes the start's bound when that is tighter."""
    if started.objective is None or (direct.objective is not None and direct.objective >= started.objective):
        if direct.status is Status.OPTIMAL or started.bound is None or \
                (direct.bound is not None and direct.bound <= started.bound):
            return direct
        tighter = _tighter_bound((direct.bound, started.bound), direct.objective)
        return replace(direct, bound=tighter, solve=replace(direct.solve, bound=tighter))
    slack = BOUND_SLACK * max(1.0, abs(started.objective))
    direct_bound = direct.bound if direct.bound is not None else \
        direct.objective if direct.status is Status.OPTIMAL else None
    wrong = direct_bound is not None and direct_bound < started.objective - slack
    bound = _tighter_bound((None if wrong else direct_bound, started.bound), started.objective)
    status = Status.OPTIMAL if direct.status is Status.OPTIMAL and not wrong else Status.FEASIBLE
    if wrong:
        note = f"the direct model's bound {direct_bound!r} is below it, dropped"
    elif status is Status.OPTIMAL:
        note = f"the direct model's optimum {direct.objective!r} (within its gap) is below it"
    else:
        note = f"the direct model {direct.solve.message}"
    solve = replace(started.solve, status=status, bound=bound, message=f"{_first(started)}: {note}")
    return replace(started, status=status, bound=bound, solve=solve)


def _tighter_bound(bounds: tuple[float | None, ...], kept: float | None) -> float | None:
    """The least of the known ``bounds``, never below the objective of the solution ``kept`` (a bound below it by
    less than ``BOUND_SLACK`` is the solvers' noise), or None when none is known."""
    known = [b for b in bounds if b is not None]
    if not known:
        return None
    return min(known) if kept is None else max(min(known), kept)


def _first(started: JointResult) -> str:
    """What the first incumbent was, for messages: the caller's start, or the decomposition's heuristics."""
    source = started.report.incumbent_source if started.report is not None else ""
    return f"the first incumbent kept ({source})" if source else "the first incumbent kept"


def _decomposition_unsupported(solver: str, formulation: str, reductions: JointReductions,
                               options: Mapping[str, Any] | None) -> str:
    """Why the decomposition cannot take this request ("" when it can)."""
    if solver != DEFAULT_SOLVER:
        return f"it runs on {DEFAULT_SOLVER} (solver={solver!r})"
    if formulation != "patterns":
        return f"formulation={formulation!r} asks for a direct model"
    if not reductions.fix_below_floor:
        return "its master has no floor rows (JointReductions.fix_below_floor=False)"
    if options:
        return "backend options apply to a direct solve"
    return ""


def _direct_model(instance: RoundInstance, consolidate: bool, split_penalty: float, objective: Objective,
                  reductions: JointReductions, formulation: str, upper_bound: float | None
                  ) -> JointModel | LiteralJointModel:
    if formulation == "literal":
        return build_joint_literal(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective)
    return build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                       reductions=reductions, formulation=formulation,  # type: ignore[arg-type]
                       upper_bound=upper_bound)
