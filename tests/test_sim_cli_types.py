"""``python -m synergy_opt.sim --types``: a heterogeneous cluster from the command line and experiment files.

Each run's figures are those of ``simulate`` on the same trace and ``HeteroCluster`` (so the flag only builds the
cluster), bad type lists are one line naming the flag, and the named experiment reads as its file says."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from synergy_opt.hetero import HeteroCluster
from synergy_opt.sim import generate_trace, load_trace, simulate
from synergy_opt.sim.cli import main, parse
from synergy_opt.sim.experiments import load_experiment
from synergy_opt.sim.gavel import gavel_trace_file
from synergy_opt.sim.sweep import SimSetting

TYPES = "k80:1,v100:1"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_types_runs_equal_simulate_on_the_heterogeneous_cluster(tmp_path: Path) -> None:
    flags = ["--types", TYPES, "--policy", "max_min_fairness,fifo", "--load", "static", "--jobs", "14",
             "--mechanisms", "proportional,tune", "--no-progress", "--out", str(tmp_path)]
    assert main(flags) == 0
    summary = _rows(tmp_path / "summary.csv")
    assert len(summary) == 4
    cluster = HeteroCluster.of(TYPES, 8, 24, 500)
    trace = generate_trace(jobs=14, load=None, seed=0)
    for row in summary:
        assert row["gpu_types"] == TYPES and row["cluster_gpus"] == "16"
        result = simulate(trace, cluster, policy=row["policy"], mechanism=row["mechanism"], seed=0)
        for key in ("avg_jct_h", "p95_jct_h", "makespan_h"):
            assert float(row[key]) == result.summary[key], (row["policy"], row["mechanism"], key)
        assert int(row["rounds"]) == result.summary["rounds"]
    # The two types differ, so the policy's type choice matters: max-min and FIFO do not tie on every figure.
    by = {(r["policy"], r["mechanism"]): float(r["avg_jct_h"]) for r in summary}
    assert by[("max_min_fairness", "proportional")] != by[("fifo", "proportional")]


def test_a_setting_with_types_is_a_heterogeneous_cluster_of_its_ratio() -> None:
    cluster = SimSetting(gpus=24, cpu_per_gpu=4, types="k80:1,p100:1,v100:1").cluster
    assert isinstance(cluster, HeteroCluster) and cluster.names == ("k80", "p100", "v100")
    assert cluster.total_gpus == 24 and all(t.cpus_per_server == 32 for t in cluster.types)
    assert not isinstance(SimSetting(gpus=16).cluster, HeteroCluster)


@pytest.mark.parametrize(("flags", "words"), [
    (["--types", "k80"], "--types='k80'"),
    (["--types", "k80:0"], "--types k80:0"),
    (["--types", "k80:1,k80:1"], "twice"),
    (["--types", TYPES, "--gpus", "64"], "has 16 GPUs"),
    # A type with no built-in matrices, for a generated trace (an independent tester: a job's model was named).
    (["--types", "foo:1"], "--types='foo:1': a generated trace's jobs are built-in models"),
    (["--policy", "max_min"], "policy"),
])
def test_bad_types_are_one_line_naming_the_flag(flags: list[str], words: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*flags, "--load", "static", "--jobs", "4", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err, err


def test_the_heterogeneous_experiment_reads_as_its_file_says() -> None:
    experiment = load_experiment("gavel_hetero")
    args, _ = parse(["--experiment", "gavel_hetero"])
    assert args.types == experiment.settings["types"] == "k80:2,p100:2,v100:2"
    assert args.gpus == [48] and args.policy == ["max_min_fairness"] and args.monitor == (0, 951)
    assert args.mechanisms == ["proportional", "tune"]


def test_a_gavel_trace_is_read_with_run_times_on_the_clusters_reference_type(tmp_path: Path) -> None:
    # k80 and p100 servers: the reference type is the k80, so the trace's durations are k80 run times (a job that
    # cannot run on a k80 is skipped); before, the v100 run times were read and a k80 rate of 0 divided by zero.
    types = "k80:4,p100:4"
    flags = ["--trace", "gavel:msr_seed0_23dbec", "--types", types, "--mechanisms", "proportional",
             "--no-progress", "--out", str(tmp_path)]
    assert main(flags) == 0
    (row,) = _rows(tmp_path / "summary.csv")
    trace = load_trace(gavel_trace_file("msr_seed0_23dbec"), gpu_type="k80")
    result = simulate(trace, HeteroCluster.of(types, 8, 24, 500), policy="fifo", mechanism="proportional")
    assert int(row["jobs"]) == len(trace) == 7
    for key in ("avg_jct_h", "makespan_h"):
        assert float(row[key]) == result.summary[key], key


def test_policy_all_leaves_out_the_artifacts_variants() -> None:
    # They replay the paper's artifact on one GPU type; with --types, 'all' ran them and the sweep stopped.
    from synergy_opt.sim.gavel_policies import GAVEL_POLICIES
    from synergy_opt.sim.policies import ARTIFACT_POLICIES, REFILL_POLICIES

    args, _ = parse(["--types", "k80:1,v100:1", "--policy", "all"])
    assert args.policy == ["fifo", "srtf", "las", "ftf", *GAVEL_POLICIES]
    assert not set(args.policy) & {*ARTIFACT_POLICIES, *REFILL_POLICIES}
    assert parse(["--policy", "fifo-artifact,las-artifact"])[0].policy == ["fifo-artifact", "las-artifact"]
