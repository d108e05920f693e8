"""Mechanisms (SPEC 3, 4): proportional, greedy, tune, drf, tetris; the shared state, demands and packing.

Every allocation is scored by :func:`synergy_opt.evaluate`. Hypothesis runs derandomized (a fixed
profile), so CI sees the same examples every time.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synergy_opt as so
from synergy_opt import (
    MECHANISMS,
    Cluster,
    InvalidInputError,
    Job,
    Profile,
    RoundInstance,
    UnknownNameError,
    builtin_profile,
    generate_round,
    run_mechanism,
    solve_ideal,
)
from synergy_opt.evaluation import Evaluation, InvalidAllocationWarning, evaluate
from synergy_opt.instance import Allocation, Placement, trusted_round
from synergy_opt.io import instance_to_dict
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.mechanisms.drf import dominant_shares
from synergy_opt.packing.order import SORTS
from synergy_opt.packing.place import (
    FITS,
    _gpu_servers,
    best_fit_server,
    fewest_servers,
    fill_servers,
    fit_server,
    place_best_fit,
    place_with_fallback,
)
from synergy_opt.packing.state import ServerState

HEURISTICS = ("proportional", "greedy", "tune", "tune-artifact", "drf", "tetris")
# TUNE in every packing order and server choice (issue 19): each must keep SPEC 4's invariants.
TUNE_VARIANTS = tuple({"sort": sort, "fit": fit} for sort in SORTS for fit in FITS)

SENSITIVE = ("alexnet", "res18", "res50", "mobilenet", "shufflenet", "m5", "deepspeech")
INSENSITIVE = ("gnmt", "transformer", "lstm")

CI = settings(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- checks ------------------------------------------------------------------------------------------------
def scored(instance: RoundInstance, name: str, **options: object) -> Evaluation:
    return evaluate(instance, run_mechanism(instance, name, **options))


def check_mechanism(instance: RoundInstance, name: str) -> Evaluation:
    """SPEC 4 for every mechanism: within capacity, exactly g_j GPUs; all placed unless it may skip."""
    result = scored(instance, name)
    assert result.valid, (name, result.problems)
    for score in result.jobs.values():
        assert score.gpus_placed in (0, score.gpus), (name, score)
    if MECHANISMS[name].places_every_job:
        assert not result.unplaced, (name, result.unplaced)
    return result


def check_tune(instance: RoundInstance, against_ilp: bool = True, variant: dict[str, str] | None = None) -> Evaluation:
    """SPEC 4 for tune (by default, and with ``variant``'s packing order and server choice) and for the
    artifact's TUNE: every job placed, no floor broken, >= proportional, <= the ideal ILP optimum. Returns
    the default tune's score."""
    proportional = check_mechanism(instance, "proportional")
    ideal = solve_ideal(instance) if against_ilp else None
    if ideal is not None:
        assert ideal.has_solution and ideal.objective is not None
    variants = [("tune", {}), ("tune-artifact", {}), *([("tune", variant)] if variant else [])]
    for name, options in variants:
        result = scored(instance, name, **options)
        assert result.valid and not result.unplaced, (name, options, result.problems, result.unplaced)
        assert not result.floors_violated, (name, options, result.floors_violated)
        assert result.objective >= proportional.objective - 1e-9, (name, options)
        if ideal is not None:
            assert result.objective <= ideal.objective + 1e-6, (name, options)
    return scored(instance, "tune")


def check_all(instance: RoundInstance, against_ilp: bool = True, variant: dict[str, str] | None = None) -> None:
    for name in HEURISTICS:
        check_mechanism(instance, name)
    check_tune(instance, against_ilp, variant)


# -- instances ---------------------------------------------------------------------------------------------
splits = st.tuples(st.integers(0, 10), st.integers(0, 10), st.integers(0, 10)).filter(lambda s: sum(s) > 0)


@st.composite
def generated_rounds(draw: st.DrawFn, max_servers: int = 8) -> RoundInstance:
    return generate_round(
        gpus=8 * draw(st.integers(1, max_servers)),
        split=draw(splits),
        multi_gpu=draw(st.booleans()),
        seed=draw(st.integers(0, 10_000)),
        profile_noise=draw(st.sampled_from([0.0, 0.0, 0.05, 0.3])),
        cpu_per_gpu=draw(st.sampled_from([3, 3, 4, 5, 6])),
    )


@st.composite
def profiles(draw: st.DrawFn) -> Profile:
    """Any grid: possibly starting above the proportional point, not monotone, with zero entries."""
    cpu = sorted(draw(st.sets(st.sampled_from([0.5, 1, 2, 3, 4, 5, 6, 9, 12, 24]), min_size=1, max_size=5)))
    mem = sorted(draw(st.sets(st.sampled_from([5, 10, 20.83, 40, 62.5, 100, 125, 250]), min_size=1, max_size=4)))
    values = st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.0, 1.2, 1.5, 2.0, 2.4, 3.0])
    tput = np.array(draw(st.lists(values, min_size=len(cpu) * len(mem), max_size=len(cpu) * len(mem))))
    tput = tput.reshape(len(cpu), len(mem))
    if draw(st.booleans()):
        tput = np.maximum.accumulate(np.maximum.accumulate(tput, axis=0), axis=1)
    return Profile(cpu, mem, tput)


@st.composite
def small_rounds(draw: st.DrawFn) -> RoundInstance:
    """Hand-made small clusters (any shape, fractional CPU counts) with random profiles and GPU demands."""
    gpus_per_server = draw(st.integers(1, 8))
    cluster = Cluster(
        servers=draw(st.integers(1, 5)),
        gpus_per_server=gpus_per_server,
        cpus_per_server=draw(st.sampled_from([1.0, 7.0, 13.5, 24.0, 3.0 * gpus_per_server, 40.0])),
        mem_gb_per_server=draw(st.sampled_from([64.0, 100.0, 333.3, 500.0])),
    )
    builtin = st.sampled_from([builtin_profile(m) for m in (*SENSITIVE, *INSENSITIVE)])
    pool = draw(st.lists(st.one_of(profiles(), builtin), min_size=1, max_size=4))
    free = cluster.total_gpus
    jobs = []
    # Mostly at full load, where CPU and memory run short and the fallbacks are exercised.
    count = 40 if draw(st.booleans()) else draw(st.integers(1, 12))
    for index in range(count):
        if free == 0:
            break
        gpus = draw(st.integers(1, min(free, 2 * gpus_per_server)))
        free -= gpus
        jobs.append(Job(f"j{index}", gpus, draw(st.sampled_from(pool))))
    return RoundInstance(cluster, tuple(jobs))


def worked_example() -> RoundInstance:
    """Paper section 2.1, Table 1: two 8-GPU / 24-CPU / 500 GB servers, four 4-GPU jobs."""
    models = ("res18", "m5", "transformer", "gnmt")
    jobs = tuple(Job(f"J{k + 1}", 4, builtin_profile(m), model=m) for k, m in enumerate(models))
    return RoundInstance(Cluster(2, 8, 24, 500), jobs)


def round_of(cluster: Cluster, models: list[tuple[str, int]]) -> RoundInstance:
    jobs = tuple(Job(f"j{k}", g, builtin_profile(m), model=m) for k, (m, g) in enumerate(models))
    return RoundInstance(cluster, jobs)


# -- SPEC 4 invariants, property-based ---------------------------------------------------------------------
# Each example also checks TUNE in one packing order and server choice (TUNE_VARIANTS, drawn): every variant
# meets dozens of examples without multiplying the suite's time.
@settings(CI, max_examples=150)
@given(generated_rounds(), st.sampled_from(TUNE_VARIANTS))
def test_invariants_on_generated_rounds(instance: RoundInstance, variant: dict[str, str]) -> None:
    check_all(instance, variant=variant)


@settings(CI, max_examples=300)
@given(small_rounds(), st.sampled_from(TUNE_VARIANTS))
def test_invariants_on_hand_made_rounds(instance: RoundInstance, variant: dict[str, str]) -> None:
    check_all(instance, variant=variant)


@settings(CI, max_examples=50)
@given(generated_rounds(max_servers=32), st.randoms(use_true_random=False))
def test_invariants_hold_for_any_policy_order(instance: RoundInstance, rng: object) -> None:
    ids = [job.id for job in instance.jobs]
    rng.shuffle(ids)  # type: ignore[attr-defined]
    for name in HEURISTICS:
        result = evaluate(instance, run_mechanism(instance, name, order=ids))
        assert result.valid
        if MECHANISMS[name].places_every_job:
            assert not result.unplaced
    proportional = evaluate(instance, run_mechanism(instance, "proportional")).objective
    for name, options in [("tune-artifact", {}), *(("tune", variant) for variant in TUNE_VARIANTS)]:
        tune = evaluate(instance, run_mechanism(instance, name, order=ids, **options))
        assert tune.valid and not tune.unplaced and not tune.floors_violated, (name, options)
        assert tune.objective >= proportional - 1e-9


@settings(CI, max_examples=50)
@given(generated_rounds(max_servers=16), st.sampled_from([0.0, 0.05, 0.2]))
def test_tune_invariants_with_a_diminishing_returns_threshold(instance: RoundInstance, threshold: float) -> None:
    result = scored(instance, "tune", threshold=threshold)
    assert result.valid and not result.unplaced and not result.floors_violated


# -- named cases -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("multi_gpu", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_50_0_50_every_job_sensitive(multi_gpu: bool, seed: int) -> None:
    instance = generate_round(128, split=(50, 0, 50), multi_gpu=multi_gpu, seed=seed)
    check_all(instance)


@pytest.mark.parametrize("multi_gpu", [False, True])
def test_all_jobs_insensitive(multi_gpu: bool) -> None:
    instance = generate_round(128, split=(0, 100, 0), multi_gpu=multi_gpu, seed=4)
    check_all(instance)
    for name in HEURISTICS:  # nothing is short of CPU or memory, so nobody is skipped or starved
        result = scored(instance, name)
        assert not result.unplaced and result.objective == pytest.approx(len(instance.jobs))
    # At its best-case demand (1 CPU, 20.83 GB per GPU): no job was moved to proportional.
    placed = run_mechanism(instance, "tune")
    for job in instance.jobs:
        for part in placed.jobs[job.id]:
            assert part.cpus == pytest.approx(part.gpus * 1.0) and part.mem_gb == pytest.approx(part.gpus * 20.83)


def test_one_16_gpu_job_among_1_gpu_jobs() -> None:
    cluster = Cluster(4, 8, 24, 500)
    small = [(m, 1) for m in (SENSITIVE + INSENSITIVE) * 2][:16]
    instance = round_of(cluster, [("res18", 16), *small])
    check_all(instance)
    allocation = run_mechanism(instance, "tune")
    big = allocation.jobs["j0"]
    assert len(big) == 2 and all(p.gpus == 8 for p in big)  # two whole servers, the fewest possible
    # A 16-GPU job fills its servers, so it can only get the proportional share there.
    assert all(p.cpus == pytest.approx(24) for p in big)


def test_servers_already_full_of_insensitive_jobs() -> None:
    cluster = Cluster(4, 8, 24, 500)
    # Three servers' worth of 1-GPU insensitive jobs and eight 1-GPU sensitive ones.
    models = [(INSENSITIVE[k % 3], 1) for k in range(24)] + [(SENSITIVE[k % 5], 1) for k in range(8)]
    instance = round_of(cluster, models)
    check_all(instance)
    assert scored(instance, "tune").objective > scored(instance, "proportional").objective

    # Servers 0-2 already full of insensitive jobs: the sensitive jobs all go to server 3, making room among
    # themselves; the insensitive jobs (at or below proportional) are never demoted.
    state = ServerState(instance)
    for job in range(24):
        state.place(job, (job // 8,), (1,), 1.0, 20.83)
    cpu, mem = best_case_demands(instance)
    stages = []
    for job in range(24, 32):
        result = place_with_fallback(state, job, 1, cpu[job], mem[job])
        assert result is not None and result.placement.servers == (3,)
        assert all(demoted >= 24 for demoted in result.demoted)
        stages.append(result.stage)
    assert stages[0] == "ideal" and "demoted" in stages
    assert all(state.placement(job).cpu_per_gpu == 1.0 for job in range(24))
    result = evaluate(instance, state.to_allocation())
    assert result.valid and not result.floors_violated and not result.unplaced


@pytest.mark.parametrize("ratio", [4, 5, 6])
@pytest.mark.parametrize("multi_gpu", [False, True])
def test_cpu_gpu_ratios(ratio: int, multi_gpu: bool) -> None:
    instance = generate_round(64, multi_gpu=multi_gpu, seed=ratio, cpu_per_gpu=ratio)
    assert instance.cluster.cpu_per_gpu == ratio
    check_all(instance)


def test_paper_worked_example_pairs_sensitive_with_insensitive() -> None:
    instance = worked_example()
    check_all(instance)
    allocation = run_mechanism(instance, "tune")
    model = {job.id: job.model for job in instance.jobs}
    for server in (0, 1):
        here = sorted(model[j] for j, parts in allocation.jobs.items() for p in parts if p.server == server)
        assert len(here) == 2
        assert sum(m in ("res18", "m5") for m in here) == 1, here  # one sensitive, one insensitive job
    # Each sensitive job gets more than its proportional 12 CPUs, so tune beats proportional (Figure 3).
    for job_id in ("J1", "J2"):
        assert sum(p.cpus for p in allocation.jobs[job_id]) > 12
    assert scored(instance, "tune").objective > scored(instance, "proportional").objective


# -- demands -----------------------------------------------------------------------------------------------
def test_best_case_demands_of_builtin_models() -> None:
    cluster = Cluster(8, 8, 24, 500)
    instance = round_of(cluster, [("res18", 1), ("m5", 1), ("alexnet", 1), ("gnmt", 1), ("res18", 4), ("m5", 4)])
    cpu, mem = best_case_demands(instance)
    assert list(zip(cpu, mem, strict=True)) == [(9, 62.5), (6, 187.5), (12, 125), (1, 20.83), (6, 62.5), (6, 125)]
    cpu, mem = best_case_demands(instance, server_cap=False)
    assert (cpu[4], mem[4]) == (9, 62.5)
    # Diminishing returns: ResNet18 within 30% of its best (2.4) needs 6 CPUs (1.75), not 9.
    cpu, mem = best_case_demands(instance, best_case_tolerance=0.3)
    assert (cpu[0], mem[0]) == (6, 62.5)


def test_best_case_demands_are_public_and_check_their_arguments() -> None:
    # A notebook imported them from synergy_opt.mechanisms.demand (a usability review): now synergy_opt's own.
    instance = round_of(Cluster(1, 8, 24, 500), [("res18", 1)])
    assert [float(v[0]) for v in so.best_case_demands(instance_to_dict(instance))] == [9.0, 62.5]  # a dict too
    with pytest.raises(InvalidInputError, match="best_case_tolerance"):
        so.best_case_demands(instance, 1.0)
    with pytest.raises(InvalidInputError, match="heterogeneous round"):
        so.best_case_demands(so.generate_round(gpus=16, types={"k80": 1, "v100": 1}))


def test_best_case_demand_ties_go_to_the_smallest_footprint_then_fewer_cpus() -> None:
    # (6, 62.5) and (3, 125) both reach 2.0 with footprint 3: fewer CPUs wins; (12, 20) is bigger.
    profile = Profile([3, 6, 12], [20, 62.5, 125], [[0, 1, 2], [0, 2, 2], [2, 2, 2]])
    instance = RoundInstance(Cluster(1, 8, 24, 500), (Job("a", 1, profile),))
    cpu, mem = best_case_demands(instance)
    assert (cpu[0], mem[0]) == (3, 125)


def test_best_case_demand_falls_back_to_proportional_when_nothing_fits_a_server() -> None:
    profile = Profile([32, 64], [10], [[1], [2]])  # every config needs more than the server's 24 CPUs
    instance = RoundInstance(Cluster(1, 8, 24, 500), (Job("a", 2, profile),))
    cpu, mem = best_case_demands(instance)
    assert (cpu[0], mem[0]) == (3, 62.5)


@settings(CI, max_examples=80)
@given(st.one_of(generated_rounds(), small_rounds()), st.sampled_from([0.0, 0.1, 0.5]))
def test_demands_meet_the_floor_and_fit_a_server(instance: RoundInstance, threshold: float) -> None:
    cluster = instance.cluster
    cpu, mem = best_case_demands(instance, threshold)
    for job, c, m in zip(instance.jobs, cpu, mem, strict=True):
        assert job.profile.throughput(c, m) >= instance.floor(job.id) - 1e-12
        spread = min(job.gpus, cluster.gpus_per_server)
        proportional = (c, m) == (cluster.cpu_per_gpu, cluster.mem_gb_per_gpu)
        assert proportional or spread * c <= cluster.cpus_per_server * (1 + 1e-9)
        assert proportional or spread * m <= cluster.mem_gb_per_server * (1 + 1e-9)


# -- the shared state and the packing primitives ----------------------------------------------------------
def test_state_books_places_releases_and_demotes() -> None:
    instance = round_of(Cluster(2, 8, 24, 500), [("res18", 2), ("gnmt", 10)])
    state = ServerState(instance)
    state.place(0, (0,), (2,), 9.0, 62.5)
    state.place(1, (0, 1), (2, 8), 1.0, 20.83)
    assert state.free_gpus.tolist() == [4, 0]
    assert state.free_cpus == pytest.approx([24 - 18 - 2, 16])
    assert state.jobs_on[0] == {0: 2, 1: 2}
    state.set_demand(0, 3.0, 62.5)
    assert state.free_cpus[0] == pytest.approx(24 - 6 - 2)
    with pytest.raises(InvalidInputError):
        state.place(0, (1,), (2,), 3.0, 62.5)  # already placed
    with pytest.raises(InvalidInputError):
        state.place(1, (1,), (3,), 3.0, 62.5)  # wrong GPU count (and placed)
    with pytest.raises(InvalidInputError):
        ServerState(instance).place(1, (0, 0), (5, 5), 1.0, 20.83)  # a server twice
    with pytest.raises(InvalidInputError):
        ServerState(instance).place(0, (2,), (2,), 1.0, 20.83)  # no such server
    with pytest.raises(InvalidInputError):
        ServerState(instance).place(0, (0,), (2,), float("nan"), 20.83)
    copy = state.copy()
    copy.release(1)
    assert state.free_gpus.tolist() == [4, 0] and copy.free_gpus.tolist() == [6, 8]
    allocation = state.to_allocation()
    # The fast path builds exactly what the validating constructors build.
    assert allocation == Allocation.from_dict(allocation.to_dict())
    assert allocation.servers_of("j1") == (0, 1) and allocation.gpus_of("j1") == 10


@settings(CI, max_examples=80)
@given(small_rounds(), st.sampled_from(FITS), st.data())
def test_fill_servers_equals_one_by_one_placement(instance: RoundInstance, fit: str, data: st.DataObject) -> None:
    """The one-pass fill of identical jobs is exactly one-by-one best fit (or first fit, or spread)."""
    cluster = instance.cluster
    c, m = cluster.cpu_per_gpu / 2, cluster.mem_gb_per_gpu / 3
    ones = [k for k, job in enumerate(instance.jobs) if job.gpus == 1]
    # Some of them placed first, anywhere they fit, so that the servers differ.
    early = data.draw(st.integers(0, len(ones)))
    batch, single = ServerState(instance), ServerState(instance)
    for job in ones[:early]:
        server = data.draw(st.integers(0, cluster.servers - 1))
        if batch.fits(1, 2 * c, m)[server]:
            batch.place(job, (server,), (1,), 2 * c, m)
            single.place(job, (server,), (1,), 2 * c, m)
    rest = [job for job in ones if not batch.is_placed(job)]
    done = fill_servers(batch, rest, 1, c, m, fit=fit)  # type: ignore[arg-type]
    placed = 0
    for job in rest:
        fits = single.fits(1, c, m)
        if not fits.any():
            break
        scores = single.free_score()
        server = {"best": best_fit_server(single, 1, c, m), "first": int(np.argmax(fits)),
                  "spread": int(np.where(fits, scores, -np.inf).argmax())}[fit]
        assert server == fit_server(single, 1, c, m, fit=fit)  # type: ignore[arg-type]
        single.place(job, (server,), (1,), c, m)
        placed += 1
    assert batch.placements == single.placements
    assert np.array_equal(batch.free_gpus, single.free_gpus)
    assert np.allclose(batch.free_cpus, single.free_cpus) and np.allclose(batch.free_mem, single.free_mem)
    assert done == placed


def test_fewest_servers_takes_the_fullest_then_best_fits_the_remainder() -> None:
    instance = round_of(Cluster(4, 8, 24, 500), [("gnmt", 5), ("gnmt", 2), ("gnmt", 3), ("res18", 10)])
    state = ServerState(instance)
    for job, server in ((0, 0), (1, 1), (2, 2)):
        place_best_fit(state, job, instance.jobs[job].gpus, 1.0, 20.83, candidates=[server])
    # Free GPUs: 3, 6, 5, 8. A 10-GPU job at proportional: server 3 whole (8), then 2 on the tightest of the
    # rest that holds 2 (server 0, 3 free).
    spread = fewest_servers(state, 10, 3.0, 62.5)
    assert spread is not None
    assert spread[0].tolist() == [3, 0] and spread[1].tolist() == [8, 2]


def test_place_with_fallback_prefers_the_hint_and_demotes_just_enough() -> None:
    instance = round_of(Cluster(2, 8, 24, 500), [("alexnet", 2), ("alexnet", 2), ("gnmt", 4), ("gnmt", 4)])
    state = ServerState(instance)
    # Each alexnet job takes a whole server's CPUs (2 GPUs x 12 CPUs).
    state.place(0, (0,), (2,), 12.0, 125.0)
    state.place(1, (1,), (2,), 12.0, 125.0)
    result = place_with_fallback(state, 2, 4, 1.0, 20.83, servers_hint=[1])
    assert result is not None and result.stage == "demoted" and result.placement.servers == (1,)
    # Four CPUs short: alexnet 1 goes from 12 to 9 CPUs per GPU (frees 6), not all the way to 3.
    assert result.demoted == (1,)
    assert state.placement(1).cpu_per_gpu == 9.0 and state.placement(0).cpu_per_gpu == 12.0
    assert state.overcommitted().size == 0


def test_place_with_fallback_returns_none_without_free_gpus() -> None:
    instance = round_of(Cluster(1, 2, 24, 500), [("gnmt", 1), ("gnmt", 1)])
    state = ServerState(instance)
    assert place_with_fallback(state, 0, 1, 1.0, 20.83) is not None
    state.free_gpus[0] = 0  # the last GPU taken by something outside this round
    assert place_with_fallback(state, 1, 1, 1.0, 20.83) is None


def test_mixed_jobs_switched_to_proportional_keep_their_other_servers_within_capacity() -> None:
    # A job above proportional in CPU but below in memory, split over two servers; demoting it to
    # proportional grows its memory on the other server, which must then be repaired too.
    mixed = Profile([3, 12], [10, 62.5], [[0.1, 1.0], [2.0, 2.0]])
    hungry = Profile([1, 3], [62.5, 250], [[1.0, 1.0], [1.0, 3.0]])
    jobs = (Job("mixed", 8, mixed), Job("hungry", 4, hungry), Job("late", 4, builtin_profile("res50")))
    instance = RoundInstance(Cluster(2, 8, 60, 1000), jobs)
    state = ServerState(instance)
    state.place(0, (0, 1), (4, 4), 12.0, 10.0)
    state.place(1, (1,), (4,), 3.0, 230.0)
    result = place_with_fallback(state, 2, 4, 4.0, 62.5)
    assert result is not None
    assert state.overcommitted().size == 0
    evaluation = evaluate(instance, state.to_allocation())
    assert evaluation.valid and not evaluation.floors_violated


# -- baselines ---------------------------------------------------------------------------------------------
def test_greedy_respects_the_policy_order_and_skips_what_does_not_fit() -> None:
    instance = round_of(Cluster(1, 2, 24, 500), [("alexnet", 1), ("shufflenet", 1)])
    # Two 12-CPU jobs fill the server's 24 CPUs; a third sensitive job would be skipped.
    assert set(run_mechanism(instance, "greedy").jobs) == {"j0", "j1"}
    crowded = round_of(Cluster(1, 3, 24, 500), [("alexnet", 1), ("shufflenet", 1), ("res18", 1)])
    assert set(run_mechanism(crowded, "greedy").jobs) == {"j0", "j1"}
    assert set(run_mechanism(crowded, "greedy", order=["j2", "j1", "j0"]).jobs) == {"j2", "j1"}


def test_drf_serves_the_smallest_dominant_share_first() -> None:
    instance = round_of(Cluster(1, 3, 24, 500), [("alexnet", 1), ("shufflenet", 1), ("gnmt", 1)])
    cpu, mem = best_case_demands(instance)
    shares = dominant_shares(instance, cpu, mem)
    assert shares[2] < shares[0] == shares[1]
    allocation = run_mechanism(instance, "drf", skip=True)
    assert set(allocation.jobs) == {"j2", "j0"}  # gnmt first, then the first alexnet-like job in policy order
    assert set(run_mechanism(instance, "drf").jobs) == {"j0", "j1", "j2"}  # by default nobody waits


def test_dominant_shares_hand_computed() -> None:
    # 8 GPUs, 24 CPUs, 500 GB: a 1-GPU job at 250 GB is memory-dominant (0.5), a 2-GPU one at 9 CPUs per GPU
    # CPU-dominant (0.75), a 4-GPU one at 1 CPU and 10 GB GPU-dominant (0.5) (dropping memory from the share
    # changed only the digests: a mutation-testing helper).
    instance = round_of(Cluster(1, 8, 24, 500), [("gnmt", 1), ("gnmt", 2), ("gnmt", 4)])
    shares = dominant_shares(instance, np.array([3.0, 9.0, 1.0]), np.array([250.0, 10.0, 10.0]))
    np.testing.assert_allclose(shares, [0.5, 0.75, 0.5])


def test_tetris_places_by_alignment_not_by_priority() -> None:
    # One 3-GPU server: the 12-CPU jobs align best with its free resources, so they fill its CPUs and gnmt,
    # first in priority, waits. Greedy follows the priority instead.
    instance = round_of(Cluster(1, 3, 24, 500), [("alexnet", 1), ("shufflenet", 1), ("gnmt", 1)])
    order = ["j2", "j1", "j0"]
    assert set(run_mechanism(instance, "tetris", order=order, skip=True).jobs) == {"j0", "j1"}
    assert set(run_mechanism(instance, "greedy", order=order).jobs) == {"j2", "j1"}


def test_tetris_aligns_with_what_is_free_not_with_size() -> None:
    # One server of 4 GPUs, 24 CPUs, 400 GB (a fraction of each per unit below). Best cases: B 1 CPU and 300 GB,
    # A 13 CPUs and 10 GB, C 8 CPUs and 100 GB, 1 GPU each. Empty, the server takes B (the largest, 0.25 + 0.04 +
    # 0.75). Then 0.96 of its CPUs and 0.25 of its memory are free: A aligns with that (0.71 against C's 0.57),
    # though C is the larger (0.83 against 0.82); after A, C's 100 GB no longer fit. By size it would be B and C
    # (a mutation scoring by size changed only the digests: a mutation-testing helper).
    jobs = (Job("A", 1, Profile([1, 13], [10, 300], [[0.5, 0.5], [2.0, 2.0]])),
            Job("B", 1, Profile([1, 13], [10, 300], [[0.5, 2.0], [0.5, 2.0]])),
            Job("C", 1, Profile([1, 8], [10, 100], [[0.5, 0.5], [0.5, 2.0]])))
    instance = RoundInstance(Cluster(1, 4, 24, 400), jobs)
    assert set(run_mechanism(instance, "tetris", skip=True).jobs) == {"A", "B"}


# -- registry ----------------------------------------------------------------------------------------------
def test_unknown_mechanism_names_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as error:
        run_mechanism(worked_example(), "tunee")
    assert error.value.known == tuple(MECHANISMS) and "tune" in str(error.value)


@pytest.mark.parametrize(
    ("order", "named"),
    [(["J1", "J2", "J3", "nope"], "nope"), (["J1", "J1", "J2", "J3", "J4"], "J1"), (["J1", "J2"], "J3"), ("J1", "J1")],
)
def test_bad_orders_are_rejected_naming_the_ids(order: list[str], named: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        run_mechanism(worked_example(), "tune", order=order)
    assert named in str(error.value)


def test_opt_is_registered_and_places_every_job() -> None:
    assert "opt" in MECHANISMS
    result = evaluate(worked_example(), run_mechanism(worked_example(), "opt"))
    assert result.valid and not result.unplaced and not result.floors_violated


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_a_round_without_jobs_gives_an_empty_allocation(name: str) -> None:
    empty = RoundInstance(Cluster(2), ())
    assert run_mechanism(empty, name).jobs == {}


@pytest.mark.parametrize("name", ["tune", "opt"])
def test_unknown_options_are_bad_input(name: str) -> None:
    with pytest.raises(InvalidInputError, match=r"options\.colour"):
        run_mechanism(worked_example(), name, colour="blue")


@pytest.mark.parametrize("mechanism", ["tune", "greedy", "drf", "tetris", "near-opt", "opt"])
def test_a_knife_edge_round_is_packed_within_the_capacity(mechanism: str) -> None:
    # Three jobs whose best case is 8.000001 CPUs per GPU on a server of 24: all three would pass the capacity by
    # 1.25e-7 (relative), more than the evaluator's float tolerance (1e-7). A packing slack of 1e-6 placed them
    # (a mutation of FIT_TOLERANCE that passed the suite); the packings' 1e-9 does not.
    edge = so.Profile([3, 8.000001], [50], [[1.0], [2.0]])
    instance = so.RoundInstance(so.Cluster(1, 3, 24, 150), tuple(so.Job(f"j{k}", 1, edge) for k in range(3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidAllocationWarning)
        result = so.evaluate(instance, so.run_mechanism(instance, mechanism))
    assert result.valid and result.server_use[0, 1] <= 24.0


def test_proportional_packs_by_best_fit_so_a_whole_server_stays_free() -> None:
    # Two servers of 4 GPUs: X and Y (2 GPUs each) share server 0 by best fit, so Z (4 GPUs) gets server 1 whole;
    # worst fit put Y on server 1 and split Z over both (a mutation that changed only the digests).
    gnmt = builtin_profile("gnmt")
    instance = RoundInstance(Cluster(2, 4, 12, 200), (Job("X", 2, gnmt), Job("Y", 2, gnmt), Job("Z", 4, gnmt)))
    jobs = run_mechanism(instance, "proportional").jobs
    assert [p.server for p in jobs["X"]] == [0] and [p.server for p in jobs["Y"]] == [0]
    assert jobs["Z"] == (Placement(1, 4, 12.0, 200.0),)


def test_demotion_makes_room_where_least_must_be_released() -> None:
    # Two servers of 4 GPUs, 12 CPUs. Server 0: a 2-GPU job at 5 CPUs per GPU (2 CPUs and 2 GPUs free); server 1:
    # a 1-GPU job at 3 CPUs (9 CPUs and 3 GPUs free). A 1-GPU job at 3 CPUs that must make room goes to server 1,
    # where nothing is released, though server 0 is the tighter fit on GPUs (a mutation ignoring what must be
    # released changed only the digests).
    gnmt = builtin_profile("gnmt")
    instance = RoundInstance(Cluster(2, 4, 12, 200), (Job("a", 2, gnmt), Job("b", 1, gnmt), Job("c", 1, gnmt)))
    state = ServerState(instance)
    state.place(0, (0,), (2,), 5.0, 50.0)
    state.place(1, (1,), (1,), 3.0, 50.0)
    servers, counts = _gpu_servers(state, 1, 3.0, 50.0, None)
    assert servers.tolist() == [1] and counts.tolist() == [1]


@pytest.mark.parametrize("fit", ["server", "gpu"])
@pytest.mark.parametrize("seed", range(6))
def test_greedy_skips_only_what_fits_nowhere(monkeypatch: pytest.MonkeyPatch, fit: str, seed: int) -> None:
    # A queue of four times the cluster's GPUs, as the simulator's greedy refill hands it (trusted_round): the
    # jobs first fit places are the same with and without the shortcut that skips a demand at least as large as
    # one that fit nowhere (room only shrinks), job for job and placement for placement.
    import synergy_opt.mechanisms.greedy as greedy

    source = generate_round(gpus=128, multi_gpu=True, seed=seed, profile_noise=0.05)
    jobs = tuple(replace(job, id=f"{job.id}-{copy}") for copy in range(4) for job in source.jobs)
    queue = trusted_round(Cluster(4, 8, 24, 500), jobs, {})
    order = np.random.default_rng(seed).permutation(len(jobs))
    fast = greedy.pack_greedy(queue, order, fit=fit).placements
    monkeypatch.setattr(greedy._Unfit, "__call__", lambda self, gpus, cpu, mem: False)
    plain = greedy.pack_greedy(queue, order, fit=fit).placements
    assert fast == plain
    assert 0 < sum(p is not None for p in fast) < len(jobs)
