"""A solver-neutral linear model: sparse rows, bounds, integrality, and named variable/constraint blocks.

The formulations' builders make one of these once, vectorised; every backend of :mod:`synergy_opt.solvers`
consumes the same object, and :func:`synergy_opt.solvers.write_model` exports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import scipy.sparse as sp

from synergy_opt.errors import InvalidInputError

Sense = Literal["max", "min"]


@dataclass(frozen=True, eq=False)
class LinearModel:
    """``sense c.x + offset`` subject to ``row_lower <= A x <= row_upper``, ``col_lower <= x <= col_upper``."""

    name: str
    sense: Sense
    objective: np.ndarray
    matrix: sp.csr_array
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    var_blocks: dict[str, slice] = field(default_factory=dict)
    con_blocks: dict[str, slice] = field(default_factory=dict)
    objective_offset: float = 0.0

    @property
    def num_vars(self) -> int:
        return int(self.objective.size)

    @property
    def num_cons(self) -> int:
        return int(self.row_lower.size)

    @property
    def is_mip(self) -> bool:
        return bool(self.integer.any())

    def relaxed(self) -> LinearModel:
        """The LP relaxation: the same model with every variable continuous."""
        return replace(self, name=f"{self.name}_lp", integer=np.zeros_like(self.integer))

    def block(self, x: np.ndarray, name: str) -> np.ndarray:
        """The values of variable block ``name`` in the solution vector ``x``."""
        return x[self.var_blocks[name]]


class ModelBuilder:
    """Accumulates variable and constraint blocks as COO triplets, then freezes into a LinearModel."""

    def __init__(self, name: str, sense: Sense) -> None:
        self.name = name
        self.sense: Sense = sense
        self._cols: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._rows: list[tuple[np.ndarray, np.ndarray]] = []
        self._entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.var_blocks: dict[str, slice] = {}
        self.con_blocks: dict[str, slice] = {}
        self.num_vars = 0
        self.num_cons = 0

    def add_vars(
        self,
        name: str,
        count: int,
        *,
        lower: float | np.ndarray = 0.0,
        upper: float | np.ndarray = np.inf,
        integer: bool | np.ndarray = False,
        objective: float | np.ndarray = 0.0,
    ) -> slice:
        """A block of ``count`` variables; returns its column slice."""
        block = slice(self.num_vars, self.num_vars + count)
        self._cols.append((
            np.broadcast_to(np.asarray(objective, dtype=float), (count,)),
            np.broadcast_to(np.asarray(lower, dtype=float), (count,)),
            np.broadcast_to(np.asarray(upper, dtype=float), (count,)),
            np.broadcast_to(np.asarray(integer, dtype=bool), (count,)),
        ))
        self.var_blocks[name] = block
        self.num_vars += count
        return block

    def add_rows(
        self,
        name: str,
        rows: np.ndarray,
        cols: np.ndarray,
        values: np.ndarray,
        *,
        lower: float | np.ndarray = -np.inf,
        upper: float | np.ndarray = np.inf,
        count: int | None = None,
        equilibrate: bool = False,
    ) -> slice:
        """A block of constraints given as triplets with row numbers local to the block (0..count-1).

        ``equilibrate`` divides each row (values and bounds) by its largest coefficient's magnitude: the
        solvers' feasibility tolerances are absolute (HiGHS: 1e-6), so a row of small terms (a floor of 1e-4)
        would otherwise be met by a config 0.5% below it."""
        rows = np.asarray(rows, dtype=np.int64)
        count = int(rows.max()) + 1 if count is None and rows.size else (count or 0)
        if equilibrate:
            size = np.zeros(count)
            np.maximum.at(size, rows, np.abs(np.asarray(values, dtype=float)))
            size[size == 0] = 1.0
            values = np.asarray(values, dtype=float) / size[rows]
            lower, upper = np.asarray(lower, dtype=float) / size, np.asarray(upper, dtype=float) / size
        block = slice(self.num_cons, self.num_cons + count)
        self._entries.append((rows + self.num_cons, np.asarray(cols, dtype=np.int64), np.asarray(values, dtype=float)))
        self._rows.append((
            np.broadcast_to(np.asarray(lower, dtype=float), (count,)),
            np.broadcast_to(np.asarray(upper, dtype=float), (count,)),
        ))
        self.con_blocks[name] = block
        self.num_cons += count
        return block

    def build(self) -> LinearModel:
        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

        objective, col_lower, col_upper, integer = (
            cat([c[i] for c in self._cols], t) for i, t in enumerate((float, float, float, bool))
        )
        row_lower = cat([r[0] for r in self._rows], float)
        row_upper = cat([r[1] for r in self._rows], float)
        rows = cat([e[0] for e in self._entries], np.int64)
        cols = cat([e[1] for e in self._entries], np.int64)
        values = cat([e[2] for e in self._entries], float)
        matrix = sp.csr_array((values, (rows, cols)), shape=(self.num_cons, self.num_vars))
        matrix.sum_duplicates()
        return LinearModel(
            name=self.name,
            sense=self.sense,
            objective=objective,
            matrix=matrix,
            row_lower=row_lower,
            row_upper=row_upper,
            col_lower=col_lower,
            col_upper=col_upper,
            integer=integer,
            var_blocks=dict(self.var_blocks),
            con_blocks=dict(self.con_blocks),
        )


def as_linear_model(value: object, field: str = "model") -> LinearModel:
    """``value`` if it is a :class:`LinearModel`, or the one a formulation's built model holds (``build_ideal``'s
    ``IdealModel.model``, say), so that solving or exporting what a builder returned works either way."""
    if isinstance(value, LinearModel):
        return value
    inner = getattr(value, "model", None)
    if isinstance(inner, LinearModel):
        return inner
    raise InvalidInputError(field, type(value).__name__, "must be a LinearModel, or a built model holding one as "
                            ".model (build_ideal's, say)")
