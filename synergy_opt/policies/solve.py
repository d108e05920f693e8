"""Running a policy's neutral model on any LP backend of the registry, timed, and reading ``x`` back."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from synergy_opt.errors import SolverUnavailableError
from synergy_opt.policies.problem import PolicyProblem
from synergy_opt.policies.result import PolicyResult
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, backend, solve_model
from synergy_opt.solvers.model import LinearModel


@dataclass(frozen=True)
class Solved:
    """One LP solve: its result, its time fractions (``(rows, types)``, None without a solution) and seconds."""

    result: SolveResult
    x: np.ndarray | None
    build_seconds: float
    solve_seconds: float


def lp_params(time_limit: float | None, mip_gap: float, threads: int | None, seed: int, verbose: bool,
              options: Mapping[str, Any] | None) -> SolverParams:
    """The registry's parameters from a solve function's solver arguments (``mip_gap`` matters to no LP)."""
    return SolverParams(time_limit=time_limit, mip_gap=mip_gap, threads=threads, seed=seed, verbose=verbose,
                        options=dict(options or {}))


# Above this many rows HiGHS's interior-point method (no crossover) beats its simplex methods on the policies'
# LPs (benchmarks/bench_policies.py; 1,000 distinct jobs: 0.07 s against 0.18 s of CPU; 10,000: 3.4 s against 53 s).
IPM_FROM_ROWS = 1000
IPM_OPTIONS: Mapping[str, Any] = {"solver": "ipm", "run_crossover": "off"}


def large_lp_options(model: LinearModel, solver: str, options: Mapping[str, Any] | None, vertex: bool = False
                     ) -> Mapping[str, Any]:
    """The user's options, or for HiGHS on a large LP without any, its interior-point method (with crossover
    to a vertex when ``vertex``: a basis, whose duals water filling reads)."""
    if options or solver != DEFAULT_SOLVER or model.num_cons <= IPM_FROM_ROWS:
        return dict(options or {})
    return {**IPM_OPTIONS, "run_crossover": "on"} if vertex else dict(IPM_OPTIONS)


# method= of the policies' solves: "lp" the whole LP, "decomposed" with most jobs fixed at the types' prices
# (decomposed.py, exact), "auto" decomposed from DECOMPOSE_FROM_ROWS rows of jobs (or classes) on: below it the
# whole LP is as fast, and results there stay what they were (benchmarks/bench_policies.py).
METHODS = ("auto", "lp", "decomposed")
DECOMPOSE_FROM_ROWS = 500


def decomposes(method: str, rows: int) -> bool:
    """Whether ``method`` solves an LP of ``rows`` job rows by the decomposition."""
    return method == "decomposed" or (method == "auto" and rows >= DECOMPOSE_FROM_ROWS)


def solve_lp(model: LinearModel, types: int, solver: str, params: SolverParams, built_s: float) -> Solved:
    """Solve ``model`` (an LP with a variable block ``x``) and read ``x`` as ``(rows, types)`` fractions."""
    if not backend(solver).capabilities.continuous:
        raise SolverUnavailableError(f"solver {solver!r} solves integer models only; the policies are LPs")
    started = time.perf_counter()
    result = solve_model(model, solver, params)
    elapsed = time.perf_counter() - started
    x = None
    if result.has_solution:
        # Clip solver round-off into the fractions' box, as Gavel does.
        x = np.clip(result.values(model, "x"), 0.0, 1.0).reshape(-1, types)
    return Solved(result, x, built_s + result.build_seconds, elapsed - result.build_seconds)


def policy_result(name: str, problem: PolicyProblem, solved: Solved, class_of: np.ndarray,
                  objective: Callable[[float], float] = float, iterations: int = 1) -> PolicyResult:
    """A one-LP policy's result: each job takes its class's row of ``x``; ``objective`` maps the LP's
    objective to the policy's measure; ``iterations`` counts the LPs solved (more than one when decomposed)."""
    allocation = None if solved.x is None else solved.x[class_of]
    value = None
    if allocation is not None and solved.result.objective is not None:
        value = objective(float(solved.result.objective))
    return PolicyResult(name, problem, allocation, value, solved.result, iterations, solved.build_seconds,
                        solved.solve_seconds)


def idle_result(name: str, problem: PolicyProblem, solver: str, started: float) -> PolicyResult:
    """A max-min policy's result when no job can run anywhere: nothing to share, every fraction 0, no least
    value (its LP would have a ``z`` bounded by no row: unbounded), no LP solved."""
    solve = SolveResult(Status.OPTIMAL, solver, objective=None, message="no job can run on any type")
    return PolicyResult(name, problem, np.zeros(problem.throughputs.shape), None, solve, 0, 0.0,
                        time.perf_counter() - started)
