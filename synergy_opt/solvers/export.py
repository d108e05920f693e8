"""Export a neutral model as MPS or CPLEX LP, written by HiGHS (the model itself knows no backend)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import atomic_path
from synergy_opt.solvers.model import LinearModel, as_linear_model

SUFFIXES = (".mps", ".lp")


def write_model(model: LinearModel | Any, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` (a :class:`LinearModel`, or a built model holding one, as ``build_ideal``'s does) as MPS
    (``.mps``) or CPLEX LP (``.lp``), by the file's suffix; returns the path."""
    model = as_linear_model(model)
    target = Path(path)
    if target.suffix not in SUFFIXES:
        raise InvalidInputError("path", str(target), "the suffix must be .mps or .lp")
    from synergy_opt.solvers.highs import to_highs  # highspy on first use (no solver library at import)

    with atomic_path(target) as temporary:  # same suffix: HiGHS picks the format by it
        to_highs(model).writeModel(str(temporary))
    return target
