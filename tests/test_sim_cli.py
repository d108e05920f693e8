"""``python -m synergy_opt.sim``: its CSVs against direct simulate() calls, the same rows on one process, on
local processes and on Dask, trace files, and every named experiment end to end on a tiny override."""

from __future__ import annotations

import contextlib
import csv
import json
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import synergy_opt as so
from synergy_opt.sim import generate_trace, simulate
from synergy_opt.sim.cli import main, parse
from synergy_opt.sim.experiments import EXPERIMENTS_DIR, experiment_names, load_experiment
from synergy_opt.sim.sweep import PER_JOB_COLUMNS, SUMMARY_COLUMNS, WALL_TIME_COLUMNS, varying
from synergy_opt.sim.trace_io import load_trace, save_trace
from tests.test_sim_trace_io import PHILLY_LOG

SMALL = ["--gpus", "16", "--jobs", "24", "--no-progress"]
# Loads 0.5 and 1.5 on 16 GPUs: under and over the cluster's capacity (a job is about 17 GPU-hours).
SWEEP = [*SMALL, "--load", "0.5,1.5", "--seeds", "0,3", "--mechanisms", "proportional,tune"]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _sim(out: Path, *flags: str) -> Path:
    assert main([*flags, "--out", str(out)]) == 0
    return out


def _without_wall_time(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in WALL_TIME_COLUMNS} for row in rows]


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sim(tmp_path_factory.mktemp("serial"), *SWEEP, "--rounds-csv")


def test_rows_match_direct_simulate_calls(serial: Path) -> None:
    summary = _rows(serial / "summary.csv")
    jobs = pd.read_csv(serial / "jobs.csv")
    assert list(summary[0]) == list(SUMMARY_COLUMNS) and list(jobs.columns) == list(PER_JOB_COLUMNS)
    # The sweep: 2 loads x 2 seeds x 2 mechanisms, mechanisms innermost.
    assert [(r["load"], r["seed"], r["mechanism"]) for r in summary] == [
        (load, seed, m) for load in ("0.5", "1.5") for seed in ("0", "3") for m in ("proportional", "tune")]
    cluster = so.Cluster(2, 8, 24, 500)
    for row in summary:
        trace = generate_trace(jobs=24, load=float(row["load"]), seed=int(row["seed"]))
        result = simulate(trace, cluster, mechanism=row["mechanism"], seed=int(row["seed"]))
        for key in ("avg_jct_h", "p95_jct_h", "p99_jct_h", "makespan_h"):
            assert float(row[key]) == result.summary[key], (row, key)
        assert int(row["jobs"]) == result.summary["jobs"] and int(row["rounds"]) == result.summary["rounds"]
        assert row["stopped"] == result.summary["stopped"] == "done"  # why a run ended is in the CSV
        mine = jobs[(jobs["load"] == float(row["load"])) & (jobs["seed"] == int(row["seed"]))
                    & (jobs["mechanism"] == row["mechanism"])]
        assert mine["id"].tolist() == result.jobs["id"].tolist()
        np.testing.assert_array_equal(mine["finish_s"].to_numpy(), result.jobs["finish_s"].to_numpy())
        np.testing.assert_array_equal(mine["monitored"].to_numpy(), result.jobs["monitored"].to_numpy())


def test_ratios_and_seed_means(serial: Path) -> None:
    summary = _rows(serial / "summary.csv")
    by_run = {(r["load"], r["seed"], r["mechanism"]): float(r["avg_jct_h"]) for r in summary}
    for row in summary:
        base = by_run[(row["load"], row["seed"], "proportional")]
        assert float(row["proportional_ratio"]) == pytest.approx(base / float(row["avg_jct_h"]), rel=1e-12)
    table = _rows(serial / "table.csv")
    assert len(table) == 4
    for row in table:
        runs = [by_run[(row["load"], seed, row["mechanism"])] for seed in ("0", "3")]
        assert row["seeds"] == "0,3" and float(row["avg_jct_h"]) == pytest.approx(np.mean(runs), rel=1e-12)
        prop = np.mean([by_run[(row["load"], seed, "proportional")] for seed in ("0", "3")])
        assert float(row["proportional_ratio"]) == pytest.approx(prop / np.mean(runs), rel=1e-12)
    # TUNE never slows a job below proportional; over the cluster's capacity it shortens the queue as well.
    assert all(float(r["proportional_ratio"]) >= 1.0 for r in table)
    rounds = pd.read_csv(serial / "rounds.csv")
    assert len(rounds) == sum(int(r["rounds"]) for r in summary) and not list(serial.glob("*.png"))


def test_local_processes_give_the_serial_rows(serial: Path, tmp_path: Path) -> None:
    _sim(tmp_path, *SWEEP, "--workers", "2")
    for name in ("summary.csv", "jobs.csv"):
        assert _without_wall_time(_rows(tmp_path / name)) == _without_wall_time(_rows(serial / name)), name


def test_dask_gives_the_serial_rows(serial: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    # In-process workers (threads): no process start-up, the same scheduling path as a remote cluster.
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    with cluster:
        _sim(tmp_path, *SWEEP, "--dask", cluster.scheduler_address)
    for name in ("summary.csv", "jobs.csv"):
        assert _without_wall_time(_rows(tmp_path / name)) == _without_wall_time(_rows(serial / name)), name


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_a_trace_file_replays_as_loaded(suffix: str, tmp_path: Path) -> None:
    trace = generate_trace(jobs=30, load=4.0, multi_gpu=True, seed=5)
    path = save_trace(trace, tmp_path / f"trace{suffix}")
    _sim(tmp_path / "out", "--gpus", "16", "--trace", str(path), "--mechanisms", "tune", "--no-progress")
    row = _rows(tmp_path / "out" / "summary.csv")[0]
    result = simulate(load_trace(path), so.Cluster(2, 8, 24, 500), mechanism="tune")
    assert row["trace"] == path.name and row["load"] == "" and row["multi_gpu"] == "True"
    assert float(row["avg_jct_h"]) == result.summary["avg_jct_h"] and int(row["jobs"]) == result.summary["jobs"]


def test_a_trace_file_runs_on_servers_of_its_own_cpu_ratio_unless_told(tmp_path: Path) -> None:
    # A trace generated at 6 CPUs a GPU (its models' profiles that ratio's) ran on 24-CPU servers, the default 3.
    trace = generate_trace(jobs=20, load=4.0, cpu_per_gpu=6, seed=2)
    path = save_trace(trace, tmp_path / "trace.json")
    for ratio, flags in ((6, ()), (3, ("--cpu-per-gpu", "3"))):
        out = _sim(tmp_path / f"out{ratio}{len(flags)}", "--gpus", "16", "--trace", str(path), "--mechanisms",
                   "tune", "--no-progress", *flags)
        row = _rows(out / "summary.csv")[0]
        # The API warns of the ratio-6 trace on ratio-3 servers; the command line, told, does not.
        with pytest.warns(UserWarning, match="cpu_per_gpu=6") if ratio == 3 else contextlib.nullcontext():
            result = simulate(load_trace(path), so.Cluster(2, 8, 8 * ratio, 500), mechanism="tune")
        assert row["cpu_per_gpu"] == str(ratio) and float(row["avg_jct_h"]) == result.summary["avg_jct_h"]


def test_an_artifact_record_reads_the_profiles_of_the_ratio_asked(tmp_path: Path) -> None:
    # With --cpu-per-gpu 6 an artifact record ran its models' 3-CPU profiles on servers of 6 CPUs a GPU.
    path = tmp_path / "record.csv"
    path.write_text("0,alexnet,0,30000,4\n1,res18,60,20000,1\n2,gnmt,120,20000,2\n3,m5,200,40000,1\n")
    for ratio in (3, 6):
        out = _sim(tmp_path / f"out{ratio}", "--gpus", "16", "--trace", str(path), "--mechanisms", "tune",
                   "--cpu-per-gpu", str(ratio), "--no-progress")
        row = _rows(out / "summary.csv")[0]
        result = simulate(load_trace(path, cpu_per_gpu=ratio), so.Cluster(2, 8, 8 * ratio, 500), mechanism="tune")
        assert row["cpu_per_gpu"] == str(ratio) and float(row["avg_jct_h"]) == result.summary["avg_jct_h"]
    # The ratios' models differ (the artifact's models-3 and models-6: a faster share, another iteration time).
    assert load_trace(path, cpu_per_gpu=6).jobs[0].duration_s != load_trace(path).jobs[0].duration_s


def test_a_philly_log_draws_its_models_per_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(PHILLY_LOG))
    _sim(tmp_path / "out", "--gpus", "16", "--trace", str(path), "--seeds", "0,1", "--split", "50,0,50",
         "--mechanisms", "proportional", "--no-progress")
    jobs = pd.read_csv(tmp_path / "out" / "jobs.csv")
    for seed in (0, 1):
        expected = load_trace(path, split=(50, 0, 50), seed=seed, max_gpus=16)
        assert jobs.loc[jobs["seed"] == seed, "model"].tolist() == [job.model for job in expected.jobs]
    captured = capsys.readouterr()
    out = captured.out  # the table: settings that vary as columns, the rest in the title
    assert "avg JCT h" in out and "prop/this" in out and "trace cluster_job_log" in out and "seeds 0,1" in out
    assert not (tmp_path / "out" / "rounds.csv").exists()
    # The jobs the log cannot give are said, not only counted in the trace's metadata.
    assert "--trace cluster_job_log: 4 jobs skipped (never ran: 1; no attempt with times and GPUs: 1;" in captured.err
    # And the jobs too large for the cluster (they were dropped without a word).
    assert "--trace cluster_job_log: on 16 GPUs, 1 more skipped (more than 16 GPUs)" in captured.err


def test_a_gavel_trace_says_which_jobs_it_skips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A job without a throughput on its scale factor was dropped without a word (only trace.metadata["skipped"]
    # counted it); a misspelt job type was skipped so too, and is now an error naming its line.
    line = "\t".join(["{}", "cmd", "-s", "1", "100000", "{}", "{}"])
    path = tmp_path / "skips.trace"
    path.write_text(line.format("ResNet-18 (batch size 32)", 0.0, 1) + "\n" + line.format("A3C", 10.0, 2) + "\n")
    _sim(tmp_path / "out", "--gpus", "8", "--trace", str(path), "--mechanisms", "proportional", "--no-progress")
    assert "--trace skips.trace: 1 jobs skipped (no throughput for A3C on 2 GPUs: 1)" in capsys.readouterr().err
    assert len(pd.read_csv(tmp_path / "out" / "jobs.csv")) == 1
    typo = tmp_path / "typo.trace"
    typo.write_text(line.format("ResNet-18 (batch size 33)", 0.0, 1) + "\n")
    assert main(["--gpus", "8", "--trace", str(typo), "--out", str(tmp_path / "typo"), "--no-progress"]) == 2
    assert "lines[0].job_type='ResNet-18 (batch size 33)': unknown" in capsys.readouterr().err


def test_every_experiment_parses_as_its_file_says() -> None:
    assert set(experiment_names()) >= {"fig7", "fig8", "fig9", "fig11", "fig12", "fig13", "table55"}
    for name in experiment_names():
        config = tomllib.loads((EXPERIMENTS_DIR / f"{name}.toml").read_text())
        if "trace" in config:
            continue  # a replayed trace has no generator settings (tests/test_sim_gavel.py checks gavel_*)
        args, _ = parse(["--experiment", name])
        assert load_experiment(name).description == config["description"]
        assert args.seeds == config["seeds"] and args.monitor == tuple(config["monitor"])
        assert args.mechanisms == config["mechanisms"] and args.policy == [config["policy"]]
        assert args.load == [float(v) for v in config["load"]]
        splits = config["split"] if isinstance(config["split"][0], list) else [config["split"]]
        assert args.split == [tuple(float(v) for v in s) for s in splits]
        assert args.multi_gpu == ("yes" if config["multi_gpu"] else "no")
        assert args.cpu_per_gpu == list(np.atleast_1d(config.get("cpu_per_gpu", 3)))
        assert args.jobs is None or args.jobs == config["monitor"][1]


def test_flags_override_the_experiment() -> None:
    args, _ = parse(["--experiment", "fig11", "--load", "3", "--split", "33,33,33", "--mechanisms", "tune"])
    assert args.load == [3.0] and args.split == [(33.0, 33.0, 33.0)] and args.mechanisms == ["tune"]
    assert args.policy == ["fifo"] and args.multi_gpu == "yes" and args.seeds == [42]


@pytest.mark.parametrize("name", ["fig7", "fig8", "fig9", "fig10", "fig11", "fig12", "fig13", "table55"])
def test_every_experiment_runs_end_to_end_on_a_tiny_override(name: str, tmp_path: Path) -> None:
    # 0.2 jobs/h keeps 16 GPUs under capacity for the multi-GPU trace too (38 GPU-hours a job).
    tiny = ["--gpus", "16", "--jobs", "12", "--monitor", "0,6", "--load", "0.2", "--no-progress"]
    _sim(tmp_path, "--experiment", name, *tiny)
    config = tomllib.loads((EXPERIMENTS_DIR / f"{name}.toml").read_text())
    summary = _rows(tmp_path / "summary.csv")
    splits = config["split"] if isinstance(config["split"][0], list) else [config["split"]]
    ratios = np.atleast_1d(config.get("cpu_per_gpu", 3))
    assert len(summary) == len(splits) * len(ratios) * len(config["mechanisms"])
    assert {r["mechanism"] for r in summary} == set(config["mechanisms"])
    assert all(r["policy"] == config["policy"] and r["unfinished"] == "0" and r["monitored"] == "6"
               for r in summary)
    plots = sorted(path.name for path in tmp_path.glob("*.png"))  # experiments plot by default
    uses = [name for name in plots if name.startswith("use_")]  # one per setting, the first seed
    assert plots[:2] == ["jct_cdf.png", "jct_vs_load.png"] and len(uses) == len(splits) * len(ratios), plots


def test_experiment_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--experiment", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in experiment_names()) and "Figure 9" in out


def test_a_setting_left_empty_does_not_vary_when_read_back_as_nan() -> None:
    """A one-type sweep's empty gpu_types column comes back from pandas as NaN in every row; NaN never equals
    itself, so the plots once drew a panel per job labelled 'gpu_types=static'."""
    rows = [{"gpu_types": float("nan"), "load": 1.0}, {"gpu_types": float("nan"), "load": 2.0}]
    assert varying(rows, ["gpu_types", "load"]) == ["load"]
