"""A simulator result folder: each finished run's record, the CSVs built from them, and the printed table.

Every run of ``python -m synergy_opt.sim`` goes to its ``--out`` folder as one record of
``runs.jsonl`` (:mod:`synergy_opt.cli.journal`) when it finishes: its summary row and its per-job (and, when
asked, per-round) rows as CSV text. ``summary.csv``, ``table.csv``, ``jobs.csv`` and ``rounds.csv`` are then
built from the records, in the sweep's order, whether the runs ran at once or over several ``--resume``\\ s, so
a resumed sweep's files are those of an uninterrupted one. :func:`read_folder` reads a folder back (for
``plot`` and ``compare``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from synergy_opt.cli.table import print_table, read_csv, write_csv
from synergy_opt.errors import InvalidInputError
from synergy_opt.files import atomic_open
from synergy_opt.sim.sweep import (
    PER_JOB_COLUMNS,
    PER_ROUND_COLUMNS,
    SETTING_COLUMNS,
    SUMMARY_COLUMNS,
    TABLE_COLUMNS,
    RunOutcome,
    SimRun,
    generator_only,
    seed_means,
    with_ratios,
)
from synergy_opt.sim.timing import DEFAULT_ROUND_TIMING

JOURNAL = "runs"
FILES = ("summary.csv", "table.csv", "jobs.csv", "rounds.csv")


def run_fields(run: SimRun, trace_digest: str | None) -> dict[str, Any]:
    """What a run's result depends on (its journal key): setting, mechanism, options, the trace file's digest."""
    setting = dataclasses.asdict(run.setting)
    # round_timing was added later: its default leaves earlier sweeps' keys as they were.
    if setting["round_timing"] == DEFAULT_ROUND_TIMING:
        del setting["round_timing"]
    return {"setting": setting, "mechanism": run.mechanism, "options": dict(run.options), "trace": trace_digest}


def file_digest(path: Path) -> str:
    """A digest of a trace file's bytes: a resumed sweep reruns a run whose trace file changed."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def to_record(outcome: RunOutcome, rounds: bool) -> dict[str, Any]:
    """A finished run as one journal record: its summary row, its jobs' (and rounds') CSV rows as text. A
    heterogeneous run's rounds have per-type columns (``gpu_util_pct.k80``, ...) beyond ``PER_ROUND_COLUMNS``:
    the record names its rounds' columns."""
    record = {
        "summary": outcome.summary,
        "jobs": outcome.jobs[list(PER_JOB_COLUMNS)].to_csv(index=False, header=False),
        "rounds": outcome.rounds.to_csv(index=False, header=False) if rounds else None,
    }
    if rounds:
        record["rounds_columns"] = list(outcome.rounds.columns)
    return record


def _rounds_text(records: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """``rounds.csv``'s columns (every run's, in the order they first come) and each run's rows in them (a record
    of an earlier version, without ``rounds_columns``, has ``PER_ROUND_COLUMNS``)."""
    of = [list(record.get("rounds_columns") or PER_ROUND_COLUMNS) for record in records]
    columns = list(dict.fromkeys(column for own in [*of, list(PER_ROUND_COLUMNS)] for column in own))
    texts = []
    for record, own in zip(records, of, strict=True):
        text = record["rounds"] or ""
        if own != columns and text:  # another run's columns too (a sweep mixing kinds of cluster): reordered
            frame = pd.read_csv(io.StringIO(text), header=None, names=own, dtype=str, keep_default_na=False)
            text = frame.reindex(columns=columns, fill_value="").to_csv(index=False, header=False)
        texts.append(text)
    return columns, texts


def write_folder(
    folder: Path, records: Sequence[Mapping[str, Any]], rounds: bool
) -> tuple[list[Path], list[dict[str, Any]]]:
    """Write ``summary.csv`` (a row per run), ``table.csv`` (means over seeds: the printed table), ``jobs.csv``
    and, when asked, ``rounds.csv`` from the runs' records; returns the paths and the table's rows."""
    # Records of runs before round_timing was a setting ran on the grid (their journal keys leave it out).
    summaries = with_ratios([{"round_timing": DEFAULT_ROUND_TIMING, **record["summary"]} for record in records])
    table = seed_means(summaries)
    paths = [write_csv(summaries, folder / "summary.csv", SUMMARY_COLUMNS),
             write_csv(table, folder / "table.csv", TABLE_COLUMNS)]
    stacks = [("jobs", list(PER_JOB_COLUMNS), [record["jobs"] or "" for record in records])]
    if rounds:
        stacks.append(("rounds", *_rounds_text(records)))
    for name, columns, texts in stacks:
        path = folder / f"{name}.csv"
        with atomic_open(path, newline="") as handle:
            handle.write(",".join(columns) + "\n")
            for text in texts:
                handle.write(text)
        paths.append(path)
    return paths, table


def read_folder(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], pd.DataFrame, pd.DataFrame]:
    """``summary.csv`` and ``table.csv`` as rows, ``jobs.csv`` and ``rounds.csv`` as frames (empty if absent).

    Raises
    ------
    InvalidInputError
        Naming the folder when it is not a result folder of the simulator (no ``table.csv``).
    """
    if not (folder / "table.csv").is_file() or not (folder / "summary.csv").is_file():
        raise InvalidInputError("folder", str(folder), "is not a result folder of python -m synergy_opt.sim "
                                "(no summary.csv and table.csv)")
    summaries = read_csv(folder / "summary.csv", ("mechanism", "avg_jct_h"))
    table = read_csv(folder / "table.csv", ("mechanism", "avg_jct_h"))
    if not table:
        raise InvalidInputError("folder", str(folder), "holds a table.csv without rows: nothing to draw or compare")
    frames = []
    for name, columns in (("jobs", PER_JOB_COLUMNS), ("rounds", PER_ROUND_COLUMNS)):
        path = folder / f"{name}.csv"
        frame = pd.read_csv(path, dtype={"split": str, "trace": str}) if path.is_file() else pd.DataFrame(
            columns=list(columns))
        frames.append(frame)
    return summaries, table, frames[0], frames[1]


# --- the printed table ----------------------------------------------------------------------------------------

# (key, header); the narrow default fits 100 columns, --wide adds the rest.
NARROW_HEADERS = (
    ("mechanism", "mechanism"), ("avg_jct_h", "avg JCT h"), ("p95_jct_h", "p95 h"), ("p99_jct_h", "p99 h"),
    ("makespan_h", "makespan h"), ("proportional_ratio", "prop/this"), ("unfinished", "unfin."),
)
WIDE_HEADERS = (
    ("mechanism", "mechanism"), ("runs", "runs"), ("avg_jct_h", "avg JCT h"), ("p50_jct_h", "p50 h"),
    ("p95_jct_h", "p95 h"), ("p99_jct_h", "p99 h"), ("makespan_h", "makespan h"), ("unfinished", "unfinished"),
    ("proportional_ratio", "prop/this"), ("rounds", "rounds"), ("rounds_solved", "solved"), ("wall_s", "wall s"),
)
SETTING_HEADERS = {"cluster_gpus": "GPUs", "gpu_types": "GPU types", "cpu_per_gpu": "CPU:GPU", "multi_gpu": "multi",
                   "profile_noise": "noise", "job_kind": "jobs", "trace_jobs": "trace jobs", "round_s": "round s"}
IDEAL_NOTE = " ideal: the paper's OPT (ideal bound)."
CAPTION = ("Each figure: its column's mean over the seeds (summary.csv: every run). prop/this: proportional's "
           "avg JCT over the row's." + IDEAL_NOTE)


def caption_of(table: Sequence[Mapping[str, Any]]) -> str:
    """The table's caption, naming what ``ideal`` is only when a row ran it."""
    return CAPTION if any(row.get("mechanism") == "ideal" for row in table) else CAPTION.removesuffix(IDEAL_NOTE)


def table_layout(table: Sequence[Mapping[str, Any]], wide: bool = False) -> tuple[str, list[tuple[str, str]]]:
    """The title (the settings that do not vary) and the headers (those that do, then the figures)."""
    columns = [c for c in SETTING_COLUMNS if c not in ("seed", "mechanism")]
    swept = [c for c in columns if len({str(row.get(c)) for row in table}) > 1]
    # One GPU type (gpu_types empty in every row) is the usual cluster: the title does not mention it; nor, for a
    # trace file, the generator's load, noise and kind of job (a file's jobs are its own).
    fixed = [c for c in columns if c not in swept and not (c == "gpu_types" and not table[0].get(c))
             and c not in generator_only(table)]
    seeds = str(table[0]["seeds"]) if table else ""
    title = f"means over seeds {seeds}: " + ", ".join(
        f"{SETTING_HEADERS.get(column, column.replace('_', ' '))} {_shown(table[0][column])}"
        for column in fixed if table)
    figures = WIDE_HEADERS if wide else NARROW_HEADERS
    headers = [(column, SETTING_HEADERS.get(column, column.replace("_", " "))) for column in swept] + list(figures)
    return title, headers


def print_summary(table: Sequence[Mapping[str, Any]], wide: bool = False) -> None:
    """One table: a row per (setting, mechanism), the settings that vary as columns, the rest in the title."""
    title, headers = table_layout(table, wide)
    block = [key for key, _ in headers if key in SETTING_COLUMNS and key != "mechanism"]
    print_table([dict(row) for row in table], title=title, headers=headers, block=block, caption=caption_of(table),
                wide=wide)


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)
