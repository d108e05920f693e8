"""The type-free ideal ILP solved through its structure (``method="core"``): prices of all ``3T`` coupling rows,
then an exact search of the classes the prices leave open.

1. :func:`~synergy_opt.ideal.lagrangian.solve_dual` prices the GPU, CPU and memory rows of every type (Kelley's
   cutting planes, smoothed); its bound ``L`` equals the LP relaxation's.
2. For a threshold ``t`` growing from ``min(mip_gap, START_GAP) * |L|`` (by half, or to the largest threshold
   ruled out plus that, if more): the exact search (:func:`~synergy_opt.ideal.hetero_search.search`) while it keeps
   few states, whose solution is then the optimum and whose finding none rules ``t`` out; once it grows large,
   a narrow beam search for an incumbent of penalty ``p``, then the split relaxation
   (:mod:`~synergy_opt.ideal.hetero_split`), which may rule ``t`` out, then a wider beam.
3. Proof: no solution is better than the incumbent by more than ``gap = mip_gap * |objective|`` (a MIP solver's
   relative-gap contract) when a threshold ``>= p - gap`` was ruled out, or the split relaxation rules ``p -
   gap`` out, or the exact search finds nothing within it; a better solution it finds is the optimum. A proof
   search that grows large is first tried halfway down to the largest threshold ruled out (a solution there is
   the optimum; none rules it out), then a wider beam may find a better incumbent (a lower ``p``).

Time limits return ``FEASIBLE`` with the incumbent and the bound ``L - t`` of the largest threshold ruled out, or
``NO_SOLUTION``, as the backends do; so do the search's own limits (``INCUMBENT_STEPS`` thresholds without a first
incumbent, ``PROOF_STATE_LIMIT`` states in the last proof), which keep its memory bounded. The ``auto`` method then
hands the round to HiGHS on the whole model (:mod:`~synergy_opt.ideal.hetero_solve`). The tests compare it with
brute force and with HiGHS on the whole model.
"""

from __future__ import annotations

import time

import numpy as np

from synergy_opt.ideal.core_search import (
    CoreSolution,
    SearchDeadline,
    SearchOutcome,
    check_deadline,
    core_result,
)
from synergy_opt.ideal.hetero_knapsack import TypedKnapsack
from synergy_opt.ideal.hetero_model import HeteroIdealModel
from synergy_opt.ideal.hetero_search import Plan, plan, search
from synergy_opt.ideal.hetero_split import split_rules_out
from synergy_opt.ideal.lagrangian import Dual, solve_dual
from synergy_opt.solvers.base import SolveResult, SolverParams, Status
from synergy_opt.solvers.registry import objective_scale

SOLVER_NAME = "highs-hetero-core"
# Kelley's smoothing and stopping rule on the 3T rows (measured: 0.7 halves the cuts at 1024 and 16384 GPUs).
SMOOTHING = 0.7
DUAL_TOLERANCE = 1e-10
DUAL_ITERATIONS = 1000
# The exact search is tried while it keeps at most this many states in a step; past it, beams of these widths.
EXACT_STATE_LIMIT = 50_000
INCUMBENT_STATE_LIMIT = 5_000  # while looking for a first incumbent
BEAM_WIDTHS = (16, 64)
# The incumbent's threshold grows by this factor: a beam's cost grows with its threshold (each type's completions
# get more room), so small steps keep it near the optimum's penalty (measured: 1.5 against 2 on 1024 GPUs).
GROWTH = 1.5
# A proof search past the state limit first lets the wider beam look for a better incumbent, this many times;
# the last proof search may keep this many states (it had no limit: on a noisy multi-GPU 3 x 128-GPU round, seed 5,
# under a 60 s time limit, the core search's searches filled 24 GB).
IMPROVEMENTS = 3
# The first threshold (and the least step) is the gap allowed, but no larger than this share of |L|: at a loose
# mip_gap (0.2) the first cores held nearly every column (3 x 128-GPU noisy multi-GPU: 5.3 s against 0.24 s at
# 1e-6; a tester's finding). Gaps up to it are unchanged.
START_GAP = 1e-3
PROOF_STATE_LIMIT = 4 * EXACT_STATE_LIMIT
# Thresholds the beams try for a first incumbent before the search gives up (NO_SOLUTION, which the auto method
# hands to HiGHS on the whole model). Measured on noisy rounds (3 x 128 GPUs, seeds 0-19 multi-GPU and 0-9
# single-GPU; 1024 GPUs, seeds 0-3; 3 x 1024 multi-GPU, seeds 0-2): where the beams find one, they do at the
# first threshold or (five 3 x 128 multi-GPU rounds) within three; on seeds 5 and 18 they find none at any, and
# their wide beams take 2 s each past the third (HiGHS on the whole model: 1.5-2.8 s).
INCUMBENT_STEPS = 3


def solve_core(ideal: HeteroIdealModel, params: SolverParams) -> SolveResult:
    """Solve the type-free ILP ``ideal`` (floors fixed) as the module docstring says."""
    start = time.perf_counter()
    deadline = None if params.time_limit is None else start + params.time_limit
    unit = objective_scale(ideal.model)  # in the solvers' band, as the one-type core search (ideal/core.py)
    knapsack = TypedKnapsack.of(ideal, unit).lifted()
    built = time.perf_counter()
    incumbent: CoreSolution | None = None

    def finish(status: Status, upper: float | None, message: str, exact: bool = False) -> SolveResult:
        objective = None if incumbent is None else float(ideal.model.objective @ incumbent.y)
        upper = None if upper is None else upper / unit
        if upper is not None and objective is not None:
            # The penalty is summed in another order than the objective: the optimum an exact search found is
            # its own bound, and no bound is below the objective.
            upper = objective if exact else max(upper, objective)
        return core_result(SOLVER_NAME, ideal.model.objective, incumbent, status, upper, message, start, built)

    if not knapsack.value.size:
        incumbent = CoreSolution(np.zeros(0), 0.0)
        return finish(Status.OPTIMAL, 0.0, "optimal: a round without jobs")
    dual = solve_dual(knapsack, tolerance=DUAL_TOLERANCE, max_iterations=DUAL_ITERATIONS, smoothing=SMOOTHING)
    searcher = _Searcher(knapsack, dual, deadline)
    bound = dual.bound
    try:
        incumbent, proven = searcher.incumbent(params.mip_gap)
        if incumbent is None and proven:  # the ILP has a solution (every job at its baseline share): missed
            return finish(Status.NO_SOLUTION, None, f"the core search found no allocation within its row "
                          f"tolerances, where every job at its baseline share is one; {searcher}")
        if incumbent is None:
            return finish(Status.NO_SOLUTION, bound - searcher.ruled_out,
                          f"the core search found no solution within its limits; {searcher}")
        if proven:
            return finish(Status.OPTIMAL, bound - incumbent.penalty, f"optimal: exact core search; {searcher}", True)
        for attempt in range(IMPROVEMENTS + 1):
            threshold = incumbent.penalty - params.mip_gap * max(abs(bound - incumbent.penalty), 1e-10)
            if searcher.rules_out(threshold):
                return finish(Status.OPTIMAL, bound - max(threshold, searcher.ruled_out),
                              f"optimal within the gap: nothing better is left; {searcher}")
            limit = PROOF_STATE_LIMIT if attempt == IMPROVEMENTS else EXACT_STATE_LIMIT
            proof = searcher.exact(threshold, state_limit=limit)
            if proof.complete:
                break
            if attempt == IMPROVEMENTS:
                return finish(Status.FEASIBLE, bound - searcher.ruled_out,
                              f"the core search's proof passed its state limit; {searcher}")
            # Past the limit: halfway down to what is ruled out the search is smaller, and its best is the optimum.
            probe = searcher.exact((searcher.ruled_out + threshold) / 2, state_limit=EXACT_STATE_LIMIT)
            if probe.solution is not None:
                incumbent = probe.solution
                return finish(Status.OPTIMAL, bound - incumbent.penalty, f"optimal: exact core search; {searcher}",
                              True)
            better = None if probe.complete else searcher.beam(threshold, BEAM_WIDTHS[-1:])
            if better is not None:
                incumbent = better
    except SearchDeadline:
        status = Status.NO_SOLUTION if incumbent is None else Status.FEASIBLE
        return finish(status, bound - searcher.ruled_out, f"time limit during the core search; {searcher}")
    if proof.solution is not None and proof.solution.penalty < incumbent.penalty:
        incumbent = proof.solution
        return finish(Status.OPTIMAL, bound - incumbent.penalty, f"optimal: exact core search; {searcher}", True)
    return finish(Status.OPTIMAL, bound - max(threshold, searcher.ruled_out),
                  f"optimal within the gap: nothing better is left; {searcher}")


class _Searcher:
    """The searches of one solve, sharing its prices, its deadline and what they ruled out."""

    def __init__(self, knapsack: TypedKnapsack, dual: Dual, deadline: float | None) -> None:
        self.knapsack = knapsack
        self.dual = dual
        self.deadline = deadline
        self.ruled_out = 0.0  # the largest threshold known to hold no solution: L - ruled_out is a bound
        self._plan: Plan | None = None
        self.searches = 0
        self.max_states = 0
        self.core_jobs = 0
        # Searches are deterministic in (threshold, beam, state limit): the proof's attempts repeat one at an
        # unchanged incumbent (a small noisy round ran the same 0.35 s search three times), so each runs once.
        self._outcomes: dict[tuple[float, int | None, int | None], SearchOutcome] = {}
        self._not_ruled_out: set[float] = set()  # thresholds the split relaxation did not rule out

    def __str__(self) -> str:
        return (f"{self.dual.iterations} cuts, {self.searches} searches, a core of {self.core_jobs} jobs at most, "
                f"{self.max_states} states at most")

    def _run(self, threshold: float, beam: int | None = None, state_limit: int | None = None) -> SearchOutcome:
        known = self._outcomes.get((threshold, beam, state_limit))
        if known is not None:
            return known
        if self._plan is None or self._plan.threshold != threshold:
            self._plan = plan(self.knapsack, self.dual, threshold)  # thresholds only move on: keep the last
        outcome = search(self._plan, beam=beam, deadline=self.deadline, state_limit=state_limit)
        self.searches += 1
        self.max_states = max(self.max_states, outcome.max_states)
        self.core_jobs = max(self.core_jobs, outcome.core_jobs)
        check_deadline(self.deadline)  # a search the deadline cut short raises here, before it is kept
        self._outcomes[(threshold, beam, state_limit)] = outcome
        return outcome

    def exact(self, threshold: float, state_limit: int | None = None) -> SearchOutcome:
        outcome = self._run(threshold, state_limit=state_limit)
        if outcome.complete and outcome.solution is None:
            self.ruled_out = max(self.ruled_out, threshold)
        return outcome

    def beam(self, threshold: float, widths: tuple[int, ...]) -> CoreSolution | None:
        for width in widths:
            found = self._run(threshold, beam=width).solution
            if found is not None:
                return found
        return None

    def rules_out(self, threshold: float) -> bool:
        """True when no solution has penalty ``<= threshold``: ruled out before, or by the split relaxation."""
        if threshold <= self.ruled_out:
            return True
        if threshold in self._not_ruled_out:
            return False
        empty = split_rules_out(self.knapsack, self.dual, threshold, deadline=self.deadline,
                                state_limit=EXACT_STATE_LIMIT)
        check_deadline(self.deadline)
        if empty:
            self.ruled_out = threshold
        else:
            self._not_ruled_out.add(threshold)
        return empty

    def incumbent(self, mip_gap: float) -> tuple[CoreSolution | None, bool]:
        """A first solution, and whether it is already known optimal (module docstring, step 2); ``(None, True)``
        when the searches found none at the worst threshold (the ILP has one: a miss, within the row slacks),
        ``(None, False)`` when the search gave up (``INCUMBENT_STEPS``, or the state limit
        at the largest threshold)."""
        dual, knapsack = self.dual, self.knapsack
        # No solution has a larger penalty than every job at its worst column with all capacity unused.
        worst = float(knapsack.class_count @ np.maximum.reduceat(dual.reduced_cost, knapsack.starts)
                      + dual.multipliers @ knapsack.capacity)
        allowed = max(min(mip_gap, START_GAP) * abs(dual.bound), 1e-9 * max(1.0, abs(dual.bound)))
        # Thresholds start at the gap allowed, not below it (a fuzzed 16-job round at 1e-4 whose first threshold is
        # past the exact search's state limit, where 1e-6's finds the optimum, ends by INCUMBENT_STEPS and HiGHS
        # in 0.2 s; starting at 1e-6 on every gap took noisy multi-GPU 3 x 128-GPU seed 2 from 1.7 to 4.6 s, and
        # the joint's bound from it from 1.9 to 11 s).
        threshold = allowed
        small = True  # exact searches stay small (thresholds only grow: once one grows large, beams only)
        steps = 0
        while threshold < worst:
            if small:
                exact = self.exact(threshold, state_limit=INCUMBENT_STATE_LIMIT)
                if exact.solution is not None:
                    return exact.solution, True
                small = exact.complete
            if not small:
                steps += 1
                if steps > INCUMBENT_STEPS:
                    return None, False
                # The narrow beam, then the split relaxation (below the optimum's penalty it rules the threshold
                # out for less than a wider beam that cannot find anything), then the wider beam.
                found = self.beam(threshold, BEAM_WIDTHS[:1])
                if found is None and not self.rules_out(threshold):
                    found = self.beam(threshold, BEAM_WIDTHS[1:])
                if found is not None:
                    return found, False
            # An incumbent within what was ruled out and the gap is proven at once: no smaller step is needed.
            threshold = max(GROWTH * threshold, self.ruled_out + allowed)
        # Every threshold up to the worst one: an exact search of all of them, within a state limit (the rounds
        # whose beams found nothing kept millions of states here: gigabytes, and minutes past a time limit).
        last = self.exact(worst, state_limit=EXACT_STATE_LIMIT)
        return (last.solution, True) if last.complete else (None, False)
