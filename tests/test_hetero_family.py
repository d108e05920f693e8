"""The heterogeneous round family (synergy_opt/hetero_family.py): its rounds as documented, deterministic, checked
input, and SPEC 4's invariants on rounds from it (server shapes and type mixes generate_round does not draw)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.hetero import HeteroCluster, HeteroRound, ServerType
from synergy_opt.hetero_family import HETERO_FAMILY, hetero_family_round, hetero_member_round
from synergy_opt.ideal.hetero_types import lp_types
from synergy_opt.io import instance_from_dict, instance_to_dict
from synergy_opt.mechanisms.near_opt.hetero import ILP_TYPES_JOBS, ilp_types, solve_hetero_near_opt
from synergy_opt.mechanisms.near_opt.mechanism import solve_near_opt
from tests.test_hetero_mechanisms import KEEP_FLOORS, invariants

SHAPES = (ServerType("k80", 2, 4, 16, 250), ServerType("p100", 1, 8, 24, 250), ServerType("v100", 1, 16, 80, 1000))


@pytest.mark.parametrize("name", list(HETERO_FAMILY))
def test_every_member_fills_each_type_with_its_baseline_jobs(name: str) -> None:
    instance = hetero_member_round(name, scale=1, seed=3)
    member = HETERO_FAMILY[name]
    assert [t.name for t in instance.cluster.types] == [t.name for t in member.types]
    for kind in instance.cluster.types:
        on_it = [job for job in instance.jobs if job.baseline == kind.name]
        assert sum(job.gpus for job in on_it) == kind.total_gpus  # full load, type by type
    for job in instance.jobs:
        assert job.baseline in job.profiles
        assert all(instance.cluster[kind].total_gpus >= job.gpus for kind in job.profiles)
        if member.gpu_kind == "single":
            assert job.gpus == 1
    # The unit: every job's throughput at the reference type's proportional share is 1 (where it can use it).
    reference = instance.cluster.reference_type
    for job in instance.jobs:
        if reference.name in job.profiles:
            share = job.profiles[reference.name].throughput(reference.cpu_per_gpu, reference.mem_gb_per_gpu)
            assert share == pytest.approx(1.0)


def test_rounds_are_deterministic_and_survive_a_save() -> None:
    first = hetero_member_round("shapes", scale=2, seed=5)
    assert instance_to_dict(first) == instance_to_dict(hetero_member_round("shapes", scale=2, seed=5))
    assert instance_to_dict(first) != instance_to_dict(hetero_member_round("shapes", scale=2, seed=6))
    again = instance_from_dict(instance_to_dict(first))
    assert so.evaluate(again, so.run_mechanism(again, "tune")).objective == pytest.approx(
        so.evaluate(first, so.run_mechanism(first, "tune")).objective, rel=1e-12)


def test_limiting_jobs_changes_only_their_types() -> None:
    free = hetero_family_round(SHAPES, demands="odd", seed=2)
    limited = hetero_family_round(SHAPES, demands="odd", limited=1.0, seed=2)
    assert [j.gpus for j in free.jobs] == [j.gpus for j in limited.jobs]
    fewer = 0
    for a, b in zip(free.jobs, limited.jobs, strict=True):
        assert b.baseline == a.baseline and set(b.profiles) <= set(a.profiles)
        for kind in b.profiles:
            np.testing.assert_array_equal(a.profiles[kind].tput, b.profiles[kind].tput)
        fewer += len(b.profiles) < len(a.profiles)
    assert fewer > 0


def test_a_cluster_without_v100_takes_its_first_type_as_the_unit() -> None:
    instance = hetero_member_round("no-v100", seed=1)
    assert instance.cluster.reference == "p100"
    p100 = instance.cluster["p100"]
    for job in instance.jobs:
        assert job.profiles["p100"].throughput(p100.cpu_per_gpu, p100.mem_gb_per_gpu) == pytest.approx(1.0)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"types": []}, "types"),
    ({"types": "k80:4"}, "types"),
    ({"types": [ServerType("k80", 1), "v100"]}, "types[1]"),
    ({"types": SHAPES, "demands": "huge"}, "demands"),
    ({"types": SHAPES, "limited": 1.5}, "limited"),
    ({"types": SHAPES, "limited": float("nan")}, "limited"),
    ({"types": SHAPES, "profile_noise": -0.1}, "profile_noise"),
    ({"types": SHAPES, "models": ["res18", "nope"]}, "models[1]"),
    ({"types": (ServerType("h100", 1),)}, "types"),
    # A ratio for a type the cluster lacks was ignored; the v100's was named `ratios`; a reference share below
    # the matrices' grid was blamed on `profiles['v100']`.
    ({"types": SHAPES, "speed_ratios": {"a100": 2.0}}, "speed_ratios['a100']"),
    ({"types": SHAPES, "speed_ratios": {"v100": 2.0}}, "speed_ratios['v100']"),
    ({"types": (ServerType("k80", 1), ServerType("v100", 1, mem_gb_per_server=8.0))}, "types[1].mem_gb_per_server"),
    ({"types": (ServerType("v100", 1, cpus_per_server=4.0),)}, "types[0].cpus_per_server"),
])
def test_bad_settings_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        hetero_family_round(**kwargs)
    assert caught.value.field == field


def test_unknown_member_and_bad_scale() -> None:
    with pytest.raises(UnknownNameError):
        hetero_member_round("no-such-member")
    with pytest.raises(InvalidInputError) as caught:
        hetero_member_round("shapes", scale=0)
    assert caught.value.field == "scale"


def test_a_type_gavel_did_not_measure_takes_its_speed_ratio() -> None:
    cluster = HeteroCluster((ServerType("v100", 1), ServerType("a100", 1)))
    instance = hetero_family_round(cluster, demands="single", speed_ratios={"a100": 2.0}, models=("res50",), seed=0)
    job = instance.jobs[0]
    assert job.profiles["a100"].tput.max() > job.profiles["v100"].tput.max()  # a faster GPU, a higher peak


@pytest.mark.parametrize(("name", "seed"), [("shapes", 4), ("cpu-scarce", 2), ("limited", 1), ("four-types", 2),
                                            ("no-v100", 0), ("single-limited", 0)])
def test_invariants_hold_on_family_rounds(name: str, seed: int) -> None:
    instance = hetero_member_round(name, seed=seed)
    invariants(instance, KEEP_FLOORS)
    joint = so.solve_joint(instance, consolidate=False, time_limit=60)
    ideal = so.solve_ideal(instance)
    assert joint.objective is not None and ideal.objective is not None
    assert ideal.objective >= joint.objective - 1e-7
    for mechanism in KEEP_FLOORS:
        total = so.evaluate(instance, so.run_mechanism(instance, mechanism)).objective
        assert joint.bound is not None and total <= joint.bound + 1e-7, mechanism


def _per_type_near_opt(instance: HeteroRound, types: Sequence[str]) -> float:
    fixed = instance.with_types(types)
    return sum(solve_near_opt(sub).objective for sub in fixed.per_type().values() if sub.jobs)


@pytest.mark.parametrize(("name", "seed"), [("skewed-k80", 0), ("spanning", 1), ("cpu-scarce", 2)])
def test_near_opt_on_few_jobs_keeps_the_better_of_the_lp_and_ilp_types(name: str, seed: int) -> None:
    instance = hetero_member_round(name, seed=seed)
    assert len(instance.jobs) <= ILP_TYPES_JOBS
    result = solve_hetero_near_opt(instance)
    exact = ilp_types(instance)
    assert exact is not None
    lp = lp_types(instance)
    assert tuple(lp) != exact  # the two choices differ on these rounds
    best = max(_per_type_near_opt(instance, lp), _per_type_near_opt(instance, exact))
    assert result.objective == pytest.approx(best, rel=1e-9)
    assert so.evaluate(instance, result.allocation).objective == pytest.approx(result.objective, rel=1e-9)


def test_a_job_the_reference_type_cannot_hold_is_in_the_same_unit() -> None:
    # The reference type (v100, 5 CPUs and 125 GB per GPU) holds 8 GPUs; the spanning jobs of the k80 servers
    # (9-24 GPUs) can only use k80, and their matrices there must be in the unit of the jobs that fit a v100.
    types = (ServerType("k80", 4, 8, 24, 500), ServerType("v100", 1, 8, 40, 1000))
    instance = hetero_family_round(types, demands="spanning", models=("res50",), seed=1)
    large = [job for job in instance.jobs if job.gpus > 8]
    small = [job for job in instance.jobs if job.gpus <= 8]
    assert large and small and all("v100" not in job.profiles for job in large)
    for job in large:
        np.testing.assert_allclose(job.profiles["k80"].tput, small[0].profiles["k80"].tput, rtol=1e-12)
