"""Configs of the jobs spread over several servers, chosen against the per-server programmes' tables.

A split job runs one per-GPU config on all its servers (SPEC 1), so its config couples those servers. The
forward tables of :func:`~synergy_opt.mechanisms.near_opt.server_dp.server_tables` give, for every server
and every room left to its whole jobs, their best total; so a split job's config can be judged exactly
(its own throughput plus the best of the whole jobs on its servers in the room it leaves them), the other
split jobs held fixed.

1. Start: every split job at its target config. While some server's whole jobs cannot fit in the room left
   (the table reads ``-inf``), the split job that takes the most from such servers goes to its safe config
   (at most proportional); with every split job safe every server fits, so this ends feasible.
2. Coordinate ascent: each split job in turn takes its best config as judged above, then (on rounds of at
   most ``PAIR_JOBS`` split jobs) every two split jobs that share a server take their best pair of configs
   (a raise of one often needs a cut of the other on a server they share, which no single move makes: M5 at
   187.5 GB beside ResNet-18 going from 5 CPUs to 4); passes repeat while any job changes (at most
   ``PASSES``). Every step keeps every server feasible and never lowers the total.

Both steps are one compiled loop (numba): on 1024-GPU rounds of 4-GPU servers a hundred jobs split, and the
loop in Python took 10-15 ms of a 60 ms round.

Public API
----------
``split_columns(table, units, entries, split_jobs, tables, target) -> SplitChoice``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from synergy_opt.mechanisms.configs import ConfigTable
from synergy_opt.mechanisms.near_opt.assign import Entries
from synergy_opt.mechanisms.near_opt.server_dp import ServerTables, Units

PASSES = 3
# Pairs of split jobs are tried together on rounds of at most this many split jobs (each pair costs a read per
# server it touches and per pair of its columns).
PAIR_JOBS = 40


@dataclass(frozen=True)
class SplitChoice:
    """Each split job's column, and per server the CPU and memory units the split jobs take there."""

    column: dict[int, int]
    cpu_units: np.ndarray
    mem_units: np.ndarray


def split_columns(
    table: ConfigTable, units: Units, entries: Entries, split_jobs: np.ndarray, tables: ServerTables,
    target: np.ndarray,
) -> SplitChoice:
    """Choose the split jobs' configs (see the module docstring); ``target`` is the column per job."""
    servers = tables.final.shape[0]
    # Per split job: its entries (sorted by job, so one slice) and its class's columns; per (entry, column)
    # cell, the units that column takes there, job after job, entry-major.
    first, stop = np.searchsorted(entries.job, np.stack((split_jobs, split_jobs + 1)))
    klass = table.klass[split_jobs]
    first_col = table.start[klass]
    width = table.start[klass + 1] - first_col
    cells = (stop - first) * width
    offset = np.concatenate(([0], np.cumsum(cells)))
    owner = np.repeat(np.arange(split_jobs.size), cells)
    local = np.arange(offset[-1]) - offset[owner]
    entry = first[owner] + local // width[owner]
    column = first_col[owner] + local % width[owner]
    cu = units.cpu_units(entries.gpus[entry], table.cpu[column])
    mu = units.mem_units(entries.gpus[entry], table.mem[column])
    pairs = _sharing(entries.server, first, stop) if split_jobs.size <= PAIR_JOBS else np.zeros((0, 2), np.int64)
    at = target[split_jobs] - first_col
    used_a = np.zeros(servers, dtype=np.int64)
    used_b = np.zeros(servers, dtype=np.int64)
    _choose(tables.final, entries.server, first, stop, offset, width, first_col, table.tput, cu, mu,
            table.safe[klass] - first_col, pairs, PASSES, at, used_a, used_b)
    return SplitChoice(dict(zip(split_jobs.tolist(), (first_col + at).tolist(), strict=True)), used_a, used_b)


def _sharing(server: np.ndarray, first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Pairs of split jobs (positions in ``first``/``stop``, the slices of ``server`` holding their servers)
    that share a server: each pair once, first by its first job."""
    if first.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    on = np.zeros((first.size, int(server.max()) + 1), dtype=np.int64)
    owner = np.repeat(np.arange(first.size), stop - first)
    on[owner, np.concatenate([server[a:b] for a, b in zip(first.tolist(), stop.tolist(), strict=True)])] = 1
    return np.argwhere(np.triu(on @ on.T, 1))


@njit(cache=True)
def _choose(final: np.ndarray, server: np.ndarray, first: np.ndarray, stop: np.ndarray, offset: np.ndarray,
            width: np.ndarray, first_col: np.ndarray, tput: np.ndarray, cu: np.ndarray, mu: np.ndarray,
            safe: np.ndarray, pairs: np.ndarray, passes: int, at: np.ndarray, used_a: np.ndarray,
            used_b: np.ndarray) -> None:  # pragma: no cover - compiled
    """Steps 1 and 2 of the module docstring: ``at`` (per split job, its column's position in its class) from
    the targets to the choice, ``used_*`` (per server, the split jobs' units) with it. A cell of job ``j`` is
    ``offset[j] + k * width[j] + c`` for its ``k``-th entry and ``c``-th column."""
    servers, size_a, size_b = final.shape[0], final.shape[1] - 1, final.shape[2] - 1
    jobs = first.size
    for j in range(jobs):
        for k in range(stop[j] - first[j]):
            cell = offset[j] + k * width[j] + at[j]
            used_a[server[first[j] + k]] += cu[cell]
            used_b[server[first[j] + k]] += mu[cell]
    # 1. The split job that takes most above its safe config from servers whose whole jobs cannot fit moves to
    # safe, until every server fits.
    short = np.zeros(servers, dtype=np.bool_)
    while True:
        for s in range(servers):
            room_a, room_b = size_a - used_a[s], size_b - used_b[s]
            short[s] = room_a < 0 or room_b < 0 or not np.isfinite(final[s, room_a, room_b])
        worst, most = -1, -np.inf
        for j in range(jobs):
            if at[j] == safe[j]:
                continue
            on_short, excess = False, 0
            for k in range(stop[j] - first[j]):
                if short[server[first[j] + k]]:
                    on_short = True
                    now, low = offset[j] + k * width[j] + at[j], offset[j] + k * width[j] + safe[j]
                    excess += cu[now] - cu[low] + mu[now] - mu[low]
            if on_short and excess > most:
                worst, most = j, excess
        if worst < 0:
            break
        _move(worst, safe[worst], server, first, stop, offset, width, cu, mu, at, used_a, used_b)
    # 2. Coordinate ascent: one job at a time, then the pairs sharing a server.
    where = np.full(servers, -1, dtype=np.int64)
    for _ in range(passes):
        changed = False
        for j in range(jobs):
            best, best_total, now_total = 0, -np.inf, -np.inf
            for c in range(width[j]):
                total = _total_one(j, c, final, server, first, stop, offset, width, first_col, tput, cu, mu, at,
                                   used_a, used_b)
                if c == 0 or total > best_total:
                    best, best_total = c, total
                if c == at[j]:
                    now_total = total
            if best_total > now_total + 1e-12 * (1 + abs(now_total)):
                _move(j, best, server, first, stop, offset, width, cu, mu, at, used_a, used_b)
                changed = True
        for p in range(pairs.shape[0]):
            changed |= _pair_move(pairs[p, 0], pairs[p, 1], final, server, first, stop, offset, width, first_col,
                                  tput, cu, mu, at, used_a, used_b, where)
        if not changed:
            break


@njit(cache=True)
def _move(j: int, column: int, server: np.ndarray, first: np.ndarray, stop: np.ndarray, offset: np.ndarray,
          width: np.ndarray, cu: np.ndarray, mu: np.ndarray, at: np.ndarray, used_a: np.ndarray,
          used_b: np.ndarray) -> None:  # pragma: no cover - compiled
    """Split job ``j`` to its ``column``-th column, its servers' use with it."""
    for k in range(stop[j] - first[j]):
        row = offset[j] + k * width[j]
        used_a[server[first[j] + k]] += cu[row + column] - cu[row + at[j]]
        used_b[server[first[j] + k]] += mu[row + column] - mu[row + at[j]]
    at[j] = column


@njit(cache=True)
def _total_one(j: int, c: int, final: np.ndarray, server: np.ndarray, first: np.ndarray, stop: np.ndarray,
               offset: np.ndarray, width: np.ndarray, first_col: np.ndarray, tput: np.ndarray, cu: np.ndarray,
               mu: np.ndarray, at: np.ndarray, used_a: np.ndarray, used_b: np.ndarray
               ) -> float:  # pragma: no cover - compiled
    """The total of split job ``j`` at its ``c``-th column, the others held: its throughput plus the whole jobs'
    best on each of its servers in the room left (summed server after server); ``-inf`` where it does not fit.
    The room is at most a server's units (the job's own use is part of what is used there), so only its lower
    end is clipped before the table is read (numba does not check the index)."""
    size_a, size_b = final.shape[1] - 1, final.shape[2] - 1
    fits, rest = True, 0.0
    for k in range(stop[j] - first[j]):
        s = server[first[j] + k]
        row = offset[j] + k * width[j]
        room_a = size_a - used_a[s] + cu[row + at[j]] - cu[row + c]
        room_b = size_b - used_b[s] + mu[row + at[j]] - mu[row + c]
        fits = fits and room_a >= 0 and room_b >= 0
        rest += final[s, max(room_a, 0), max(room_b, 0)]
    return tput[first_col[j] + c] + rest if fits else -np.inf


@njit(cache=True)
def _pair_move(x: int, y: int, final: np.ndarray, server: np.ndarray, first: np.ndarray, stop: np.ndarray,
               offset: np.ndarray, width: np.ndarray, first_col: np.ndarray, tput: np.ndarray, cu: np.ndarray,
               mu: np.ndarray, at: np.ndarray, used_a: np.ndarray, used_b: np.ndarray, where: np.ndarray
               ) -> bool:  # pragma: no cover - compiled
    """The best columns of split jobs ``x`` and ``y`` together (every pair of their columns, the others held),
    judged as one job's: their throughputs plus the whole jobs' best on every server they use (in ascending
    order) in the room left (at most a server's units, as in :func:`_total_one`). Made, and True returned, when it
    raises the total. ``where`` (all -1, and so left) is scratch per server."""
    size_a, size_b = final.shape[1] - 1, final.shape[2] - 1
    union = np.unique(np.concatenate((server[first[x]:stop[x]], server[first[y]:stop[y]])))
    row_x = np.full(union.size, -1, dtype=np.int64)
    row_y = np.full(union.size, -1, dtype=np.int64)
    for w in range(union.size):
        where[union[w]] = w
    for k in range(stop[x] - first[x]):
        row_x[where[server[first[x] + k]]] = offset[x] + k * width[x]
    for k in range(stop[y] - first[y]):
        row_y[where[server[first[y] + k]]] = offset[y] + k * width[y]
    for w in range(union.size):
        where[union[w]] = -1
    best_x, best_y, best_total, now_total = 0, 0, -np.inf, -np.inf
    for cx in range(width[x]):
        for cy in range(width[y]):
            fits, rest = True, 0.0
            for w in range(union.size):
                s = union[w]
                room_a, room_b = size_a - used_a[s], size_b - used_b[s]
                if row_x[w] >= 0:
                    room_a -= cu[row_x[w] + cx] - cu[row_x[w] + at[x]]
                    room_b -= mu[row_x[w] + cx] - mu[row_x[w] + at[x]]
                if row_y[w] >= 0:
                    room_a -= cu[row_y[w] + cy] - cu[row_y[w] + at[y]]
                    room_b -= mu[row_y[w] + cy] - mu[row_y[w] + at[y]]
                fits = fits and room_a >= 0 and room_b >= 0
                rest += final[s, max(room_a, 0), max(room_b, 0)]
            total = tput[first_col[x] + cx] + tput[first_col[y] + cy] + rest if fits else -np.inf
            if (cx == 0 and cy == 0) or total > best_total:
                best_x, best_y, best_total = cx, cy, total
            if cx == at[x] and cy == at[y]:
                now_total = total
    if not best_total > now_total + 1e-12 * (1 + abs(now_total)):
        return False
    _move(x, best_x, server, first, stop, offset, width, cu, mu, at, used_a, used_b)
    _move(y, best_y, server, first, stop, offset, width, cu, mu, at, used_a, used_b)
    return True
