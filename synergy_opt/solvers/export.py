"""Export a neutral model as MPS or CPLEX LP, written by HiGHS (the model itself knows no backend).

Written to be read by other tools too: columns and rows carry their blocks' names (``y_12``; a block of one row
bare, ``cpu``; one named as an LP keyword with a trailing ``_``); rows of no coefficient that 0 meets are left out,
and an objective or another row without a term gets ``0 <first column>`` (GLPK refuses them empty), an LP file of
no rows the row ``no_rows: 0 <first column> >= 0`` (GLPK refuses an empty section); an objective constant is a
column of its own fixed at 1 (``objective_constant``: GLPK refuses a constant in an LP file's objective and CBC
drops it), and a model of neither columns nor constant gets a column ``no_columns`` fixed at 0; an LP file's
integer sections are headed ``binary`` and ``general`` (HiGHS's ``bin`` and ``gen`` were read by CBC 2.10 as
variable names, so it solved the LP relaxation). An MPS file states a maximisation in an ``OBJSENSE`` section,
as CPLEX, Gurobi, SCIP and HiGHS read it; CBC 2.10 ignores that section (it minimises) and GLPK refuses it: with
those, use the LP file.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import atomic_path
from synergy_opt.solvers.model import LinearModel, as_linear_model
from synergy_opt.validation import path as path_rule

SUFFIXES = (".mps", ".lp")
OFFSET_COLUMN = "objective_constant"
NO_ROWS = "no_rows"  # the one row, 0 >= 0, of an LP file of a model without rows
NO_COLUMNS = "no_columns"  # the one column, fixed at 0, of a file of a model without columns or constant
# HiGHS's LP section headers, and what every LP reader knows them as.
_LP_SECTIONS = {"bin": "binary", "gen": "general"}
_EMPTY_OBJECTIVE = re.compile(r"^ obj:\s*$")
_EMPTY_ROW = re.compile(r"^ (?P<name>\S+): (?P<sense>>=|<=|=) (?P<rhs>\S+)\s*$")
# Words an LP file reads as its own (a block named so is written with a trailing _).
_LP_KEYWORDS = frozenset({"bin", "binary", "binaries", "bound", "bounds", "end", "free", "gen", "general",
                          "generals", "inf", "infinity", "int", "integer", "integers", "max", "maximize",
                          "maximum", "min", "minimize", "minimum", "semi", "st", "subject", "such", "obj"})


def write_model(model: LinearModel | Any, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` (a :class:`LinearModel`, or a built model holding one, as ``build_ideal``'s does) as MPS
    (``.mps``) or CPLEX LP (``.lp``), by the file's suffix (either case); returns the path. See the module for
    what other tools read of each."""
    model = as_linear_model(model)
    target = path_rule("path", path)
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise InvalidInputError("path", str(target), "the suffix must be .mps or .lp")
    from synergy_opt.solvers.highs import to_highs  # highspy on first use (no solver library at import)

    portable = _portable(model)
    highs = to_highs(portable)
    lp = highs.getLp()
    lp.model_name_ = _name(model.name) or "model"
    lp.col_names_ = _names(portable.var_blocks, portable.num_vars, "x")
    lp.row_names_ = _names(portable.con_blocks, portable.num_cons, "r")
    highs.passModel(lp)
    with atomic_path(target) as temporary:
        written = temporary.with_suffix(suffix)  # HiGHS picks the format by the suffix
        highs.writeModel(str(written))
        if written != temporary:
            written.replace(temporary)
        if suffix == ".lp":  # _portable leaves a column at least, the one the LP text's fixes name
            temporary.write_text(_readable_lp(temporary.read_text(), lp.col_names_[0]))
    return target


def _readable_lp(text: str, first: str) -> str:
    """HiGHS's LP text as GLPK and CBC read it too: the integer sections named in full, and an objective or a row
    without a term given ``0 <first column>`` (GLPK refuses an empty one: a zero objective, an infeasible row of
    no coefficient)."""
    lines: list[str] = []
    for line in text.split("\n"):
        line = _LP_SECTIONS.get(line, line)
        if _EMPTY_OBJECTIVE.match(line):
            line = f"{line.rstrip()} 0 {first}"
        elif found := _EMPTY_ROW.match(line):
            line = f" {found['name']}: 0 {first} {found['sense']} {found['rhs']}"
        elif lines and lines[-1] == "st" and not line.startswith(" "):  # no rows: GLPK refuses an empty section
            lines.append(f" {NO_ROWS}: 0 {first} >= 0")
        lines.append(line)
    return "\n".join(lines)


def _portable(model: LinearModel) -> LinearModel:
    """``model`` as every reader reads it, with the same optimum: without the rows of no coefficient that 0 meets
    (HiGHS writes one as ``name: >= -1``, which GLPK refuses), its objective constant a column fixed at 1 (a
    model of no column and no constant, a column fixed at 0)."""
    empty = np.diff(model.matrix.indptr) == 0
    idle = empty & (model.row_lower <= 0) & (model.row_upper >= 0)
    if idle.any():
        keep = np.flatnonzero(~idle)
        blocks = {name: kept for name, where in model.con_blocks.items()
                  if (kept := _kept_slice(where, keep, model.num_cons)) is not None}
        model = replace(model, matrix=model.matrix[keep], row_lower=model.row_lower[keep],
                        row_upper=model.row_upper[keep], con_blocks=blocks)
    if model.objective_offset:
        return _with_fixed_column(model, OFFSET_COLUMN, 1.0, model.objective_offset)
    if not model.num_vars:  # an LP file needs a column to write its objective and rows with
        return _with_fixed_column(model, NO_COLUMNS, 0.0, 0.0)
    return model


def _with_fixed_column(model: LinearModel, name: str, value: float, cost: float) -> LinearModel:
    """``model`` with one more column, ``name``, fixed at ``value`` and of objective ``cost``, in no row; the
    objective constant taken off (it is the column's cost when there is one)."""
    fixed = np.full(1, value)
    matrix = sp.hstack([model.matrix, sp.csr_array((model.num_cons, 1))], format="csr")
    blocks = {**model.var_blocks, name: slice(model.num_vars, model.num_vars + 1)}
    return replace(model, objective=np.r_[model.objective, cost], matrix=matrix,
                   col_lower=np.r_[model.col_lower, fixed], col_upper=np.r_[model.col_upper, fixed],
                   integer=np.r_[model.integer, False], var_blocks=blocks, objective_offset=0.0)


def _kept_slice(where: slice, keep: np.ndarray, count: int) -> slice | None:
    """Block ``where`` of the rows after only those of ``keep`` (ascending) are kept; None when none of it is."""
    start, stop, _ = where.indices(count)
    first, last = np.searchsorted(keep, start), np.searchsorted(keep, stop)
    return slice(int(first), int(last)) if last > first else None


def _names(blocks: dict[str, slice], count: int, other: str) -> list[str]:
    """Each column's (or row's) name: its block's and its place there (``y_12``), else ``<other>_<index>``."""
    names = [f"{other}_{k}" for k in range(count)]
    for block, where in blocks.items():
        stem = _name(block) or other
        indices = range(*where.indices(count))
        for k, index in enumerate(indices):
            names[index] = f"{stem}_{k}" if len(indices) != 1 else stem
    seen: set[str] = set()
    for index, name in enumerate(names):  # blocks whose names clean to one ("a b", "a_b"): kept apart
        while name in seen:
            name = f"{name}_"
        seen.add(name)
        names[index] = name
    return names


def _name(text: str) -> str:
    """Letters, digits and ``_`` only, not starting with a digit (what MPS and LP readers all take in a name)."""
    cleaned = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    if cleaned.lower() in _LP_KEYWORDS:
        return f"{cleaned}_"
    return f"n_{cleaned}" if cleaned[:1].isdigit() else cleaned
