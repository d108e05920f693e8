"""A relaxation of the type-free core that splits it by type: each type alone, its memory row only.

Every solution of penalty ``<= threshold`` uses columns of reduced cost ``<= threshold`` only. Split each such
column's cost between types: a class's change within its base type is its base type's; a move to another type
costs ``a_q`` on the base type (``a_q`` half the class's cheapest move away, the same for every destination) and
the rest on the new one. Then the penalty is at least the sum over types of: that type's cost shares plus its
priced memory slack (the GPU and CPU slack dropped, being ``>= 0``). Relaxing which job leaves and which arrives
(each type chooses its own), every type becomes today's homogeneous problem with its memory row alone: its base
classes may leave (a column using nothing, cost ``a_q``), the others may arrive (their columns on the type) or not
(a column using nothing, cost 0, their base here). The homogeneous core search (one row: a few hundred states)
gives each type's least share exactly; when their sum exceeds the threshold, no solution is within it.

Measured on noisy 16384-GPU rounds the split leaves nearly none of the gap (the memory slack of each type is
set by how many jobs take the smallest memory config there, which moves between types do not fix cheaply); on
1024 GPUs it proves only a fifth of it, and the exact search (:mod:`~synergy_opt.ideal.hetero_search`) does.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.ideal.core_search import prepare, search
from synergy_opt.ideal.hetero_knapsack import TypedKnapsack
from synergy_opt.ideal.lagrangian import Dual, Knapsack


def split_rules_out(knapsack: TypedKnapsack, dual: Dual, threshold: float, *, deadline: float | None = None,
                    state_limit: int | None = None) -> bool:
    """True when the split relaxation shows that no solution has penalty ``<= threshold``; False when it does
    not (or a search stopped at ``deadline`` or ``state_limit``). Types with the fewest columns first."""
    rc, base = dual.reduced_cost, dual.base_columns
    within = rc <= threshold
    home = knapsack.col_type[base]
    away = within & (knapsack.col_type != home[knapsack.col_class])
    leave = np.full(knapsack.class_count.size, np.inf)
    np.minimum.at(leave, knapsack.col_class[away], rc[away])
    movable = np.isfinite(leave)
    leave = np.where(movable, leave / 2, 0.0)
    sizes = np.bincount(knapsack.col_type[within], minlength=knapsack.types)
    spent = 0.0
    for kind in np.argsort(sizes, kind="stable"):
        own, priced = _type_part(knapsack, dual, int(kind), within, home, movable, leave)
        outcome = search(prepare(own, priced, threshold - spent), deadline=deadline, state_limit=state_limit)
        if not outcome.complete:
            return False
        if outcome.solution is None:
            return True
        spent += outcome.solution.penalty
    return spent > threshold


def _type_part(knapsack: TypedKnapsack, dual: Dual, kind: int, within: np.ndarray, home: np.ndarray,
               movable: np.ndarray, leave: np.ndarray) -> tuple[Knapsack, Dual]:
    """Type ``kind``'s one-row (memory) knapsack of the split, its columns' cost shares as reduced costs."""
    rc, col_class = dual.reduced_cost, knapsack.col_class
    on = np.flatnonzero(within & (knapsack.col_type == kind))
    owner = col_class[on]
    mine = home[owner] == kind
    # The columns using nothing: a base class leaving (if it can), a class from elsewhere not coming.
    empty = np.union1d(np.flatnonzero((home == kind) & movable), owner[~mine])
    klass = np.r_[owner, empty]
    mem = np.r_[knapsack.mem[on], np.zeros(empty.size)]
    cost = np.r_[np.where(mine, rc[on], rc[on] - leave[owner]), np.where(home[empty] == kind, leave[empty], 0.0)]
    is_base = np.r_[on == dual.base_columns[owner], home[empty] != kind]
    order = np.lexsort((~is_base, klass))
    klass, mem, cost, is_base = klass[order], mem[order], cost[order], is_base[order]
    classes, local = np.unique(klass, return_inverse=True)
    local = local.ravel()
    counts = knapsack.class_count[classes]
    room = knapsack.room(dual.base_columns)[2 * knapsack.types + kind]
    capacity = np.array([0.0, room + counts @ np.bincount(local, weights=mem * is_base, minlength=classes.size)])
    own = Knapsack(value=np.zeros(klass.size), cpu=np.zeros(klass.size), mem=mem, col_class=local,
                   class_count=counts, capacity=capacity)
    starts = np.flatnonzero(np.r_[True, local[1:] != local[:-1]])
    lam = np.array([0.0, dual.multipliers[2 * knapsack.types + kind]])
    return own, Dual(multipliers=lam, bound=dual.bound, reduced_cost=np.maximum(cost, 0.0), base_columns=starts,
                     iterations=dual.iterations)
