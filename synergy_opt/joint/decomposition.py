"""The joint model solved by decomposition: server patterns priced exactly, a bound, incumbents, a proof.

1. *Bound*: the ideal ILP's optimum bounds the joint one; the master LP over server patterns
   (:mod:`synergy_opt.joint.master`), priced exactly (:mod:`synergy_opt.joint.pricing`), gives ``L``, valid at
   every pricing round. The bound reported is the smaller (and ``upper_bound``, if given).
2. *Incumbents*: the ideal ILP's configs placed greedily and improved by local search
   (:mod:`synergy_opt.joint.incumbent`); a short branch-and-price restricted to the ideal ILP's configs (they
   are optimal whenever some placement holds them); a dive that rounds the master LP to whole servers and the
   MILP over its patterns; the restricted master MILP over every pattern generated when the incumbent is close.
   Every new incumbent is polished by the local search.
3. *Proof*: branch-and-price (:mod:`synergy_opt.joint.branching`) from the root, best bound first, until the
   bound meets the incumbent. Trees are first searched with a *target* just below the bound in place of the
   incumbent: a complete one proves that nothing beats the target (the target becomes the bound) and the next
   aims lower; once a solution above the target appears, the tree goes on with it. At each node with whole
   configs, those configs are placed (their own priced LP, then a small MILP) as a heuristic.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.ideal.model import Objective
from synergy_opt.ideal.solve import solve_ideal
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.joint.branching import RULES, BranchOutcome, branch_and_price, cutoff_of, target_trees
from synergy_opt.joint.cp_pack import cp_pack
from synergy_opt.joint.grid import Grid
from synergy_opt.joint.incumbent import Placement, improve, place, placement_of
from synergy_opt.joint.master import ColumnGeneration, ServerKind
from synergy_opt.joint.model import ItemColumns, JointModel, JointReductions, build_joint, item_columns
from synergy_opt.joint.placing import place_demand, residual_dive
from synergy_opt.joint.pricing import ItemTypes, PricingDeadline
from synergy_opt.solvers.base import SolveResult, SolverParams, Status
from synergy_opt.solvers.registry import band_scale

if TYPE_CHECKING:
    import highspy

SOLVER_NAME = "highs-decomposition"
# Share of the time limit (and seconds at most) the greedy incumbent's local search may take.
INCUMBENT_SHARE, INCUMBENT_SECONDS = 0.05, 0.05
# Shares of the time left that column generation and the dive may take (their bounds hold whenever they stop),
# and the MILP over the dive's patterns (share, and seconds at most per server: it pays off on many servers).
COLUMN_GENERATION_SHARE, DIVE_TIME_SHARE, DIVE_SHARE, DIVE_SECONDS_PER_SERVER = 0.4, 0.25, 0.2, 0.02
# From this many servers on, the dive comes before the search for a placement of the ideal ILP's configs.
DIVE_FIRST_SERVERS = 64
# Nodes (and share of the time left) of the search for a placement of the ideal ILP's configs.
IDEAL_NODES, IDEAL_SHARE = 200, 0.3
# Share of the time left the restricted master MILP may take, and seconds at most; it runs when nothing placed
# every job or when the incumbent is within POLISH_GAP of the bound (then it mostly closes the gap).
RESTRICTED_SHARE, RESTRICTED_SECONDS, POLISH_GAP = 0.15, 5.0, 1e-3
# Seconds a placement of a node's whole configs may take, loads priced per round of its LP, and the most loads
# listed to decide it exactly when the loads priced do not hold it.
PACK_SECONDS, PACK_LISTED = 0.1, 500
# Seconds the local search may polish each new incumbent.
POLISH_SECONDS = 0.05
# The gap the ideal ILP (the bound) is solved within at most (solve_ideal's default).
IDEAL_GAP = 1e-6
# The ideal ILP's configs are placed before any column generation (residual dive: a share of the time left); up
# to CP_SERVERS servers, placements are also sought by CP-SAT (cp_pack) when the dive fails without a proof:
# the ideal ILP's configs (CP-SAT's deterministic time at most: about a second's work, 0.01-0.9 used on the ten
# tuning rounds of 16-GPU servers), and a node's configs when the priced loads do not hold them.
IDEAL_PLACE_SHARE, CP_SERVERS, CP_IDEAL_WORK = 0.2, 12, 1.0


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
    nodes: int = 0  # nodes of the branch-and-price (its heuristic searches included)
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class _Best:
    """The best realizable round so far, as a (restricted) patterns model and its solution vector."""

    value: float
    joint: JointModel
    x: np.ndarray
    source: str


def solve_decomposition(instance: RoundInstance, params: SolverParams, *, upper_bound: float | None = None,
                        **options: Any) -> tuple[JointModel | None, SolveResult, DecompositionReport]:
    """:func:`_decompose` (its docstring) on ``instance``, or, when its throughputs lie outside the solvers' band
    (:func:`~synergy_opt.solvers.registry.band_scale`), on the round times a power of two, read back: the
    search's slack and HiGHS's tolerances are absolute, and at throughputs near 1e-15 a round 3.5% below its
    optimum was called optimal (the heterogeneous decomposition scales so too)."""
    factor = band_scale(instance.largest_throughput(), instance.median_throughput)
    if factor == 1.0:
        return _decompose(instance, params, upper_bound=upper_bound, **options)
    found, result, report = _decompose(instance.scaled(factor), params, unit=factor,
                                       upper_bound=None if upper_bound is None else upper_bound * factor, **options)
    report.lp_bound, report.ideal_bound = (None if value is None else value / factor
                                           for value in (report.lp_bound, report.ideal_bound))
    result = replace(result, objective=None if result.objective is None else result.objective / factor,
                     bound=None if result.bound is None else result.bound / factor,
                     message=f"{result.message} (solved with every throughput times {factor:g})")
    return (None if found is None else _unscaled(found, instance, factor)), result, report


def _unscaled(found: JointModel, instance: RoundInstance, factor: float) -> JointModel:
    """The model of the scaled round read back in ``instance``'s units (its objective and columns' values)."""
    model = replace(found.model, objective=found.model.objective / factor,
                    objective_offset=found.model.objective_offset / factor)
    return replace(found, instance=instance, model=model, col_tput=found.col_tput / factor,
                   col_weight=found.col_weight / factor)


def _decompose(
    instance: RoundInstance,
    params: SolverParams,
    *,
    consolidate: bool,
    split_penalty: float,
    objective: Objective,
    reductions: JointReductions,
    upper_bound: float | None = None,
    initial_allocation: Allocation | None = None,
    only_incumbent: bool = False,
    heuristics: bool = True,
    prove: bool = True,
    stop_early: bool = True,
    rules: tuple[str, ...] = RULES,
    unit: float = 1.0,
) -> tuple[JointModel | None, SolveResult, DecompositionReport]:
    """Solve the joint model as the module docstring says; the result reads like any backend's.

    ``heuristics=False`` leaves every incumbent to the branch-and-price's own nodes, ``prove=False`` skips the
    branch-and-price, and ``stop_early=False`` keeps the search going without the ideal ILP's bound and past
    early stops (tests of each path: with both off, a forced branching), and ``rules`` orders the tree's splits
    (:data:`~synergy_opt.joint.branching.RULES`; a test of each kind). ``initial_allocation``, a realizable
    allocation of the round (e.g. near-opt's), is an incumbent from the start (with ``heuristics``);
    ``only_incumbent`` stops after the first incumbent (OPTIMAL when it meets the ideal ILP's bound); ``unit``:
    the factor the caller scaled the round by (an error names the caller's values). The model
    returned decodes ``x`` (a patterns model restricted to the incumbent's loads).
    """

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
        if upper_bound is not None and best is not None and \
                best.value > upper_bound + 1e-9 * max(1.0, abs(upper_bound)):
            raise InvalidInputError("upper_bound", upper_bound / unit,  # the caller's, of the unscaled round
                                    f"is not an upper bound: a placement worth {best.value / unit:.9g} exists")
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
            if heuristics and candidate.source not in ("greedy", "start") and "local search" not in candidate.source:
                # A new incumbent, polished: its servers' configs re-chosen together, jobs moved and swapped.
                offer(_polish(instance, items, candidate, aim_values, time.perf_counter() + POLISH_SECONDS,
                              consolidate, split_penalty, objective, reductions))

    def closed(final: bool = False) -> bool:
        if not (stop_early or final) or best is None:
            return False
        return bound <= cutoff_of(best.value, params.mip_gap)

    if np.setdiff1d(np.arange(items.columns.count.size), items.columns.cls).size:
        return finish(Status.INFEASIBLE, "infeasible: a job has no config that fits a server")

    # Within the joint's gap when that is tighter than the ideal ILP's default (at 1e-9 the default's bound kept a
    # tiny round's optimum, found at once, from being proven until the time limit).
    ideal = solve_ideal(instance, objective=objective, time_limit=params.time_limit,
                        mip_gap=min(params.mip_gap, IDEAL_GAP))
    # What each job would be worth at the ideal ILP's config: the local search ranks servers by what they lose.
    aim_values = _aim_values(instance, ideal.throughput, objective) if ideal.has_solution else \
        np.zeros(len(instance.jobs))
    mark("ideal")
    if ideal.bound is not None:
        report.ideal_bound = ideal.bound
        bound = min(bound, ideal.bound)
    if ideal.status is Status.INFEASIBLE:
        return finish(Status.INFEASIBLE, "infeasible: the ideal ILP (a relaxation) is")
    # The allocation given; then the ideal ILP's configs placed exactly (often possible: optimal at once, no column
    # generation); else, when nothing placed every job, the ideal ILP's configs placed greedily.
    given = None if not heuristics or initial_allocation is None else placement_of(items, instance,
                                                                                    initial_allocation)
    if given is not None:
        offer(_from_placement(instance, items, given, "start", consolidate, split_penalty, objective, reductions))
        mark("start")
    few = types.grid if cluster.servers <= CP_SERVERS else None
    unplaceable = False  # the ideal ILP's configs proven to have no placement
    if heuristics and ideal.has_solution and not closed() and not only_incumbent:
        placed, unplaceable = _place_ideal(instance, items, types, few, ideal.cpu_per_gpu, ideal.mem_gb_per_gpu,
                                           _share(deadline, IDEAL_PLACE_SHARE), consolidate, split_penalty,
                                           objective, reductions)
        offer(placed)
        mark("ideal placed")
    if best is None and heuristics and ideal.has_solution:
        budget = INCUMBENT_SECONDS if params.time_limit is None else min(INCUMBENT_SECONDS,
                                                                         INCUMBENT_SHARE * params.time_limit)
        placement = place(items, cluster, ideal.cpu_per_gpu, ideal.mem_gb_per_gpu, aim_values,
                          deadline=time.perf_counter() + budget)
        if placement is not None:
            offer(_from_placement(instance, items, placement, "greedy", consolidate, split_penalty, objective,
                                  reductions))
        mark("greedy")
    if closed():
        return finish(Status.OPTIMAL, "optimal: the incumbent meets the ideal ILP's bound" if upper_bound is None
                      else "optimal: the incumbent meets the ideal ILP's bound or upper_bound")
    if only_incumbent:
        return finish(_limit(best), "stopped after the first incumbent (asked)")

    initial = [np.diag(items.per_server)]
    if best is not None:
        assert best.joint.patterns is not None
        initial.append(best.joint.patterns)
    master = ColumnGeneration(items, (ServerKind(types, 0, cluster.servers),), np.vstack(initial))
    if best is None:
        feasible = master.phase_one(deadline)
        if feasible is False:
            return finish(Status.INFEASIBLE, "infeasible: no server patterns hold every job (priced proof)")
        if feasible is None:
            return finish(Status.NO_SOLUTION, "time limit while pricing patterns that hold every job")
    try:
        prices = master.run(_share(deadline, COLUMN_GENERATION_SHARE), first_deadline=deadline)
    except PricingDeadline:
        return finish(_limit(best), "time limit during the first pricing")
    report.rounds, report.patterns, report.lp_bound = master.rounds, len(master.patterns), prices.bound
    bound = min(bound, prices.bound)
    mark("column generation")
    if _expired(deadline):
        return finish(_limit(best), "time limit during column generation")
    if closed():
        return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")

    def take(y: np.ndarray, x: np.ndarray, patterns: np.ndarray, source: str) -> float:
        # An integral solution of the master (x over the patterns given): the incumbent if better.
        offer(_from_master(instance, items, y, x, patterns, source, consolidate, split_penalty, objective,
                           reductions))
        return -math.inf if best is None else best.value

    def search(source: str, limit: int | None, until: float | None, **node: dict[int, float]) -> BranchOutcome:
        nonlocal bound
        outcome = branch_and_price(master, -math.inf if best is None else best.value, params.mip_gap, until,
                                   lambda y, x, tree: take(y, x, tree.patterns, source),
                                   root_bound=bound if stop_early else math.inf,
                                   node_limit=limit, **node)
        report.rounds, report.patterns = master.rounds, len(master.patterns)
        report.nodes += outcome.nodes
        return outcome

    def dive() -> bool:
        # The master LP rounded to whole servers (on many servers the rounding is nearly exact) and the
        # restricted master MILP over its patterns; True when that closed the gap.
        nonlocal prices, bound
        fixed = master.dive(_share(deadline, DIVE_TIME_SHARE))
        prices = master.best or prices
        report.rounds, report.patterns, report.lp_bound = master.rounds, len(master.patterns), prices.bound
        bound = min(bound, prices.bound)
        mark("dive")
        if fixed is not None:
            offer(_solve_restricted(instance, master.patterns[fixed > 0], params, deadline, None, "dive",
                                    consolidate, split_penalty, objective, reductions, share=DIVE_SHARE,
                                    seconds=DIVE_SECONDS_PER_SERVER * cluster.servers))
        return closed()

    def pack_ideal() -> bool:
        # The ideal ILP's configs are optimal whenever some placement holds them: search the placements (unless
        # the LP of the fewest servers proved that there is none).
        configs = _ideal_columns(items, ideal.cpu_per_gpu, ideal.mem_gb_per_gpu) if ideal.has_solution else None
        if configs is None or unplaceable:
            return False
        search("ideal packed", IDEAL_NODES, _share(deadline, IDEAL_SHARE), y_lower=configs[0], y_upper=configs[1])
        mark("ideal packed")
        return closed()

    if heuristics:
        # On few servers the search for the ideal configs' placement is quick and often optimal; on many, the
        # dive's rounding is.
        for step in (pack_ideal, dive) if cluster.servers < DIVE_FIRST_SERVERS else (dive, pack_ideal):
            if step():
                return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")
        if best is None or bound - best.value <= POLISH_GAP * abs(bound) or cluster.servers >= DIVE_FIRST_SERVERS:
            # Nothing placed every job, the incumbent is close, or many servers (where the priced patterns nearly
            # hold the optimum: a 3 x 1024 round's k80 servers, 1.7% below the bound after the dive, proven by it
            # in 4 s): the MILP over every pattern priced so far.
            offer(_solve_restricted(instance, master.patterns, params, deadline, best, "restricted master",
                                    consolidate, split_penalty, objective, reductions, share=RESTRICTED_SHARE,
                                    seconds=RESTRICTED_SECONDS))
            mark("restricted master")
        if closed():
            return finish(Status.OPTIMAL, "optimal: the incumbent meets the bound")

    if not prove:
        if best is None:
            return finish(Status.NO_SOLUTION, "no incumbent (no proof asked)")
        return finish(Status.FEASIBLE, "gap open: no proof asked")

    tried: set[bytes] = set()

    def place_configs(y: np.ndarray, tree: ColumnGeneration) -> float:
        # A node's configs (rounded), placed if some placement holds them (each set of configs once).
        # Configs worth more than the bound cannot be placed, and those no better than the incumbent need not be.
        value = float(items.weight @ y)
        if y.tobytes() in tried or value > bound + 1e-9 * max(1.0, abs(bound)) or (
                best is not None and value <= best.value + 1e-9):
            return -math.inf
        tried.add(y.tobytes())
        packed = _pack(items, types, y, tree.known_patterns()[0], cluster.servers, PACK_SECONDS, grid=few)
        return -math.inf if packed is None else take(y, *packed, "branch-and-price (placed)")

    proof = target_trees(master, lambda: -math.inf if best is None else best.value, bound, params.mip_gap, deadline,
                         lambda y, x, tree: take(y, x, tree.patterns, "branch-and-price"),
                         place_configs if heuristics else None, rules, stop_early)
    report.nodes, report.rounds = report.nodes + proof.nodes, master.rounds
    report.patterns = len(master.patterns) + master.tree_patterns
    bound = min(bound, proof.bound)
    mark("branch-and-price")
    if proof.complete and best is None:
        return finish(Status.INFEASIBLE, "infeasible: the branch-and-price found no solution in any node")
    report.proof = f"branch-and-price, {report.nodes} nodes ({_splits(proof.splits)})"
    if closed(final=True):
        return finish(Status.OPTIMAL, f"optimal: {report.proof}")
    if best is None:
        return finish(Status.NO_SOLUTION, "time limit before any incumbent")
    return finish(Status.FEASIBLE, "gap open: time limit in the branch-and-price")


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
                      reductions: JointReductions, share: float = 1.0, seconds: float = RESTRICTED_SECONDS
                      ) -> _Best | None:
    """The patterns model over ``patterns`` only, by HiGHS, from ``start`` (whose loads are added), for a
    ``share`` of the time left and ``seconds`` at most."""
    patterns = _with_loads_of(start, patterns)
    joint = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                        reductions=reductions, patterns=patterns)
    if deadline is not None:
        seconds = min(share * max(deadline - time.perf_counter(), 0.0), seconds)
    result = _run_highs(joint.model, params, seconds, _start_vector(joint, start))
    if result is None:
        return None
    x, value = result
    return _Best(value, joint, x, source)


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


def _run_highs(model: object, params: SolverParams, seconds: float, start: np.ndarray | None
               ) -> tuple[np.ndarray, float] | None:
    """Solve a MILP on HiGHS from a starting solution for at most ``seconds``: its best solution and value, or
    None when it found none."""
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import run, to_highs  # highspy on first use (no solver library at import)

    if seconds <= 0:
        return None
    h = to_highs(model)  # type: ignore[arg-type]
    h.setOptionValue("time_limit", float(seconds))
    h.setOptionValue("mip_rel_gap", float(params.mip_gap))
    h.setOptionValue("random_seed", int(params.seed))
    if start is not None:
        h.setSolution(_solution(start))
    run(h, params.threads)
    info = h.getInfo()
    if info.primal_solution_status != highspy.SolutionStatus.kSolutionStatusFeasible:
        return None
    return np.array(h.getSolution().col_value), float(info.objective_function_value)


def _solution(x: np.ndarray) -> highspy.HighsSolution:
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    solution = highspy.HighsSolution()
    solution.col_value = list(map(float, x))
    solution.value_valid = True
    return solution


def _pack(items: ItemColumns, types: ItemTypes, y: np.ndarray, patterns: np.ndarray, servers: int, seconds: float,
          listed: int = PACK_LISTED, grid: Grid | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Server loads and whole numbers of servers for each that hold every item the columns ``y`` ask for on at
    most ``servers`` servers, or None (none exists, or none found within ``seconds``):
    :func:`~synergy_opt.joint.placing.place_demand` (its LP of the fewest servers ends most rounded configs in a
    few milliseconds: they have no placement)."""
    demand = np.bincount(items.col_item, weights=items.units * y, minlength=items.item_size.size)
    return place_demand(types, demand, items.per_server, servers, patterns, seconds, listed, grid)


def _polish(instance: RoundInstance, items: ItemColumns, candidate: _Best, aim_values: np.ndarray,
            deadline: float, consolidate: bool, split_penalty: float, objective: Objective,
            reductions: JointReductions) -> _Best:
    """``candidate`` improved by the greedy's local search (:func:`~synergy_opt.joint.incumbent.improve`)."""
    joint = candidate.joint
    columns = joint.job_columns(joint.model.block(candidate.x, "y"))
    allocation = joint.allocation(candidate.x)
    on = [{p.server: p.gpus for p in allocation.jobs[job.id]} for job in instance.jobs]
    improved = improve(items, instance.cluster, Placement(columns, on), aim_values, deadline)
    return _from_placement(instance, items, improved, f"{candidate.source} + local search", consolidate,
                           split_penalty, objective, reductions)


def _from_master(instance: RoundInstance, items: ItemColumns, y: np.ndarray, x: np.ndarray, patterns: np.ndarray,
                 source: str, consolidate: bool, split_penalty: float, objective: Objective,
                 reductions: JointReductions) -> _Best:
    """An integral solution of the master (``x`` over ``patterns``) as a patterns model over the loads it uses."""
    used = x > 0.5
    joint = build_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective=objective,
                        reductions=reductions, patterns=patterns[used])
    return _Best(float(items.weight @ y), joint, np.concatenate([y, x[used]]), source)


def _ideal_columns(items: ItemColumns, cpu: np.ndarray, mem: np.ndarray
                   ) -> tuple[dict[int, float], dict[int, float]] | None:
    """Bounds that keep each class to the ideal ILP's configs of its jobs (as many jobs on each as there; a
    config with two modes, whole and in pieces, lets the modes share them); None when a config has no column
    (it fits no server)."""
    cols = items.columns
    offsets = np.concatenate([[0], np.cumsum(cols.count)])
    lower: dict[int, float] = {}
    upper = {int(c): 0.0 for c in range(cols.cls.size)}
    for q in range(cols.count.size):
        jobs = cols.class_jobs[offsets[q]:offsets[q + 1]]
        mine = np.flatnonzero(cols.cls == q)
        configs, many = np.unique(np.stack([cpu[jobs], mem[jobs]], axis=1), axis=0, return_counts=True)
        for (c, m), n in zip(configs, many, strict=True):
            match = mine[np.isclose(cols.cpu[mine], c) & np.isclose(cols.mem[mine], m)]
            if not match.size:
                return None
            for col in match:
                upper[int(col)] = float(n)
            if match.size == 1:
                lower[int(match[0])] = float(n)
    return lower, upper


def _place_ideal(instance: RoundInstance, items: ItemColumns, types: ItemTypes, grid: Grid | None, cpu: np.ndarray,
                 mem: np.ndarray, stop: float | None, consolidate: bool, split_penalty: float, objective: Objective,
                 reductions: JointReductions) -> tuple[_Best | None, bool]:
    """The ideal ILP's configs (per-GPU ``cpu``, ``mem`` of each job) placed by the residual dive, else (given a
    ``grid``) by CP-SAT; and whether the dive's first LP proved that they have no placement. Nothing when a
    config has two columns (whole and in pieces), so that its items are not fixed."""
    configs = _ideal_columns(items, cpu, mem)
    if configs is None or sum(configs[0].values()) < items.columns.count.sum():
        return None, False
    y = np.zeros(items.weight.size)
    y[list(configs[0])] = list(configs[0].values())
    demand = np.rint(np.bincount(items.col_item, weights=items.units * y, minlength=items.item_size.size))
    servers = instance.cluster.servers
    dive = residual_dive(types, demand, items.per_server, servers, math.inf if stop is None else stop)
    if dive.loads is not None and dive.count is not None:
        found: tuple[np.ndarray, np.ndarray] | None = (dive.loads, dive.count)
    elif dive.impossible or grid is None:
        return None, dive.impossible
    else:
        seconds = math.inf if stop is None else max(stop - time.perf_counter(), 0.0)
        found = cp_pack(grid, demand, items.per_server, servers, seconds, CP_IDEAL_WORK)
    if found is None:
        return None, False
    return _from_master(instance, items, y, found[1], found[0], "ideal placed", consolidate, split_penalty, objective,
                        reductions), False


def _splits(splits: dict[str, int]) -> str:
    return ", ".join(f"{count} on {kind}s" for kind, count in splits.items() if count)
