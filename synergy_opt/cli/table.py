"""The tables both command lines print (rich) and the CSV files they write and read back."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.table import Table

from synergy_opt.files import atomic_open

Row = dict[str, Any]

Headers = Sequence[tuple[str, str]]
# Left-justified columns; of them, names and statuses may wrap when a table must shrink (never a number).
_TEXT_KEYS = frozenset({"trace", "mechanism", "solver", "status", "policy", "split", "job_kind", "seeds", "multi_gpu"})
_WRAPPING_KEYS = frozenset({"trace", "mechanism", "solver", "status", "policy", "job_kind"})


TABLE_WIDTH = 100  # columns a printed table fits by default (a pipe, a file, or a wider terminal)


def render_table(
    summary: Sequence[Row], headers: Headers, title: str = "", block: Sequence[str] = (), caption: str = ""
) -> Table:
    """A rich table of ``summary``: one column per ``(key, header)``, a rule where the ``block`` keys change.

    Numbers are never cut: a numeric column is as wide as its widest cell and never wraps; text columns (names,
    statuses) wrap instead when the table must shrink. A row whose ``joint_ref`` is ``"bound"`` has its
    ``% joint`` marked ``>=`` (against a proven bound). ``caption`` goes under the table.
    """
    keys = [key for key, _ in headers]
    rows: list[list[str]] = []
    against_bound = False
    for row in summary:
        cells = [_cell(key, row.get(key)) for key in keys]
        if row.get("joint_ref") == "bound" and row.get("pct_joint") is not None and "pct_joint" in keys:
            cells[keys.index("pct_joint")] = ">=" + cells[keys.index("pct_joint")]
            against_bound = True
        rows.append(cells)
    notes = [caption] if caption else []
    if against_bound:
        notes.append(">= % joint: against the joint model's proven bound (its optimum was not proven in time)")
    table = Table(title=title or None, caption="\n".join(notes) or None, header_style="bold", pad_edge=False,
                  collapse_padding=True,
                  box=box.SIMPLE_HEAD, title_justify="left", caption_justify="left")
    for index, (key, header) in enumerate(headers):
        justify: Literal["left", "right"] = "left" if key in _TEXT_KEYS else "right"
        if key in _WRAPPING_KEYS:  # wraps between words only: a name stays whole
            longest = max((len(word) for cells in rows for word in cells[index].split()), default=1)
            table.add_column(header, justify=justify, overflow="fold", min_width=longest)
        else:
            widest = max((len(cells[index]) for cells in rows), default=0)
            table.add_column(header, justify=justify, no_wrap=True, min_width=max(widest, 1))
    previous: tuple[Any, ...] | None = None
    for row, cells in zip(summary, rows, strict=True):
        # A rule between blocks (the bench: size and trace) keeps a sweep's table readable.
        this_block = tuple(row.get(key) for key in block)
        if previous is not None and this_block != previous:
            table.add_section()
        previous = this_block
        table.add_row(*cells)
    return table


def print_table(
    summary: Sequence[Row], headers: Headers, title: str = "", console: Console | None = None,
    block: Sequence[str] = (), caption: str = "", wide: bool = False,
) -> None:
    """Print :func:`render_table` to ``console``: by default at most ``TABLE_WIDTH`` columns wide (the
    terminal's width if narrower); ``wide``, on a pipe or a file, every column at full width."""
    table = render_table(summary, headers, title, block, caption)
    if console is None:
        console = Console()
        full = Console(width=10_000).measure(table).maximum
        if not console.is_terminal:  # a pipe or a file (rich would assume 80 columns)
            console = Console(width=full if wide else min(full, TABLE_WIDTH))
        elif not wide and console.width > TABLE_WIDTH:
            console = Console(width=min(full, TABLE_WIDTH))
    console.print(table)


def _cell(key: str, value: Any) -> str:
    if value is None or value == "" or (isinstance(value, float) and value != value):  # None, empty, NaN
        return "-"
    if key.startswith("ratio."):  # compare: second over first
        return f"{value:.3f}"
    key = key.removeprefix("a.").removeprefix("b.")
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
    "trace", "split", "instance", "mechanism", "solver", "status", "message", "settings", "joint_ref", "seeds",
    "policy", "job_kind",
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
        pass
    try:
        return float(text)
    except ValueError:
        return text  # a name (policy, job kind) in a column not listed as text
