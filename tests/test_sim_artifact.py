"""The Synergy artifact's Figure 9 run, reproduced job for job; its record format; its progress accounting.

The exact replay (two full Figure 9 runs, about a minute) is in the ``slow`` group: ``pytest -m slow``, which
``.ci/run`` runs after the suite.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from synergy_opt import (
    Cluster,
    HeteroCluster,
    InvalidInputError,
    Job,
    Profile,
    RoundInstance,
    builtin_profile,
    evaluate,
    run_mechanism,
)
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.profiles import model_info, model_names
from synergy_opt.sim import Trace, TraceJob, generate_trace, load_trace, save_trace, simulate
from synergy_opt.sim.artifact_profiles import artifact_profile
from synergy_opt.sim.artifact_trace import (
    FIG9_MONITOR,
    FIG9_TRACE,
    artifact_trace,
    fig9_jcts,
    fig9_trace,
)
from synergy_opt.sim.type_profiles import trace_type_profiles

ROUND_S = 300.0


# -- the exact replay --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("mechanism", "average_h"), [("proportional", 81.09), ("tune-artifact", 21.88)])
def test_the_artifacts_figure_9_run_is_reproduced_job_for_job(mechanism: str, average_h: float) -> None:
    result = simulate(fig9_trace(), Cluster(16, 8, 24, 500), policy="fifo", mechanism=mechanism, round_s=ROUND_S,
                      monitor=FIG9_MONITOR, accounting="artifact")
    ours = result.monitored_jobs.set_index("id")["jct_s"]
    theirs = fig9_jcts(mechanism)
    assert sorted(ours.index) == sorted(theirs)
    off = {job: float(ours[job]) - jct for job, jct in theirs.items() if abs(float(ours[job]) - jct) > 1.0}
    assert not off, f"{len(off)} JCTs differ by more than 1 s, e.g. {list(off.items())[:5]}"
    assert round(result.summary["avg_jct_h"], 2) == average_h
    assert round(float(np.mean(list(theirs.values()))) / 3600, 2) == average_h


# -- the record format -------------------------------------------------------------------------------------
def test_the_record_reads_iterations_times_the_models_iteration_time() -> None:
    trace = artifact_trace("0,alexnet,409,3447,1\n1,gnmt,951,34181,2\n")
    first, second = trace.jobs
    assert (first.id, first.model, first.arrival_s, first.gpus) == ("0", "alexnet", 409.0, 1)
    assert first.iter_time_s == 0.6 and first.duration_s == 3447 * 0.6
    assert second.gpus == 2 and second.iter_time_s == model_info("gnmt").iter_time_s
    assert second.profile == builtin_profile("gnmt")
    assert trace.metadata["source"] == "synergy artifact record"


def test_artifact_accounting_ranks_a_job_by_its_whole_iterations_before_it_runs() -> None:
    # docs/sim.md: remaining_s is the iterations left times the iteration time. Before its first round a job was
    # ranked by its duration instead: 900 s at 7 s an iteration is 129 iterations, 903 s, behind j1's 901 s.
    profile = builtin_profile("gnmt")
    trace = Trace((TraceJob("j0", 0.0, 8, 900.0, profile, model="gnmt", iter_time_s=7.0),
                   TraceJob("j1", 0.0, 8, 901.0, profile, model="gnmt", iter_time_s=1.0)))
    result = simulate(trace, Cluster(1), "srtf", "proportional", accounting="artifact")
    assert dict(zip(result.jobs.id, result.jobs.finish_s, strict=True)) == {"j0": 2400.0, "j1": 1200.0}


def test_the_shipped_trace_is_the_artifacts_run() -> None:
    trace = fig9_trace()
    assert len(trace) == 6925
    # The artifact's first 5000 jobs average 16.36 h at the proportional share (issue 19).
    assert round(sum(job.duration_s for job in trace.jobs[:5000]) / 5000 / 3600, 2) == 16.36
    assert all(job.gpus == 1 for job in trace.jobs)


def test_load_trace_detects_the_record_or_is_told_its_format(tmp_path: Path) -> None:
    assert load_trace(FIG9_TRACE) == fig9_trace()
    other = tmp_path / "record.txt"
    other.write_text("7,res50,12,100,1\n")
    trace = load_trace(other, format="artifact")
    assert trace.jobs[0].id == "7" and trace.jobs[0].iter_time_s == 0.78
    with pytest.raises(InvalidInputError, match="format"):
        load_trace(other, format="yaml")


@pytest.mark.parametrize("suffix", [".json", ".csv"])
@pytest.mark.parametrize("ratio", [3, 6])
def test_a_loaded_record_saves_and_reads_back_with_its_iteration_times(tmp_path: Path, suffix: str, ratio: int) -> None:
    trace = artifact_trace("0,alexnet,409,3447,1\n1,lstm,951,34181,1\n2,res18,9,100,4\n", cpu_per_gpu=ratio)
    path = save_trace(trace, tmp_path / f"trace{suffix}")
    assert load_trace(path) == trace


@pytest.mark.parametrize(("text", "field"), [
    ("0,alexnet,409,3447\n", "rows[0]"),
    ("0,alexnet,409,3447,1\n1,vgg,1,2,1\n", "rows[1].model"),
    ("0,alexnet,-4.5,3447,1\n", "rows[0].arrival_s"),
    ("0,alexnet,409,0,1\n", "rows[0].total_iters"),
    ("0,alexnet,409,10,0\n", "rows[0].gpus"),
    ("0,alexnet,409,10,1\n0,gnmt,500,10,1\n", "rows[1].job_id"),
])
def test_a_malformed_record_names_the_row_and_field(text: str, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        artifact_trace(text)
    assert caught.value.field == field


# -- the accounting, by hand -------------------------------------------------------------------------------
def one_job(model: str, iterations: int, arrival_s: float) -> Trace:
    info = model_info(model)
    return Trace((TraceJob("a", arrival_s, 1, iterations * info.iter_time_s, info.profile, model=model,
                           iter_time_s=info.iter_time_s),))


def test_artifact_progress_counts_whole_iterations_and_finishes_at_the_rounds_end() -> None:
    # 1200 ResNet-50 iterations of 0.78 s at the share: floor(300 / 0.78) = 384 a round, so 4 rounds; the
    # arrival at 10.4 s counts as 11 s, the first round starts at 300 s, the finish is noticed at 1500 s.
    trace = one_job("res50", 1200, 10.4)
    result = simulate(trace, Cluster(1), mechanism="proportional", accounting="artifact")
    job = result.jobs.iloc[0]
    assert math.floor(300 / 0.78) == 384 and 3 * 384 < 1200 <= 4 * 384
    assert job["arrival_s"] == 11.0 and job["first_start_s"] == 300.0
    assert job["finish_s"] == 1500.0 and job["jct_s"] == 1489.0
    exact = simulate(trace, Cluster(1), mechanism="proportional").jobs.iloc[0]
    assert exact["finish_s"] == pytest.approx(300.0 + 1200 * 0.78) and exact["arrival_s"] == 10.4


def test_artifact_progress_seconds_are_the_iterations_not_the_round_held() -> None:
    # 1200 iterations of 0.78 s: 384 a round, so 3 whole rounds and 48 iterations (37.44 s) in the fourth. The
    # job holds its GPU to that round's end (run_s), but progresses only for its iterations: the progress seconds
    # times the speedup sum to the work (1200 x 0.78 s) and the mean speedup is 1 (it was 0.78, the work over the
    # rounds held).
    result = simulate(one_job("res50", 1200, 0.0), Cluster(1), mechanism="proportional", accounting="artifact",
                      record_job_rounds=True)
    job = result.jobs.iloc[0]
    assert job["run_s"] == 1200.0 and job["mean_speedup"] == pytest.approx(1.0, rel=1e-12)
    rows = result.job_rounds
    assert rows.run_s.tolist() == pytest.approx([384 * 0.78] * 3 + [48 * 0.78], rel=1e-12)
    assert float((rows.speedup * rows.run_s).sum()) == pytest.approx(1200 * 0.78, rel=1e-12)


def test_artifact_progress_divides_the_iteration_time_by_the_speedup() -> None:
    # Alone on a server, TUNE gives AlexNet its best case (12 CPUs, 125 GB): 2.94x, so floor(300 / (0.6 / 2.94))
    # iterations a round; 3000 of them take 3 rounds.
    per_round = math.floor(300 / (0.6 / 2.94))
    assert per_round == 1470
    result = simulate(one_job("alexnet", 3000, 0.0), Cluster(1), mechanism="tune-artifact", accounting="artifact")
    assert result.jobs.iloc[0]["jct_s"] == 900.0
    slower = simulate(one_job("alexnet", 3000, 0.0), Cluster(1), mechanism="proportional", accounting="artifact")
    assert slower.jobs.iloc[0]["jct_s"] == 300.0 * math.ceil(3000 / math.floor(300 / 0.6))


# The demand and speed-up each of the artifact's model files declares at CPU:GPU ratios 4-6 (msr-fiddle/synergy,
# simulator/models-<ratio>/<model>_1.py: self.cpus, self.mem, self.speedup), copied here by hand; the language
# models' int(62.5/3) = 20 GB is the grid's 20.83. M5 at 6 (6 CPUs, 187.5 GB at 1.0) is not modelled.
DECLARED = {
    4: {"alexnet": (12, 125, 2.352), "res18": (9, 62.5, 1.85), "res50": (4, 62.5, 1.0), "mobilenet": (6, 62.5, 1.2),
        "shufflenet": (12, 125, 2.312), "m5": (6, 187.5, 2.08), "deepspeech": (3, 62.5, 1.0)},
    5: {"alexnet": (12, 125, 1.92), "res18": (9, 62.5, 1.568), "res50": (4, 62.5, 1.0), "mobilenet": (6, 62.5, 1.04),
        "shufflenet": (12, 125, 1.88), "m5": (6, 187.5, 1.78), "deepspeech": (3, 62.5, 1.0)},
    6: {"alexnet": (24, 125, 2.18), "res18": (9, 62.5, 1.37), "res50": (4, 62.5, 1.0), "mobilenet": (6, 62.5, 1.0),
        "shufflenet": (24, 125, 2.59), "deepspeech": (3, 62.5, 1.0)},
}


@pytest.mark.parametrize("ratio", sorted(DECLARED))
def test_an_artifact_job_runs_at_its_model_files_demand_and_speedup_at_every_ratio(ratio: int) -> None:
    declared = {**DECLARED[ratio], **{name: (1, 20.83, 1.0) for name in ("gnmt", "transformer", "lstm")}}
    assert set(declared) == set(model_names()) - ({"m5"} if ratio == 6 else set())
    for name in declared:
        cpu, mem, speedup = declared[name]
        profile = artifact_profile(name, 1, ratio)
        one = RoundInstance(Cluster(1, 8, 8 * ratio, 500.0), (Job("j", 1, profile),))
        best = tuple(float(v[0]) for v in best_case_demands(one))
        assert best == (cpu, mem), (name, best)
        # Exactly, not within an ulp: the accounting's whole iterations are floor(300 / (iter_time / speedup)).
        assert profile.throughput(cpu, mem) / profile.throughput(ratio, 62.5) == speedup, name


@pytest.mark.parametrize(("model", "ratio", "iterations", "jct_s"), [
    # The artifact's simulator on one job alone (docs/fidelity.md): MobileNet at 4 CPUs a GPU, 1.2x of 0.55 s, is
    # floor(300 / (0.55 / 1.2)) = 654 iterations a round (its matrix's 1.1923x: 650), so 1308 take two rounds.
    ("mobilenet", 4, 1308, 600.0),
    # M5 at 6 CPUs a GPU runs at 1.0 (its matrix: 1.667x): 1000 iterations of 0.3 s a round, 1500 take two.
    ("m5", 6, 1500, 600.0),
    # AlexNet at 6 asks for 24 CPUs at 2.18x of 0.34 s: floor(300 / (0.34 / 2.18)) = 1923 a round.
    ("alexnet", 6, 1924, 600.0),
    ("alexnet", 6, 1923, 300.0),
])
def test_a_job_alone_finishes_when_the_artifact_says_at_other_ratios(model: str, ratio: int, iterations: int,
                                                                     jct_s: float) -> None:
    record = artifact_trace(f"0,{model},0,{iterations},1\n", cpu_per_gpu=ratio)
    result = simulate(record, Cluster(1, 8, 8 * ratio, 500.0), mechanism="tune-artifact", accounting="artifact")
    assert result.jobs.iloc[0]["jct_s"] == jct_s


# The artifact's simulator on one job of 10,000 iterations alone on its cluster, FIFO+tune, at CPU:GPU ratios 4, 5
# and 6 (16 x (8 GPUs, 8 x ratio CPUs, 500 GB); a helper's run of 2026-12-06, tests/data/artifact_runs/README.md):
# the JCT in seconds. Before the model files' speed-ups were read, AlexNet at 6 took 2100 s, M5 at 6 1800 s.
ONE_JOB_JCT_S = {
    "alexnet": (2100, 2100, 1800), "deepspeech": (7800, 7800, 7800), "gnmt": (1200, 1200, 1200),
    "lstm": (300, 300, 300), "m5": (2700, 2400, 3000), "mobilenet": (4800, 4800, 4800), "res18": (3000, 2700, 2700),
    "res50": (6900, 6900, 6900), "shufflenet": (2400, 2400, 1500), "transformer": (6900, 6900, 6900),
}


@pytest.mark.parametrize("model", sorted(ONE_JOB_JCT_S))
def test_one_job_alone_at_ratios_4_to_6_as_the_artifact_ran_it(model: str) -> None:
    for ratio, jct_s in zip((4, 5, 6), ONE_JOB_JCT_S[model], strict=True):
        record = artifact_trace(f"0,{model},0,10000,1\n", cpu_per_gpu=ratio)
        result = simulate(record, Cluster(16, 8, 8 * ratio, 500.0), mechanism="tune-artifact", accounting="artifact")
        assert result.jobs.iloc[0]["jct_s"] == jct_s, ratio


def _artifact_kind_traces(ratio: int) -> tuple[Trace, Trace]:
    """A multi-GPU trace of job kind "artifact" at ``ratio`` and the same seed's of the built-in matrices."""
    arguments = {"jobs": 300, "load": 6.0, "multi_gpu": True, "seed": 4, "cpu_per_gpu": ratio}
    return generate_trace(**arguments, job_kind="artifact"), generate_trace(**arguments)


def _same_matrix(a: Profile, b: Profile) -> bool:
    return all(np.array_equal(x, y) for x, y in zip((a.cpu_per_gpu, a.mem_gb_per_gpu, a.tput),
                                                      (b.cpu_per_gpu, b.mem_gb_per_gpu, b.tput), strict=True))


@pytest.mark.parametrize("ratio", [3, 4, 5, 6])
def test_a_generated_trace_of_artifact_jobs_is_the_builtin_trace_with_the_artifacts_matrices(ratio: int) -> None:
    artifact, builtin = _artifact_kind_traces(ratio)
    assert [(j.id, j.arrival_s, j.gpus, j.duration_s, j.model) for j in artifact.jobs] == [
        (j.id, j.arrival_s, j.gpus, j.duration_s, j.model) for j in builtin.jobs]
    assert all(_same_matrix(j.profile, artifact_profile(str(j.model), j.gpus, ratio)) for j in artifact.jobs)
    # Capped multi-GPU jobs at every ratio, and at 4-6 the jobs of models faster at the share than at ratio 3's
    # share (the matrices' unit), differ from the built-in matrices.
    assert any(not _same_matrix(a.profile, b.profile) for a, b in zip(artifact.jobs, builtin.jobs, strict=True))
    if ratio == 6:  # the model file's 24 CPUs at 2.18x, a point the built-in matrix does not have
        alexnet = next(j for j in artifact.jobs if j.model == "alexnet" and j.gpus == 1)
        one = RoundInstance(Cluster(1, 8, 48, 500.0), (Job("j", 1, alexnet.profile),))
        assert tuple(float(v[0]) for v in best_case_demands(one)) == (24.0, 125.0)
        assert alexnet.profile.throughput(24.0, 125.0) / alexnet.profile.throughput(6.0, 62.5) == 2.18


@pytest.mark.parametrize("suffix", ["json", "csv"])
def test_a_trace_of_artifact_jobs_keeps_its_matrices_through_a_file_and_extends_alike(suffix: str,
                                                                                      tmp_path: Path) -> None:
    artifact, _ = _artifact_kind_traces(5)
    path = tmp_path / f"trace.{suffix}"
    save_trace(artifact, path)
    loaded = load_trace(path)
    assert loaded.metadata["job_kind"] == "artifact"
    assert all(_same_matrix(a.profile, b.profile) for a, b in zip(artifact.jobs, loaded.jobs, strict=True))
    longer = generate_trace(jobs=400, load=6.0, multi_gpu=True, seed=4, cpu_per_gpu=5, job_kind="artifact")
    extended = loaded.extend(400)
    assert [j.id for j in extended.jobs] == [j.id for j in longer.jobs]
    assert all(_same_matrix(a.profile, b.profile) for a, b in zip(extended.jobs, longer.jobs, strict=True))


def test_artifact_jobs_refuse_noise_by_name() -> None:
    with pytest.raises(InvalidInputError, match="profile_noise"):
        generate_trace(jobs=5, job_kind="artifact", profile_noise=0.05)
    artifact, _ = _artifact_kind_traces(4)
    with pytest.raises(InvalidInputError) as caught:
        Trace(artifact.jobs, {**artifact.metadata, "profile_noise": 0.05})
    assert caught.value.field.endswith("profile_noise")


def test_artifact_jobs_take_their_models_matrices_on_gpu_types() -> None:
    artifact, builtin = _artifact_kind_traces(4)
    cluster = HeteroCluster.of("k80:2,v100:2", 8, 32, 500)
    for a, b in zip(trace_type_profiles(artifact, cluster), trace_type_profiles(builtin, cluster), strict=True):
        assert all(_same_matrix(a[name], b[name]) for name in cluster.names)
    # A job whose matrix the user replaced keeps it on every type (nothing says how a type changes it).
    own = Profile([4.0, 8.0], [62.5], [[1.0], [1.5]])
    edited = Trace((replace(artifact.jobs[0], profile=own), *artifact.jobs[1:]), artifact.metadata)
    assert all(_same_matrix(matrix, own) for matrix in trace_type_profiles(edited, cluster)[0].values())


def test_generated_traces_take_their_models_iteration_times() -> None:
    trace = generate_trace(jobs=30, load=40.0, seed=3)
    exact = simulate(trace, Cluster(1), mechanism="proportional").jobs.set_index("id")
    artifact = simulate(trace, Cluster(1), mechanism="proportional", accounting="artifact").jobs.set_index("id")
    finished = artifact["finish_s"].notna()
    # Whole iterations and round ends only ever delay a finish, and by less than a round plus one iteration per
    # round run; arrivals are whole seconds.
    assert (artifact.loc[finished, "finish_s"] >= exact.loc[finished, "finish_s"] - 1e-6).all()
    assert (artifact["arrival_s"] == np.ceil(exact["arrival_s"])).all()
    assert (artifact["finish_s"].dropna() % ROUND_S == 0).all()


def test_artifact_progress_needs_an_iteration_time() -> None:
    job = TraceJob("x", 0.0, 1, 600.0, builtin_profile("res18"))
    with pytest.raises(InvalidInputError) as caught:
        simulate(Trace((job,)), Cluster(1), accounting="artifact")
    assert caught.value.field == "trace.jobs[0].iter_time_s"
    with pytest.raises(InvalidInputError, match="accounting"):
        simulate(Trace((job,)), Cluster(1), accounting="rounded")


# -- the artifact's TUNE, by hand --------------------------------------------------------------------------
def round_of(cluster: Cluster, models: list[str]) -> RoundInstance:
    return RoundInstance(cluster, tuple(Job(f"j{k}", 1, builtin_profile(m), model=m) for k, m in enumerate(models)))


def test_tune_artifact_places_in_policy_order_first_fit_at_the_best_case_or_the_share() -> None:
    # Two servers (8 GPUs, 24 CPUs), jobs in arrival order: two AlexNets (12 CPUs each at their best) fill
    # server 0's CPUs; ResNet-18 (9) goes to server 1, first fit; the third AlexNet still fits its best case
    # there (15 CPUs left); the fourth does not (3 left), so it is switched to the share (3 CPUs), and fits.
    instance = round_of(Cluster(2, 8, 24, 500), ["alexnet", "alexnet", "res18", "alexnet", "alexnet"])
    allocation = run_mechanism(instance, "tune-artifact")
    servers = {job: allocation.servers_of(job) for job in allocation.jobs}
    assert servers == {"j0": (0,), "j1": (0,), "j2": (1,), "j3": (1,), "j4": (1,)}
    cpus = {job: sum(p.cpus for p in placed) for job, placed in allocation.jobs.items()}
    assert cpus == {"j0": 12.0, "j1": 12.0, "j2": 9.0, "j3": 12.0, "j4": 3.0}
    scores = evaluate(instance, allocation).jobs
    assert scores["j4"].throughput == pytest.approx(1.0)  # the share: speedup 1, all or nothing
    assert scores["j0"].throughput == pytest.approx(model_info("alexnet").speedup_at_best)
    # The paper's TUNE sorts by demand and fits best: not the same allocation.
    assert run_mechanism(instance, "tune", sort="demand", fit="best") != allocation


def test_tune_artifact_reverts_peers_when_nothing_fits_at_the_share() -> None:
    # One 8-GPU server: two AlexNets at 12 CPUs hold all 24; a language job (1 CPU) fits nowhere, so the
    # server's jobs are reverted most-CPUs-first until one frees enough: the first AlexNet goes to the share.
    instance = round_of(Cluster(1, 8, 24, 500), ["alexnet", "alexnet", "gnmt"])
    allocation = run_mechanism(instance, "tune-artifact")
    cpus = [sum(p.cpus for p in allocation.jobs[f"j{k}"]) for k in range(3)]
    assert cpus == [3.0, 12.0, 1.0]
    result = evaluate(instance, allocation)
    assert result.valid and not result.unplaced and not result.floors_violated
