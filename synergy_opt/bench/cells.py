"""Run one cell of the grid and score it as one flat row (a dict keyed by :data:`CELL_COLUMNS`).

Every allocation is scored by :func:`synergy_opt.evaluate`, the toolkit's one evaluator. The ideal
ILP and its LP relaxation are not allocations (one super-machine, no servers): their rows carry the solver's
objective and the totals of the chosen configs instead.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synergy_opt.bench.grid import Cell
from synergy_opt.evaluation import InvalidAllocationWarning, evaluate, keeps_floor
from synergy_opt.generate import generate_round
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal import IdealResult, solve_ideal
from synergy_opt.ideal.hetero_solve import HeteroIdealResult
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.joint import JointResult, solve_joint
from synergy_opt.joint.hetero_solve import HeteroJointResult
from synergy_opt.mechanisms import run_mechanism
from synergy_opt.mechanisms.demand import TOLERANCE
from synergy_opt.mechanisms.drf import pack_drf
from synergy_opt.mechanisms.greedy import pack_greedy
from synergy_opt.mechanisms.near_opt import solve_near_opt
from synergy_opt.mechanisms.proportional import pack_proportional
from synergy_opt.mechanisms.tetris import pack_tetris
from synergy_opt.mechanisms.tune import pack_tune
from synergy_opt.placement.hetero import HeteroOptResult
from synergy_opt.placement.model import PLACEMENT_KINDS
from synergy_opt.placement.solve import OptResult, PlacementKind, solve_opt
from synergy_opt.validation import TIME_LIMIT, OneOf, Optional, boolean

# The columns a cell produces, in CSV order; the per-instance references are appended by table.add_references.
CELL_COLUMNS = (
    "gpus", "servers", "trace", "seed", "split", "profile_noise", "gpu_types", "instance", "jobs", "mechanism",
    "solver", "status", "valid",
    "objective", "objective_gpu", "solver_objective", "bound", "floors_violated", "jobs_unplaced", "jobs_split",
    "gpu_util", "cpu_util", "mem_util", "build_ms", "solve_ms", "round_ms", "message", "settings",
)
TIMING_COLUMNS = ("build_ms", "solve_ms", "round_ms")
MESSAGE_CHARS = 160


@dataclass(frozen=True)
class RunOptions:
    """Settings shared by every cell of one bench run."""

    time_limit: float | None = 5.0  # seconds per solve; None: no limit
    opt_placement: PlacementKind = "lp"
    # False: the joint MILP may split any job, so it bounds every mechanism (SPEC 4); True: the paper's rule.
    joint_consolidate: bool = False
    warm_up: bool = True  # first use of each (mechanism, solver) in a process runs untimed on a tiny round
    # The heuristics' options; None: each mechanism's own default (spare capacity is spent by near-opt only).
    spend_spare: bool | None = None
    best_case_tolerance: float | None = None

    def __post_init__(self) -> None:
        # Checked here, not when the first cell runs (a NaN time limit or an unknown placement once became a
        # row of errors per cell).
        TIME_LIMIT("time_limit", self.time_limit)
        OneOf(PLACEMENT_KINDS)("opt_placement", self.opt_placement)
        for name in ("joint_consolidate", "warm_up"):
            boolean(name, getattr(self, name))
        Optional(boolean)("spend_spare", self.spend_spare)
        Optional(TOLERANCE)("best_case_tolerance", self.best_case_tolerance)


@dataclass
class Outcome:
    """What running a mechanism gave, before scoring."""

    status: str
    allocation: Allocation | None = None
    objective: float | None = None  # from the solver (for allocations, evaluate's objective is the one kept)
    bound: float | None = None
    build_s: float | None = None
    solve_s: float | None = None
    message: str = ""
    totals: dict[str, Any] = field(default_factory=dict)  # scores of a non-allocation (ideal, ideal-lp)
    settings: str = ""  # the mechanism's options that shape the result, as name=value pairs


Runner = Callable[[RoundInstance | HeteroRound, str, RunOptions], Outcome]


def run_cell(cell: Cell, options: RunOptions | None = None) -> dict[str, Any]:
    """Run ``cell`` and return its row. A failing mechanism gives a row with status ``error``, never a raise."""
    options = options or RunOptions()
    instance = cell.spec.make()
    if options.warm_up:
        _warm_up(cell.mechanism, cell.solver, options)
    start = time.perf_counter()
    try:
        outcome = RUNNERS[cell.mechanism](instance, cell.solver, options)
    except Exception as error:  # one broken (mechanism, solver, instance) must not end a sweep: it is reported
        outcome = Outcome("error", message=f"{type(error).__name__}: {error}")
    round_s = time.perf_counter() - start
    return _row(cell, instance, outcome, round_s)


def _row(cell: Cell, instance: RoundInstance | HeteroRound, outcome: Outcome, round_s: float) -> dict[str, Any]:
    spec = cell.spec
    row: dict[str, Any] = dict.fromkeys(CELL_COLUMNS)
    row.update(
        gpus=instance.cluster.total_gpus, servers=instance.cluster.servers, trace=spec.trace, seed=spec.seed,
        split=spec.split_text, profile_noise=spec.profile_noise,
        gpu_types=instance.cluster.counts_text if isinstance(instance, HeteroRound) else "", instance=spec.name,
        jobs=len(instance.jobs), mechanism=cell.mechanism,
        solver=cell.solver, status=outcome.status, solver_objective=outcome.objective, bound=outcome.bound,
        build_ms=_ms(outcome.build_s), solve_ms=_ms(outcome.solve_s), round_ms=1000 * round_s,
        message=" ".join(outcome.message.split())[:MESSAGE_CHARS], settings=outcome.settings,
    )
    if outcome.allocation is not None:
        with warnings.catch_warnings():
            # An invalid allocation is data here (valid=False), not something to warn about mid-table.
            warnings.simplefilter("ignore", InvalidAllocationWarning)
            row.update(evaluate(instance, outcome.allocation).summary())
    else:
        row["objective"] = outcome.objective
        row.update(outcome.totals)
    return row


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


# --- the mechanisms -------------------------------------------------------------------------------------------


def heuristic_settings(name: str, options: RunOptions) -> dict[str, Any]:
    """The options a solver-free mechanism runs with: the bench's where it sets them, else the defaults."""
    parameters = inspect.signature(_OPTIONS_OF[name]).parameters
    settings: dict[str, Any] = {}
    for option in ("spend_spare", "best_case_tolerance"):
        if option in parameters:
            given = getattr(options, option)
            settings[option] = parameters[option].default if given is None else given
    if "spend_spare" not in settings:
        settings["spend_spare"] = bool(options.spend_spare)
    return settings


def _heuristic(name: str) -> Runner:
    def run(instance: RoundInstance | HeteroRound, solver: str, options: RunOptions) -> Outcome:
        settings = heuristic_settings(name, options)
        allocation = run_mechanism(instance, name, **settings)
        return Outcome("ok", allocation=allocation, settings=" ".join(f"{k}={v}" for k, v in settings.items()))

    return run


def _ideal(relax: bool) -> Runner:
    def run(instance: RoundInstance | HeteroRound, solver: str, options: RunOptions) -> Outcome:
        result = solve_ideal(instance, solver, relax=relax, time_limit=options.time_limit)
        status = result.status.value
        if isinstance(result, HeteroIdealResult):
            totals = _hetero_ideal_totals(result) if result.has_solution else {}
        else:
            totals = _ideal_totals(result) if result.has_solution else {}
        return Outcome(
            status, objective=result.objective, bound=result.bound, build_s=result.build_seconds,
            solve_s=result.solve_seconds, message="" if status == "optimal" else result.message, totals=totals,
        )

    return run


def _ideal_totals(result: IdealResult) -> dict[str, Any]:
    """Utilisation of the super-machine by the chosen configs (fractional ones for the LP relaxation)."""
    ideal, cluster = result.ideal, result.ideal.instance.cluster
    class_gpus = ideal.instance.gpus[ideal.class_jobs[ideal.class_offsets[:-1]]]
    col_gpus = class_gpus[ideal.col_class].astype(float)
    y = result.y
    totals: dict[str, Any] = {
        "objective_gpu": float(np.sum(y * col_gpus * ideal.col_tput)),
        "gpu_util": float(np.sum(y * col_gpus)) / cluster.total_gpus,
        "cpu_util": float(np.sum(y * col_gpus * ideal.col_cpu)) / cluster.total_cpus,
        "mem_util": float(np.sum(y * col_gpus * ideal.col_mem)) / cluster.total_mem_gb,
        "jobs_unplaced": 0,
    }
    if not result.relaxed:
        floors = ideal.instance.floors
        totals["floors_violated"] = int(np.sum(~keeps_floor(result.throughput, floors)))
    return totals


def _hetero_ideal_totals(result: HeteroIdealResult) -> dict[str, Any]:
    """Utilisation of each type's super-machine by the chosen configs (each job's heaviest one for the LP)."""
    instance = result.instance
    configs = list(result.configs.values())
    capacity = np.sum(instance.cluster.capacity, axis=0)
    used = np.sum([[c.gpus, c.cpus, c.mem_gb] for c in configs], axis=0) if configs else np.zeros(3)
    totals: dict[str, Any] = {
        "objective_gpu": float(sum(c.gpus * c.throughput for c in configs)),
        "gpu_util": float(used[0] / capacity[0]), "cpu_util": float(used[1] / capacity[1]),
        "mem_util": float(used[2] / capacity[2]), "jobs_unplaced": 0,
    }
    if not result.relaxed:
        totals["floors_violated"] = int(sum(not keeps_floor(c.throughput, c.floor) for c in configs))
    return totals


def _limit(options: RunOptions) -> dict[str, Any]:
    return {} if options.time_limit is None else {"time_limit": options.time_limit}


def _solved(result: OptResult | JointResult | HeteroOptResult | HeteroJointResult, message: str) -> Outcome:
    status = result.status.value
    return Outcome(
        status, allocation=result.allocation, objective=result.objective, bound=result.bound,
        build_s=result.build_seconds, solve_s=result.solve_seconds, message="" if status == "optimal" else message,
    )


def _opt(instance: RoundInstance | HeteroRound, solver: str, options: RunOptions) -> Outcome:
    # OPT is two solves (ideal ILP, then placement) and a rounding: build and solve times are the two solves'
    # (rounding counts towards round_ms only). Its status is the ideal ILP's; its notes say what fell back.
    result = solve_opt(instance, solver=solver, placement=options.opt_placement, **_limit(options))
    outcome = _solved(result, "; ".join(result.notes) or result.ideal.message)
    outcome.objective = result.ideal.objective
    return outcome


def _joint(instance: RoundInstance | HeteroRound, solver: str, options: RunOptions) -> Outcome:
    result = solve_joint(instance, solver=solver, consolidate=options.joint_consolidate, **_limit(options))
    outcome = _solved(result, result.message)
    # Which placement rule the reference is (a heterogeneous joint solves the rule it was given).
    outcome.settings = f"consolidate={getattr(result, 'consolidate', options.joint_consolidate)}"
    return outcome


# The function whose signature holds each solver-free mechanism's options and their defaults.
_OPTIONS_OF: dict[str, Callable[..., Any]] = {
    "proportional": pack_proportional, "greedy": pack_greedy, "tune": pack_tune, "drf": pack_drf,
    "tetris": pack_tetris, "near-opt": solve_near_opt,
}

RUNNERS: dict[str, Runner] = {
    **{name: _heuristic(name) for name in _OPTIONS_OF},
    "opt": _opt,
    "joint": _joint,
    "ideal": _ideal(relax=False),
    "ideal-lp": _ideal(relax=True),
}

# --- warm-up --------------------------------------------------------------------------------------------------

_WARM: set[tuple[str, str]] = set()
_WARM_LOCK = threading.Lock()


def _warm_up(mechanism: str, solver: str, options: RunOptions) -> None:
    """Run a (mechanism, solver) pair once, untimed, on an 8-GPU round: imports and first-call costs stay out."""
    with _WARM_LOCK:
        if (mechanism, solver) in _WARM:
            return
        _WARM.add((mechanism, solver))
    # Errors surface in the timed run, where they are reported.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception):
            RUNNERS[mechanism](_tiny(), solver, options)


def _tiny() -> RoundInstance:
    return generate_round(8, multi_gpu=True, seed=0)
