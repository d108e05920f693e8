"""The tables both command lines print (rich) and the CSV files they write and read back."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.table import Table

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import atomic_open

Row = dict[str, Any]

Headers = Sequence[tuple[str, str]]
# Left-justified columns; of them, names and statuses may wrap when a table must shrink (never a number).
_TEXT_KEYS = frozenset({"trace", "mechanism", "solver", "status", "policy", "split", "job_kind", "seeds", "multi_gpu",
                        "setting"})
_WRAPPING_KEYS = frozenset({"trace", "mechanism", "solver", "status", "policy", "job_kind", "setting"})


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
            longest = max((len(word) for text in [header, *(cells[index] for cells in rows)] for word in text.split()),
                          default=1)
            table.add_column(header, justify=justify, overflow="fold", min_width=longest)
        else:  # as wide as its widest cell or header, which never wrap (rich would measure the header's words)
            widest = max((len(text) for text in [header, *(cells[index] for cells in rows)]), default=1)
            table.add_column(header, justify=justify, no_wrap=True, min_width=widest)
    previous: tuple[Any, ...] | None = None
    for row, cells in zip(summary, rows, strict=True):
        # A rule between blocks (the bench: size and trace) keeps a sweep's table readable.
        this_block = tuple(row.get(key) for key in block)
        if previous is not None and this_block != previous:
            table.add_section()
        previous = this_block
        table.add_row(*cells)
    return table


def fitted_table(
    summary: Sequence[Row], headers: Headers, title: str = "", block: Sequence[str] = (), caption: str = "",
    width: int = TABLE_WIDTH,
) -> Table:
    """:func:`render_table` of :func:`fitted_columns`: at most ``width`` columns wide without cutting a number."""
    rows, kept = fitted_columns(summary, headers, block, width)
    return render_table(rows, kept, title, block, caption)


def fitted_columns(
    summary: Sequence[Row], headers: Headers, block: Sequence[str] = (), width: int = TABLE_WIDTH
) -> tuple[Sequence[Row], Headers]:
    """The rows and headers to print in ``width`` columns: as given when they fit side by side, else with the
    ``block`` columns (a row's setting: GPUs, policy, load, ...) folded into one ``setting`` column of
    ``header=value`` pairs, which wraps between pairs."""
    folded = [key for key, _ in headers if key in block]
    if len(folded) < 2 or _minimum_width(render_table(summary, headers, block=block)) <= width:
        return summary, headers
    labels = dict(headers)
    rows = [{**row, "setting": ", ".join(f"{labels[key].replace(' ', '_')}={_cell(key, row.get(key))}"
                                          for key in folded)} for row in summary]
    return rows, [("setting", "setting"), *((key, header) for key, header in headers if key not in folded)]


def print_table(
    summary: Sequence[Row], headers: Headers, title: str = "", console: Console | None = None,
    block: Sequence[str] = (), caption: str = "", wide: bool = False,
) -> None:
    """Print :func:`fitted_table` to ``console``: by default at most ``TABLE_WIDTH`` columns wide (the
    terminal's width if narrower); ``wide``, on a pipe or a file, every column at full width."""
    table = render_table(summary, headers, title, block, caption)
    if console is None:
        console = Console()
        full = Console(width=10_000).measure(table).maximum
        if not console.is_terminal:  # a pipe or a file (rich would assume 80 columns)
            console = Console(width=full if wide else min(full, TABLE_WIDTH))
        elif not wide and console.width > TABLE_WIDTH:
            console = Console(width=min(full, TABLE_WIDTH))
    if not wide:
        table = fitted_table(summary, headers, title, block, caption, console.width)
    console.print(table)


def _minimum_width(table: Table) -> int:
    """The fewest columns ``table`` needs: its numbers never wrap, so narrower is cut."""
    return Console(width=10_000).measure(table).minimum


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


def read_csv(path: str | Path, required: Sequence[str] = ()) -> list[Row]:
    """Rows of a CSV written by :func:`write_csv`, numbers, booleans and empty fields (None) read back; the
    ``TEXT_COLUMNS`` stay text.

    Raises
    ------
    InvalidInputError
        Naming the file when it is not UTF-8 CSV text, lacks one of the ``required`` columns, or has a row of
        more cells than columns; naming the cell when a figure's column (hours, seconds, ratios, percentages:
        :func:`figure_column`) holds text (a result edited by hand would be drawn or compared as text).
    """
    target = Path(path)
    try:
        with target.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle, strict=True)
            rows, columns = list(reader), list(reader.fieldnames or ())
    except (UnicodeDecodeError, csv.Error) as error:
        raise InvalidInputError("path", str(target), f"is not a CSV file this tool wrote (UTF-8): {error}") from None
    missing = [column for column in required if column not in columns]
    if missing:
        raise InvalidInputError(f"{target.name}.columns", columns, f"lacks the column {missing[0]!r}")
    parsed = []
    for index, row in enumerate(rows):
        if None in row:
            raise InvalidInputError(f"{target.name}.rows[{index}]", row[None], "has more cells than columns")
        values = {key: _parse(key, value) for key, value in row.items()}
        for key, value in values.items():
            if isinstance(value, str) and figure_column(key):
                raise InvalidInputError(f"{target.name}.rows[{index}].{key}", value, "must be a number (or empty)")
        parsed.append(values)
    return parsed


def figure_column(key: str) -> bool:
    """Whether column ``key`` holds a figure (a number or nothing): hours, seconds, milliseconds, utilisation,
    ratios and percentages."""
    return key not in TEXT_COLUMNS and (key.endswith(("_h", "_s", "_ms", "_util", "_ratio")) or
                                        key.startswith("pct_"))


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
