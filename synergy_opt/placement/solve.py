"""Synergy-OPT end to end (paper section 4.1, SPEC 2.1-2.3): ideal ILP, then placement, then rounding.

``solve_placement`` solves one placement model (:mod:`synergy_opt.placement.model`) and checks what it
promises: the LP's split jobs against ``3s`` (a bound that holds only for a vertex, so whether the backend
returned one is reported), a MILP's split count against the LP's. ``solve_opt`` chains the three steps and
scores the result with the one evaluator.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, overload

import numpy as np

from synergy_opt.errors import InvalidInputError, SolverUnavailableError
from synergy_opt.evaluation import CAPACITY_TOLERANCE, Evaluation
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal import IdealResult, solve_ideal
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.io import any_round, round_instance
from synergy_opt.placement.hetero import HeteroOptResult, solve_hetero_opt
from synergy_opt.placement.model import (
    PLACEMENT_BUILDERS,
    PLACEMENT_KINDS,
    PlacementDemands,
    PlacementKind,
    PlacementModel,
    build_placement,
    build_placement_lp,
)
from synergy_opt.placement.rounding import RoundingReport, round_placement
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, backend, solve_model
from synergy_opt.solvers.registry import SOLVER, SOLVER_ARGUMENTS
from synergy_opt.validation import InstanceOf, OneOf, Optional, check_keyword_options, checked, named_options

# Seconds allowed to a placement MILP when no time limit is given: an exact packing MILP can be slow to prove
# infeasible, and the LP placement is always there to round instead.
MILP_TIME_LIMIT = 60.0


@dataclass(frozen=True, eq=False)
class PlacementResult:
    """One placement solve, read back per job and checked.

    ``shares[i, j]`` is the fraction of job ``j`` on server ``i`` (None without a solution). For the LP,
    ``within_bound`` says whether the split jobs number at most ``3s``; the bound is guaranteed only when
    ``is_vertex`` is True, and ``vertex_note`` says why it may not be.
    """

    kind: PlacementKind
    formulation: str
    solve: SolveResult
    placement: PlacementModel
    shares: np.ndarray | None
    split_jobs: tuple[str, ...]
    nonzeros: int
    vertex_note: str = ""
    # For the MILPs: the LP placement solved first, as a fallback and for comparison.
    lp: PlacementResult | None = None
    # "lp" when the LP's placement is returned instead (a MILP without a solution, or the min-split MILP
    # without a better one than the LP's); ``solve`` is still the MILP's. "poured": GPU-proportional demands
    # that no solve placed (a time limit), filled in server by server (:func:`opt_placement`).
    source: str = "model"

    @property
    def status(self) -> Status:
        return self.solve.status

    @property
    def has_solution(self) -> bool:
        return self.shares is not None

    @property
    def num_split(self) -> int | None:
        """Jobs split over servers; None without a solution (no placement splits nothing)."""
        return None if self.shares is None else len(self.split_jobs)

    @property
    def bound_3s(self) -> int:
        """The paper's bound on split jobs of a vertex of the LP: three per server."""
        return 3 * self.placement.servers

    @property
    def nonzero_bound(self) -> int:
        """A vertex of the per-job LP has at most ``n + 3s`` non-zeros (one basic variable per row)."""
        return self.placement.demands.num_jobs + self.bound_3s

    @property
    def is_vertex(self) -> bool | None:
        return self.solve.is_vertex

    @property
    def within_bound(self) -> bool | None:
        """Split jobs <= 3s (checked, whatever the backend returned); None without a solution."""
        return None if self.shares is None else len(self.split_jobs) <= self.bound_3s

    @property
    def seconds(self) -> float:
        """Building and solving, the LP fallback included."""
        own = self.placement.build_seconds + self.solve.build_seconds + self.solve.solve_seconds
        return own + (self.lp.seconds if self.lp is not None else 0.0)


@dataclass(frozen=True, eq=False)
class OptResult:
    """Synergy-OPT on one round: the deployable ``allocation`` and every step that made it."""

    allocation: Allocation
    ideal: IdealResult
    placement: PlacementResult
    rounding: RoundingReport
    evaluation: Evaluation
    timings: dict[str, float]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def objective(self) -> float:
        return self.evaluation.objective

    @property
    def status(self) -> Status:
        """The ideal ILP's status: OPTIMAL when the upper bound is proven."""
        return self.ideal.status

    @property
    def bound(self) -> float | None:
        """The ideal ILP's bound: no realizable round does better."""
        return self.ideal.bound

    @property
    def build_seconds(self) -> float:
        """Building both models (ideal ILP and placement) and translating them for the backend."""
        placed = self.placement
        return self.ideal.build_seconds + placed.placement.build_seconds + placed.solve.build_seconds

    @property
    def solve_seconds(self) -> float:
        """Both backend solves; the rounding is in ``timings["rounding_seconds"]``."""
        return self.ideal.solve_seconds + self.placement.solve.solve_seconds


@checked(instance=round_instance, ideal=Optional(InstanceOf(IdealResult)))
def placement_demands(instance: RoundInstance, ideal: IdealResult | None = None) -> PlacementDemands:
    """``(g_j, c*_j, m*_j)`` of ``instance``: from the ideal ILP (solved on ``instance``), or GPU-proportional
    without one."""
    solved_on = None if ideal is None else ideal.ideal.instance
    if solved_on is not None and solved_on is not instance and \
            (solved_on.cluster, solved_on.jobs) != (instance.cluster, instance.jobs):
        # Another round's configs were taken silently as this one's (the same number of jobs), or raised a raw
        # ValueError (another number).
        raise InvalidInputError("ideal", "IdealResult", "was solved on another round: its cluster or jobs are not "
                                "instance's")
    if ideal is not None and ideal.has_solution:
        return configs_demands(instance, ideal.cpu_per_gpu, ideal.mem_gb_per_gpu)
    return configs_demands(instance, *proportional_configs(instance))


def configs_demands(instance: RoundInstance, cpu_per_gpu: np.ndarray, mem_gb_per_gpu: np.ndarray
                    ) -> PlacementDemands:
    """Each job's GPUs, and its CPUs and memory at the given per-GPU configs (job order)."""
    gpus = instance.gpus
    return PlacementDemands(instance.cluster, tuple(job.id for job in instance.jobs), gpus, gpus * cpu_per_gpu,
                            gpus * mem_gb_per_gpu)


def proportional_configs(instance: RoundInstance) -> tuple[np.ndarray, np.ndarray]:
    """Every job's CPUs and GB per GPU at the cluster's GPU-proportional share."""
    cluster, jobs = instance.cluster, len(instance.jobs)
    return np.full(jobs, cluster.cpu_per_gpu), np.full(jobs, cluster.mem_gb_per_gpu)


@dataclass(frozen=True, eq=False)
class OptPlacement:
    """OPT's placement step on one round (:func:`opt_placement`): the placement, and the per-GPU configs and
    their total throughput it places (GPU-proportional ones when ``fell_back``; ``first_status`` is then how
    the placement of the configs given ended)."""

    placed: PlacementResult
    cpu_per_gpu: np.ndarray
    mem_gb_per_gpu: np.ndarray
    value: float
    fell_back: bool
    first_status: Status


def opt_placement(instance: RoundInstance, cpu_per_gpu: np.ndarray, mem_gb_per_gpu: np.ndarray, value: float, *,
                  from_ideal: bool, kind: PlacementKind, solver: str, params: SolverParams,
                  options: Mapping[str, Any]) -> OptPlacement:
    """OPT's placement step on one homogeneous round (a type's, on a heterogeneous one): the configs' demands
    placed, scaled to the cluster's totals when they pass them by no more than the evaluator's tolerance (a
    solver's own); when configs ``from_ideal`` (the ideal ILP's, worth ``value``) find no placement,
    GPU-proportional demands, which always fit, are placed instead (a fuzzed round's ILP used 988.8000005 GB of
    988.8 and its placement LP was infeasible)."""
    demands = configs_demands(instance, cpu_per_gpu, mem_gb_per_gpu)
    placed = solve_placement(demands.within_totals(CAPACITY_TOLERANCE), kind, solver, params, **dict(options))
    if placed.shares is not None or not from_ideal:
        return OptPlacement(_poured_if_unplaced(placed), cpu_per_gpu, mem_gb_per_gpu, value, False, placed.status)
    cpu_per_gpu, mem_gb_per_gpu = proportional_configs(instance)
    fallback = solve_placement(configs_demands(instance, cpu_per_gpu, mem_gb_per_gpu), kind, solver, params,
                               **dict(options))
    return OptPlacement(_poured_if_unplaced(fallback), cpu_per_gpu, mem_gb_per_gpu,
                        float(instance.floors.sum()), True, placed.status)


def _poured_if_unplaced(placed: PlacementResult) -> PlacementResult:
    """``placed``, or, when its demands are at most GPU-proportional and found no placement (a solver's time
    limit: no solution, not no placement), those demands poured onto the servers in job order, whole GPUs
    filling each server before the next: at the share per GPU a server's CPUs and memory hold whatever GPUs it
    holds, so this fits whenever the GPUs do."""
    demands = placed.placement.demands
    cluster = demands.cluster
    within_share = bool(np.all(demands.cpus <= demands.gpus * cluster.cpu_per_gpu * (1 + 1e-12))
                        and np.all(demands.mem_gb <= demands.gpus * cluster.mem_gb_per_gpu * (1 + 1e-12)))
    if placed.shares is not None or not within_share or demands.infeasibility() is not None:
        return placed
    shares = np.zeros((cluster.servers, demands.num_jobs))
    free = np.full(cluster.servers, cluster.gpus_per_server)
    server = 0
    for j, gpus in enumerate(demands.gpus.tolist()):
        left = gpus
        while left:
            taken = min(left, int(free[server]))
            shares[server, j] += taken / gpus
            free[server] -= taken
            left -= taken
            server += free[server] == 0
    return _checked(placed.kind, placed.placement, placed.solve, shares, lp=placed.lp, source="poured")


def solve_placement(
    demands: PlacementDemands,
    kind: PlacementKind = "lp",
    solver: str = DEFAULT_SOLVER,
    params: SolverParams | None = None,
    *,
    lp_solver: str | None = None,
    **build_options: Any,
) -> PlacementResult:
    """Build and solve one placement model, read it back per job and check its split count.

    Parameters
    ----------
    kind
        ``"lp"`` (the placement LP), ``"milp"`` (fewest split jobs, fractional splits) or ``"milp-integral"``
        (fewest split jobs with integral GPUs per server).
    solver
        A registered backend; a backend that cannot solve the model raises :class:`SolverUnavailableError`.
    lp_solver
        For the MILPs, the backend of the LP solved first (default: ``solver`` when it solves LPs, else
        the default backend). The LP's placement is returned when the MILP has nothing better. For a round
        of 1-GPU jobs only, the min-split MILP first asks the integral-GPU MILP whether they pack with no
        split (exact: 0 is the least possible), and is solved only if they do not.
    build_options
        Passed to the builder (e.g. ``objective="none"`` for the LP, ``formulation="compact"``).

    Returns
    -------
    PlacementResult
        Infeasible or time-limited outcomes are returned with their status, never raised.
    """
    if kind not in PLACEMENT_KINDS:
        raise InvalidInputError("placement", kind, f"choose one of {', '.join(PLACEMENT_KINDS)}")
    if not isinstance(demands, PlacementDemands):  # else a raw AttributeError deep inside
        raise InvalidInputError("demands", type(demands).__name__, "must be a PlacementDemands")
    # Named as solve_opt names them (an unknown one was a raw TypeError from the builder).
    build_options = check_keyword_options(PLACEMENT_BUILDERS[kind], build_options, "build_options",
                                          skip=("demands",))
    params = params or SolverParams()
    spec = backend(solver)
    if kind == "lp":
        if not spec.capabilities.continuous:
            raise SolverUnavailableError(
                f"solver {solver!r} solves integer models only and cannot solve the placement LP; "
                f"use placement='milp-integral' or an LP backend"
            )
        return _solve_lp(demands, solver, params, **build_options)
    if kind == "milp" and not spec.capabilities.continuous:
        raise SolverUnavailableError(
            f"solver {solver!r} solves integer models only; the min-split MILP has continuous split shares "
            f"(use placement='milp-integral')"
        )
    if not spec.capabilities.integer:
        raise SolverUnavailableError(f"solver {solver!r} cannot solve integer models")
    lp_backend = lp_solver or (solver if spec.capabilities.continuous else DEFAULT_SOLVER)
    lp = _solve_lp(demands, lp_backend, params)
    reason = demands.infeasibility()
    if reason is not None:  # the totals the LP refused, the MILPs' solvers passed within their tolerances
        placement = build_placement(demands, kind, **build_options)
        return _checked(kind, placement, SolveResult(status=Status.INFEASIBLE, solver=solver, message=reason), None,
                        lp=lp)
    if kind == "milp" and demands.num_jobs and not build_options and bool(np.all(demands.gpus == 1)):
        packed = _pack_whole(demands, solver, params, lp)
        if packed is not None:
            return packed
    placement = build_placement(demands, kind, **build_options)
    result = solve_model(placement.model, solver, params)
    shares = placement.decode(result.solution()) if result.has_solution else None
    own = _checked(kind, placement, result, shares, lp=lp)
    # Without a solution, or (min-split) with more split jobs than the LP's, the LP placement is returned: it
    # is a feasible min-split solution, and the only placement left to round for the integral-GPU MILP.
    if lp.shares is not None and (shares is None or (kind == "milp" and len(lp.split_jobs) < len(own.split_jobs))):
        return _checked(kind, placement, result, lp.shares, lp=lp, source="lp")
    return own


@overload
def solve_opt(instance: RoundInstance, solver: str = ..., placement: PlacementKind = ...,
              time_limit: float | None = ..., *, ideal_solver: str | None = ..., mip_gap: float = ...,
              threads: int | None = ..., seed: int = ..., verbose: bool = ...,
              options: Mapping[str, Any] | None = ...,
              placement_options: Mapping[str, Any] | None = ...) -> OptResult: ...


@overload
def solve_opt(instance: HeteroRound, solver: str = ..., placement: PlacementKind = ...,
              time_limit: float | None = ..., *, ideal_solver: str | None = ..., mip_gap: float = ...,
              threads: int | None = ..., seed: int = ..., verbose: bool = ...,
              options: Mapping[str, Any] | None = ...,
              placement_options: Mapping[str, Any] | None = ...) -> HeteroOptResult: ...


@checked(instance=any_round, placement=OneOf(PLACEMENT_KINDS), ideal_solver=Optional(SOLVER),
         placement_options=Optional(named_options), **SOLVER_ARGUMENTS)
def solve_opt(
    instance: RoundInstance | HeteroRound,
    solver: str = DEFAULT_SOLVER,
    placement: PlacementKind = "lp",
    time_limit: float | None = None,
    *,
    ideal_solver: str | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
    placement_options: Mapping[str, Any] | None = None,
) -> OptResult | HeteroOptResult:
    """Synergy-OPT: ideal ILP (eqs. 1-7), placement (LP or an exact MILP), rounding to an Allocation.

    On a heterogeneous round (:class:`~synergy_opt.hetero.HeteroRound`) a
    :class:`~synergy_opt.placement.hetero.HeteroOptResult`: type by type when the types are fixed, else the
    type-free ideal ILP's types and configs placed and rounded type by type (:mod:`synergy_opt.placement.hetero`).

    Parameters
    ----------
    instance
        The round. Its GPU demand fits the cluster (the instance checks that when built).
    solver
        The backend of every solve (see :func:`synergy_opt.solvers.available_solvers`). Integer-only
        backends (``ortools-cpsat``) cannot solve the LP: use ``placement="milp-integral"``.
    placement
        ``"lp"``, ``"milp"`` (fewest split jobs) or ``"milp-integral"`` (also integral GPUs per server).
    time_limit
        Seconds allowed to each solver call (ideal ILP, placement LP, placement MILP). Without one, the
        placement MILPs still stop after ``MILP_TIME_LIMIT`` seconds (their best solution, or the LP's, is
        rounded), so that a hard or infeasible packing never hangs.
    ideal_solver
        A different backend for the ideal ILP (default: ``solver``).
    placement_options
        Passed to the placement builder, e.g. ``{"formulation": "compact"}``.

    Returns
    -------
    OptResult
        ``allocation`` is always valid and places every job. When the ideal ILP ends without a solution
        (e.g. a time limit), GPU-proportional demands are placed instead and ``notes`` says so; when the
        placement ends without one, the LP's is rounded. The ILP's demands are placed scaled to the cluster's
        totals when they pass them by no more than the evaluator's tolerance (a solver's own); when no placement
        of them is found at all, GPU-proportional demands are placed and ``notes`` says so.
    """
    placement_options = check_keyword_options(PLACEMENT_BUILDERS[placement], placement_options,
                                              "placement_options", skip=("demands",))
    if placement == "lp" and not backend(solver).capabilities.continuous:
        raise SolverUnavailableError(
            f"solver {solver!r} solves integer models only and cannot solve the placement LP; "
            f"use placement='milp-integral' or an LP backend"
        )
    params = SolverParams(time_limit=time_limit, mip_gap=mip_gap, threads=threads, seed=seed, verbose=verbose,
                          options=dict(options or {}))
    placement_params = params if placement == "lp" or time_limit is not None else replace(
        params, time_limit=MILP_TIME_LIMIT)
    if isinstance(instance, HeteroRound):
        return solve_hetero_opt(instance, solver, placement, params, placement_params, ideal_solver,
                                dict(placement_options or {}), solve_opt, opt_placement)
    notes: list[str] = []
    start = time.perf_counter()
    ideal = solve_ideal(instance, ideal_solver or solver, time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                        seed=seed, verbose=verbose, options=options)
    if ideal.has_solution:
        cpu, mem = ideal.cpu_per_gpu, ideal.mem_gb_per_gpu
        ideal_objective = float(ideal.objective or 0.0)
    else:
        notes.append(f"ideal ILP ended {ideal.status.value} without a solution: GPU-proportional demands placed")
        cpu, mem, ideal_objective = *proportional_configs(instance), float(instance.floors.sum())
    after_ideal = time.perf_counter()

    configs = opt_placement(instance, cpu, mem, ideal_objective, from_ideal=ideal.has_solution, kind=placement,
                            solver=solver, params=placement_params, options=placement_options or {})
    # The loss is reported against the ideal ILP's objective, also when its configs gave way to the fallback's.
    placed, cpu, mem = configs.placed, configs.cpu_per_gpu, configs.mem_gb_per_gpu
    if configs.fell_back:
        notes.append(f"{placement} placement of the ideal ILP's configs ended {configs.first_status.value}: "
                     "GPU-proportional demands placed")
    if placed.shares is None:
        reason = placed.placement.demands.infeasibility() or placed.solve.message
        raise InvalidInputError("demands", placed.status.value, f"no placement exists: {reason}")
    if placed.source == "poured":
        notes.append(f"{placement} placement of GPU-proportional demands ended {placed.status.value}: they are "
                     "poured onto the servers in job order")
    elif placed.source == "lp":
        notes.append(f"{placement} placement ended {placed.status.value} without a better solution: the LP's "
                     f"placement is rounded")
    shares = placed.shares
    after_placement = time.perf_counter()

    rounded = round_placement(instance, shares, cpu, mem, ideal_objective)
    done = time.perf_counter()
    timings = {
        "ideal_seconds": after_ideal - start,
        "ideal_solve_seconds": ideal.solve_seconds,
        "placement_seconds": after_placement - after_ideal,
        "placement_solve_seconds": placed.solve.solve_seconds,
        "rounding_seconds": done - after_placement,
        "total_seconds": done - start,
    }
    return OptResult(rounded.allocation, ideal, placed, rounded.report, rounded.evaluation, timings, tuple(notes))


def _pack_whole(demands: PlacementDemands, solver: str, params: SolverParams,
                lp: PlacementResult) -> PlacementResult | None:
    """A round of 1-GPU jobs only: 0 split jobs iff they pack integrally, which the integral-GPU MILP (server
    patterns, no symmetry) decides much faster than the min-split MILP finds it. None if they do not pack."""
    packing = build_placement(demands, "milp-integral")
    result = solve_model(packing.model, solver, params)
    if result.status is not Status.OPTIMAL:
        return None
    # 0 split jobs is the min-split MILP's lower bound, so this packing is optimal for it.
    return _checked("milp", packing, result, packing.decode(result.solution()), lp=lp)


def _solve_lp(demands: PlacementDemands, solver: str, params: SolverParams, **build_options: Any) -> PlacementResult:
    placement = build_placement_lp(demands, **build_options)
    reason = demands.infeasibility()
    if reason is not None:
        # Infeasible by the totals: say so without asking a solver.
        result = SolveResult(status=Status.INFEASIBLE, solver=solver, message=reason)
        return _checked("lp", placement, result, None)
    result = solve_model(placement.model, solver, params)
    shares = placement.decode(result.solution()) if result.has_solution else None
    note = ""
    if shares is not None and result.is_vertex is not True:
        can = backend(solver).capabilities.vertex_lp
        note = (f"{solver} does not return a basic (vertex) solution" if not can
                else f"{solver} did not report a basic solution") + ": the 3s bound is checked, not guaranteed"
    return _checked("lp", placement, result, shares, note=note)


def _checked(
    kind: PlacementKind,
    placement: PlacementModel,
    result: SolveResult,
    shares: np.ndarray | None,
    *,
    lp: PlacementResult | None = None,
    note: str = "",
    source: str = "model",
) -> PlacementResult:
    if shares is None:
        return PlacementResult(kind, placement.formulation, result, placement, None, (), 0, note, lp, source)
    on = shares > 0
    ids = placement.demands.job_ids
    split = tuple(ids[j] for j in np.flatnonzero(on.sum(axis=0) > 1))
    return PlacementResult(kind, placement.formulation, result, placement, shares, split, int(on.sum()), note,
                           lp, source)
