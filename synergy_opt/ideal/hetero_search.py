"""Exact search over the core of the type-free ideal ILP: the classes whose type or config the prices leave open.

With multipliers ``lam`` on all ``3T`` coupling rows (:class:`~synergy_opt.ideal.hetero_knapsack.TypedKnapsack`),
a solution's penalty ``L(lam) - objective`` is its reduced costs plus its priced slack, both ``>= 0``, so a
solution of penalty ``<= threshold`` uses only columns of reduced cost ``<= threshold``: a class with one such
column is fixed at it. The other (core) classes are either *moving* (such columns on two types or more) or
*staying* (on one type). The penalty splits: the moving classes' costs, the GPU slack (only they change GPU
use), and per type its staying classes' costs plus its CPU and memory slack, which given the moving classes'
change of that type's use is exactly today's homogeneous two-row problem of that type. So:

1. a dynamic programme over the moving classes (:mod:`~synergy_opt.ideal.hetero_moves`) lists every change of
   use they reach within the threshold;
2. type by type (fewest staying classes first), each distinct change of that type's CPU and memory use is
   completed by the homogeneous core search (:func:`~synergy_opt.ideal.core_search.search_many`, all changes in
   one pass) within what the threshold leaves it: the threshold less, over the states sharing that change, the
   least of their penalty so far plus a lower bound on what the types still to complete add (the moving steps'
   bound, after the last step);
3. the best state overall is the best solution of penalty ``<= threshold``.

Each part is exact, so the result is the best solution of penalty ``<= threshold`` or proof that none exists;
with ``beam`` both searches keep only their most promising states (an incumbent, no proof).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.ideal.core_search import CoreSolution, SearchOutcome, prepare, row_tolerance, search_many
from synergy_opt.ideal.hetero_knapsack import TypedKnapsack
from synergy_opt.ideal.hetero_moves import MoveBounds, MoveStep, StayingOptions, move_states, move_steps
from synergy_opt.ideal.lagrangian import Dual

# With a beam of width w, the moving classes keep MOVE_BEAM w states and each type completes the COMPLETION_BEAM w
# changes of most room (measured on 1024 GPUs: a beam as wide as the completions' finds no solution at 1.2 times
# the optimum's penalty).
MOVE_BEAM = 16
COMPLETION_BEAM = 4


@dataclass(frozen=True, eq=False)
class Plan:
    """What every search at one threshold shares: the moving steps, the staying classes of each type, the
    bounds and the capacity left by the base columns."""

    knapsack: TypedKnapsack
    dual: Dual
    threshold: float
    within: np.ndarray  # columns of reduced cost <= threshold
    steps: list[MoveStep]
    staying_of: list[np.ndarray]  # per type, its staying classes
    bounds: MoveBounds
    room: np.ndarray
    core_jobs: int


def plan(knapsack: TypedKnapsack, dual: Dual, threshold: float) -> Plan:
    """The core of ``knapsack`` at ``threshold``, split into moving and staying classes, ready to search."""
    types, rc, base = knapsack.types, dual.reduced_cost, dual.base_columns
    within = rc <= threshold
    starts = knapsack.starts
    core = np.add.reduceat(within.astype(np.int64), starts) >= 2
    # A class is moving when its columns within the threshold reach two types (or more).
    highest = np.maximum.reduceat(np.where(within, knapsack.col_type, -1), starts)
    lowest = np.minimum.reduceat(np.where(within, knapsack.col_type, types), starts)
    moving = core & (highest != lowest)
    home = knapsack.col_type[base]
    staying_of = [np.flatnonzero(core & ~moving & (home == kind)) for kind in range(types)]
    steps = move_steps(knapsack, dual, moving, threshold)
    room = knapsack.room(base)
    staying = [StayingOptions.of(knapsack, dual, classes, within, threshold) for classes in staying_of]
    bounds = MoveBounds(knapsack, dual.multipliers, steps, staying, room)
    return Plan(knapsack, dual, threshold, within, steps, staying_of, bounds, room,
                int(knapsack.class_count[core].sum()))


def search(plan: Plan, *, beam: int | None = None, deadline: float | None = None, state_limit: int | None = None
           ) -> SearchOutcome:
    """The best solution of penalty ``<= plan.threshold`` (exact unless ``beam``), or None when there is none;
    stops incomplete when ``deadline`` (a ``time.perf_counter`` time) passes or a step keeps over
    ``state_limit``."""
    knapsack, dual, threshold, within = plan.knapsack, plan.dual, plan.threshold, plan.within
    steps, staying_of, bounds, room, core_jobs = plan.steps, plan.staying_of, plan.bounds, plan.room, plan.core_jobs
    types, lam = knapsack.types, dual.multipliers
    tolerance = row_tolerance(knapsack.capacity)
    wide = None if beam is None else beam * MOVE_BEAM
    states = move_states(steps, bounds, threshold, beam=wide, deadline=deadline, state_limit=state_limit)
    max_states = states.max_states
    if not states.complete:
        return SearchOutcome(None, False, core_jobs, max_states)
    gpu_room = room[:types] - states.delta[:, :types]
    penalty = np.where(np.all(gpu_room >= -tolerance[:types], axis=1),
                       states.cost + np.maximum(gpu_room, 0.0) @ lam[:types], np.inf)
    # What each type's staying classes will add at least: a type's completion may use only what the threshold
    # leaves after the others' least. Their CPU and memory slack and costs only: the GPU slack is in the penalty
    # already (counting it twice cut off the optimum, a wrong OPTIMAL or INFEASIBLE on small rounds).
    still = bounds.per_type(len(steps), states.delta, gpu=False)
    alive = np.flatnonzero(penalty + still.sum(axis=1) <= threshold)
    # Per type with staying classes: its columns searched, each state's tag, each tag's completion.
    completions: dict[int, tuple[np.ndarray, np.ndarray, dict[int, CoreSolution]]] = {}
    for kind in np.argsort([classes.size for classes in staying_of], kind="stable"):
        if not alive.size:
            break
        rows = np.array([types + kind, 2 * types + kind])
        change = states.delta[alive][:, rows]
        # Changes equal to a micro-unit share a completion, read at one of them (not at the rounded value,
        # which may leave a fraction of a CPU over capacity).
        _, first, tag = np.unique(np.round(change, 6), axis=0, return_index=True, return_inverse=True)
        tag = tag.ravel()
        budget = np.full(first.size, -np.inf)
        still[:, kind] = 0.0
        np.maximum.at(budget, tag, threshold - penalty[alive] - still[alive].sum(axis=1))
        left = room[rows] - change[first]
        classes = staying_of[kind]
        if not classes.size:  # nothing to change on this type: its slack, priced, if within capacity
            cost = np.where(np.all(left >= -tolerance[rows], axis=1), np.maximum(left, 0.0) @ lam[rows], np.inf)
        else:
            cost = np.full(first.size, np.inf)
            solutions: dict[int, CoreSolution] = {}
            columns = np.flatnonzero(within & np.isin(knapsack.col_class, classes))
            type_knapsack, type_dual = knapsack.of_type(int(kind), classes, columns, dual, room[rows])
            type_core = prepare(type_knapsack, type_dual, float(budget.max()))
            open_ = np.flatnonzero(budget >= 0)
            if beam is not None:  # with a beam, the changes of most room left
                open_ = open_[np.argsort(-budget[open_], kind="stable")][:COMPLETION_BEAM * beam]
            found, complete, most = search_many(type_core, left[open_], budget[open_], beam=beam, deadline=deadline,
                                                state_limit=state_limit)
            max_states = max(max_states, most)
            if not complete:
                return SearchOutcome(None, False, core_jobs, max_states)
            for index, solution in zip(open_, found, strict=True):
                if solution is not None:
                    cost[index] = solution.penalty
                    solutions[int(index)] = solution
            state_tag = np.full(penalty.size, -1, dtype=np.int64)
            state_tag[alive] = tag
            completions[int(kind)] = (columns, state_tag, solutions)
        penalty[alive] += cost[tag]
        alive = alive[penalty[alive] + still[alive].sum(axis=1) <= threshold]
    if not alive.size:
        return SearchOutcome(None, True, core_jobs, max_states)
    best = int(alive[np.argmin(penalty[alive])])
    y = _solution(knapsack, dual, states.columns(steps, best),
                  [(columns, solutions[int(tag[best])]) for columns, tag, solutions in completions.values()])
    return SearchOutcome(CoreSolution(y, float(penalty[best])), True, core_jobs, max_states)


def _solution(knapsack: TypedKnapsack, dual: Dual, moved: list[np.ndarray],
              completed: list[tuple[np.ndarray, CoreSolution]]) -> np.ndarray:
    """Counts per column: every class at its base, then the moves, then each type's completion (counts over
    that type's searched columns, its classes' base included)."""
    base = dual.base_columns
    y = np.zeros(knapsack.value.size)
    np.add.at(y, base, knapsack.class_count)
    for columns in moved:
        np.add.at(y, base[knapsack.col_class[columns]], -1.0)
        np.add.at(y, columns, 1.0)
    for columns, solution in completed:
        classes = np.unique(knapsack.col_class[columns])
        y[base[classes]] -= knapsack.class_count[classes]
        y[columns] += solution.y
    return y
