"""The ideal ILP of a heterogeneous round solved: per type when the types are fixed, else the type-free model.

Methods (``solve_ideal(round, method=...)`` on a :class:`~synergy_opt.hetero.HeteroRound`):

- ``"per-type"`` (type-fixed rounds): each type's homogeneous round solved by :func:`solve_ideal` exactly as
  today, the results summed (formulations/heterogeneous.md, H8).
- ``"direct"``: the type-free model (:mod:`~synergy_opt.ideal.hetero_model`) handed to any backend.
- ``"core"``: exact through its structure (:mod:`~synergy_opt.ideal.hetero_core`): Lagrangian prices of the GPU,
  CPU and memory rows of every type, then an exact search of the classes the prices leave open (the few that
  may change type, and per type today's homogeneous core search of the rest).
- ``"auto"``: per-type on a type-fixed round; on a type-free one ``core`` for the ``highs`` ILP with floors
  fixed and no backend options, else ``direct``. A core search that ends unproven at its own limits (on a few
  multi-GPU rounds its beams find no solution) hands the round to ``direct`` with the time left; the better
  solution and the tighter bound of the two are returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_core import solve_core
from synergy_opt.ideal.hetero_model import HeteroIdealModel, build_hetero_ideal
from synergy_opt.ideal.model import JobConfig, Objective, Reductions, check_core_solver, configs_frame
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import relative_gap
from synergy_opt.solvers.model import LinearModel

HETERO_METHODS = ("auto", "per-type", "core", "direct")


class TypeResult(Protocol):
    """What a type's homogeneous result offers here (:class:`~synergy_opt.ideal.solve.IdealResult`)."""

    status: Status
    objective: float | None
    bound: float | None

    @property
    def has_solution(self) -> bool: ...

    @property
    def configs(self) -> dict[str, JobConfig]: ...

    @property
    def build_seconds(self) -> float: ...

    @property
    def solve_seconds(self) -> float: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True, eq=False)
class HeteroIdealResult:
    """Outcome of :func:`solve_ideal` on a heterogeneous round. Per-job arrays are in the round's job order.

    ``model`` is the type-free model (None for ``per-type``); ``per_type`` each type's homogeneous result
    (``per-type`` only); ``solve`` the backend's result of the type-free model (or the core method's).
    """

    status: Status
    objective: float | None
    bound: float | None
    relaxed: bool
    instance: HeteroRound
    method: str
    build_seconds: float
    solve_seconds: float
    message: str
    model: HeteroIdealModel | None = None
    solve: SolveResult | None = None
    per_type: Mapping[str, TypeResult] | None = None

    @property
    def has_solution(self) -> bool:
        if self.per_type is not None:
            return all(result.has_solution for result in self.per_type.values())
        return self.solve is not None and self.solve.has_solution

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    def to_frame(self) -> Any:
        """The chosen types and configs, one row per job (:func:`~synergy_opt.ideal.model.configs_frame`: a pandas
        ``DataFrame`` indexed by job id, with ``gpu_type``; no rows without a solution)."""
        return configs_frame(self.configs.values(), typed=True)

    @cached_property
    def configs(self) -> dict[str, JobConfig]:
        """Per job id, its type and config (empty when the solve found no solution)."""
        if not self.has_solution:
            return {}
        if self.per_type is not None:
            found = {job_id: replace(config, gpu_type=kind) for kind, result in self.per_type.items()
                     for job_id, config in result.configs.items()}
            return {job.id: found[job.id] for job in self.instance.jobs}
        assert self.model is not None and self.solve is not None
        ideal, names = self.model, self.instance.cluster.names
        y = self.solve.values(ideal.model, "y")
        chosen = ideal.decode(y) if not self.relaxed else _heaviest(ideal, y)
        return {
            job.id: JobConfig(job.id, job.gpus, float(ideal.col_cpu[c]), float(ideal.col_mem[c]),
                              float(ideal.col_tput[c]), float(floor), names[int(ideal.col_type[c])])
            for job, c, floor in zip(self.instance.jobs, chosen, self.instance.floors, strict=True)
        }

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The type of each job, in job order."""
        return tuple(str(config.gpu_type) for config in self.configs.values())

    @property
    def cpu_per_gpu(self) -> np.ndarray:
        return np.array([config.cpu_per_gpu for config in self.configs.values()])

    @property
    def mem_gb_per_gpu(self) -> np.ndarray:
        return np.array([config.mem_gb_per_gpu for config in self.configs.values()])

    @property
    def throughput(self) -> np.ndarray:
        return np.array([config.throughput for config in self.configs.values()])

    def fixed_round(self) -> HeteroRound:
        """The type-fixed round of the types this solution chose."""
        return self.instance.with_types(self.gpu_types)


def _heaviest(ideal: HeteroIdealModel, y: np.ndarray) -> np.ndarray:
    """For a relaxation: each job's column holding most of its class's weight."""
    order = np.lexsort((-y, ideal.col_class))
    first = order[np.searchsorted(ideal.col_class[order], np.arange(ideal.num_classes))]
    chosen = np.empty(ideal.class_jobs.size, dtype=np.int64)
    chosen[ideal.class_jobs] = np.repeat(first, ideal.class_count)
    return chosen


def solve_hetero_ideal(
    instance: HeteroRound,
    solver: str,
    relax: bool,
    objective: Objective,
    reductions: Reductions | None,
    params: SolverParams,
    method: str,
    solve_type: Any,
) -> HeteroIdealResult:
    """What :func:`~synergy_opt.ideal.solve.solve_ideal` does with a heterogeneous round (module docstring);
    ``solve_type`` is :func:`solve_ideal` itself, for the per-type solves."""
    if method not in HETERO_METHODS:
        raise InvalidInputError("method", method, f"on a heterogeneous round choose one of {', '.join(HETERO_METHODS)}")
    reductions = reductions or Reductions()
    fallback = False
    if method == "auto":
        if instance.type_fixed:
            method = "per-type"
        else:
            core = (not relax and solver == DEFAULT_SOLVER and not params.options and reductions.fix_below_floor)
            method, fallback = ("core", True) if core else ("direct", False)
    if method == "per-type":
        return _per_type(instance, solver, relax, objective, reductions, params, solve_type)
    ideal = build_hetero_ideal(instance, objective=objective, reductions=reductions)
    if method == "core":
        check_core_solver(solver, DEFAULT_SOLVER)
        if relax or not reductions.fix_below_floor or params.options:
            raise InvalidInputError("method", method, "the core method solves the ILP with floors fixed "
                                    "(relax=False, Reductions.fix_below_floor=True) and takes no backend options")
        if fallback:
            result, method = core_then_direct(lambda: solve_core(ideal, params), ideal.model, solver, params)
        else:
            result = solve_core(ideal, params)
    else:
        result = solve_model(ideal.model.relaxed() if relax else ideal.model, solver, params)
    return HeteroIdealResult(
        status=result.status, objective=result.objective, bound=result.bound, relaxed=relax, instance=instance,
        method=method, build_seconds=ideal.build_seconds + result.build_seconds, solve_seconds=result.solve_seconds,
        message=result.message, model=ideal, solve=result,
    )


def core_then_direct(solve_core: Callable[[], SolveResult], model: LinearModel, solver: str, params: SolverParams
                     ) -> tuple[SolveResult, str]:
    """The auto method's core search (``solve_core()``), then, when it ends unproven before the time limit (at
    its own limits, or without a solution where the ILP has one), ``solver`` on the whole ``model`` with the time
    left. Returns the result and the method that gave its solution (``"core"`` or ``"direct"``); the bound is the
    tighter of the two (both are valid). A core search stopped by the time limit is returned as it is: at 3 x 128
    GPUs HiGHS needs 0.3-2.8 s, more than a share of a short limit gives it, and the core's incumbent and bound
    are the joint's start."""
    start = time.perf_counter()
    limit = params.time_limit
    core = solve_core()
    left = None if limit is None else limit - (time.perf_counter() - start)
    if core.status in (Status.OPTIMAL, Status.INFEASIBLE) or (left is not None and left <= 0.0):
        return core, "core"
    direct = solve_model(model, solver, replace(params, time_limit=left))
    seconds = core.solve_seconds + direct.solve_seconds
    message = f"core: {core.message}; then HiGHS on the whole model: {direct.message}"
    if direct.status in (Status.OPTIMAL, Status.INFEASIBLE):
        return replace(direct, solve_seconds=seconds, message=message), "direct"
    bounds = [b for b in (core.bound, direct.bound) if b is not None]
    best, method = max(((core, "core"), (direct, "direct")),
                       key=lambda pair: -np.inf if pair[0].objective is None else pair[0].objective)
    return replace(best, bound=min(bounds) if bounds else None, solve_seconds=seconds, message=message,
                   status=Status.FEASIBLE if best.has_solution else best.status), method


def _per_type(instance: HeteroRound, solver: str, relax: bool, objective: Objective, reductions: Reductions,
              params: SolverParams, solve_type: Any) -> HeteroIdealResult:
    if not instance.type_fixed:
        raise InvalidInputError("method", "per-type", "a type-free round does not split by type (fix its types "
                                "first: with_types or at_baseline)")
    results: dict[str, TypeResult] = {
        kind: solve_type(sub, solver, relax, objective=objective, reductions=reductions,
                         time_limit=params.time_limit, mip_gap=params.mip_gap, threads=params.threads,
                         seed=params.seed, verbose=params.verbose, options=dict(params.options))
        for kind, sub in instance.per_type().items()
    }
    statuses = [r.status for r in results.values()]
    if all(s is Status.OPTIMAL for s in statuses):
        status = Status.OPTIMAL
    elif all(s.has_solution for s in statuses):
        status = Status.FEASIBLE
    else:
        status = next(s for s in statuses if not s.has_solution)
    objectives = [r.objective for r in results.values()]
    bounds = [r.bound for r in results.values()]
    return HeteroIdealResult(
        status=status,
        objective=None if None in objectives else float(sum(o for o in objectives if o is not None)),
        bound=None if None in bounds else float(sum(b for b in bounds if b is not None)),
        relaxed=relax, instance=instance, method="per-type",
        build_seconds=sum(r.build_seconds for r in results.values()),
        solve_seconds=sum(r.solve_seconds for r in results.values()),
        message="; ".join(f"{kind}: {r.message}" for kind, r in results.items()), per_type=results,
    )
