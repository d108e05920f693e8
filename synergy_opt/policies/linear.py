"""Gavel's makespan and max-sum-throughput policies, each one LP over rows B1-B3.

formulations/policies.md:

- **makespan** (Gavel's ``min_total_duration_perf``): minimise ``T`` such that every job can finish its
  remaining steps within ``T``: ``sum_t throughputs[i, t] * x[i, t] >= remaining[i] / T``. With ``u = 1 / T``
  this is the LP: maximise ``u`` subject to ``sum_t throughputs[i, t] * x[i, t] - remaining[i] * u >= 0``
  (rows K1-K2); the makespan is ``1 / u``. Gavel bisects on ``T`` (to within 5%); the LP is exact. ``u`` is
  counted in units of its upper bound ``min_i max_t throughputs[i, t] / remaining[i]`` (every job alone on its
  fastest type), so that it is near 1: the backends' tolerances are absolute, and ``u`` itself can be ~1e-6;
  each row K2 is divided by its requirement ``remaining[i] * unit`` (so ``u``'s coefficient is -1 in every row).
- **max-sum-throughput** (Gavel's ``max_sum_throughput_perf``): maximise ``sum_{i,t} throughputs[i, t] *
  x[i, t] / cost[t]`` (row S1; ``cost`` 1 unless given, Gavel's ``instance_costs``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.policies.centre import analytic_centre, gavel_makespan, interior_start
from synergy_opt.policies.decomposed import Requirements, solve_decomposed
from synergy_opt.policies.decomposed_sum import solve_sum_decomposed
from synergy_opt.policies.problem import PolicyProblem, add_time_fractions, job_classes
from synergy_opt.policies.result import PolicyResult
from synergy_opt.policies.solve import (
    METHODS,
    decomposes,
    idle_result,
    large_lp_options,
    lp_params,
    policy_result,
    solve_lp,
)
from synergy_opt.solvers import DEFAULT_SOLVER
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import InstanceOf, OneOf, Optional, boolean, checked, real_array


def _per_job(name: str, values: Any, problem: PolicyProblem, positive: bool = False) -> np.ndarray:
    array = real_array(name, values, 1)
    if array.shape != (problem.num_jobs,):
        raise InvalidInputError(name, values, f"must hold one number per job ({problem.num_jobs})")
    bad = ~np.isfinite(array) | ((array <= 0) if positive else (array < 0))
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(f"{name}[{index}]", array[index], f"must be finite and {'>' if positive else '>='} 0")
    return array


def build_makespan(problem: PolicyProblem, remaining: np.ndarray, aggregate: bool = True
                   ) -> tuple[LinearModel, np.ndarray]:
    """The makespan LP (rows B1-B3, K1-K2) and each job's class; its ``u`` is counted in units of
    ``min_i max_t X[i, t] / remaining[i]`` (the makespan is ``1 / (u * that)``; the module docstring)."""
    rows, class_of, counts = job_classes(aggregate, problem.throughputs, problem.scale_factors, remaining)
    return _makespan_model(problem, remaining, rows, counts)[0], class_of


def _makespan_model(problem: PolicyProblem, remaining: np.ndarray, rows: np.ndarray, counts: np.ndarray
                    ) -> tuple[LinearModel, float]:
    """The makespan LP and the unit of its ``u`` (see the module)."""
    alone = problem.throughputs[rows].max(axis=1) / remaining[rows]
    unit = float(alone[alone > 0].min()) if (alone > 0).any() else 1.0
    builder = ModelBuilder("makespan", "max")
    x = add_time_fractions(builder, problem, counts, rows)
    u = builder.add_vars("u", 1, objective=1.0)  # K1: u * unit = 1 / makespan
    jobs, types = rows.size, problem.num_types
    local = np.arange(jobs)
    # K2: sum_t throughputs x / (remaining unit) - u >= 0, each row in units of its own requirement: as
    # "throughputs x >= remaining unit u", a job of 1e-9 the others' steps met its row at x = 0 within the
    # solvers' tolerance (no time, an infinite makespan, reported finite).
    builder.add_rows(
        "finish", np.concatenate([np.repeat(local, types), local]),
        np.concatenate([x.start + np.arange(jobs * types), np.full(jobs, u.start)]),
        np.concatenate([(problem.throughputs[rows] / (remaining[rows] * unit)[:, None]).ravel(), -np.ones(jobs)]),
        lower=0.0, count=jobs)
    return builder.build(), unit


def _makespan(u: float) -> float:
    return 1.0 / u if u > 0 else float("inf")


# point= of solve_makespan: "optimum" the LP's (a vertex with the simplex), "gavel" the analytic centre of
# the allocations that meet Gavel's bisected makespan (centre.py).
MAKESPAN_POINTS = ("optimum", "gavel")


@checked(problem=InstanceOf(PolicyProblem), aggregate=boolean, method=OneOf(METHODS), point=OneOf(MAKESPAN_POINTS),
         **SOLVER_ARGUMENTS)
def solve_makespan(
    problem: PolicyProblem,
    remaining: Sequence[float] | np.ndarray,
    solver: str = DEFAULT_SOLVER,
    *,
    aggregate: bool = True,
    method: str = "auto",
    point: str = "optimum",
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Gavel's makespan policy: ``remaining[i]`` steps left per job; ``objective`` is the makespan of the
    allocation in the throughputs' time unit (seconds for steps per second), infinite if a job can run nowhere.
    ``method`` as in :func:`~synergy_opt.policies.solve_max_min_fairness` (row K2 is row D1's form with
    ``c = X / R``).

    The least makespan leaves most allocations open (every job need only finish by then). ``point="optimum"``
    returns the LP's optimum (a vertex: most jobs get just what finishes them at the makespan);
    ``point="gavel"`` returns what Gavel's own policy does (:mod:`synergy_opt.policies.centre`): the makespan
    its bisection stops at (within 5% above the least, 7% just below a bracket's top; throughputs in steps per
    second, its bracket is in seconds), and there the analytic centre of the allocations that meet it, every
    job with time to spare.
    """
    started = time.perf_counter()
    left = _per_job("remaining", remaining, problem, positive=True)
    if not problem.num_jobs:  # nothing to finish (its LP would hold only u, unbounded)
        return idle_result("makespan", problem, solver, started)
    rows, class_of, counts = job_classes(aggregate, problem.throughputs, problem.scale_factors, left)
    if decomposes(method, rows.size):
        req = Requirements(problem.throughputs[rows] / left[rows, None], np.zeros(rows.size),
                           (problem.scale_factors[rows] * counts).astype(float), problem.gpus.astype(float))
        solved, decomposed = solve_decomposed(req, np.arange(rows.size), rows.size, solver,
                                              lp_params(time_limit, mip_gap, threads, seed, verbose, options), started)
        result = policy_result("makespan", problem, solved, class_of, _makespan, decomposed.lps)
    else:
        model, unit = _makespan_model(problem, left, rows, counts)
        params = lp_params(time_limit, mip_gap, threads, seed, verbose, large_lp_options(model, solver, options))
        solved = solve_lp(model, problem.num_types, solver, params, time.perf_counter() - started)
        result = policy_result("makespan", problem, solved, class_of, lambda u: _makespan(u * unit))
    if result.allocation is None:
        return result
    result = replace(result, objective=makespan_at(problem, left, result.allocation))
    return _gavel_point(problem, left, result) if point == "gavel" else result


def _gavel_point(problem: PolicyProblem, remaining: np.ndarray, optimum: PolicyResult) -> PolicyResult:
    """``optimum`` moved to Gavel's point (:mod:`synergy_opt.policies.centre`), its time counted in the
    solve's; left as it is when its makespan is infinite (a job runs nowhere) or its set has no interior to
    centre in. A type of no GPUs holds no time (its capacity row forces 0) and is left out of the centre."""
    least = optimum.objective
    if optimum.allocation is None or least is None or not 0 < least < np.inf:
        return optimum
    started = time.perf_counter()
    need = remaining / gavel_makespan(least)
    kept = problem.gpus > 0
    throughputs, scale, gpus = problem.throughputs[:, kept], problem.scale_factors, problem.gpus[kept].astype(float)
    start = interior_start(optimum.allocation[:, kept], throughputs, scale, gpus, need)
    if start is None:
        return optimum
    centre, _ = analytic_centre(start, throughputs, scale, gpus, need)
    allocation = np.zeros_like(optimum.allocation)
    allocation[:, kept] = np.clip(centre, 0.0, 1.0)
    return replace(optimum, allocation=allocation, objective=makespan_at(problem, remaining, allocation),
                   solve_seconds=optimum.solve_seconds + time.perf_counter() - started)


def makespan_at(problem: PolicyProblem, remaining: np.ndarray, allocation: np.ndarray) -> float:
    """The makespan of ``allocation`` (``(jobs, types)``): the latest ``remaining[i] / sum_t X[i, t] x[i, t]``,
    infinite when a job gets no throughput (the measure read at the fractions returned, not the LP's ``1/u``:
    steps 9 decades apart left a job a share below the solvers' tolerance)."""
    rates = (problem.throughputs * allocation).sum(axis=1)
    with np.errstate(divide="ignore"):
        return float(np.max(np.where(rates > 0, remaining / np.where(rates > 0, rates, 1.0), np.inf), initial=0.0))


def build_max_sum_throughput(problem: PolicyProblem, costs: np.ndarray, aggregate: bool = True
                             ) -> tuple[LinearModel, np.ndarray]:
    """The max-sum-throughput LP (rows B1-B3, S1) and each job's class."""
    rows, class_of, counts = job_classes(aggregate, problem.throughputs, problem.scale_factors)
    builder = ModelBuilder("max_sum_throughput", "max")
    add_time_fractions(builder, problem, counts, rows, _class_values(problem, costs, rows, counts).ravel())
    return builder.build(), class_of


def _class_values(problem: PolicyProblem, costs: np.ndarray, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Row S1 on the classes: a class of k jobs earns k times its row's throughput over each type's cost."""
    return np.asarray(problem.throughputs[rows] / costs[None, :] * counts[:, None])


@checked(problem=InstanceOf(PolicyProblem), aggregate=boolean, costs=Optional(lambda n, v: real_array(n, v, 1)),
         method=OneOf(METHODS), **SOLVER_ARGUMENTS)
def solve_max_sum_throughput(
    problem: PolicyProblem,
    solver: str = DEFAULT_SOLVER,
    *,
    costs: Sequence[float] | np.ndarray | None = None,
    aggregate: bool = True,
    method: str = "auto",
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Gavel's max-sum-throughput policy; ``costs`` per GPU type (default 1) divide each type's throughput;
    ``objective`` is the summed (cost-weighted) throughput. ``method`` as in
    :func:`~synergy_opt.policies.solve_max_min_fairness` (its decomposition: row S2, ``decomposed_sum.py``)."""
    started = time.perf_counter()
    price = np.ones(problem.num_types) if costs is None else np.asarray(costs, dtype=float)
    if price.shape != (problem.num_types,) or not (np.isfinite(price) & (price > 0)).all():
        raise InvalidInputError("costs", costs, f"must hold {problem.num_types} finite costs > 0, one per type")
    rows, class_of, counts = job_classes(aggregate, problem.throughputs, problem.scale_factors)
    if decomposes(method, rows.size):
        solved, lps, _ = solve_sum_decomposed(
            _class_values(problem, price, rows, counts), (problem.scale_factors[rows] * counts).astype(float),
            problem.gpus.astype(float), problem.throughputs[rows] > 0, solver,
            lp_params(time_limit, mip_gap, threads, seed, verbose, options), started)
        return policy_result("max_sum_throughput", problem, solved, class_of, iterations=lps)
    model, class_of = build_max_sum_throughput(problem, price, aggregate)
    params = lp_params(time_limit, mip_gap, threads, seed, verbose, large_lp_options(model, solver, options))
    solved = solve_lp(model, problem.num_types, solver, params, time.perf_counter() - started)
    return policy_result("max_sum_throughput", problem, solved, class_of)
