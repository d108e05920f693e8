"""The bench on heterogeneous rounds (issue 20): ``--types``, saved format-2 instances, bad flags."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import synergy_opt as so
from synergy_opt.bench.cli import main
from synergy_opt.bench.grid import generated_specs
from synergy_opt.hetero import HeteroRound

REPO = Path(__file__).resolve().parent.parent


def rows_of(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_types_give_type_free_rounds_and_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "typed"
    assert main(["--types", "k80:1,p100:1,v100:1", "--seeds", "1", "--multi-gpu", "yes", "--solvers", "highs",
                 "--mechanisms", "proportional,tune,near-opt,opt,joint,ideal,ideal-lp", "--no-progress",
                 "--out", str(out)]) == 0
    assert "24 GPUs" in capsys.readouterr().out
    rows = {row["mechanism"]: row for row in rows_of(out / "rows.csv")}
    assert {row["instance"] for row in rows.values()} == {"gen-k80:1,p100:1,v100:1-multi-s0"}
    instance = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, multi_gpu=True, seed=0)
    for name in ("proportional", "tune", "near-opt"):
        assert float(rows[name]["objective"]) == pytest.approx(
            so.evaluate(instance, so.run_mechanism(instance, name)).objective, rel=1e-9)
        assert rows[name]["valid"] == "True"
    assert float(rows["ideal"]["objective"]) == pytest.approx(so.solve_ideal(instance).objective, rel=1e-9)
    ideal = float(rows["ideal"]["objective"])
    assert float(rows["ideal-lp"]["objective"]) >= ideal - 1e-9
    for name in ("proportional", "tune", "near-opt", "opt", "joint"):
        assert float(rows[name]["objective"]) <= ideal + 1e-9, name


def test_specs_with_types_and_saved_format_two_files(tmp_path: Path) -> None:
    (spec,) = generated_specs([128], [2], ["single"], types={"k80": 1, "v100": 2})
    assert spec.gpus == 24 and spec.types == (("k80", 1), ("v100", 2))
    made = spec.make()
    assert isinstance(made, HeteroRound) and made == so.generate_round(types={"k80": 1, "v100": 2}, seed=2)
    folder = tmp_path / "saved"
    folder.mkdir()
    name = "hetero_3x16gpu_single_seed0.json"
    (folder / name).write_text((REPO / "instances" / name).read_text())
    out = tmp_path / "saved-out"
    assert main(["--instances", str(folder), "--mechanisms", "tune,ideal", "--solvers", "highs", "--no-progress",
                 "--out", str(out)]) == 0
    rows = {row["mechanism"]: row for row in rows_of(out / "rows.csv")}
    instance = so.load_instance(folder / name)
    assert float(rows["tune"]["objective"]) == pytest.approx(
        so.evaluate(instance, so.run_mechanism(instance, "tune")).objective, rel=1e-9)
    assert rows["tune"]["trace"] == "single" and rows["tune"]["gpus"] == "48"


@pytest.mark.parametrize("flags", [["--types", "k80=4"], ["--types", "k80:0"], ["--types", "a100:2"],
                                   ["--types", "k80:1", "--gpus", "16"],
                                   ["--instances", "instances", "--types", "k80:1"]])
def test_bad_type_flags_exit_2_with_one_line(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*flags, "--mechanisms", "tune", "--no-progress", "--out", "/tmp/never-written"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and "error:" in captured.err
