"""Per-instance references, medians over seeds, the printed table (rich) and the CSV files."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from synergy_opt.bench.cells import CELL_COLUMNS, TIMING_COLUMNS
from synergy_opt.cli import table
from synergy_opt.cli.table import Row
from synergy_opt.errors import InvalidInputError

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


# --- printing and CSV: the shared table of synergy_opt.cli.table with the bench's columns -----------------------

HEADERS = (
    ("gpus", "GPUs"), ("trace", "trace"), ("mechanism", "mechanism"), ("solver", "solver"), ("status", "status"),
    ("objective", "objective"), ("pct_ideal", "% ideal"), ("pct_joint", "% joint"), ("floors_violated", "<floor"),
    ("jobs_unplaced", "unplaced"), ("jobs_split", "split"), ("gpu_util", "GPU %"), ("cpu_util", "CPU %"),
    ("mem_util", "mem %"), ("build_ms", "build ms"), ("solve_ms", "solve ms"), ("round_ms", "round ms"),
)
# What the table prints by default (it fits 100 columns); --wide prints HEADERS.
NARROW = ("gpus", "trace", "mechanism", "solver", "status", "objective", "pct_ideal", "pct_joint", "floors_violated",
          "round_ms")
CAPTION = ("Each figure is its own column's median over the seeds, so a row may mix seeds (medians.csv; rows.csv "
           "has every run). <floor: jobs below their GPU-proportional throughput.")


def headers(summary: Sequence[Row], wide: bool = False) -> list[tuple[str, str]]:
    """The columns to print: every one with ``wide``, else the narrow set, without ``GPUs`` or ``trace`` when
    they do not vary (they go in the title)."""
    chosen = [(key, header) for key, header in HEADERS if wide or key in NARROW]
    return [(key, header) for key, header in chosen
            if key not in ("gpus", "trace") or wide or len({row.get(key) for row in summary}) > 1]


def title(summary: Sequence[Row], saved: bool = False) -> str:
    """``medians over 3 seeds: 128 GPUs, single and multi trace``; of ``saved`` instances, ``... 2 saved
    instance(s) of each size and trace: ...`` (a folder's rounds of one size and trace are taken together)."""
    sizes = sorted({row["gpus"] for row in summary})
    traces = list(dict.fromkeys(row["trace"] for row in summary))
    runs = sorted({row["runs"] for row in summary}) or [0]
    count = str(runs[0]) if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
    unit = "saved instance(s) of each size and trace" if saved else "seed(s)"
    return (f"medians over {count} {unit}: {', '.join(map(str, sizes))} GPUs, "
            f"{' and '.join(traces)} trace{'s' if len(traces) > 1 else ''}")


def render_table(summary: Sequence[Row], title: str = "", wide: bool = True) -> Table:
    """The bench's summary table (a rule between cluster sizes and traces)."""
    return table.render_table(summary, headers(summary, wide), title, block=("gpus", "trace"), caption=CAPTION)


def print_table(summary: Sequence[Row], title: str = "", console: Console | None = None, wide: bool = False) -> None:
    table.print_table(summary, headers(summary, wide), title, console, block=("gpus", "trace"), caption=CAPTION,
                      wide=wide)


def write_csv(rows: Sequence[Row], path: str | Path, columns: Sequence[str] = COLUMNS) -> Path:
    """Write the bench's rows (all of ``COLUMNS`` unless told)."""
    return table.write_csv(rows, path, columns)


ROWS_FILE, MEDIANS_FILE = "rows.csv", "medians.csv"


def write_folder(folder: Path, rows: Sequence[Row]) -> tuple[list[Path], list[Row]]:
    """``rows.csv`` (every cell, with its instance's references) and ``medians.csv`` (the printed table) from
    the cells' rows in grid order; returns the two paths and the medians."""
    complete = add_references(rows)
    summary = medians(complete)
    paths = [write_csv(complete, folder / ROWS_FILE), write_csv(summary, folder / MEDIANS_FILE, SUMMARY_COLUMNS)]
    return paths, summary


def read_folder(folder: Path) -> tuple[list[Row], list[Row]]:
    """A bench result folder's rows and medians, as written by :func:`write_folder`.

    Raises
    ------
    InvalidInputError
        Naming the folder when it holds no ``medians.csv`` and ``rows.csv``.
    """
    if not (folder / MEDIANS_FILE).is_file() or not (folder / ROWS_FILE).is_file():
        raise InvalidInputError("folder", str(folder), "is not a result folder of python -m synergy_opt.bench "
                                f"(no {ROWS_FILE} and {MEDIANS_FILE})")
    # The columns plot and compare match rows on (a folder edited by hand lacking one crashed or compared nothing).
    rows = table.read_csv(folder / ROWS_FILE, GROUP)
    summary = table.read_csv(folder / MEDIANS_FILE, GROUP)
    if not summary:
        raise InvalidInputError("folder", str(folder), f"holds a {MEDIANS_FILE} without rows: nothing to draw or "
                                "compare")
    return rows, summary
