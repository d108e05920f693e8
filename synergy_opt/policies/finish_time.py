"""Finish-time fairness in Gavel's definition (``finish_time_fairness_perf``), solved exactly by a sequence of LPs.

Gavel's ratio for job ``i`` (formulations/policies.md, row F1): its expected finish time under the allocation
over its expected finish time alone on a ``1/n`` share of the cluster,

    rho[i](x) = (elapsed[i] + remaining[i] / T[i](x)) / (isolated_s[i] + remaining[i] / iso[i]),

``T[i](x) = sum_t throughputs[i, t] * x[i, t]``, ``iso[i]`` the job's throughput at the isolated share
(``PolicyProblem.isolated_throughputs``), ``isolated_s[i]`` the time it would have run so far alone (Gavel
accumulates it round by round). Gavel minimises ``max_i rho[i]`` (a convex program, ``cvxpy.inv_pos``).

Each ratio is ``N[i](x) / D[i](x)`` with affine ``N = elapsed * T + remaining`` and ``D = E * T``
(``E = isolated_s + remaining / iso``): a generalized linear-fractional program. Its optimum ``lambda*`` is the
root of ``F(lambda) = min_x max_i (N[i](x) - lambda D[i](x)) / D[i](x_prev)``, each evaluation one LP (F2);
the Dinkelbach-type method of Crouzeix, Ferland and Schaible (1985) iterates ``lambda <- max_i rho[i](x)``
from the isolated allocation and converges superlinearly. It stops when ``F(lambda) >= -tolerance * lambda``:
every iterate is feasible and its ``max_i rho[i]`` an upper bound, decreasing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from synergy_opt.policies.decomposed import Decomposed, Requirements, solve_decomposed
from synergy_opt.policies.linear import _per_job
from synergy_opt.policies.problem import PolicyProblem, add_time_fractions, job_classes
from synergy_opt.policies.result import PolicyResult
from synergy_opt.policies.solve import (
    METHODS,
    Solved,
    decomposes,
    idle_result,
    large_lp_options,
    lp_params,
    solve_lp,
)
from synergy_opt.solvers import DEFAULT_SOLVER, SolverParams
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import POSITIVE, InstanceOf, Integer, OneOf, boolean, checked

TOLERANCE = 1e-9
MAX_ITERATIONS = 100


def ratios(problem: PolicyProblem, x: np.ndarray, elapsed: np.ndarray, remaining: np.ndarray,
           expected_alone: np.ndarray) -> np.ndarray:
    """``rho[i](x)`` (row F1); infinite for a job with no throughput under ``x``."""
    throughput = (problem.throughputs * x).sum(axis=1)
    # A job that runs nowhere expects to finish never (inf / inf: NaN, read by no caller: they take running jobs).
    with np.errstate(divide="ignore", invalid="ignore"):
        finish = elapsed + np.where(throughput > 0, remaining / np.where(throughput > 0, throughput, 1.0), np.inf)
        return np.asarray(finish / expected_alone)


def step_slope(problem: PolicyProblem, rows: np.ndarray, target: float, elapsed: np.ndarray,
               expected_alone: np.ndarray) -> np.ndarray:
    """Row F2's coefficients of ``x``: ``(target * E[i] - elapsed[i]) * throughputs[i, t]``, per class."""
    return np.asarray((target * expected_alone[rows] - elapsed[rows])[:, None] * problem.throughputs[rows])


def build_step(problem: PolicyProblem, rows: np.ndarray, counts: np.ndarray, target: float,
               elapsed: np.ndarray, remaining: np.ndarray, expected_alone: np.ndarray,
               scale: np.ndarray) -> LinearModel:
    """The LP of ``F(target)`` (row F2) over the classes ``rows``: minimise ``eta`` subject to B1-B3 and
    ``scale[i] * eta + (target * E[i] - elapsed[i]) * T[i](x) >= remaining[i]``."""
    builder = ModelBuilder("finish_time_fairness", "min")
    x = add_time_fractions(builder, problem, counts, rows)
    eta = builder.add_vars("eta", 1, lower=-np.inf, objective=1.0)
    jobs, types = rows.size, problem.num_types
    local = np.arange(jobs)
    slope = step_slope(problem, rows, target, elapsed, expected_alone)
    builder.add_rows(
        "fairness", np.concatenate([np.repeat(local, types), local]),
        np.concatenate([x.start + np.arange(jobs * types), np.full(jobs, eta.start)]),
        np.concatenate([slope.ravel(), scale[rows]]), lower=remaining[rows], count=jobs)
    return builder.build()


def decomposed_step(problem: PolicyProblem, rows: np.ndarray, counts: np.ndarray, target: float,
                    elapsed: np.ndarray, remaining: np.ndarray, expected_alone: np.ndarray, scale: np.ndarray,
                    solver: str, params: SolverParams, prices: np.ndarray | None, exact: bool
                    ) -> tuple[Solved, Decomposed]:
    """Row F2's LP by the decomposition: each row divided by ``scale[i]`` is row D1's form with ``z = -eta``,
    ``c = slope / scale``, ``a = remaining / scale``; ``prices`` from the last step start it (not ``exact``:
    one reduced LP split at them, a feasible point, no more)."""
    started = time.perf_counter()
    divide = scale[rows]
    req = Requirements(step_slope(problem, rows, target, elapsed, expected_alone) / divide[:, None],
                       remaining[rows] / divide, (problem.scale_factors[rows] * counts).astype(float),
                       problem.gpus.astype(float), z_lower=-np.inf, scale=target)
    return solve_decomposed(req, np.arange(rows.size), rows.size, solver, params, started, prices, exact)


@checked(problem=InstanceOf(PolicyProblem), aggregate=boolean, method=OneOf(METHODS), tolerance=POSITIVE,
         max_iterations=Integer(1, 10_000), **SOLVER_ARGUMENTS)
def solve_finish_time_fairness(
    problem: PolicyProblem,
    remaining: Sequence[float] | np.ndarray,
    elapsed: Sequence[float] | np.ndarray | None = None,
    isolated_s: Sequence[float] | np.ndarray | None = None,
    solver: str = DEFAULT_SOLVER,
    *,
    aggregate: bool = True,
    method: str = "auto",
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Gavel's finish-time fairness: minimise the largest ratio ``rho`` (see the module).

    A job that can run nowhere (no throughput at its isolated share) gets no time and no ratio. ``objective``
    is ``max_i rho[i]`` at the allocation; ``iterations`` counts the LPs. ``method`` as in
    :func:`~synergy_opt.policies.solve_max_min_fairness`, for each step's LP.

    Parameters
    ----------
    remaining
        Steps left per job.
    elapsed
        Seconds since each job arrived (default 0).
    isolated_s
        Seconds each job would have run so far alone on its isolated share (default 0; the simulator
        accumulates it as Gavel does).
    """
    started = time.perf_counter()
    left = _per_job("remaining", remaining, problem, positive=True)
    waited = np.zeros(problem.num_jobs) if elapsed is None else _per_job("elapsed", elapsed, problem)
    alone_so_far = np.zeros(problem.num_jobs) if isolated_s is None else _per_job("isolated_s", isolated_s, problem)
    isolated = problem.isolated_throughputs()
    runs = isolated > 0
    if not runs.any():  # nothing to share (the step LP would hold only its free eta: unbounded)
        return idle_result("finish_time_fairness", problem, solver, started)
    with np.errstate(divide="ignore"):
        expected_alone = alone_so_far + np.where(runs, left / np.where(runs, isolated, 1.0), np.inf)
    representative, class_of, counts = job_classes(aggregate, problem.throughputs, problem.scale_factors, left,
                                                   waited, alone_so_far)
    kept = runs[representative]  # a class runs or not as a whole: its throughputs and scale factor are alike
    rows, counts = representative[kept], counts[kept]
    lp_row = (np.cumsum(kept) - 1)[class_of]  # each job's row of the step LP's x (for jobs that run)
    params = lp_params(time_limit, mip_gap, threads, seed, verbose, options)
    # Start from Gavel's isolated allocation: feasible, every job that can run has throughput.
    share = problem.gpus[None, :] / (problem.num_jobs * problem.scale_factors[:, None])
    x = np.where(runs[:, None], share / np.maximum(share.sum(axis=1), 1.0)[:, None], 0.0)
    build_s = time.perf_counter() - started
    solve_s = 0.0
    solved: Solved | None = None
    steps = iterations = 0
    prices = None
    decompose = decomposes(method, rows.size)
    # Decomposed, steps are split at the last prices, uncertified, until one would stop; that one is redone exactly.
    exact = not decompose
    while steps < max_iterations:
        steps += 1
        rho = ratios(problem, x, waited, left, expected_alone)
        target = float(rho[runs].max()) if runs.any() else 0.0
        with np.errstate(invalid="ignore"):  # inf * 0 for jobs that run nowhere (not read)
            scale = expected_alone * (problem.throughputs * x).sum(axis=1)  # D[i](x_prev)
        begun = time.perf_counter()
        if decompose:
            solved, decomposed = decomposed_step(problem, rows, counts, target, waited, left, expected_alone, scale,
                                                 solver, params, prices, exact)
            prices, eta, iterations = decomposed.prices, _negated(decomposed.z), iterations + decomposed.lps
        else:
            model = build_step(problem, rows, counts, target, waited, left, expected_alone, scale)
            step_params = SolverParams(**{**params.__dict__, "options": large_lp_options(model, solver, options)})
            solved = solve_lp(model, problem.num_types, solver, step_params, time.perf_counter() - begun)
            eta, iterations = solved.result.objective, iterations + 1
        build_s += solved.build_seconds
        solve_s += solved.solve_seconds
        if solved.x is None or eta is None:
            if decompose and not exact:
                exact = True
                continue
            break
        candidate = np.zeros_like(x)
        candidate[runs] = solved.x[lp_row[runs]]
        better = ratios(problem, candidate, waited, left, expected_alone)[runs].max() if runs.any() else 0.0
        if better <= target:
            x = candidate
        stop = eta >= -tolerance * max(target, 1.0) or better >= target
        if decompose and not exact:
            # An uncertified step's eta only bounds F from above: confirm by an exact step before stopping.
            exact = stop
            continue
        if stop:
            break
        exact = not decompose
    assert solved is not None
    rho = ratios(problem, x, waited, left, expected_alone)
    allocation = x if solved.x is not None else None
    value = float(rho[runs].max()) if allocation is not None else None  # none without an allocation (a limit)
    return PolicyResult("finish_time_fairness", problem, allocation, value, solved.result, iterations, build_s,
                        solve_s)



def _negated(value: float | None) -> float | None:
    return None if value is None else -value
