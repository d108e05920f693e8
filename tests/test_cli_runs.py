"""Long runs of both command lines: each finished run kept as it finishes, Ctrl-C and a killed worker keep what
finished, ``--resume`` ends with the files of an uninterrupted run; ``plot`` and ``compare`` on folders the tests
write; tables that fit 100 columns with every number whole; help that states each default once."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

import synergy_opt as so
from synergy_opt.bench import main as bench_main
from synergy_opt.bench.compare import compare_table as bench_compare_table
from synergy_opt.bench.table import headers as bench_headers
from synergy_opt.bench.table import render_table as bench_render
from synergy_opt.bench.table import title as bench_title
from synergy_opt.cli.journal import write_command
from synergy_opt.cli.table import fitted_columns, read_csv, render_table
from synergy_opt.hetero import HeteroCluster
from synergy_opt.sim.cli import main as sim_main
from synergy_opt.sim.compare import compare_table
from synergy_opt.sim.experiments import experiment_names
from synergy_opt.sim.outputs import CAPTION as SIM_CAPTION
from synergy_opt.sim.outputs import _rounds_text, caption_of, table_layout
from synergy_opt.sim.sweep import WALL_TIME_COLUMNS

# 12 simulations of about a second each: 3 loads x 2 seeds x 2 mechanisms on 16 GPUs.
SWEEP = ["--gpus", "16", "--jobs", "24", "--load", "0.5,1,1.5", "--seeds", "0,3", "--mechanisms", "proportional,tune",
         "--no-progress"]
BENCH = ["--gpus", "8,16", "--seeds", "2", "--solvers", "highs", "--no-progress"]
TIMING = {"build_ms", "solve_ms", "round_ms"}


def _rows(path: Path, drop: set[str] | frozenset[str] = frozenset()) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(handle)]


def _journal(folder: Path, name: str) -> list[dict[str, Any]]:
    path = folder / f"{name}.jsonl"
    if not path.exists():
        return []
    lines = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):  # a line cut short
            lines.append(json.loads(line))
    return lines


def _same_sim_files(first: Path, second: Path) -> None:
    for name in ("summary.csv", "table.csv", "jobs.csv"):
        assert _rows(first / name, set(WALL_TIME_COLUMNS)) == _rows(second / name, set(WALL_TIME_COLUMNS)), name


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whole") / "sim"
    assert sim_main([*SWEEP, "--out", str(out)]) == 0
    return out


def _interactive() -> None:
    """Ctrl-C as at a terminal: a test runner's worker may ignore SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tool: str, argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", f"synergy_opt.{tool}", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=_interactive)


def _wait_for_records(folder: Path, name: str, process: subprocess.Popen[str], count: int = 1) -> None:
    deadline = time.monotonic() + 120
    while len(_journal(folder, name)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no run finished in 120 s"
        time.sleep(0.05)


def test_an_interrupted_sweep_keeps_what_finished_and_resumes_to_the_same_files(
    uninterrupted: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sim"
    process = _start("sim", [*SWEEP, "--out", str(out)])
    _wait_for_records(out, "runs", process)
    process.send_signal(signal.SIGINT)  # what Ctrl-C sends
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, (stdout, stderr)
    assert len(stderr.strip().splitlines()) == 1 and "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert "--resume" in stderr and str(out) in stderr
    kept = _journal(out, "runs")
    assert 1 <= len(kept) < 12, len(kept)  # the finished runs are on disk, not all of them
    assert all(record["record"]["summary"]["unfinished"] == 0 for record in kept)
    assert json.loads((out / "command.json").read_text())["argv"][:2] == ["--gpus", "16"]
    assert sim_main(["--resume", str(out)]) == 0
    assert len(_journal(out, "runs")) == 12  # only the missing runs ran
    _same_sim_files(out, uninterrupted)


def test_a_killed_worker_is_one_line_exit_1_and_the_finished_runs_are_kept(uninterrupted: Path, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    process = _start("sim", [*SWEEP, "--workers", "2", "--out", str(out)])
    _wait_for_records(out, "runs", process)
    workers = _pool_workers(process.pid)
    assert workers, "no worker processes found"
    os.kill(workers[0], signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, (stdout, stderr)
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert "failed: WorkerDiedError" in stderr and "kept in" in stderr, stderr
    assert len(_journal(out, "runs")) >= 1
    assert sim_main(["--resume", str(out)]) == 0  # what finished is kept; the rest runs now
    _same_sim_files(out, uninterrupted)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(child) for child in text.split()]
    return found


def _pool_workers(pid: int) -> list[int]:
    """The pool's worker processes: the fork server's children (the fork server is a child of the CLI)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in _children(pid):
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"forkserver" in command and _children(child):
                return _children(child)
        time.sleep(0.05)
    return []


def test_a_bench_run_resumes_to_the_rows_of_an_uninterrupted_one(tmp_path: Path) -> None:
    whole, partial = tmp_path / "whole", tmp_path / "partial"
    assert bench_main([*BENCH, "--mechanisms", "proportional,tune,ideal", "--out", str(whole)]) == 0
    assert bench_main([*BENCH, "--mechanisms", "proportional,tune,ideal", "--out", str(partial)]) == 0
    lines = (partial / "cells.jsonl").read_text().splitlines()
    # Keep the first half and a line cut short mid-write, as a kill would leave them.
    (partial / "cells.jsonl").write_text("\n".join(lines[: len(lines) // 2]) + "\n" + lines[-1][:40])
    (partial / "rows.csv").unlink()
    assert bench_main(["--resume", str(partial), "--workers", "2"]) == 0
    for name in ("rows.csv", "medians.csv"):
        assert _rows(partial / name, TIMING) == _rows(whole / name, TIMING), name


def test_resume_takes_only_the_flags_that_do_not_change_the_results(uninterrupted: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["--resume", str(uninterrupted), "--load", "3"]) == 2
    assert "--load cannot change it" in capsys.readouterr().err
    assert sim_main([*SWEEP, "--out", str(uninterrupted)]) == 2  # a new sweep does not overwrite kept runs
    assert "--resume" in capsys.readouterr().err
    assert bench_main(["--resume", str(uninterrupted)]) == 2  # a simulator folder is not a bench one
    assert "holds a sweep of 'sim'" in capsys.readouterr().err


@pytest.mark.parametrize(("tool", "main"), [("bench", bench_main), ("sim", sim_main)])
def test_a_bad_recorded_command_names_the_folder(tool: str, main: Any, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # An edited command.json with a bad flag was told as if typed: "argument --gpus: gpus=12 ...".
    write_command(tmp_path, tool, ["--gpus", "12"])
    assert main(["--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--resume {tmp_path} (its command.json): argument --gpus" in err and err.count("\n") == 1, err
    # And a check made after parsing (the plan's): two flags that do not go together.
    write_command(tmp_path, tool, ["--types", "k80:1", "--gpus", "16"])
    assert main(["--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--resume {tmp_path} (its command.json): " in err and err.count("\n") == 1, err


def test_a_folder_whose_run_kept_no_record_may_be_used_again(tmp_path: Path) -> None:
    # A bench run whose --dask scheduler did not answer exited 2 leaving command.json and an empty cells.jsonl;
    # the same --out without --dask was then refused as "the cells of an earlier run", with none to keep.
    folder = tmp_path / "out"
    folder.mkdir()
    write_command(folder, "bench", [*BENCH, "--mechanisms", "proportional", "--dask", "tcp://127.0.0.1:1"])
    (folder / "cells.jsonl").write_text("")
    assert bench_main([*BENCH, "--mechanisms", "proportional", "--out", str(folder)]) == 0
    assert (folder / "cells.jsonl").read_text().count("\n") > 0
    assert bench_main([*BENCH, "--mechanisms", "proportional", "--out", str(folder)]) == 2  # now it holds cells


def test_a_new_run_refuses_the_other_tools_folder(uninterrupted: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # A bench run into a simulator's folder overwrote its command.json ("tool": "sim" became "bench"), and the
    # sweep could no longer be resumed; the same the other way round.
    command = (uninterrupted / "command.json").read_text()
    assert bench_main([*BENCH, "--mechanisms", "proportional", "--out", str(uninterrupted)]) == 2
    assert "holds a sweep of 'sim', not of 'bench'" in capsys.readouterr().err
    assert (uninterrupted / "command.json").read_text() == command
    bench_folder = tmp_path / "bench"
    assert bench_main([*BENCH, "--mechanisms", "proportional", "--out", str(bench_folder)]) == 0
    capsys.readouterr()
    assert sim_main([*SWEEP, "--out", str(bench_folder)]) == 2
    assert "holds a sweep of 'bench', not of 'sim'" in capsys.readouterr().err
    # --experiment fig9-fidelity (which resumes its own folder) refuses a sweep's, and a sweep refuses its.
    assert sim_main(["--experiment", "fig9-fidelity", "--out", str(uninterrupted)]) == 2
    assert "holds a sweep of 'sim', not of 'fig9-fidelity'" in capsys.readouterr().err
    assert (uninterrupted / "command.json").read_text() == command
    fidelity = tmp_path / "fidelity"
    fidelity.mkdir()
    write_command(fidelity, "fig9-fidelity", ["--experiment", "fig9-fidelity"])
    assert sim_main([*SWEEP, "--out", str(fidelity)]) == 2
    assert "holds a sweep of 'fig9-fidelity', not of 'sim'" in capsys.readouterr().err
    # A command.json that is no record (too deeply nested to parse, say) is a folder a new run may take.
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "command.json").write_text("[" * 200_000)
    assert bench_main([*BENCH, "--mechanisms", "proportional", "--out", str(odd)]) == 0


def test_a_long_single_run_shows_progress_within_the_run(tmp_path: Path) -> None:
    process = _start("sim", ["--gpus", "16", "--jobs", "40", "--load", "1", "--mechanisms", "tune",
                             "--out", str(tmp_path / "one")])
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "t " in stderr and " h]" in stderr and "/32" in stderr  # monitored jobs finished, simulated hours


# --- plot and compare ------------------------------------------------------------------------------------------


def test_sim_plot_redraws_a_folder_and_compare_puts_two_side_by_side(
    uninterrupted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    assert sim_main([*SWEEP, "--round-s", "600", "--out", str(other)]) == 0
    capsys.readouterr()
    assert sim_main(["plot", str(other)]) == 0
    assert {"jct_vs_load.png", "jct_cdf.png"} <= {p.name for p in other.glob("*.png")}
    assert sim_main(["compare", str(uninterrupted), str(other), "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "round_s: 300 (A) against 600 (B)" in printed and "B/A" in printed
    rows = read_csv(tmp_path / "cmp" / "compare.csv")
    table_a, table_b = read_csv(uninterrupted / "table.csv"), read_csv(other / "table.csv")
    assert len(rows) == len(table_a) == 6
    for row, a in zip(rows, table_a, strict=True):
        (b,) = [r for r in table_b if (r["load"], r["mechanism"]) == (a["load"], a["mechanism"])]
        assert (row["load"], row["mechanism"]) == (a["load"], a["mechanism"])
        assert row["a.avg_jct_h"] == a["avg_jct_h"] and row["b.p99_jct_h"] == b["p99_jct_h"]
        assert row["ratio.makespan_h"] == pytest.approx(b["makespan_h"] / a["makespan_h"])
    assert (tmp_path / "cmp" / "jct_vs_load.png").stat().st_size > 1000


def test_bench_plot_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for out, seeds in ((first, "1"), (second, "2")):
        assert bench_main(["--gpus", "8", "--seeds", seeds, "--solvers", "highs", "--mechanisms", "tune,ideal",
                           "--no-progress", "--out", str(out)]) == 0
    assert bench_main(["plot", str(first)]) == 0
    assert (first / "gap.png").stat().st_size > 1000 and (first / "time.png").stat().st_size > 1000
    capsys.readouterr()
    assert bench_main(["compare", str(first), str(second), "--out", str(tmp_path / "cmp")]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "B/A" in printed and "different rounds: A split 20/70/10, seeds 0; B split 20/70/10, seeds 0,1" in printed
    rows = read_csv(tmp_path / "cmp" / "compare.csv")
    medians_a, medians_b = read_csv(first / "medians.csv"), read_csv(second / "medians.csv")
    assert len(rows) == len(medians_a) == 4
    for row, a, b in zip(rows, medians_a, medians_b, strict=True):
        assert row["a.objective"] == a["objective"] and row["b.objective"] == b["objective"]
        assert row["ratio.objective"] == pytest.approx(b["objective"] / a["objective"])
    assert bench_main(["plot", str(tmp_path / "nothing")]) == 2
    # A folder edited by hand: text in a figure's cell, a file not UTF-8, a compare --out that is a file. They
    # raised TypeError / UnicodeDecodeError out of the CLI, or printed the whole table before failing.
    capsys.readouterr()
    medians = (first / "medians.csv").read_text()
    header, row, *rest = medians.splitlines()
    cells = row.split(",")
    cells[header.split(",").index("round_ms")] = "n/a"
    (first / "medians.csv").write_text("\n".join([header, ",".join(cells), *rest]) + "\n")
    assert bench_main(["compare", str(first), str(second), "--no-plot", "--out", str(tmp_path / "c2")]) == 2
    assert "medians.csv.rows[0].round_ms='n/a': must be a number" in capsys.readouterr().err
    (first / "medians.csv").write_text(medians, encoding="utf-16")
    assert bench_main(["plot", str(first)]) == 2 and "UTF-8" in capsys.readouterr().err
    without_mechanism = [",".join(c for k, c in enumerate(line.split(",")) if k != header.split(",").index("mechanism"))
                         for line in medians.splitlines()]
    (first / "medians.csv").write_text("\n".join(without_mechanism) + "\n")  # compared nothing, exit 0
    assert bench_main(["compare", str(first), str(second), "--no-plot", "--out", str(tmp_path / "c3")]) == 2
    assert "medians.csv.columns" in capsys.readouterr().err
    (first / "medians.csv").write_text(header + "\n")  # an empty time.png
    assert bench_main(["plot", str(first)]) == 2 and "without rows" in capsys.readouterr().err
    (first / "medians.csv").write_text(medians)
    (tmp_path / "file").write_text("")
    assert bench_main(["compare", str(first), str(second), "--out", str(tmp_path / "file")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "is a file, not a folder" in captured.err


# --- tables ------------------------------------------------------------------------------------------------------


def _quantum(cell: str) -> float:
    return float(Decimal(1).scaleb(Decimal(cell).as_tuple().exponent)) / 2  # half the last printed digit


def _check_width_100(table: Any, keys: list[str], csv_rows: list[dict[str, Any]]) -> int:
    """Render at 100 columns: no ellipsis, no line over 100, and every number printed whole and equal to the CSV's
    value at its printed precision. Returns the widest line."""
    console = Console(width=100, record=True)
    console.print(table)
    text = console.export_text()
    assert "…" not in text, text
    width = max(len(line.rstrip()) for line in text.splitlines())
    assert width <= 100
    for key, column in zip(keys, table.columns, strict=True):
        for cell, row in zip((str(c) for c in column.cells), csv_rows, strict=True):
            value = row.get(key)
            number = cell.removeprefix(">=")
            if cell == "-":
                assert value in (None, "") or value != value, (key, value)
                continue
            if isinstance(value, (str, bool)) or value is None:
                assert cell == str(value), (key, cell, value)
                continue
            assert number in text, (key, number)
            scale = 100.0 if key.removeprefix("a.").removeprefix("b.").endswith("_util") else 1.0
            assert abs(float(number) - scale * value) <= _quantum(number) * (1 + 1e-9), (key, cell, value)
    return width


def test_every_cli_table_fits_100_columns_with_every_number_whole(uninterrupted: Path, tmp_path: Path) -> None:
    widest = 0
    # The bench's default table on the default grid's kind of run (two traces, every mechanism).
    out = tmp_path / "bench"
    assert bench_main(["--gpus", "8,16", "--seeds", "2", "--solvers", "highs", "--no-progress",
                       "--out", str(out)]) == 0
    medians = read_csv(out / "medians.csv")
    headers = bench_headers(medians)
    widest = max(widest, _check_width_100(bench_render(medians, bench_title(medians), wide=False),
                                          [k for k, _ in headers], medians))
    # The simulator's table, with three swept settings.
    table = read_csv(uninterrupted / "table.csv")
    title, sim_headers = table_layout(table)
    widest = max(widest, _check_width_100(render_table(table, sim_headers, title, caption=SIM_CAPTION),
                                          [k for k, _ in sim_headers], table))
    # The simulator's table with five swept settings: they fold into one wrapping setting column.
    swept = tmp_path / "swept"
    assert sim_main(["--gpus", "16,32", "--policy", "fifo,srtf", "--cpu-per-gpu", "3,4", "--multi-gpu", "both",
                     "--load", "1,2", "--jobs", "3", "--mechanisms", "proportional", "--no-progress",
                     "--out", str(swept)]) == 0
    table = read_csv(swept / "table.csv")
    title, sim_headers = table_layout(table)
    rows, fitted = fitted_columns(table, sim_headers, block=[k for k, _ in sim_headers if k != "mechanism"])
    assert fitted[0] == ("setting", "setting") and len(fitted) < len(sim_headers)
    for row in rows:
        assert f"policy={row['policy']}" in row["setting"] and f"load={row['load']:g}" in row["setting"]
    widest = max(widest, _check_width_100(render_table(rows, fitted, title, caption=SIM_CAPTION),
                                          [k for k, _ in fitted], rows))
    # Both compare tables.
    for rows, cmp_headers, cmp_title, caption in (compare_table(table, table, ("a", "b")),
                                                 bench_compare_table(medians, medians, ("a", "b"))):
        widest = max(widest, _check_width_100(render_table(rows, cmp_headers, cmp_title, caption=caption),
                                              [k for k, _ in cmp_headers], rows))
    print(f"widest table at default settings: {widest} columns")


def test_the_printed_table_is_at_most_100_columns(uninterrupted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert sim_main(["--resume", str(uninterrupted)]) == 0  # every run there: prints the table again
    lines = capsys.readouterr().out.splitlines()[1:]  # the table, then the paths written
    table = [line for line in lines if not line.startswith(("wrote ", "wall time "))]
    assert max(len(line) for line in table) <= 100 and not any("…" in line for line in table)
    assert any("mean over the seeds" in line for line in lines)  # a row's figures are explained


# --- help and listings -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("main", [bench_main, sim_main])
def test_help_states_each_default_once(main: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    options = re.split(r"\n  (?=-)", capsys.readouterr().out)  # one chunk per option and its help
    assert len(options) > 15
    for option in options:
        assert option.count("default") <= 1 and "(default: None)" not in option, option


def test_experiments_are_listed_in_natural_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert experiment_names()[:7] == ["fig7", "fig8", "fig9", "fig10", "fig11", "fig12", "fig13"]
    assert sim_main(["--experiment", "list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [*experiment_names(), "fig9-fidelity"]  # the fidelity experiment has no TOML; listed last


def test_a_script_without_a_main_guard_is_told_why_its_workers_died(tmp_path: Path) -> None:
    # Worker processes import the main script; one that calls run_grid at import starts its own pool there and
    # every worker dies. The error said "killed, or out of memory" only.
    script = tmp_path / "sweep.py"
    script.write_text(
        "from synergy_opt.bench import build_grid, generated_specs, run_grid\n"
        "from synergy_opt.bench.cells import RunOptions\n"
        "cells, _ = build_grid(generated_specs([16], seeds=range(2)), ['proportional'], ['highs'])\n"
        "print(len(run_grid(cells, RunOptions(time_limit=10), workers=2)))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode != 0
    assert "WorkerDiedError" in run.stderr and 'if __name__ == "__main__":' in run.stderr, run.stderr[-2000:]
    guarded = script.read_text().replace("cells, _ =", "if __name__ == '__main__':\n    cells, _ =").replace(
        "print(len(", "    print(len(")
    script.write_text(guarded)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "4", run.stderr[-2000:]  # 2 seeds x 2 traces


SENDING = """
import os, signal, sys, threading, time
from pathlib import Path
from synergy_opt.cli.parallel import run_in_order

MODE, MARK = sys.argv[1], Path(sys.argv[2])  # MARK: written once item 0's worker is sending its result

def _when_sending(main_thread: int) -> None:
    while True:
        frame = sys._current_frames().get(main_thread)
        while frame is not None and frame.f_code.co_name != "_send":
            frame = frame.f_back
        if frame is not None:
            MARK.write_text("sending")
            if MODE == "dies":  # this worker dies with its message half sent
                time.sleep(0.005)
                os.kill(os.getpid(), signal.SIGKILL)
            return
        time.sleep(0.0002)

def result(item: int) -> bytes:
    if item == 0:
        threading.Thread(target=_when_sending, args=(threading.get_ident(),), daemon=True).start()
        return b"x" * (256 * 1024 * 1024)
    if MODE == "other-dies":  # another worker dies while item 0's result is on its way
        while not MARK.exists():
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGKILL)
    if MODE == "interrupt":
        time.sleep(600)
    return b"done"

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job ignores it
    got = []
    try:
        run_in_order(result, [0, 1], workers=2, on_result=lambda index, value: got.append(index))
    except BaseException as error:
        print(type(error).__name__, error, "finished:", got)
"""


def _sending(tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "sending.py"
    script.write_text(SENDING)
    return subprocess.Popen([sys.executable, str(script), mode, str(tmp_path / "mark")], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize(("mode", "finished"), [("dies", "[1]"), ("other-dies", "[0]")])
def test_a_worker_that_dies_while_a_result_is_sent_is_reported(tmp_path: Path, mode: str, finished: str) -> None:
    # dies: the worker dies halfway through sending its result. Python 3.11's pool then waited forever for the
    # rest of the message, and the run hung. other-dies: another worker dies meanwhile; the result on its way
    # is still handed over (the pool is given time to read it before the workers are ended).
    process = _sending(tmp_path, mode)
    stdout, stderr = process.communicate(timeout=90)
    assert stdout.startswith("WorkerDiedError") and f"finished: {finished}" in stdout, (stdout, stderr[-2000:])
    assert "1 of 2 items unfinished" in stdout


def test_ctrl_c_while_a_result_is_sent_ends_the_run(tmp_path: Path) -> None:
    # Stopping the pool ended the workers, one halfway through sending, and then waited for ever on the pool.
    process = _sending(tmp_path, "interrupt")
    deadline = time.monotonic() + 60
    while not (tmp_path / "mark").exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert stdout.startswith("KeyboardInterrupt"), (stdout, stderr[-2000:])


def test_the_caption_names_ideal_only_when_a_row_ran_it() -> None:
    assert "ideal:" in caption_of([{"mechanism": "tune"}, {"mechanism": "ideal"}])
    assert "ideal" not in caption_of([{"mechanism": "proportional"}, {"mechanism": "tune"}])


def test_a_trace_files_table_title_leaves_out_the_generators_settings() -> None:
    # It said "load -, noise 0, jobs builtin" of a trace file's run (a usability review).
    row = {"trace": "mine.csv", "cluster_gpus": 16, "cpu_per_gpu": 3, "policy": "fifo", "load": None,
           "split": "20,70,10", "multi_gpu": False, "profile_noise": 0.0, "job_kind": "builtin", "trace_jobs": 4,
           "round_s": 300.0, "gpu_types": "", "seeds": "0", "mechanism": "tune"}
    title, _ = table_layout([row])
    assert "trace mine.csv" in title and "trace jobs 4" in title
    assert not any(word in title for word in ("load", "noise", "jobs builtin"))
    generated, _ = table_layout([{**row, "trace": "generated", "load": 2.0}])
    assert all(word in generated for word in ("load 2", "noise 0", "jobs builtin"))


def test_compare_matches_across_a_setting_only_when_each_folder_has_one_value_of_it() -> None:
    # A at 32 and 64 GPUs against B at 128 and 256: GPUs was dropped from the keys (no value in common), and
    # both of A's sizes were paired with B's last (a usability review). Now nothing matches; each row stands alone.
    from synergy_opt.cli.compare import side_by_side

    first = [{"gpus": g, "mechanism": "tune", "objective": float(g)} for g in (32, 64)]
    second = [{"gpus": g, "mechanism": "tune", "objective": float(g)} for g in (128, 256)]
    keys, differences, rows = side_by_side(first, second, ("gpus", "mechanism"), ("objective",))
    assert keys == ["gpus", "mechanism"] and not differences
    assert [(r["gpus"], r["a.objective"], r["b.objective"]) for r in rows] == [
        (32, 32.0, None), (64, 64.0, None), (128, None, 128.0), (256, None, 256.0)]
    # One value on each side (fifo against srtf): matched across it, as before.
    keys, differences, rows = side_by_side([{"policy": "fifo", "objective": 1.0}],
                                           [{"policy": "srtf", "objective": 2.0}], ("policy",), ("objective",))
    assert differences == {"policy": (["fifo"], ["srtf"])} and rows[0]["ratio.objective"] == 2.0
    # Several in A against one in B: each of A's rows meets B's one (a review: this was unmatched for a while).
    keys, differences, rows = side_by_side(
        [{"mechanism": "proportional", "objective": 1.0}, {"mechanism": "tune", "objective": 2.0}],
        [{"mechanism": "ideal", "objective": 4.0}], ("mechanism",), ("objective",))
    assert [row["ratio.objective"] for row in rows] == [4.0, 2.0]


def test_rounds_csv_keeps_a_heterogeneous_runs_per_type_columns(tmp_path: Path) -> None:
    # rounds.csv was written with the one-type columns only: gpu_util_pct.k80 ... were dropped (a usability review).
    out = tmp_path / "hetero"
    assert sim_main(["--types", "k80:1,v100:1", "--jobs", "6", "--load", "0.5", "--mechanisms", "proportional",
                     "--rounds-csv", "--no-progress", "--out", str(out)]) == 0
    written = pd.read_csv(out / "rounds.csv")
    direct = so.simulate(so.generate_trace(6, load=0.5, seed=0), HeteroCluster.of("k80:1,v100:1", 8, 24, 500),
                         mechanism="proportional").rounds
    typed = [column for column in direct.columns if "." in column]
    assert typed and typed == [column for column in written.columns if "." in column]
    assert written[typed].to_numpy() == pytest.approx(direct[typed].to_numpy())
    # Runs of other columns in one folder: every run's columns, blank where a run has none.
    plain = {"rounds": "1,2\n", "rounds_columns": ["a", "b"]}
    more = {"rounds": "3,4,5\n", "rounds_columns": ["a", "x.k80", "b"]}
    columns, texts = _rounds_text([plain, more])
    assert columns[:3] == ["a", "b", "x.k80"] and texts[0].startswith("1,2,") and texts[1].startswith("3,5,4")


def test_a_trace_files_plots_have_no_load_figure_and_no_generator_words(tmp_path: Path) -> None:
    # A Gavel trace's sweep wrote a jct_vs_load.png of empty panels and titled its figures "static trace,
    # noise ..." (a usability review).
    from synergy_opt.sim.plots import setting_title

    trace = tmp_path / "mine.csv"
    trace.write_text("id,arrival_s,gpus,duration_s,model\na,0,1,600,res18\nb,900,1,1200,alexnet\n")
    out = tmp_path / "run"
    assert sim_main(["--trace", str(trace), "--gpus", "8", "--mechanisms", "proportional,tune", "--plot",
                     "--no-progress", "--out", str(out)]) == 0
    assert (out / "jct_cdf.png").is_file() and not (out / "jct_vs_load.png").exists()
    title = setting_title(read_csv(out / "table.csv"), ("mechanism",))
    assert "trace mine.csv" in title and "static" not in title and "jobs/h" not in title


def test_a_reader_that_leaves_is_not_bad_input() -> None:
    # `bench compare A B --wide | head -3` printed "error: [Errno 32] Broken pipe" and exited 2, as bad input does;
    # a broken pipe that is not stdout's stays an error (a review).
    script = textwrap.dedent("""
        import sys
        from synergy_opt.cli.errors import run_cli

        def lines(argv):
            for _ in range(100_000):
                print("x" * 100)
            return 0

        def other_pipe(argv):
            raise BrokenPipeError(32, "Broken pipe")

        sys.exit(run_cli("prog", lines if sys.argv[1] == "lines" else other_pipe, []))
    """)
    reader = subprocess.Popen([sys.executable, "-c", script, "lines"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.readline()
    reader.stdout.close()  # as `head -1` does
    assert reader.wait(timeout=60) == 141 and reader.stderr.read() == b""
    other = subprocess.run([sys.executable, "-c", script, "other"], capture_output=True, text=True, timeout=60)
    assert other.returncode == 2 and "Broken pipe" in other.stderr
