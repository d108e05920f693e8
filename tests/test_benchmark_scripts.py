"""The benchmark scripts of ``benchmarks/`` run against the package as it is: each shows its ``--help`` (a name
moved out from under one once, and ``python benchmarks/bench_profiling.py --help`` crashed with an ImportError)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py"))


def test_there_are_benchmark_scripts() -> None:
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_benchmark_script_shows_its_help(path: Path) -> None:
    run = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage:" in run.stdout


def test_the_hierarchical_benchmark_reproduces_its_recorded_results(tmp_path: Path) -> None:
    # The script crashed once the policies refused repeated job ids (it passed Gavel's job types, which repeat, as
    # ids) while its recorded CSV stayed: it runs in about a second, so the record is checked whole.
    pandas = pytest.importorskip("pandas")
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    out = tmp_path / "hierarchical.csv"
    run = subprocess.run([sys.executable, str(root / "bench_hierarchical.py"), "--out", str(out), "--no-plot"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    recorded = pandas.read_csv(root / "results" / "hierarchical.csv")
    pandas.testing.assert_frame_equal(pandas.read_csv(out), recorded, rtol=1e-7, atol=1e-12)
