"""The simulator: hand-computed runs, conservation of work, invariants per round, determinism, bad input."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synergy_opt as so
from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.sim import POLICIES, JobStates, Trace, TraceJob, generate_trace, mechanism_names, simulate
from synergy_opt.sim.policies import ranking
from synergy_opt.sim.throughput import ThroughputTable

GNMT = so.builtin_profile("gnmt")  # flat: 1.0 everywhere
RES18 = so.builtin_profile("res18")  # CPU- and memory-sensitive, up to 2.4x


def job(id: str, arrival: float, gpus: int, duration: float, profile: so.Profile = GNMT, **extra: object) -> TraceJob:
    return TraceJob(id, arrival, gpus, duration, profile, **extra)  # type: ignore[arg-type]


def jct(result: so.sim.SimResult) -> dict[str, float]:
    return dict(zip(result.jobs["id"], result.jobs["jct_s"], strict=True))


# ---- hand-computed runs -------------------------------------------------------------------------------------

def test_proportional_fifo_three_jobs_hand_computed() -> None:
    # One 8-GPU server, 100 s rounds. A holds all GPUs for rounds 0-200 and ends at 250; B (4 GPUs) and C
    # (4 GPUs) wait, then run side by side from 300: C ends at 330, B at 400.
    trace = Trace((job("A", 0, 8, 250), job("B", 50, 4, 100), job("C", 120, 4, 30)))
    result = simulate(trace, so.Cluster(1), mechanism="proportional", round_s=100)
    assert jct(result) == {"A": 250, "B": 350, "C": 210}
    assert result.jobs.set_index("id")["first_start_s"].to_dict() == {"A": 0, "B": 300, "C": 300}
    assert result.summary["makespan_h"] == pytest.approx(400 / 3600)
    assert result.summary["avg_jct_h"] == pytest.approx((250 + 350 + 210) / 3 / 3600)


def test_jct_percentiles_hand_computed() -> None:
    # 20 one-GPU jobs at time 0 on 20 GPUs, durations 1..20 hours (whole rounds): JCT k hours. Linear percentiles
    # of 1..20: p50 10.5, p95 at rank 0.95 x 19 = 18.05 -> 19.05, p99 at 18.81 -> 19.81 (a mutation reading p95 as
    # the 90th percentile, or p99 as the largest, survived the suite).
    trace = Trace(tuple(job(f"j{k}", 0, 1, 3600 * k) for k in range(1, 21)))
    summary = simulate(trace, so.Cluster(5, 4), mechanism="proportional", round_s=600).summary
    assert summary["avg_jct_h"] == pytest.approx(10.5)
    assert summary["p50_jct_h"] == pytest.approx(10.5)
    assert summary["p95_jct_h"] == pytest.approx(19.05)
    assert summary["p99_jct_h"] == pytest.approx(19.81)
    assert summary["makespan_h"] == pytest.approx(20.0)


def test_a_job_due_just_after_a_round_holds_its_gpus_through_the_next() -> None:
    # A needs 100.05 s on all 8 GPUs: 0.05 s past the first 100 s round, so it holds them through the second and
    # B (8 GPUs) starts at 200 (a finish tolerance of 1e-3 let B start at 100: a mutation that passed the suite).
    trace = Trace((job("A", 0, 8, 100.05), job("B", 0, 8, 100)))
    result = simulate(trace, so.Cluster(1), mechanism="proportional", round_s=100)
    assert jct(result) == {"A": pytest.approx(100.05), "B": 300}
    assert result.jobs.set_index("id")["first_start_s"].to_dict() == {"A": 0, "B": 200}


def test_a_job_that_does_not_fit_is_passed_over_not_blocking() -> None:
    # At 100 s: A (4 GPUs) runs; B (8 GPUs) does not fit and is passed over; C (2 GPUs) runs at once.
    trace = Trace((job("A", 0, 4, 1000), job("B", 1, 8, 100), job("C", 2, 2, 100)))
    result = simulate(trace, so.Cluster(1), mechanism="proportional", round_s=100)
    assert jct(result) == {"A": 1000, "B": 1099, "C": 198}


@pytest.mark.parametrize("overhead", [0.0, 10.0])
def test_las_alternates_and_pays_the_restore_overhead(overhead: float) -> None:
    # One 1-GPU server; A and B (250 s each) take turns under LAS; every resume loses `overhead` seconds.
    cluster = so.Cluster(1, 1, 3, 62.5)
    trace = Trace((job("A", 0, 1, 250), job("B", 0, 1, 250)))
    result = simulate(trace, cluster, policy="las", mechanism="proportional", round_s=100,
                      preemption_overhead_s=overhead)
    assert jct(result) == {"A": pytest.approx(450 + 2 * overhead), "B": pytest.approx(550 + 2 * overhead)}
    assert result.jobs.set_index("id")["preemptions"].to_dict() == {"A": 2, "B": 2}


def _speedup_alone(instance: so.RoundInstance, mechanism: str) -> float:
    """What the mechanism gives a lone job, scored by the toolkit's evaluator (not by the simulator)."""
    if mechanism in ("ideal", "ideal-type-free"):  # one type: the type-free ideal is the ideal
        return float(so.solve_ideal(instance).objective) / instance.floors[0]
    if mechanism == "joint":
        return so.solve_joint(instance).evaluation.objective / instance.floors[0]
    return so.evaluate(instance, so.run_mechanism(instance, mechanism)).objective / instance.floors[0]


@pytest.mark.parametrize("mechanism", mechanism_names())
@pytest.mark.parametrize(("model", "gpus"), [("res18", 1), ("m5", 4), ("gnmt", 2), ("alexnet", 12)])
def test_one_job_alone_runs_its_duration_over_its_speedup(mechanism: str, model: str, gpus: int) -> None:
    cluster = so.Cluster(2)
    profile = so.builtin_profile(model)
    trace = Trace((job("x", 0, gpus, 7200.0, profile),))
    instance = so.RoundInstance(cluster, (so.Job("x", gpus, profile),))
    speedup = _speedup_alone(instance, mechanism)
    result = simulate(trace, cluster, mechanism=mechanism, record_job_rounds=True)
    assert result.jobs["jct_s"].iloc[0] == pytest.approx(7200.0 / speedup, rel=1e-12)
    assert result.jobs["mean_speedup"].iloc[0] == pytest.approx(speedup, rel=1e-12)
    if mechanism == "proportional":
        assert result.jobs["jct_s"].iloc[0] == 7200.0
    np.testing.assert_allclose(result.job_rounds["speedup"], speedup, rtol=1e-12)


# ---- invariants over random dynamic traces -------------------------------------------------------------------

def _work_done(result: so.sim.SimResult) -> pd.Series:
    log = result.job_rounds
    return (log["speedup"] * log["run_s"]).groupby(log["id"]).sum()


@pytest.mark.parametrize(("mechanism", "policy", "multi_gpu", "noise", "overhead"), [
    ("tune", "fifo", False, 0.0, 0.0),
    ("tune", "las", True, 0.05, 30.0),
    ("greedy", "srtf", True, 0.0, 0.0),
    ("drf", "ftf", True, 0.0, 0.0),
    ("proportional", "las", True, 0.0, 60.0),
    ("ideal", "fifo", True, 0.05, 0.0),
])
def test_every_finished_job_received_exactly_its_work(
    mechanism: str, policy: str, multi_gpu: bool, noise: float, overhead: float
) -> None:
    trace = Trace(generate_trace(120, load=12.0, multi_gpu=multi_gpu, profile_noise=noise, seed=3).jobs)
    result = simulate(trace, so.Cluster(4), policy=policy, mechanism=mechanism, record_job_rounds=True,
                      preemption_overhead_s=overhead, monitor=(0, 120))
    finished = result.jobs.dropna(subset=["finish_s"]).set_index("id")
    assert len(finished) == 120
    work = _work_done(result).reindex(finished.index)
    np.testing.assert_allclose(work, finished["duration_s"], rtol=1e-9)
    # Time is consistent: a job holds GPUs only while in the system, and its JCT covers its run time.
    assert (finished["run_s"] <= finished["jct_s"] + 1e-6).all()
    assert (finished["first_start_s"] >= finished["arrival_s"]).all()
    assert (result.rounds["gpu_util_pct"] <= 100 + 1e-9).all()
    assert (result.rounds["cpu_util_pct"] <= 100 + 1e-9).all()
    assert (result.rounds["mem_util_pct"] <= 100 + 1e-9).all()


@pytest.mark.parametrize(("multi_gpu", "noise", "split"), [
    (False, 0.0, (20, 70, 10)), (True, 0.05, (20, 70, 10)), (True, 0.0, (50, 0, 50)),
])
def test_tune_never_slows_a_running_job_below_proportional(multi_gpu: bool, noise: float, split: tuple) -> None:
    trace = generate_trace(150, load=20.0, multi_gpu=multi_gpu, profile_noise=noise, split=split, seed=5)
    result = simulate(Trace(trace.jobs), so.Cluster(4), mechanism="tune", record_job_rounds=True)
    assert (result.job_rounds["speedup"] >= 1 - 1e-9).all()
    assert result.job_rounds["speedup"].max() > 1.2  # it does speed sensitive jobs up


@pytest.mark.parametrize("mechanism", ["proportional", "tune", "ideal"])
def test_static_makespan_at_least_the_work_over_the_cluster(mechanism: str) -> None:
    trace = generate_trace(60, load=None, multi_gpu=True, seed=2)
    cluster = so.Cluster(2)
    result = simulate(trace, cluster, mechanism=mechanism)
    frame = trace.to_frame()
    # Nothing runs faster than its profile's best point.
    best = np.array([j.profile.tput.max() / j.profile.throughput(3, 62.5) for j in trace.jobs])
    bound_s = float((frame["gpus"] * frame["duration_s"] / best).sum()) / cluster.total_gpus
    assert result.summary["makespan_h"] * 3600 >= bound_s * (1 - 1e-12)
    if mechanism == "proportional":
        work_s = float((frame["gpus"] * frame["duration_s"]).sum()) / cluster.total_gpus
        assert result.summary["makespan_h"] * 3600 >= work_s * (1 - 1e-12)
    assert result.summary["monitored"] == 60 and result.summary["unfinished"] == 0


def test_same_inputs_give_identical_results() -> None:
    trace = generate_trace(40, load=6.0, multi_gpu=True, profile_noise=0.05, seed=9)
    runs = [simulate(trace, so.Cluster(3), policy="srtf", mechanism="tune") for _ in range(2)]
    pd.testing.assert_frame_equal(runs[0].jobs, runs[1].jobs)
    volatile = ["mechanism_s"]
    pd.testing.assert_frame_equal(runs[0].rounds.drop(columns=volatile), runs[1].rounds.drop(columns=volatile))


def test_the_allocation_is_reused_while_the_runnable_set_is_unchanged() -> None:
    calls = []

    def counting(instance: so.RoundInstance) -> so.Allocation:
        calls.append(tuple(job.id for job in instance.jobs))
        return so.run_mechanism(instance, "tune")

    trace = generate_trace(60, load=6.0, seed=1)
    mine = simulate(trace, so.Cluster(2), mechanism=counting)
    theirs = simulate(trace, so.Cluster(2), mechanism="tune")
    assert len(calls) == mine.summary["rounds_solved"] < mine.summary["rounds"]
    assert all(a != b for a, b in itertools.pairwise(calls))  # solved again only when the set changed
    pd.testing.assert_frame_equal(mine.jobs, theirs.jobs)


def test_throughput_table_agrees_with_the_evaluator() -> None:
    for seed in range(6):
        instance = so.generate_round(64, multi_gpu=seed % 2 == 1, profile_noise=0.05 * (seed % 3), seed=seed)
        table = ThroughputTable([j.profile for j in instance.jobs])
        positions = np.arange(len(instance.jobs))
        ids = [j.id for j in instance.jobs]
        for name in ("proportional", "tune", "greedy", "tetris"):
            allocation = so.run_mechanism(instance, name)
            scores = so.evaluate(instance, allocation).jobs
            throughput, use = table.of_allocation(positions, ids, instance.gpus, allocation)
            np.testing.assert_allclose(throughput, [scores[i].throughput for i in ids], rtol=1e-12)
            np.testing.assert_allclose(use, so.evaluate(instance, allocation).server_use.sum(axis=0))


# ---- the trace runs on: monitor window and extension -----------------------------------------------------------

def test_a_generated_trace_draws_more_arrivals_until_the_monitored_jobs_finish() -> None:
    trace = generate_trace(40, load=30.0, seed=4)
    result = simulate(trace, so.Cluster(1), mechanism="proportional")
    assert result.summary["monitored"] == 40 - int(40 * 0.2)
    assert result.summary["jobs"] > 40  # arrivals went on past the trace's end
    longer = generate_trace(result.summary["jobs"], load=30.0, seed=4)
    assert longer.jobs[:40] == trace.jobs
    pd.testing.assert_frame_equal(result.jobs, simulate(longer, so.Cluster(1), mechanism="proportional",
                                                        monitor=(8, 40)).jobs)
    last_monitored_finish = result.jobs["finish_s"].iloc[8:40].max()
    assert result.summary["makespan_h"] * 3600 == pytest.approx(last_monitored_finish - result.jobs["arrival_s"][8])


def test_a_loaded_trace_ends_when_its_jobs_are_done() -> None:
    trace = Trace(generate_trace(30, load=30.0, seed=4).jobs)  # no generator metadata: fixed
    result = simulate(trace, so.Cluster(1), mechanism="tune", monitor=(0, 30))
    assert result.summary["jobs"] == 30 and result.summary["unfinished"] == 0


def test_arrivals_stop_at_ten_times_the_window_when_a_policy_starves_old_jobs() -> None:
    # Overloaded LAS: fresh arrivals always come first, so the first jobs wait until arrivals stop.
    trace = generate_trace(20, load=60.0, seed=0)
    result = simulate(trace, so.Cluster(1), policy="las", mechanism="proportional", monitor=(0, 5))
    assert result.summary["arrivals_capped"] and result.summary["jobs"] == 50
    assert result.summary["unfinished"] == 0


def test_until_stops_early_and_reports_unfinished_jobs() -> None:
    trace = generate_trace(50, load=None, seed=0)
    result = simulate(trace, so.Cluster(1), mechanism="tune", until_s=3600)
    assert result.summary["unfinished"] > 0 and math.isnan(result.summary["makespan_h"])
    assert result.rounds["time_s"].max() < 3600


def test_until_stops_at_its_boundary_when_the_cluster_idles_past_it() -> None:
    # A is done at 100 s; B arrives at 5000 s. The run stops at 1200 s (300-s rounds), so B never arrived: the idle
    # stretch skipped to B's round (5100 s) before the stop, and B was listed.
    trace = Trace((job("A", 0, 1, 100), job("B", 5000, 1, 100)))
    for timing in ("grid", "gavel"):
        result = simulate(trace, so.Cluster(1), mechanism="proportional", until_s=1000, monitor=(0, 2),
                          round_s=300, round_timing=timing)
        assert result.summary["stopped"] == "until_s", timing
        assert result.jobs["id"].tolist() == ["A"] and result.summary["jobs"] == 1, timing
        assert result.summary["unfinished"] == 1, timing


def test_profiling_delay_holds_a_job_back() -> None:
    plain = simulate(Trace((job("x", 0, 1, 1000),)), so.Cluster(1), mechanism="proportional")
    delayed = simulate(Trace((job("x", 0, 1, 1000, profiling_s=450),)), so.Cluster(1), mechanism="proportional")
    # Ready at 450, so it starts at the next round boundary (600).
    assert jct(delayed)["x"] == jct(plain)["x"] + 600


def test_an_empty_trace_is_refused_as_on_the_command_line() -> None:
    # It returned NaN figures without a word.
    with pytest.raises(so.InvalidInputError, match=r"trace='0 jobs': has no job to simulate"):
        simulate(Trace(()), so.Cluster(1))


def test_a_duration_too_small_to_resolve_is_refused() -> None:
    # 5e-324 s divided by a speedup rounded to 0 s: the job "finished" at once with a NaN mean speedup.
    with pytest.raises(so.InvalidInputError, match=r"duration_s=5e-324: must be a number >= 1e-06"):
        so.TraceJob("a", 0.0, 1, 5e-324, so.builtin_profile("res18"))
    assert so.TraceJob("a", 0.0, 1, 1e-6, so.builtin_profile("res18")).duration_s == 1e-6


# ---- policies ---------------------------------------------------------------------------------------------------

@st.composite
def job_states(draw: st.DrawFn) -> JobStates:
    n = draw(st.integers(1, 12))
    values = st.floats(0, 1e5, allow_nan=False)
    arrival = np.array(draw(st.lists(st.sampled_from([0.0, 10.0, 20.0, 30.0]), min_size=n, max_size=n)))
    duration = np.array(draw(st.lists(st.floats(1, 1e5), min_size=n, max_size=n)))
    remaining = duration * np.array(draw(st.lists(st.floats(0.01, 1), min_size=n, max_size=n)))
    attained = np.array(draw(st.lists(st.sampled_from([0.0, 100.0, 300.0]), min_size=n, max_size=n)))
    gpus = np.array(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n)))
    shares = np.array(draw(st.lists(st.floats(0, 1), min_size=3 * n, max_size=3 * n))).reshape(n, 3)
    return JobStates(50.0 + draw(values), np.arange(n) * 3, arrival, duration, remaining, attained, gpus,
                     artifact_demand_share=shares)


@settings(max_examples=150, deadline=None)
@given(job_states(), st.sampled_from(sorted(POLICIES)))
def test_policies_order_as_defined(states: JobStates, name: str) -> None:
    order = ranking(POLICIES[name], states)
    assert sorted(order.tolist()) == list(range(states.position.size))
    key = {
        "fifo": states.arrival_s,
        "srtf": states.remaining_s,
        "las": states.attained_gpu_s,
        "ftf": -(states.now_s - states.arrival_s + states.remaining_s) / states.duration_s,
        "fifo-artifact": states.arrival_s,
        "las-artifact": states.attained_gpu_s,  # artifact_priority None: no job starved
        "srtf-artifact": states.remaining_s,  # artifact_speedup None: ones
        "ftf-artifact": (states.now_s - states.arrival_s + states.remaining_s) / states.duration_s,
        "drf-artifact": states.artifact_demand_share.max(axis=1),
        "tetris-artifact": states.artifact_demand_share.sum(axis=1) * states.remaining_s,
    }[name]
    for a, b in itertools.pairwise(order):
        assert (key[a], states.arrival_s[a], states.position[a]) <= (key[b], states.arrival_s[b], states.position[b])


def test_a_user_policy_runs_and_a_bad_one_is_named() -> None:
    trace = generate_trace(20, load=None, seed=0)
    longest_first = simulate(trace, so.Cluster(1), policy=lambda s: -s.duration_s, mechanism="proportional")
    shortest_first = simulate(trace, so.Cluster(1), policy="srtf", mechanism="proportional")
    assert longest_first.summary["avg_jct_h"] > shortest_first.summary["avg_jct_h"]
    with pytest.raises(InvalidInputError, match="policy"):
        simulate(trace, so.Cluster(1), policy=lambda s: np.zeros(3))


# ---- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("call", "field"), [
    (lambda: simulate(Trace((job("x", 0, 16, 10),)), so.Cluster(1)), "trace.jobs[0].gpus"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), policy="lifo"), "policy"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), mechanism="magic"), "mechanism"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), round_s=0), "round_s"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), round_s=float("nan")), "round_s"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), preemption_overhead_s=300), "preemption_overhead_s"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), monitor=(3, 2)), "monitor"),
    (lambda: simulate(Trace(generate_trace(5).jobs), so.Cluster(1), monitor=(0, 9)), "monitor"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), seed=-1), "seed"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), bogus=1), "options.bogus"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), mechanism="ideal", bogus=1), "options.bogus"),
    (lambda: simulate(generate_trace(5), "cluster"), "cluster"),
    (lambda: simulate([], so.Cluster(1)), "trace"),
    (lambda: job("x", float("nan"), 1, 10), "arrival_s"),
    (lambda: job("x", -1, 1, 10), "arrival_s"),
    (lambda: job("x", 0, 1, 0), "duration_s"),
    (lambda: job("x", 0, 1, float("inf")), "duration_s"),
    (lambda: job("x", 0, 0, 10), "gpus"),
    (lambda: job("x", 0, 1, 10, profiling_s=-5), "profiling_s"),
    (lambda: Trace((job("x", 0, 1, 10), job("x", 1, 1, 10))), "jobs[1].id"),
    (lambda: generate_trace(-1), "jobs"),
    (lambda: generate_trace(5, load=0), "load"),
    (lambda: generate_trace(5, split=(0, 0, 0)), "split"),
    (lambda: generate_trace(5, cpu_per_gpu=7), "cpu_per_gpu"),
])
def test_bad_input_is_named(call: object, field: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        call()  # type: ignore[operator]
    assert error.value.field == field


def test_a_job_larger_than_the_cluster_is_named_by_its_id_too() -> None:
    trace = Trace((job("small", 0, 1, 10), job("huge", 0, 16, 10)))
    with pytest.raises(InvalidInputError, match=r"trace.jobs\[1\].gpus=16: job 'huge' asks for more than"):
        simulate(trace, so.Cluster(1))


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as error:
        simulate(generate_trace(5), so.Cluster(1), mechanism="magic")
    assert set(mechanism_names()) <= set(error.value.known)


def test_a_profile_without_throughput_at_the_proportional_share_is_named() -> None:
    flat_zero = so.Profile([4.0, 8.0], [62.5], [[1.0], [2.0]])  # nothing below 4 CPUs per GPU
    with pytest.raises(InvalidInputError) as error:
        simulate(Trace((job("x", 0, 1, 10, flat_zero),)), so.Cluster(1))
    assert error.value.field == "trace.jobs[0]" and "its profile gives throughput 0" in str(error.value)


# ---- the generator ----------------------------------------------------------------------------------------------

def test_generated_traces_follow_spec_5() -> None:
    trace = generate_trace(4000, load=9.0, seed=11)
    frame = trace.to_frame()
    minutes = frame["duration_s"] / 60
    assert minutes.min() >= 10**1.5 and minutes.max() <= 10**4
    assert np.mean(minutes > 10**3) == pytest.approx(0.2, abs=0.03)
    gaps = np.diff(frame["arrival_s"])
    assert (gaps >= 0).all() and frame["arrival_s"].iloc[0] == 0
    assert 3600 / gaps.mean() == pytest.approx(9.0, rel=0.05)
    share = frame["model"].map(lambda m: so.profiles.model_info(m).task).value_counts(normalize=True)
    assert share["language"] == pytest.approx(0.7, abs=0.03) and share["image"] == pytest.approx(0.2, abs=0.03)
    assert generate_trace(4000, load=9.0, seed=11) == trace
    assert generate_trace(4000, load=9.0, seed=12) != trace
    multi = generate_trace(2000, multi_gpu=True, seed=1).to_frame()["gpus"].value_counts(normalize=True)
    assert multi[1] == pytest.approx(0.70, abs=0.03) and multi[16] == pytest.approx(0.03, abs=0.015)
    assert generate_trace(10, load=None).static


# ---- found in review ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["tune", "ideal"])
def test_a_job_due_at_a_round_end_within_rounding_frees_its_gpu_then(mechanism: str) -> None:
    # A runs 16 rounds at speedup 2.278: remaining / rate lands a few ulps above 300 s in its last round. It
    # must finish there, so that B (arriving at 4700 s) starts at 4800 s, not a round later.
    fast = so.Profile([1.0, 3.0, 6.0], [62.5], [[0.5], [1.0], [2.278]])
    flat = so.Profile([1.0, 3.0, 6.0], [62.5], [[1.0], [1.0], [1.0]])
    trace = Trace((job("A", 0, 1, 2.278 * 300 * 16, fast), job("F", 0, 1, 1e5, flat), job("B", 4700, 1, 300.0, flat)))
    result = simulate(trace, so.Cluster(1, 2, 7, 125), mechanism=mechanism)
    starts = result.jobs.set_index("id")["first_start_s"]
    assert jct(result)["A"] == pytest.approx(4800.0, rel=1e-12)
    assert starts["B"] == 4800.0


@pytest.mark.parametrize("parts", [
    {"server": 0, "gpus": 1, "cpus": 1000.0, "mem_gb": 10.0},  # over capacity
    {"server": 99, "gpus": 1, "cpus": 3.0, "mem_gb": 62.5},  # a server the cluster does not have
    {"server": 0, "gpus": 2, "cpus": 6.0, "mem_gb": 125.0},  # the wrong GPU count
])
def test_a_user_mechanism_returning_an_invalid_allocation_is_named(parts: dict) -> None:
    def cheat(instance: so.RoundInstance) -> so.Allocation:
        return so.Allocation.from_dict({"jobs": {j.id: [parts] for j in instance.jobs}})

    with pytest.raises(InvalidInputError) as error:
        simulate(Trace((job("x", 0, 1, 100.0),)), so.Cluster(1), mechanism=cheat)
    assert error.value.field == "mechanism" and "invalid allocation" in error.value.reason


def test_monitored_jobs_that_never_arrived_before_until_count_as_unfinished() -> None:
    result = simulate(generate_trace(100, load=2.0, seed=0), so.Cluster(1), mechanism="tune", monitor=(0, 100),
                      until_s=18000)
    assert result.summary["monitored"] == 100
    finished = int(result.jobs["finish_s"].notna().sum())
    assert result.summary["unfinished"] == 100 - finished and finished < 100
    assert math.isnan(result.summary["makespan_h"])


@pytest.mark.parametrize(("call", "field"), [
    (lambda: simulate(generate_trace(5), so.Cluster(1), policy=lambda s: ["a"] * s.position.size), "policy"),
    (lambda: generate_trace(10**12), "jobs"),
    (lambda: simulate(generate_trace(5), so.Cluster(1), monitor=(0, 10**12)), "monitor"),
    (lambda: Trace(None), "jobs"),  # type: ignore[arg-type]
    (lambda: Trace((), [1, 2]), "metadata"),  # type: ignore[arg-type]
])
def test_more_bad_input_is_named(call: object, field: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        call()  # type: ignore[operator]
    assert error.value.field == field


def test_a_trace_of_another_cpu_ratio_warns_on_a_cluster_of_another() -> None:
    # A ratio-5 trace ran on ratio-3 servers without a word (the command line reads a trace at the cluster's).
    trace = generate_trace(jobs=4, load=None, cpu_per_gpu=5, seed=1)
    with pytest.warns(UserWarning, match=r"trace\.metadata\.cpu_per_gpu=5: .* the cluster has 3"):
        simulate(trace, so.Cluster(1), mechanism="proportional")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simulate(trace, so.Cluster(1, 8, 40, 500), mechanism="proportional")


def _units_trace(factors: tuple[float, float]) -> Trace:
    """Three 2-GPU jobs on one 8-GPU server, 6 CPUs spare: one doubles with 6 CPUs, one gains 1.2x, one is flat
    (GNMT); the first two's matrices times ``factors`` (the unit each was measured in)."""
    doubles = so.Profile([3.0, 6.0], [62.5], [[factors[0]], [2.0 * factors[0]]])
    gains = so.Profile([3.0, 6.0], [62.5], [[factors[1]], [1.2 * factors[1]]])
    return Trace((TraceJob("doubles", 0.0, 2, 3600.0, doubles), TraceJob("gains", 0.0, 2, 3600.0, gains),
                  TraceJob("flat", 0.0, 2, 3600.0, so.builtin_profile("gnmt"), model="gnmt")))


@pytest.mark.parametrize("mechanism", ["ideal", "near-opt", "opt", "joint"])
def test_a_rounds_objective_is_the_jobs_speedups_whatever_unit_their_matrices_are_in(mechanism: str) -> None:
    """Progress is a job's speedup; the mechanisms maximised the matrices' values as given, so a job measured in
    thousands took the spare CPUs for a 1.2x gain from one that would double (a tester's trace). Each job's
    matrix now reaches the mechanism over its floor: the same JCTs in any units, the doubling job served."""
    reference = simulate(_units_trace((1.0, 1.0)), so.Cluster(1), mechanism=mechanism).jobs.set_index("id")
    assert reference.loc["doubles", "jct_s"] == pytest.approx(1800.0)
    for factors in ((1.0, 1000.0), (1e-3, 7.0)):
        jobs = simulate(_units_trace(factors), so.Cluster(1), mechanism=mechanism).jobs.set_index("id")
        assert jobs["jct_s"].to_dict() == pytest.approx(reference["jct_s"].to_dict(), rel=1e-12), factors


def test_the_type_free_bound_on_one_type_is_ideal_whatever_the_matrices_unit() -> None:
    trace = _units_trace((1.0, 1000.0))
    one_type = so.HeteroCluster.of("v100:1", 8, 24, 500)
    runs = [simulate(trace, cluster, mechanism=mechanism).jobs.set_index("id")["jct_s"]
            for cluster, mechanism in ((so.Cluster(1), "ideal"), (one_type, "ideal"), (one_type, "ideal-type-free"))]
    assert runs[1].to_dict() == pytest.approx(runs[0].to_dict())
    assert runs[2].to_dict() == pytest.approx(runs[0].to_dict())
