"""Gavel's water-filling max-min fairness (``max_min_fairness_water_filling_perf``) by a sequence of LPs.

formulations/policies.md, rows W1-W3. Max-min fairness (rows M1-M2) raises only the least normalised
throughput; any optimum of its LP may leave the others wherever a vertex puts them. Water filling raises every
job as far as it can, the least first: the leximin optimum, the unique vector of values ``v_i = sum_t c[i, t]
x[i, t]`` (``c`` of row M2) whose increasing order is lexicographically largest (unique: the feasible values
form a convex set). Level by level:

- W1, the level: maximise ``z`` subject to B1-B3, ``v_i >= z`` for every job not yet frozen, ``v_i >= f_i`` for
  every frozen job (its level ``f_i``).
- W2, the bottlenecks: a job not frozen is a bottleneck when no solution of W1 at ``z*`` lifts it above ``z*``.
  An LP finds them exactly: maximise ``sum e_i`` over the undecided jobs subject to ``v_i - e_i >= z*``, ``0 <=
  e_i <= 1e-3 z*``, the others at ``v_i >= z*``, frozen jobs at their levels; a job with ``e_i > 0`` can rise and is
  decided free; when none can, every undecided job is a bottleneck (some solution lifts each free job, and
  their average lifts all at once, so the LP's optimum is 0 exactly when no undecided job can rise).
- W2', with a backend that reports duals (HiGHS): a free job whose row ``v_i >= z`` has a positive dual at W1's
  optimum is a bottleneck (complementary slackness: the row is tight in every optimum of W1, so no solution at
  ``z*`` lifts the job), and the others stay free: no W2 LP. A bottleneck whose dual is 0 at that basis is
  frozen at the next level, which is then ``z*`` again. On 5,000 distinct jobs (HiGHS's simplex) W2 lifted one
  job an LP: the level's LP ends within its tolerance, 2e-8 below the optimum, and that room lets any one job
  rise 3e-4; W2' takes one LP. W2 on the other backends can meet the same at scale (not on the tests' sizes).
- W3: the bottlenecks freeze at ``z*``; repeat until every job is frozen. The time fractions are the last
  level's solution.

Gavel finds the bottlenecks by a MILP (GLPK) with a relative slack of 1e-4; here a job counts as lifted when it
rises by ``RISE`` (1e-6) of the level, and levels are kept exactly (``GIVES``). Jobs alike in ``c``, scale
factor and usable types are one class (``aggregate``): exact, as the leximin optimum is unique and so gives
alike jobs alike values.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from synergy_opt.policies.max_min import max_min_classes
from synergy_opt.policies.problem import PolicyProblem, add_time_fractions
from synergy_opt.policies.result import PolicyResult
from synergy_opt.policies.solve import IPM_FROM_ROWS, Solved, idle_result, lp_params, solve_lp
from synergy_opt.solvers import DEFAULT_SOLVER, Status
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import InstanceOf, boolean, checked

# Levels are asked of later LPs exactly (a loosened floor frees room that a lift can take: 1e-9 of every floor
# let one job of a near-degenerate problem rise 2e-5 above its true level, so one level split in two); only when
# a backend does not solve that LP, which is feasible (the last solution meets it) but for its tolerances, is it
# solved again with the floors this much lower (relative), in turn.
GIVES = (0.0, 1e-9, 1e-7)
# A job is lifted (not a bottleneck) when it can rise this much above the level, relative to the level.
RISE = 1e-6
# The most a job is lifted in W2, relative to the level: small, so that the LP's optimum lifts many jobs a little
# rather than the cheapest ones a lot, and each W2 LP decides more jobs.
CAP = 1e-3
# A level row's dual above this (they sum to 1 over the free rows: z's cost) marks a bottleneck (W2').
DUAL = 1e-9
POLICY = "max_min_fairness_water_filling"


def _levels_model(problem: PolicyProblem, coefficients: np.ndarray, rows: np.ndarray, counts: np.ndarray,
                  counted: np.ndarray, lower: np.ndarray, lifted: np.ndarray, shared: bool, cap: float
                  ) -> LinearModel:
    """Rows B1-B3 and, for each counted class ``k``, ``v_k - lift_k >= lower[k]``: ``lift`` is one column ``z``
    shared by the ``lifted`` classes (W1, ``shared``) or a column ``e_k`` in ``[0, cap]`` each (W2), 0 for the
    others; the objective is the lifts' sum."""
    builder = ModelBuilder("water_filling", "max")
    x = add_time_fractions(builder, problem, counts, rows)
    types = problem.num_types
    lift = builder.add_vars("lift", 1 if shared else lifted.size, upper=np.inf if shared else cap, objective=1.0)
    local = np.arange(counted.size)
    row_ids = np.concatenate([np.repeat(local, types), lifted])
    col_ids = np.concatenate([x.start + (counted[:, None] * types + np.arange(types)).ravel(),
                              np.full(lifted.size, lift.start) if shared else lift.start + np.arange(lifted.size)])
    values = np.concatenate([coefficients[counted].ravel(), -np.ones(lifted.size)])
    builder.add_rows("levels", row_ids, col_ids, values, lower=lower, count=counted.size)
    return builder.build()


@checked(problem=InstanceOf(PolicyProblem), aggregate=boolean, **SOLVER_ARGUMENTS)
def solve_water_filling(
    problem: PolicyProblem,
    solver: str = DEFAULT_SOLVER,
    *,
    aggregate: bool = True,
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Gavel's water-filling max-min fairness on ``problem`` by any LP backend (the module docstring);
    ``objective`` is the least normalised throughput (max-min's optimum), ``iterations`` the LPs solved.

    ``time_limit`` bounds the whole sequence: an LP that does not end optimal ends it, with that LP's status
    and no allocation."""
    started = time.perf_counter()
    deadline = None if time_limit is None else started + time_limit
    coefficients, rows, class_of, counts, counted = max_min_classes(problem, aggregate)
    frozen = np.full(counted.size, np.nan)  # each counted class's level, once frozen
    solves: list[tuple[LinearModel, Solved]] = []

    def solve(lower: np.ndarray, lifted: np.ndarray, *, shared: bool, cap: float = np.inf
              ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The lifts at the LP's optimum and its level rows' duals (when the backend reports them); None when
        it does not end optimal. The floors ``lower`` are given a little in turn while the backend does not solve
        the LP (``GIVES``)."""
        for give in GIVES:
            built = time.perf_counter()
            model = _levels_model(problem, coefficients, rows, counts, counted, lower * (1 - give), lifted, shared,
                                  cap)
            left = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
            params = lp_params(left, mip_gap, threads, seed, verbose, _lp_options(model, solver, options))
            solved = solve_lp(model, problem.num_types, solver, params, time.perf_counter() - built)
            solves.append((model, solved))
            # Not optimal and not for the time limit: a backend's tolerances (HiGHS: infeasible; GLPK: no
            # solution; CBC: an "optimal" point 1.2 off the rows, refused by the backend as an error).
            if solved.result.status is Status.OPTIMAL or (deadline is not None and time.perf_counter() >= deadline):
                break
        if solved.result.status is not Status.OPTIMAL:
            return None
        duals = solved.result.row_duals
        return (np.asarray(solved.result.values(model, "lift")),
                None if duals is None else np.abs(duals[model.con_blocks["levels"]]))

    level_solve: int | None = None  # the last level's LP (W1): its fractions are the allocation
    least = None
    while np.isnan(frozen).any():
        free = np.flatnonzero(np.isnan(frozen))
        floors = np.where(np.isnan(frozen), 0.0, frozen)
        solved = solve(floors, free, shared=True)  # W1
        if solved is None:
            level_solve = None
            break
        level_solve, level = len(solves) - 1, float(solved[0][0])
        least = level if least is None else least
        floors[free] = level
        if solved[1] is not None:  # a row of positive dual is tight in every optimum: a bottleneck (W2')
            stuck: np.ndarray | None = free[solved[1][free] > DUAL]
        else:
            stuck = _bottlenecks(free, level, partial(solve, floors, shared=False, cap=CAP * max(level, RISE)))
        if stuck is None:
            level_solve = None
            break
        frozen[stuck] = level  # W3
    return _result(problem, solves, level_solve, class_of, least, started)


def _lp_options(model: LinearModel, solver: str, options: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The user's options, or for HiGHS on a large LP without any, its interior-point method with crossover (a
    vertex, so that W2' reads a basis's duals): 10,000 distinct jobs 0.7 s where the simplex took 16 s."""
    if options or solver != DEFAULT_SOLVER or model.num_cons <= IPM_FROM_ROWS:
        return dict(options or {})
    return {"solver": "ipm", "run_crossover": "on"}


def _bottlenecks(free: np.ndarray, level: float,
                 lifts: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None] | None]) -> np.ndarray | None:
    """W2: the free classes no solution at ``level`` lifts, ``lifts(undecided)`` giving each one's lift at the
    LP's optimum first (None: the LP did not end optimal, then None)."""
    undecided = free
    while True:
        solved = lifts(undecided)
        if solved is None:
            return None
        rise = solved[0]
        up = rise > RISE * max(level, RISE)
        if up.all():  # only within the LPs' tolerances (W1's level is the most all can have): the least stay
            up = rise > rise.min()
        if not up.any():
            return undecided
        undecided = undecided[~up]


def _result(problem: PolicyProblem, solves: list[tuple[LinearModel, Solved]], level_solve: int | None,
            class_of: np.ndarray, least: float | None, started: float) -> PolicyResult:
    """The policy's result: the last level's fractions per job (every class's row, zeros for classes that can
    run nowhere), the least level, and the last LP's solve (the one that failed, if any)."""
    if not solves:
        return idle_result(POLICY, problem, started)
    build = sum(solved.build_seconds for _, solved in solves)
    seconds = sum(solved.solve_seconds for _, solved in solves)
    x = None if level_solve is None else solves[level_solve][1].x
    fractions = None if x is None else x[class_of]
    return PolicyResult(POLICY, problem, fractions, least if fractions is not None else None, solves[-1][1].result,
                        len(solves), build, seconds)
