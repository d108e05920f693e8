"""Gavel's max-min fairness (``max_min_fairness_perf``; LAS over normalised throughput) as an LP.

formulations/policies.md, rows M1-M2: maximise ``z`` subject to rows B1-B3 and, for every job that can run,

    sum_t c[i, t] * x[i, t] >= z,    c[i, t] = throughputs[i, t] * scale_factors[i] / (w[i] * prop[i])

where ``prop[i]`` is the job's throughput at its proportional share (``PolicyProblem.proportional_throughputs``)
and ``w`` the priority weights. The heterogeneity-agnostic policy (Gavel's ``max_min_fairness``) is the same LP
on :meth:`PolicyProblem.agnostic`. Jobs alike in ``c``, scale factor and the types they can use are solved as
one class (``aggregate``): exact, as averaging any optimum over a class keeps every row and the least value.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from synergy_opt.policies.decomposed import Requirements, solve_decomposed
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
from synergy_opt.solvers import DEFAULT_SOLVER, Status
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import POSITIVE, InstanceOf, OneOf, Optional, boolean, checked


@dataclass(frozen=True, eq=False)
class MaxMinModel:
    """The LP and how its variable rows map to jobs: job ``i`` takes row ``class_of[i]`` of ``x``. Its ``z`` is
    counted in units of ``unit`` (:func:`level_unit`): the least normalised throughput is ``unit * z``."""

    model: LinearModel
    class_of: np.ndarray
    coefficients: np.ndarray
    build_seconds: float
    unit: float = 1.0


def normalised_coefficients(problem: PolicyProblem) -> np.ndarray:
    """``c[i, t]`` of row M2: throughput times scale factor over weight times proportional throughput (0 for a
    job that has no throughput at its proportional share: it can run nowhere and drops out of the min)."""
    proportional = problem.proportional_throughputs()
    # Throughput over the proportional one first (a ratio near 1), then times scale over weight: weight times a
    # tiny proportional throughput underflowed, and its inverse overflowed to inf (weight 1e-12 x 1e-300).
    ratio = problem.throughputs / np.where(proportional > 0, proportional, 1.0)[:, None]
    scale = np.where(proportional > 0, problem.scale_factors / problem.priority_weights, 0.0)
    return np.asarray(ratio * scale[:, None])


def least_normalised(problem: PolicyProblem, allocation: np.ndarray) -> float:
    """The least value of row M2 at ``allocation`` (``(jobs, types)``) over the jobs that can run somewhere:
    max-min's measure read at the time fractions returned, not the LP's ``z`` (a job whose share lies below the
    solvers' tolerance, weights 9 decades apart, may get none: then its value, 0, is the least)."""
    c = normalised_coefficients(problem)
    counted = c.any(axis=1)
    return float((c[counted] * allocation[counted]).sum(axis=1).min())


def level_unit(coefficients: np.ndarray) -> float:
    """The least over the rows of ``coefficients`` (classes x types) of each one's largest: no class's value
    ``sum_t c[k, t] x[k, t]`` can pass it (its fractions sum to at most 1), so the level ``z`` of those rows is at
    most this. ``z`` counted in this unit is about 1 whatever the weights' scale: counted as it is, a weight of 1e10
    made the optimum 1.6e-10, below the solvers' tolerances (OPTIMAL at 0, nobody scheduled), and CBC's
    eight-digit points broke rows of a level near 143 by more than its check allows."""
    best = coefficients.max(axis=1, initial=0.0)
    best = best[best > 0]
    return float(best.min()) if best.size else 1.0


def max_min_classes(problem: PolicyProblem, aggregate: bool, *keys: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row M2's coefficients per class, the classes' jobs, each job's class, the class sizes, and the classes
    that count (those that can run somewhere); ``keys``: further per-job columns that jobs of a class share."""
    c = normalised_coefficients(problem)
    rows, class_of, counts = job_classes(aggregate, c, problem.scale_factors, problem.throughputs > 0, *keys)
    coefficients = c[rows]
    return coefficients, rows, class_of, counts, np.flatnonzero(coefficients.any(axis=1))


@checked(problem=InstanceOf(PolicyProblem), aggregate=boolean, unit=Optional(POSITIVE))
def build_max_min_fairness(problem: PolicyProblem, aggregate: bool = True, unit: float | None = None) -> MaxMinModel:
    """The max-min fairness LP of ``problem`` (rows B1-B3, M1-M2), its ``z`` in units of the model's ``unit``
    (the least normalised throughput is ``unit * z``; default :func:`level_unit`)."""
    started = time.perf_counter()
    coefficients, rows, class_of, counts, counted = max_min_classes(problem, aggregate)
    builder = ModelBuilder("max_min_fairness", "max")
    x = add_time_fractions(builder, problem, counts, rows)
    z = builder.add_vars("z", 1, objective=1.0)  # M1, in units of ``unit``
    # M2: sum_t (c[i, t] / unit) x[i, t] - z >= 0 for every class that can run somewhere (every row divided by
    # the unit alike: a row's requirement stays as exact as its coefficients).
    unit = level_unit(coefficients[counted]) if unit is None else unit
    add_level_rows(builder, "fairness", x, z, coefficients / unit, counted, np.arange(counted.size), 0.0)
    return MaxMinModel(builder.build(), class_of, coefficients, time.perf_counter() - started, unit)


def add_level_rows(builder: ModelBuilder, name: str, x: slice, z: slice, coefficients: np.ndarray,
                   counted: np.ndarray, lifted: np.ndarray, lower: float | np.ndarray,
                   equilibrate: bool = False, unit: float = 1.0) -> slice:
    """Row M2's form, one row per counted class ``k`` (its position in ``counted``): ``sum_t c[k, t] x[k, t]``,
    minus ``unit * z`` in the rows of ``lifted``, at least ``lower`` (max-min: every row lifted, 0; water
    filling's levels: the free rows lifted, the frozen ones at their levels)."""
    types = coefficients.shape[1]
    local = np.arange(counted.size)
    return builder.add_rows(
        name, np.concatenate([np.repeat(local, types), lifted]),
        np.concatenate([x.start + (counted[:, None] * types + np.arange(types)).ravel(),
                        np.full(lifted.size, z.start)]),
        np.concatenate([coefficients[counted].ravel(), np.full(lifted.size, -unit)]), lower=lower,
        count=counted.size, equilibrate=equilibrate)


@checked(problem=InstanceOf(PolicyProblem), aggregate=boolean, method=OneOf(METHODS), **SOLVER_ARGUMENTS)
def solve_max_min_fairness(
    problem: PolicyProblem,
    solver: str = DEFAULT_SOLVER,
    *,
    aggregate: bool = True,
    method: str = "auto",
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Gavel's max-min fairness on ``problem`` by any LP backend; ``objective`` is the least normalised
    throughput ``z``: job ``i``'s effective throughput times ``s_i / (w_i prop_i)`` (row M2, Gavel's
    normalisation). For a one-GPU job of weight 1, 1.0 is what its proportional share gives it; a job of ``s_i``
    GPUs is at 1.0 with ``prop_i / s_i``.

    ``aggregate`` solves jobs alike as one class (exact). ``method``: ``"lp"`` the whole LP, ``"decomposed"``
    reduced LPs with most jobs fixed on their cheapest type, certified optimal (decomposed.py), ``"auto"`` the
    decomposition from ``DECOMPOSE_FROM_ROWS`` (500) classes on. HiGHS without ``options`` solves a whole LP of
    more than ``IPM_FROM_ROWS`` (1000) rows by its interior-point method without crossover (optimal to its
    tolerances, not necessarily a vertex), which is faster there than its simplex methods.
    """
    started = time.perf_counter()
    coefficients, rows, class_of, counts, counted = max_min_classes(problem, aggregate)
    if not counted.size:
        return idle_result("max_min_fairness", problem, solver, started)
    if decomposes(method, counted.size):
        req = Requirements(coefficients[counted], np.zeros(counted.size),
                           (problem.scale_factors[rows] * counts)[counted].astype(float), problem.gpus.astype(float))
        solved, decomposed = solve_decomposed(req, counted, rows.size, solver,
                                              lp_params(time_limit, mip_gap, threads, seed, verbose, options), started)
        return policy_result("max_min_fairness", problem, solved, class_of, iterations=decomposed.lps)
    result = _solve_whole(problem, aggregate, solver, time_limit, mip_gap, threads, seed, verbose, options)
    if result.solve.status is Status.ERROR and level_unit(coefficients[counted]) != 1.0:
        # The unit puts coefficients of up to 1e10 in the other rows at weights that far apart: CBC's and GLPK's
        # points then fail the rows' check (ERROR), where the LP in z's own unit gave CBC the optimum.
        result = _solve_whole(problem, aggregate, solver, time_limit, mip_gap, threads, seed, verbose, options, 1.0)
    return result if result.allocation is None else replace(result, objective=least_normalised(problem,
                                                                                            result.allocation))


def _solve_whole(problem: PolicyProblem, aggregate: bool, solver: str, time_limit: float | None, mip_gap: float,
                 threads: int | None, seed: int, verbose: bool, options: Mapping[str, Any] | None,
                 unit: float | None = None) -> PolicyResult:
    """The whole LP (``unit``: :func:`build_max_min_fairness`'s) solved, its objective the LP's."""
    built = build_max_min_fairness(problem, aggregate, unit)
    params = lp_params(time_limit, mip_gap, threads, seed, verbose, large_lp_options(built.model, solver, options))
    solved = solve_lp(built.model, problem.num_types, solver, params, built.build_seconds)
    return policy_result("max_min_fairness", problem, solved, built.class_of)
