"""The joint model solved by decomposition: server patterns priced exactly, a bound, incumbents, a proof.

1. *Bound*: the ideal ILP's optimum bounds the joint one; the master LP over server patterns
   (:mod:`synergy_opt.joint.master`), priced exactly (:mod:`synergy_opt.joint.pricing`), gives ``L``, valid at
   every pricing round. The bound reported is the smaller (and ``upper_bound``, if given).
2. *Incumbents*: the ideal ILP's configs placed greedily and improved by local search
   (:mod:`synergy_opt.joint.incumbent`); then a dive that rounds the master LP to whole servers; then the
   restricted master MILP over every pattern generated, started from the best incumbent (price-and-branch).
3. *Proof* when the gap is still open: a solution better than the incumbent loses less than
   ``gap = L - incumbent`` against ``L``, and every column and every server load costs it its reduced cost
   (all >= 0 at the prices of ``L``). So it uses only columns and maximal loads of reduced cost below ``gap``;
   when those are few (:func:`~synergy_opt.joint.pricing.near_patterns`), the MILP over them alone is exact,
   and its bound is a valid bound for the whole model even when it stops at a limit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from synergy_opt.builders.ideal import Objective
from synergy_opt.instance import RoundInstance
from synergy_opt.joint.incumbent import Placement, place
from synergy_opt.joint.master import ColumnGeneration, Prices
from synergy_opt.joint.model import ItemColumns, JointModel, JointReductions, build_joint, item_columns
from synergy_opt.joint.pricing import ItemTypes, near_patterns
from synergy_opt.solvers import solve_model
from synergy_opt.solvers.base import SolveResult, SolverParams, Status

if TYPE_CHECKING:
    import highspy

SOLVER_NAME = "highs-decomposition"
# Share of the time limit (and seconds at most) the greedy incumbent's local search may take.
INCUMBENT_SHARE, INCUMBENT_SECONDS = 0.05, 0.25
# Seconds a heuristic MILP (restricted master, threshold round) may take when no time limit is given.
MASTER_MILP_SECONDS = 10.0
# Shares of the time left that column generation and the dive may take (their bounds hold whenever they stop;
# the MILPs after them find the incumbents), and the MILP over the dive's patterns.
COLUMN_GENERATION_SHARE, DIVE_TIME_SHARE, DIVE_SHARE = 0.4, 0.25, 0.2
# Most maximal patterns a proof (or a heuristic round) enumerates; a proof needs every pattern within the gap,
# so beyond it the gap stays open (reported, never hidden).
PROOF_PATTERNS = 10_000
# Most patterns of a heuristic round's pool (patterns within a fraction of the gap).
HEURISTIC_PATTERNS = 2_000
# Rounds over the patterns of least reduced cost without a time limit (with one: until it), the share of the
# time left each heuristic one may take, and how many times the threshold is quartered looking for a small pool.
THRESHOLD_ROUNDS, THRESHOLD_SHARE, THRESHOLD_STEPS = 3, 0.4, 12
# HiGHS's mip_heuristic_effort in heuristic rounds (default 0.05): they are there to find better incumbents.
HEURISTIC_EFFORT = 0.3
# A heuristic pool doubles at most this many times (4,000 patterns: its enumeration stays quick).
MAX_DOUBLINGS = 1


@dataclass
class DecompositionReport:
    """What the decomposition did, phase by phase (seconds from the start of the solve)."""

    lp_bound: float | None = None  # the best L
    ideal_bound: float | None = None
    rounds: int = 0
    patterns: int = 0
    first_incumbent_seconds: float | None = None
    incumbent_source: str = ""
    proof: str = ""
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class _Best:
    """The best realizable round so far, as a (restricted) patterns model and its solution vector."""

    value: float
    joint: JointModel
    x: np.ndarray
    source: str


def solve_decomposition(
    instance: RoundInstance,
    params: SolverParams,
    *,
    consolidate: bool,
    split_penalty: float,
    objective: Objective,
    reductions: JointReductions,
    upper_bound: float | None = None,
    dive: bool = True,
    restricted: bool = True,
    prove: bool = True,
    stop_early: bool = True,
) -> tuple[JointModel | None, SolveResult, DecompositionReport]:
    """Solve the joint model as the module docstring says; the result reads like any backend's.

    ``dive``, ``restricted`` and ``prove`` switch those steps off, and ``stop_early=False`` runs the proof even
    when the gap has closed before it (tests of each path). The model returned decodes ``x`` (a patterns
    model restricted to the incumbent's loads, or the direct model when that settled the round).
    """
    from synergy_opt.ideal import solve_ideal  # the ideal solve imports the solvers: on use

    start = time.perf_counter()
    deadline = None if params.time_limit is None else start + params.time_limit
    report = DecompositionReport()
    items = item_columns(instance, consolidate, split_penalty, objective, reductions)
    cluster = instance.cluster
    types = ItemTypes(items.item_size, items.item_cpu, items.item_mem, cluster)
    best: _Best | None = None
    bound = math.inf if upper_bound is None else float(upper_bound)

    def mark(phase: str) -> None:
        report.phases[phase] = time.perf_counter() - start

    def finish(status: Status, message: str) -> tuple[JointModel | None, SolveResult, DecompositionReport]:
        report.incumbent_source = "" if best is None else best.source
        objective_value = None if best is None else best.value
        upper = None if not math.isfinite(bound) else bound
        if best is not None and upper is not None:
            upper = max(upper, best.value)
        result = SolveResult(status=status, solver=SOLVER_NAME, objective=objective_value, bound=upper,
                             x=None if best is None else best.x, build_seconds=report.phases.get("ideal", 0.0),
                             solve_seconds=time.perf_counter() - start - report.phases.get("ideal", 0.0),
                             message=message, native_status=message)
        return (None if best is None else best.joint), result, report

    def offer(candidate: _Best | None) -> None:
        nonlocal best
        if candidate is not None and (best is None or candidate.value > best.value + 1e-9):
            best = candidate
            if report.first_incumbent_seconds is None:
                report.first_incumbent_seconds = time.perf_counter() - start

    def closed(final: bool = False) -> bool:
        if not (stop_early or final) or best is None:
            return False
        return bound - best.value <= params.mip_gap * max(abs(best.value), 1e-10) + 1e-9

    if np.setdiff1d(np.arange(items.columns.count.size), items.columns.cls).size:
        return finish(Status.INFEASIBLE, "infeasible: a job has no config that fits a server")

    ideal = solve_ideal(instance, objective=objective, time_limit=params.time_limit)
    mark("ideal")
    if ideal.bound is not None:
        report.ideal_bound = ideal.bound
        bound = min(bound, ideal.bound)
    if ideal.status is Status.INFEASIBLE:
        return finish(Status.INFEASIBLE, "infeasible: the ideal ILP (a relaxation) is")
    if ideal.has_solution:
        budget = INCUMBENT_SECONDS if params.time_limit is None else min(INCUMBENT_SECONDS,
                                                                         INCUMBENT_SHARE * params.time_limit)
        aims = _aim_values(instance, ideal.throughput, objective)
        placement = place(items, cluster, ideal.cpu_per_gpu, ideal.mem_gb_per_gpu, aims,
                          deadline=time.perf_counter() + budget)
        if placement is not None:
            offer(_from_placement(instance, items, placement, "greedy", consolidate, split_penalty, objective,
                                  reductions))
    mark("incumbent")
    if closed():
        return finish(Status.OPTIMAL, "optimal: the incumbent meets the ideal ILP's bound")

    initial = [np.diag(items.per_server)]
    if best is not None:
        assert best.joint.patterns is not None
        initial.append(best.joint.patterns)
    master = ColumnGeneration(items, types, cluster.servers, np.vstack(initial))
    if best is None:
        feasible = master.phase_one(deadline)
        if feasible is False:
            return finish(Status.INFEASIBLE, "infeasible: no server patterns hold every job (priced proof)")
    prices = master.run(_share(deadline, COLUMN_GENERATION_SHARE))
    report.rounds, report.patterns, report.lp_bound = master.rounds, len(master.patterns), prices.bound
    bound = min(bound, prices.bound)
    mark("column generation")
    if _expired(deadline):
        return finish(_limit(best), "time limit during column generation")
    if closed():
        return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")

    if dive:
        fixed = master.dive(_share(deadline, DIVE_TIME_SHARE))
        prices = master.best or prices
        report.rounds, report.patterns, report.lp_bound = master.rounds, len(master.patterns), prices.bound
        bound = min(bound, prices.bound)
        mark("dive")
        if fixed is not None:
            offer(_solve_restricted(instance, master.patterns[fixed > 0], params, deadline, None, "dive",
                                    consolidate, split_penalty, objective, reductions, share=DIVE_SHARE))
        if closed():
            return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")

    if best is None and restricted:
        offer(_solve_restricted(instance, master.patterns, params, deadline, None, "restricted master",
                                consolidate, split_penalty, objective, reductions))
        mark("restricted master")
    if best is None:
        if _expired(deadline):
            return finish(Status.NO_SOLUTION, "time limit before any incumbent")
        # No heuristic placed every job: the direct model settles whether any round exists.
        direct = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                             reductions=reductions)
        seconds = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
        settled = solve_model(direct.model, "highs", replace(params, time_limit=seconds))
        mark("direct")
        if settled.status is Status.INFEASIBLE:
            return finish(Status.INFEASIBLE, "infeasible: settled by the direct model")
        if not settled.has_solution:
            return finish(Status.NO_SOLUTION, "no incumbent")
        assert settled.objective is not None and settled.x is not None
        offer(_Best(settled.objective, direct, settled.x, "direct"))
        if settled.bound is not None:
            bound = min(bound, max(settled.bound, settled.objective))
        if closed(final=True) or settled.status is Status.OPTIMAL:
            return finish(Status.OPTIMAL, "optimal: settled by the direct model")
        return finish(Status.FEASIBLE, "time limit in the direct model")
    if closed():
        return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")

    # Rounds over the patterns of least reduced cost: exact once they are all those within the gap.
    # With a time limit the rounds go on until it, each round that finds nothing better doubling its pool;
    # without one, THRESHOLD_ROUNDS rounds.
    rounds = 0
    stalls = 0
    while (restricted or prove) and not _expired(deadline):
        if deadline is None and rounds == THRESHOLD_ROUNDS:
            break
        rounds += 1
        gap = prices.bound - best.value
        limit = HEURISTIC_PATTERNS * 2 ** min(stalls, MAX_DOUBLINGS)
        pool = _low_patterns(items, types, prices, gap, exact_only=not restricted, limit=limit)
        if pool is None:
            report.proof = f"more than {max(PROOF_PATTERNS, limit)} maximal loads within the gap"
            break
        patterns, low, complete = pool
        if complete and not prove:
            complete = False
        last = deadline is None and rounds == THRESHOLD_ROUNDS
        share = 1.0 if complete or last else THRESHOLD_SHARE
        outcome = _solve_over(instance, np.vstack([patterns, master.patterns]) if not complete else patterns,
                              low, params, deadline, best, consolidate, split_penalty, objective, reductions, share,
                              exact=complete)
        mark(f"threshold round {rounds}")
        before = best.value
        if outcome is not None:
            candidate, milp_bound, proven = outcome
            offer(candidate)
            if complete:
                report.proof = f"{len(patterns)} maximal loads within the gap"
                bound = min(bound, max(milp_bound, best.value))
                if proven or closed(final=True):
                    return finish(Status.OPTIMAL, f"optimal: proof over the {report.proof}")
                return finish(_limit(best), "time limit during the proof")
            if closed():
                return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")
        stalls = stalls if best.value > before + 1e-9 else stalls + 1
    if _expired(deadline):
        reason = "time limit"
    elif not prove:
        reason = "no proof asked"
    else:
        reason = report.proof or f"{rounds} rounds without a complete pool"
    return finish(_limit(best), f"gap open: {reason}")


def _share(deadline: float | None, share: float) -> float | None:
    """A deadline ``share`` of the way from now to ``deadline`` (a phase leaves time to those after it)."""
    if deadline is None:
        return None
    now = time.perf_counter()
    return now + share * max(deadline - now, 0.0)


def _limit(best: _Best | None) -> Status:
    return Status.NO_SOLUTION if best is None else Status.FEASIBLE


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _aim_values(instance: RoundInstance, throughput: np.ndarray, objective: Objective) -> np.ndarray:
    """The weight each job would have at its ideal config (what the local search measures losses against)."""
    return np.asarray(throughput * (instance.gpus if objective == "gpu" else 1), dtype=float)


def _from_placement(instance: RoundInstance, items: ItemColumns, placement: Placement, source: str,
                    consolidate: bool, split_penalty: float, objective: Objective, reductions: JointReductions
                    ) -> _Best:
    """A placement as a patterns model over its servers' loads, with the solution vector that is it."""
    loads = placement.loads(items, instance.cluster.servers)
    patterns, count = np.unique(loads, axis=0, return_counts=True)
    joint = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                        reductions=reductions, patterns=patterns)
    y = np.bincount(placement.column, minlength=items.weight.size).astype(float)
    x = np.concatenate([y, count.astype(float)])
    return _Best(float(items.weight @ y), joint, x, source)


def _solve_restricted(instance: RoundInstance, patterns: np.ndarray, params: SolverParams, deadline: float | None,
                      start: _Best | None, source: str, consolidate: bool, split_penalty: float, objective: Objective,
                      reductions: JointReductions, share: float = 1.0) -> _Best | None:
    """The patterns model over ``patterns`` only, by HiGHS, from ``start`` (whose loads are added)."""
    patterns = _with_loads_of(start, patterns)
    joint = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                        reductions=reductions, patterns=patterns)
    seconds = MASTER_MILP_SECONDS if deadline is None else max(deadline - time.perf_counter(), 0.0)
    result = _run_highs(joint.model, params, share * seconds, _start_vector(joint, start))
    if result is None:
        return None
    x, value, _, _ = result
    return None if x is None else _Best(value, joint, x, source)


def _with_loads_of(best: _Best | None, patterns: np.ndarray) -> np.ndarray:
    """``patterns`` and the loads of ``best``'s servers (when it is a patterns model), each once."""
    if best is None or best.joint.patterns is None:
        return np.unique(patterns, axis=0)
    return np.unique(np.vstack([patterns, best.joint.patterns]), axis=0)


def _start_vector(joint: JointModel, start: _Best | None) -> np.ndarray | None:
    """``start``'s solution in ``joint``'s columns (its loads are among ``joint``'s patterns)."""
    if start is None or start.joint.patterns is None or joint.patterns is None:
        return None
    y = start.joint.model.block(start.x, "y")
    counts = start.joint.model.block(start.x, "x")
    index = {p.tobytes(): k for k, p in enumerate(joint.patterns)}
    x = np.zeros(len(joint.patterns))
    for p, c in zip(start.joint.patterns, counts, strict=True):
        x[index[p.tobytes()]] += c
    return np.concatenate([y, x])


def _run_highs(model: object, params: SolverParams, seconds: float, start: np.ndarray | None,
               heuristic_effort: float | None = None) -> tuple[np.ndarray | None, float, float | None, bool] | None:
    """Solve a MILP on HiGHS from a starting solution: (x, objective, bound, proven optimal); a heuristic
    round spends more of it on HiGHS's primal heuristics (``mip_heuristic_effort``)."""
    import highspy

    from synergy_opt.solvers.highs import run, to_highs

    if seconds <= 0:
        return None
    h = to_highs(model)  # type: ignore[arg-type]
    h.setOptionValue("time_limit", float(seconds))
    h.setOptionValue("mip_rel_gap", float(params.mip_gap))
    h.setOptionValue("random_seed", int(params.seed))
    if heuristic_effort is not None:
        h.setOptionValue("mip_heuristic_effort", float(heuristic_effort))
    if start is not None:
        h.setSolution(_solution(start))
    run(h, params.threads)
    info = h.getInfo()
    if info.primal_solution_status != highspy.SolutionStatus.kSolutionStatusFeasible:
        return None
    x = np.array(h.getSolution().col_value)
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
    return x, float(info.objective_function_value), bound, h.getModelStatus() == highspy.HighsModelStatus.kOptimal


def _solution(x: np.ndarray) -> highspy.HighsSolution:
    import highspy

    solution = highspy.HighsSolution()
    solution.col_value = list(map(float, x))
    solution.value_valid = True
    return solution


def _low_patterns(items: ItemColumns, types: ItemTypes, prices: Prices, gap: float, exact_only: bool, limit: int
                  ) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The maximal loads of reduced cost within ``gap`` (and the columns within it): all of them when there are
    at most ``max(PROOF_PATTERNS, limit)`` (``complete``, a proof's pool), else those within the largest
    ``gap / 4^k`` that has at most ``limit``, or none (a heuristic pool: the caller adds the generated patterns;
    None with ``exact_only``).
    """
    slack = 1e-9 * max(1.0, abs(prices.bound))
    demand = items.units * items.columns.count[items.columns.cls]
    # Columns of reduced cost above the gap are in no better solution: they stay out of every round.
    low = prices.column_rc <= gap + slack
    threshold = gap
    for _ in range(THRESHOLD_STEPS):
        within = prices.column_rc <= threshold + slack
        supply = np.bincount(items.col_item[within], weights=demand[within], minlength=items.item_size.size)
        caps = np.minimum(items.per_server, supply.astype(np.int64))
        most = max(PROOF_PATTERNS, limit) if threshold >= gap else limit
        patterns = near_patterns(types, prices.pi, prices.best_pattern_value - threshold - slack, caps, limit=most)
        if patterns is not None:
            return patterns, low, threshold >= gap
        if exact_only:
            return None
        threshold /= 4
    # Too many even near zero (items priced at zero fill loads in many ways): the generated patterns alone.
    return np.zeros((0, items.item_size.size), dtype=np.int64), low, False


def _solve_over(instance: RoundInstance, patterns: np.ndarray, low: np.ndarray | None, params: SolverParams,
                deadline: float | None, best: _Best, consolidate: bool, split_penalty: float, objective: Objective,
                reductions: JointReductions, share: float, exact: bool) -> tuple[_Best | None, float, bool] | None:
    """The patterns model over ``patterns`` (and ``best``'s loads), columns outside ``low`` fixed to 0, from
    ``best``: its best solution, its bound, and whether it is proven optimal. Exact runs close the gap fully."""
    joint = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                        reductions=reductions, patterns=_with_loads_of(best, patterns))
    if low is not None:
        model = joint.model
        upper = model.col_upper.copy()
        block = model.var_blocks["y"]
        upper[block] = np.where(low, upper[block], 0.0)
        joint = replace(joint, model=replace(model, col_upper=upper))
    left = MASTER_MILP_SECONDS / share if deadline is None else deadline - time.perf_counter()
    if exact and deadline is None:
        left = math.inf
    gap = min(params.mip_gap, 1e-9) if exact else params.mip_gap
    result = _run_highs(joint.model, replace(params, mip_gap=gap), share * left, _start_vector(joint, best),
                        heuristic_effort=None if exact else HEURISTIC_EFFORT)
    if result is None:
        return None
    x, value, bound, proven = result
    candidate = None if x is None else _Best(value, joint, x, "proof" if exact else "threshold")
    return candidate, (value if proven else (math.inf if bound is None else bound)), proven
