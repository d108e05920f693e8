"""The ideal ILP of a heterogeneous round solved: per type when the types are fixed, else the type-free model.

Methods (``solve_ideal(round, method=...)`` on a :class:`~synergy_opt.hetero.HeteroRound`):

- ``"per-type"`` (type-fixed rounds): each type's homogeneous round solved by :func:`solve_ideal` exactly as
  today, the results summed (formulations/heterogeneous.md, H8).
- ``"direct"``: the type-free model (:mod:`~synergy_opt.ideal.hetero_model`) handed to any backend.
- ``"core"``: exact through its coupling rows. The LP relaxation (HiGHS, dual simplex) prices the GPU, CPU and
  memory rows of every type, ``lam >= 0``. For any such prices and every allocation ``y``,
  ``sum W y = L(lam) - sum rc y - lam . slack(y)`` with ``L(lam) = lam . cap + sum_c n_c max_k (W_ck - lam .
  u_ck)`` an upper bound and reduced costs ``rc >= 0``: a solution of objective ``>= L - tau`` uses only
  columns of reduced cost ``<= tau``. So the MILP restricted to those columns (HiGHS) is exact for them: if
  its optimum ``z`` has ``L - z <= tau`` nothing outside is better; otherwise ``tau = L - z`` includes
  every better solution and one more restricted solve settles it. A restricted MILP with no solution
  quadruples ``tau``. The bound reported is ``max(restricted bound, L - tau)``.
- ``"auto"``: per-type on a type-fixed round; on a type-free one ``core`` for the ``highs`` ILP with floors
  fixed and no backend options, else ``direct``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_model import HeteroIdealModel, build_hetero_ideal
from synergy_opt.ideal.hetero_types import lp_types, solve_lp
from synergy_opt.ideal.model import JobConfig, Objective, Reductions
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import relative_gap
from synergy_opt.solvers.model import LinearModel

HETERO_METHODS = ("auto", "per-type", "core", "direct")
SOLVER_NAME = "highs-hetero-core"


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
        return relative_gap(self.status, self.objective, self.bound)

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
    if method == "auto":
        if instance.type_fixed:
            method = "per-type"
        else:
            core = (not relax and solver == DEFAULT_SOLVER and not params.options and reductions.fix_below_floor)
            method = "core" if core else "direct"
    if method == "per-type":
        return _per_type(instance, solver, relax, objective, reductions, params, solve_type)
    ideal = build_hetero_ideal(instance, objective=objective, reductions=reductions)
    if method == "core":
        if relax or not reductions.fix_below_floor or params.options:
            raise InvalidInputError("method", method, "the core method solves the ILP with floors fixed "
                                    "(relax=False, Reductions.fix_below_floor=True) and takes no backend options")
        result = solve_core(ideal, params, solve_type)
    else:
        result = solve_model(ideal.model.relaxed() if relax else ideal.model, solver, params)
    return HeteroIdealResult(
        status=result.status, objective=result.objective, bound=result.bound, relaxed=relax, instance=instance,
        method=method, build_seconds=ideal.build_seconds + result.build_seconds, solve_seconds=result.solve_seconds,
        message=result.message, model=ideal, solve=result,
    )


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


def solve_core(ideal: HeteroIdealModel, params: SolverParams, solve_type: Any) -> SolveResult:
    """The type-free ILP solved exactly through its coupling rows (module docstring); ``solve_type`` solves each
    type's homogeneous round of the first incumbent (:func:`solve_ideal`)."""
    start = time.perf_counter()
    deadline = None if params.time_limit is None else start + params.time_limit
    model = ideal.model
    if not model.num_vars:
        return SolveResult(Status.OPTIMAL, SOLVER_NAME, 0.0, 0.0, np.zeros(0), message="optimal: no jobs")
    lp = solve_lp(ideal, params.time_limit)
    if lp is None:  # the LP did not solve (a time limit): the whole MILP, as a backend would
        return solve_model(model, DEFAULT_SOLVER, params)
    lam, upper, reduced = _prices(ideal, lp[1])
    best = _incumbent(ideal, lp, params, solve_type)
    tau = max(4 * params.mip_gap * abs(upper), 1e-9 * max(1.0, abs(upper)))
    worst = float(reduced.max(initial=0.0)) * float(ideal.class_count.sum()) + float(
        lam @ model.row_upper[ideal.coupling_rows])
    rounds = 0
    while True:
        if best is not None and best.objective is not None and upper - best.objective <= \
                params.mip_gap * abs(best.objective):
            return replace(best, status=Status.OPTIMAL, bound=upper, solve_seconds=time.perf_counter() - start,
                           message="optimal within the gap: the LP's types, each type exact, meet the LP bound")
        rounds += 1
        remaining = None if deadline is None else max(deadline - time.perf_counter(), 1e-3)
        keep = reduced <= tau * (1 + 1e-12)
        result = _restricted(model, keep, replace(params, time_limit=remaining))
        if result.has_solution and result.objective is not None and (best is None or best.objective is None
                                                                     or result.objective > best.objective):
            best = result
        done = time.perf_counter() - start
        if result.status is Status.OPTIMAL and best is not None and best.objective is not None \
                and upper - best.objective <= tau * (1 + 1e-12):
            # Nothing outside the columns kept beats L - tau; inside, the restricted MILP's bound holds.
            inside = result.bound if result.bound is not None else best.objective
            bound = min(max(inside, best.objective, upper - tau), upper)
            return replace(best, status=Status.OPTIMAL, solver=SOLVER_NAME, bound=bound, solve_seconds=done,
                           message=f"optimal: {int(keep.sum())} of {keep.size} columns within the reduced-cost "
                           f"threshold, {rounds} restricted MILPs")
        if result.status not in (Status.OPTIMAL, Status.INFEASIBLE) or tau >= worst:
            status = Status.FEASIBLE if best is not None else result.status
            outcome = best if best is not None else result
            return replace(outcome, status=status, solver=SOLVER_NAME, bound=upper, solve_seconds=done,
                           message=f"{result.message} in a restricted MILP (threshold {tau:.3g})")
        # Grow the threshold: by four while the incumbent is far from the bound (each solve improves it at
        # little cost), to exactly the gap once that is near (the last solve proves).
        gap = np.inf if best is None or best.objective is None else upper - best.objective
        tau = min(4 * tau, gap) if gap > tau else 4 * tau


def _prices(ideal: HeteroIdealModel, duals: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Prices of the coupling rows from the LP's duals, the bound ``L`` they give, and every column's reduced
    cost against its class's best."""
    model = ideal.model
    rows = ideal.coupling_rows
    lam = np.maximum(duals[rows], 0.0)
    priced = model.objective - model.matrix[rows].T @ lam
    best = np.full(ideal.num_classes, -np.inf)
    np.maximum.at(best, ideal.col_class, priced)
    upper = float(lam @ model.row_upper[rows] + ideal.class_count.astype(float) @ best)
    return lam, upper, np.maximum(best[ideal.col_class] - priced, 0.0)


def _incumbent(ideal: HeteroIdealModel, lp: tuple[np.ndarray, np.ndarray], params: SolverParams,
               solve_type: Any) -> SolveResult | None:
    """A first solution: the LP's types (rounded), each type's homogeneous ILP solved exactly (today's core
    method, fast), read back as the type-free model's columns. None when a type's solve finds nothing."""
    instance = ideal.instance
    fixed = instance.with_types(lp_types(instance, ideal, lp))
    x = np.zeros(ideal.model.num_vars)
    class_of = np.empty(len(instance.jobs), dtype=np.int64)
    class_of[ideal.class_jobs] = np.repeat(np.arange(ideal.num_classes), ideal.class_count)
    for kind, sub in fixed.per_type().items():
        if not sub.jobs:
            continue
        result = solve_type(sub, objective=ideal.objective_kind, mip_gap=params.mip_gap, threads=params.threads,
                            time_limit=params.time_limit)
        if not result.has_solution:
            return None
        k = instance.cluster.index(kind)
        for job_id, config in result.configs.items():
            on = np.flatnonzero((ideal.col_class == class_of[instance.job_index[job_id]]) & (ideal.col_type == k)
                                & np.isclose(ideal.col_cpu, config.cpu_per_gpu)
                                & np.isclose(ideal.col_mem, config.mem_gb_per_gpu))
            if not on.size:
                return None
            x[on[0]] += 1
    objective = float(ideal.model.objective @ x)
    return SolveResult(Status.FEASIBLE, SOLVER_NAME, objective, None, x, message="the LP's types, each type exact")


def _restricted(model: LinearModel, keep: np.ndarray, params: SolverParams) -> SolveResult:
    """The MILP over the columns ``keep`` (the others at 0), its solution read back on every column."""
    columns = np.flatnonzero(keep)
    sub = replace(model, name=f"{model.name}_restricted", objective=model.objective[columns],
                  matrix=model.matrix[:, columns], col_lower=model.col_lower[columns],
                  col_upper=model.col_upper[columns], integer=model.integer[columns],
                  var_blocks={"y": slice(0, columns.size)})
    result = solve_model(sub, DEFAULT_SOLVER, params)
    if result.x is None:
        return result
    x = np.zeros(model.num_vars)
    x[columns] = result.x
    return replace(result, x=x)
