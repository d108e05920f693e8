"""A diving heuristic on the master: fix jobs' configs along the priced LP, then search the placements.

From the master LP (columns priced in at every step, so the LP sees every pattern), the jobs whose column is
integral keep it, and the fractional column of largest value is rounded up; the LP is priced again, until every
job has its config. Then only the servers' loads are open: a search of the branch-and-price restricted to those
configs (its splits on counts of servers, depth first since every node has the same bound) finds a placement.
A heuristic: its fixings are not splits of a tree, and it stops at the first dead end.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synergy_opt.joint.branching import branch_and_price, cutoff_of
from synergy_opt.joint.master import ColumnGeneration

# Values this close to an integer count as integral.
_INTEGRAL = 1e-6


def dive(master: ColumnGeneration, incumbent: float, mip_gap: float, deadline: float | None,
         on_incumbent: Callable[[np.ndarray, np.ndarray], float], pack_nodes: int) -> int:
    """Dive from the root; ``on_incumbent`` as in :func:`~synergy_opt.joint.branching.branch_and_price`.
    Returns the LPs solved."""
    cols = master.items.columns
    lower = np.zeros(cols.cls.size)
    upper = cols.count[cols.cls].astype(float)
    solved = 0
    while True:
        cutoff = cutoff_of(incumbent, mip_gap)
        master.restrict(lower, upper, {})
        lp = master.solve_node(deadline, cutoff)
        solved += 1
        if lp.bound <= cutoff or not lp.converged or lp.artificial > _INTEGRAL:
            return solved  # no better solution down here, or out of time
        y = lp.y
        fractional = np.flatnonzero(np.abs(y - np.rint(y)) > _INTEGRAL)
        if not fractional.size:
            lower = np.rint(y)
            upper = lower.copy()
            outcome = branch_and_price(master, incumbent, mip_gap, deadline, on_incumbent, root_bound=lp.bound,
                                       y_lower=dict(enumerate(lower)), y_upper=dict(enumerate(upper)),
                                       node_limit=pack_nodes)
            return solved + outcome.nodes
        col = fractional[np.argmax(y[fractional] - np.floor(y[fractional]))]
        lower[col] = np.ceil(y[col])
