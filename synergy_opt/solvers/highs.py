"""HiGHS through highspy, passing the neutral model's arrays directly (no per-variable Python objects).

:func:`short_limit_params` turns HiGHS's MIP presolve off under a time limit below :data:`PRESOLVE_MIN_SECONDS`
(unless ``options`` set ``presolve``): its presolve looks at the clock too rarely to keep a short limit on the
joint's direct models. Only those callers apply it; on other MIPs presolve pays even under short limits.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import highspy
import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.solvers.base import (
    Capabilities,
    SolveResult,
    SolverParams,
    Status,
    empty_row_conflict,
    row_violation,
    settle_infeasible_or_unbounded,
    silenced_output,
)
from synergy_opt.solvers.model import LinearModel
from synergy_opt.validation import unknown_option

CAPABILITIES = Capabilities(integer=True, continuous=True, time_limit=True, mip_gap=True, vertex_lp=True)
# HiGHS's MIP presolve (its probing above all) looks at the clock rarely: on a joint model of 16 rows and 7,939
# integer columns it took 2-3.6 s against a 0.2 s limit, where the solve without presolve stops at 0.34 s (and,
# unlimited, proves the optimum in 1.3 s against 4.6 s with presolve). It is not the backend's default: the ideal
# ILP on 512 GPUs takes 0.75 s without presolve against 0.15 s with it.
PRESOLVE_MIN_SECONDS = 1.0

_M = highspy.HighsModelStatus
# Every native model status, mapped once. Limit statuses resolve by whether an incumbent exists.
_STATUS: dict[highspy.HighsModelStatus, Status | None] = {
    _M.kOptimal: Status.OPTIMAL,
    _M.kInfeasible: Status.INFEASIBLE,
    _M.kUnbounded: Status.UNBOUNDED,
    _M.kUnboundedOrInfeasible: Status.ERROR,  # settled by settle_infeasible_or_unbounded instead
    _M.kTimeLimit: None,
    _M.kIterationLimit: None,
    _M.kSolutionLimit: None,
    _M.kObjectiveBound: None,
    _M.kObjectiveTarget: None,
    _M.kInterrupt: None,
    _M.kHighsInterrupt: None,  # type: ignore[attr-defined]  # in highspy, missing from its stubs
    _M.kMemoryLimit: None,
    _M.kModelEmpty: Status.OPTIMAL,
    _M.kNotset: Status.ERROR,
    _M.kLoadError: Status.ERROR,
    _M.kModelError: Status.ERROR,
    _M.kPresolveError: Status.ERROR,
    _M.kSolveError: Status.ERROR,
    _M.kPostsolveError: Status.ERROR,
    _M.kUnknown: Status.ERROR,
}


def run(h: highspy.Highs, threads: int | None) -> None:
    """Run with ``threads`` threads (None: HiGHS chooses).

    HiGHS keeps one global thread pool per process and a run asking for another size fails ("Not Set"),
    so the pool is reset before every run (about a microsecond when there is nothing to reset).
    """
    highspy.Highs.resetGlobalScheduler(True)
    h.setOptionValue("threads", int(threads or 0))
    h.run()


@functools.cache
def swallow_banner() -> None:
    """HiGHS prints a banner from C++ when the process makes its first Highs object: send it to /dev/null."""
    with silenced_output():
        highspy.Highs()


def quiet_highs() -> highspy.Highs:
    """A new Highs object that prints nothing (its banner swallowed, its log off)."""
    swallow_banner()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


_OPTION_TYPES = {highspy.HighsOptionType.kBool: "a bool", highspy.HighsOptionType.kInt: "an integer",
                 highspy.HighsOptionType.kDouble: "a number", highspy.HighsOptionType.kString: "a string"}


@functools.cache
def option_names() -> tuple[str, ...]:
    """Every HiGHS option, as highspy lists them."""
    return tuple(name for name in dir(highspy.HighsOptions()) if not name.startswith("_"))


def check_options(options: Mapping[str, Any]) -> None:
    """Each option is set on a fresh Highs object: HiGHS itself rejects unknown names and bad values."""
    h = quiet_highs()
    for key, value in options.items():
        status, kind = h.getOptionType(key)
        if status != highspy.HighsStatus.kOk:
            raise unknown_option("HiGHS", key, value, option_names(), "highspy.HighsOptions")
        if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
            raise InvalidInputError(f"options.{key}", value, f"HiGHS rejects this value ({key} is "
                                    f"{_OPTION_TYPES.get(kind, 'an option')}, within HiGHS's range)")


def to_highs(model: LinearModel) -> highspy.Highs:
    """A Highs object holding ``model`` (used for solving and for MPS/LP export)."""
    swallow_banner()
    lp = highspy.HighsLp()
    lp.num_col_ = model.num_vars
    lp.num_row_ = model.num_cons
    lp.col_cost_ = model.objective
    lp.col_lower_ = model.col_lower
    lp.col_upper_ = model.col_upper
    lp.row_lower_ = model.row_lower
    lp.row_upper_ = model.row_upper
    lp.offset_ = model.objective_offset
    lp.sense_ = highspy.ObjSense.kMaximize if model.sense == "max" else highspy.ObjSense.kMinimize
    csc = model.matrix.tocsc()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = model.num_vars
    lp.a_matrix_.num_row_ = model.num_cons
    lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
    lp.a_matrix_.index_ = csc.indices.astype(np.int32)
    lp.a_matrix_.value_ = csc.data
    if model.is_mip:
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous for flag in model.integer
        ]
    h = quiet_highs()
    if h.passModel(lp) == highspy.HighsStatus.kError:  # else HiGHS keeps an empty model and "solves" that
        raise InvalidInputError("model", model.name, "HiGHS refused it: a coefficient of magnitude 1e15 or more, "
                                "or bounds it cannot read")
    return h


def short_limit_params(params: SolverParams) -> SolverParams:
    """``params`` with HiGHS's presolve off when the time limit is below :data:`PRESOLVE_MIN_SECONDS` and the
    caller's options do not set ``presolve`` (module docstring); otherwise ``params`` unchanged."""
    if params.time_limit is None or params.time_limit >= PRESOLVE_MIN_SECONDS or "presolve" in params.options:
        return params
    return replace(params, options={**params.options, "presolve": "off"})


# A MIP's point may pass a row by up to HiGHS's mip_feasibility_tolerance (1e-6, absolute on its scaled rows):
# a capacity of 988.8 GB passed by 5e-7 let a fuzzed round's ILP take a grid point 2e-9 above the share that no
# exactly feasible solution has (ILP 0.002, its LP 2e-10; the literal joint 0.002 where the others prove 0). The
# rows are exact; a point past them by more than EXACT_ROWS (relative) is solved again with the tolerance at
# TIGHT_MIP_FEASIBILITY (266 solves of generated rounds' ideal ILPs, joints and placements: none was).
EXACT_ROWS = 1e-12
TIGHT_MIP_FEASIBILITY = 1e-9
TIGHT_TIME_FACTOR, TIGHT_MIN_SECONDS = 2.0, 1.0


def solve(model: LinearModel, params: SolverParams) -> SolveResult:
    """One solve; a MIP whose point passes a row by more than ``EXACT_ROWS`` (relative, its integer columns
    rounded), unless the caller set ``mip_feasibility_tolerance``, once more at ``TIGHT_MIP_FEASIBILITY``
    without presolve, for at most ``TIGHT_TIME_FACTOR`` times the first solve's time (at least
    ``TIGHT_MIN_SECONDS``) within the caller's limit: that result is kept when it ends OPTIMAL, else the first,
    its message saying so (a time-limited re-solve once turned an optimum into a worse incumbent)."""
    first = _solve_once(model, params)
    if not (model.is_mip and first.has_solution) or "mip_feasibility_tolerance" in params.options:
        return first
    assert first.x is not None
    passed = row_violation(model, np.where(model.integer, np.round(first.x), first.x))  # as decoders read it
    if passed <= EXACT_ROWS:
        return first
    spent = first.build_seconds + first.solve_seconds
    cap = max(TIGHT_MIN_SECONDS, TIGHT_TIME_FACTOR * first.solve_seconds)
    left = cap if params.time_limit is None else min(cap, params.time_limit - spent)
    note = f"its point passes a row by {passed:.2g}, relative"
    if left <= 0:
        return replace(first, message=f"{first.message} ({note}; no time left to solve it again)")
    # Presolve off too: at tolerances of 1e-7 and below HiGHS's presolve called that fuzzed ILP infeasible.
    tight = replace(params, time_limit=left, options={"presolve": "off", **params.options,
                                                      "mip_feasibility_tolerance": TIGHT_MIP_FEASIBILITY})
    again = _solve_once(model, tight)
    if again.status is not Status.OPTIMAL:
        return replace(first, message=f"{first.message} ({note}; at mip_feasibility_tolerance="
                                      f"{TIGHT_MIP_FEASIBILITY:g} it ended {again.status.value}: {again.message})")
    return replace(again, build_seconds=first.build_seconds + again.build_seconds,
                   solve_seconds=first.solve_seconds + again.solve_seconds,
                   message=f"{again.message} (solved again at mip_feasibility_tolerance={TIGHT_MIP_FEASIBILITY:g}: "
                           f"the first point passed a row by {passed:.2g}, relative)")


def _without_columns(model: LinearModel, start: float) -> SolveResult:
    """A model without columns, which HiGHS calls "Empty" (OPTIMAL at 0) whatever its rows and objective constant
    say: its one point, a vertex, is optimal at the constant unless an empty row excludes 0."""
    native = str(_M.kModelEmpty)
    conflict = empty_row_conflict(model)
    seconds = time.perf_counter() - start
    if conflict is not None:
        return SolveResult(status=Status.INFEASIBLE, solver="highs", build_seconds=seconds, message=conflict,
                           native_status=native)
    offset = float(model.objective_offset)
    return SolveResult(status=Status.OPTIMAL, solver="highs", objective=offset, bound=offset, x=np.zeros(0),
                       build_seconds=seconds, message="Empty", is_vertex=True, native_status=native)


def _solve_once(model: LinearModel, params: SolverParams) -> SolveResult:
    start = time.perf_counter()
    if not model.num_vars:
        return _without_columns(model, start)
    h = to_highs(model)
    h.setOptionValue("output_flag", bool(params.verbose))
    if params.time_limit is not None:
        h.setOptionValue("time_limit", float(params.time_limit))
    h.setOptionValue("mip_rel_gap", float(params.mip_gap))
    h.setOptionValue("random_seed", int(params.seed))
    for key, value in params.options.items():
        h.setOptionValue(key, value)
    built = time.perf_counter()
    run(h, params.threads)
    native = h.getModelStatus()
    message = h.modelStatusToString(native)
    info = h.getInfo()
    has_incumbent = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    status = _STATUS.get(native, Status.ERROR)
    if native == _M.kUnboundedOrInfeasible:
        status, message = settle_infeasible_or_unbounded(model, params, solve)
    elif status is None:
        status = Status.FEASIBLE if has_incumbent else Status.NO_SOLUTION
    solved = time.perf_counter()
    x = np.array(h.getSolution().col_value, dtype=float) if status.has_solution else None
    objective = float(info.objective_function_value) if status.has_solution else None
    if model.is_mip:
        bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
        is_vertex = None
    else:
        bound = objective if status is Status.OPTIMAL else None
        is_vertex = bool(h.getBasis().valid) if status.has_solution else None
    valid_duals = info.dual_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    row_duals = (np.array(h.getSolution().row_dual, dtype=float)
                 if status is Status.OPTIMAL and not model.is_mip and valid_duals else None)
    return SolveResult(
        status=status,
        solver="highs",
        objective=objective,
        bound=bound,
        x=x,
        build_seconds=built - start,
        solve_seconds=solved - built,
        message=message,
        is_vertex=is_vertex,
        native_status=str(native),
        row_duals=row_duals,
    )

