"""Two result folders side by side: rows matched on the settings they share, each figure of both and their ratio.

Both command lines' ``compare DIR_A DIR_B`` use :func:`side_by_side`. The key columns are the settings whose
values the two folders have in common (a setting whose values differ entirely, e.g. ``round_s`` 300 against 600,
is what was compared, and goes in the title); a row of one folder with no match in the other is shown with
``-`` for the other's figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Row = dict[str, Any]


def side_by_side(
    first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]], candidates: Sequence[str],
    figures: Sequence[str],
) -> tuple[list[str], dict[str, tuple[list[str], list[str]]], list[Row]]:
    """``(keys, differences, rows)``: the key columns, the columns whose values differ entirely (each with the
    two folders' values), and one row per key with ``a.<figure>``, ``b.<figure>`` and ``ratio.<figure>``
    (second over first) for each figure; first's rows in order, then those only the second has."""
    keys, differences = [], {}
    for column in candidates:
        mine = list(dict.fromkeys(_text(row.get(column)) for row in first))
        theirs = list(dict.fromkeys(_text(row.get(column)) for row in second))
        if set(mine) & set(theirs):
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


def difference_text(differences: Mapping[str, tuple[list[str], list[str]]], names: tuple[str, str]) -> str:
    """``round_s: 300 (a) against 600 (b)``, one clause per setting that differs."""
    return "; ".join(f"{column}: {','.join(a) or '-'} ({names[0]}) against {','.join(b) or '-'} ({names[1]})"
                     for column, (a, b) in differences.items())
