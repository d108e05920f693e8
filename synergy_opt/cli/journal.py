"""A result folder's record of finished runs, so that an interrupted sweep keeps what finished and resumes.

Both command lines (``python -m synergy_opt.bench``, ``python -m synergy_opt.sim``) write, in their ``--out``
folder:

- ``command.json``: the tool and the flags the sweep was started with (``--resume DIR`` reads them back);
- ``<name>.jsonl``: one JSON line per finished run, ``{"key": ..., "record": ...}``, appended and flushed to disk
  (``fsync``) as each run finishes, whichever process ran it.

A run's key (:func:`run_key`) is a digest of everything its result depends on, so a resumed sweep skips exactly
the runs whose results are already there. A line cut short by a kill mid-write is dropped on reading (the run
is simply run again); so is a line that is not a record of this format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from synergy_opt.cli.parallel import WorkerDiedError, run_in_order
from synergy_opt.errors import InvalidInputError
from synergy_opt.files import atomic_open, read_text

Item = TypeVar("Item")
Result = TypeVar("Result")

COMMAND_FILE = "command.json"
FORMAT = "synergy-runs/1"


def run_key(fields: Mapping[str, Any]) -> str:
    """A short digest of ``fields`` (JSON-able: what a run's result depends on), stable across processes."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (numpy scalars become Python numbers, tuples lists)."""
    return json.loads(json.dumps(value, default=_plain))


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON-able")


class Journal:
    """The append-only file of finished runs in a result folder (see the module docstring)."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.path = folder / f"{name}.jsonl"

    def exists(self) -> bool:
        return self.path.exists()

    def has_records(self) -> bool:
        """Whether it holds a complete record (a run stopped before its first finished left none to keep)."""
        return self.exists() and next(self._read(), None) is not None

    def records(self) -> dict[str, Any]:
        """Every complete record by key (a later record of the same key wins)."""
        return dict(self._read())

    def count(self, keys: Sequence[str]) -> int:
        """How many of ``keys`` have a record (read once)."""
        records = self.records()
        return sum(1 for key in keys if key in records)

    def _read(self) -> Iterator[tuple[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:  # line by line: a long sweep's file may pass read_text's limit
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:  # a line cut short by a kill mid-write (or not UTF-8): that run runs again
                    continue
                if isinstance(entry, dict) and entry.get("format") == FORMAT and isinstance(entry.get("key"), str):
                    yield entry["key"], entry.get("record")

    def start(self, resume: bool) -> None:
        """Open for appending: a new sweep starts an empty file; a resumed one first drops a torn last line."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not resume or not self.path.exists():
            with atomic_open(self.path) as handle:
                handle.write("")
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with atomic_open(self.path, "wb") as handle:
                handle.write(data[: data.rfind(b"\n") + 1])

    def append(self, key: str, record: Any) -> None:
        """Add one finished run, on disk before this returns (one write of one line, then fsync)."""
        data = (json.dumps({"format": FORMAT, "key": key, "record": record}, default=_plain) + "\n").encode()
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as error:
            raise OSError(error.errno, error.strerror, str(self.path)) from None
        start = os.lseek(descriptor, 0, os.SEEK_END)
        try:
            written = 0
            while written < len(data):  # a write may stop short (a size limit): finish it or fail
                written += os.write(descriptor, data[written:])
            os.fsync(descriptor)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, start)  # no half line: the run counts as not finished
            raise OSError(error.errno, error.strerror, str(self.path)) from None
        finally:
            os.close(descriptor)


def recorded_argv(argv: Sequence[str], with_value: Sequence[str], switches: Sequence[str]) -> list[str]:
    """``argv`` less the flags that do not change what a sweep computes (``with_value`` flags take a value, as
    ``--workers 2`` or ``--workers=2``; ``switches`` take none): what ``command.json`` keeps."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in switches:
            continue
        if name in with_value:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return kept


def write_command(folder: Path, tool: str, argv: Sequence[str]) -> Path:
    """Record the flags a sweep was started with (``--resume`` reads them back)."""
    path = folder / COMMAND_FILE
    with atomic_open(path) as handle:
        json.dump({"format": FORMAT, "tool": tool, "argv": list(argv)}, handle, indent=1)
        handle.write("\n")
    return path


def read_command(folder: Path, tool: str) -> list[str]:
    """The flags recorded in ``folder`` by :func:`write_command` for ``tool``.

    Raises
    ------
    InvalidInputError
        Naming ``--resume``: no such folder, no record of a sweep in it, or a record of another tool's.
    """
    path = folder / COMMAND_FILE
    if not folder.is_dir():
        raise InvalidInputError("--resume", str(folder), "is not a folder")
    if not path.is_file():
        raise InvalidInputError("--resume", str(folder), f"holds no {COMMAND_FILE}: not a result folder of a sweep")
    data = _command_record(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("argv"), list) \
            or not all(isinstance(arg, str) for arg in data["argv"]):
        raise InvalidInputError("--resume", str(path), "is not a command record of this toolkit")
    if data.get("tool") != tool:
        raise InvalidInputError("--resume", str(folder), f"holds a sweep of {data.get('tool')!r}, not of {tool!r}")
    argv: list[str] = data["argv"]
    return argv


def _command_record(path: Path) -> Any:
    """The JSON in ``path`` (a ``command.json``), or None when it is not JSON this reads (too deeply nested too)."""
    try:
        return json.loads(read_text(path))
    except (ValueError, RecursionError):
        return None


def out_folder_problem(out: Path, tool: str, earlier: tuple[str, str] | None = None) -> str | None:
    """Why ``out`` cannot take ``tool``'s run (None: it can; it then exists and is writable): a folder of another
    tool's sweep (starting here would overwrite its ``command.json``, and it could no longer be resumed), or one
    holding an earlier run's journal, ``earlier = (journal name, what it holds)`` (None: a run that resumes)."""
    try:
        recorded = _command_record(out / COMMAND_FILE)
    except OSError:  # none (or unreadable): a new run writes its own
        recorded = None
    other = recorded.get("tool") if isinstance(recorded, dict) else None
    if isinstance(other, str) and other != tool:
        return f"--out {out} holds a sweep of {other!r}, not of {tool!r}: give another folder"
    if earlier is not None and Journal(out, earlier[0]).has_records():
        return (f"--out {out} holds {earlier[1]} ({earlier[0]}.jsonl): continue it with --resume {out}, or give "
                "another folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.touch()
        probe.unlink()
    except OSError as error:
        return f"--out {out}: cannot write there ({error.strerror})"
    return None


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, with what was kept (``run_cli`` prints it as one line)."""


def run_journaled(
    function: Callable[[Item], Result],
    items: Sequence[Item],
    keys: Sequence[str],
    journal: Journal,
    to_record: Callable[[Result], Any],
    *,
    unit: str = "runs",
    **run_options: Any,
) -> list[Any]:
    """The records of every item, in order: those already in ``journal`` as they are, the others run now
    (:func:`~synergy_opt.cli.parallel.run_in_order`, ``run_options``) and appended to it as each finishes.

    Call ``journal.start()`` first. Ctrl-C raises :class:`SweepInterrupted`, and a worker's death
    :class:`~synergy_opt.cli.parallel.WorkerDiedError`, each saying how many runs finished and are kept.
    """
    records = journal.records()
    pending = [index for index, key in enumerate(keys) if key not in records]

    def keep(position: int, result: Result) -> None:
        key = keys[pending[position]]
        record = as_json(to_record(result))
        journal.append(key, record)
        records[key] = record

    def kept() -> str:
        finished = sum(1 for key in keys if key in records)
        return (f"{finished} of {len(keys)} {unit} finished and kept in {journal.folder}; "
                f"continue with --resume {journal.folder}")

    try:
        run_in_order(function, [items[index] for index in pending], on_result=keep, **run_options)
    except KeyboardInterrupt:
        raise SweepInterrupted(kept()) from None
    except WorkerDiedError as error:
        raise WorkerDiedError(f"{error}; {kept()}") from None
    return [records[key] for key in keys]
