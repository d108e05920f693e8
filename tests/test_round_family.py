"""The round family of issue 22 (``synergy_opt.round_family``): what each setting draws, determinism, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synergy_opt import (
    InvalidInputError,
    RoundInstance,
    Status,
    evaluate,
    load_instance,
    run_mechanism,
    save_instance,
    solve_joint,
)
from synergy_opt.errors import UnknownNameError
from synergy_opt.profiles import model_info, models_by_task
from synergy_opt.round_family import (
    DEMANDS,
    FAMILY,
    FAMILY_NOISE,
    MEMORY_BOUND_MODELS,
    POWERS,
    draw_demands,
    family_round,
    member_round,
)


def _same(a, b) -> bool:  # type: ignore[no-untyped-def]
    return a.cluster == b.cluster and len(a.jobs) == len(b.jobs) and all(
        x.id == y.id and x.gpus == y.gpus and x.model == y.model and np.array_equal(x.profile.tput, y.profile.tput)
        for x, y in zip(a.jobs, b.jobs, strict=True))


@pytest.mark.parametrize("name", list(FAMILY))
def test_members_are_deterministic_full_and_named(name: str) -> None:
    first, again = member_round(name, 64, seed=3), member_round(name, 64, seed=3)
    assert _same(first, again)
    assert not _same(first, member_round(name, 64, seed=4))
    assert int(first.gpus.sum()) == first.cluster.total_gpus == 64  # full load
    assert first.metadata["member"] == name
    if FAMILY[name].gpu_kind == "single":
        assert np.all(first.gpus == 1)
    else:
        assert any(member_round(name, 64, seed=s).gpus.max() > 1 for s in range(3))


@pytest.mark.parametrize("demands", DEMANDS)
@pytest.mark.parametrize("gpus_per_server", [4, 8, 16])
def test_demands_fill_the_cluster_within_their_kind(demands: str, gpus_per_server: int) -> None:
    sizes = np.concatenate([draw_demands(np.random.default_rng(seed), 256, demands, gpus_per_server)  # type: ignore[arg-type]
                            for seed in range(20)])
    for seed in range(20):
        assert draw_demands(np.random.default_rng(seed), 256, demands, gpus_per_server).sum() == 256  # type: ignore[arg-type]
    largest = {"single": 1, "philly": 16, "powers": 16}.get(demands, 3 * gpus_per_server)
    assert sizes.min() >= 1 and sizes.max() <= largest
    if demands == "single":
        assert np.all(sizes == 1)
    if demands == "powers":
        cut = sizes[~np.isin(sizes, POWERS)]
        assert cut.size <= 20  # only a round's last job may be cut to what is left
        assert 0.4 < np.mean(sizes == 1) < 0.6  # 1 GPU four times as likely as each other size
    if demands in ("odd", "spanning"):
        multi = sizes[sizes > 1]
        assert np.any(multi % 2 == 1)  # odd sizes
        assert np.any(multi > gpus_per_server)  # jobs that must span servers
        if demands == "spanning":
            assert np.mean(multi > gpus_per_server) > 0.9  # all but cut last jobs


def test_servers_ratios_memory_and_models() -> None:
    small = family_round(64, "powers", gpus_per_server=4, cpu_per_gpu=6, mem_gb_per_gpu=40.0, seed=1)
    assert (small.cluster.servers, small.cluster.gpus_per_server, small.cluster.cpus_per_server,
            small.cluster.mem_gb_per_server) == (16, 4, 24, 160)
    assert all(job.profile.cpu_per_gpu.max() == model_info(job.model, 6).profile.cpu_per_gpu.max()
               for job in small.jobs if job.model)
    big = family_round(64, "single", gpus_per_server=16, seed=1)
    assert (big.cluster.servers, big.cluster.cpus_per_server, big.cluster.mem_gb_per_server) == (4, 48, 1000)
    image = family_round(64, "single", split=(100, 0, 0), seed=2)
    assert {job.model for job in image.jobs} <= set(models_by_task()["image"])
    speech = family_round(64, "single", split=(0, 0, 100), seed=2)
    assert {job.model for job in speech.jobs} <= set(models_by_task()["speech"])
    memory = family_round(64, "single", models=MEMORY_BOUND_MODELS, seed=2)
    assert {job.model for job in memory.jobs} == set(MEMORY_BOUND_MODELS)


def test_noise_and_modelled_jobs_change_the_profiles() -> None:
    plain = family_round(32, "single", seed=5)
    assert all(np.array_equal(job.profile.tput, model_info(job.model).profile.tput) for job in plain.jobs)
    noisy = family_round(32, "single", profile_noise=0.1, seed=5)
    assert [job.model for job in noisy.jobs] == [job.model for job in plain.jobs]
    assert all(not np.array_equal(a.profile.tput, b.profile.tput) for a, b in zip(plain.jobs, noisy.jobs, strict=True))
    # Modelled jobs differ from their model's matrix where a stage binds (image and speech models; the language
    # models' matrices are flat and stay so, synergy_opt.profiling.sampler).
    modelled = family_round(32, "single", split=(50, 0, 50), jobs="modelled", seed=5)
    builtin = family_round(32, "single", split=(50, 0, 50), seed=5)
    differ = [not np.array_equal(a.profile.tput, b.profile.tput) for a, b in zip(builtin.jobs, modelled.jobs,
                                                                                 strict=True)]
    assert np.mean(differ) > 0.9


def test_mixed_members_draw_every_axis_within_the_family() -> None:
    drawn = [FAMILY["multi-mixed"].settings_for(seed) for seed in range(60)]
    assert {d["gpus_per_server"] for d in drawn} == {4, 8, 16}
    assert {d["cpu_per_gpu"] for d in drawn} == {3, 4, 5, 6}
    assert {d["jobs"] for d in drawn} == {"builtin", "modelled"}
    assert {d["demands"] for d in drawn} == {"philly", "powers", "odd", "spanning"}
    assert all(0 <= d["profile_noise"] <= FAMILY_NOISE for d in drawn)
    assert any(d["models"] == MEMORY_BOUND_MODELS for d in drawn)
    assert any(max(d["split"]) == 100 for d in drawn) and any(max(d["split"]) < 60 for d in drawn)
    assert all(math.isclose(sum(d["split"]), 100, abs_tol=0.01) for d in drawn)
    assert all(d["demands"] == "single" for d in (FAMILY["single-mixed"].settings_for(s) for s in range(10)))
    # A member's round follows its drawn setting.
    round_ = member_round("multi-mixed", 64, seed=7)
    setting = FAMILY["multi-mixed"].settings_for(7)
    assert round_.cluster.gpus_per_server == setting["gpus_per_server"]
    assert round_.metadata["profile_noise"] == setting["profile_noise"]
    assert member_round("multi-mixed", 64, seed=7, profile_noise=0.0).metadata["profile_noise"] == 0.0


@pytest.mark.parametrize(("call", "field"), [
    (lambda: family_round(60, gpus_per_server=8), "gpus"),
    (lambda: family_round(0), "gpus"),
    (lambda: family_round(64, demands="huge"), "demands"),  # type: ignore[arg-type]
    (lambda: family_round(64, gpus_per_server=0), "gpus_per_server"),
    (lambda: family_round(64, gpus_per_server=8.0), "gpus_per_server"),  # type: ignore[arg-type]
    (lambda: family_round(64, split=(1, -1, 0)), "split[1]"),
    (lambda: family_round(64, split=(0, 0, 0)), "split"),
    (lambda: family_round(64, models=("alexnet", "nope")), "models[1]"),
    (lambda: family_round(64, models=()), "models"),
    (lambda: family_round(64, models="alexnet"), "models"),  # type: ignore[arg-type]
    (lambda: family_round(64, cpu_per_gpu=7), "cpu_per_gpu"),
    (lambda: family_round(64, mem_gb_per_gpu=0.0), "mem_gb_per_gpu"),
    (lambda: family_round(64, mem_gb_per_gpu=float("nan")), "mem_gb_per_gpu"),
    (lambda: family_round(64, profile_noise=-0.1), "profile_noise"),
    (lambda: family_round(64, jobs="real"), "jobs"),  # type: ignore[arg-type]
    (lambda: family_round(64, seed=-1), "seed"),
    (lambda: member_round("nope"), "name"),
    (lambda: member_round("single", 64, seed=1.5), "seed"),  # type: ignore[arg-type]
    (lambda: member_round("single", 64, profile_noise=float("inf")), "profile_noise"),
])
def test_bad_input_names_the_argument(call, field: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((InvalidInputError, UnknownNameError)) as raised:
        call()
    assert raised.value.field == field


@pytest.mark.parametrize("name", ["multi-odd", "multi-spanning", "multi-servers-4", "multi-servers-16", "multi-mixed"])
def test_near_opt_is_valid_and_at_least_tune_on_small_members(name: str) -> None:
    for seed in range(2):
        instance = member_round(name, 32, seed=seed)
        near = evaluate(instance, run_mechanism(instance, "near-opt"), strict=True)
        tune = evaluate(instance, run_mechanism(instance, "tune"))
        assert near.objective >= tune.objective - 1e-9 * (1 + tune.objective)


@pytest.mark.parametrize("name", list(FAMILY))
def test_members_are_valid_rounds_that_save_and_load(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every member's round is a valid instance (its jobs fit the cluster, their profiles meet the grid rules)
    whose metadata is JSON: it saves and loads back unchanged."""
    instance = member_round(name, 64, seed=11)
    assert int(instance.gpus.max()) <= instance.cluster.total_gpus
    loaded = load_instance(save_instance(instance, tmp_path / "round.json"))
    assert isinstance(loaded, RoundInstance)
    assert _same(instance, loaded) and loaded.metadata == instance.metadata
    # Every job placed at its proportional share is a valid allocation of the round.
    assert evaluate(instance, run_mechanism(instance, "proportional"), strict=True).valid


@pytest.mark.parametrize(("name", "seed"), [("multi-spanning", 1), ("multi-odd", 0), ("multi-servers-4", 0),
                                            ("single-servers-4", 0), ("multi-memory", 1)])
def test_near_opt_and_tune_stay_below_the_joint_optimum_on_small_members(name: str, seed: int) -> None:
    """On 16-GPU members the joint optimum (any job may split) is proven; near-opt and TUNE never exceed it,
    near-opt never falls below TUNE, and the optimum started from near-opt's allocation is the same."""
    instance = member_round(name, 16, seed=seed, profile_noise=0.05)
    joint = solve_joint(instance, consolidate=False)
    assert joint.status is Status.OPTIMAL and joint.evaluation is not None
    near = evaluate(instance, run_mechanism(instance, "near-opt"), strict=True)
    tune = evaluate(instance, run_mechanism(instance, "tune"))
    optimum = joint.evaluation.objective
    assert tune.objective - 1e-9 * optimum <= near.objective <= optimum * (1 + 1e-6)
    started = solve_joint(instance, consolidate=False, start=run_mechanism(instance, "near-opt"))
    assert started.status is Status.OPTIMAL and started.evaluation is not None
    assert math.isclose(started.evaluation.objective, optimum, rel_tol=1e-4)
