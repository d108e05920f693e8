"""Gavel's policies as LPs (synergy_opt.policies) against Gavel's formulations written out densely here and
solved by vertex enumeration, against closed forms on one GPU type, on every backend that runs LPs, each by the
whole LP and by the decomposition (most jobs fixed at the types' prices); hand-computed max-min and finish-time
fairness cases on two types; finish-time fairness on two types against a brute force (bisection on its ratio,
each step a vertex enumeration); Gavel's round mechanism traced by hand."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import brentq

from synergy_opt.errors import InvalidInputError, SolverUnavailableError, UnknownNameError
from synergy_opt.policies import (
    PolicyProblem,
    solve_finish_time_fairness,
    solve_makespan,
    solve_max_min_fairness,
    solve_max_sum_throughput,
    solve_water_filling,
)
from synergy_opt.policies.decomposed import Requirements, solve_requirements
from synergy_opt.policies.decomposed_sum import solve_sum_decomposed
from synergy_opt.policies.max_min import normalised_coefficients
from synergy_opt.policies.result import PolicyResult
from synergy_opt.policies.rounds import RoundMechanism
from synergy_opt.solvers import SolverParams, Status, backend, solver_names

TOL = 1e-6
LP_SOLVERS = [name for name in solver_names() if backend(name).capabilities.continuous]
METHODS = ["lp", "decomposed"]  # the whole LP, and most jobs fixed at the types' prices


def require(solver: str) -> None:
    missing = backend(solver).missing()
    if missing:
        pytest.skip(f"{solver}: missing {', '.join(missing)}")


def vertex_optimum(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """max c.y subject to a y <= b, by enumerating every vertex (the polytope must be bounded)."""
    picks = np.array(list(itertools.combinations(range(len(b)), c.size)))
    subs = a[picks]
    regular = np.abs(np.linalg.det(subs)) >= 1e-12
    y = np.linalg.solve(subs[regular], b[picks[regular]][..., None])[..., 0]
    feasible = y[(y @ a.T <= b + 1e-9).all(axis=1)]
    assert feasible.size
    best = int(np.argmax(feasible @ c))
    return float(feasible[best] @ c), feasible[best]


def gavel_rows(problem: PolicyProblem, extra: int) -> tuple[np.ndarray, np.ndarray]:
    """Gavel's base constraints on y = (x row-major, extra variables >= 0), as a y <= b."""
    jobs, types = problem.throughputs.shape
    n = jobs * types + extra
    rows, rhs = [], []
    for t in range(types):  # sum_i s_i x_it <= W_t
        row = np.zeros(n)
        row[[i * types + t for i in range(jobs)]] = problem.scale_factors
        rows.append(row)
        rhs.append(problem.gpus[t])
    for i in range(jobs):  # sum_t x_it <= 1
        row = np.zeros(n)
        row[i * types:(i + 1) * types] = 1
        rows.append(row)
        rhs.append(1.0)
    for k in range(n):  # y >= 0
        row = np.zeros(n)
        row[k] = -1
        rows.append(row)
        rhs.append(0.0)
    return np.array(rows), np.array(rhs, dtype=float)


def random_problem(seed: int, jobs: int = 3, types: int = 2) -> PolicyProblem:
    rng = np.random.default_rng(seed)
    throughputs = rng.uniform(0.5, 4.0, (jobs, types))
    return PolicyProblem(throughputs, rng.choice([1, 2], jobs), rng.integers(1, 3, types),
                         priority_weights=rng.choice([1.0, 2.0], jobs))


def brute_max_min(problem: PolicyProblem, c: np.ndarray | None = None) -> float:
    """max z s.t. Gavel's base rows and z <= sum_t c[i, t] x[i, t] (default c: max-min's)."""
    c = normalised_coefficients(problem) if c is None else c
    jobs, types = c.shape
    a, b = gavel_rows(problem, 1)
    fairness = np.zeros((jobs, a.shape[1]))  # z - sum_t c_it x_it <= 0
    for i in range(jobs):
        fairness[i, i * types:(i + 1) * types] = -c[i]
        fairness[i, -1] = 1
    objective = np.zeros(a.shape[1])
    objective[-1] = 1
    return vertex_optimum(objective, np.vstack([a, fairness]), np.r_[b, np.zeros(jobs)])[0]


def brute_makespan(problem: PolicyProblem, remaining: np.ndarray) -> float:
    jobs, types = problem.throughputs.shape
    a, b = gavel_rows(problem, 1)
    finish = np.zeros((jobs, a.shape[1]))  # remaining_i u - sum_t X_it x_it <= 0
    for i in range(jobs):
        finish[i, i * types:(i + 1) * types] = -problem.throughputs[i]
        finish[i, -1] = remaining[i]
    objective = np.zeros(a.shape[1])
    objective[-1] = 1
    return 1.0 / vertex_optimum(objective, np.vstack([a, finish]), np.r_[b, np.zeros(jobs)])[0]


def brute_max_sum(problem: PolicyProblem, costs: np.ndarray) -> float:
    a, b = gavel_rows(problem, 0)
    return vertex_optimum((problem.throughputs / costs[None, :]).ravel(), a, b)[0]


def check_base_rows(problem: PolicyProblem, x: np.ndarray) -> None:
    assert (x >= -TOL).all()
    assert (x[problem.throughputs == 0] <= TOL).all()
    assert (problem.scale_factors @ x <= problem.gpus + TOL).all()
    assert (x.sum(axis=1) <= 1 + TOL).all()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
@pytest.mark.parametrize("seed", range(4))
def test_max_min_fairness_matches_vertex_enumeration(solver: str, seed: int, method: str) -> None:
    require(solver)
    problem = random_problem(seed)
    result = solve_max_min_fairness(problem, solver, method=method)
    assert result.objective == pytest.approx(brute_max_min(problem), rel=TOL)
    assert result.allocation is not None
    check_base_rows(problem, result.allocation)
    normalised = (normalised_coefficients(problem) * result.allocation).sum(axis=1)
    assert normalised.min() == pytest.approx(result.objective, rel=TOL)
    agnostic = solve_max_min_fairness(problem.agnostic(), solver, method=method)
    assert agnostic.objective == pytest.approx(brute_max_min(problem.agnostic()), rel=TOL)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
@pytest.mark.parametrize("seed", range(4))
def test_makespan_and_max_sum_throughput_match_vertex_enumeration(solver: str, seed: int, method: str) -> None:
    require(solver)
    problem = random_problem(seed)
    remaining = np.random.default_rng(seed).uniform(100, 1000, problem.num_jobs)
    makespan = solve_makespan(problem, remaining, solver, method=method)
    assert makespan.objective == pytest.approx(brute_makespan(problem, remaining), rel=TOL)
    assert makespan.allocation is not None
    check_base_rows(problem, makespan.allocation)
    assert (makespan.effective_throughputs * makespan.objective >= remaining * (1 - TOL)).all()
    costs = np.array([1.0, 2.5])
    best = solve_max_sum_throughput(problem, solver, costs=costs, method=method)
    assert best.objective == pytest.approx(brute_max_sum(problem, costs), rel=TOL)
    assert best.allocation is not None
    check_base_rows(problem, best.allocation)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_closed_forms_on_one_type(solver: str, method: str) -> None:
    require(solver)
    throughputs = np.array([[2.0], [5.0], [1.0], [3.0]])
    scale = np.array([1, 2, 1, 4])
    weights = np.array([1.0, 2.0, 1.0, 1.0])
    problem = PolicyProblem(throughputs, scale, [6], priority_weights=weights)
    # Max-min, one type: c_i = s_i / w_i, so z* = min(W / sum(w), min_i s_i / w_i).
    result = solve_max_min_fairness(problem, solver, method=method)
    assert result.objective == pytest.approx(min(6 / weights.sum(), (scale / weights).min()), rel=TOL)
    # Makespan, one type: T* = max(max_i R_i / X_i, sum_i s_i R_i / X_i / W).
    remaining = np.array([100.0, 400.0, 50.0, 90.0])
    alone = remaining / throughputs[:, 0]
    makespan = solve_makespan(problem, remaining, solver, method=method)
    assert makespan.objective == pytest.approx(max(alone.max(), (scale * alone).sum() / 6), rel=TOL)
    # Max-sum-throughput, one type: a fractional knapsack, best throughput per GPU first, each up to 1.
    left, total = 6.0, 0.0
    for i in np.argsort(-throughputs[:, 0] / scale, kind="stable"):
        take = min(1.0, left / scale[i])
        total += take * throughputs[i, 0]
        left -= take * scale[i]
    assert solve_max_sum_throughput(problem, solver, method=method).objective == pytest.approx(total, rel=TOL)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_finish_time_fairness_on_one_type_against_its_closed_form(solver: str, method: str) -> None:
    require(solver)
    throughputs = np.array([[2.0], [5.0], [1.0]])
    scale = np.array([1, 2, 1])
    problem = PolicyProblem(throughputs, scale, [3])
    remaining = np.array([1000.0, 3000.0, 400.0])
    elapsed = np.array([50.0, 0.0, 300.0])
    isolated_s = np.array([20.0, 0.0, 100.0])
    iso = problem.isolated_throughputs()
    expected = isolated_s + remaining / iso
    # One type: job i needs x_i(rho) = R_i / (X_i (rho E_i - t_i)), at most 1; rho* is where the x_i fill W.

    def need(rho: float) -> np.ndarray:
        return remaining / (throughputs[:, 0] * (rho * expected - elapsed))

    low = max(((elapsed + remaining / throughputs[:, 0]) / expected).max(), (elapsed / expected).max() + 1e-12)
    rho = low if (scale * need(low)).sum() <= 3 else brentq(lambda r: (scale * need(r)).sum() - 3, low, 1e6,
                                                          xtol=1e-14)
    result = solve_finish_time_fairness(problem, remaining, elapsed, isolated_s, solver, method=method)
    assert result.objective == pytest.approx(rho, rel=1e-6)
    assert result.allocation is not None
    check_base_rows(problem, result.allocation)
    assert result.iterations <= 20


def test_finish_time_fairness_on_two_types_against_gavels_convex_program() -> None:
    cp = pytest.importorskip("cvxpy", reason="cvxpy (the bench extra) solves Gavel's own convex program")
    for seed in range(3):
        problem = random_problem(seed, jobs=4)
        rng = np.random.default_rng(seed)
        remaining, elapsed = rng.uniform(500, 5000, 4), rng.uniform(0, 300, 4)
        expected = remaining / problem.isolated_throughputs()
        x = cp.Variable(problem.throughputs.shape)
        ratios = [(elapsed[i] + remaining[i] * cp.inv_pos(problem.throughputs[i] @ x[i])) / expected[i]
                  for i in range(4)]
        scale = np.repeat(problem.scale_factors[:, None], 2, axis=1)
        gavel = cp.Problem(cp.Minimize(cp.maximum(*ratios)),
                           [x >= 0, cp.sum(cp.multiply(scale, x), axis=0) <= problem.gpus, cp.sum(x, axis=1) <= 1])
        gavel.solve(solver="CLARABEL" if "CLARABEL" in cp.installed_solvers() else None)
        ours = solve_finish_time_fairness(problem, remaining, elapsed)
        assert ours.objective == pytest.approx(gavel.value, rel=1e-5)


def brute_finish_time_fairness(problem: PolicyProblem, remaining: np.ndarray, elapsed: np.ndarray,
                               isolated_s: np.ndarray) -> float:
    """Gavel's finish-time fairness (formulations/policies.md, row F1) by bisection on its ratio: ``rho`` is
    reachable iff every job can get ``T_i >= R_i / (rho E_i - e_i)``, i.e. iff the max-min LP with ``c[i, t] =
    X[i, t] (rho E_i - e_i) / R_i`` reaches 1, each solved by vertex enumeration (no LP solver, no cvxpy)."""
    expected = isolated_s + remaining / problem.isolated_throughputs()

    def reach(rho: float) -> float:
        c = problem.throughputs * ((rho * expected - elapsed) / remaining)[:, None]
        return brute_max_min(problem, c) - 1.0

    # No job finishes sooner than alone on its fastest type, all the time; the isolated share is reachable.
    low = float(((elapsed + remaining / problem.throughputs.max(axis=1)) / expected).max())
    if reach(low) >= 0:
        return low
    high = float(((elapsed + remaining / problem.isolated_throughputs()) / expected).max())
    return float(brentq(reach, low, high, xtol=1e-13, rtol=1e-13))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
@pytest.mark.parametrize("seed", range(3))
def test_finish_time_fairness_on_two_types_against_brute_force(solver: str, method: str, seed: int) -> None:
    require(solver)
    problem = random_problem(seed)
    rng = np.random.default_rng(seed)
    remaining, elapsed = rng.uniform(500, 5000, 3), rng.uniform(0, 300, 3)
    isolated_s = elapsed * rng.uniform(0, 1, 3)
    result = solve_finish_time_fairness(problem, remaining, elapsed, isolated_s, solver, method=method)
    assert result.objective == pytest.approx(brute_finish_time_fairness(problem, remaining, elapsed, isolated_s),
                                             rel=1e-6)
    assert result.allocation is not None
    check_base_rows(problem, result.allocation)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_finish_time_fairness_by_hand_on_two_types(solver: str, method: str) -> None:
    require(solver)
    # The jobs of the max-min hand case, new (no time elapsed or run alone): rho_i = iso_i / T_i. Their 1/3
    # share of each type gives iso = (5/3, 4/3, 4/3), 2/3 of the proportional throughputs (2.5, 2, 2), so FTF is
    # max-min on coefficients 3/2 times max-min's: the same unique allocation, and rho* = 1 / (3/2 * 48/55) = 55/72.
    problem = hand_problem()
    assert problem.isolated_throughputs() == pytest.approx([5 / 3, 4 / 3, 4 / 3])
    result = solve_finish_time_fairness(problem, [100.0, 200.0, 300.0], solver=solver, method=method)
    assert result.objective == pytest.approx(float(Fraction(55, 72)), rel=TOL)
    check_hand_allocation(result)


def test_finish_time_fairness_beside_a_job_that_runs_nowhere_warns_nothing() -> None:
    # numpy's "invalid value encountered in divide" leaked from the job's inf / inf (a usability review).
    problem = PolicyProblem([[1.0, 4.0], [3.0, 1.0], [2.0, 2.0], [0.0, 0.0]], [1, 1, 1, 1], [1, 1],
                            types=("k80", "v100"), job_ids=("A", "B", "C", "D"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = solve_finish_time_fairness(problem, [100.0, 200.0, 300.0, 50.0])
    assert result.status is Status.OPTIMAL and np.isfinite(result.objective)
    assert result.as_dict()["D"] == {"k80": 0.0, "v100": 0.0}


def hand_problem() -> PolicyProblem:
    """The two-type hand case: A runs 4x faster on the V100, B 3x faster on the K80, C alike on both."""
    return PolicyProblem([[1.0, 4.0], [3.0, 1.0], [2.0, 2.0]], [1, 1, 1], [1, 1], types=("k80", "v100"),
                         job_ids=("A", "B", "C"))


def check_hand_allocation(result: PolicyResult) -> None:
    """The hand case's unique optimum (its derivation: test_max_min_fairness_by_hand_on_two_types)."""
    expected = {"A": {"k80": 0.0, "v100": 6 / 11}, "B": {"k80": 32 / 55, "v100": 0.0},
                "C": {"k80": 23 / 55, "v100": 5 / 11}}
    for job, row in result.as_dict().items():
        assert row == pytest.approx(expected[job], abs=TOL)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_max_min_fairness_by_hand_on_two_types(solver: str, method: str) -> None:
    require(solver)
    # One K80 and one V100; A runs 4x faster on the V100, B 3x faster on the K80, C alike on both. At the
    # proportional share (half of each) A gets 2.5, B 2, C 2: normalised, c_A = (0.4, 1.6), c_B = (1.5, 0.5),
    # c_C = (1, 1). The optimum gives A the V100 only, B the K80 only, C some of each, and equalises:
    # 1.6 a = 1.5 b = (1 - a) + (1 - b) = z, so z = 2 / (1 + 1/1.6 + 1/1.5) = 48/55, a = 6/11, b = 32/55.
    problem = hand_problem()
    result = solve_max_min_fairness(problem, solver, method=method)
    assert result.objective == pytest.approx(float(Fraction(48, 55)), rel=TOL)
    check_hand_allocation(result)
    # Heterogeneity-agnostic: every throughput 1, so z = 2 GPUs / 3 jobs; any split of 2/3 each is optimal.
    agnostic = solve_max_min_fairness(problem.agnostic(), solver, method=method)
    assert agnostic.objective == pytest.approx(2 / 3, rel=TOL)


def distinct_problem(seed: int, jobs: int = 120) -> PolicyProblem:
    """Jobs of 6 kinds on 3 types, every throughput jittered so that no two jobs are alike (as the benchmark's
    distinct inputs), a GPU of each type per 10 jobs."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.5, 4.0, (6, 3))
    throughputs = base[rng.integers(6, size=jobs)] * np.exp(rng.normal(0.0, 0.05, (jobs, 3)))
    return PolicyProblem(throughputs, rng.choice([1, 2, 4], jobs, p=[0.7, 0.2, 0.1]), [jobs // 10] * 3)


@pytest.mark.parametrize("solver", LP_SOLVERS)
@pytest.mark.parametrize("seed", range(2))
def test_decomposition_matches_the_whole_lp_on_distinct_jobs(solver: str, seed: int) -> None:
    require(solver)
    problem = distinct_problem(seed)
    rng = np.random.default_rng(seed)
    remaining = rng.lognormal(8.0, 1.0, problem.num_jobs)  # long jobs too: makespan's time rows bind
    elapsed = rng.uniform(0, 3000, problem.num_jobs)
    isolated_s = elapsed * rng.uniform(0, 1, problem.num_jobs)
    solves: dict[str, Callable[[str], PolicyResult]] = {
        "max_min": lambda method: solve_max_min_fairness(problem, solver, method=method),
        "makespan": lambda method: solve_makespan(problem, remaining, solver, method=method),
        "ftf": lambda method: solve_finish_time_fairness(problem, remaining, elapsed, isolated_s, solver,
                                                        method=method),
        "max_sum": lambda method: solve_max_sum_throughput(problem, solver, costs=np.array([1.0, 1.5, 3.0]),
                                                           method=method),
    }
    for name, solve in solves.items():
        whole, parts = solve("lp"), solve("decomposed")
        assert parts.objective == pytest.approx(whole.objective, rel=TOL), name
        assert parts.allocation is not None
        check_base_rows(problem, parts.allocation)
    x = solve_max_min_fairness(problem, solver, method="decomposed").allocation
    assert x is not None and (normalised_coefficients(problem) * x).sum(axis=1).min() == pytest.approx(
        solves["max_min"]("lp").objective, rel=TOL)
    makespan = solves["makespan"]("decomposed")
    assert makespan.objective is not None
    assert (makespan.effective_throughputs * makespan.objective >= remaining * (1 - TOL)).all()


@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_decomposition_fixes_most_jobs_and_certifies_each_way(solver: str) -> None:
    require(solver)
    problem = distinct_problem(0)
    params = SolverParams()
    weights = problem.scale_factors.astype(float)
    gpus = problem.gpus.astype(float)
    # Max-min: the relaxation's bound certifies the first reduced LP, almost every job fixed.
    c = normalised_coefficients(problem)
    parts = solve_requirements(Requirements(c, np.zeros(c.shape[0]), weights, gpus), solver, params)
    assert parts.lps == 1 and parts.free_rows < problem.num_jobs / 10
    assert parts.z == pytest.approx(solve_max_min_fairness(problem, solver, method="lp").objective, rel=TOL)
    # Makespan with long jobs: their time rows bind, so the reduced LP's dual certifies (two LPs, or more).
    remaining = np.random.default_rng(0).lognormal(8.0, 1.0, problem.num_jobs)
    req = Requirements(problem.throughputs / remaining[:, None], np.zeros(problem.num_jobs), weights, gpus)
    parts = solve_requirements(req, solver, params)
    assert parts.lps >= 2 and parts.free_rows < problem.num_jobs / 2 and parts.z is not None
    assert 1 / parts.z == pytest.approx(solve_makespan(problem, remaining, solver, method="lp").objective, rel=TOL)
    # Max-sum-throughput: its Lagrangian dual's prices leave a few jobs free; one reduced LP reaches its bound.
    values, usable = problem.throughputs, problem.throughputs > 0
    solved, lps, free = solve_sum_decomposed(values, weights, gpus, usable, solver, params, 0.0)
    assert lps == 1 and free < problem.num_jobs / 10 and solved.result.objective is not None
    assert solved.result.objective == pytest.approx(solve_max_sum_throughput(problem, solver, method="lp").objective,
                                                    rel=TOL)


@pytest.mark.parametrize("policy", ["max_min", "makespan", "max_sum", "ftf"])
def test_identical_jobs_solved_as_classes_give_the_same_optimum(policy: str) -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.5, 4.0, (4, 3))
    pick = rng.integers(4, size=40)
    problem = PolicyProblem(base[pick], np.ones(40, dtype=int) + (pick == 2), [5, 6, 4])
    remaining = 1000.0 * (1 + pick)
    solve: Callable[[bool], float | None] = {
        "max_min": lambda agg: solve_max_min_fairness(problem, aggregate=agg).objective,
        "makespan": lambda agg: solve_makespan(problem, remaining, aggregate=agg).objective,
        "max_sum": lambda agg: solve_max_sum_throughput(problem, aggregate=agg).objective,
        "ftf": lambda agg: solve_finish_time_fairness(problem, remaining, aggregate=agg).objective,
    }[policy]
    assert solve(True) == pytest.approx(solve(False), rel=1e-6)


def test_gavels_proportional_and_isolated_shares() -> None:
    problem = PolicyProblem([[1.0, 4.0], [3.0, 1.0]], [1, 2], [2, 6])
    # Proportional: x = gpus / sum(gpus) = (1/4, 3/4) for every job, whatever its scale factor.
    assert problem.proportional_throughputs() == pytest.approx([0.25 + 3.0, 0.75 + 0.75])
    # Isolated: gpus / (n * scale) = (1, 3) and (1/2, 3/2), each row scaled to sum to at most 1.
    assert problem.isolated_throughputs() == pytest.approx([(1 + 12) / 4, (1.5 + 1.5) / 2])
    seen = problem.seen_on("t1")
    assert (seen.throughputs == [[4.0, 4.0], [1.0, 1.0]]).all()


def test_round_mechanism_by_hand() -> None:
    # Three single-GPU jobs owed 2/3 of a 2-GPU type each. After the reset each has half a round (180 s) of
    # 540: priority (2/3) / (1/3) = 2 for all, ties by joining order: A, B. Then A, B have 540 of 1260 and C
    # 180: C's priority is highest, then A (tied with B, joined first): C, A. Then B and C: each job runs 2
    # rounds of 3, as owed.
    rounds = RoundMechanism(("v100",), [2], 360.0)
    for job in "ABC":
        rounds.add(job)
    rounds.reset(0.0, {job: np.array([2 / 3]) for job in "ABC"})
    scale = dict.fromkeys("ABC", 1)
    can = {job: np.array([True]) for job in "ABC"}
    schedule = []
    for _ in range(3):
        placed = rounds.schedule(scale, can)
        schedule.append("".join(sorted(placed)))
        for job, t in placed.items():
            rounds.record(job, t, 360.0)
    assert schedule == ["AB", "AC", "BC"]
    # After three rounds each has 900 s of 2700: back to (2/3) / (1/3) = 2.
    assert all(value == pytest.approx([2.0]) for value in rounds.priorities(can).values())


def test_round_mechanism_follows_the_fractions_and_the_rules() -> None:
    problem = PolicyProblem([[1.0, 4.0], [3.0, 1.0], [2.0, 2.0], [1.0, 0.0], [2.0, 3.0]], [1, 1, 1, 1, 1], [2, 2],
                            types=("k80", "v100"), job_ids=("A", "B", "C", "D", "E"))
    result = solve_max_min_fairness(problem)
    assert result.allocation is not None
    rounds = RoundMechanism(problem.types[::-1], [2, 2], 360.0)  # v100 first, as Gavel orders them
    for job in problem.job_ids:
        rounds.add(job)
    rounds.reset(0.0, {job: row[::-1] for job, row in zip(problem.job_ids, result.allocation, strict=True)})
    scale = dict(zip(problem.job_ids, map(int, problem.scale_factors), strict=True))
    can = {job: row[::-1] > 0 for job, row in zip(problem.job_ids, problem.throughputs, strict=True)}
    got = dict.fromkeys(problem.job_ids, np.zeros(2))
    rounds_run = 600
    for _ in range(rounds_run):
        placed = rounds.schedule(scale, can)
        used = np.zeros(2, dtype=int)
        for job, t in placed.items():
            assert can[job][t]
            used[t] += scale[job]
            rounds.record(job, t, 360.0)
            got[job] = got[job] + np.eye(2)[t]
        assert (used <= 2).all()
    for job, row in zip(problem.job_ids, result.allocation, strict=True):
        # Single-GPU jobs: each gets (about) at least the time it is owed on each type; GPUs the fractions
        # leave idle go to jobs owed nothing there (Gavel's walk does not stop at priority 0).
        assert (got[job] / rounds_run >= row[::-1] - 0.01).all(), (job, got[job] / rounds_run, row)


def test_float_noise_in_the_fractions_does_not_break_a_tie() -> None:
    # Two 1-GPU jobs on one GPU, each owed a half: the LP of a tester's round gave 0.4999999999999999 and
    # 0.5000000000000001, which put the later job first; equal but for noise, the tie goes to the first joined.
    for first, second in ((0.4999999999999999, 0.5000000000000001), (0.5000000000000001, 0.4999999999999999)):
        rounds = RoundMechanism(("v100",), [1], 300.0)
        rounds.add("A")
        rounds.add("B")
        rounds.reset(0.0, {"A": np.array([first]), "B": np.array([second])})
        assert rounds.schedule({"A": 1, "B": 1}, {"A": np.array([True]), "B": np.array([True])}) == {"A": 0}
    # Noise on either side of a power of ten ties too (decimal rounding gave 1e-4 two keys there).
    rounds = RoundMechanism(("v100",), [1], 300.0)
    rounds.add("A")
    rounds.add("B")
    rounds.reset(0.0, {"A": np.array([9.999999999999289e-05]), "B": np.array([1.0000000000000025e-04])})
    assert rounds.schedule({"A": 1, "B": 1}, {"A": np.array([True]), "B": np.array([True])}) == {"A": 0}
    # A real difference still counts.
    rounds = RoundMechanism(("v100",), [1], 300.0)
    rounds.add("A")
    rounds.add("B")
    rounds.reset(0.0, {"A": np.array([0.4999]), "B": np.array([0.5001])})
    assert rounds.schedule({"A": 1, "B": 1}, {"A": np.array([True]), "B": np.array([True])}) == {"B": 0}


@pytest.mark.parametrize(("throughputs", "weights"), [([[1e-300, 1e-300], [1.0, 1.0]], [1e-12, 1.0]),
                                                     ([[1e100, 1e100], [1e100, 1e100]], [1e-12, 1e-12])])
def test_weights_and_throughputs_at_their_bounds_are_solved(throughputs: list[list[float]],
                                                            weights: list[float]) -> None:
    # Weight times proportional throughput underflowed, and its inverse was inf: both LPs ended in error.
    problem = PolicyProblem(throughputs, [1, 1], [1, 1], priority_weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(normalised_coefficients(problem)).all()
        for solve in (solve_max_min_fairness, solve_water_filling):
            result = solve(problem)
            assert result.status is Status.OPTIMAL and result.allocation is not None, solve.__name__


def test_bad_problems_and_solvers_are_named() -> None:
    with pytest.raises(InvalidInputError, match=r"throughputs\[0\]\[1\]"):
        PolicyProblem([[1.0, -2.0]], [1], [1, 1])
    with pytest.raises(InvalidInputError, match=r"scale_factors\[0\]"):
        PolicyProblem([[1.0]], [1.5], [1])
    with pytest.raises(InvalidInputError, match="gpus"):
        PolicyProblem([[1.0, 2.0]], [1], [1])
    for weight in (0.0, 1e-200, 1e13, np.inf):  # 1e-200 made a coefficient inf: the LP ended in error
        with pytest.raises(InvalidInputError, match=r"priority_weights\[0\]"):
            PolicyProblem([[1.0]], [1], [1], priority_weights=[weight])
    with pytest.raises(InvalidInputError, match=r"throughputs\[0\]\[0\]"):
        PolicyProblem([[1e101]], [1], [1])
    with pytest.raises(InvalidInputError, match="types"):
        PolicyProblem([[1.0]], [1], [1], types=("a", "b"))
    problem = PolicyProblem([[1.0]], [1], [1])
    with pytest.raises(InvalidInputError, match=r"remaining\[0\]"):
        solve_makespan(problem, [0.0])
    with pytest.raises(InvalidInputError, match="remaining"):
        solve_finish_time_fairness(problem, [1.0, 2.0])
    with pytest.raises(InvalidInputError, match="costs"):
        solve_max_sum_throughput(problem, costs=[-1.0])
    with pytest.raises(UnknownNameError, match="solver"):
        solve_max_min_fairness(problem, "gurobi")
    with pytest.raises(UnknownNameError, match="method"):
        solve_makespan(problem, [1.0], method="bisection")
    with pytest.raises(UnknownNameError, match="gpu_type"):
        problem.seen_on("a100")
    if not backend("ortools-cpsat").missing():
        with pytest.raises(SolverUnavailableError, match="integer"):
            solve_max_min_fairness(problem, "ortools-cpsat")


# -- edge cases from a fuzz review (session 37) --------------------------------------------------------------------
def _every_policy(problem: PolicyProblem, **options: object) -> dict[str, PolicyResult]:
    remaining = np.full(problem.num_jobs, 100.0)
    return {
        "max_min_fairness": solve_max_min_fairness(problem, **options),
        "water_filling": solve_water_filling(problem),
        "makespan": solve_makespan(problem, remaining, **options),
        "max_sum_throughput": solve_max_sum_throughput(problem, **options),
        "finish_time_fairness": solve_finish_time_fairness(problem, remaining, **options),
    }


@pytest.mark.parametrize("method", ["lp", "decomposed"])
def test_no_job_and_no_gpu_are_nothing_to_share(method: str) -> None:
    # A problem without jobs once crashed every policy in numpy (an empty reshape); max-sum's decomposition
    # divided by zero types with GPUs; finish-time fairness with no job able to run was UNBOUNDED (its step LP
    # held only its free eta).
    for problem in (PolicyProblem(np.zeros((0, 2)), [], [1, 1]), PolicyProblem(np.ones((3, 2)), [1, 1, 1], [0, 0]),
                    PolicyProblem(np.zeros((3, 2)), [1, 1, 1], [2, 2])):
        for name, result in _every_policy(problem, method=method).items():
            assert result.status is Status.OPTIMAL, (name, result.solve.message)
            assert result.allocation is not None and result.allocation.shape == problem.throughputs.shape
            assert not result.allocation.any(), name


def test_without_an_allocation_there_is_no_objective() -> None:
    rng = np.random.default_rng(1)
    problem = PolicyProblem(rng.uniform(0.5, 4.0, (60, 3)), rng.choice([1, 2, 4], 60), [9, 6, 12])
    stopped = solve_finish_time_fairness(problem, rng.uniform(100, 1000, 60), time_limit=1e-6)
    assert stopped.allocation is None and stopped.objective is None  # it once reported 1.0


def test_names_must_be_distinct_and_rounds_positive() -> None:
    with pytest.raises(InvalidInputError, match="types"):
        PolicyProblem(np.ones((1, 2)), [1], [1, 1], types=("v100", "v100"))
    with pytest.raises(InvalidInputError, match="job_ids"):
        PolicyProblem(np.ones((2, 1)), [1, 1], [1], job_ids=("a", "a"))
    with pytest.raises(InvalidInputError, match="round_s"):
        RoundMechanism(["v100"], [4], -1.0)
    with pytest.raises(InvalidInputError, match=r"gpus\[0\]"):
        RoundMechanism(["v100"], [-4], 360.0)



# -- weights and steps decades apart (an independent tester's findings) ------------------------------------------


@pytest.mark.parametrize("exponent", [10, 12])
def test_max_min_fairness_with_one_weight_decades_above_the_others(exponent: int) -> None:
    # z* = job 1's best, 4 / (w1 * 2.5): below the solvers' tolerances, the whole LP returned OPTIMAL at 0 with
    # every fraction 0. Now z is counted in units of the least class's best (max_min.level_unit).
    weights = np.array([1.0, 10.0 ** exponent, 1.0])
    problem = PolicyProblem(np.array([[2.0, 3.0], [4.0, 1.0], [1.0, 1.0]]), np.array([1, 1, 2]), np.array([2, 2]),
                            priority_weights=weights)
    for method in METHODS:
        result = solve_max_min_fairness(problem, method=method)
        assert result.status is Status.OPTIMAL
        assert result.objective == pytest.approx(1.6 / 10 ** exponent, rel=1e-9), method
        assert result.allocation[1].tolist() == pytest.approx([1.0, 0.0], abs=1e-9), method  # the bottleneck


@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_max_min_fairness_of_one_job_of_small_weight_on_every_backend(solver: str) -> None:
    # CBC's point (eight significant digits) broke the row of a level near 143 by 1.8e-6: discarded, ERROR.
    require(solver)
    problem = PolicyProblem(np.array([[2.30, 9.05, 11.40]]), np.array([1]), np.array([8, 16, 8]),
                            priority_weights=np.array([0.01]))
    reference = solve_max_min_fairness(problem).objective
    result = solve_max_min_fairness(problem, solver, method="lp")
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(reference, rel=1e-6)
    assert reference == pytest.approx(11.40 / (0.01 * problem.proportional_throughputs()[0]), rel=1e-9)


@pytest.mark.parametrize("exponent", [9, 12])
def test_makespan_with_steps_decades_apart_gives_the_short_job_its_time(exponent: int) -> None:
    # The whole LP gave job 0 no time (its row met within tolerance at x = 0) and reported a finite makespan.
    throughputs = np.array([[2.0, 3.0], [4.0, 1.0], [1.0, 1.0]])
    problem = PolicyProblem(throughputs, np.array([1, 1, 2]), np.array([2, 2]))
    remaining = np.array([1.0, 10.0 ** exponent, 10.0 ** exponent])
    for method in METHODS:
        result = solve_makespan(problem, remaining, method=method)
        rates = (throughputs * result.allocation).sum(axis=1)
        assert rates.min() > 0, method
        assert (remaining / rates).max() == pytest.approx(result.objective, rel=1e-6), method
        assert result.objective == pytest.approx(10.0 ** exponent, rel=1e-6), method


@pytest.mark.parametrize("solver", LP_SOLVERS)
def test_max_min_fairness_at_weights_decades_apart_on_every_backend(solver: str) -> None:
    # z counted in the least class's best put coefficients of 1e10 in the other rows: CBC's points failed the rows'
    # check (ERROR, no allocation); the LP in z's own unit is solved then. The objective is read at the allocation
    # (SCIP's, 0: its tolerance gives the bottleneck job none).
    require(solver)
    problem = PolicyProblem(np.array([[2.0, 3.0], [4.0, 1.0], [1.0, 1.0]]), np.array([1, 1, 2]), np.array([2, 2]),
                            priority_weights=np.array([1.0, 1e10, 1.0]))
    result = solve_max_min_fairness(problem, solver, method="lp")
    assert result.status is Status.OPTIMAL and result.allocation is not None
    values = (normalised_coefficients(problem) * result.allocation).sum(axis=1)
    assert result.objective == pytest.approx(values.min(), rel=1e-12, abs=1e-300)
    assert result.objective <= 1.6e-10 * (1 + 1e-6)
