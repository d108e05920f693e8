"""The ideal ILP solved through its structure: Lagrangian prices, then an exact search of the core.

1. :func:`~synergy_opt.lagrangian.solve_dual` prices CPU and memory; its bound ``L`` equals the LP relaxation.
2. For a threshold ``t`` growing fourfold from the allowed gap: if a relaxation (one row dropped) has no
   solution of penalty <= ``t``, neither has the ILP, so ``t`` grows; else a beam search over the columns of
   reduced cost <= ``t`` tries for an incumbent, of penalty ``p``.
3. Proof: no solution is better than the incumbent by more than ``gap = mip_gap * |objective|`` (a MIP
   solver's relative-gap contract) when the relaxations, or else an exact search, find no solution of
   penalty <= ``p - gap``; a better one an exact search finds is then the best there is.

The relaxations matter: integrality in memory alone makes nearly all of the gap between the LP and the ILP
on noisy instances, and a one-row search proves it with a few hundred states where the two-row one needs
tens of thousands. HiGHS solves the dual's master LPs; the searches are :mod:`synergy_opt.core_search`.
The tests compare the result with brute force and with every backend's direct solve of the same model.
"""

from __future__ import annotations

import time

import numpy as np

from synergy_opt.builders.ideal import IdealModel
from synergy_opt.core_search import CoreSolution, SearchOutcome, root_bound, search
from synergy_opt.lagrangian import Dual, Knapsack, solve_dual
from synergy_opt.solvers.base import SolveResult, SolverParams, Status

SOLVER_NAME = "highs-core"
# States kept per step by the incumbent's beam search.
BEAM_WIDTH = 16


class _Deadline(Exception):
    """The time limit passed during a search."""


def solve_core(ideal: IdealModel, params: SolverParams) -> SolveResult:
    """Solve ``ideal`` (an ILP) as the module docstring says; the result reads like any backend's."""
    start = time.perf_counter()
    deadline = None if params.time_limit is None else start + params.time_limit
    knapsack = Knapsack.of(ideal)
    built = time.perf_counter()
    dual = solve_dual(knapsack)
    bound = dual.bound
    incumbent: CoreSolution | None = None

    def finish(status: Status, upper: float | None, message: str) -> SolveResult:
        objective = None if incumbent is None else float(knapsack.value @ incumbent.y)
        return SolveResult(
            status=status, solver=SOLVER_NAME, objective=objective, bound=upper,
            x=None if incumbent is None else incumbent.y, build_seconds=built - start,
            solve_seconds=time.perf_counter() - built, message=message, native_status=message,
        )

    searcher = _Searcher(knapsack, dual, deadline)
    try:
        incumbent = _incumbent(searcher, params.mip_gap)
        if incumbent is None:
            return finish(Status.INFEASIBLE, None, "no allocation meets the capacities")
        threshold = incumbent.penalty - params.mip_gap * max(abs(bound - incumbent.penalty), 1e-10)
        if threshold < 0 or searcher.relaxation_rules_out(threshold):
            return finish(Status.OPTIMAL, bound - max(threshold, 0.0), "optimal within the gap: "
                          f"{dual.iterations} cuts; a one-row relaxation rules out anything better")
        proof = searcher.exact(threshold)
    except _Deadline:
        status = Status.NO_SOLUTION if incumbent is None else Status.FEASIBLE
        return finish(status, bound, "time limit during the core search")
    summary = f"core of {proof.core_jobs} jobs searched, {proof.max_states} states at most"
    if proof.solution is not None and proof.solution.penalty < incumbent.penalty:
        incumbent = proof.solution
        return finish(Status.OPTIMAL, bound - incumbent.penalty, f"optimal: {summary}")
    return finish(Status.OPTIMAL, bound - threshold, f"optimal within the gap: {summary}")


class _Searcher:
    """The searches of one solve, sharing its prices and deadline."""

    def __init__(self, knapsack: Knapsack, dual: Dual, deadline: float | None) -> None:
        self.knapsack = knapsack
        self.dual = dual
        self.deadline = deadline
        self.memory_alone = knapsack.without_row(0)

    def _run(self, knapsack: Knapsack, threshold: float, beam: int | None = None) -> SearchOutcome:
        outcome = search(knapsack, self.dual, threshold, beam=beam, deadline=self.deadline)
        if not outcome.complete:
            raise _Deadline
        return outcome

    def relaxation_rules_out(self, threshold: float) -> bool:
        """True when a one-row relaxation has no solution of penalty <= ``threshold``."""
        return self.relaxed_solution(threshold) is None

    def relaxed_solution(self, threshold: float) -> CoreSolution | None:
        """The best solution of memory alone with penalty <= ``threshold``, unless CPU alone rules one out.

        CPU alone is settled by the root of its exact cost-to-go table; memory alone needs a search.
        """
        if root_bound(self.knapsack, self.dual, threshold) > threshold:
            return None
        return self._run(self.memory_alone, threshold).solution

    def as_solution(self, relaxed: CoreSolution) -> CoreSolution | None:
        """A relaxed solution that happens to fit the CPUs too, with its penalty in the full problem."""
        knapsack = self.knapsack
        if knapsack.cpu @ relaxed.y > knapsack.capacity[0] + 1e-9 * max(1.0, knapsack.capacity[0]):
            return None
        return CoreSolution(relaxed.y, self.dual.bound - float(knapsack.value @ relaxed.y))

    def beam(self, threshold: float) -> CoreSolution | None:
        return self._run(self.knapsack, threshold, BEAM_WIDTH).solution

    def exact(self, threshold: float) -> SearchOutcome:
        return self._run(self.knapsack, threshold)


def _incumbent(searcher: _Searcher, mip_gap: float) -> CoreSolution | None:
    """A first solution, on a growing threshold that skips what a relaxation rules out: the relaxation's own
    solution when it fits the CPUs, else a beam search's."""
    dual, knapsack = searcher.dual, searcher.knapsack
    # No solution has a larger penalty than every job at its worst column with all capacity unused.
    worst = float(knapsack.class_count @ np.maximum.reduceat(dual.reduced_cost, knapsack.starts)
                  + dual.multipliers @ knapsack.capacity)
    threshold = max(mip_gap * abs(dual.bound), 1e-9 * max(1.0, abs(dual.bound)))
    while threshold < worst:
        relaxed = searcher.relaxed_solution(threshold)
        if relaxed is not None:
            found = searcher.as_solution(relaxed)
            # Taken only when as good as the threshold: a worse one would make the proof search wider.
            if found is None or found.penalty > threshold:
                found = searcher.beam(threshold)
            if found is not None:
                return found
        threshold *= 4
    return searcher.exact(worst).solution
