"""OR-Tools backends: CP-SAT (pure integer models) and SCIP through MathOpt.

Both consume the neutral :class:`~synergy_opt.solvers.model.LinearModel` and return the common
:class:`~synergy_opt.solvers.base.SolveResult`; every native status maps through one table per backend.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Mapping
from datetime import timedelta
from fractions import Fraction
from typing import Any

import numpy as np
from ortools.math_opt import model_pb2
from ortools.math_opt.python import mathopt
from ortools.sat import sat_parameters_pb2
from ortools.sat.python import cp_model

from synergy_opt.errors import InvalidInputError, SolverUnavailableError
from synergy_opt.solvers.base import (
    Capabilities,
    SolveResult,
    SolverParams,
    Status,
    settle_infeasible_or_unbounded,
    silenced_output,
)
from synergy_opt.solvers.model import LinearModel
from synergy_opt.validation import unknown_option

CPSAT_CAPABILITIES = Capabilities(integer=True, continuous=False, time_limit=True, mip_gap=True, vertex_lp=False)
# SCIP solves LPs by simplex, but presolve/postsolve through MathOpt does not promise a basic solution.
SCIP_CAPABILITIES = Capabilities(integer=True, continuous=True, time_limit=True, mip_gap=True, vertex_lp=False)

# CP-SAT needs finite integer domains: an infinite column bound becomes +-INFINITE_BOUND. Small enough that
# coefficient * bound sums stay far from int64 overflow, large enough for any count this toolkit models.
INFINITE_BOUND = 10**9
# Each coefficient is read as a fraction with denominator <= MAX_DENOMINATOR (50/3 GB per GPU is exact), and
# each row is scaled by the least common multiple of its denominators, at most MAX_ROW_SCALE.
MAX_DENOMINATOR = 10**6
MAX_ROW_SCALE = 10**9
_INTEGRAL_TOL = 1e-9

_CP = cp_model.CpSolverStatus
# Every CP-SAT status. None: a limit stopped the search; FEASIBLE or NO_SOLUTION by whether an incumbent exists
# (CP-SAT reports FEASIBLE for "stopped with a solution" and UNKNOWN for "stopped without one").
_CPSAT_STATUS: dict[Any, Status | None] = {
    _CP.OPTIMAL: Status.OPTIMAL,
    _CP.FEASIBLE: None,
    _CP.UNKNOWN: None,
    _CP.INFEASIBLE: Status.INFEASIBLE,
    _CP.MODEL_INVALID: Status.ERROR,
}

_T = mathopt.TerminationReason
# Every MathOpt termination reason. INFEASIBLE_OR_UNBOUNDED is resolved from the problem status below.
_MATHOPT_STATUS: dict[mathopt.TerminationReason, Status | None] = {
    _T.OPTIMAL: Status.OPTIMAL,
    _T.INFEASIBLE: Status.INFEASIBLE,
    _T.UNBOUNDED: Status.UNBOUNDED,
    _T.INFEASIBLE_OR_UNBOUNDED: Status.INFEASIBLE,
    _T.FEASIBLE: None,
    _T.NO_SOLUTION_FOUND: None,
    # Solved, but the solver cannot vouch for its tolerances: report an error rather than a false optimum.
    _T.IMPRECISE: Status.ERROR,
    _T.NUMERICAL_ERROR: Status.ERROR,
    _T.OTHER_ERROR: Status.ERROR,
}

# SCIP parameters of type longint: integer options with these names go to GScip's long_params.
_SCIP_LONG_PARAMS = frozenset({
    "limits/nodes", "limits/totalnodes", "limits/stallnodes", "lp/iterlim", "lp/rootiterlim",
})


# ---------------------------------------------------------------------------------------------------------- CP-SAT


def integer_rows(model: LinearModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Scale each row by the least common multiple of its coefficients' denominators.

    Coefficients are read as fractions with denominators up to ``MAX_DENOMINATOR`` (so decimal data and
    thirds such as 50/3 are exact). Because every variable is integer, a row with integral coefficients has
    an integral activity, so its scaled bounds are then rounded inward (``ceil`` lower, ``floor`` upper)
    without changing the feasible set; the bounds therefore need not be integral themselves.

    Returns
    -------
    coefficients, lower, upper, scale
        int64 coefficients in the csr order of ``model.matrix``; float row bounds (integral or infinite); and
        the per-row scale factors.

    Raises
    ------
    SolverUnavailableError
        When a coefficient is no such fraction, or a row would need a scale above ``MAX_ROW_SCALE``.
    """
    matrix = model.matrix
    data = matrix.data
    row_of = np.repeat(np.arange(model.num_cons), np.diff(matrix.indptr))
    values, inverse = np.unique(data, return_inverse=True)
    denominators = np.array([_denominator(float(v)) for v in values], dtype=np.int64)
    entry_denominator = denominators[inverse.ravel()]
    if (entry_denominator == 0).any():
        entry = int(np.flatnonzero(entry_denominator == 0)[0])
        row = int(row_of[entry])
        raise SolverUnavailableError(
            f"ortools-cpsat needs rational row coefficients: row {row}{_block_of(model, row)} has coefficient "
            f"{data[entry]!r}, no fraction with denominator <= {MAX_DENOMINATOR}; use a MIP backend"
        )
    row_scale = np.ones(model.num_cons, dtype=np.int64)
    np.lcm.at(row_scale, row_of, entry_denominator)
    if (row_scale > MAX_ROW_SCALE).any() or (row_scale <= 0).any():
        row = int(np.flatnonzero((row_scale > MAX_ROW_SCALE) | (row_scale <= 0))[0])
        raise SolverUnavailableError(
            f"ortools-cpsat: row {row}{_block_of(model, row)} needs a scale above {MAX_ROW_SCALE} to be integral"
        )
    scale = row_scale.astype(float)
    coefficients = np.round(data * scale[row_of]).astype(np.int64)
    with np.errstate(invalid="ignore"):
        lo = model.row_lower * scale
        hi = model.row_upper * scale
    lower = np.where(np.isfinite(lo), np.ceil(lo - _INTEGRAL_TOL * np.maximum(1.0, np.abs(lo))), -np.inf)
    upper = np.where(np.isfinite(hi), np.floor(hi + _INTEGRAL_TOL * np.maximum(1.0, np.abs(hi))), np.inf)
    return coefficients, lower, upper, scale


def _denominator(value: float) -> int:
    """Denominator of ``value`` as a fraction with denominator <= MAX_DENOMINATOR, or 0 if it is none."""
    fraction = Fraction(value).limit_denominator(MAX_DENOMINATOR)
    exact = abs(float(fraction) - value) <= _INTEGRAL_TOL * max(1.0, abs(value))
    return fraction.denominator if exact else 0


def _block_of(model: LinearModel, row: int) -> str:
    for name, block in model.con_blocks.items():
        if block.start <= row < block.stop:
            return f" (block {name!r})"
    return ""


def _column_domains(model: LinearModel, box: int) -> tuple[np.ndarray, np.ndarray]:
    lower = np.where(np.isfinite(model.col_lower), np.ceil(model.col_lower - _INTEGRAL_TOL), -box)
    upper = np.where(np.isfinite(model.col_upper), np.floor(model.col_upper + _INTEGRAL_TOL), box)
    return lower.astype(np.int64), upper.astype(np.int64)


def _cpsat_model(model: LinearModel, rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                 col_lower: np.ndarray, col_upper: np.ndarray) -> tuple[cp_model.CpModel, list[cp_model.IntVar]]:
    cp = cp_model.CpModel()
    cp.name = model.name
    x = [cp.new_int_var(int(lo), int(hi), f"x{j}") for j, (lo, hi) in enumerate(zip(col_lower, col_upper, strict=True))]
    coefficients, lower, upper, _ = rows
    indptr, indices = model.matrix.indptr, model.matrix.indices
    for i in range(model.num_cons):
        if not (np.isfinite(lower[i]) or np.isfinite(upper[i])):
            continue  # a free row constrains nothing
        begin, end = indptr[i], indptr[i + 1]
        expr = cp_model.LinearExpr.weighted_sum([x[j] for j in indices[begin:end]], coefficients[begin:end].tolist())
        lo = int(lower[i]) if np.isfinite(lower[i]) else cp_model.INT_MIN
        hi = int(upper[i]) if np.isfinite(upper[i]) else cp_model.INT_MAX
        cp.add_linear_constraint(expr, lo, hi)  # lo > hi is an empty domain: CP-SAT proves infeasibility
    nonzero = np.flatnonzero(model.objective)
    costs = model.objective[nonzero]
    integral = bool(np.all(costs == np.round(costs)))
    # CP-SAT takes float objective coefficients (a floating-point objective); integral ones stay exact.
    weights = [int(c) for c in costs] if integral else costs.tolist()
    objective = cp_model.LinearExpr.weighted_sum([x[j] for j in nonzero], weights) + model.objective_offset
    if model.sense == "max":
        cp.maximize(objective)
    else:
        cp.minimize(objective)
    return cp, x


def check_cpsat_options(options: Mapping[str, Any]) -> None:
    """Names must be fields of the ``SatParameters`` proto, values of the field's type (the proto checks)."""
    fields = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    probe = sat_parameters_pb2.SatParameters()
    for key, value in options.items():
        if key not in fields:
            raise unknown_option("CP-SAT", key, value, fields, "ortools.sat.sat_parameters_pb2.SatParameters")
        try:
            setattr(probe, key, value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"options.{key}", value, f"not a value CP-SAT takes for it: {exc}") from None


def _cpsat_solver(params: SolverParams) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    p = solver.parameters
    if params.time_limit is not None:
        p.max_time_in_seconds = float(params.time_limit)
    p.relative_gap_limit = float(params.mip_gap)
    p.num_workers = 0 if params.threads is None else int(params.threads)  # 0: CP-SAT picks from the cores
    p.random_seed = int(params.seed)
    p.log_search_progress = bool(params.verbose)
    # The LP relaxation of every row, not only of the simple ones (CP-SAT's default, 1): the toolkit's models are
    # MILPs whose cover and capacity rows CP-SAT's search alone is weak on. With 1, on 2 cores (2 workers),
    # CP-SAT did not prove the joint's patterns model of 9 of 26 small rounds in 5 s (8 fuzzed ones; on a
    # hand-made 6-job heterogeneous one it found no solution in 30 s); with 2, all 26 in 5 s together, and the
    # backend tests' integer models and OPT's milp-integral at 32 GPUs 3-6x faster. The price: the noisy
    # 1024-GPU ideal ILP on one worker took up to 30% longer in a review's runs (none in ours, on 2 workers).
    # An option given overrides it.
    p.linearization_level = 2
    for key, value in params.options.items():  # checked by check_cpsat_options
        setattr(p, key, value)
    return solver


def solve_cpsat(model: LinearModel, params: SolverParams) -> SolveResult:
    """Solve a pure integer ``model`` with CP-SAT.

    Rows are made integral by :func:`integer_rows`. Infinite column bounds become ``+-INFINITE_BOUND``; when an
    optimal solution touches that artificial box, the model is re-solved in a box 1000 times smaller, and a worse
    optimum there is reported as UNBOUNDED (an inference, said so in the message): CP-SAT itself cannot prove
    unboundedness.

    Parameters
    ----------
    model
        A model whose variables are all integer.
    params
        ``time_limit`` -> ``max_time_in_seconds``, ``mip_gap`` -> ``relative_gap_limit``, ``threads`` ->
        ``num_workers`` (None: all cores), ``seed`` -> ``random_seed``, ``verbose`` -> ``log_search_progress``;
        ``linearization_level`` is 2 (every row's LP relaxation); ``options`` are set on ``SatParameters`` by
        name, after those.
    """
    start = time.perf_counter()
    if not bool(model.integer.all()):
        raise SolverUnavailableError(f"ortools-cpsat needs every variable integer; {model.name} has continuous ones")
    rows = integer_rows(model)
    col_lower, col_upper = _column_domains(model, INFINITE_BOUND)
    if (col_lower > col_upper).any():
        j = int(np.flatnonzero(col_lower > col_upper)[0])
        return SolveResult(status=Status.INFEASIBLE, solver="ortools-cpsat", build_seconds=time.perf_counter() - start,
                           message=f"integer column {j} has no integer value within [{model.col_lower[j]}, "
                                   f"{model.col_upper[j]}]", native_status="presolve")
    cp, _ = _cpsat_model(model, rows, col_lower, col_upper)
    invalid = cp.validate()
    solver = _cpsat_solver(params)
    built = time.perf_counter()
    if invalid:
        return SolveResult(status=Status.ERROR, solver="ortools-cpsat", build_seconds=built - start,
                           message=f"CP-SAT rejected the model: {invalid}", native_status="MODEL_INVALID")
    native = solver.solve(cp)

    has_incumbent = native in (_CP.OPTIMAL, _CP.FEASIBLE)
    status = _CPSAT_STATUS.get(native, Status.ERROR)
    if status is None:
        status = Status.FEASIBLE if has_incumbent else Status.NO_SOLUTION
    message = f"CP-SAT {solver.status_name(native)}"
    if native == _CP.MODEL_INVALID:  # the model is valid (checked above): a parameter out of range, say
        info = solver.response_proto.solution_info
        named = re.search(r"[Pp]arameters? '?([a-z_]+)", info)  # "parameter 'x' should", "Parameters x must"
        if named and named.group(1) in params.options:  # the caller's option: an input error, as other backends'
            raise InvalidInputError(f"options[{named.group(1)!r}]", params.options[named.group(1)], info)
        message += f": {info}" if info else ""
    values = np.array(solver.response_proto.solution, dtype=float) if status.has_solution else None
    # CP-SAT stopped without a solution reports a bound it may not have computed (0.0 on a maximisation whose
    # optimum is 562, a time limit of 0.1 s): only a bound beside a solution is read.
    bound = float(solver.best_objective_bound) if values is not None else None

    artificial = np.zeros(model.num_vars, dtype=bool)
    if values is not None:
        artificial = ((~np.isfinite(model.col_lower)) & (values <= -INFINITE_BOUND)) | (
            (~np.isfinite(model.col_upper)) & (values >= INFINITE_BOUND))
    if artificial.any() and status is Status.OPTIMAL and values is not None:
        smaller = _reduced_box_objective(model, rows, params)
        if smaller is not None and abs(smaller - float(model.objective @ values)) > 1e-9 * max(1.0, abs(smaller)):
            status, values, bound = Status.UNBOUNDED, None, None
            message += (f"; inferred UNBOUNDED: the optimum moved with the artificial bound +-{INFINITE_BOUND} "
                        "substituted for infinite column bounds (or the true optimum lies beyond it)")
        else:
            message += f"; some columns sit at the artificial bound +-{INFINITE_BOUND} with no effect on the optimum"
    elif artificial.any():
        message += f"; some columns sit at the artificial bound +-{INFINITE_BOUND} (model may be unbounded)"
    objective = float(model.objective @ values + model.objective_offset) if values is not None else None
    if bound is not None and not math.isfinite(bound):
        bound = None
    if bound is not None and objective is not None and (bound - objective) * (1 if model.sense == "max" else -1) \
            < -1e-9 * max(1.0, abs(objective)):
        bound = None  # on the wrong side of its own solution: not a bound
    solved = time.perf_counter()  # includes the reduced-box re-solve, when there was one
    return SolveResult(
        status=status,
        solver="ortools-cpsat",
        objective=objective,
        bound=bound,
        x=values,
        build_seconds=built - start,
        solve_seconds=solved - built,
        message=message,
        is_vertex=None,
        native_status=solver.status_name(native),
    )


def _reduced_box_objective(model: LinearModel, rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                           params: SolverParams) -> float | None:
    col_lower, col_upper = _column_domains(model, INFINITE_BOUND // 1000)
    if (col_lower > col_upper).any():
        return None
    cp, _ = _cpsat_model(model, rows, col_lower, col_upper)
    solver = _cpsat_solver(params)
    if solver.solve(cp) != _CP.OPTIMAL:
        return None
    return float(model.objective @ np.array(solver.response_proto.solution, dtype=float))


# ------------------------------------------------------------------------------------------------------------ SCIP


def to_mathopt(model: LinearModel) -> mathopt.Model:
    """A MathOpt model holding ``model``, built as one ModelProto from the arrays (no per-row Python objects)."""
    proto = model_pb2.ModelProto(name=model.name)
    ids = np.arange(model.num_vars, dtype=np.int64).tolist()
    proto.variables.ids.extend(ids)
    proto.variables.lower_bounds.extend(model.col_lower.tolist())
    proto.variables.upper_bounds.extend(model.col_upper.tolist())
    proto.variables.integers.extend(model.integer.tolist())
    proto.objective.maximize = model.sense == "max"
    proto.objective.offset = float(model.objective_offset)
    nonzero = np.flatnonzero(model.objective)
    proto.objective.linear_coefficients.ids.extend(nonzero.tolist())
    proto.objective.linear_coefficients.values.extend(model.objective[nonzero].tolist())
    proto.linear_constraints.ids.extend(range(model.num_cons))
    proto.linear_constraints.lower_bounds.extend(model.row_lower.tolist())
    proto.linear_constraints.upper_bounds.extend(model.row_upper.tolist())
    # MathOpt wants the matrix in row-major order without zeros: canonical csr gives exactly that.
    matrix = model.matrix.copy()
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    matrix.sort_indices()
    proto.linear_constraint_matrix.row_ids.extend(np.repeat(np.arange(model.num_cons), np.diff(matrix.indptr)).tolist())
    proto.linear_constraint_matrix.column_ids.extend(matrix.indices.tolist())
    proto.linear_constraint_matrix.coefficients.extend(matrix.data.tolist())
    return mathopt.Model.from_model_proto(proto)


def _settle_infeasible_or_unbounded(model: LinearModel, params: SolverParams,
                                    primal: mathopt.FeasibilityStatus) -> tuple[Status, str]:
    """Settle "infeasible or unbounded": from SCIP's primal status if known, else by a zero-objective solve.

    See :func:`synergy_opt.solvers.base.settle_infeasible_or_unbounded`.
    """
    if primal is mathopt.FeasibilityStatus.FEASIBLE:
        return Status.UNBOUNDED, "infeasible or unbounded, and primal feasible: unbounded"
    if primal is mathopt.FeasibilityStatus.INFEASIBLE:
        return Status.INFEASIBLE, "infeasible or unbounded, and primal infeasible"
    return settle_infeasible_or_unbounded(model, params, solve_scip)


@functools.cache
def _scip_accepts(key: str, value: bool | int | float | str) -> bool:
    """Whether SCIP takes ``key = value``: a solve of a one-variable model with it (SCIP lists no names)."""
    probe = mathopt.Model(name="option_probe")
    probe.add_variable(lb=0, ub=1)
    params = _scip_parameters(SolverParams(options={key: value}))
    try:
        with silenced_output():  # SCIP prints "parameter <key> unknown" from C
            mathopt.solve(probe, mathopt.SolverType.GSCIP, params=params)
    except Exception:  # MathOpt's wrapping of SCIP's error raises various types (even AttributeError)
        return False
    return True


def check_scip_options(options: Mapping[str, Any]) -> None:
    """Each native SCIP parameter is tried on a one-variable model: unknown names and wrong types fail there."""
    for key, value in options.items():
        if not _scip_accepts(key, value):
            raise InvalidInputError(
                f"options.{key}", value, "SCIP does not take this parameter with a value of this type (SCIP's "
                "parameters are named like 'limits/nodes' or 'presolving/maxrounds'; see SCIP's parameter list)"
            )


def _scip_parameters(params: SolverParams) -> mathopt.SolveParameters:
    p = mathopt.SolveParameters(
        time_limit=timedelta(seconds=params.time_limit) if params.time_limit is not None else None,
        relative_gap_tolerance=float(params.mip_gap),
        threads=params.threads,
        random_seed=int(params.seed),
        enable_output=bool(params.verbose),
    )
    # Native SCIP parameters by name, routed to GScip's typed maps by the Python type of the value.
    for key, value in params.options.items():
        if isinstance(value, bool):
            p.gscip.bool_params[key] = value
        elif isinstance(value, int | np.integer):
            (p.gscip.long_params if key in _SCIP_LONG_PARAMS else p.gscip.int_params)[key] = int(value)
        elif isinstance(value, float):
            p.gscip.real_params[key] = value
        elif isinstance(value, str):
            (p.gscip.char_params if len(value) == 1 else p.gscip.string_params)[key] = value
        else:
            raise InvalidInputError("options", {key: value}, "SCIP options must be bool, int, float or str")
    return p


def solve_scip(model: LinearModel, params: SolverParams) -> SolveResult:
    """Solve ``model`` (LP or MIP) with SCIP through OR-Tools MathOpt.

    Parameters
    ----------
    model
        Any neutral model.
    params
        ``time_limit``, ``mip_gap`` (relative gap tolerance), ``threads``, ``seed`` (SCIP's random seed shift)
        and ``verbose`` map to MathOpt's common parameters; ``options`` are native SCIP parameters by name,
        e.g. ``{"presolving/maxrounds": 0}``.
    """
    start = time.perf_counter()
    mo = to_mathopt(model)
    variables = list(mo.variables())
    solve_params = _scip_parameters(params)
    built = time.perf_counter()
    try:
        result = mathopt.solve(mo, mathopt.SolverType.GSCIP, params=solve_params)
    except (RuntimeError, ValueError, AttributeError) as exc:
        # MathOpt raises for rejected parameters or an internal failure: a fault of the solve, not of the caller
        # (its wrapping of some SCIP errors raises AttributeError: 'StatusNotOk' ... 'canonical_code').
        return SolveResult(status=Status.ERROR, solver="ortools-scip", build_seconds=built - start,
                           solve_seconds=time.perf_counter() - built, message=f"MathOpt/SCIP failed: {exc}",
                           native_status="exception")
    solved = time.perf_counter()

    termination = result.termination
    reason = termination.reason
    has_incumbent = result.has_primal_feasible_solution()
    status = _MATHOPT_STATUS.get(reason, Status.ERROR)
    note = ""
    if reason is _T.INFEASIBLE_OR_UNBOUNDED:
        status, note = _settle_infeasible_or_unbounded(model, params, termination.problem_status.primal_status)
    if status is None:
        status = Status.FEASIBLE if has_incumbent else Status.NO_SOLUTION
    x = np.array(result.variable_values(variables), dtype=float) if status.has_solution and has_incumbent else None
    if x is None and status.has_solution:
        status = Status.ERROR  # "optimal" with no point to show for it
    objective = float(result.objective_value()) if x is not None else None
    dual_bound = float(termination.objective_bounds.dual_bound)
    usable = math.isfinite(dual_bound) and status not in (Status.INFEASIBLE, Status.UNBOUNDED, Status.ERROR)
    bound = dual_bound if usable else None
    limit = f", limit {termination.limit.name}" if termination.limit is not None else ""
    return SolveResult(
        status=status,
        solver="ortools-scip",
        objective=objective,
        bound=bound,
        x=x,
        build_seconds=built - start,
        solve_seconds=solved - built,
        message=f"{reason.name}{limit}: {termination.detail}" + (f"; {note}" if note else ""),
        is_vertex=None,
        native_status=reason.name,
    )
