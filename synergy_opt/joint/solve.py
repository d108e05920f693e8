"""``solve_joint``: the joint exact MILP (SPEC 2.4) solved by any registered backend, decoded to an Allocation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from synergy_opt.builders.ideal import OBJECTIVE, Objective
from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import Evaluation, evaluate
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.joint.literal import LiteralJointModel, build_joint_literal
from synergy_opt.joint.model import FORMULATIONS, JointModel, JointReductions, build_joint
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import SolvedModel
from synergy_opt.validation import (
    SOLVER_ARGUMENTS,
    InstanceOf,
    Number,
    OneOf,
    Optional,
    boolean,
    checked,
    round_instance,
)

JointFormulation = Literal["patterns", "servers", "literal"]


@dataclass(frozen=True, eq=False)
class JointResult(SolvedModel):
    """Outcome of :func:`solve_joint`.

    ``objective`` and ``bound`` are the MILP's: the sum of (penalised, when ``split_penalty > 0``) throughput.
    ``evaluation`` is the one evaluator's verdict on ``allocation``; without a split penalty its objective equals
    ``objective``.
    """

    status: Status
    objective: float | None
    bound: float | None
    joint: JointModel | LiteralJointModel
    solve: SolveResult

    @property
    def model_build_seconds(self) -> float:
        """Building the neutral model, with the pattern enumeration."""
        return self.joint.build_seconds

    @property
    def formulation(self) -> str:
        """The formulation solved (patterns may have fallen back to servers, see ``PATTERN_LIMIT``)."""
        return self.joint.formulation

    @cached_property
    def allocation(self) -> Allocation | None:
        """Where every job runs (None when the solve ended without a solution)."""
        if not self.has_solution:
            return None
        return self.joint.allocation(self.solve.solution())

    @cached_property
    def evaluation(self) -> Evaluation | None:
        if self.allocation is None:
            return None
        return evaluate(self.joint.instance, self.allocation)

    @cached_property
    def penalised_objective(self) -> float | None:
        """The objective of the decoded allocation: ``sum W_j (1 - p [j split])`` (GPU-weighted if asked).

        At least ``objective`` (the decoder may place a job the MILP counted as split on one server), equal to
        it at an optimum.
        """
        if self.evaluation is None:
            return None
        p = self.joint.split_penalty
        gpu = self.joint.objective_kind == "gpu"
        return float(sum(
            s.throughput * (s.gpus if gpu else 1) * (1 - p if s.split else 1) for s in self.evaluation.jobs.values()
        ))


@checked(instance=round_instance, consolidate=boolean, split_penalty=Number(0, 1), objective=OBJECTIVE,
         reductions=Optional(InstanceOf(JointReductions)), formulation=OneOf((*FORMULATIONS, "literal")),
         upper_bound=Optional(Number()), **SOLVER_ARGUMENTS)
def solve_joint(
    instance: RoundInstance,
    solver: str = DEFAULT_SOLVER,
    consolidate: bool = True,
    split_penalty: float = 0.0,
    time_limit: float | None = None,
    mip_gap: float = 1e-4,
    *,
    objective: Objective = "job",
    reductions: JointReductions | None = None,
    formulation: JointFormulation = "patterns",
    upper_bound: float | None = None,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> JointResult:
    """Choose every job's per-GPU config and its integral placement together, optimally (SPEC 2.4).

    Parameters
    ----------
    solver
        A registered backend that solves integer models (see :func:`synergy_opt.solvers.available_solvers`).
    consolidate
        Every job whose GPUs fit on one server runs on one server; larger jobs may use any servers.
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
        A proven upper bound on the optimum (for instance the ideal ILP's), added as a cut-off row.

    Returns
    -------
    JointResult
        Status, objective, bound, gap, the decoded ``allocation`` and its ``evaluation``. Limits and
        infeasibility (e.g. jobs that cannot be consolidated) are statuses, never exceptions.
    """
    if formulation == "literal":
        joint: JointModel | LiteralJointModel = build_joint_literal(
            instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective
        )
    elif formulation in FORMULATIONS:
        joint = build_joint(
            instance,
            consolidate=consolidate,
            split_penalty=split_penalty,
            objective=objective,
            reductions=reductions,
            formulation=formulation,
            upper_bound=upper_bound,
        )
    else:
        raise InvalidInputError("formulation", formulation, "choose one of patterns, servers, literal")
    params = SolverParams(time_limit=time_limit, mip_gap=mip_gap, threads=threads, seed=seed, verbose=verbose,
                          options=dict(options or {}))
    result = solve_model(joint.model, solver, params)
    return JointResult(status=result.status, objective=result.objective, bound=result.bound, joint=joint,
                       solve=result)
