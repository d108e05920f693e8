"""``python -m synergy_opt.bench plot DIR`` and ``python -m synergy_opt.bench compare DIR_A DIR_B``.

``plot`` redraws a result folder's ``gap.png`` and ``time.png`` from its ``medians.csv`` (a run with ``--plot``
draws them this way too). ``compare`` prints two folders' medians side by side, matched on (GPUs, trace,
mechanism, solver): objective, % of the ideal ILP optimum and time per round of each, and the second's over the
first's; it writes ``compare.csv``, ``compare_gap.png`` and ``compare_time.png`` to ``--out``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from synergy_opt.bench.table import GROUP, read_folder
from synergy_opt.cli.compare import compare_title, figure_headers, side_by_side
from synergy_opt.cli.compare import subcommand as run_subcommand
from synergy_opt.cli.table import print_table, write_csv

FIGURES = ("objective", "pct_ideal", "pct_joint", "round_ms")
NARROW = (("objective", "objective"), ("round_ms", "round ms"))
WIDE = (("objective", "objective"), ("pct_ideal", "% ideal"), ("pct_joint", "% joint"), ("round_ms", "round ms"))


def setting_title(rows: Sequence[dict[str, Any]]) -> str:
    """The workload the rows ran on: GPU types, split, noise and seeds (``split 20/70/10, noise 0.05, seeds
    0,1,2``)."""
    def values(key: str) -> str:
        return ",".join(dict.fromkeys(str(row.get(key)) for row in rows if row.get(key) not in (None, "")))

    noise = values("profile_noise") if any(row.get("profile_noise") for row in rows) else ""
    types = " / ".join(dict.fromkeys(str(row["gpu_types"]) for row in rows if row.get("gpu_types")))
    parts = [f"types {types}" if types else "", f"split {values('split')}" if values("split") else "",
             f"noise {noise}" if noise else "", f"seeds {values('seed')}" if values("seed") else "saved instances"]
    return ", ".join(part for part in parts if part)


def plot_folder(folder: Path) -> list[Path]:
    """Draw a result folder's ``gap.png`` and ``time.png`` from its CSVs."""
    from synergy_opt.bench.plots import save_plots  # matplotlib only when drawing

    rows, summary = read_folder(folder)
    return save_plots(summary, folder, setting_title(rows))


def compare_table(
    medians_a: Sequence[dict[str, Any]], medians_b: Sequence[dict[str, Any]], names: tuple[str, str],
    wide: bool = False,
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], str, str]:
    """The side-by-side rows, the headers to print (narrow or ``wide``), the title and the caption."""
    keys, differences, rows = side_by_side(medians_a, medians_b, GROUP, FIGURES)
    headers = [(key, "GPUs" if key == "gpus" else key) for key in keys
               if key not in ("gpus", "trace") or len({str(row.get(key)) for row in rows}) > 1]
    headers += figure_headers(WIDE if wide else NARROW)
    title = compare_title(names, differences)
    caption = ("Each figure is its folder's median over seeds (medians.csv); B/A is B's over A's. Rows are "
               "matched on GPUs, trace, mechanism and solver" + (", across what the title names." if differences
                                                                  else "."))
    return rows, headers, title, caption


def compare_folders(first: Path, second: Path, out: Path, wide: bool = False, plot: bool = True) -> list[Path]:
    """Print two bench folders' medians side by side; write ``compare.csv`` (and the figures) to ``out``."""
    (rows_a, medians_a), (rows_b, medians_b) = read_folder(first), read_folder(second)
    names = (first.name or str(first), second.name or str(second))
    rows, headers, title, caption = compare_table(medians_a, medians_b, names, wide)
    workloads = setting_title(rows_a), setting_title(rows_b)
    if workloads[0] != workloads[1]:  # other seeds, split or noise: the medians are of different rounds
        caption += f" The folders ran on different rounds: A {workloads[0]}; B {workloads[1]}."
    print_table(rows, headers, title=title, caption=caption, wide=wide,
                block=[key for key in ("gpus", "trace") if key in dict(headers)])
    keys = [key for key in rows[0] if "." not in key] if rows else []
    columns = [*keys, *(f"{side}.{figure}" for figure in FIGURES for side in ("a", "b", "ratio"))]
    paths = [write_csv(rows, out / "compare.csv", columns)]
    if plot:
        from synergy_opt.bench.plots import compare_figure  # matplotlib only when drawing
        from synergy_opt.cli.plots import save_figure

        paths.append(save_figure(compare_figure(medians_a, medians_b, "pct_ideal", "% of the ideal ILP optimum",
                                                names), out / "compare_gap.png"))
        paths.append(save_figure(compare_figure(medians_a, medians_b, "round_ms", "time per round (ms, log scale)",
                                                names, log=True), out / "compare_time.png"))
    return paths


def subcommand(prog: str, argv: Sequence[str]) -> int:
    """Run ``plot DIR`` or ``compare DIR_A DIR_B [--out DIR] [--wide] [--no-plot]``; returns the exit code."""
    return run_subcommand(prog, argv, plot_folder, compare_folders, "compare.csv, compare_gap.png and compare_time.png")
