"""Pyomo backends: one ConcreteModel built from the neutral model, solved by HiGHS, GLPK or CBC.

``pyomo-highs`` uses the modern ``pyomo.contrib.solver`` HiGHS interface (highspy in process); ``pyomo-glpk`` and
``pyomo-cbc`` use Pyomo's classic shell interfaces, which write an LP file and run ``glpsol`` / ``cbc``.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import math
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import highspy
import numpy as np
import pyomo.environ as pyo
from pyomo.common.errors import ApplicationError
from pyomo.contrib.solver.common.results import SolutionStatus as ContribSolution
from pyomo.contrib.solver.common.results import TerminationCondition as ContribTC
from pyomo.contrib.solver.solvers.highs import Highs
from pyomo.core.expr.numeric_expr import LinearExpression
from pyomo.opt import SolutionStatus as LegacySolution
from pyomo.opt import TerminationCondition as LegacyTC

from synergy_opt.errors import InvalidInputError, SolverUnavailableError, SynergyError
from synergy_opt.solvers import highs
from synergy_opt.solvers.base import (
    Capabilities,
    SolveResult,
    SolverParams,
    Status,
    check_solution,
    empty_row_conflict,
    find_binary,
    settle_infeasible_or_unbounded,
)
from synergy_opt.solvers.model import LinearModel
from synergy_opt.validation import unknown_option

CAPABILITIES = Capabilities(integer=True, continuous=True, time_limit=True, mip_gap=True, vertex_lp=True)

# Every contrib.solver termination condition. None: a limit stopped the solve; FEASIBLE or NO_SOLUTION by
# whether an incumbent exists. infeasibleOrUnbounded counts as infeasible, as in the native HiGHS backend.
_CONTRIB_STATUS: dict[ContribTC, Status | None] = {
    ContribTC.convergenceCriteriaSatisfied: Status.OPTIMAL,
    ContribTC.maxTimeLimit: None,
    ContribTC.iterationLimit: None,
    ContribTC.objectiveLimit: None,
    ContribTC.minStepLength: None,
    ContribTC.interrupted: None,
    ContribTC.unbounded: Status.UNBOUNDED,
    ContribTC.provenInfeasible: Status.INFEASIBLE,
    ContribTC.locallyInfeasible: Status.INFEASIBLE,
    ContribTC.infeasibleOrUnbounded: Status.INFEASIBLE,
    ContribTC.error: Status.ERROR,
    ContribTC.licensingProblems: Status.ERROR,
    ContribTC.emptyModel: Status.OPTIMAL,
    ContribTC.unknown: Status.ERROR,
}

# Every classic (pyomo.opt) termination condition, same convention. GLPK reports "feasible" for a MIP stopped
# with an incumbent (time limit, or the gap tolerance: see _glpk_refine).
_LEGACY_STATUS: dict[LegacyTC, Status | None] = {
    LegacyTC.optimal: Status.OPTIMAL,
    LegacyTC.globallyOptimal: Status.OPTIMAL,
    LegacyTC.locallyOptimal: Status.OPTIMAL,
    LegacyTC.feasible: None,
    LegacyTC.maxTimeLimit: None,
    LegacyTC.maxIterations: None,
    LegacyTC.maxEvaluations: None,
    LegacyTC.minFunctionValue: None,
    LegacyTC.minStepLength: None,
    LegacyTC.userInterrupt: None,
    LegacyTC.resourceInterrupt: None,
    LegacyTC.intermediateNonInteger: None,
    LegacyTC.noSolution: None,
    LegacyTC.other: None,
    LegacyTC.unbounded: Status.UNBOUNDED,
    LegacyTC.infeasible: Status.INFEASIBLE,
    LegacyTC.infeasibleOrUnbounded: Status.INFEASIBLE,
    LegacyTC.invalidProblem: Status.ERROR,
    LegacyTC.solverFailure: Status.ERROR,
    LegacyTC.internalSolverError: Status.ERROR,
    LegacyTC.error: Status.ERROR,
    LegacyTC.licensingProblems: Status.ERROR,
    LegacyTC.unknown: Status.ERROR,
}
# Classic solution statuses that denote a primal-feasible point (CBC's "other" is an LP relaxation, not one).
_LEGACY_INCUMBENT = frozenset({
    LegacySolution.optimal, LegacySolution.globallyOptimal, LegacySolution.locallyOptimal,
    LegacySolution.feasible, LegacySolution.bestSoFar, LegacySolution.stoppedByLimit,
})
# A loaded point is accepted as an incumbent only if it satisfies the model to this (scaled) tolerance.
_FEASIBILITY_TOL = 1e-6


class _Trivial(Exception):
    """The neutral model is infeasible before any solver runs (an empty row whose bounds exclude zero)."""


def to_pyomo(model: LinearModel) -> tuple[pyo.ConcreteModel, Any]:
    """A Pyomo ConcreteModel of ``model``: one indexed Var ``x`` and one indexed Constraint ``rows``.

    Each row becomes one ``LinearExpression`` built straight from its csr slice (no operator overloading, which
    is what makes naive Pyomo construction slow). Free rows and empty rows that admit zero are left out.

    Returns
    -------
    concrete, x
        The model and its indexed variable, whose index ``j`` is the neutral model's column ``j``.
    """
    conflict = empty_row_conflict(model)
    if conflict is not None:
        raise _Trivial(conflict)
    m = pyo.ConcreteModel(name=model.name)
    lower = [float(v) if math.isfinite(v) else None for v in model.col_lower]
    upper = [float(v) if math.isfinite(v) else None for v in model.col_upper]
    integer = model.integer.tolist()
    m.x = pyo.Var(
        range(model.num_vars),
        domain=lambda _, j: pyo.Integers if integer[j] else pyo.Reals,
        bounds=lambda _, j: (lower[j], upper[j]),
    )
    x = m.x
    xs = [x[j] for j in range(model.num_vars)]
    matrix = model.matrix
    indptr, indices, data = matrix.indptr, matrix.indices.tolist(), matrix.data.tolist()
    rows: list[tuple[float | None, LinearExpression, float | None]] = []
    for i in range(model.num_cons):
        lo, hi = float(model.row_lower[i]), float(model.row_upper[i])
        begin, end = int(indptr[i]), int(indptr[i + 1])
        if begin == end or not (math.isfinite(lo) or math.isfinite(hi)):  # empty ones admit 0 (checked above)
            continue
        terms = [xs[j] for j in indices[begin:end]]
        expr = LinearExpression(constant=0.0, linear_coefs=data[begin:end], linear_vars=terms)
        rows.append((lo if math.isfinite(lo) else None, expr, hi if math.isfinite(hi) else None))

    def rule(_: pyo.ConcreteModel, r: int) -> Any:
        lo, expr, hi = rows[r]
        return expr == lo if lo is not None and lo == hi else (lo, expr, hi)

    m.rows = pyo.Constraint(range(len(rows)), rule=rule)
    nonzero = np.flatnonzero(model.objective)
    m.obj = pyo.Objective(
        expr=LinearExpression(constant=float(model.objective_offset), linear_coefs=model.objective[nonzero].tolist(),
                              linear_vars=[xs[j] for j in nonzero]),
        sense=pyo.maximize if model.sense == "max" else pyo.minimize,
    )
    return m, x


def _values(model: LinearModel, x: Any, found: dict[int, float | None] | None = None) -> np.ndarray:
    """Column values in order; columns no solver saw (in no row, zero cost) take any in-bounds value (0 clipped)."""
    columns = range(model.num_vars)
    raw = [x[j].value for j in columns] if found is None else [found.get(j) for j in columns]
    values = np.array([np.nan if v is None else v for v in raw], dtype=float)
    unset = np.isnan(values)
    if unset.any():
        lower = np.where(model.integer, np.ceil(model.col_lower), model.col_lower)
        upper = np.where(model.integer, np.floor(model.col_upper), model.col_upper)
        values[unset] = np.clip(0.0, lower, upper)[unset]
    return values


def _trivial_result(name: str, reason: str, build_seconds: float) -> SolveResult:
    return SolveResult(status=Status.INFEASIBLE, solver=name, build_seconds=build_seconds, message=reason,
                       native_status="trivially infeasible")


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# ----------------------------------------------------------------------------------------------------- pyomo-highs


def solve_highs(model: LinearModel, params: SolverParams) -> SolveResult:
    """Solve ``model`` through Pyomo's ``contrib.solver`` HiGHS interface.

    Parameters
    ----------
    model
        Any neutral model.
    params
        ``time_limit``, ``mip_gap`` (``rel_gap``), ``threads`` and ``verbose`` (``tee``) map to the interface's
        config; ``seed`` becomes HiGHS's ``random_seed``; ``options`` are HiGHS options by name.
    """
    name = "pyomo-highs"
    start = time.perf_counter()
    try:
        concrete, x = to_pyomo(model)
    except _Trivial as exc:
        return _trivial_result(name, str(exc), time.perf_counter() - start)
    if model.num_vars == 0:
        # The interface reports a model without variables as "unknown, noSolution"; every row admits 0 (else
        # _Trivial), so its one point is optimal (a round, or a GPU type of one, without jobs).
        return SolveResult(status=Status.OPTIMAL, solver=name, objective=float(model.objective_offset),
                           bound=float(model.objective_offset), x=np.zeros(0), message="no variables",
                           build_seconds=time.perf_counter() - start, is_vertex=None if model.is_mip else True,
                           native_status="no variables")
    built = time.perf_counter()
    # HiGHS keeps one process-wide thread pool and fails a run that asks for another size. Start from a fresh
    # pool, which this run sizes, and leave a fresh one behind, so that no other HiGHS user inherits its size.
    highspy.Highs.resetGlobalScheduler(True)
    opt = Highs()
    try:
        results = opt.solve(
            concrete,
            tee=bool(params.verbose),
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            time_limit=params.time_limit,
            rel_gap=float(params.mip_gap),
            threads=params.threads,
            solver_options={"random_seed": int(params.seed), **params.options},
        )
    finally:
        highspy.Highs.resetGlobalScheduler(True)
    solved = time.perf_counter()

    native = results.termination_condition
    has_incumbent = results.solution_status in (ContribSolution.optimal, ContribSolution.feasible)
    status = _CONTRIB_STATUS.get(native, Status.ERROR)
    note = ""
    if status is None:
        status = Status.FEASIBLE if has_incumbent else Status.NO_SOLUTION
    elif native is ContribTC.infeasibleOrUnbounded:
        status, note = settle_infeasible_or_unbounded(model, params, solve_highs)
    values = None
    if status.has_solution and has_incumbent:
        primals = results.solution_loader.get_vars()
        values = _values(model, x, {j: primals[x[j]] for j in range(model.num_vars) if x[j] in primals})
    elif status.has_solution:
        status = Status.ERROR  # "optimal" with no point to show for it
    objective = float(model.objective @ values + model.objective_offset) if values is not None else None
    no_bound = status in (Status.INFEASIBLE, Status.UNBOUNDED, Status.ERROR)
    bound = None if no_bound else _finite(results.objective_bound)
    is_vertex = None
    if not model.is_mip and values is not None:
        # The interface does not report the basis; read it from the Highs object it keeps, if it still does.
        highs = getattr(opt, "_solver_model", None)
        is_vertex = bool(highs.getBasis().valid) if highs is not None else None
    return SolveResult(
        status=status,
        solver=name,
        objective=objective,
        bound=bound,
        x=values,
        build_seconds=built - start,
        solve_seconds=solved - built,
        message=f"{native.name}, solution {results.solution_status.name}" + (f"; {note}" if note else ""),
        is_vertex=is_vertex,
        native_status=native.name,
    )


# ----------------------------------------------------------------------------------------- pyomo-glpk, pyomo-cbc


# ``glpsol --help`` lists its options as ``--name``; ``cbc -allCommands all -?`` its parameters as ``abbr(ev)``.
_GLPK_OPTION = re.compile(r"--([A-Za-z][\w-]*)")
_CBC_PARAMETER = re.compile(r"(\w+)(?:\((\w+)\))?")


_BINARY = {"glpk": "glpsol", "cbc": "cbc"}


def _binary(name: str) -> str:
    """The executable's path (PATH or this Python's scripts folder), or the bare name for a clear failure."""
    return find_binary(name) or name


@functools.cache
def glpk_option_names() -> tuple[str, ...]:
    """The command-line options the installed ``glpsol`` lists in its help."""
    listed = subprocess.run([_binary("glpsol"), "--help"], capture_output=True, text=True, timeout=30).stdout
    return tuple(sorted(set(_GLPK_OPTION.findall(listed))))


@functools.cache
def cbc_parameters() -> tuple[tuple[str, str], ...]:
    """``(shortest accepted prefix, full name)`` of each parameter the installed ``cbc`` lists."""
    command = [_binary("cbc"), "-allCommands", "all", "-?", "-quit"]
    listed = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
    names = []
    if "Commands are:" in listed:  # CBC 2.10 (Debian's coinor-cbc): indented lines under unindented headings
        for line in listed.split("Commands are:", 1)[1].splitlines():
            if line.startswith(" "):
                names += [(short, short + rest) for short, rest in _CBC_PARAMETER.findall(line)]
    else:  # newer CBC (the cbcbox wheel): unindented lines under "#### ... ####" and "*** ... ***" headings
        for line in listed.split("####", 1)[-1].splitlines():
            if line.strip() and "####" not in line and not line.startswith(("*", "Total time")):
                names += [(short, short + rest) for short, rest in _CBC_PARAMETER.findall(line)]
    return tuple(names)


def check_highs_options(options: Mapping[str, Any]) -> None:
    """The interface passes ``options`` to HiGHS by name: the same check as the direct backend's."""
    highs.check_options(options)


def check_glpk_options(options: Mapping[str, Any]) -> None:
    """Option names must be ones ``glpsol --help`` lists (glpsol would stop with "Invalid option")."""
    known = glpk_option_names()
    for key, value in options.items():
        if key not in known:
            raise unknown_option("glpsol", key, value, known, "glpsol --help")


def check_cbc_options(options: Mapping[str, Any]) -> None:
    """Parameter names must be ones ``cbc -?`` lists, in full or abbreviated no shorter than CBC allows."""
    parameters = cbc_parameters()
    for key, value in options.items():
        if _cbc_name(key, parameters) is None:
            raise unknown_option("CBC", key, value, (full for _, full in parameters), "cbc -allCommands all -?")


def _cbc_name(key: str, parameters: tuple[tuple[str, str], ...]) -> str | None:
    """The full name of the CBC parameter ``key`` names, in full or abbreviated no shorter than CBC allows."""
    return next((full for short, full in parameters
                 if full.lower().startswith(key.lower()) and key.lower().startswith(short.lower())), None)


# What glpsol prints, and stops on, for an option value it refuses ("Invalid time limit 'abc'").
_GLPK_REFUSED = re.compile(r"^(Invalid .*|No .* specified)$", re.MULTILINE)
# What CBC prints for a parameter value it refuses (it keeps its default and solves on), naming the parameter.
_CBC_REFUSED = re.compile(r"String of \S+ is illegal for \w+ parameter (\w+).*"
                          r"|\S+ was provided for (\w+) - valid range.*|<Possible options for (\w+) are.*")


def _check_cbc_values(log: str, options: Mapping[str, Any]) -> None:
    """An option of the user's whose value CBC's log says it refused (names are checked before the solve; values
    CBC alone knows) as an error naming it, not an answer solved with CBC's default in its place. CBC says so only
    while its log is on: an option ``log`` of 0 hides its range refusals."""
    if not options or not _CBC_REFUSED.search(log):
        return
    parameters = cbc_parameters()
    keys = {(_cbc_name(key, parameters) or key).lower(): key for key in options}  # by the full name each names
    for match in _CBC_REFUSED.finditer(log):
        named = keys.get(next(group for group in match.groups() if group).lower())
        if named is not None:
            raise InvalidInputError(f"options[{named!r}]", options[named],
                                    f"CBC refused it: {match.group(0).strip().lstrip('<')}")


def _glpk_options(params: SolverParams) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if params.time_limit is not None:
        options["tmlim"] = max(1, math.ceil(params.time_limit))  # glpsol takes whole seconds only
    if params.mip_gap > 0:
        options["mipgap"] = float(params.mip_gap)
    return options


def _cbc_options(params: SolverParams) -> dict[str, Any]:
    # CBC 2.10's preprocessing (Cgl; 2.10.3 in PuLP's wheel, Debian's 2.10.8) reduced a 15-binary ideal ILP to
    # nothing and returned a solution 4% below its optimum as OPTIMAL (tests/test_backends.py,
    # ``cbc_preprocess_ip``); off, it is right, and on the ideal ILPs of 128-512 GPUs no slower.
    options: dict[str, Any] = {"ratioGap": float(params.mip_gap), "preprocess": "off"}
    if params.time_limit is not None:
        options["sec"] = float(params.time_limit)
        options["timeMode"] = "elapsed"
    if params.threads is not None and params.threads > 1:
        options["threads"] = int(params.threads)
    if params.seed > 0:  # CBC and CLP read seed 0 as "seed from the clock": keep their fixed defaults for 0
        options["randomCbcSeed"] = int(params.seed)
        options["randomSeed"] = int(params.seed)
    return options


_GLPK_PROGRESS = re.compile(r"mip\s*=\s*(.+?)\s*(?:<=|>=)\s*(\S+)")
# CBC minimises internally: "best possible" is in that sense (negated for a maximisation), with full precision.
_CBC_PARTIAL = re.compile(r"Partial search - best objective \S+ \(best possible (\S+?)\)")
_CBC_SUMMARY = re.compile(r"^(Upper|Lower) bound:\s+(\S+)", re.MULTILINE)


def _cbc_bound(log: str, sense: str) -> float | None:
    """CBC's best bound from its log, in the model's sense (Pyomo's parser mixes up its sign)."""
    partial = _CBC_PARTIAL.findall(log)
    if partial and (value := _finite(partial[-1])) is not None:
        return -value if sense == "max" else value
    summary = dict(_CBC_SUMMARY.findall(log))
    return _finite(summary.get("Upper" if sense == "max" else "Lower"))


@contextmanager
def _quiet_pyomo() -> Iterator[None]:
    """Silence Pyomo's warning about loading a solution from a solve stopped by a limit (expected here)."""
    log = logging.getLogger("pyomo.core")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


# The records of Pyomo's solver layer held back in this thread (or task), while one solve runs: see _held_back.
_HELD: contextvars.ContextVar[list[logging.LogRecord] | None] = contextvars.ContextVar("held", default=None)


class _HoldBack(logging.Filter):
    """Holds back the records of the solve running in this context (other threads' solves log as usual)."""

    def filter(self, record: logging.LogRecord) -> bool:
        held = _HELD.get()
        if held is None:
            return True
        held.append(record)
        return False


_PYOMO_OPT = logging.getLogger("pyomo.opt")
_PYOMO_OPT.addFilter(_HoldBack())


@contextmanager
def _held_back() -> Iterator[list[logging.LogRecord]]:
    """The records ``pyomo.opt`` logs meanwhile in this context, held back; logged as they would have been when
    the block ends, except those the block took out of the list (an error raised that says what they said)."""
    held: list[logging.LogRecord] = []
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)
        for record in held:
            _PYOMO_OPT.handle(record)


def _glpk_termination(log: str, native: LegacyTC, is_mip: bool) -> LegacyTC:
    """Correct Pyomo's reading of glpsol's unboundedness messages, which it gets wrong both ways."""
    if "LP HAS UNBOUNDED PRIMAL SOLUTION" in log:
        # Simplex found a feasible point and a ray: an unbounded LP, but for a MIP only its relaxation.
        return LegacyTC.infeasibleOrUnbounded if is_mip else LegacyTC.unbounded
    if "HAS NO DUAL FEASIBLE SOLUTION" in log:
        return LegacyTC.infeasibleOrUnbounded  # dual infeasible: primal infeasible or unbounded
    return native


def _glpk_refine(log: str, status: Status, objective: float | None,
                 is_mip: bool) -> tuple[Status, float | None, str]:
    """Read what Pyomo's GLPK parser drops from the log: why a solve stopped and a MIP's last dual bound."""
    note = ""
    if "LIMIT EXCEEDED" in log:
        # Pyomo calls a time-limited LP with a primal feasible basis "optimal"; it is not.
        note = "time limit exceeded" if "TIME LIMIT EXCEEDED" in log else "limit exceeded"
        if status is Status.OPTIMAL:
            status = Status.FEASIBLE
    elif status is Status.FEASIBLE and "MIP GAP TOLERANCE REACHED" in log:
        status, note = Status.OPTIMAL, "relative MIP gap tolerance reached"
    bound = None
    if is_mip:
        for match in _GLPK_PROGRESS.finditer(log):
            bound = _finite(match.group(2))  # "tree is empty" at the end parses as no number
    if status is Status.OPTIMAL and bound is None:
        bound = objective
    return status, bound, note


def _solve_shell(model: LinearModel, params: SolverParams, solver: str) -> SolveResult:
    name = f"pyomo-{solver}"
    start = time.perf_counter()
    try:
        concrete, x = to_pyomo(model)
    except _Trivial as exc:
        return _trivial_result(name, str(exc), time.perf_counter() - start)
    built = time.perf_counter()
    opt = pyo.SolverFactory(solver, executable=_binary(_BINARY[solver]))
    if not opt.available(exception_flag=False):
        raise SolverUnavailableError(f"Pyomo cannot run {solver!r} here")
    opt.options.update(_glpk_options(params) if solver == "glpk" else _cbc_options(params))
    opt.options.update(params.options)
    with tempfile.TemporaryDirectory(prefix=f"synergy_{solver}_") as work:
        logfile = Path(work) / f"{solver}.log"
        with _held_back() as held:  # on a non-zero exit Pyomo logs the solver's output, then raises
            try:
                results = opt.solve(concrete, tee=bool(params.verbose), load_solutions=False, logfile=str(logfile))
            except ApplicationError:
                said = "\n".join(record.getMessage() for record in held)
                held.clear()
                refused = _GLPK_REFUSED.search(said) if solver == "glpk" else None
                if refused and params.options:  # glpsol stops on a value it refuses
                    raise InvalidInputError("options", dict(params.options),
                                            f"glpsol refused them: {refused.group(0).strip()}") from None
                raise SynergyError(f"{name} did not exit normally: {said.strip() or 'no output'}") from None
        log = logfile.read_text(errors="replace") if logfile.exists() else ""
    solved = time.perf_counter()
    if solver == "cbc":
        _check_cbc_values(log, params.options)

    native = results.solver.termination_condition
    if solver == "glpk":
        native = _glpk_termination(log, native, model.is_mip)
    status = _LEGACY_STATUS.get(native, Status.ERROR)
    solution_status = results.solution(0).status if len(results.solution) else None
    has_incumbent = solution_status in _LEGACY_INCUMBENT and native is not LegacyTC.intermediateNonInteger
    notes = [f"{native}", f"solution {solution_status}"]
    values = None
    if has_incumbent and status not in (Status.INFEASIBLE, Status.UNBOUNDED, Status.ERROR):
        with _quiet_pyomo():
            concrete.solutions.load_from(results)
        values = _values(model, x)
        violation = check_solution(model, values)
        if violation > _FEASIBILITY_TOL:  # a parser quirk must never pass off a non-solution as an incumbent
            values = None
            notes.append(f"reported point violates the model by {violation:.2g}; discarded")
    if status is None:
        status = Status.FEASIBLE if values is not None else Status.NO_SOLUTION
    elif status is Status.OPTIMAL and values is None:
        status = Status.ERROR
    elif native is LegacyTC.infeasibleOrUnbounded:
        status, note = settle_infeasible_or_unbounded(model, params, solve_glpk if solver == "glpk" else solve_cbc)
        notes.append(note)
    objective = float(model.objective @ values + model.objective_offset) if values is not None else None

    bound = None
    if solver == "glpk":
        status, bound, note = _glpk_refine(log, status, objective, model.is_mip)
        notes.append(note)
    elif solver == "cbc" and model.is_mip:
        bound = _cbc_bound(log, model.sense)
    if status is Status.OPTIMAL and bound is None:
        bound = objective
    if bound is not None and objective is not None:
        # A bound on the wrong side of the incumbent is a misread log: better none than a wrong one.
        slack = (bound - objective) if model.sense == "max" else (objective - bound)
        if slack < -1e-6 * max(1.0, abs(objective)):
            bound = None
            notes.append("bound read from the log was inconsistent; dropped")
    if status in (Status.INFEASIBLE, Status.UNBOUNDED, Status.ERROR):
        bound = None
    is_vertex = None
    if not model.is_mip and values is not None:
        # Both run (dual) simplex on LPs unless told to use an interior-point method.
        interior = {"interior"} if solver == "glpk" else {"barrier"}
        is_vertex = not (interior & {str(key) for key in params.options})
    return SolveResult(
        status=status,
        solver=name,
        objective=objective,
        bound=bound,
        x=values,
        build_seconds=built - start,
        solve_seconds=solved - built,
        message="; ".join(note for note in notes if note),
        is_vertex=is_vertex,
        native_status=str(native),
    )


def solve_glpk(model: LinearModel, params: SolverParams) -> SolveResult:
    """Solve ``model`` with GLPK's ``glpsol`` through Pyomo.

    Parameters
    ----------
    model
        Any neutral model.
    params
        ``time_limit`` -> ``--tmlim`` (rounded up to whole seconds, glpsol's unit), ``mip_gap`` -> ``--mipgap``,
        ``verbose`` -> the solver log on stdout; ``threads`` and ``seed`` are ignored (glpsol is single-threaded
        and deterministic); ``options`` are glpsol command-line options (``{"interior": ""}`` etc.).
    """
    return _solve_shell(model, params, "glpk")


def solve_cbc(model: LinearModel, params: SolverParams) -> SolveResult:
    """Solve ``model`` with the ``cbc`` binary through Pyomo.

    Parameters
    ----------
    model
        Any neutral model.
    params
        ``time_limit`` -> ``sec`` (elapsed time), ``mip_gap`` -> ``ratioGap``, ``threads`` -> ``threads``,
        ``seed`` -> ``randomCbcSeed``/``randomSeed`` (0 keeps CBC's fixed defaults), ``verbose`` -> the log on
        stdout; ``options`` are CBC command-line options.
    """
    return _solve_shell(model, params, "cbc")
