"""Rounds whose throughputs are far from 1 (issue s28's fuzzing): every result scales with them.

Matrices in samples per second, or normalised by a large unit, give throughputs of 1e-9 .. 1e7. A solver's
absolute tolerances (HiGHS: 1e-7 on reduced costs) must not decide the optimum: the same round with every matrix
times ``s`` has every objective times ``s``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

import synergy_opt as so
from synergy_opt.hetero import HeteroRound
from synergy_opt.joint.model import JointReductions
from synergy_opt.mechanisms.scale import scaled, throughput_scale


def _scaled(instance: so.RoundInstance, scale: float) -> so.RoundInstance:
    jobs = tuple(so.Job(job.id, job.gpus, so.Profile(job.profile.cpu_per_gpu, job.profile.mem_gb_per_gpu,
                                                      job.profile.tput * scale)) for job in instance.jobs)
    return so.RoundInstance(instance.cluster, jobs)


@pytest.mark.parametrize("scale", [1e-7, 1e-9])
def test_the_ideal_ilp_and_its_relaxation_scale_with_the_throughputs(scale: float) -> None:
    instance = so.generate_round(gpus=32, seed=0, profile_noise=0.05)
    tiny = _scaled(instance, scale)
    for kwargs in ({"method": "direct"}, {"relax": True}):
        reference = so.solve_ideal(instance, **kwargs).objective
        assert so.solve_ideal(tiny, **kwargs).objective / scale == pytest.approx(reference, rel=1e-6), kwargs


@pytest.mark.parametrize("scale", [1e-9, 1e9])
@pytest.mark.parametrize("name", sorted(so.MECHANISMS))
def test_every_mechanism_scales_with_the_throughputs(name: str, scale: float) -> None:
    # At 1e-9 near-opt gave TUNE's total (35.33 against 40.10 x 1e-9) before run_mechanism brought the round to
    # ordinary throughputs by a power of two (mechanisms/scale.py): its gains fell below absolute tolerances.
    instance = so.generate_round(gpus=32, seed=0, profile_noise=0.05)
    reference = so.evaluate(instance, so.run_mechanism(instance, name)).objective
    far = _scaled(instance, scale)
    assert so.evaluate(far, so.run_mechanism(far, name)).objective / scale == pytest.approx(reference, rel=1e-9)


def test_a_power_of_two_leaves_ordinary_rounds_alone() -> None:
    instance = so.generate_round(gpus=32, seed=0, profile_noise=0.05)
    assert throughput_scale(instance) == 1.0
    tiny = _scaled(instance, 1e-9)
    factor = throughput_scale(tiny)
    assert factor == 2.0 ** round(math.log2(factor))  # a power of two: no comparison changes
    largest = max(float(job.profile.tput.max()) for job in scaled(tiny, factor).jobs)
    assert 1.0 <= largest < 2.0


def _hetero_scaled(instance: HeteroRound, scale: float) -> HeteroRound:
    jobs = tuple(replace(job, profiles={kind: so.Profile(p.cpu_per_gpu, p.mem_gb_per_gpu, p.tput * scale)
                                        for kind, p in job.profiles.items()}) for job in instance.jobs)
    return HeteroRound(instance.cluster, jobs)


HETERO = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, multi_gpu=True, seed=0, profile_noise=0.05)


@pytest.mark.parametrize("scale", [1e-9, 1e-7, 1e9])
def test_the_joint_across_types_scales_with_the_throughputs(scale: float) -> None:
    # At 1e-9 the decomposition called a solution 7.5% below the optimum optimal: the branch-and-price's slack
    # (1e-9) and HiGHS's tolerances are absolute. At 1e-7 another round ran out of its time unproven.
    reference = so.solve_joint(HETERO, time_limit=60)
    far = so.solve_joint(_hetero_scaled(HETERO, scale), time_limit=60)
    assert reference.status is far.status is so.Status.OPTIMAL
    assert far.objective / scale == pytest.approx(reference.objective, rel=1e-9)
    assert far.bound / scale == pytest.approx(reference.bound, rel=1e-9)
    assert so.evaluate(HETERO, far.allocation).objective == pytest.approx(reference.objective, rel=1e-9)


@pytest.mark.parametrize("scale", [1e-9, 1e9])
@pytest.mark.parametrize("name", sorted(so.MECHANISMS))
def test_every_mechanism_scales_with_the_throughputs_across_types(name: str, scale: float) -> None:
    # near-opt lost 0.5-0.7% at 1e-8 on type-free rounds: its type choice was not brought to ordinary size.
    reference = so.evaluate(HETERO, so.run_mechanism(HETERO, name)).objective
    far = _hetero_scaled(HETERO, scale)
    assert so.evaluate(far, so.run_mechanism(far, name)).objective / scale == pytest.approx(reference, rel=1e-9)


def _floor_round(scale: float) -> so.RoundInstance:
    # A's floor is 1 (3 CPUs); its 2-CPU config, 0.995, is below it. B gains 1 from a fourth CPU: the optimum, 2,
    # keeps A at 3 CPUs. A floor row of terms 1e-4 was met at 2 CPUs within HiGHS's absolute tolerance (1e-6):
    # 2.995, OPTIMAL, A below its floor, where GLPK, CBC and SCIP gave 2.
    a = so.Profile([2.0, 3.0], [62.5], [[0.995 * scale], [1.0 * scale]])
    b = so.Profile([3.0, 4.0], [62.5], [[1.0 * scale], [2.0 * scale]])
    return so.RoundInstance(so.Cluster(1, 2, 6, 125), (so.Job("A", 1, a), so.Job("B", 1, b)))


@pytest.mark.parametrize("scale", [1.0, 1e-4])
def test_floor_rows_hold_relative_to_the_floor(scale: float) -> None:
    instance = _floor_round(scale)
    typed = HeteroRound.homogeneous(instance, "k80")
    rows = so.Reductions(fix_below_floor=False, drop_dominated=False, merge_identical=False)
    joint_rows = JointReductions(fix_below_floor=False, drop_dominated=False, merge_identical=False)
    results = {
        "ideal": so.solve_ideal(instance, reductions=rows),
        "joint": so.solve_joint(instance, method="direct", reductions=joint_rows),
        "literal": so.solve_joint(instance, formulation="literal", method="direct"),
        "typed ideal": so.solve_ideal(typed, method="direct", reductions=rows),
        "typed joint": so.solve_joint(typed, method="direct", reductions=joint_rows),
    }
    for name, result in results.items():
        assert result.objective / scale == pytest.approx(2.0, rel=1e-9), name
    for name in ("joint", "literal", "typed joint"):
        assert not so.evaluate(results[name].instance if name == "typed joint" else instance,
                               results[name].allocation).floors_violated, name


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_tune_keeps_floors_exactly_and_the_evaluator_sees_it_at_any_scale(scale: float) -> None:
    # A's config (3 CPUs, 40 GB) is worth 5e-10 less than its floor. TUNE's demotion took it within a relative
    # 1e-9, and the evaluator's absolute slack of 1e-9 hid that at scale 1 and flagged it at 1e4.
    a = so.Profile([3.0, 6.0], [40.0, 62.5], [[(1 - 5e-10) * scale, scale], [2 * scale, 2 * scale]])
    b = so.Profile([3.0], [62.5], [[scale]])
    instance = so.RoundInstance(so.Cluster(1, 2, 6, 125), (so.Job("A", 1, a), so.Job("B", 1, b)))
    evaluation = so.evaluate(instance, so.run_mechanism(instance, "tune"))
    assert evaluation.jobs["A"].throughput >= evaluation.jobs["A"].floor and not evaluation.floors_violated
    assert evaluation.objective == pytest.approx(2 * scale, rel=1e-12)
    alone = so.RoundInstance(so.Cluster(1, 2, 6, 125), (so.Job("A", 1, a),))
    below = so.Allocation(jobs={"A": (so.Placement(server=0, gpus=1, cpus=3.0, mem_gb=40.0),)})
    assert so.evaluate(alone, below).floors_violated == ("A",)


def _two_jobs_on_one_server(unit: float) -> so.RoundInstance:
    # A blind checker's round: b at 20 GB a GPU leaves a 400 GB for its 0.5 (b's 1 either way): 1.5 x unit.
    cluster = so.Cluster(1, 8, 24.0, 500.0)
    a = so.Job("a", 4, so.Profile([3.0], [62.5, 100.0], [[0.0, 0.5 * unit]]))
    b = so.Job("b", 4, so.Profile([3.0], [20.0, 62.5], [[unit, unit]]))
    return so.RoundInstance(cluster, (a, b))


@pytest.mark.parametrize("unit", [1e-12, 1e-15, 1e12])
def test_the_core_search_scales_with_the_throughputs(unit: float) -> None:
    # The core search (solve_ideal's default on rounds of unlike jobs) compares values with absolute slacks: at
    # 1e-12 it read 0.5 x 1e-12 as a tie and called 1.0 x 1e-12 OPTIMAL, its bound below the LP's.
    small = _two_jobs_on_one_server(unit)
    result = so.solve_ideal(small, method="core")
    assert result.status is so.Status.OPTIMAL
    assert result.objective / unit == pytest.approx(1.5, rel=1e-9)
    assert result.bound / unit == pytest.approx(1.5, rel=1e-6)
    instance = so.generate_round(gpus=64, seed=3, profile_noise=0.05)
    reference = so.solve_ideal(instance, method="core").objective
    assert so.solve_ideal(_scaled(instance, unit), method="core").objective / unit == pytest.approx(reference, rel=1e-6)


@pytest.mark.parametrize("unit", [1e-12, 1e12])
def test_the_type_free_core_search_scales_with_the_throughputs(unit: float) -> None:
    instance = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, seed=2, profile_noise=0.05)
    far = _hetero_scaled(instance, unit)
    for method, fixed in (("core", False), ("per-type", True)):  # per type: each type's (core) search
        reference = so.solve_ideal(instance.at_baseline() if fixed else instance, method=method)
        result = so.solve_ideal(far.at_baseline() if fixed else far, method=method)
        assert result.status is reference.status is so.Status.OPTIMAL, method
        assert result.objective / unit == pytest.approx(reference.objective, rel=1e-6), method


@pytest.mark.parametrize("unit", [1e-15, 1e12])
def test_the_joints_decomposition_scales_with_the_throughputs(unit: float) -> None:
    # At 1e-15 the decomposition called 6.199 (x 1e-15) optimal against the ideal ILP's 6.467, where the optimum
    # is 6.420: its cut-off floor and HiGHS's tolerances are absolute (the heterogeneous decomposition scaled,
    # the homogeneous one did not).
    instance = so.generate_round(gpus=16, seed=1, profile_noise=0.05, multi_gpu=True)
    reference = so.solve_joint(instance, method="decomposition", time_limit=60)
    far = so.solve_joint(_scaled(instance, unit), method="decomposition", time_limit=60)
    assert reference.status is far.status is so.Status.OPTIMAL
    assert far.objective / unit == pytest.approx(reference.objective, rel=1e-9)
    assert far.evaluation is not None and far.evaluation.objective / unit == pytest.approx(far.objective / unit)
    # The model returned is in the round's units too (it was the scaled round's: 7.23 against 6.42e-15).
    assert far.joint is not None
    assert float(far.joint.model.objective @ far.solve.solution()) == pytest.approx(far.objective, rel=1e-9)
    assert so.evaluate(instance, far.allocation).objective == pytest.approx(reference.objective, rel=1e-9)
    with pytest.raises(so.InvalidInputError, match="not an upper bound") as caught:  # the caller's value named
        so.solve_joint(_scaled(instance, unit), method="decomposition", upper_bound=unit)
    assert caught.value.value == unit


def test_a_split_penalty_on_a_round_across_types_of_tiny_throughputs() -> None:
    # The scaled round was solved with the penalty times the scale (2^40 x 0.1: refused as out of [0, 1]); the
    # penalty is a fraction of each split job's throughput, the same at any scale.
    reference = so.solve_joint(HETERO, split_penalty=0.1, method="decomposition")
    far = so.solve_joint(_hetero_scaled(HETERO, 1e-12), split_penalty=0.1, method="decomposition")
    assert reference.status is far.status is so.Status.OPTIMAL
    assert far.objective / 1e-12 == pytest.approx(reference.objective, rel=1e-9)


UNREACHABLE_LARGE = ("fuzz_unreachable_large_lp_round.json", "fuzz_unreachable_large_direct_round.json")


@pytest.mark.parametrize("name", UNREACHABLE_LARGE)
def test_a_large_value_no_allocation_reaches_does_not_scale_the_others_away(name: str) -> None:
    # Tiny fuzzed rounds of an independent review: a matrix entry near 3e6 that no allocation reaches among
    # throughputs near 1. Scaled by the largest alone (to [1, 2)) the others became 5e-7, under HiGHS's tolerances:
    # the direct ILP called 0.0 optimal (brute force: 1.5) and the LP gave 1.5748 under the ILP's 2.3055. A
    # quarter of the round (largest below 1e6: not scaled) gives a quarter of every optimum.
    instance = so.load_instance(Path(__file__).parent / "data" / name)
    quarter = instance.scaled(0.25)
    assert quarter.largest_throughput() < 1e6 < instance.largest_throughput()
    for kwargs in ({"method": "direct"}, {"method": "auto"}, {"relax": True}, {"reductions": so.Reductions.none()}):
        whole, part = so.solve_ideal(instance, **kwargs), so.solve_ideal(quarter, **kwargs)
        assert whole.status is part.status is so.Status.OPTIMAL, kwargs
        assert whole.objective == pytest.approx(4 * part.objective, rel=1e-9) and whole.objective > 1.0, kwargs
    assert so.solve_ideal(instance, relax=True).objective >= so.solve_ideal(instance).objective * (1 - 1e-12)
