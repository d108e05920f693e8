"""A demand of item types placed on servers (the decomposition's incumbents: a node's configs, the ideal ILP's).

:func:`place_demand` tries, cheapest first: the LP of the fewest servers (:class:`FewestServers`; more servers
than there are proves that no placement exists), the MILP over the loads it priced (:func:`cover`, those within
its slack, :func:`within_slack`), the residual dive (:func:`residual_dive`), the MILP over every maximal load
when they are few, and CP-SAT on the integer grid (:func:`~synergy_opt.joint.cp_pack.cp_pack`) on few servers.

The residual dive. The LP ``min sum_a x_a`` with ``sum_a a x_a >= demand`` over server loads ``a`` (priced in
exactly by the pricing DP with the row duals as item prices) needs at most the servers there are whenever a
placement exists,
so when it needs more, none exists. Otherwise the load the LP uses most is fixed on as many servers as the LP
uses it in whole (at least one), the demand it holds is taken off, and the LP of what is left is priced again,
until nothing is left (a placement) or the LP of the rest needs more servers than are left (the dive failed,
which proves nothing unless it was the first LP). This is the classic diving heuristic of cutting stock; on the
toolkit's rounds it places the ideal ILP's configs, whose CPUs and memory fill every server, in a fraction of a
second where a branch-and-price over the placements takes hundreds of nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

import numpy as np

from synergy_opt.joint.cp_pack import cp_pack
from synergy_opt.joint.grid import Grid
from synergy_opt.joint.pricing import ItemTypes, PricingDeadline, best_patterns, near_patterns

# Loads priced in per round of the LP.
PRICED_PER_ROUND = 8
# CP-SAT's deterministic time and seconds at most per placement (a tenth of the ideal ILP's configs' budget).
CP_WORK, CP_SECONDS = 0.1, 1.0
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Dive:
    """The dive's outcome: the distinct loads of a placement and how many servers take each (None when it
    failed), and whether the first LP proved that no placement exists."""

    loads: np.ndarray | None
    count: np.ndarray | None
    impossible: bool = False


class FewestServers:
    """The LP of the fewest servers holding a demand, on HiGHS, its loads priced in; the demand may change
    between solves (the loads stay: a load with more of a type than is left still holds what is left)."""

    def __init__(self, types: ItemTypes, loads: np.ndarray) -> None:
        import highspy  # imported on use, as the backends are: importing the package loads no solver

        from synergy_opt.solvers.highs import quiet_highs  # highspy on first use (no solver library at import)

        self._highspy = highspy
        self.types = types
        n = types.size.size
        self._h = quiet_highs()
        self._h.addRows(n, np.zeros(n), np.full(n, highspy.kHighsInf), 0, np.zeros(0, np.int32),
                        np.zeros(0, np.int32), np.zeros(0))
        self.loads = np.zeros((0, n), dtype=np.int64)
        self.pi = np.zeros(n)  # the row duals of the last LP solved
        self._known: set[bytes] = set()
        self.add(loads)

    def add(self, block: np.ndarray) -> int:
        """Add the loads not there yet (empty ones never); how many were new."""
        rows = np.ascontiguousarray(block, dtype=np.int64).reshape(-1, self.types.size.size)
        # Each row's bytes at once (a void view), not a tobytes and an any per row: the dive adds every known load
        # again at each step.
        keys = cast(list[bytes], rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel().tolist())
        filled = cast(list[bool], rows.any(axis=1).tolist())
        new = [i for i, key in enumerate(keys) if filled[i] and key not in self._known]
        if not new:
            return 0
        self._known.update(keys[i] for i in new)
        matrix = rows[new]
        col, row = np.nonzero(matrix)
        self._h.addCols(len(new), np.ones(len(new)), np.zeros(len(new)), np.full(len(new), self._highspy.kHighsInf),
                        col.size, np.searchsorted(col, np.arange(len(new))).astype(np.int32), row.astype(np.int32),
                        matrix[col, row].astype(float))
        self.loads = np.vstack([self.loads, matrix])
        return len(new)

    def solve(self, demand: np.ndarray, caps: np.ndarray, servers: float, stop: float) -> np.ndarray | None:
        """The LP's servers per load (over :attr:`loads`) for ``demand`` with loads priced within ``caps``; None
        when it needs more than ``servers`` (by its optimum or, on the way, Farley's bound ``pi . demand`` over the
        best load's value) or at ``stop``."""
        from synergy_opt.solvers.highs import run  # highspy on first use (no solver library at import)

        n = demand.size
        self._h.changeRowsBounds(n, np.arange(n, dtype=np.int32), demand.astype(float),  # type: ignore[attr-defined]
                                 np.full(n, self._highspy.kHighsInf))
        while True:
            run(self._h, 1)
            if self._h.getModelStatus() != self._highspy.HighsModelStatus.kOptimal:
                return None
            pi = self.pi = np.maximum(np.array(self._h.getSolution().row_dual), 0.0)
            try:  # the pricing of a large type may take seconds a call (a fuzzed round's 16-GPU servers: 8 s)
                priced = best_patterns(self.types, pi, caps, count=PRICED_PER_ROUND, beat=1.0 + 1e-9, deadline=stop)
            except PricingDeadline:
                return None
            if pi @ demand / max(priced.value, 1.0) > servers + _TOLERANCE:
                return None
            fresh = priced.patterns[priced.values > 1.0 + 1e-9]
            if priced.value <= 1.0 + 1e-9 or not self.add(fresh):
                if self._h.getInfo().objective_function_value > servers + _TOLERANCE:
                    return None
                return np.array(self._h.getSolution().col_value)
            if time.perf_counter() > stop:
                return None


def residual_dive(types: ItemTypes, demand: np.ndarray, caps: np.ndarray, servers: int, stop: float,
                  loads: np.ndarray | None = None) -> Dive:
    """A placement of ``demand`` (items per type, at most ``caps`` of a type per server) on at most ``servers``
    servers by the residual dive of the module docstring, from ``loads`` (any known loads), until ``stop``."""
    demand = np.rint(demand).astype(np.int64)
    start = np.diag(np.minimum(caps, demand))
    if loads is not None:
        start = np.vstack([loads, start])
    return _dive(FewestServers(types, start), demand, caps, servers, stop)


def _dive(lp: FewestServers, demand: np.ndarray, caps: np.ndarray, servers: int, stop: float) -> Dive:
    left, fixed, first = servers, [], True
    while demand.any():
        x = lp.solve(demand, np.minimum(caps, demand), left, stop)
        if x is None:
            return Dive(None, None, impossible=first and time.perf_counter() <= stop)
        first = False
        k = int(np.argmax(x))
        copies = min(max(1, int(np.floor(x[k] + _TOLERANCE))), left)
        load = lp.loads[k]
        fixed.append((np.minimum(load, caps), copies))
        left -= copies
        demand = np.maximum(demand - copies * load, 0)
        if demand.any() and not left:
            return Dive(None, None)
        # The known loads cut to what is left: a load's surplus items would take CPUs and memory from the rest.
        lp = FewestServers(lp.types, np.minimum(lp.loads, demand))
    if not fixed:
        return Dive(np.zeros((0, demand.size), dtype=np.int64), np.zeros(0))
    distinct, where = np.unique(np.array([load for load, _ in fixed]), axis=0, return_inverse=True)
    count = np.bincount(where.ravel(), weights=[c for _, c in fixed], minlength=len(distinct))
    return Dive(distinct, count)


def place_demand(types: ItemTypes, demand: np.ndarray, caps: np.ndarray, servers: int, patterns: np.ndarray,
                 seconds: float, listed: int, grid: Grid | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Whole numbers of servers and their loads holding ``demand`` on at most ``servers`` servers (at most ``caps``
    of a type on one), or None (none exists, or none found within ``seconds``): the steps of the module docstring,
    from the known loads ``patterns``; the maximal loads are listed when at most ``listed``, CP-SAT runs given a
    ``grid``."""
    stop = time.perf_counter() + seconds
    demand = np.rint(demand).astype(np.int64)
    caps = np.minimum(caps, demand)
    lp = FewestServers(types, np.minimum(patterns, caps))
    if lp.solve(demand, caps, servers, stop) is None:
        return None
    loads = within_slack(lp.loads, lp.pi, demand, servers)
    x = cover(loads, demand, servers, stop)
    if x is None:
        dive = _dive(lp, demand, caps, servers, stop)
        if dive.loads is not None and dive.count is not None:
            loads, x = dive.loads, dive.count
    if x is None and listed:
        every = near_patterns(types, np.zeros(demand.size), 0.0, caps, limit=listed)
        if every is not None:
            loads, x = every, cover(every, demand, servers, stop)
    if x is None and grid is not None:
        found = cp_pack(grid, demand, caps, servers, CP_SECONDS, CP_WORK)
        if found is not None:
            loads, x = found
    return None if x is None else (x, loads)


def within_slack(loads: np.ndarray, pi: np.ndarray, demand: np.ndarray, servers: int) -> np.ndarray:
    """The loads a placement of ``demand`` on at most ``servers`` servers may use: with cover prices ``pi >= 0``
    and every reduced cost ``1 - pi . a`` at least 0, servers ``x`` that hold the demand number
    ``sum x >= pi . demand + sum_a x_a (1 - pi . a)``, so a load whose reduced cost exceeds the slack
    ``servers - pi . demand`` is on no server (reduced-cost fixing on the LP of the fewest servers)."""
    reduced = 1.0 - loads @ pi
    if reduced.min() < -1e-9:
        return loads
    return loads[reduced <= servers - pi @ demand + 1e-6]


def cover(loads: np.ndarray, demand: np.ndarray, servers: int, stop: float) -> np.ndarray | None:
    """Whole numbers of servers for each of ``loads`` that hold ``demand`` on at most ``servers`` servers (a
    small MILP on HiGHS, until ``stop``), or None."""
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import quiet_highs, run  # highspy on first use (no solver library at import)

    count = len(loads)
    matrix = np.vstack([loads.T, np.ones((1, count))])  # cover rows, then the servers row
    rows, cols = np.nonzero(matrix)
    h = quiet_highs()
    h.setOptionValue("time_limit", max(stop - time.perf_counter(), 0.01))
    h.addVars(count, np.zeros(count), np.full(count, float(servers)))
    h.addRows(matrix.shape[0], np.r_[demand, -highspy.kHighsInf], np.r_[np.full(demand.size, highspy.kHighsInf),
              float(servers)], rows.size, np.searchsorted(rows, np.arange(matrix.shape[0])).astype(np.int32),
              cols.astype(np.int32), matrix[rows, cols].astype(float))
    h.changeColsIntegrality(count, np.arange(count, dtype=np.int32), np.full(count, highspy.HighsVarType.kInteger))
    run(h, 1)
    if h.getInfo().primal_solution_status != highspy.SolutionStatus.kSolutionStatusFeasible:
        return None
    return np.rint(np.array(h.getSolution().col_value))
