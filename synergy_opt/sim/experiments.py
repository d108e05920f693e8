"""The paper's simulated experiments as named configs: TOML files of command-line settings.

``synergy_opt/sim/experiments/<name>.toml`` holds one experiment: a ``description`` and the settings of
``python -m synergy_opt.sim``, each key a flag's name with ``_`` for ``-`` (``multi_gpu = true`` is
``--multi-gpu``, ``load = [2, 4, 9]`` is ``--load 2,4,9``). ``--experiment NAME`` runs one; flags given on the
command line override its settings; ``--experiment path/to/file.toml`` runs a user's copy. Each file says in a
comment which figure of the paper (section 5.3-5.7) or of its artifact it follows.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synergy_opt.cli.args import MAX_LIST_VALUES
from synergy_opt.errors import InvalidInputError
from synergy_opt.files import read_text

EXPERIMENTS_DIR = Path(__file__).with_name("experiments")
SUFFIX = ".toml"
MAX_EXPERIMENT_BYTES = 2**20  # an experiment file is a few settings: 1 MiB is far beyond any


@dataclass(frozen=True)
class Experiment:
    """A named experiment: where it was read from, what it reproduces, and its settings (flag name -> value)."""

    name: str
    path: Path
    description: str
    settings: dict[str, Any]


def experiment_names() -> list[str]:
    """The experiments shipped with the package, in natural order (``fig7`` before ``fig10``)."""
    return sorted((path.stem for path in EXPERIMENTS_DIR.glob(f"*{SUFFIX}")), key=natural_key)


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the digit runs of ``name`` by value: ``fig7 < fig10 < table55``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", name))


def load_experiment(name: str) -> Experiment:
    """The shipped experiment ``name``, or the TOML file at the path ``name``.

    Every setting is checked by its TOML type before it becomes a flag (:data:`SETTINGS`): ``gpus = "16"``,
    ``gpus = [[16]]`` or ``help = true`` are refused naming the key, as is a key that is no setting (a
    command-line-only flag such as ``workers``, or a misspelling). Value ranges are then the flags' own rules.

    Raises
    ------
    InvalidInputError
        Naming ``experiment`` for an unknown name or a missing file, or the file and key for malformed TOML,
        an unknown or command-line-only key, or a value of the wrong type or with too many items.
    """
    shipped = EXPERIMENTS_DIR / f"{name}{SUFFIX}"
    path = shipped if shipped.is_file() else Path(name)
    if not os.path.lexists(path):  # anything there (a folder, a FIFO, a symlink loop) is read_text's to refuse
        raise InvalidInputError(
            "experiment", name, f"neither a named experiment ({', '.join(experiment_names())}) nor a TOML file"
        )
    try:
        data = tomllib.loads(read_text(path, MAX_EXPERIMENT_BYTES))
    except tomllib.TOMLDecodeError as error:
        raise InvalidInputError("experiment", str(path), f"is not valid TOML: {error}") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise InvalidInputError("experiment", str(path), "nests arrays too deep to read") from None
    description = data.pop("description", "")
    if not isinstance(description, str):
        raise InvalidInputError(f"{path}: description", description, "must be a string")
    for key, value in data.items():
        check_setting(f"{path}: {key}", key, value)
    return Experiment(path.stem, path, description.strip(), data)


# --- what a setting may hold, by TOML type --------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """The TOML types one setting takes: scalars of ``scalar`` (a predicate and its description), or lists of
    them (``lists``), or for a split, lists of three numbers (``nested``)."""

    scalar: tuple[str, ...]  # any of "integer", "number", "string", "boolean"
    lists: bool = False  # a list of such scalars is accepted too
    nested: bool = False  # the value is a list of numbers, or a list of such lists (split)
    length: int | None = None  # a list of exactly this many (monitor: 2)
    words: tuple[str, ...] = ()  # strings accepted where the scalar is a number ("static", "none")

    def describe(self) -> str:
        names = " or ".join(self.scalar)
        if self.words:
            names += " or " + " or ".join(repr(word) for word in self.words)
        if self.nested:
            return "a list of three numbers, or a list of such lists"
        if self.length:
            return f"a list of {self.length} {names}s"
        article = "an " if names.startswith("integer") else "a "
        return article + names + (", or a list of them" if self.lists else "")


_INTEGER, _NUMBER, _STRING, _BOOLEAN = ("integer",), ("number",), ("string",), ("boolean",)
SETTINGS: dict[str, Kind] = {
    "gpus": Kind(_INTEGER, lists=True),
    "cpu_per_gpu": Kind(_INTEGER, lists=True),
    "policy": Kind(_STRING, lists=True),
    "load": Kind(_NUMBER, lists=True, words=("static",)),
    "split": Kind(_NUMBER, nested=True),
    "multi_gpu": Kind(("boolean", "string")),
    "profile_noise": Kind(_NUMBER),
    "job_kind": Kind(_STRING),
    "jobs": Kind(_INTEGER),
    "seeds": Kind(_INTEGER, lists=True),
    "trace": Kind(_STRING),
    "types": Kind(_STRING),
    "mechanisms": Kind(_STRING, lists=True),
    "round_s": Kind(_NUMBER),
    "monitor": Kind(_INTEGER, length=2),
    "preemption_overhead": Kind(_NUMBER),
    "backfill": Kind(("boolean", "string")),
    "round_timing": Kind(_STRING),
    "time_limit": Kind(_NUMBER, words=("none",)),
    "plot": Kind(_BOOLEAN),
    "rounds_csv": Kind(_BOOLEAN),
}
# Flags that say how or where to run, not what: a config cannot set them (they stay on the command line).
COMMAND_LINE_ONLY = ("help", "experiment", "resume", "workers", "dask", "out", "no_progress", "wide")


def check_setting(field: str, key: str, value: Any) -> None:
    """Refuse ``key = value`` unless ``key`` is a setting and ``value`` has one of its TOML types."""
    if key in COMMAND_LINE_ONLY:
        raise InvalidInputError(field, value, f"--{key.replace('_', '-')} is a command-line flag only, not a "
                                "setting of an experiment file")
    kind = SETTINGS.get(key)
    if kind is None:
        raise InvalidInputError(field, value, f"unknown setting; settings are the flags' names with _ for -: "
                                f"{', '.join(sorted(SETTINGS))}")
    if not _fits(kind, value):
        raise InvalidInputError(field, value, f"must be {kind.describe()}")
    if isinstance(value, list) and len(value) > MAX_LIST_VALUES:
        raise InvalidInputError(field, f"a list of {len(value)}", f"at most {MAX_LIST_VALUES} values")


def _fits(kind: Kind, value: Any) -> bool:
    if kind.nested:
        if isinstance(value, list) and value and all(isinstance(item, list) for item in value):
            return all(_numbers(item) for item in value)
        return _numbers(value)
    if kind.length is not None:
        return isinstance(value, list) and len(value) == kind.length and all(_scalar(kind, v) for v in value)
    if isinstance(value, list):
        return kind.lists and bool(value) and all(_scalar(kind, item) for item in value)
    return _scalar(kind, value)


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 3 and all(_is("number", item) for item in value)


def _scalar(kind: Kind, value: Any) -> bool:
    return any(_is(name, value) for name in kind.scalar) or (isinstance(value, str) and value in kind.words)


def _is(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return name == "boolean"
    return {"integer": isinstance(value, int), "number": isinstance(value, (int, float)),
            "string": isinstance(value, str), "boolean": False}[name]


def flag_text(value: Any) -> str:
    """A TOML value as the text of its flag: lists comma-separated (one item gets a trailing comma, so that
    ``seeds = [42]`` stays the seed list ``42,`` rather than the count ``42``), lists of lists joined by ``/``
    (``split = [[20, 70, 10], [50, 0, 50]]``), booleans as ``yes``/``no``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        if value and all(isinstance(item, list) for item in value):
            return "/".join(flag_text(item).rstrip(",") for item in value)
        text = ",".join(flag_text(item) for item in value)
        return text + "," if len(value) == 1 else text
    return repr(value) if isinstance(value, float) else str(value)
