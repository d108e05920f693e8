"""The ideal ILP's structured method: Lagrangian prices, one-row relaxations, beam and exact core searches.

Cross-checked against brute force, against HiGHS solving the whole model directly, and against the LP.
"""

from __future__ import annotations

import numpy as np
import pytest

import synergy_opt as so
import synergy_opt.ideal.core as ideal_core
import synergy_opt.ideal.hetero_core as hetero_core
from synergy_opt.ideal.core_search import prepare, search
from synergy_opt.ideal.lagrangian import Knapsack, dual_from_near, dual_value, solve_dual
from synergy_opt.ideal.model import Reductions, build_ideal
from synergy_opt.solvers import Status
from synergy_opt.solvers.base import check_solution
from tests.random_instances import brute_force_ideal, in_cpu_unit, in_units, random_instance
from tests.test_ideal import check_choices

# Each path of the method: as shipped; beam searches that keep one state; exact searches that stop at once
# (so that every incumbent comes from a beam); and proofs that stop at once too (so that every proof goes
# through the wider beam's improvements before its final, unlimited search).
PATHS = {
    "default": {},
    "narrow-beam": {"BEAM_WIDTHS": (1, 1)},
    "beam-only": {"EXACT_STATE_LIMIT": 0},
    "proof-retries": {"EXACT_STATE_LIMIT": 0, "BEAM_WIDTHS": (1, 1), "PROOF_STATE_LIMIT": 1},
}


def core(instance: so.RoundInstance, **kwargs: object) -> so.IdealResult:
    result = so.solve_ideal(instance, method="core", mip_gap=0.0, **kwargs)  # type: ignore[arg-type]
    assert result.status is Status.OPTIMAL, result.solve.message
    assert result.solver == "highs-core"
    assert check_solution(result.ideal.model, result.solve.solution()) < 1e-9
    return result


def direct(instance: so.RoundInstance, **kwargs: object) -> so.IdealResult:
    result = so.solve_ideal(instance, method="direct", mip_gap=0.0, **kwargs)  # type: ignore[arg-type]
    assert result.status is Status.OPTIMAL, result.solve.message
    return result


@pytest.mark.parametrize("path", PATHS)
def test_core_equals_brute_force_on_300_random_instances(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in PATHS[path].items():
        monkeypatch.setattr(ideal_core, name, value)
    rng = np.random.default_rng(99)
    for _ in range(300):
        instance = random_instance(rng, max_jobs=7, max_axis=4)
        gpu_weighted = bool(rng.random() < 0.3)
        result = core(instance, objective="gpu" if gpu_weighted else "job")
        assert result.objective == pytest.approx(brute_force_ideal(instance, gpu_weighted), abs=1e-6), instance
        assert result.bound is not None and result.bound >= result.objective - 1e-9
        if not gpu_weighted:
            check_choices(instance, result)


# Proofs from one-state beams' incumbents take minutes on these rounds: that path is checked on small ones.
@pytest.mark.parametrize("path", [path for path in PATHS if path != "proof-retries"])
def test_core_equals_direct_highs_on_generated_rounds(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Noisy rounds of 16-256 GPUs, single- and multi-GPU: the same optimum as HiGHS on the whole model."""
    for name, value in PATHS[path].items():
        monkeypatch.setattr(ideal_core, name, value)
    for seed in range(12):
        gpus = (16, 64, 128, 256)[seed % 4]
        instance = so.generate_round(gpus, multi_gpu=seed % 2 == 1, seed=seed, profile_noise=0.05)
        assert core(instance).objective == pytest.approx(direct(instance).objective, rel=1e-9)


def test_identical_jobs_are_searched_one_by_one() -> None:
    """Without noise jobs merge into classes of many; the core method expands them and agrees."""
    for seed in range(4):
        instance = so.generate_round(64, multi_gpu=seed % 2 == 1, seed=seed)
        result = core(instance)
        assert result.ideal.num_classes < len(instance.jobs)
        assert result.objective == pytest.approx(direct(instance).objective, rel=1e-9)


def test_the_gap_contract_holds_on_a_large_noisy_round() -> None:
    """At the default relative gap the core result is within 1e-6 of the optimum, and its bound is valid."""
    instance = so.generate_round(1024, profile_noise=0.05, seed=0)
    result = so.solve_ideal(instance, method="core")
    optimum = direct(instance).objective
    assert result.status is Status.OPTIMAL
    assert optimum * (1 - 1e-6) - 1e-9 <= result.objective <= optimum + 1e-9
    assert result.bound is not None and result.bound >= optimum - 1e-9
    lp = so.solve_ideal(instance, relax=True)
    assert result.bound <= lp.objective + 1e-9


@pytest.mark.parametrize(("gpus", "seed", "multi_gpu"), [(256, 2, False), (256, 4, False), (512, 1, True)])
def test_an_optimal_core_result_proves_the_default_gap(gpus: int, seed: int, multi_gpu: bool) -> None:
    """OPTIMAL means within mip_gap (1e-6) of the bound it reports and of HiGHS's exact optimum: on these rounds a
    search stopped at 100x the gap called 3.7e-5 below the optimum OPTIMAL and passed the suite (a mutation)."""
    instance = so.generate_round(gpus, multi_gpu=multi_gpu, seed=seed, profile_noise=0.05)
    result = so.solve_ideal(instance, method="core")
    assert result.status is Status.OPTIMAL and result.gap is not None and result.gap <= 1e-6
    exact = direct(instance).objective
    assert exact * (1 - 1e-6) - 1e-9 <= result.objective <= exact + 1e-9


def test_auto_uses_the_core_method_only_where_it_applies() -> None:
    noisy = so.generate_round(64, profile_noise=0.05, seed=1)
    assert so.solve_ideal(noisy).solver == "highs-core"
    assert so.solve_ideal(noisy, relax=True).solver == "highs"
    assert so.solve_ideal(noisy, solver="ortools-scip").solver == "ortools-scip"
    assert so.solve_ideal(noisy, options={"presolve": "off"}).solver == "highs"
    assert so.solve_ideal(noisy, reductions=Reductions.none()).solver == "highs"
    assert so.solve_ideal(so.generate_round(64, seed=1)).solver == "highs"  # identical jobs merged


def test_method_errors_name_the_field() -> None:
    instance = so.generate_round(16, profile_noise=0.05, seed=0)
    with pytest.raises(so.InvalidInputError, match="method"):
        so.solve_ideal(instance, method="fastest")  # type: ignore[arg-type]
    with pytest.raises(so.InvalidInputError, match="method"):
        so.solve_ideal(instance, method="core", relax=True)
    with pytest.raises(so.InvalidInputError, match="method"):
        so.solve_ideal(instance, method="core", reductions=Reductions.none())


@pytest.mark.parametrize("hetero", [False, True])
def test_a_loose_gap_searches_no_wider_than_the_start_gap(hetero: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A looser mip_gap must not make the search harder: its thresholds start at the gap allowed, capped at
    START_GAP of |L|. Uncapped, mip_gap 0.5 started past every job's worst column on this 64-GPU round (one
    exact search of every column, 7 s, NO_SOLUTION under a 0.1 s limit, where 1e-6 takes 0.02 s), and 0.2 took
    the 3 x 128-GPU round 5.5 s against 0.1 s (a tester's finding)."""
    module = hetero_core if hetero else ideal_core
    name = "plan" if hetero else "prepare"
    instance = so.generate_round(types={"k80": 16, "p100": 16, "v100": 16}, multi_gpu=True, seed=1,
                                 profile_noise=0.05) if hetero else so.generate_round(64, profile_noise=0.1, seed=2)
    thresholds: list[float] = []
    original = getattr(module, name)

    def recorded(knapsack: object, dual: object, threshold: float) -> object:
        thresholds.append(threshold)
        return original(knapsack, dual, threshold)

    monkeypatch.setattr(module, name, recorded)
    tight = so.solve_ideal(instance, mip_gap=module.START_GAP)
    assert tight.bound is not None and tight.objective is not None
    widest = max(thresholds)
    for gap in (0.2, 0.5, 1.0):
        thresholds.clear()
        loose = so.solve_ideal(instance, mip_gap=gap)
        assert loose.status is Status.OPTIMAL and loose.objective is not None and loose.bound is not None
        assert loose.objective >= (1 - gap) * tight.bound - 1e-9 and loose.bound >= tight.objective - 1e-6
        assert max(thresholds, default=0.0) <= widest * (1 + 1e-12)


def test_round_without_jobs() -> None:
    result = so.solve_ideal(so.RoundInstance(so.Cluster(2), ()), method="core")
    assert result.status is Status.OPTIMAL and result.objective == 0.0 and result.configs == {}


def test_tiny_time_limit_returns_a_status() -> None:
    instance = so.generate_round(4096, profile_noise=0.05, seed=2)
    result = so.solve_ideal(instance, method="core", time_limit=0.001)
    assert result.status in (Status.FEASIBLE, Status.NO_SOLUTION), result.solve.message
    assert result.bound is not None


def test_dual_bound_is_the_lp_relaxation_and_bounds_every_price() -> None:
    rng = np.random.default_rng(5)
    for seed in range(6):
        instance = so.generate_round(128, multi_gpu=seed % 2 == 1, seed=seed, profile_noise=0.05)
        ideal = build_ideal(instance)
        knapsack = Knapsack.of(ideal)
        dual = solve_dual(knapsack)
        lp = so.solve_ideal(instance, relax=True)
        assert dual.bound == pytest.approx(lp.objective, rel=1e-9)
        optimum = direct(instance).objective
        for _ in range(5):  # weak duality at any prices
            assert dual_value(knapsack, rng.uniform(0, 1, 2) * dual.multipliers * 3)[0] >= optimum - 1e-9
        assert np.all(dual.reduced_cost >= 0)


def test_dual_from_near_prices_is_the_minimum_or_nothing() -> None:
    """From prices near the minimum (the cutting planes' own, or moved a little) the small LP's duals are
    returned only when they are a minimum: their bound is the LP relaxation's; far prices are proven too or
    give nothing."""
    for seed in range(4):
        instance = so.generate_round(128, multi_gpu=seed % 2 == 1, seed=seed, profile_noise=0.05)
        knapsack = Knapsack.of(build_ideal(instance))
        dual = solve_dual(knapsack)
        proven = dual_from_near(knapsack, dual.multipliers)
        assert proven is not None and proven.bound == pytest.approx(dual.bound, rel=1e-11)
        assert proven.bound == pytest.approx(dual_value(knapsack, proven.multipliers)[0], rel=1e-15)
        for near in (dual.multipliers * 1.05, dual.multipliers * 0.9, np.zeros(2), dual.multipliers * 10):
            found = dual_from_near(knapsack, near)
            assert found is None or found.bound == pytest.approx(dual.bound, rel=1e-11)
            assert found is None or np.all(found.reduced_cost >= 0)


def test_exact_search_finds_nothing_below_the_optimal_penalty_and_the_optimum_at_it() -> None:
    instance = so.generate_round(256, profile_noise=0.05, seed=4)
    knapsack = Knapsack.of(build_ideal(instance))
    dual = solve_dual(knapsack)
    penalty = dual.bound - direct(instance).objective
    assert penalty > 0  # this round has an integrality gap, so the search has work to do
    assert search(prepare(knapsack, dual, penalty * (1 - 1e-6))).solution is None
    found = search(prepare(knapsack, dual, penalty * (1 + 1e-6))).solution
    assert found is not None and found.penalty == pytest.approx(penalty, abs=1e-9)
    beam = search(prepare(knapsack, dual, 4 * penalty), beam=4).solution
    assert beam is None or beam.penalty <= 4 * penalty + 1e-12


def test_core_equals_brute_force_when_the_cpu_room_is_fractional() -> None:
    """Whole-CPU changes but a fractional CPU room (a job fixed at 1.5 CPUs per GPU): the CPU cost-to-go table
    is read at the room rounded down, never up (rounding to nearest over-charged the slack and ruled out the
    optimum: a 1-server round reported a bound of -0.018 under its optimum, then 0). The fixed job is worth 0.1
    at its one point, so it has a floor and is not offered the config of no CPUs (with_zero_config)."""
    example = so.RoundInstance(so.Cluster(1, 2, 4.0, 1.0), (
        so.Job("j0", 1, so.Profile(np.array([1.0, 3.0]), np.array([0.5, 1.0]), np.array([[0.0, 0.0], [0.5, 0.0]]))),
        so.Job("j1", 1, so.Profile(np.array([1.5]), np.array([0.5]), np.array([[0.1]])))))
    result = core(example)
    assert result.objective == pytest.approx(0.1) and result.bound is not None and result.bound >= 0.1 - 1e-9
    rng = np.random.default_rng(7)
    for _ in range(200):
        instance = random_instance(rng, max_jobs=6, max_axis=4)
        cluster = instance.cluster
        fixed = so.Job("fixed", 1, so.Profile(np.array([float(rng.integers(0, 3)) + 0.5]),
                                              np.array([cluster.mem_gb_per_gpu]), np.array([[0.1]])))
        used = sum(job.gpus for job in instance.jobs)
        jobs = instance.jobs if used < cluster.total_gpus else instance.jobs[1:]
        instance = so.RoundInstance(cluster, (*jobs, fixed))
        result = core(instance)
        assert result.objective == pytest.approx(brute_force_ideal(instance), abs=1e-6), instance
        assert result.bound is not None and result.bound >= result.objective - 1e-9


@pytest.mark.parametrize("seed", range(20))
def test_priced_columns_are_numpys_formula_bit_for_bit(seed: int) -> None:
    """The compiled ``Knapsack.priced`` gives exactly numpy's ``value - p_c cpu - p_m mem`` and per class its
    ``maximum.reduceat``, and ``dual_value`` the even mix of numpy's formula (the prices, hence near-opt's targets,
    depend on the last bits): classes of one or many columns, ties, zero and large prices."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, size=rng.integers(1, 40))
    columns = int(sizes.sum())
    value = np.round(rng.random(columns) * 10, int(rng.integers(0, 3)))  # rounded: ties within a class
    cpu, mem = rng.integers(0, 12, columns).astype(float), rng.random(columns) * 500
    knapsack = Knapsack(value=value, cpu=cpu, mem=mem, col_class=np.repeat(np.arange(sizes.size), sizes),
                        class_count=np.ones(sizes.size), capacity=np.array([100.0, 1000.0]))
    lam = rng.random(2) * rng.choice([0.0, 1e-3, 1.0, 1e3], size=2)
    priced, best = knapsack.priced(lam)
    expected = value - lam[0] * cpu - lam[1] * mem
    assert np.array_equal(priced, expected)
    assert np.array_equal(best, np.maximum.reduceat(expected, knapsack.starts))
    # The even mix of each class's best columns, as numpy wrote it, and the evaluation built on it.
    is_best = expected >= best[knapsack.col_class]
    share = (knapsack.class_count / np.add.reduceat(is_best.astype(float), knapsack.starts))[knapsack.col_class]
    share = share * is_best
    bound, use, total = dual_value(knapsack, lam)
    assert np.array_equal(use, np.einsum("k,rk->r", share, knapsack.usage))
    assert total == float(np.einsum("k,k->", share, value))
    assert bound == float(lam @ knapsack.capacity + np.einsum("q,q->", knapsack.class_count, best))


def test_the_core_search_is_exact_with_cpus_in_any_unit() -> None:
    """The same round with its CPUs counted in 2^-40 of a CPU: the searches' row slacks (1e-9, relative from a
    capacity of 1 up) would read whole grid steps as ties; rows below 1 are lifted (``row_lift``)."""
    rng = np.random.default_rng(11)
    for _ in range(150):
        instance = random_instance(rng)
        result = so.solve_ideal(in_cpu_unit(instance, 2.0**-40), method="core")
        assert result.status is Status.OPTIMAL
        assert result.objective == pytest.approx(brute_force_ideal(instance), abs=1e-6)


def test_the_core_search_and_the_lp_are_exact_with_memory_in_bytes() -> None:
    """Memory in bytes (2^30 a GB): Kelley's master priced it near 1e-11, under HiGHS's tolerances, and a tester's
    round ended OPTIMAL 0.3% below the optimum with a bound of 0; HiGHS's LP relaxation fell 4% below the ILP.
    Rows of 2^30 or more are brought to [1, 2) (``row_lift``), as rows below 1 are lifted."""
    rng = np.random.default_rng(12)
    for _ in range(60):
        instance = random_instance(rng)
        exact = brute_force_ideal(instance)
        in_bytes = in_units(instance, mem_unit=2.0**30)
        result = so.solve_ideal(in_bytes, method="core")
        assert result.status is Status.OPTIMAL and result.bound is not None
        assert result.objective == pytest.approx(exact, abs=1e-6)
        assert result.bound >= exact - 1e-6
        relaxed = so.solve_ideal(in_bytes, relax=True)
        assert relaxed.objective is not None and relaxed.objective >= exact - 1e-6
    # The tester's rounds, in bytes (1e9 a GB), with their optima by hand.
    cluster = so.Cluster(1, 4, 27.0, 80e9)
    a = so.Job("a", 2, so.Profile([0.5, 11.0], [20e9], [[0.0064], [0.0096]]))
    b = so.Job("b", 2, so.Profile([1.75], [20e9, 25e9], [[1.0, 200.0]]))
    # a at 11 CPUs a GPU, b at 1.75, both at 20 GB a GPU (b cannot take 25: 90 GB): 0.0096 + 1.0.
    assert so.solve_ideal(so.RoundInstance(cluster, (a, b)), method="core").objective == pytest.approx(1.0096)
    cluster = so.Cluster(1, 2, 4.0, 50e9)
    a = so.Job("a", 1, so.Profile([2.0, 3.0], [18.5e9, 45.5e9], [[0.0027, 0.0088], [0.0102, 0.0102]]))
    b = so.Job("b", 1, so.Profile([1.0], [22e9], [[0.0019]]))
    # a at (3, 18.5 GB), b at (1, 22 GB): 0.0121, which the LP relaxation must reach.
    for solver in ("highs", "pyomo-highs"):
        relaxed = so.solve_ideal(so.RoundInstance(cluster, (a, b)), relax=True, solver=solver)
        assert relaxed.objective == pytest.approx(0.0121, rel=1e-6), solver


def test_a_core_search_that_misses_every_allocation_says_so_and_auto_solves_the_round(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A core search that finds no allocation (within its row slacks: grid points within a hair of the share)
    called the round INFEASIBLE, where every job at the share is one; it says NO_SOLUTION now, and auto hands the
    round to HiGHS on the whole model (``core_then_direct``)."""
    instance = so.generate_round(128, seed=3, profile_noise=0.05)
    direct = so.solve_ideal(instance, method="direct")
    monkeypatch.setattr(ideal_core, "_incumbent", lambda searcher, mip_gap: (None, True))
    core = so.solve_ideal(instance, method="core")
    assert core.status is Status.NO_SOLUTION and "found no allocation" in core.solve.message
    auto = so.solve_ideal(instance)
    assert auto.status is Status.OPTIMAL and auto.objective == pytest.approx(direct.objective, rel=1e-9)
    assert "then HiGHS on the whole model" in auto.solve.message
