"""Per-instance references, medians over seeds, the printed table (rich) and the CSV files."""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from synergy_opt.bench.cells import CELL_COLUMNS, TIMING_COLUMNS
from synergy_opt.files import atomic_open

Row = dict[str, Any]
REFERENCE_COLUMNS = ("ideal_opt", "lp_bound", "joint_best", "joint_proven", "joint_bound", "joint_ref", "pct_ideal",
                     "pct_lp", "pct_joint")
COLUMNS = (*CELL_COLUMNS, *REFERENCE_COLUMNS)
GROUP = ("gpus", "trace", "mechanism", "solver")
MEDIAN_COLUMNS = (
    "objective", "pct_ideal", "pct_joint", "pct_lp", "floors_violated", "jobs_unplaced", "jobs_split",
    "gpu_util", "cpu_util", "mem_util", "build_ms", "solve_ms", "round_ms",
)
SUMMARY_COLUMNS = (*GROUP, "runs", "status", "invalid", *MEDIAN_COLUMNS, "joint_ref")


def add_references(rows: Iterable[Row]) -> list[Row]:
    """Each row with its instance's ideal ILP optimum, LP bound and best joint objective, and its percentages.

    The ideal ILP optimum and LP bound come from the first solver (in row order) that proved them. ``joint_best``
    is the best valid joint allocation found, ``joint_proven`` whether one was proven optimal, ``joint_bound``
    the smallest upper bound a joint solve proved. ``pct_joint`` compares with the proven optimum, or, when none
    was proven, with that bound (``joint_ref`` says which: "optimum" or "bound"); against a bound it
    understates the share of the unknown optimum, never overstates it.
    """
    rows = [dict(row) for row in rows]
    by_instance: dict[tuple[int, str], list[Row]] = {}
    for row in rows:
        by_instance.setdefault((row["gpus"], row["instance"]), []).append(row)
    for group in by_instance.values():
        ideal = _first_optimal(group, "ideal")
        lp = _first_optimal(group, "ideal-lp")
        joints = [r for r in group if r["mechanism"] == "joint" and r["valid"] and r["objective"] is not None]
        proven = [r for r in joints if r["status"] == "optimal"]
        joint = max((r["objective"] for r in proven or joints), default=None)
        bounds = [r["bound"] for r in group if r["mechanism"] == "joint" and r.get("bound") is not None]
        bound = min(bounds, default=None)
        reference, kind = (joint, "optimum") if proven else (bound, "bound" if bound is not None else None)
        for row in group:
            row.update(ideal_opt=ideal, lp_bound=lp, joint_best=joint, joint_proven=bool(proven) if joints else None,
                       joint_bound=bound, joint_ref=kind)
            row.update(pct_ideal=_pct(row["objective"], ideal), pct_lp=_pct(row["objective"], lp),
                       pct_joint=_pct(row["objective"], reference))
    return rows


def _first_optimal(group: Sequence[Row], mechanism: str) -> float | None:
    values = [r["objective"] for r in group if r["mechanism"] == mechanism and r["status"] == "optimal"]
    return values[0] if values else None


def _pct(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return 100.0 * value / reference


def medians(rows: Iterable[Row]) -> list[Row]:
    """One row per (gpus, trace, mechanism, solver): medians over seeds (instances), in first-seen order.

    A score is left empty (None) for a group in which some run has none, e.g. a solve that found no solution
    within its time limit; ``status`` counts such runs.
    """
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in GROUP), []).append(row)
    summary = []
    for key, group in groups.items():
        out: Row = dict(zip(GROUP, key, strict=True))
        out["runs"] = len(group)
        out["status"] = _status(group)
        out["invalid"] = sum(1 for r in group if r["valid"] is False)
        # "bound" when any run's % joint is against a bound (no proven optimum): the table marks it.
        refs = {r.get("joint_ref") for r in group} - {None}
        out["joint_ref"] = "bound" if "bound" in refs else ("optimum" if refs else None)
        for column in MEDIAN_COLUMNS:
            values = [r[column] for r in group if r.get(column) is not None]
            # A run without a result (no solution in time, an error) leaves its group's scores unknown: a
            # median of the runs that did finish would flatter the mechanism. Timings stay medians of what ran.
            partial = len(values) < len(group) and column not in TIMING_COLUMNS
            out[column] = statistics.median(values) if values and not partial else None
        summary.append(out)
    return summary


def _status(group: Sequence[Row]) -> str:
    counts = Counter(r["status"] for r in group)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{status} {count}" for status, count in counts.most_common())


# --- printing -------------------------------------------------------------------------------------------------

_HEADERS = (
    ("gpus", "GPUs"), ("trace", "trace"), ("mechanism", "mechanism"), ("solver", "solver"), ("status", "status"),
    ("objective", "objective"), ("pct_ideal", "% ideal"), ("pct_joint", "% joint"), ("floors_violated", "<floor"),
    ("jobs_unplaced", "unplaced"), ("jobs_split", "split"), ("gpu_util", "GPU %"), ("cpu_util", "CPU %"),
    ("mem_util", "mem %"), ("build_ms", "build ms"), ("solve_ms", "solve ms"), ("round_ms", "round ms"),
)
Headers = Sequence[tuple[str, str]]
_TEXT_KEYS = frozenset({"trace", "mechanism", "solver", "status", "policy", "split", "job_kind"})


def render_table(
    summary: Sequence[Row], title: str = "", headers: Headers = _HEADERS, block: Sequence[str] = ("gpus", "trace")
) -> Table:
    """A rich table of ``summary``: one column per ``(key, header)``, a rule where the ``block`` keys change."""
    table = Table(title=title or None, header_style="bold")
    keys = [key for key, _ in headers]
    for key, header in headers:
        table.add_column(header, justify="left" if key in _TEXT_KEYS else "right", no_wrap=True)
    previous: tuple[Any, ...] | None = None
    against_bound = False
    for row in summary:
        # A rule between blocks (by default (size, trace)) keeps a sweep's table readable.
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
    summary: Sequence[Row], title: str = "", console: Console | None = None, headers: Headers = _HEADERS,
    block: Sequence[str] = ("gpus", "trace"),
) -> None:
    table = render_table(summary, title, headers, block)
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


# --- CSV ------------------------------------------------------------------------------------------------------


def write_csv(rows: Sequence[Row], path: str | Path, columns: Sequence[str] = COLUMNS) -> Path:
    """Write ``rows`` with ``columns`` in that order; None is written as an empty field, floats in full."""
    target = Path(path)
    with atomic_open(target, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if row.get(key) is None else row[key] for key in columns})
    return target


def read_csv(path: str | Path) -> list[Row]:
    """Rows of a bench CSV with numbers, booleans and empty fields (None) read back."""
    with Path(path).open(newline="") as handle:
        return [{key: _parse(key, value) for key, value in row.items()} for row in csv.DictReader(handle)]


_TEXT = frozenset({"trace", "split", "instance", "mechanism", "solver", "status", "message", "settings", "joint_ref"})


def _parse(key: str, text: str) -> Any:
    if key in _TEXT:
        return text
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return float(text)
