"""The ideal ILP solved through its structure: Lagrangian prices, then an exact search of the core.

1. :func:`~synergy_opt.lagrangian.solve_dual` prices CPU and memory; its bound ``L`` equals the LP relaxation.
2. A beam search over the columns of reduced cost <= ``t`` (``t`` growing fourfold until it succeeds) gives an
   incumbent of penalty ``p``.
3. An exact search over the columns of reduced cost <= ``p - gap`` either finds a better solution (then the
   best there is, since every other solution has a larger penalty) or proves that none is better than the
   incumbent by more than ``gap = mip_gap * |objective|``, exactly the contract of a MIP solver's relative gap.

HiGHS solves the dual's master LPs; the search is this module's own. It is exact: the tests compare it with
brute force and with every backend's direct solve of the same model.
"""

from __future__ import annotations

import time

import numpy as np

from synergy_opt.builders.ideal import IdealModel
from synergy_opt.core_search import CoreSolution, search
from synergy_opt.lagrangian import Knapsack, solve_dual
from synergy_opt.solvers.base import SolveResult, SolverParams, Status

SOLVER_NAME = "highs-core"
# States kept per step by the incumbent's beam search.
BEAM_WIDTH = 16


def solve_core(ideal: IdealModel, params: SolverParams) -> SolveResult:
    """Solve ``ideal`` (an ILP) as the module docstring says; the result reads like any backend's."""
    start = time.perf_counter()
    deadline = None if params.time_limit is None else start + params.time_limit
    knapsack = Knapsack.of(ideal)
    built = time.perf_counter()
    dual = solve_dual(knapsack)
    bound = dual.bound
    incumbent = _incumbent(knapsack, dual, params.mip_gap, deadline)

    def finish(status: Status, solution: CoreSolution | None, upper: float | None, message: str) -> SolveResult:
        objective = None if solution is None else float(knapsack.value @ solution.y)
        return SolveResult(
            status=status, solver=SOLVER_NAME, objective=objective, bound=upper,
            x=None if solution is None else solution.y, build_seconds=built - start,
            solve_seconds=time.perf_counter() - built, message=message, native_status=message,
        )

    if incumbent is None:
        if deadline is not None and time.perf_counter() > deadline:
            return finish(Status.NO_SOLUTION, None, bound, "time limit before a first solution")
        return finish(Status.INFEASIBLE, None, None, "no allocation meets the capacities")
    slack = params.mip_gap * max(abs(bound - incumbent.penalty), 1e-10)
    threshold = incumbent.penalty - slack
    if threshold < 0:
        return finish(Status.OPTIMAL, incumbent, bound, f"within the gap of the Lagrangian bound ({dual.iterations} cuts)")
    proof = search(knapsack, dual, threshold, deadline=deadline)
    if not proof.complete:
        return finish(Status.FEASIBLE, incumbent, bound, "time limit during the core search")
    if proof.solution is not None and proof.solution.penalty < incumbent.penalty:
        return finish(Status.OPTIMAL, proof.solution, bound - proof.solution.penalty,
                      f"optimal: core of {proof.core_jobs} jobs searched, {proof.max_states} states at most")
    return finish(Status.OPTIMAL, incumbent, bound - threshold,
                  f"optimal within the gap: core of {proof.core_jobs} jobs searched, {proof.max_states} states at most")


def _incumbent(knapsack: Knapsack, dual, mip_gap: float, deadline: float | None) -> CoreSolution | None:
    """A first solution from beam searches on a growing threshold; an exact search once it covers everything."""
    rc = dual.reduced_cost
    # No solution has a larger penalty than every job at its worst column with all capacity unused.
    worst = float(knapsack.class_count @ np.maximum.reduceat(rc, knapsack.starts)
                  + dual.multipliers @ knapsack.capacity)
    threshold = max(4 * mip_gap * abs(dual.bound), 1e-9 * max(1.0, abs(dual.bound)))
    while True:
        covers_all = threshold >= worst
        outcome = search(knapsack, dual, threshold, beam=None if covers_all else BEAM_WIDTH, deadline=deadline)
        if outcome.solution is not None or covers_all or not outcome.complete:
            return outcome.solution
        threshold *= 4
