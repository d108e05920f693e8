"""The artifact's own simulator on settings beyond Figure 9 (tests/data/artifact_runs/README.md), replayed with
its accounting and its rules (docs/fidelity.md, "Beyond Figure 9"): every monitored JCT equal to the second."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.profiles import builtin_type_profile
from synergy_opt.sim import simulate
from synergy_opt.sim.artifact_trace import artifact_trace
from synergy_opt.sim.type_profiles import trace_type_profiles

RUNS = Path(__file__).parent / "data" / "artifact_runs"
# NAME: (policy, mechanism, monitored positions, the hours its runner.time_limit stopped it at (None: it ran to
# the end), average JCT in hours the artifact reports, over the jobs finished).
SETTINGS = {
    "a_fifo_fair_s7_l7": ("fifo", "proportional", (1000, 1200), None, 15.0287),
    "a_fifo_tune_s7_l7": ("fifo", "tune-artifact", (1000, 1200), None, 13.2571),
    "b_fifo_fair_multi": ("fifo", "proportional", (150, 250), None, 20.1243),
    "c_las_fair_multi": ("las-artifact", "proportional", (150, 250), None, 22.9976),
    "c_srtf_fair_multi": ("srtf", "proportional", (150, 250), None, 20.7584),
    "c_las_tune_single": ("las-artifact", "tune-artifact", (300, 400), None, 13.0436),
    "c_srtf_tune_single": ("srtf", "tune-artifact", (300, 400), None, 13.0436),
    "e_las_greedy_single_l20": ("las-artifact", "greedy", (300, 400), 120.0, 4.4766),
    "e_fifo_tune_split50_l20": ("fifo", "tune-artifact", (300, 400), 120.0, 14.7609),
    "d_ftf_fair_single_l20": ("ftf-artifact", "proportional", (300, 400), 120.0, 17.9433),
    "b_fifo_tune_multi": ("fifo", "tune-artifact", (150, 250), None, 18.8151),
    "c_las_tune_multi": ("las-artifact", "tune-artifact", (150, 250), None, 19.9609),
    "c_srtf_tune_single_l20": ("srtf-artifact", "tune-artifact", (300, 400), 120.0, 8.4139),
    "c_srtf_tune_multi": ("srtf-artifact", "tune-artifact", (150, 250), None, 19.2401),
    "d_ftf_tune_single_l20": ("ftf-artifact", "tune-artifact", (300, 400), 120.0, 15.1859),
    "e_fifo_greedy_multi": ("fifo-artifact", "greedy", (150, 250), None, 18.8176),
    "e_fifo_greedy_single_l20": ("fifo-artifact", "greedy", (300, 400), 120.0, 12.4486),
    "e_fifo_greedy_split50_l20": ("fifo-artifact", "greedy", (300, 400), 120.0, 27.9348),
    # Its DRF and TETRIS: job orders, placed by the mechanism the suffix names (plain: Synergy-Greedy).
    "f_drf_multi": ("drf-artifact", "greedy", (150, 250), None, 19.3384),
    "f_drf_fair_multi": ("drf-artifact", "proportional", (150, 250), None, 21.0984),
    "f_drf_tune_multi": ("drf-artifact", "tune-artifact", (150, 250), None, 18.9834),
    "f_tetris_multi": ("tetris-artifact", "greedy", (150, 250), None, 19.5709),
    "f_tetris_fair_multi": ("tetris-artifact", "proportional", (150, 250), None, 21.0309),
    "f_tetris_tune_multi": ("tetris-artifact", "tune-artifact", (150, 250), None, 19.4768),
    "f_drf_single_l20": ("drf-artifact", "greedy", (300, 400), 120.0, 9.9954),
    "f_drf_fair_single_l20": ("drf-artifact", "proportional", (300, 400), 120.0, 9.8666),
    "f_drf_tune_single_l20": ("drf-artifact", "tune-artifact", (300, 400), 120.0, 9.8590),
    "f_tetris_single_l20": ("tetris-artifact", "greedy", (300, 400), 120.0, 8.3793),
    "f_tetris_fair_single_l20": ("tetris-artifact", "proportional", (300, 400), 120.0, 8.6003),
    "f_tetris_tune_single_l20": ("tetris-artifact", "tune-artifact", (300, 400), 120.0, 8.6114),
    # Its OPT (+opt): the pooled ideal ILP over each job's own matrix (artifact_trace(capped=False)).
    "g_fifo_opt_multi": ("fifo", "ideal", (30, 60), None, 21.4345),
    "g_fifo_opt_single": ("fifo", "ideal", (30, 60), None, 21.4266),
    "g_srtf_opt_multi": ("srtf-artifact", "ideal", (30, 60), None, 21.4345),
    # At CPU:GPU ratios 4-6 (RATIOS): each job at its model file's declared demand and speed-up (artifact_profile).
    # Its OPT at 4-6: its ratio-3 JCTs (its credit counts the share's speed-up twice: artifact_trace(capped=False)).
    "h_fifo_opt_single_r4": ("fifo", "ideal", (30, 60), 40.0, 7.7447),
    "h_fifo_opt_single_r5": ("fifo", "ideal", (30, 60), 40.0, 7.7447),
    "h_fifo_opt_single_r6": ("fifo", "ideal", (30, 60), 40.0, 7.7447),
    "h_fifo_opt_multi_r4": ("fifo", "ideal", (30, 60), None, 21.4345),
    "h_fifo_opt_multi_r5": ("fifo", "ideal", (30, 60), 40.0, 6.7956),
    "h_fifo_tune_l6_r4": ("fifo", "tune-artifact", (300, 400), None, 13.6386),
    "h_fifo_tune_l6_r5": ("fifo", "tune-artifact", (300, 400), None, 14.1370),
    "h_fifo_tune_l6_r6": ("fifo", "tune-artifact", (300, 400), None, 14.2295),
    "h_fifo_fair_l12_r6": ("fifo", "proportional", (300, 400), 120.0, 12.1472),
    "h_fifo_greedy_l12_r6": ("fifo-artifact", "greedy", (300, 400), 120.0, 11.4207),
    "h_srtf_tune_multi_r4": ("srtf-artifact", "tune-artifact", (150, 250), None, 19.8576),
    "h_las_tune_multi_r4": ("las-artifact", "tune-artifact", (150, 250), None, 20.4334),
    "h_drf_tune_multi_r5": ("drf-artifact", "tune-artifact", (150, 250), None, 19.6901),
    "h_tetris_tune_multi_r5": ("tetris-artifact", "tune-artifact", (150, 250), None, 20.1126),
    # The paper's static deployment trace (section 5.2) replayed with --static on its deployment cluster (STATIC).
    "i_static_fifo_tune": ("fifo", "tune-artifact", (0, 100), None, 5.0828),
    "i_static_fifo_fair": ("fifo", "proportional", (0, 100), None, 5.6311),
    # Its dynamic deployment trace (section 5.2, SRTF, split (30, 60, 10)) on the same cluster, first round at 0.
    "i_dynamic_srtf_tune": ("srtf-artifact", "tune-artifact", (0, 100), None, 3.1884),
    "i_dynamic_srtf_fair": ("srtf-artifact", "proportional", (0, 100), None, 3.9067),
}
# The CPU:GPU ratio of a run (3 unless named): servers of 8 x ratio CPUs, the artifact's models-<ratio>.
RATIOS = {name: int(name[-1]) for name in SETTINGS if name.startswith("h_")}
# The deployment traces (the i_ runs) on its configs/deployment.ini (4 servers); --static runs start at 1 s.
DEPLOYMENT = {name for name in SETTINGS if name.startswith("i_")}
STATIC = {name for name in SETTINGS if name.startswith("i_static")}
# The artifact's LAS places its round's jobs by GPU demand, largest first, when it runs TUNE; its Synergy-Greedy
# takes GPUs one at a time wherever they fit.
OPTIONS = {"c_las_tune_multi": {"sort": "gpus"}, "e_fifo_greedy_multi": {"fit": "gpu"},
           "e_fifo_greedy_single_l20": {"fit": "gpu"}, "e_fifo_greedy_split50_l20": {"fit": "gpu"},
           "e_las_greedy_single_l20": {"fit": "gpu"}, "h_fifo_greedy_l12_r6": {"fit": "gpu"},
           "h_las_tune_multi_r4": {"sort": "gpus"},
           **{name: {"fit": "gpu"} for name in ("f_drf_multi", "f_tetris_multi", "f_drf_single_l20",
                                                "f_tetris_single_l20")}}


def _replay(name: str, policy: str, mechanism: str, window: tuple[int, int], stop_h: float | None
            ) -> tuple[dict[str, float], dict[str, float]]:
    ratio = RATIOS.get(name, 3)
    trace = artifact_trace((RUNS / f"{name}_trace.csv").read_text(), cpu_per_gpu=ratio,
                           capped=mechanism not in ("ideal", "opt"))
    with (RUNS / f"{name}_jct.csv").open() as handle:
        theirs = {row["job_id"]: float(row["jct_s"]) for row in csv.DictReader(handle)}
    servers = 4 if name in DEPLOYMENT else 16
    until_s = None if stop_h is None else stop_h * 3600
    result = simulate(trace, so.Cluster(servers, 8, 8 * ratio, 500), policy=policy, mechanism=mechanism,
                      round_s=300.0, monitor=window, accounting="artifact", until_s=until_s,
                      round_start_s=1.0 if name in STATIC else 0.0, **OPTIONS.get(name, {}))
    ours = result.monitored_jobs.set_index("id")["jct_s"].dropna().to_dict()
    if stop_h is not None:  # the jobs both runs finished a while before the stop
        arrival = {job.id: job.arrival_s for job in trace.jobs}
        theirs = {k: v for k, v in theirs.items() if arrival[k] + v <= stop_h * 3600 - 600}
        ours = {k: v for k, v in ours.items() if arrival[k] + v <= stop_h * 3600 - 600}
    return theirs, ours


def _check(name: str, setting: tuple[str, str, tuple[int, int], float | None, float]) -> None:
    policy, mechanism, window, stop_h, average_h = setting
    theirs, ours = _replay(name, policy, mechanism, window, stop_h)
    assert len(theirs) >= (27 if stop_h is None or stop_h >= 120 else 24) and ours.keys() == theirs.keys()
    assert {k: ours[k] for k in theirs} == theirs
    if stop_h is None:
        assert sum(theirs.values()) / len(theirs) / 3600 == pytest.approx(average_h, abs=1e-4)


# The runs replayed by the default suite: one or two of every rule (each policy, mechanism, CPU:GPU ratio, OPT and
# the deployment traces), the quicker of each; the other runs (about 300 s of the suite's 1,200 s of test time) in
# the slow group, which .ci/run runs as well.
QUICK = {"b_fifo_fair_multi", "b_fifo_tune_multi", "c_srtf_fair_multi", "h_srtf_tune_multi_r4", "h_las_tune_multi_r4",
         "d_ftf_fair_single_l20", "e_fifo_greedy_multi", "h_drf_tune_multi_r5", "f_tetris_fair_single_l20",
         "g_fifo_opt_single", "g_srtf_opt_multi", "h_fifo_opt_single_r4", "h_fifo_opt_multi_r5", "h_fifo_fair_l12_r6",
         *DEPLOYMENT}


@pytest.mark.parametrize("name", [name if name in QUICK else pytest.param(name, marks=pytest.mark.slow)
                                  for name in sorted(SETTINGS)])
def test_the_artifacts_runs_replay_to_the_second(name: str) -> None:
    _check(name, SETTINGS[name])


def test_the_static_deployment_trace_keeps_the_artifacts_makespans() -> None:
    # Section 5.2's static trace (100 jobs, split (60, 30, 10)) in the artifact's simulator: every job done after
    # 11.0003 h under FIFO+tune and 15.2503 h under FIFO+fair (its sim_time; 1.39x, the paper's physical cluster
    # 1.4x). Its first round is at 1 s, so the makespans end 1 s past a round boundary.
    for mechanism, makespan_s in (("tune-artifact", 1 + 132 * 300), ("proportional", 1 + 183 * 300)):
        trace = artifact_trace((RUNS / "i_static_fifo_tune_trace.csv").read_text())
        result = simulate(trace, so.Cluster(4, 8, 24, 500), "fifo", mechanism, monitor=(0, 100), accounting="artifact",
                          round_start_s=1.0)
        assert result.jobs["finish_s"].max() == makespan_s


def test_a_job_ready_on_a_shifted_boundary_starts_there() -> None:
    # The jump to the next arrival divided (ready - start) / round_s and rounded up: for a start of 292.8936... a
    # job ready exactly on the boundary one round later waited a further round (2% of random starts did).
    rng = np.random.default_rng(5)
    profile = so.builtin_profile("res50")
    for start in [292.89360024914953, *rng.uniform(0, 300, 40)]:
        for k in (1, 2, 7):
            boundary = start + k * 300.0
            trace = so.sim.Trace((so.sim.TraceJob("a", boundary, 1, 600.0, profile, model="res50"),))
            result = simulate(trace, so.Cluster(1), "fifo", "proportional", round_start_s=float(start))
            assert result.jobs.iloc[0]["first_start_s"] == boundary, (start, k)


def test_an_artifact_records_arrivals_are_kept_and_other_traces_are_rounded_up() -> None:
    record = artifact_trace("0,res50,0.5,10,1\n1,res50,7,10,1\n")
    kept = simulate(record, so.Cluster(1), "fifo", "proportional", accounting="artifact", round_start_s=1.0)
    assert kept.jobs["arrival_s"].tolist() == [0.5, 7.0]
    other = so.sim.Trace(record.jobs)  # the same jobs, not read from a record
    rounded = simulate(other, so.Cluster(1), "fifo", "proportional", accounting="artifact", round_start_s=1.0)
    assert rounded.jobs["arrival_s"].tolist() == [1.0, 7.0]


def test_an_artifact_record_takes_its_models_matrices_on_gpu_types() -> None:
    # Its matrices are the artifact's for one type of server; on GPU types each job takes its model's built-in
    # matrix there (before, a MobileNet at ratio 4 ran as fast on a K80 as on a V100).
    record = artifact_trace("0,mobilenet,0,100,1\n1,alexnet,0,100,4\n", cpu_per_gpu=4)
    cluster = so.HeteroCluster.of("k80:1,v100:1", 8, 32, 500)
    for job, matrices in zip(record.jobs, trace_type_profiles(record, cluster), strict=True):
        for name in cluster.names:
            assert matrices[name] == builtin_type_profile(str(job.model), name, 4), (job.model, name)


@pytest.mark.parametrize("start", [-1.0, 300.0, float("nan")])
def test_the_first_round_starts_within_the_first_round(start: float) -> None:
    trace = artifact_trace("0,res50,0,10,1\n")
    with pytest.raises(so.InvalidInputError, match="round_start_s"):
        simulate(trace, so.Cluster(1), "fifo", "proportional", round_start_s=start)


@pytest.mark.parametrize(("model", "gpus", "cpu", "mem", "speedup"), [
    ("alexnet", 4, 6.0, 125.0, 1 + 1.94 * (6 - 3) / (12 - 3)),  # 48 CPUs capped at 24; 500 GB fit
    ("alexnet", 3, 8.0, 125.0, 1 + 1.94 * (8 - 3) / (12 - 3)),  # a capped point between grid values
    ("m5", 4, 6.0, 125.0, 2.5),  # only memory capped (750 GB): the line in CPUs keeps its best speedup
    ("alexnet", 2, 12.0, 125.0, 2.94),  # fits a server: the model's own matrix
    ("alexnet", 16, 3.0, 62.5, 1.0),  # more than a server's GPUs: the share
])
def test_artifact_jobs_take_the_artifacts_capped_demand_and_speedup(model: str, gpus: int, cpu: float, mem: float,
                                                                   speedup: float) -> None:
    # Hand-derived from the artifact's add_synergy_profile: best case 12 CPUs, 125 GB, speedup 2.94 (alexnet) and
    # 6 CPUs, 187.5 GB, 2.5 (m5) a GPU; servers of 8 GPUs, 24 CPUs, 500 GB; share 3 CPUs, 62.5 GB.
    line = f"0,{model},0,100,{gpus}\n"
    job = artifact_trace(line).jobs[0]
    instance = so.RoundInstance(so.Cluster(2, 8, 24, 500), (so.Job("0", gpus, job.profile),))
    allocation = so.run_mechanism(instance, "tune-artifact")
    (part, *_) = allocation.jobs["0"]
    assert (part.cpus / part.gpus, part.mem_gb / part.gpus) == pytest.approx((cpu, mem))
    assert job.profile.throughput(cpu, mem) == pytest.approx(speedup)
    assert job.profile.throughput(3.0, 62.5) == pytest.approx(1.0)


def test_the_artifacts_policies_run_on_one_gpu_type() -> None:
    trace = artifact_trace("0,res18,0,100,1\n")
    cluster = so.HeteroCluster.of("k80:1,v100:1", 8, 24, 500)
    for policy in ("srtf-artifact", "ftf-artifact"):
        with pytest.raises(so.InvalidInputError, match="policy"):
            simulate(trace, cluster, policy=policy, mechanism="tune-artifact")


@pytest.mark.slow  # 40,000 rounds of 300 s (the rule waits 1,000 h twice): 10-18 s
def test_the_artifacts_starvation_rule() -> None:
    # Two 8-GPU jobs on one server (the helper's trace, run in the artifact's simulator: {0: 12000000, 1: 7800600}
    # seconds). Job 1 arrives at 1100 h with no service, so LAS runs it and job 0 waits; 1000 h after its last run
    # job 0 is starved for good and runs first; 1000 h later job 1 is starved too, and among starved jobs LAS's
    # order (less service) runs job 1 to its end, then job 0. Without the rule job 1 ran to its end at once.
    trace = artifact_trace("0,lstm,0,709072000,8\n1,lstm,3960000,381808000,8\n")
    cluster = so.Cluster(1, 8, 24, 500)
    jct = {policy: simulate(trace, cluster, policy=policy, mechanism="proportional", accounting="artifact")
           .jobs.set_index("id")["jct_s"].to_dict() for policy in ("las", "las-artifact")}
    assert jct["las-artifact"] == {"0": 12000000.0, "1": 7800600.0}
    assert jct["las"] == {"0": 12000000.0, "1": 4440000.0}


def test_starved_jobs_come_first_in_key_order() -> None:
    from synergy_opt.sim import JobStates
    from synergy_opt.sim.policies import POLICIES, ranking

    states = JobStates(0.0, np.arange(4), np.zeros(4), np.full(4, 10.0), np.array([4.0, 3.0, 2.0, 1.0]),
                       np.array([5.0, 1.0, 7.0, 3.0]), np.ones(4, dtype=np.int64),
                       np.array([1.0, 1.0, 2.0, 1.0]), np.array([False, True, True, False]))
    # srtf-artifact keys 4, 3, 1, 1 (job 2 at speedup 2); starved 1 and 2 first, in key order: 2, 1; then 3, 0.
    assert ranking(POLICIES["srtf-artifact"], states).tolist() == [2, 1, 3, 0]
    assert ranking(POLICIES["las-artifact"], states).tolist() == [1, 2, 3, 0]


def test_fifo_artifact_gives_a_left_out_jobs_gpus_to_the_jobs_after_it() -> None:
    # One server (8 GPUs, 24 CPUs, 500 GB). A and B take 4 GPUs and 400 GB each at their best case, C and D
    # 4 GPUs and 80 GB. At 300 s greedy places A, cannot place B (100 GB left), and fifo-artifact lets C take
    # the GPUs B left: C runs 300-400 s; at 600 s D does (done at 700 s). Plain fifo's runnable set is A and B
    # by GPU count, so C waits for A (a cached refill once returned C again after it had finished).
    big = so.Profile([3.0], [62.5, 100.0], [[1.0, 2.0]])
    small = so.Profile([3.0], [20.0, 62.5], [[1.0, 1.0]])
    trace = so.Trace((so.TraceJob("A", 0.0, 4, 36000.0, big), so.TraceJob("B", 1.0, 4, 36000.0, big),
                      so.TraceJob("C", 2.0, 4, 100.0, small), so.TraceJob("D", 3.0, 4, 100.0, small)))
    cluster = so.Cluster(1, 8, 24, 500)
    result = simulate(trace, cluster, policy="fifo-artifact", mechanism="greedy", round_s=300.0)
    finish = dict(zip(result.jobs.id, result.jobs.finish_s, strict=True))
    assert (finish["C"], finish["D"], finish["A"]) == (400.0, 700.0, 18000.0)
    assert finish["B"] == 36000.0 and result.summary["stopped"] == "done"
    plain = simulate(trace, cluster, policy="fifo", mechanism="greedy", round_s=300.0)
    assert dict(zip(plain.jobs.id, plain.jobs.finish_s, strict=True))["C"] > 18000.0


@pytest.mark.parametrize("policy", ["srtf-artifact", "las-artifact", "fifo-artifact"])
@pytest.mark.parametrize("mechanism", ["tune-artifact", "greedy"])
def test_the_artifacts_policies_take_a_queue_larger_than_the_cluster(policy: str, mechanism: str) -> None:
    # Three 8-GPU ResNet-18 jobs at once on one 8-GPU server: its best case capped to a server is the share
    # (speedup 1), so they run one after another: 5625 iterations of 0.64 s, 468 whole ones a 300 s round, so
    # 13 rounds each (the artifact's accounting); LAS takes them in turn, so all three end in rounds 37-39.
    trace = artifact_trace("".join(f"{i},res18,0,{round(3600 / 0.64)},8\n" for i in range(3)))
    result = simulate(trace, so.Cluster(1, 8, 24, 500), policy=policy, mechanism=mechanism, round_s=300.0,
                      accounting="artifact")
    expected = [11100.0, 11400.0, 11700.0] if policy == "las-artifact" else [3900.0, 7800.0, 11700.0]
    assert sorted(result.jobs.jct_s.tolist()) == expected


def test_fifo_artifact_with_throughputs_of_unusual_size() -> None:
    # The whole-queue round asks for more GPUs than the cluster has; scaling it (throughputs of 1e-9) kept it.
    def trace_at(unit: float) -> so.Trace:
        profile = so.Profile([3.0, 6.0], [62.5], [[unit], [2 * unit]])
        return so.Trace(tuple(so.TraceJob(f"j{i}", float(i), 4, 3600.0, profile) for i in range(4)))

    runs = [simulate(trace_at(unit), so.Cluster(1, 8, 24, 500), policy="fifo-artifact", mechanism="greedy",
                     round_s=300.0).jobs.finish_s.tolist() for unit in (1.0, 1e-9)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("ratio", "cap_cpu", "speedup"), [
    (4, 8.0, 2.352 - (2.352 - 1) * (12 - 8) / (12 - 4)),  # 32 CPUs a server: 8 a GPU
    (5, 10.0, 1 + (1.92 - 1) * (10 - 5) / (12 - 5)),  # 40 CPUs a server
])
def test_capped_profiles_at_other_cpu_ratios_keep_the_shares_unit(ratio: int, cap_cpu: float, speedup: float
                                                                  ) -> None:
    # The matrices of CPU:GPU ratios 4-6 keep ratio 3's unit (AlexNet at 5 CPUs: 1.53): speedups are over the
    # share's throughput, and nothing below the share may beat it.
    job = artifact_trace("0,alexnet,0,100,4\n", cpu_per_gpu=ratio).jobs[0]
    floor = float(job.profile.throughput(ratio, 62.5))
    assert job.profile.throughput(cap_cpu, 125.0) == pytest.approx(floor * speedup)
    below = job.profile.tput[job.profile.cpu_per_gpu < ratio]
    assert below.max() <= floor


def test_the_artifacts_speedup_reads_the_mechanisms_best_case_tolerance() -> None:
    # One server of 2 GPUs and 12 CPUs (6 a GPU). E (10 s) runs first; A and B (100 s each) wait for the other GPU,
    # taken by the smaller remaining time over the speedup srtf-artifact expects at the job's best case. A reaches
    # 1.5 at 12 CPUs and 1.4 at 9, B 1.45 at 9: at tolerance 0 A's best case is 12 CPUs (100/1.5 before B's
    # 100/1.45), at 0.1 it is 9 CPUs (100/1.4 after B's). The speedup must be read at the mechanism's tolerance.
    a = so.Profile([6.0, 9.0, 12.0], [50.0], [[1.0], [1.4], [1.5]])
    b = so.Profile([6.0, 9.0], [50.0], [[1.0], [1.45]])
    trace = so.Trace((so.TraceJob("E", 0.0, 1, 10.0, a), so.TraceJob("A", 0.0, 1, 100.0, a),
                      so.TraceJob("B", 0.0, 1, 100.0, b)))
    cluster = so.Cluster(1, 2, 12, 100)
    first = {}
    for tolerance in (0.0, 0.1):
        result = simulate(trace, cluster, policy="srtf-artifact", mechanism="tune", round_s=300.0,
                          best_case_tolerance=tolerance)
        finish = dict(zip(result.jobs.id, result.jobs.finish_s, strict=True))
        first[tolerance] = min("AB", key=lambda job: finish[job])
    assert first == {0.0: "A", 0.1: "B"}
    # Read before the mechanism checks it, a bad value is still named as given (threshold: the earlier name).
    for name in ("threshold", "best_case_tolerance"):
        with pytest.raises(so.InvalidInputError, match=f"^{name}=1.5"):
            simulate(trace, cluster, policy="srtf-artifact", mechanism="tune", **{name: 1.5})


def test_the_artifacts_opt_reads_uncapped_matrices_and_keeps_its_speedup_key() -> None:
    # Two of the artifact's +opt rules (its simulator on hand-made traces, a helper's run of 2026-12-05). Its OPT
    # is the pooled ideal ILP (``ideal`` here) over each job's own matrix, not the capped one of its TUNE:
    # FIFO+opt on two servers gives 6,900 and 14,700 s (with the capped matrices 7,500 and 15,900).
    two = artifact_trace("0,alexnet,0,20000,4\n1,lstm,0,20000,4\n2,res50,0,20000,8\n", capped=False)
    result = simulate(two, so.Cluster(2, 8, 24, 500), policy="fifo", mechanism="ideal", accounting="artifact")
    assert dict(zip(result.jobs.id, result.jobs.jct_s, strict=True)) == {"0": 6900.0, "1": 300.0, "2": 14700.0}
    assert two.metadata["capped"] is False and artifact_trace("0,alexnet,0,10,4\n").metadata["capped"] is True
    # And it never sets a job's speedup to 1, so SRTF's key stays the remaining time over the best case's speedup
    # even after a round at the share: eight AlexNets and an LSTM on one server, 6,000 s each and 10,199 s (when
    # the key fell to 1 after a round at the share: 5,700 / 6,600 s and 4,499 s).
    nine = artifact_trace("".join(f"{i},alexnet,0,10000,1\n" for i in range(8)) + "8,lstm,1,363636,1\n",
                          capped=False)
    result = simulate(nine, so.Cluster(1, 8, 24, 500), policy="srtf-artifact", mechanism="ideal",
                      accounting="artifact")
    assert dict(zip(result.jobs.id, result.jobs.jct_s, strict=True)) == {
        **{str(i): 6000.0 for i in range(8)}, "8": 10199.0}
