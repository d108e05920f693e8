"""Re-picks judged by the per-server programme: one single-GPU whole job off every server, all put back at once.

The local search of :mod:`~synergy_opt.mechanisms.near_opt.rebalance` re-assigns single GPUs by how well the
*targets* fit; the exchanges of :mod:`~synergy_opt.mechanisms.near_opt.exchange` judge the real value but move
two jobs at a time, each server with a few partners. A re-pick judges the real value and moves many jobs at
once: every server gives up one of its whole single-GPU jobs (the one that lost most against its target, then
the next, one pick after another), and an optimal assignment (``scipy.optimize.linear_sum_assignment``, in
interleaved blocks of at most ``BLOCK`` servers) puts them back, one per server, at the most total value. The
value of job ``x`` on server ``s`` is exact: its best column plus the best of ``s``'s other whole jobs in the
room left (the programme's table of ``s`` without its picked job, split jobs' configs held). Every job back
where it was is one of the assignments and gives the round's total, so a re-pick never lowers it.

Public API
----------
``repick(table, units, configured, target, picks=PICKS) -> Entries``
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.optimize import linear_sum_assignment

from synergy_opt.mechanisms.configs import ConfigTable
from synergy_opt.mechanisms.near_opt.assign import Entries, blocks
from synergy_opt.mechanisms.near_opt.server_dp import Units, final_tables

# Picks made (each re-assigns one job of every server that has a whole single-GPU job).
PICKS = 2
# Largest optimal assignment solved at once (servers).
BLOCK = 64
# The cost of a job on a server it does not fit (no assignment takes it: every job fits back where it was).
UNFIT = 1e9


def repick(table: ConfigTable, units: Units, entries: Entries, column: np.ndarray, spans: np.ndarray,
           split_a: np.ndarray, split_b: np.ndarray, target: np.ndarray, picks: int = PICKS) -> Entries:
    """``picks`` re-picks (module docstring) of the configured placement ``entries`` (one per job and server;
    ``column`` per job, ``spans`` its servers, ``split_*`` the units the split jobs take per server)."""
    servers = split_a.size
    server = entries.server.copy()
    room_a, room_b = units.cpu_per_server - split_a, units.mem_per_server - split_b
    single = np.flatnonzero((entries.gpus == 1) & (spans[entries.job] == 1))
    if single.size < 2:
        return entries
    lost = table.tput[target[entries.job[single]]] - table.tput[column[entries.job[single]]]
    widest = int((table.start[1:] - table.start[:-1]).max(initial=1))
    whole = np.flatnonzero(spans[entries.job] == 1)
    for step in range(picks):
        # The step-th single-GPU whole job of each server by what it lost against its target.
        order = single[np.lexsort((-lost, server[single]))]
        first = np.searchsorted(server[order], np.arange(servers))
        count = np.bincount(server[order], minlength=servers)
        has = np.flatnonzero(count > step)
        if has.size < 2:
            break
        picked = order[first[has] + step]
        # Each server's table without its picked job.
        index = np.full(servers, -1, dtype=np.int64)
        index[has] = np.arange(has.size)
        keep = whole[(index[server[whole]] >= 0) & ~np.isin(whole, picked)]
        without = final_tables(table, units, index[server[keep]], entries.job[keep], entries.gpus[keep],
                               has.size)
        # Value of every picked job (rows) on every server with a pick (columns), at each of its columns.
        job = entries.job[picked]
        klass = table.klass[job]
        cols = table.start[klass][:, None] + np.arange(widest)[None, :]
        valid = cols < table.start[klass + 1][:, None]
        cols = np.where(valid, cols, table.start[klass][:, None])
        need_a = units.cpu_units(np.ones(1), table.cpu[cols])
        need_b = units.mem_units(np.ones(1), table.mem[cols])
        gain = np.where(valid, table.tput[cols], -np.inf)
        room_here_a, room_here_b = room_a[has], room_b[has]  # per server with a pick
        for block in blocks(has.size, max(1, -(-has.size // BLOCK))):
            rows, cols_ = linear_sum_assignment(_costs(without, block, room_here_a, room_here_b, need_a, need_b,
                                                       gain))
            server[picked[block[rows]]] = has[block[cols_]]
    return Entries(entries.job, server, entries.gpus)


@njit(cache=True)
def _costs(without: np.ndarray, block: np.ndarray, room_a: np.ndarray, room_b: np.ndarray, need_a: np.ndarray,
           need_b: np.ndarray, gain: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The assignment's costs within a block (positions among the servers with a pick): per picked job (rows) and
    server (columns), minus the most over the job's columns of its gain plus the server's table without its own
    pick in the room left (``UNFIT`` where no column fits)."""
    cost = np.empty((block.size, block.size))
    for r in range(block.size):
        job = block[r]
        for c in range(block.size):
            there = block[c]
            best = -np.inf
            for col in range(need_a.shape[1]):
                left_a, left_b = room_a[there] - need_a[job, col], room_b[there] - need_b[job, col]
                if left_a >= 0 and left_b >= 0:
                    best = max(best, without[there, left_a, left_b] + gain[job, col])
            cost[r, c] = -best if np.isfinite(best) else UNFIT
    return cost
