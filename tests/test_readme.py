"""The README's Python example runs as written (from the repository root, where its paths point)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import synergy_opt as so
from synergy_opt.solvers import base, registry

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As a pip-only machine runs it: no solver binary on PATH nor beside the interpreter."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(base, "find_binary", lambda name: None)
    monkeypatch.setattr(registry, "find_binary", lambda name: None)
    assert not {"pyomo-glpk", "pyomo-cbc"} & set(so.available_solvers())
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has a Python example"
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})  # running it is the point
    printed = capsys.readouterr().out
    assert "Status.OPTIMAL 5.3" in printed
