"""Gavel's water-filling max-min fairness (``max_min_fairness_water_filling_perf``) by a sequence of LPs.

formulations/policies.md, rows W1-W3. Max-min fairness (rows M1-M2) raises only the least normalised
throughput; any optimum of its LP may leave the others wherever a vertex puts them. Water filling raises every
job as far as it can, the least first: the leximin optimum, the unique vector of values ``v_i = sum_t c[i, t]
x[i, t]`` (``c`` of row M2) whose increasing order is lexicographically largest (unique: the feasible values
form a convex set). Level by level:

- W1, the level: maximise ``z`` subject to B1-B3, ``v_i >= z`` for every job not yet frozen, ``v_i >= f_i`` for
  every frozen job (its level ``f_i``).
- W2, the bottlenecks: a free job whose row ``v_i >= z`` has a positive dual at an optimum of W1's dual is a
  bottleneck: by complementary slackness the row is tight in every optimum of W1, so no solution at ``z*``
  lifts the job. The duals are HiGHS's own (``SolveResult.row_duals``), or, from a backend that reports none,
  those of W1's dual LP solved by the same backend. A bottleneck whose dual happens to be 0 stays free and is
  frozen at the next level, which is then ``z*`` again; the duals of the free rows sum to 1, so every level
  freezes at least one job.
- W3: the bottlenecks freeze at ``z*``; repeat until every job is frozen. The time fractions are the last
  level's solution.

Gavel finds the bottlenecks by a MILP (GLPK) with a relative slack of 1e-4. Here levels are kept exactly
(``GIVES``): a floor loosened by 1e-9 freed room that let a near-degenerate problem's level split in two. An
earlier form of W2 (an LP lifting the undecided jobs, without duals) lifted one job an LP on 5,000 distinct
jobs, as the level's LP ends within its tolerance below the optimum and any one job could take that room.
Jobs alike in ``c``, scale factor and usable types are one class (``aggregate``): exact, as the leximin optimum
is unique and so gives alike jobs alike values.

With ``entities`` (W4, Gavel's hierarchical policies, :mod:`synergy_opt.policies.hierarchy`) the weights change
between levels, so a level lifts each job from its own value at its current weight's rate; W2's bottlenecks
stay those of the level's LP. Against Gavel's own code (run by a session outside the repository) on 50 problems of
its hierarchical notebook's kind with random throughputs (3 entities of weights 1-3, 3-18 jobs, fair and FIFO):
48 within 1e-3, on two FIFO problems Gavel's MILP froze a job early (0.14 off); on the notebook's own 36 problems
(Gavel's throughputs, ``benchmarks/bench_hierarchical.py``) 30, Gavel's allocation Pareto-dominated on the other
6. Here every one is within 5e-13 of the test's independent reference.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from synergy_opt.policies.hierarchy import Entities, Rates
from synergy_opt.policies.max_min import add_level_rows, least_normalised, level_unit, max_min_classes
from synergy_opt.policies.problem import PolicyProblem, add_time_fractions
from synergy_opt.policies.result import PolicyResult
from synergy_opt.policies.solve import Solved, idle_result, large_lp_options, lp_params, solve_lp
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import InstanceOf, Optional, boolean, checked

# Levels are asked of later LPs exactly; only when a backend does not solve such an LP, which is feasible (the
# last solution meets it) but for the backend's tolerances, is it solved again with its floors this much lower
# (relative), in turn (HiGHS found one infeasible, GLPK gave no solution, CBC an "optimal" point 1.2 off its rows).
GIVES = (0.0, 1e-9, 1e-7)
# A level row's dual above this marks a bottleneck (the free rows' duals sum to 1: z's cost).
DUAL = 1e-9
POLICY = "max_min_fairness_water_filling"


def _level_model(problem: PolicyProblem, coefficients: np.ndarray, rows: np.ndarray, counts: np.ndarray,
                 counted: np.ndarray, floors: np.ndarray, free: np.ndarray, unit: float) -> LinearModel:
    """W1: rows B1-B3 and, for each counted class ``k`` (position in ``counted``), ``v_k - unit z >= 0`` if ``k``
    is ``free``, else ``v_k >= floors[k]``; maximise ``z`` (the block ``z``, the level in units of ``unit``; the
    level rows are the block ``levels``)."""
    builder = ModelBuilder("water_filling", "max")
    x = add_time_fractions(builder, problem, counts, rows)
    z = builder.add_vars("z", 1, objective=1.0)
    add_level_rows(builder, "levels", x, z, coefficients, counted, free, floors, equilibrate=True, unit=unit)
    return builder.build()


def _level_dual_model(problem: PolicyProblem, coefficients: np.ndarray, rows: np.ndarray, counts: np.ndarray,
                      counted: np.ndarray, floors: np.ndarray, free: np.ndarray) -> LinearModel:
    """W1's dual: prices ``p >= 0`` of the types' GPUs (B2), ``q >= 0`` of each counted class's time (B3), ``y >= 0``
    of its level row; minimise ``sum_t gpus[t] p[t] + sum_k q[k] - sum_k floors[k] y[k]`` subject to, for every
    usable ``(k, t)``, ``weight[k] p[t] + q[k] - c[k, t] y[k] >= 0`` (weight: GPUs times class size), and ``sum``
    of the free rows' ``y >= 1`` (``z``'s column). Classes that can run nowhere have no column to price."""
    types = problem.num_types
    builder = ModelBuilder("water_filling_dual", "min")
    p = builder.add_vars("p", types, objective=problem.gpus.astype(float))
    q = builder.add_vars("q", counted.size, objective=1.0)
    y = builder.add_vars("y", counted.size, objective=-floors)
    k, t = np.nonzero(coefficients[counted] > 0)
    weight = (problem.scale_factors[rows] * counts)[counted].astype(float)
    local = np.arange(k.size)
    builder.add_rows("columns", np.tile(local, 3), np.concatenate([p.start + t, q.start + k, y.start + k]),
                     np.concatenate([weight[k], np.ones(k.size), -coefficients[counted][k, t]]), lower=0.0,
                     count=k.size, equilibrate=True)
    builder.add_rows("z", np.zeros(free.size, dtype=np.int64), y.start + free, np.ones(free.size), lower=1.0, count=1)
    return builder.build()


@checked(problem=InstanceOf(PolicyProblem), entities=Optional(InstanceOf(Entities)), aggregate=boolean,
         **SOLVER_ARGUMENTS)
def solve_water_filling(
    problem: PolicyProblem,
    solver: str = DEFAULT_SOLVER,
    *,
    entities: Entities | None = None,
    aggregate: bool = True,
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Gavel's water-filling max-min fairness on ``problem`` by any LP backend (the module docstring);
    ``objective`` is the least normalised throughput (max-min's optimum; with ``entities``, the least value of
    row M2 at the allocation), ``iterations`` the LPs solved. ``entities``: Gavel's hierarchical policy (W4,
    :mod:`synergy_opt.policies.hierarchy`), the problem's priority weights then each job's own weight within
    its entity.

    ``time_limit`` bounds the whole sequence: an LP that does not end optimal ends it, with that LP's status
    and no allocation."""
    started = time.perf_counter()
    deadline = None if time_limit is None else started + time_limit
    hierarchy = None if entities is None else entities.arrays(problem.num_jobs)
    keys = () if hierarchy is None else entity_keys(hierarchy[0], hierarchy[2])
    coefficients, rows, class_of, counts, counted = max_min_classes(problem, aggregate, *keys)
    levels: _Levels = _Levels(coefficients, counted.size) if hierarchy is None else \
        _EntityLevels(problem, hierarchy, coefficients, rows, counts, counted)
    solves: list[Solved] = []

    def params(model: LinearModel) -> SolverParams:
        left = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
        if left is not None and left <= 0.0:
            raise _OutOfTime
        return lp_params(left, mip_gap, threads, seed, verbose, large_lp_options(model, solver, options, vertex=True))

    def level(scaled: np.ndarray, floors: np.ndarray, free: np.ndarray) -> tuple[float, np.ndarray, Solved] | None:
        """W1 and W2: the level, the free rows' duals and W1's solve; None when an LP does not end optimal."""
        primal_gives: tuple[float, ...] = GIVES  # from the give the level's LP ends at on
        # The level in units of the most the free classes could reach (max-min's unit): with a weight 1e9
        # times the others' the last free row's z had a coefficient of 1e-9 once equilibrated, and the level was
        # called UNBOUNDED.
        unit = level_unit(scaled[counted][free])
        for k, give in enumerate(GIVES):
            built = time.perf_counter()
            model = _level_model(problem, scaled, rows, counts, counted, floors * (1 - give), free, unit)
            solved = solve_lp(model, problem.num_types, solver, params(model), time.perf_counter() - built)
            solves.append(solved)
            if solved.result.status is Status.OPTIMAL or (deadline is not None and time.perf_counter() >= deadline):
                primal_gives = GIVES[k:]
                break
        if solved.result.status is not Status.OPTIMAL:
            return None
        z = unit * float(solved.result.values(model, "z")[0])
        if solved.result.row_duals is not None:
            return z, np.abs(solved.result.row_duals[model.con_blocks["levels"]][free]), solved
        # The dual LP from the primal's floors on: its floors, met by the last level's point only within the
        # backend's tolerances, can read as infeasible too (CBC: the dual unbounded with the levels of W4).
        for dual_give in primal_gives:
            built = time.perf_counter()
            dual = _level_dual_model(problem, scaled, rows, counts, counted, floors * (1 - dual_give), free)
            built = time.perf_counter() - built
            result = solve_model(dual, solver, params(dual))
            solves.append(Solved(result, None, built + result.build_seconds, result.solve_seconds))
            if result.status is Status.OPTIMAL:
                return z, result.values(dual, "y")[free], solved
        return None

    last: Solved | None = None  # the last level's LP (W1): its fractions are the allocation
    try:
        while not levels.done():
            scaled, floors, free = levels.rows()
            found = level(scaled, floors, free)
            if found is None:
                last = None
                break
            z, duals, last = found
            # W3; the free duals sum to 1, so some pass DUAL but for a backend's tolerance: then the largest
            stuck = duals > DUAL
            levels.freeze(z, free, stuck if stuck.any() else duals == duals.max())
    except _OutOfTime:
        message = f"time limit ({time_limit} s) reached before level {len(solves)}'s LP"
        solves.append(Solved(SolveResult(Status.NO_SOLUTION, solver, message=message), None, 0.0, 0.0))
        last = None
    # The least value read at the allocation (max_min.least_normalised), not the first level's z.
    least = None if last is None or last.x is None else least_normalised(problem, last.x[class_of])
    return _result(problem, solves, last, class_of, least, solver, started)


class _Levels:
    """W3's state without entities: each counted class's level once frozen (NaN while free); every free row is
    lifted by the level ``z`` itself (row M2's ``c``, floor 0)."""

    def __init__(self, coefficients: np.ndarray, counted: int) -> None:
        self.coefficients = coefficients
        self.frozen = np.full(counted, np.nan)

    def done(self) -> bool:
        return not np.isnan(self.frozen).any()

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """W1's coefficients, each counted class's floor, and the lifted classes (positions in ``counted``)."""
        free = np.isnan(self.frozen)
        return self.coefficients, np.where(free, 0.0, self.frozen), np.flatnonzero(free)

    def freeze(self, z: float, lifted: np.ndarray, stuck: np.ndarray) -> None:
        self.frozen[lifted[stuck]] = z


class _EntityLevels(_Levels):
    """W4's state: each counted class's value ``u = sum_t c[k, t] x[k, t]`` so far (``c`` of row M2 with the
    job's own weight taken out), and which are frozen. A level lifts each class of positive weight ``r`` (its
    entity's reweighting, recomputed) from its value by ``z r``: the row ``(u / r) - z >= value / r``; the
    others keep their values."""

    def __init__(self, problem: PolicyProblem, hierarchy: tuple[np.ndarray, np.ndarray, np.ndarray],
                 coefficients: np.ndarray, rows: np.ndarray, counts: np.ndarray, counted: np.ndarray) -> None:
        entity, weight, fifo = hierarchy  # Entities.arrays
        own = np.asarray(problem.priority_weights)[rows]  # set by PolicyProblem (default 1)
        super().__init__(coefficients * own[:, None], counted.size)
        self.value = np.zeros(counted.size)
        self.rates = Rates(entity[rows][counted], own[counted], counts[counted], rows[counted], weight, fifo)
        self.rate = np.zeros(counted.size)
        self.counted = counted

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rate = self.rates.of(~np.isnan(self.frozen))
        # In units of the largest: the same LP (z's unit only), but with entity weights 1e-8 apart HiGHS ended
        # in an error and at 1e-12 called the level unbounded when the rates were taken as they are.
        self.rate = rate / rate.max(initial=0.0) if rate.any() else rate
        lifted = np.flatnonzero(self.rate > 0)
        divisor = np.ones(self.value.size)
        divisor[lifted] = self.rate[lifted]
        scaled = self.coefficients.copy()
        scaled[self.counted] /= divisor[:, None]
        return scaled, self.value / divisor, lifted

    def freeze(self, z: float, lifted: np.ndarray, stuck: np.ndarray) -> None:
        self.value[lifted] += z * self.rate[lifted]
        self.frozen[lifted[stuck]] = self.value[lifted[stuck]]


def entity_keys(entity: np.ndarray, fifo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per job, what a class of alike jobs must share (``entity`` per job, ``fifo`` per entity, as
    :meth:`Entities.arrays` gives them): the entity, and for a job of a FIFO entity its own position (its weight
    depends on its place in the queue)."""
    return entity, np.where(fifo[entity], np.arange(entity.size), -1)


class _OutOfTime(Exception):
    """The time limit passed between two LPs."""


def _result(problem: PolicyProblem, solves: list[Solved], last: Solved | None, class_of: np.ndarray,
            least: float | None, solver: str, started: float) -> PolicyResult:
    """The policy's result: the last level's fractions per job (every class's row, zeros for classes that can
    run nowhere), the least level, and the last level's LP (or the solve that ended the sequence)."""
    if not solves:
        return idle_result(POLICY, problem, solver, started)
    x = None if last is None else last.x
    fractions = None if x is None else x[class_of]
    solve = solves[-1].result if last is None else last.result
    return PolicyResult(POLICY, problem, fractions, least if fractions is not None else None, solve, len(solves),
                        sum(s.build_seconds for s in solves), sum(s.solve_seconds for s in solves))
