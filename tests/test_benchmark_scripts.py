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
