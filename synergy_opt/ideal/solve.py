"""``solve_ideal``: the ideal-allocation ILP (or its LP relaxation) solved by any registered backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, overload

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.core import solve_core
from synergy_opt.ideal.hetero_solve import HETERO_METHODS, HeteroIdealResult, core_then_direct, solve_hetero_ideal
from synergy_opt.ideal.model import (
    OBJECTIVE,
    IdealModel,
    JobConfig,
    Objective,
    Reductions,
    build_ideal,
    check_core_solver,
    configs_frame,
)
from synergy_opt.instance import RoundInstance
from synergy_opt.io import any_round
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, Status, solve_model
from synergy_opt.solvers.base import SolvedModel
from synergy_opt.solvers.registry import SOLVER_ARGUMENTS
from synergy_opt.validation import InstanceOf, OneOf, Optional, boolean, checked

Method = Literal["auto", "core", "direct"]
METHODS: tuple[Method, ...] = ("auto", "core", "direct")


@dataclass(frozen=True, eq=False)
class IdealResult(SolvedModel):
    """Outcome of :func:`solve_ideal`. Per-job arrays are in the instance's job order."""

    status: Status
    objective: float | None
    bound: float | None
    relaxed: bool
    ideal: IdealModel
    solve: SolveResult

    @property
    def model_build_seconds(self) -> float:
        return self.ideal.build_seconds

    @cached_property
    def y(self) -> np.ndarray:
        """The model's ``y`` block: per config column, how many of its class's jobs take it (eq. 6)."""
        return self.solve.values(self.ideal.model, "y")

    @cached_property
    def chosen_columns(self) -> np.ndarray:
        """Column of each job's config; for a relaxation, the column holding most of its weight."""
        if not self.relaxed:
            return self.ideal.decode(self.y)
        ideal = self.ideal
        chosen = np.empty(ideal.class_jobs.size, dtype=np.int64)
        order = np.lexsort((-self.y, ideal.col_class))
        first = order[np.searchsorted(ideal.col_class[order], np.arange(ideal.num_classes))]
        chosen[ideal.class_jobs] = np.repeat(first, ideal.class_count)
        return chosen

    @property
    def cpu_per_gpu(self) -> np.ndarray:
        """Each job's CPUs per GPU in its chosen config, in job order."""
        return self.ideal.col_cpu[self.chosen_columns]

    @property
    def mem_gb_per_gpu(self) -> np.ndarray:
        """Each job's GB per GPU in its chosen config, in job order."""
        return self.ideal.col_mem[self.chosen_columns]

    @property
    def throughput(self) -> np.ndarray:
        """Each job's throughput in its chosen config, in job order."""
        return self.ideal.col_tput[self.chosen_columns]

    @property
    def cpu_demand(self) -> np.ndarray:
        """``c*_j`` (eq. 6) per job."""
        return self.ideal.instance.gpus * self.cpu_per_gpu

    @property
    def mem_demand(self) -> np.ndarray:
        """``m*_j`` (eq. 7) per job."""
        return self.ideal.instance.gpus * self.mem_gb_per_gpu

    @cached_property
    def configs(self) -> dict[str, JobConfig]:
        """Per job id, its chosen config (empty when the solve found no solution)."""
        if not self.has_solution:
            return {}
        instance = self.ideal.instance
        floors = instance.floors
        return {
            job.id: JobConfig(job.id, job.gpus, float(c), float(m), float(w), float(f))
            for job, c, m, w, f in zip(
                instance.jobs, self.cpu_per_gpu, self.mem_gb_per_gpu, self.throughput, floors, strict=True
            )
        }

    def to_frame(self) -> Any:
        """The chosen configs, one row per job (a pandas ``DataFrame`` indexed by job id): ``gpus``,
        ``cpu_per_gpu``, ``mem_gb_per_gpu``, ``cpus``, ``mem_gb``, ``throughput``, ``floor`` (no rows without a
        solution)."""
        return configs_frame(self.configs.values())

    @cached_property
    def fractional_jobs(self) -> tuple[str, ...]:
        """Jobs whose relaxed ``y`` is not integral (none for an ILP solve)."""
        if not self.relaxed or not self.has_solution:
            return ()
        ideal = self.ideal
        classes = ideal.fractional_classes(self.y)
        offsets = ideal.class_offsets
        members = [ideal.class_jobs[offsets[c]:offsets[c + 1]] for c in classes]
        jobs = ideal.instance.jobs
        return tuple(jobs[j].id for j in np.concatenate(members or [np.zeros(0, np.int64)]))


@overload
def solve_ideal(instance: RoundInstance, solver: str = ..., relax: bool = ..., *, objective: Objective = ...,
                reductions: Reductions | None = ..., time_limit: float | None = ..., mip_gap: float = ...,
                threads: int | None = ..., seed: int = ..., verbose: bool = ...,
                options: Mapping[str, Any] | None = ..., method: str = ...) -> IdealResult: ...


@overload
def solve_ideal(instance: HeteroRound, solver: str = ..., relax: bool = ..., *, objective: Objective = ...,
                reductions: Reductions | None = ..., time_limit: float | None = ..., mip_gap: float = ...,
                threads: int | None = ..., seed: int = ..., verbose: bool = ...,
                options: Mapping[str, Any] | None = ..., method: str = ...) -> HeteroIdealResult: ...


@checked(instance=any_round, relax=boolean, objective=OBJECTIVE, reductions=Optional(InstanceOf(Reductions)),
         method=OneOf(tuple(dict.fromkeys((*METHODS, *HETERO_METHODS)))), **SOLVER_ARGUMENTS)
def solve_ideal(
    instance: RoundInstance | HeteroRound,
    solver: str = DEFAULT_SOLVER,
    relax: bool = False,
    *,
    objective: Objective = "job",
    reductions: Reductions | None = None,
    time_limit: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = 1,
    seed: int = 0,
    verbose: bool = False,
    options: Mapping[str, Any] | None = None,
    method: str = "auto",
) -> IdealResult | HeteroIdealResult:
    """Solve the ideal-allocation ILP (paper eqs. 1-7) of ``instance``, or its LP relaxation.

    A heterogeneous round (:class:`~synergy_opt.hetero.HeteroRound`) gives a
    :class:`~synergy_opt.ideal.hetero_solve.HeteroIdealResult`: a type-fixed round solved type by type, a
    type-free one by its type-free model (:mod:`synergy_opt.ideal.hetero_solve`; methods ``per-type``,
    ``core``, ``direct``, ``auto``).

    Parameters
    ----------
    solver
        A registered backend name (see :func:`synergy_opt.solvers.available_solvers`).
    relax
        Solve the LP relaxation (an upper bound, Theorem 4.1) instead of the ILP.
    objective
        ``"job"``: sum of per-job throughput (eq. 1); ``"gpu"``: GPU-weighted.
    reductions
        Which exact reductions to apply (all by default); ``Reductions.none()`` gives the plain model.
    method
        ``"direct"``: hand the whole model to ``solver``. ``"core"``: HiGHS prices the two coupling rows and
        an exact search settles the few jobs the prices leave open (:mod:`synergy_opt.ideal.core`); for the
        ILP with floors fixed. ``"auto"``: ``"core"`` for the ``highs`` ILP when every class is one job (no
        two jobs alike) and no backend ``options`` are given, else ``"direct"``; a core search that ends without
        a solution before the time limit hands the round to ``"direct"`` with the time left
        (:func:`~synergy_opt.ideal.hetero_solve.core_then_direct`).
    """
    if isinstance(instance, HeteroRound):
        hetero_params = SolverParams(time_limit=time_limit, mip_gap=mip_gap, threads=threads, seed=seed,
                                     verbose=verbose, options=dict(options or {}))
        return solve_hetero_ideal(instance, solver, relax, objective, reductions, hetero_params, method, solve_ideal)
    if method not in METHODS:
        raise InvalidInputError("method", method, f"on a homogeneous round choose one of {', '.join(METHODS)}")
    if method == "core" and options:
        raise InvalidInputError("options", options, "the core method takes no backend options (method='direct' does)")
    if method == "core":
        check_core_solver(solver, DEFAULT_SOLVER)
    ideal = build_ideal(instance, objective=objective, reductions=reductions)
    model = ideal.model.relaxed() if relax else ideal.model
    params = SolverParams(time_limit=time_limit, mip_gap=mip_gap, threads=threads, seed=seed, verbose=verbose,
                          options=dict(options or {}))
    # The core search takes the ILP whose floors are fixed (no floor rows to keep).
    core_applies = not relax and "floor" not in model.con_blocks
    fallback = method == "auto"
    if method == "auto":
        unique_jobs = ideal.num_classes == len(instance.jobs)
        use_core = core_applies and solver == DEFAULT_SOLVER and not options and unique_jobs
        method = "core" if use_core else "direct"
    if method == "core":
        if not core_applies:
            raise InvalidInputError("method", method, "the core search solves the ILP with floors fixed "
                                    "(relax=False, Reductions.fix_below_floor=True)")
        if fallback:
            result = core_then_direct(lambda: solve_core(ideal, params), model, solver, params)[0]
        else:
            result = solve_core(ideal, params)
    else:
        result = solve_model(model, solver, params)
    return IdealResult(
        status=result.status,
        objective=result.objective,
        bound=result.bound,
        relaxed=relax,
        ideal=ideal,
        solve=result,
    )
