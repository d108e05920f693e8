"""The simulator on heterogeneous clusters: one type as before, the greedy policies' type rule by hand, progress
in the reference type's unit, the mechanisms per type, use per type."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.hetero import HeteroCluster, ServerType
from synergy_opt.profiles import builtin_type_profile
from synergy_opt.profiling.gpu_types import builtin_type_matrix
from synergy_opt.sim import load_trace
from synergy_opt.sim.gavel import gavel_jobs, gavel_trace_file
from synergy_opt.sim.type_profiles import trace_type_profiles


def test_one_type_gives_exactly_the_one_type_run() -> None:
    trace = so.generate_trace(30, load=None, seed=3)
    for policy, mechanism in (("fifo", "tune"), ("srtf", "proportional"), ("max_min_fairness", "tune")):
        plain = so.simulate(trace, so.Cluster(1), policy=policy, mechanism=mechanism)
        typed = so.simulate(trace, HeteroCluster.homogeneous(so.Cluster(1)), policy=policy, mechanism=mechanism)
        assert typed.jobs.equals(plain.jobs), (policy, mechanism)
        assert typed.rounds["gpu_util_pct.v100"].tolist() == plain.rounds["gpu_util_pct"].tolist()


def test_rounds_solved_counts_the_mechanisms_calls() -> None:
    # Under max-min fairness the sets of jobs on a type come back; the heterogeneous run keeps each set's round
    # and solved only 3 of the 7 rounds it reported solved.
    cpu_bound = so.Profile(np.array([3.0, 4.5]), np.array([62.5]), np.array([[1.0], [2.0]]))
    flat = so.Profile(np.array([1.0, 3.0, 6.0]), np.array([62.5]), np.array([[1.0], [1.0], [1.0]]))
    trace = so.Trace((so.TraceJob("A", 0.0, 2, 1500.0, cpu_bound), so.TraceJob("B", 0.0, 1, 1500.0, cpu_bound),
                      so.TraceJob("C", 0.0, 1, 1500.0, flat)))
    cluster = so.Cluster(1, 2, 6, 125)
    for where in (cluster, HeteroCluster.homogeneous(cluster)):
        calls = []

        def mechanism(instance: so.RoundInstance, calls: list = calls) -> so.Allocation:
            calls.append(instance)
            return so.run_mechanism(instance, "tune")

        result = so.simulate(trace, where, "max_min_fairness", mechanism)
        assert result.summary["rounds_solved"] == int(result.rounds.solved.sum()) == len(calls), where
        if isinstance(where, HeteroCluster):
            assert len(calls) < result.summary["rounds"]
            plain = so.simulate(trace, cluster, "max_min_fairness", "tune")
            assert result.jobs.equals(plain.jobs)


def _k80_v100() -> HeteroCluster:
    return HeteroCluster((ServerType("k80", 1, 1, 3, 62.5), ServerType("v100", 1, 1, 3, 62.5)))


def test_greedy_policies_give_each_job_its_fastest_free_type() -> None:
    # A and B (res18, 1 GPU, 1 h at the v100's proportional share) at 0 on one K80 and one V100 GPU: FIFO gives
    # A the V100 (its fastest type), B the K80, where it runs at its K80 matrix's value at 3 CPUs and 62.5 GB
    # over its V100 floor. When A is done (1 h), B moves to the free V100 and does the rest at speed 1.
    profile = so.builtin_profile("res18")
    trace = so.Trace((so.TraceJob("A", 0.0, 1, 3600.0, profile, model="res18"),
                      so.TraceJob("B", 0.0, 1, 3600.0, profile, model="res18")))
    speed = builtin_type_profile("res18", "k80").throughput(3, 62.5) / profile.throughput(3, 62.5)
    assert 0 < speed < 1
    result = so.simulate(trace, _k80_v100(), policy="fifo", mechanism="proportional", round_s=300,
                         record_job_rounds=True)
    finish = dict(zip(result.jobs.id, result.jobs.finish_s, strict=True))
    assert finish["A"] == pytest.approx(3600.0)
    assert finish["B"] == pytest.approx(3600.0 + (3600.0 - 3600.0 * speed), rel=1e-9)
    rows = result.job_rounds
    assert set(rows.speedup[rows.id == "B"].round(12)) == {round(speed, 12), 1.0}
    first = result.rounds.iloc[0]
    assert first["gpu_util_pct.k80"] == 100.0 and first["gpu_util_pct.v100"] == 100.0


@pytest.mark.parametrize("policy", ["fifo", "las", "max_min_fairness", "max_min_fairness_agnostic",
                                    "max_min_fairness_water_filling"])
@pytest.mark.parametrize("mechanism", ["proportional", "tune", "ideal-type-free"])
def test_work_is_conserved_and_types_respected(policy: str, mechanism: str) -> None:
    trace = so.generate_trace(16, load=None, multi_gpu=False, seed=2)
    cluster = HeteroCluster.of("k80:1,p100:1,v100:1", 4, 12, 250)
    result = so.simulate(trace, cluster, policy=policy, mechanism=mechanism, round_s=600, record_job_rounds=True)
    assert result.summary["unfinished"] == 0 and result.summary["types"] == "k80:1,p100:1,v100:1"
    rows = result.job_rounds
    work = (rows.speedup * rows.run_s).groupby(rows.id).sum()
    durations = dict(zip(result.jobs.id, result.jobs.duration_s, strict=True))
    for job, done in work.items():
        assert done == pytest.approx(durations[job], rel=1e-9)
    for name in cluster.names:
        assert (result.rounds[f"gpu_util_pct.{name}"] <= 100.0 + 1e-9).all()
    assert np.allclose(result.rounds[[f"gpu_util_pct.{n}" for n in cluster.names]].mean(axis=1),
                       result.rounds.gpu_util_pct)


def test_a_job_larger_than_every_type_is_named() -> None:
    trace = so.Trace((so.TraceJob("big", 0.0, 2, 60.0, so.builtin_profile("res18"), model="res18"),))
    # The limit is the largest type's GPUs, not the cluster's (the message said "the cluster's 1 GPUs").
    with pytest.raises(so.InvalidInputError, match=r"trace\.jobs\[0\]\.gpus=2: job 'big' asks for more than the 1 "
                       "GPUs of the cluster's largest GPU type"):
        so.simulate(trace, _k80_v100())


def test_the_type_free_ideal_lets_jobs_swap_types_by_hand() -> None:
    # B (its own matrix: alike on every type) and A (res18, faster on the V100) at 0 on one V100 and one K80
    # GPU, servers of one GPU (so every config is the proportional share). FIFO's type rule puts B first on the
    # V100 (a tie: the cluster's order) and A on the K80 at speed s < 1. Per type, the ideal can only keep that:
    # B ends at 1 h, A does 3600 s at s, then the rest on the freed V100 at 1: 2 h - s h. The type-free ideal
    # swaps them (A's floor is its K80 share, below its V100 one; B keeps its floor on the K80): both end at 1 h.
    profile = so.builtin_profile("res18")
    trace = so.Trace((so.TraceJob("B", 0.0, 1, 3600.0, profile),
                      so.TraceJob("A", 0.0, 1, 3600.0, profile, model="res18")))
    cluster = HeteroCluster((ServerType("v100", 1, 1, 3, 62.5), ServerType("k80", 1, 1, 3, 62.5)))
    s = builtin_type_profile("res18", "k80").throughput(3, 62.5) / profile.throughput(3, 62.5)
    per_type = so.simulate(trace, cluster, policy="fifo", mechanism="ideal", round_s=300)
    finish = dict(zip(per_type.jobs.id, per_type.jobs.finish_s, strict=True))
    assert finish["B"] == pytest.approx(3600.0) and finish["A"] == pytest.approx(7200.0 - 3600.0 * s, rel=1e-9)
    free = so.simulate(trace, cluster, policy="fifo", mechanism="ideal-type-free", round_s=300,
                       record_job_rounds=True)
    assert free.jobs.finish_s.tolist() == pytest.approx([3600.0, 3600.0])
    assert free.summary["mechanism"] == "ideal-type-free"
    first = free.rounds.iloc[0]
    assert first["gpu_util_pct.v100"] == 100.0 and first["gpu_util_pct.k80"] == 100.0
    assert set(free.job_rounds.speedup.round(12)) == {1.0}


@pytest.mark.parametrize("policy", ["fifo", "max_min_fairness"])
def test_the_type_free_ideal_is_the_ideal_on_one_type(policy: str) -> None:
    # With one type there is no type to choose: the bound is the ideal's, round for round.
    trace = so.generate_trace(16, load=None, multi_gpu=True, seed=2)
    one = HeteroCluster.homogeneous(so.Cluster(2))
    typed = so.simulate(trace, one, policy=policy, mechanism="ideal-type-free", round_s=600)
    plain = so.simulate(trace, one, policy=policy, mechanism="ideal", round_s=600)
    assert typed.jobs.finish_s.to_numpy() == pytest.approx(plain.jobs.finish_s.to_numpy(), rel=1e-9)


def test_the_type_free_ideal_on_a_homogeneous_cluster_is_the_ideal() -> None:
    trace = so.generate_trace(12, load=None, seed=1)
    free = so.simulate(trace, so.Cluster(1), mechanism="ideal-type-free")
    assert free.jobs.equals(so.simulate(trace, so.Cluster(1), mechanism="ideal").jobs)
    assert free.summary["mechanism"] == "ideal-type-free"


def test_a_gavel_trace_counts_work_on_the_clusters_reference_type() -> None:
    # Without v100s the reference type is the k80: the durations must be k80 run times, and each job's matrix on
    # a type is still its built-in (v100) matrix at Gavel's speed over a v100 on that type.
    cluster = HeteroCluster.of("k80:1,p100:1", 8, 24, 500)
    path = gavel_trace_file("msr_seed0_23dbec")
    with pytest.raises(so.InvalidInputError) as error:
        so.simulate(load_trace(path), cluster, policy="fifo", mechanism="proportional")
    assert error.value.field == "trace.metadata.gpu_type" and "gpu_type='k80'" in str(error.value)
    trace = load_trace(path, gpu_type="k80")
    table = gavel_jobs(trace)
    assert np.allclose([job.duration_s for job in trace.jobs], table["duration_s.k80"])
    rates = trace.metadata["gavel"]["steps_per_s"]
    profiles = trace_type_profiles(trace, cluster)
    for job, row, matrices in zip(trace.jobs, table.itertuples(), profiles, strict=True):
        for name in cluster.names:
            speed = rates[name][row.job_type][str(row.scale_factor)] / rates["v100"][row.job_type][
                str(row.scale_factor)]
            assert np.array_equal(matrices[name].tput, builtin_type_matrix(str(job.model), speed))
    result = so.simulate(trace, cluster, policy="fifo", mechanism="proportional")
    assert result.summary["unfinished"] == 0


def test_a_trace_that_extends_must_fit_its_largest_draw() -> None:
    # A dynamic multi-GPU trace draws jobs of up to 16 GPUs while monitored jobs run: on 8 GPUs (or types of 8)
    # such a draw crashed the run hours in ("trace.jobs[35].gpus=16"); it is refused before the run now.
    trace = so.generate_trace(jobs=8, load=3.0, multi_gpu=True, seed=8055)
    assert max(job.gpus for job in trace.jobs) == 8 and trace.largest_drawn_gpus == 16
    for cluster in (so.Cluster(1), HeteroCluster.of("k80:1,v100:1", 8, 24, 500)):
        with pytest.raises(so.InvalidInputError) as error:
            so.simulate(trace, cluster, policy="srtf", mechanism="proportional")
        assert error.value.field == "cluster" and "16 GPUs" in str(error.value)
    assert so.simulate(trace, so.Cluster(2), policy="srtf", mechanism="proportional").summary["unfinished"] == 0
    assert so.generate_trace(jobs=8, load=None, multi_gpu=True, seed=8055).largest_drawn_gpus == 0


def test_fifo_without_backfilling_passes_over_a_job_that_fits_only_types_it_cannot_use(tmp_path) -> None:
    # Gavel's FIFO (perf mode) on k80:1,v100:1: three 8-GPU jobs at once. j0 takes the V100s; j1 (ResNet-50 at
    # batch size 128, no K80 throughput at 8 GPUs) has room only on the K80s, which it cannot use, so it is passed
    # over and j2 runs on the K80s from the start (Gavel's simulator: j2's JCT 4323 s). Only a job no type has room
    # for ends the runnable set.
    lines = [("ResNet-18 (batch size 64)", 200000), ("ResNet-50 (batch size 128)", 20000),
             ("Transformer (batch size 256)", 20000)]
    path = tmp_path / "three.trace"
    path.write_text("".join(f"{kind}\tcmd\t--num_steps\t1\t{steps}\t0.000000\t8\n" for kind, steps in lines))
    flat = {"ResNet-18": "gnmt", "ResNet-50": "gnmt"}
    trace = load_trace(path, job_models=flat)
    result = so.simulate(trace, HeteroCluster.of("k80:1,v100:1", 8, 24, 500), policy="fifo",
                         mechanism="proportional", round_s=360.0, backfill=False)
    start = dict(zip(result.jobs.id, result.jobs.first_start_s, strict=True))
    assert start == {"j0": 0.0, "j1": 1080.0, "j2": 0.0}


def test_the_type_free_bound_offers_a_job_only_the_types_that_hold_it() -> None:
    # A 16-GPU job fits the k80s (16 GPUs) but not the v100 server (8): the type-free round once offered it the
    # v100 too, and HeteroRound refused the round in the first round ("more than type 'v100''s 8 GPUs").
    cluster = HeteroCluster.of("k80:2,v100:1")
    trace = so.Trace((so.TraceJob("big", 0.0, 16, 3600.0, so.builtin_profile("gnmt"), model="gnmt"),
                      so.TraceJob("small", 0.0, 1, 3600.0, so.builtin_profile("res18"), model="res18")))
    finish = {}
    for mechanism in ("ideal", "ideal-type-free"):
        result = so.simulate(trace, cluster, policy="fifo", mechanism=mechanism)
        assert result.summary["stopped"] == "done"
        finish[mechanism] = dict(zip(result.jobs.id, result.jobs.finish_s, strict=True))
    # On its only type the big job gets what the per-type ideal gives it; the small one runs on the v100 alone.
    assert finish["ideal-type-free"]["big"] == pytest.approx(finish["ideal"]["big"], rel=1e-9)


def test_a_job_no_usable_type_can_hold_is_refused_before_the_run(tmp_path) -> None:
    # Gavel's ResNet-50 (batch 128) has no throughput on k80s at 8 GPUs; the v100 server holds 4 GPUs: the job
    # could never run (it once ended the run "stuck"). Refused up front, as a job larger than every type.
    path = tmp_path / "h.trace"
    path.write_text("ResNet-50 (batch size 128)\tcmd\t--num_steps\tTrue\t1000\t0\t8\n"
                    "ResNet-18 (batch size 32)\tcmd\t--num_steps\tTrue\t1000\t10\t1\n")
    cluster = HeteroCluster((ServerType("k80", 1, 8, 24, 500), ServerType("v100", 1, 4, 12, 250)))
    refused = r"trace.jobs\[0\].gpus=8: job '.+' asks for more than any GPU type it can run on"
    with pytest.raises(so.InvalidInputError, match=refused):
        so.simulate(load_trace(path), cluster, policy="fifo", mechanism="tune", monitor=(0, 2))


# ---- a trace job's own matrices per GPU type (its ``profiles``) ----------------------------------------------

def _matrix(value: float) -> dict[str, list[list[float]] | list[float]]:
    return {"cpu_per_gpu": [1.0, 3.0], "mem_gb_per_gpu": [62.5], "tput": [[value / 2], [value]]}


OWN_TYPES = {"format": "synergy-trace/1", "jobs": [
    # Twice as fast on a k80 as on a v100 (at the share); no matrix on a p100, so it cannot use one.
    {"id": "a", "arrival_s": 0, "gpus": 1, "duration_s": 3600, "profiles": {"k80": _matrix(2.0), "v100": _matrix(1.0)}},
]}


def test_a_trace_jobs_own_matrices_per_type_are_used_on_a_heterogeneous_cluster(tmp_path: Path) -> None:
    # A job with its own matrix ran with that one matrix on every type: a researcher's per-type profiles had no
    # way in (a usability review).
    trace = so.load_trace(so.save_trace(so.sim.trace_io.trace_from_dict(OWN_TYPES), tmp_path / "own.json"))
    assert list(trace.jobs[0].profiles) == ["k80", "v100"]
    assert trace.jobs[0].profile.tput.tolist() == [[0.5], [1.0]]  # no profile given: its v100 matrix
    assert so.load_trace(so.save_trace(trace, tmp_path / "own.csv")) == trace
    assert pickle.loads(pickle.dumps(trace)) == trace  # a sweep's worker processes get it pickled
    cluster = HeteroCluster((ServerType("k80", 1, 4, 12, 250), ServerType("p100", 1, 4, 12, 250),
                             ServerType("v100", 1, 4, 12, 250)))
    matrices = trace_type_profiles(trace, cluster)[0]
    assert matrices["p100"].tput.max() == 0  # it cannot use the p100
    # FIFO gives it the type where it runs fastest at the share: the k80, twice the v100's speed.
    result = so.simulate(trace, cluster, mechanism="proportional")
    assert result.jobs["jct_s"].tolist() == [1800.0]
    # On one type its one matrix, the v100's.
    assert so.simulate(trace, so.Cluster(1, 4, 12, 250), mechanism="proportional").jobs["jct_s"].tolist() == [3600.0]


def test_a_trace_jobs_own_matrices_need_the_reference_type() -> None:
    only_k80 = {**OWN_TYPES, "jobs": [{**OWN_TYPES["jobs"][0], "profile": _matrix(1.0),
                                       "profiles": {"k80": _matrix(2.0)}}]}
    trace = so.sim.trace_io.trace_from_dict(only_k80)
    cluster = HeteroCluster((ServerType("k80", 1, 4, 12, 250), ServerType("v100", 1, 4, 12, 250)))
    with pytest.raises(so.InvalidInputError, match=r"trace.jobs\[0\].profiles.*reference type 'v100'"):
        so.simulate(trace, cluster, mechanism="proportional")
    bad = {**OWN_TYPES, "jobs": [{**OWN_TYPES["jobs"][0], "profiles": {"k80": {"cpu_per_gpu": [1.0]}}}]}
    with pytest.raises(so.InvalidInputError, match=r"jobs\[0\].profiles.k80.mem_gb_per_gpu"):
        so.sim.trace_io.trace_from_dict(bad)


def test_the_up_front_rounds_check_reads_a_jobs_fastest_type() -> None:
    # 360000 s at the v100's share is 1200 rounds there, 600 on the k80 (twice as fast): the up-front check read
    # the job's one-type matrix (the v100's) and refused max_rounds=1000 (a review).
    trace = so.sim.trace_io.trace_from_dict({**OWN_TYPES, "jobs": [{**OWN_TYPES["jobs"][0], "duration_s": 360000}]})
    cluster = HeteroCluster((ServerType("k80", 1, 4, 12, 250), ServerType("v100", 1, 4, 12, 250)))
    result = so.simulate(trace, cluster, mechanism="proportional", max_rounds=1000)
    assert result.jobs["jct_s"].tolist() == [180000.0]


def test_own_matrices_take_a_label_of_the_users_and_leave_plain_csvs_as_they_were(tmp_path: Path) -> None:
    # {"model": "mine", "profiles": ...} was refused as an unknown model; a trace without profiles was written
    # with an empty profiles column, which a reader of before them refuses (a review).
    labelled = so.sim.trace_io.trace_from_dict({**OWN_TYPES, "jobs": [{**OWN_TYPES["jobs"][0], "model": "mine"}]})
    assert labelled.jobs[0].model == "mine" and labelled.jobs[0].profile.tput.tolist() == [[0.5], [1.0]]
    with pytest.raises(so.InvalidInputError, match=r"jobs\[0\].profile=None: a job whose profiles hold no 'v100'"):
        so.sim.trace_io.trace_from_dict({**OWN_TYPES, "jobs": [{**OWN_TYPES["jobs"][0],
                                                                "profiles": {"k80": _matrix(2.0)}}]})
    plain = so.save_trace(so.generate_trace(3, load=1.0), tmp_path / "plain.csv")
    assert plain.read_text().splitlines()[1].split(",")[-1] == '"profile"'


def test_a_job_whose_own_reference_matrix_gives_nothing_at_the_share_is_named_by_it() -> None:
    # The error named trace.jobs[0].profile, not the matrix at fault (a review).
    above = {"cpu_per_gpu": [4.0, 8.0], "mem_gb_per_gpu": [62.5], "tput": [[1.0], [2.0]]}
    trace = so.sim.trace_io.trace_from_dict({**OWN_TYPES, "jobs": [{**OWN_TYPES["jobs"][0], "profile": _matrix(1.0),
                                                                    "profiles": {"k80": _matrix(2.0), "v100": above}}]})
    cluster = HeteroCluster((ServerType("k80", 1, 4, 12, 250), ServerType("v100", 1, 4, 12, 250)))
    with pytest.raises(so.InvalidInputError, match=r"trace.jobs\[0\]='a': its profiles\['v100'\] matrix gives"):
        so.simulate(trace, cluster, mechanism="proportional")


def test_the_type_free_ideal_without_a_solution_runs_the_policys_types_at_their_proportional_share() -> None:
    # Real HiGHS solves allowed 1e-9 s end without a solution, every round: the fallback gives each job its
    # policy-chosen type's GPU-proportional share (the types' servers differ in shape), as proportional does.
    trace = so.generate_trace(12, load=None, multi_gpu=True, seed=3)
    cluster = HeteroCluster((ServerType("k80", 1, 8, 16, 256), ServerType("v100", 1, 8, 32, 750)))
    free = so.simulate(trace, cluster, policy="fifo", mechanism="ideal-type-free", round_s=600, time_limit=1e-9)
    plain = so.simulate(trace, cluster, policy="fifo", mechanism="proportional", round_s=600)
    assert free.rounds.fallback.all()
    assert free.jobs.finish_s.tolist() == plain.jobs.finish_s.tolist()
