"""The bench harness: its CSV against direct API calls, bad flags, and identical rows on processes and Dask."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import synergy_opt
from synergy_opt import generate_round, load_instance, run_mechanism, solve_ideal
from synergy_opt.bench import add_references, build_grid, generated_specs, main, medians, read_csv, run_grid
from synergy_opt.bench.cells import TIMING_COLUMNS, RunOptions
from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import evaluate
from synergy_opt.instance import RoundInstance
from synergy_opt.sim.cli import main as sim_main
from synergy_opt.solvers import available_solvers

REPO = Path(__file__).resolve().parent.parent
# Two backends keep the runs short: the reference one and, when installed, one of another family.
SOLVERS = ["highs", *[s for s in ("ortools-scip", "pyomo-glpk") if s in available_solvers()][:1]]
SMALL = ["--gpus", "16", "--seeds", "2", "--solvers", ",".join(SOLVERS), "--time-limit", "60", "--no-progress"]
HEURISTICS = ("proportional", "greedy", "tune", "drf", "tetris", "near-opt")


def _bench(out: Path, *flags: str) -> list[dict[str, Any]]:
    assert main([*SMALL, "--out", str(out), *flags]) == 0
    return read_csv(out / "rows.csv")


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _bench(tmp_path_factory.mktemp("serial"))


def _direct(instance: RoundInstance, mechanism: str, solver: str) -> float | None:
    """The objective of one cell, computed straight from the public API."""
    if mechanism in HEURISTICS:
        return evaluate(instance, run_mechanism(instance, mechanism)).objective
    if mechanism in ("ideal", "ideal-lp"):
        return solve_ideal(instance, solver, relax=mechanism == "ideal-lp").objective
    if mechanism == "opt":
        return evaluate(instance, synergy_opt.solve_opt(instance, solver=solver).allocation).objective
    result = synergy_opt.solve_joint(instance, solver=solver, time_limit=60)  # the default: jobs may split
    return evaluate(instance, result.allocation).objective


def _instance(row: dict[str, Any]) -> RoundInstance:
    split = tuple(float(v) for v in row["split"].split("/"))
    return generate_round(row["gpus"], split, multi_gpu=row["trace"] == "multi", seed=row["seed"])


def test_csv_matches_direct_api_calls(serial: list[dict[str, Any]]) -> None:
    cells = {(r["mechanism"], r["solver"]) for r in serial}
    assert {(m, "") for m in HEURISTICS} <= cells
    assert {(m, s) for m in ("ideal", "ideal-lp", "opt", "joint") for s in SOLVERS} <= cells
    assert len(serial) == 2 * 2 * (len(HEURISTICS) + 4 * len(SOLVERS))  # 2 seeds x 2 traces
    for row in serial:
        assert row["status"] in ("ok", "optimal"), row
        direct = _direct(_instance(row), row["mechanism"], row["solver"])
        assert row["objective"] == pytest.approx(direct, rel=1e-9), row
        if row["mechanism"] == "joint":  # the row says which placement rule its reference is
            assert row["settings"] == "consolidate=False", row


def test_references_and_percentages(serial: list[dict[str, Any]]) -> None:
    for row in serial:
        ideal = solve_ideal(_instance(row), "highs").objective
        assert row["ideal_opt"] == pytest.approx(ideal, rel=1e-6)
        if row["objective"] is not None:
            assert row["pct_ideal"] == pytest.approx(100 * row["objective"] / ideal, rel=1e-6)
            # Theorem 4.1 and SPEC 4: nothing beats the ideal ILP, and its LP relaxation bounds it.
            assert row["objective"] <= row["lp_bound"] * (1 + 1e-6)
            if row["mechanism"] not in ("ideal-lp",):
                assert row["pct_ideal"] <= 100 + 1e-6
        if row["mechanism"] in HEURISTICS:
            assert row["valid"] is True
            assert row["build_ms"] is None and row["round_ms"] > 0


def test_table_and_paths_are_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "one"
    assert main(["--gpus", "8", "--seeds", "1", "--mechanisms", "tune,ideal", "--solvers", "highs",
                 "--no-progress", "--out", str(out), "--plot"]) == 0
    text = capsys.readouterr().out
    assert "medians over 1 seed(s)" in text and "% ideal" in text and "round ms" in text
    assert "its own column's median" in text  # what a row's figures are
    assert str(out / "rows.csv") in text
    medians = read_csv(out / "medians.csv")
    assert {(r["mechanism"], r["trace"]) for r in medians} == {(m, t) for m in ("tune", "ideal")
                                                               for t in ("single", "multi")}
    for name in ("gap.png", "time.png"):
        assert (out / name).stat().st_size > 1000


def test_saved_instances_give_the_rows_of_direct_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    for name in ("paper_example.json", "round_16gpu_multi_seed0.json"):
        (folder / name).write_text((REPO / "instances" / name).read_text())
    out = tmp_path / "saved"
    assert main(["--instances", str(folder), "--mechanisms", "tune,proportional,ideal", "--solvers", "highs",
                 "--no-progress", "--out", str(out)]) == 0
    # The table's title called saved rounds "seeds" (a usability review).
    assert "medians over 1 saved instance(s) of each size and trace" in capsys.readouterr().out
    rows = read_csv(out / "rows.csv")
    assert {r["instance"] for r in rows} == {"paper_example", "round_16gpu_multi_seed0"}
    for row in rows:
        instance = load_instance(folder / f"{row['instance']}.json")
        assert row["objective"] == pytest.approx(_direct(instance, row["mechanism"], row["solver"]), rel=1e-9)
    paper = {r["mechanism"]: r for r in rows if r["instance"] == "paper_example"}
    assert paper["proportional"]["objective"] == pytest.approx(4.0)
    assert paper["ideal"]["objective"] >= paper["tune"]["objective"] >= 4.0


def test_a_bad_file_in_the_instances_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "good.json").write_text((REPO / "instances" / "paper_example.json").read_text())
    broken = json.loads((REPO / "instances" / "paper_example.json").read_text())
    broken["jobs"][1]["gpus"] = -1
    (folder / "negative.json").write_text(json.dumps(broken))
    assert main(["--instances", str(folder), "--mechanisms", "proportional", "--no-progress"]) == 2
    err = capsys.readouterr().err
    # It named only the field, not which of the folder's files held it.
    assert "negative.json: jobs[1].gpus=-1" in err and err.count("\n") == 1, err


def test_medians_leave_a_score_empty_when_a_run_has_none() -> None:
    def row(seed: int, status: str, objective: float | None, round_ms: float) -> dict[str, Any]:
        return {"gpus": 8, "trace": "multi", "instance": f"i{seed}", "mechanism": "joint", "solver": "highs",
                "status": status, "valid": objective is not None, "objective": objective, "round_ms": round_ms}

    rows = add_references([row(0, "optimal", 3.0, 10.0), row(1, "no_solution", None, 50.0),
                           row(2, "optimal", 5.0, 20.0)])
    (summary,) = medians(rows)
    assert summary["runs"] == 3 and summary["status"] == "optimal 2, no_solution 1"
    assert summary["objective"] is None and summary["pct_joint"] is None
    assert summary["round_ms"] == 20.0
    (complete,) = medians([r for r in rows if r["objective"] is not None])
    assert complete["objective"] == 4.0 and complete["pct_joint"] == 100.0


@pytest.mark.parametrize(
    "flags",
    [
        ["--solvers", "no-such-solver"],
        ["--mechanisms", "tune,no-such-mechanism"],
        ["--gpus", "12"],
        ["--gpus", "16,100"],
        ["--gpus", "0"],
        ["--seeds", "0"],
        ["--split", "20,80"],
        ["--time-limit", "-3"],
        ["--workers", "0"],
        ["--no-such-flag"],
        ["--instances", "/no/such/dir"],
        ["--instances", "instances", "--gpus", "16"],
        ["--gpus", "8", "--out", "/proc/no/such/place"],
        ["--gpus", "8", "--out", "rows.csv"],  # the old form: --out is a folder now, as the simulator's
    ],
)
def test_bad_flags_exit_2_with_one_line(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(flags) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "error:" in captured.err


@pytest.mark.parametrize("tool", [main, sim_main])
def test_a_negative_value_is_a_value_not_a_flag(tool: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # Python 3.11's argparse took "-10,60,50" for a flag and said "expected one argument".
    assert tool(["--split", "-10,60,50"]) == 2
    err = capsys.readouterr().err
    assert "split[0]=-10" in err and ">= 0" in err and "expected one argument" not in err, err


def _without_timings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in rows]


def test_workers_give_the_serial_rows(serial: list[dict[str, Any]], tmp_path: Path) -> None:
    rows = _bench(tmp_path / "workers", "--workers", "2")
    assert _without_timings(rows) == _without_timings(serial)


def test_dask_gives_the_serial_rows(serial: list[dict[str, Any]], tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    # In-process workers (threads): no process start-up, the same scheduling path as a remote cluster.
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    with cluster:
        rows = _bench(tmp_path / "dask", "--dask", cluster.scheduler_address)
    assert _without_timings(rows) == _without_timings(serial)


def test_a_time_limited_solve_is_reported_not_dropped(tmp_path: Path) -> None:
    out = tmp_path / "limited"
    assert main(["--gpus", "256", "--seeds", "1", "--multi-gpu", "yes", "--mechanisms", "joint", "--solvers",
                 "highs", "--time-limit", "0.05", "--no-progress", "--out", str(out)]) == 0
    (row,) = read_csv(out / "rows.csv")
    assert row["mechanism"] == "joint" and row["status"] in ("optimal", "feasible", "no_solution")
    if row["status"] == "no_solution":
        assert row["objective"] is None or math.isnan(row["objective"])


def test_rows_name_the_noise_and_types_and_compare_notes_a_noise_difference(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # The rows had no noise column, so plot titles and compare never named noise (a usability review).
    common = ["--gpus", "16", "--seeds", "1", "--mechanisms", "proportional", "--multi-gpu", "no", "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--profile-noise", "0.05", "--out", str(tmp_path / "b")]) == 0
    assert {row["profile_noise"] for row in read_csv(tmp_path / "b" / "rows.csv")} == {0.05}
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--no-plot", "--out", str(tmp_path / "c")]) == 0
    assert "noise 0.05" in " ".join(capsys.readouterr().out.split())
    assert main(["--types", "k80:1,v100:1", "--seeds", "1", "--mechanisms", "proportional", "--no-progress",
                 "--out", str(tmp_path / "h")]) == 0
    assert {row["gpu_types"] for row in read_csv(tmp_path / "h" / "rows.csv")} == {"k80:1,v100:1"}


@pytest.mark.parametrize(("call", "field"), [
    (lambda: generated_specs([12], seeds=[0]), r"sizes\[0\]=12"),
    (lambda: generated_specs([16], seeds=[-1]), r"seeds\[0\]=-1"),
    (lambda: generated_specs([16], seeds=5), "seeds=5"),
    (lambda: generated_specs([16], seeds=[0], traces=["both"]), r"traces\[0\]='both'"),
    (lambda: build_grid(generated_specs([16], seeds=[0]), "tune", ["highs"]), "mechanisms='tune'"),
    (lambda: build_grid(generated_specs([16], seeds=[0]), ["x"], ["highs"]), r"mechanisms\[0\]='x'"),
    (lambda: build_grid(generated_specs([16], seeds=[0]), ["ideal"], ["gurobi"]), r"solvers\[0\]='gurobi'"),
    (lambda: RunOptions(time_limit=math.nan), "time_limit=nan"),
    (lambda: RunOptions(time_limit=-1), "time_limit=-1"),
    (lambda: RunOptions(opt_placement="exact"), "opt_placement='exact'"),
    (lambda: run_grid([], workers=0), "workers=0"),
    (lambda: run_grid(["tune"]), r"cells\[0\]='tune'"),
])
def test_the_bench_python_api_checks_its_arguments_up_front(call: Any, field: str) -> None:
    # bench.md's "From Python" entry points took these and failed per cell (an error row each; one cell per
    # letter of a mechanism's name given as a string) or with a raw TypeError.
    with pytest.raises(InvalidInputError, match=field):
        call()


def test_the_bench_python_api_takes_what_it_took() -> None:
    # The up-front checks kept what worked: no solvers for heuristics only, sizes unused with types, and cells
    # as any iterable (a generator was emptied by the check and nothing ran).
    specs = generated_specs([], seeds=[0], traces=["single"], types={"k80": 1, "v100": 1})
    cells, _ = build_grid(specs, ["proportional"], [])
    rows = run_grid(cell for cell in cells)
    assert len(rows) == 1 and rows[0]["status"] == "ok" and rows[0]["gpu_types"]
    with pytest.raises(InvalidInputError, match="types='a100'"):
        generated_specs([], seeds=[0], types={"a100": 1})
