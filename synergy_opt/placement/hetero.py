"""Synergy-OPT on a heterogeneous round (formulations/heterogeneous.md, section 4; SPEC 7).

- Type-fixed round: each type's homogeneous round through today's OPT (ideal ILP, placement, rounding), the
  allocations joined.
- Type-free round: the type-free ideal ILP chooses every job's type and config; each type's jobs are then
  placed by today's placement model on that type's servers and rounded by today's rounding, the allocations
  joined. Rounding's fallbacks (a job's GPU-proportional share on its type, demotion towards it) keep every
  job at its floor, because a job only takes a type whose proportional share does (H0).

``solve_opt(round)`` on a :class:`~synergy_opt.hetero.HeteroRound` runs this; the homogeneous steps are
passed in (``solve_type``, ``opt_placement``), so this module sits beside them without an import circle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synergy_opt.evaluation import Evaluation, evaluate
from synergy_opt.hetero import HeteroRound, join_allocations
from synergy_opt.ideal import solve_ideal
from synergy_opt.ideal.hetero_solve import HeteroIdealResult
from synergy_opt.instance import Allocation
from synergy_opt.placement.rounding import RoundingReport, round_placement
from synergy_opt.solvers import SolverParams, Status


@dataclass(frozen=True, eq=False)
class HeteroOptResult:
    """Synergy-OPT on a heterogeneous round: the deployable ``allocation``, the ideal ILP that chose the types
    and configs, each type's placement and rounding (``per_type``: that type's OPT result on a type-fixed
    round, its :class:`~synergy_opt.placement.rounding.RoundingReport` on a type-free one)."""

    allocation: Allocation
    ideal: HeteroIdealResult
    per_type: Mapping[str, Any]
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
        return self.ideal.bound

    @property
    def build_seconds(self) -> float:
        """The ideal ILP's build (its per-type placements' builds count towards ``timings``)."""
        return self.ideal.build_seconds

    @property
    def solve_seconds(self) -> float:
        """Everything but the ideal ILP's build: its solve, the placements and the rounding."""
        return self.timings["total_seconds"] - self.ideal.build_seconds


def solve_hetero_opt(instance: HeteroRound, solver: str, placement: str, params: SolverParams,
                     placement_params: SolverParams, ideal_solver: str | None, placement_options: Mapping[str, Any],
                     solve_type: Callable[..., Any], opt_placement: Callable[..., Any]) -> HeteroOptResult:
    """OPT on ``instance`` (module docstring); ``params`` are the ideal ILP's (and, type-fixed, each type's OPT
    is given their time limit), ``placement_params`` the placements' (the placement MILPs' default time limit
    when none is given); ``solve_type`` is :func:`~synergy_opt.placement.solve.solve_opt` and ``opt_placement``
    :func:`~synergy_opt.placement.solve.opt_placement` (a type's placement step)."""
    start = time.perf_counter()
    options = {"time_limit": params.time_limit, "mip_gap": params.mip_gap, "threads": params.threads,
               "seed": params.seed, "verbose": params.verbose, "options": dict(params.options)}
    if instance.type_fixed:
        per_type = {kind: solve_type(sub, solver, placement, ideal_solver=ideal_solver,
                                     placement_options=dict(placement_options), **options)
                    for kind, sub in instance.per_type().items() if sub.jobs}
        allocation = join_allocations(instance.cluster, {kind: r.allocation for kind, r in per_type.items()})
        ideal = _ideal(instance, ideal_solver or solver, params)
        found = tuple(f"{kind}: {note}" for kind, r in per_type.items() for note in r.notes)
        return HeteroOptResult(allocation, ideal, per_type, evaluate(instance, allocation),
                               {"total_seconds": time.perf_counter() - start}, found)
    ideal = _ideal(instance, ideal_solver or solver, params)
    after_ideal = time.perf_counter()
    notes: list[str] = []
    if ideal.has_solution:
        fixed, cpu, mem = ideal.fixed_round(), ideal.cpu_per_gpu, ideal.mem_gb_per_gpu
        value = ideal.throughput
    else:
        notes.append(f"ideal ILP ended {ideal.status.value} without a solution: GPU-proportional demands on the "
                     "baseline types placed")
        fixed = instance.at_baseline()
        cpu, mem = instance.cluster.share_per_gpu[:, instance.baseline_index]
        value = fixed.floors
    reports: dict[str, RoundingReport] = {}
    allocations: dict[str, Allocation] = {}
    for kind, sub in fixed.per_type().items():
        if not sub.jobs:
            continue
        members = np.array([fixed.job_index[job.id] for job in sub.jobs], dtype=np.int64)
        ideal_value = float(value[members].sum())  # the loss is reported against it, fallback or not
        configs = opt_placement(sub, cpu[members], mem[members], ideal_value,
                                from_ideal=ideal.has_solution, kind=placement, solver=solver, params=placement_params,
                                options=placement_options)
        if configs.fell_back:  # as one type's OPT: that type's proportional demands
            notes.append(f"{kind}: {placement} placement of the ideal ILP's configs ended "
                         f"{configs.first_status.value}: GPU-proportional demands placed there")
        placed = configs.placed
        if placed.source == "poured":
            notes.append(f"{kind}: {placement} placement of GPU-proportional demands ended {placed.status.value}: "
                         "they are poured onto the servers in job order")
        if placed.shares is None:
            notes.append(f"{kind}: {placement} placement ended {placed.status.value}: nothing placed there")
            continue
        rounded = round_placement(sub, placed.shares, configs.cpu_per_gpu, configs.mem_gb_per_gpu, ideal_value)
        reports[kind], allocations[kind] = rounded.report, rounded.allocation
    allocation = join_allocations(instance.cluster, allocations)
    done = time.perf_counter()
    return HeteroOptResult(allocation, ideal, reports, evaluate(instance, allocation),
                           {"ideal_seconds": after_ideal - start, "placement_and_rounding_seconds": done - after_ideal,
                            "total_seconds": done - start}, tuple(notes))


def _ideal(instance: HeteroRound, solver: str, params: SolverParams) -> HeteroIdealResult:
    return solve_ideal(instance, solver, time_limit=params.time_limit, mip_gap=params.mip_gap,
                       threads=params.threads, seed=params.seed, verbose=params.verbose, options=dict(params.options))
