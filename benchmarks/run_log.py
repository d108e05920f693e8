"""A benchmark's runs as a CSV that grows one row per finished run, so that an interrupted benchmark resumes."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def recorded_rows(path: Path, key: Sequence[str]) -> dict[tuple[str, ...], dict[str, Any]]:
    """The rows of ``path`` (none if it does not exist) by their ``key`` columns (as text)."""
    if not path.exists():
        return {}
    with path.open() as handle:
        return {tuple(row[column] for column in key): row for row in csv.DictReader(handle)}


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Add ``row`` to ``path``, writing the header first when the file is new."""
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` (a benchmark's table, the first row's keys as the header) to ``path``, replacing it."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
