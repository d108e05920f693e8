"""The ideal ILP solved through its structure: Lagrangian prices, then an exact search of the core.

1. :func:`~synergy_opt.ideal.lagrangian.solve_dual` prices CPU and memory; its bound ``L`` equals the LP relaxation.
2. For a threshold ``t`` doubling from four times the allowed gap (at most START_GAP): a beam search over the columns of
   reduced cost <= ``t`` tries for an incumbent, of penalty ``p``; failing that, an exact search while it
   keeps few states (its solution is then the optimum, and none means ``t`` must grow), else a wider beam.
3. Proof: no solution is better than the incumbent by more than ``gap = mip_gap * |objective|`` (a MIP
   solver's relative-gap contract) when the relaxations, or else an exact search, find no solution of
   penalty <= ``p - gap``; a better one an exact search finds is then the best there is. An exact search
   that grows large first gives a much wider beam the chance of a better incumbent (a lower ``p``).

The relaxations matter: integrality in memory alone makes nearly all of the gap between the LP and the ILP
on noisy instances, and a one-row search proves it with a few hundred states where the two-row one needs
tens of thousands. HiGHS solves the dual's master LPs; the searches are :mod:`synergy_opt.ideal.core_search`.
The tests compare the result with brute force and with every backend's direct solve of the same model.
"""

from __future__ import annotations

import time

import numpy as np

from synergy_opt.ideal.core_search import (
    Core,
    CoreSolution,
    SearchDeadline,
    SearchOutcome,
    check_deadline,
    core_result,
    prepare,
    search,
)
from synergy_opt.ideal.lagrangian import Dual, Knapsack, solve_dual
from synergy_opt.ideal.model import IdealModel
from synergy_opt.solvers.base import SolveResult, SolverParams, Status
from synergy_opt.solvers.registry import objective_scale

SOLVER_NAME = "highs-core"
# States kept per step by the incumbent's beam searches: a narrow one, and a wider one at the same threshold.
BEAM_WIDTHS = (16, 64)
# While the threshold is low, an exact search of at most this many states per step is tried first.
EXACT_STATE_LIMIT = 4096
# A proof search past this many states stops for a beam this wide to look for a better incumbent, at most
# this many times; then the proof runs to the end.
PROOF_STATE_LIMIT = 50_000
WIDE_BEAM = 512
IMPROVEMENTS = 3
# The first threshold reads the gap allowed, but no larger than this share of |L|: a loose mip_gap (0.5) started
# past every job's worst column, where one exact search of every column took 7 s on a 64-GPU round that 1e-6
# solves in 0.02 s (a tester's finding). Gaps up to it are unchanged.
START_GAP = 1e-3


def solve_core(ideal: IdealModel, params: SolverParams) -> SolveResult:
    """Solve ``ideal`` (an ILP) as the module docstring says; the result reads like any backend's."""
    start = time.perf_counter()
    deadline = None if params.time_limit is None else start + params.time_limit
    # The searches compare values with absolute slacks (1e-9, 1e-10): at throughputs of 1e-12 they read every gain
    # as a tie (a third below the optimum, called OPTIMAL). So they run on the objective solve_model would hand a
    # backend, brought into the solvers' band by a power of two, which changes no comparison.
    unit = objective_scale(ideal.model)
    knapsack = Knapsack.of(ideal, unit).lifted()
    built = time.perf_counter()
    incumbent: CoreSolution | None = None

    def finish(status: Status, upper: float | None, message: str) -> SolveResult:
        upper = None if upper is None else upper / unit
        return core_result(SOLVER_NAME, ideal.model.objective, incumbent, status, upper, message, start, built)

    if not knapsack.value.size:
        incumbent = CoreSolution(np.zeros(0), 0.0)
        return finish(Status.OPTIMAL, 0.0, "optimal: a round without jobs")
    dual = solve_dual(knapsack)
    bound = dual.bound
    searcher = _Searcher(knapsack, dual, deadline)
    try:
        incumbent, proven = _incumbent(searcher, params.mip_gap)
        if incumbent is None:  # the ILP has a solution (every job at the share): missed
            return finish(Status.NO_SOLUTION, None, "the core search found no allocation within its row tolerances, "
                          "where every job at the proportional share is one")
        if proven:
            return finish(Status.OPTIMAL, bound - incumbent.penalty, "optimal: exact core search")
        for attempt in range(IMPROVEMENTS + 1):
            threshold = incumbent.penalty - params.mip_gap * max(abs(bound - incumbent.penalty), 1e-10)
            if threshold < 0 or searcher.relaxation_rules_out(threshold):
                return finish(Status.OPTIMAL, bound - max(threshold, searcher.ruled_out), "optimal within the "
                              f"gap: {dual.iterations} cuts; nothing better is left after the searches")
            # A proof that grows large is retried after a wider beam finds a better incumbent, if it can.
            proof = searcher.exact(threshold, state_limit=None if attempt == IMPROVEMENTS else PROOF_STATE_LIMIT)
            better = None if proof.complete else searcher.beam(threshold, widths=(WIDE_BEAM,))
            if better is None:
                proof = proof if proof.complete else searcher.exact(threshold)
                break
            incumbent = better
    except SearchDeadline:
        status = Status.NO_SOLUTION if incumbent is None else Status.FEASIBLE
        return finish(status, bound - searcher.ruled_out, "time limit during the core search")
    summary = f"core of {proof.core_jobs} jobs searched, {proof.max_states} states at most"
    if proof.solution is not None and proof.solution.penalty < incumbent.penalty:
        incumbent = proof.solution
        return finish(Status.OPTIMAL, bound - incumbent.penalty, f"optimal: {summary}")
    return finish(Status.OPTIMAL, bound - max(threshold, searcher.ruled_out), f"optimal within the gap: {summary}")


class _Searcher:
    """The searches of one solve, sharing its prices, its deadline and the prepared core of each threshold."""

    def __init__(self, knapsack: Knapsack, dual: Dual, deadline: float | None) -> None:
        self.knapsack = knapsack
        self.dual = dual
        self.deadline = deadline
        self.memory_alone = knapsack.without_row(0)
        self._cores: dict[tuple[bool, float], Core] = {}
        self.ruled_out = 0.0  # the largest threshold known to hold no solution: L - ruled_out is a bound

    def _core(self, relaxed: bool, threshold: float) -> Core:
        key = (relaxed, threshold)
        if key not in self._cores:
            if all(known != threshold for _, known in self._cores):
                self._cores = {}  # thresholds only move on: keep the current one's cores
            self._cores[key] = prepare(self.memory_alone if relaxed else self.knapsack, self.dual, threshold)
        return self._cores[key]

    def _run(self, core: Core, beam: int | None = None, state_limit: int | None = None) -> SearchOutcome:
        outcome = search(core, beam=beam, deadline=self.deadline, state_limit=state_limit)
        if not outcome.complete:
            check_deadline(self.deadline)
        return outcome

    def relaxation_rules_out(self, threshold: float) -> bool:
        """True when a one-row relaxation has no solution of penalty <= ``threshold``.

        CPU alone is settled by the root of its exact cost-to-go table; memory alone needs a search.
        """
        if threshold <= self.ruled_out:
            return True
        empty = (self._core(False, threshold).root_bound > threshold
                 or self._run(self._core(True, threshold)).solution is None)
        if empty:
            self.ruled_out = threshold
        return empty

    def beam(self, threshold: float, widths: tuple[int, ...]) -> CoreSolution | None:
        for width in widths:
            found = self._run(self._core(False, threshold), width).solution
            if found is not None:
                return found
        return None

    def exact(self, threshold: float, state_limit: int | None = None) -> SearchOutcome:
        outcome = self._run(self._core(False, threshold), state_limit=state_limit)
        if outcome.complete and outcome.solution is None:
            self.ruled_out = max(self.ruled_out, threshold)
        return outcome


def _incumbent(searcher: _Searcher, mip_gap: float) -> tuple[CoreSolution | None, bool]:
    """A first solution, and whether it is already known optimal.

    On a threshold that doubles: a narrow beam search; when it finds nothing, an exact search while that
    stays small (its solution is then the optimum; none rules the threshold out), else a wider beam.
    """
    dual, knapsack = searcher.dual, searcher.knapsack
    # No solution has a larger penalty than every job at its worst column with all capacity unused.
    worst = float(knapsack.class_count @ np.maximum.reduceat(dual.reduced_cost, knapsack.starts)
                  + dual.multipliers @ knapsack.capacity)
    # Lower thresholds rarely hold a solution (a noisy round's LP gap is several mip_gap): start at four.
    threshold = max(4 * min(mip_gap, START_GAP) * abs(dual.bound), 1e-9 * max(1.0, abs(dual.bound)))
    while threshold < worst:
        narrow, wide = BEAM_WIDTHS
        found = searcher.beam(threshold, (narrow,))
        if found is not None:
            return found, False
        exact = searcher.exact(threshold, state_limit=EXACT_STATE_LIMIT)
        if exact.solution is not None:
            return exact.solution, True
        if not exact.complete:  # too large to settle exactly: a wider beam before the threshold grows
            found = searcher.beam(threshold, (wide,))
            if found is not None:
                return found, False
        threshold *= 2
    return searcher.exact(worst).solution, True
