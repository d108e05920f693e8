"""The paper's simulated experiments as named configs: TOML files of command-line settings.

``synergy_opt/sim/experiments/<name>.toml`` holds one experiment: a ``description`` and the settings of
``python -m synergy_opt.sim``, each key a flag's name with ``_`` for ``-`` (``multi_gpu = true`` is
``--multi-gpu``, ``load = [2, 4, 9]`` is ``--load 2,4,9``). ``--experiment NAME`` runs one; flags given on the
command line override its settings; ``--experiment path/to/file.toml`` runs a user's copy. Each file says in a
comment which figure of the paper (section 5.3-5.7) or of its artifact it follows.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import read_text

EXPERIMENTS_DIR = Path(__file__).with_name("experiments")
SUFFIX = ".toml"


@dataclass(frozen=True)
class Experiment:
    """A named experiment: where it was read from, what it reproduces, and its settings (flag name -> value)."""

    name: str
    path: Path
    description: str
    settings: dict[str, Any]


def experiment_names() -> list[str]:
    """The experiments shipped with the package, sorted."""
    return sorted(path.stem for path in EXPERIMENTS_DIR.glob(f"*{SUFFIX}"))


def load_experiment(name: str) -> Experiment:
    """The shipped experiment ``name``, or the TOML file at the path ``name``.

    Raises
    ------
    InvalidInputError
        Naming ``experiment`` for an unknown name or a missing file, or the file and key for malformed TOML
        or a value that is not a string, number, boolean or list of them.
    """
    shipped = EXPERIMENTS_DIR / f"{name}{SUFFIX}"
    path = shipped if shipped.is_file() else Path(name)
    if not os.path.lexists(path):  # anything there (a folder, a FIFO, a symlink loop) is read_text's to refuse
        raise InvalidInputError(
            "experiment", name, f"neither a named experiment ({', '.join(experiment_names())}) nor a TOML file"
        )
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as error:
        raise InvalidInputError("experiment", str(path), f"is not valid TOML: {error}") from None
    description = data.pop("description", "")
    if not isinstance(description, str):
        raise InvalidInputError(f"{path}: description", description, "must be a string")
    for key, value in data.items():
        if not _plain(value):
            raise InvalidInputError(f"{path}: {key}", value, "must be a string, number, boolean or list of them")
    return Experiment(path.stem, path, description.strip(), data)


def _plain(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (str, int, float, bool)):
        return True
    return isinstance(value, list) and depth < 2 and all(_plain(item, depth + 1) for item in value)


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
    return str(value)
