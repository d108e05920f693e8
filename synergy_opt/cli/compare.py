"""Two result folders side by side: rows matched on the settings they share, each figure of both and their ratio.

Both command lines' ``compare DIR_A DIR_B`` use :func:`side_by_side`. The key columns are the settings whose
values the two folders have in common; a setting whose values differ entirely and of which the second folder holds
one (``round_s`` 300 against 600, or ``mechanism`` proportional and tune against ideal) is what was compared, and goes
in the title; a row of one folder with no match in the other is shown with ``-`` for the other's figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from synergy_opt.cli.errors import OneLineParser

Row = dict[str, Any]


def side_by_side(
    first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]], candidates: Sequence[str],
    figures: Sequence[str],
) -> tuple[list[str], dict[str, tuple[list[str], list[str]]], list[Row]]:
    """``(keys, differences, rows)``: the key columns, the columns whose values differ entirely (each with the
    two folders' values), and one row per key with ``a.<figure>``, ``b.<figure>`` and ``ratio.<figure>``
    (second over first) for each figure; first's rows in order, then those only the second has.

    A column is a difference (rows matched across it: fifo in A against srtf in B) only when the second folder
    holds one value of it (each of the first's rows then meets that one); with several there, it stays a key
    even without a value in common (A at 32 and 64 GPUs, B at 128 and 256: nothing matches, each row is shown
    alone), as matching across it would pair rows arbitrarily."""
    keys, differences = [], {}
    for column in candidates:
        mine = list(dict.fromkeys(_text(row.get(column)) for row in first))
        theirs = list(dict.fromkeys(_text(row.get(column)) for row in second))
        if set(mine) & set(theirs) or len(theirs) > 1:
            keys.append(column)
        else:
            differences[column] = (mine, theirs)
    index = {tuple(_text(row.get(k)) for k in keys): row for row in second}
    matched: set[tuple[str, ...]] = set()
    rows: list[Row] = []
    for row in first:
        key = tuple(_text(row.get(k)) for k in keys)
        matched.add(key)
        rows.append(_joined(keys, row, row, index.get(key), figures))
    for key, row in index.items():
        if key not in matched:
            rows.append(_joined(keys, row, None, row, figures))
    return keys, differences, rows


def _joined(keys: Sequence[str], source: Mapping[str, Any], a: Mapping[str, Any] | None,
            b: Mapping[str, Any] | None, figures: Sequence[str]) -> Row:
    out: Row = {key: source.get(key) for key in keys}
    for figure in figures:
        value_a = None if a is None else a.get(figure)
        value_b = None if b is None else b.get(figure)
        out[f"a.{figure}"], out[f"b.{figure}"] = value_a, value_b
        out[f"ratio.{figure}"] = _ratio(value_b, value_a)
    return out


def _ratio(numerator: Any, denominator: Any) -> float | None:
    if not isinstance(numerator, (int, float)) or not isinstance(denominator, (int, float)):
        return None
    if isinstance(numerator, bool) or isinstance(denominator, bool):
        return None
    if not (math.isfinite(numerator) and math.isfinite(denominator)) or denominator == 0:
        return None
    return float(numerator) / float(denominator)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def figure_headers(figures: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(key, header)`` of each figure as three columns: A's, B's and B/A."""
    return [item for key, header in figures
            for item in ((f"a.{key}", f"{header} A"), (f"b.{key}", "B"), (f"ratio.{key}", "B/A"))]


def compare_title(names: tuple[str, str], differences: Mapping[str, tuple[list[str], list[str]]]) -> str:
    """``A = run1, B = run2; round_s: 300 (A) against 600 (B)``."""
    differ = difference_text(differences, ("A", "B"))
    return f"A = {names[0]}, B = {names[1]}" + (f"; {differ}" if differ else "")


def difference_text(differences: Mapping[str, tuple[list[str], list[str]]], names: tuple[str, str]) -> str:
    """``round_s: 300 (a) against 600 (b)``, one clause per setting that differs."""
    return "; ".join(f"{column}: {','.join(a) or '-'} ({names[0]}) against {','.join(b) or '-'} ({names[1]})"
                     for column, (a, b) in differences.items())


def subcommand(
    prog: str, argv: Sequence[str], plot_folder: Callable[[Path], list[Path]],
    compare_folders: Callable[[Path, Path, Path, bool, bool], list[Path]], outputs: str,
) -> int:
    """Run ``plot DIR`` or ``compare DIR_A DIR_B [--out DIR] [--wide] [--no-plot]`` with a tool's functions
    (``outputs``: what compare writes, for the help); returns the exit code."""
    command, rest = argv[0], list(argv[1:])
    parser = OneLineParser(prog=f"{prog} {command}", allow_abbrev=False)
    if command == "plot":
        parser.description = "Redraw a result folder's figures from its CSVs (written into the folder)."
        parser.add_argument("folder", type=Path, metavar="DIR")
        args = parser.parse_args(rest)
        for path in plot_folder(args.folder):
            print(f"wrote {path}")
        return 0
    parser.description = f"Print two result folders side by side; write {outputs}."
    parser.add_argument("first", type=Path, metavar="DIR_A")
    parser.add_argument("second", type=Path, metavar="DIR_B")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help=f"folder for {outputs} (default results/compare-<time>)")
    parser.add_argument("--wide", action="store_true", help="every figure (by default the table fits 100 columns)")
    parser.add_argument("--no-plot", action="store_true", help="no figures")
    args = parser.parse_args(rest)
    out = args.out or Path("results") / f"compare-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and not out.is_dir():  # refused before the table is printed, not when writing into it
        parser.error(f"--out {out}: is a file, not a folder")
    for path in compare_folders(args.first, args.second, out, args.wide, not args.no_plot):
        print(f"wrote {path}")
    return 0
