"""``python -m synergy_opt.sim plot DIR`` and ``python -m synergy_opt.sim compare DIR_A DIR_B``.

``plot`` redraws a result folder's figures from its CSVs (the same figures a run with ``--plot`` draws: a run
draws them this way too). ``compare`` prints two folders' tables side by side, matched on the settings they
share: average, p95 and p99 JCT and the makespan of each, and the second's over the first's; it writes
``compare.csv`` and ``jct_vs_load.png`` (both sweeps in one figure) to ``--out``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from synergy_opt.cli.compare import compare_title, figure_headers, side_by_side
from synergy_opt.cli.compare import subcommand as run_subcommand
from synergy_opt.cli.table import print_table, write_csv
from synergy_opt.sim.outputs import SETTING_HEADERS, read_folder
from synergy_opt.sim.sweep import SETTING_COLUMNS

FIGURES = ("avg_jct_h", "p95_jct_h", "p99_jct_h", "makespan_h", "proportional_ratio")
# What the compare table prints: narrow (fits 100 columns) and --wide.
NARROW = (("avg_jct_h", "avg JCT h"), ("p99_jct_h", "p99 h"))
WIDE = (("avg_jct_h", "avg JCT h"), ("p95_jct_h", "p95 h"), ("p99_jct_h", "p99 h"), ("makespan_h", "makespan h"),
        ("proportional_ratio", "prop/this"))


def plot_folder(folder: Path) -> list[Path]:
    """Draw a result folder's figures (``jct_vs_load.png``, ``jct_cdf.png``, ``use_*.png``) from its CSVs."""
    from synergy_opt.sim.plots import save_sweep_plots  # matplotlib only when drawing

    _, table, jobs, rounds = read_folder(folder)
    return save_sweep_plots(table, jobs, rounds, folder)


def compare_table(
    table_a: Sequence[dict[str, Any]], table_b: Sequence[dict[str, Any]], names: tuple[str, str], wide: bool = False
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], str, str]:
    """The side-by-side rows, the headers to print (narrow or ``wide``), the title and the caption."""
    candidates = [c for c in SETTING_COLUMNS if c != "seed"] + ["seeds"]
    keys, differences, rows = side_by_side(table_a, table_b, candidates, FIGURES)
    swept = [k for k in keys if len({str(row.get(k)) for row in rows}) > 1 or k == "mechanism"]
    headers = [(key, SETTING_HEADERS.get(key, key.replace("_", " "))) for key in swept]
    headers += figure_headers(WIDE if wide else NARROW)
    title = compare_title(names, differences)
    caption = ("Each figure is its folder's mean over seeds (table.csv); B/A is B's over A's. "
               "Rows are matched on the settings the folders share.")
    return rows, headers, title, caption


def compare_folders(first: Path, second: Path, out: Path, wide: bool = False, plot: bool = True) -> list[Path]:
    """Print the two folders' tables side by side and write ``compare.csv`` (and the figure) to ``out``."""
    _, table_a, _, _ = read_folder(first)
    _, table_b, _, _ = read_folder(second)
    names = (first.name or str(first), second.name or str(second))
    rows, headers, title, caption = compare_table(table_a, table_b, names, wide)
    print_table(rows, headers, title=title, caption=caption, wide=wide,
                block=[key for key, _ in headers if key in SETTING_COLUMNS and key != "mechanism"])
    keys = [key for key in rows[0] if "." not in key] if rows else []
    columns = [*keys, *(f"{side}.{figure}" for figure in FIGURES for side in ("a", "b", "ratio"))]
    paths = [write_csv(rows, out / "compare.csv", columns)]
    if plot:
        from synergy_opt.cli.plots import save_figure  # matplotlib only when drawing
        from synergy_opt.sim.plots import compare_figure, has_load

        if has_load(table_a) or has_load(table_b):  # trace files have no load axis to draw
            paths.append(save_figure(compare_figure(table_a, table_b, names), out / "jct_vs_load.png"))
    return paths


def subcommand(prog: str, argv: Sequence[str]) -> int:
    """Run ``plot DIR`` or ``compare DIR_A DIR_B [--out DIR] [--wide] [--no-plot]``; returns the exit code."""
    return run_subcommand(prog, argv, plot_folder, compare_folders, "compare.csv and jct_vs_load.png")
