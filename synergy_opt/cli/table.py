"""The tables both command lines print (rich) and the CSV files they write and read back."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from synergy_opt.files import atomic_open

Row = dict[str, Any]

Headers = Sequence[tuple[str, str]]
_TEXT_KEYS = frozenset({"trace", "mechanism", "solver", "status", "policy", "split", "job_kind"})


def render_table(
    summary: Sequence[Row], headers: Headers, title: str = "", block: Sequence[str] = ()
) -> Table:
    """A rich table of ``summary``: one column per ``(key, header)``, a rule where the ``block`` keys change.

    A row whose ``joint_ref`` is ``"bound"`` has its ``% joint`` marked ``>=`` (against a proven bound).
    """
    table = Table(title=title or None, header_style="bold")
    keys = [key for key, _ in headers]
    for key, header in headers:
        table.add_column(header, justify="left" if key in _TEXT_KEYS else "right", no_wrap=True)
    previous: tuple[Any, ...] | None = None
    against_bound = False
    for row in summary:
        # A rule between blocks (the bench: size and trace) keeps a sweep's table readable.
        this_block = tuple(row.get(key) for key in block)
        end_section = previous is not None and this_block != previous
        if end_section:
            table.add_section()
        previous = this_block
        cells = [_cell(key, row.get(key)) for key in keys]
        if row.get("joint_ref") == "bound" and row.get("pct_joint") is not None and "pct_joint" in keys:
            cells[keys.index("pct_joint")] = ">=" + cells[keys.index("pct_joint")]
            against_bound = True
        table.add_row(*cells)
    if against_bound:
        table.caption = ">= % joint: against the joint model's proven bound (its optimum was not proven in time)"
    return table


def print_table(
    summary: Sequence[Row], headers: Headers, title: str = "", console: Console | None = None,
    block: Sequence[str] = (),
) -> None:
    """Print :func:`render_table` to ``console`` (a pipe or a file gets every column at full width)."""
    table = render_table(summary, headers, title, block)
    if console is None:
        console = Console()
        if not console.is_terminal:
            # A pipe or a file gets every column at full width (rich would assume 80 columns and squash them).
            console = Console(width=Console(width=10_000).measure(table).maximum)
    console.print(table)


def _cell(key: str, value: Any) -> str:
    if value is None or value == "":
        return "-"
    if key == "objective":
        return f"{value:.2f}"
    if key.startswith("pct_"):
        return f"{value:.1f}"
    if key.endswith("_util"):
        return f"{100 * value:.1f}"
    if key.endswith("_ms"):
        return f"{value:.3g}" if value < 1000 else f"{value:.0f}"
    if key.endswith(("_h", "_ratio")) and isinstance(value, float):  # hours and ratios: two decimals
        return f"{value:.2f}"
    if key.endswith("_s") and isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def write_csv(rows: Sequence[Row], path: str | Path, columns: Sequence[str]) -> Path:
    """Write ``rows`` with ``columns`` in that order; None is written as an empty field, floats in full."""
    target = Path(path)
    with atomic_open(target, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if row.get(key) is None else row[key] for key in columns})
    return target


def read_csv(path: str | Path) -> list[Row]:
    """Rows of a CSV written by :func:`write_csv`, numbers, booleans and empty fields (None) read back; the
    ``TEXT_COLUMNS`` stay text."""
    with Path(path).open(newline="") as handle:
        return [{key: _parse(key, value) for key, value in row.items()} for row in csv.DictReader(handle)]


# Columns read back as text even when they look like numbers.
TEXT_COLUMNS = frozenset({
    "trace", "split", "instance", "mechanism", "solver", "status", "message", "settings", "joint_ref",
})


def _parse(key: str, text: str) -> Any:
    if key in TEXT_COLUMNS:
        return text
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return float(text)
