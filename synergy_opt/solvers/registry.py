"""Every backend, registered by name, with lazily probed availability and declared capabilities.

Importing this module imports no solver library: a missing optional solver never breaks ``import``.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from synergy_opt.errors import SolverUnavailableError, UnknownNameError
from synergy_opt.profile import median_positive
from synergy_opt.solvers.base import Capabilities, SolveResult, SolverParams, Status, find_binary
from synergy_opt.solvers.model import LinearModel, as_linear_model
from synergy_opt.validation import SOLVER_SETTINGS, OneOf, Rule

DEFAULT_SOLVER = "highs"


@dataclass(frozen=True)
class BackendSpec:
    """How to reach one backend: its module and function, and what must be installed for it."""

    name: str
    module: str
    function: str
    capabilities: Capabilities
    python_modules: tuple[str, ...] = ()
    binaries: tuple[str, ...] = ()
    description: str = ""
    # A function in ``module`` that raises InvalidInputError for an option the backend does not know or take.
    options_check: str = ""

    def missing(self) -> list[str]:
        """What is not installed here (empty when the backend is available)."""
        lacking = [f"python module {m!r}" for m in self.python_modules if importlib.util.find_spec(m) is None]
        lacking += [f"binary {b!r} on PATH (pip install 'synergy_opt[solvers]' brings it)"
                    for b in self.binaries if find_binary(b) is None]
        return lacking

    def available(self) -> bool:
        return not self.missing()

    def load(self) -> Callable[[LinearModel, SolverParams], SolveResult]:
        lacking = self.missing()
        if lacking:
            raise SolverUnavailableError(
                f"solver {self.name!r} is not installed here (missing {', '.join(lacking)}); "
                f"available: {', '.join(available_solvers())}"
            )
        solve: Callable[[LinearModel, SolverParams], SolveResult] = getattr(
            importlib.import_module(self.module), self.function
        )
        return solve

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidInputError` for an option the backend does not know (the error lists the known
        ones, or the closest when they are many) or a value it does not take."""
        if options and self.options_check:
            self.load()  # a clear error first if the backend is not installed
            check: Callable[[Mapping[str, Any]], None] = getattr(
                importlib.import_module(self.module), self.options_check
            )
            check(options)


_ALL = Capabilities()
_NO_VERTEX = Capabilities(vertex_lp=False)
# CP-SAT: integer variables only, and no LP at all, so no vertex solutions.
_INTEGER_ONLY = Capabilities(continuous=False, vertex_lp=False)
_REGISTRY: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("highs", "synergy_opt.solvers.highs", "solve", _ALL, ("highspy",),
                    description="HiGHS via highspy, arrays passed directly",
                    options_check="check_options"),
        BackendSpec("pyomo-highs", "synergy_opt.solvers.pyomo_backend", "solve_highs", _ALL, ("pyomo", "highspy"),
                    description="HiGHS via Pyomo's contrib.solver interface (highspy in process)",
                    options_check="check_highs_options"),
        BackendSpec("pyomo-glpk", "synergy_opt.solvers.pyomo_backend", "solve_glpk", _ALL, ("pyomo",), ("glpsol",),
                    description="GLPK via Pyomo's shell interface (LP file, glpsol binary)",
                    options_check="check_glpk_options"),
        BackendSpec("pyomo-cbc", "synergy_opt.solvers.pyomo_backend", "solve_cbc", _ALL, ("pyomo",), ("cbc",),
                    description="CBC via Pyomo's shell interface (LP file, cbc binary)",
                    options_check="check_cbc_options"),
        BackendSpec("ortools-cpsat", "synergy_opt.solvers.ortools_backend", "solve_cpsat", _INTEGER_ONLY, ("ortools",),
                    description="OR-Tools CP-SAT; pure integer models, rows scaled to integral coefficients",
                    options_check="check_cpsat_options"),
        BackendSpec("ortools-scip", "synergy_opt.solvers.ortools_backend", "solve_scip", _NO_VERTEX, ("ortools",),
                    description="SCIP via OR-Tools MathOpt, model passed as one ModelProto",
                    options_check="check_scip_options"),
    )
}


def register(spec: BackendSpec) -> None:
    """Add a backend (used by the modules below and by users with solvers of their own)."""
    _REGISTRY[spec.name] = spec


def solver_names() -> tuple[str, ...]:
    """Every registered backend, installed or not."""
    return tuple(_REGISTRY)


# A solver argument names a registered backend (installed or not: solving says what is missing), and the
# arguments every solve_* function takes.
SOLVER = OneOf(solver_names)
SOLVER_ARGUMENTS: dict[str, Rule] = {"solver": SOLVER, **SOLVER_SETTINGS}


def available_solvers() -> tuple[str, ...]:
    """The registered backends whose libraries and binaries are installed here."""
    return tuple(name for name, spec in _REGISTRY.items() if spec.available())


def backend(name: str) -> BackendSpec:
    if name not in _REGISTRY:
        raise UnknownNameError("solver", name, solver_names())
    return _REGISTRY[name]


def solve_model(model: LinearModel | Any, solver: str = DEFAULT_SOLVER, params: SolverParams | None = None
                ) -> SolveResult:
    """Solve a neutral model (or the one a built model holds, as ``build_ideal``'s does) with the named backend."""
    model = as_linear_model(model)
    spec = backend(solver)
    solve = spec.load()
    params = params or SolverParams()
    spec.check_options(params.options)
    if model.is_mip and not spec.capabilities.integer:
        raise SolverUnavailableError(f"solver {solver!r} cannot solve integer models")
    if not spec.capabilities.continuous and not bool(model.integer.all()):
        raise SolverUnavailableError(
            f"solver {solver!r} needs every variable integer; {model.name} has continuous ones"
        )
    too_large = coefficient_out_of_range(model)
    if too_large:
        return SolveResult(status=Status.ERROR, solver=solver, message=too_large, native_status="not solved")
    lift = row_lift(model)
    if lift is not None:
        rows = np.repeat(lift, np.diff(model.matrix.indptr))  # each entry's row's lift
        matrix = sp.csr_array((model.matrix.data * rows, model.matrix.indices, model.matrix.indptr), model.matrix.shape)
        model = replace(model, matrix=matrix, row_lower=model.row_lower * lift, row_upper=model.row_upper * lift)
    scale = objective_scale(model)
    if scale == 1.0 and lift is None:
        return solve(model, params)
    result = solve(replace(model, objective=model.objective * scale, objective_offset=model.objective_offset * scale),
                   params)
    duals = None if result.row_duals is None else result.row_duals / scale * (1.0 if lift is None else lift)
    return replace(result, objective=None if result.objective is None else result.objective / scale,
                   bound=None if result.bound is None else result.bound / scale, row_duals=duals)


def row_lift(model: LinearModel) -> np.ndarray | None:
    """Per row, the power of two that brings a row whose every coefficient and finite bound is below 1 in
    magnitude to a largest one in ``[1, 2)``, or a row whose every non-zero coefficient and bound is at least
    :data:`LARGE_ROW` to a smallest one in ``[1, 2)`` (1 for the other rows); None when no row is that small or
    large. Backends hold rows to absolute tolerances (HiGHS's MIP: 1e-6), so a memory row of 2e-5 GB was passed
    by 4% and pyomo-highs called an infeasible point optimal; memory in bytes (a row of 5e10) left HiGHS's LP
    relaxation 4% below the ILP's optimum, called optimal. A row mixing large and small entries is left alone
    (the policies' equilibrated rows: scaled down, their small entries fell under the tolerances). A power of two
    changes no comparison; a row's dual in the lifted model is its dual over the lift."""
    if not model.num_cons:
        return None
    matrix = model.matrix
    largest = np.zeros(model.num_cons)
    smallest = np.full(model.num_cons, np.inf)
    filled = np.flatnonzero(np.diff(matrix.indptr) > 0)
    if filled.size:
        entries = np.abs(matrix.data)
        largest[filled] = np.maximum.reduceat(entries, matrix.indptr[filled])
        smallest[filled] = np.minimum.reduceat(np.where(entries > 0, entries, np.inf), matrix.indptr[filled])
    for bound in (model.row_lower, model.row_upper):
        size = np.where(np.isfinite(bound), np.abs(bound), 0.0)
        largest = np.maximum(largest, size)
        smallest = np.minimum(smallest, np.where(size > 0, size, np.inf))
    lift = row_unit_scale(largest, np.where(np.isfinite(smallest), smallest, 0.0))
    return None if np.all(lift == 1.0) else lift


# Rows whose every non-zero entry is this or more are brought down so that the smallest is in [1, 2) (memory in
# bytes: 80 GB is 8e10). Rounds in the units of the built-in profiles (CPUs, GB) stay far below it, so their
# models are handed over unchanged.
LARGE_ROW = 2.0**30


def row_unit_scale(largest: np.ndarray, smallest: np.ndarray | None = None) -> np.ndarray:
    """Per row, the power of two that brings a largest magnitude in ``(0, 1)`` to ``[1, 2)``, or a smallest
    non-zero one (default: the largest) of at least :data:`LARGE_ROW` to ``[1, 2)`` (within ``2^-1000 ..
    2^1000``, so that a subnormal one stays finite), 1 for the others."""
    smallest = largest if smallest is None else smallest
    up = (largest > 0) & (largest < 1)
    down = smallest >= LARGE_ROW
    exponent = np.where(up, -np.floor(np.log2(np.where(up, largest, 1.0))), 0.0)
    exponent = np.where(down, -np.floor(np.log2(np.where(down, smallest, 1.0))), exponent)
    return np.exp2(np.clip(exponent, -1000.0, 1000.0))


# Constraint coefficients of this magnitude or more are refused before any backend sees them: HiGHS rejects such
# a matrix (its large_matrix_value) and was left with an empty model it called OPTIMAL at 0, Pyomo's HiGHS
# returned every column at 1, SCIP and CBC read 1e20 as infinite (SCIP's wrapper raised, CBC found it infeasible).
LARGEST_COEFFICIENT = 1e15


def coefficient_out_of_range(model: LinearModel) -> str:
    """Why ``model`` cannot be handed to a backend (a constraint coefficient of magnitude at least
    :data:`LARGEST_COEFFICIENT`, named by its row block), or "" when it can."""
    if float(np.max(np.abs(model.matrix.data), initial=0.0)) < LARGEST_COEFFICIENT:
        return ""  # the usual case, without converting the matrix
    matrix = model.matrix.tocoo()
    at = int(np.argmax(np.abs(matrix.data)))
    largest = float(matrix.data[at])
    row = int(matrix.row[at])
    block = next((name for name, rows in model.con_blocks.items() if rows.start <= row < rows.stop), f"row {row}")
    return (f"not solved: a coefficient of {largest:g} in the rows {block!r} of {model.name}; the backends take "
            f"magnitudes below {LARGEST_COEFFICIENT:g} (HiGHS refuses larger ones, SCIP and CBC read 1e20 as "
            "infinite)")


# Objective coefficients whose largest magnitude lies outside this band are rescaled before a backend sees them:
# solvers' tolerances are absolute (HiGHS: 1e-7 on reduced costs), so throughputs of 1e-7 were read as ties and
# the ideal ILP's optimum fell 14% short, reported optimal. Inside the band nothing changes.
OBJECTIVE_BAND = (1e-2, 1e6)


def band_scale(largest: float, typical: Callable[[], float] | None = None) -> float:
    """1.0 when ``largest`` (a magnitude) is 0 or inside ``OBJECTIVE_BAND``, else the power of two that brings it
    to ``[1, 2)`` (a power of two scales every value exactly, so no comparison between them changes).

    ``typical`` (called only when ``largest`` is outside the band) gives an ordinary magnitude of the values, say
    their median: when bringing ``largest`` to ``[1, 2)`` would take that below the band (values spread over more
    than the band's range: one unreachable 3e6 among throughputs of about 1 made them 5e-7, under the solvers'
    tolerances, and the ideal ILP OPTIMAL at 0), the factor brings ``largest`` just inside the band's top instead,
    to ``[2^18, 2^19)``, which keeps the ordinary values as large as the band allows."""
    low, high = OBJECTIVE_BAND
    if largest <= 0.0 or low <= largest <= high:
        return 1.0
    exponent = math.frexp(largest)[1]
    factor = math.ldexp(1.0, 1 - exponent)
    if typical is not None and 0.0 < typical() * factor < low:
        factor = math.ldexp(1.0, math.frexp(high)[1] - 1 - exponent)
    return factor


def objective_scale(model: LinearModel) -> float:
    """The factor :func:`solve_model` multiplies ``model``'s objective by (:func:`band_scale` of its largest
    coefficient, its median non-zero one the typical)."""
    magnitudes = np.abs(model.objective)
    return band_scale(float(np.max(magnitudes, initial=0.0)), lambda: median_positive(magnitudes))
