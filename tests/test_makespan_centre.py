"""Gavel's makespan point (synergy_opt.policies.centre): the bisection's makespan by hand, the analytic centre
against an independent derivative-free search and a closed form, and solve_makespan(point="gavel") against the
rows it must keep; the simulator's makespan policy against Gavel's own simulator (slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

import synergy_opt as so
from synergy_opt.policies import PolicyProblem, solve_makespan
from synergy_opt.policies.centre import FEASIBLE_MARGIN, analytic_centre, gavel_makespan
from synergy_opt.policies.linear import makespan_at
from synergy_opt.sim.gavel import gavel_trace_file
from synergy_opt.sim.trace_io import load_trace

FLAT_MODELS = {"A3C": "gnmt", "CycleGAN": "gnmt", "ResNet-18": "gnmt", "ResNet-50": "gnmt"}


def test_gavels_bisection_below_its_first_bracket_stops_at_its_floor_by_hand() -> None:
    # Every T tried is feasible: the bracket [100, 1e6] halves from above until 1.05 * 100 >= its top, after
    # k halvings with 999,900 / 2^k <= 5, so k = 18.
    assert gavel_makespan(80.0) == 100 + 999_900 / 2**18


def test_gavels_bisection_in_its_second_bracket_by_hand() -> None:
    # least = 1e6: no T of [100, 1e6] is feasible (all below 1e6 (1 + margin)); in [1e6, 1e7] every midpoint is,
    # so the top halves down until 1.05e6 >= 1e6 + 9e6 / 2^k: k = 8. (A bracket grown 100-fold would give k = 11.)
    assert gavel_makespan(1e6) == 1e6 + 9e6 / 2**8


@pytest.mark.parametrize("least", [150.0, 3_333.3, 86_400.0, 900_000.0, 970_000.0, 2.5e6, 4.4e8, 1e300])
def test_gavels_bisection_stops_a_bracket_step_above_the_least(least: float) -> None:
    found = gavel_makespan(least)
    # Within 5% above the least, or 7% when the least lies just below a bracket's top (970,000: 6.7%).
    assert least * (1 + FEASIBLE_MARGIN) <= found <= 1.07 * least
    if least * (1 + FEASIBLE_MARGIN) < 1e6 / 1.05:
        assert found <= 1.05 * least * (1 + FEASIBLE_MARGIN)
    # A midpoint of its bracket [10^k, 10^(k+1)] (the first one [100, 1e6]).
    low = 100.0 if found < 1e6 else 10 ** np.floor(np.log10(found))
    high = 1e6 if found < 1e6 else 10 * low
    steps = (found - low) / (high - low) * 2**40
    assert steps == pytest.approx(round(steps), abs=1e-3)


def test_a_least_makespan_near_floats_end_comes_back_with_its_margin() -> None:
    # Gavel's loop would not end: (low + high) / 2 overflows to inf near 1e308.
    assert gavel_makespan(1.7e308) == 1.7e308 * (1 + FEASIBLE_MARGIN)


def _barrier(x: np.ndarray, throughputs: np.ndarray, scale: np.ndarray, gpus: np.ndarray, need: np.ndarray) -> float:
    slacks = [x.ravel(), 1 - x.sum(axis=1), gpus - scale @ x, (throughputs * x).sum(axis=1) - need]
    if any((s <= 0).any() for s in slacks):
        return np.inf
    return -sum(float(np.log(s).sum()) for s in slacks)


@pytest.mark.parametrize("seed", range(12))
def test_the_centre_is_the_least_barrier_point_by_an_independent_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs, types = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    throughputs = rng.uniform(0.5, 3.0, (jobs, types)) * (rng.random((jobs, types)) < 0.8)
    throughputs[:, 0] = np.maximum(throughputs[:, 0], 0.5)  # every job can run somewhere
    scale = rng.integers(1, 3, jobs).astype(float)
    gpus = rng.integers(1, 4, types).astype(float)
    inside = rng.uniform(0.05, 0.9 / types, (jobs, types)) * min(1.0, float(gpus.min() / scale.sum()))
    need = (throughputs * inside).sum(axis=1) * rng.uniform(0.2, 0.9, jobs)
    data = (throughputs, scale, gpus, need)
    centre, steps = analytic_centre(inside, *data)
    assert steps < 60
    found = minimize(lambda v: _barrier(v.reshape(jobs, types), *data), inside.ravel(),
                     method="Nelder-Mead",
                     options={"maxiter": 100_000, "maxfev": 100_000, "xatol": 1e-11, "fatol": 1e-14})
    assert _barrier(centre, *data) <= found.fun + 1e-9
    assert centre.ravel() == pytest.approx(found.x, abs=1e-5)


def test_the_centre_of_identical_jobs_on_one_type_by_hand() -> None:
    # k alike jobs, X = 1, one type of G GPUs, need r: by symmetry every x_i = y, where the barrier's derivative
    # along (1, ..., 1) is 0: 1/y - 1/(1 - y) + 1/(y - r) - 1/(G - k y) = 0.
    k, gpus, need = 5, 3.0, 0.2
    y = brentq(lambda v: 1 / v - 1 / (1 - v) + 1 / (v - need) - 1 / (gpus - k * v), need + 1e-12, gpus / k - 1e-12)
    start = np.full((k, 1), 0.25) + np.arange(k)[:, None] * 0.05
    centre, _ = analytic_centre(start, np.ones((k, 1)), np.ones(k), np.array([gpus]), np.full(k, need))
    assert centre[:, 0] == pytest.approx(np.full(k, y), rel=1e-9)


def _light_problem() -> tuple[PolicyProblem, np.ndarray]:
    # Three single-GPU jobs and a 2-GPU one on 4 + 2 GPUs of two types: the least makespan is the 2-GPU job's
    # alone on its fast type, so the others need little time and the LP's optimum gives them just that.
    throughputs = np.array([[1.0, 0.5], [2.0, 1.0], [1.0, 0.0], [3.0, 1.0]])
    return PolicyProblem(throughputs, np.array([1, 1, 1, 2]), np.array([4, 2])), np.array([100.0, 50.0, 20.0, 900.0])


def test_gavels_point_keeps_every_row_and_gives_every_job_time_to_spare() -> None:
    problem, remaining = _light_problem()
    optimum = solve_makespan(problem, remaining)
    gavel = solve_makespan(problem, remaining, point="gavel")
    assert optimum.objective == pytest.approx(300.0, rel=1e-9)  # 900 steps at 3 a second
    bisected = gavel_makespan(300.0)
    assert gavel.allocation is not None and optimum.allocation is not None
    x = gavel.allocation
    assert (x >= 0).all() and (x.sum(axis=1) <= 1).all() and (problem.scale_factors @ x <= problem.gpus).all()
    rates = (problem.throughputs * x).sum(axis=1)
    assert (rates * bisected >= remaining * (1 - 1e-12)).all()
    assert gavel.objective == pytest.approx(makespan_at(problem, remaining, x), rel=1e-12)
    assert 300.0 < gavel.objective <= bisected
    # Strictly inside: every job more than it needs, and more time in all than the LP's vertex hands out.
    assert (rates * bisected > remaining * 1.01)[:3].all()
    assert x.sum() > optimum.allocation.sum() + 0.5
    # Gavel's cvxpy model has a variable on every type, usable or not: the centre puts time there too.
    assert x[2, 1] > 0


def test_gavels_point_for_one_job_by_hand() -> None:
    # One job, one GPU, X = 1, R = 5: the least makespan 5 s is below Gavel's first bracket, so T = 100 +
    # 999,900 / 2^18; the centre maximises log x + 2 log(1 - x) (its time row and the capacity row) + log(x - 5/T).
    bisected = 100 + 999_900 / 2**18
    share = brentq(lambda v: 1 / v - 2 / (1 - v) + 1 / (v - 5 / bisected), 5 / bisected + 1e-12, 1 - 1e-12)
    result = solve_makespan(PolicyProblem(np.array([[1.0]]), np.array([1]), np.array([1])), np.array([5.0]),
                            point="gavel")
    assert result.allocation is not None
    assert result.allocation[0, 0] == pytest.approx(share, rel=1e-9)
    assert result.objective == pytest.approx(5 / share, rel=1e-9)


def test_a_type_of_no_gpus_holds_no_time_at_gavels_point() -> None:
    problem = PolicyProblem(np.array([[1.0, 1.0], [1.0, 2.0]]), np.array([1, 1]), np.array([2, 0]))
    remaining = np.array([10_000.0, 10_000.0])
    result = solve_makespan(problem, remaining, point="gavel")
    assert result.allocation is not None
    assert (result.allocation[:, 1] == 0).all()
    assert (result.allocation[:, 0] * gavel_makespan(10_000.0) > remaining * 1.01).all()


def test_gavels_point_is_the_optimum_where_a_job_runs_nowhere() -> None:
    problem = PolicyProblem(np.array([[1.0], [0.0]]), np.array([1, 1]), np.array([2]))
    optimum = solve_makespan(problem, np.array([10.0, 10.0]))
    result = solve_makespan(problem, np.array([10.0, 10.0]), point="gavel")
    assert result.objective == optimum.objective == np.inf
    assert result.allocation is not None and optimum.allocation is not None
    assert (result.allocation == optimum.allocation).all()


def test_an_unknown_point_is_named() -> None:
    problem, remaining = _light_problem()
    with pytest.raises(so.InvalidInputError, match="point"):
        solve_makespan(problem, remaining, point="vertex")


def test_three_jobs_finish_when_gavels_simulator_finishes_them(tmp_path: Path) -> None:
    # Three ResNet-18 jobs of 10 h, 1 h and 3 h at 0 on 2 V100s (Gavel's 7-column trace; a helper's run of Gavel
    # with min_total_duration_perf, 2026-12-07): Gavel finishes them at 36000.01, 8999.52 and 14759.63 s. The
    # LP's vertex gave the short jobs just what finishes them at 10 h, 0.1 and 0.3 (ECOS: 0.324, 0.459), and the
    # 1 h job finished at 4.0 h instead of 2.5 h.
    path = tmp_path / "three.trace"
    path.write_text("".join(f"ResNet-18 (batch size 32)\tcmd\t-n\t1\t{steps}\t0.000\t1\n"
                            for steps in (1078098, 107810, 323429)))
    trace = load_trace(path, job_models=FLAT_MODELS)
    result = so.simulate(trace, so.HeteroCluster.of("v100:1", 2, 6, 125), policy="makespan",
                         mechanism="proportional", round_s=360)
    assert result.jobs.finish_s.tolist() == pytest.approx([36000.01, 8999.52, 14759.63], abs=1.0)


# Gavel's own simulator (stanford-futuredata/gavel, scheduler/ unpatched, cvxpy with ECOS, allocation-reset
# throttle off; a helper's run of 2026-12-07) with min_total_duration_perf on 32 V100s (4 servers of 8), 360 s
# rounds, every job: average JCT in hours. Here: -1.3% and -1.2%; with the LP's vertex 111.48 h and 19.77 h.
GAVEL_MAKESPAN_ONE_TYPE_JCT_H = {"msr_seed0_ed69ec": 48.3607, "msr_seed0_103959": 14.3152}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GAVEL_MAKESPAN_ONE_TYPE_JCT_H))
def test_the_makespan_policy_against_gavels_simulator(name: str) -> None:
    trace = load_trace(gavel_trace_file(name), job_models=FLAT_MODELS)
    result = so.simulate(trace, so.HeteroCluster.of("v100:4", 8, 24, 500), policy="makespan",
                         mechanism="proportional", round_s=360, monitor=(0, len(trace)))
    assert result.summary["avg_jct_h"] == pytest.approx(GAVEL_MAKESPAN_ONE_TYPE_JCT_H[name], rel=0.025)
