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

Public API
----------
``split_columns(table, units, entries, split_jobs, tables, target) -> SplitChoice``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    size_a, size_b = units.cpu_per_server, units.mem_per_server
    final = tables.final
    # Per split job: its servers, its columns, and each column's units on each of its servers (entries are
    # sorted by job, so a job's are one slice).
    costs = {}
    bounds = np.searchsorted(entries.job, np.stack((split_jobs, split_jobs + 1)))
    for job, start, stop in zip(split_jobs.tolist(), bounds[0].tolist(), bounds[1].tolist(), strict=True):
        q = table.klass[job]
        cols = np.arange(table.start[q], table.start[q + 1])
        n = entries.gpus[start:stop][:, None]
        costs[job] = (entries.server[start:stop], cols, units.cpu_units(n, table.cpu[cols][None, :]),
                      units.mem_units(n, table.mem[cols][None, :]))
    at = {job: int(np.searchsorted(cols, target[job])) for job, (_, cols, _, _) in costs.items()}
    safe = {job: int(np.searchsorted(cols, table.safe[table.klass[job]])) for job, (_, cols, _, _) in costs.items()}
    used_a = np.zeros(servers, dtype=np.int64)
    used_b = np.zeros(servers, dtype=np.int64)
    for job, (where, _, cu, mu) in costs.items():
        used_a[where] += cu[:, at[job]]
        used_b[where] += mu[:, at[job]]

    # 1. Targets, with the heaviest split job on an infeasible server moved to safe until all fit.
    while True:
        room_a, room_b = size_a - used_a, size_b - used_b
        short = (room_a < 0) | (room_b < 0)
        ok = np.flatnonzero(~short)
        short[ok] = ~np.isfinite(final[ok, room_a[ok], room_b[ok]])
        worst, most = -1, -np.inf  # any split job above its safe config on a short server may move
        for job, (where, _, cu, mu) in costs.items():
            on_short = short[where]
            if at[job] == safe[job] or not on_short.any():
                continue
            excess = float(np.sum((cu[:, at[job]] - cu[:, safe[job]])[on_short])
                           + np.sum((mu[:, at[job]] - mu[:, safe[job]])[on_short]))
            if excess > most:
                worst, most = job, excess
        if worst < 0:
            break
        where, _, cu, mu = costs[worst]
        used_a[where] += cu[:, safe[worst]] - cu[:, at[worst]]
        used_b[where] += mu[:, safe[worst]] - mu[:, at[worst]]
        at[worst] = safe[worst]

    # 2. Coordinate ascent on the total, one job at a time, then (on few split jobs) two jobs sharing a server at
    # a time: one job's raise often needs another's cut on a server they share, which no single move makes.
    # A job's room on its servers is at most a server's units (its own use is part of what is used there), so
    # only the lower end needs clipping; the tables are read flat.
    flat = final.reshape(-1)
    reads = {job: ((where * (size_a + 1))[:, None], table.tput[cols]) for job, (where, cols, _, _) in costs.items()}
    pairs = _sharing(costs) if len(costs) <= PAIR_JOBS else []
    for _ in range(PASSES):
        changed = False
        for job, (where, _, cu, mu) in costs.items():
            now = at[job]
            row, tput = reads[job]
            room_a = (size_a - used_a[where] + cu[:, now])[:, None] - cu
            room_b = (size_b - used_b[where] + mu[:, now])[:, None] - mu
            fits = ((room_a >= 0) & (room_b >= 0)).all(axis=0)
            rest = flat[(row + np.maximum(room_a, 0)) * (size_b + 1) + np.maximum(room_b, 0)].sum(axis=0)
            total = np.where(fits, tput + rest, -np.inf)
            best = int(total.argmax())
            if total[best] > total[now] + 1e-12 * (1 + abs(total[now])):
                used_a[where] += cu[:, best] - cu[:, now]
                used_b[where] += mu[:, best] - mu[:, now]
                at[job] = best
                changed = True
        for first, second in pairs:
            changed |= _pair_move(first, second, costs, at, used_a, used_b, flat, table, size_a, size_b)
        if not changed:
            break
    chosen = {job: int(costs[job][1][at[job]]) for job in costs}
    return SplitChoice(chosen, used_a, used_b)


Costs = dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def _sharing(costs: Costs) -> list[tuple[int, int]]:
    """Pairs of split jobs that share a server (each pair once, in the order of ``costs``)."""
    jobs = list(costs)
    if len(jobs) < 2:
        return []
    on = np.zeros((len(jobs), max(int(costs[job][0].max()) for job in jobs) + 1), dtype=np.int64)
    for k, job in enumerate(jobs):
        on[k, costs[job][0]] = 1
    first, second = np.nonzero(np.triu(on @ on.T, 1))
    return [(jobs[x], jobs[y]) for x, y in zip(first.tolist(), second.tolist(), strict=True)]


def _pair_move(first: int, second: int, costs: Costs, at: dict[int, int], used_a: np.ndarray, used_b: np.ndarray,
               flat: np.ndarray, table: ConfigTable, size_a: int, size_b: int) -> bool:
    """The best columns of two split jobs together (every pair of their columns, the others held), judged as
    the coordinate ascent judges one: their throughput plus the whole jobs' best on every server they use in
    the room left. Made (and True returned) when it raises the total."""
    where = np.union1d(costs[first][0], costs[second][0])
    room_a = size_a - used_a[where]
    room_b = size_b - used_b[where]
    need_a, need_b, values = [], [], []
    for job in (first, second):
        mine, cols, cu, mu = costs[job]
        on = np.searchsorted(where, mine)
        grid_a = np.zeros((where.size, cols.size), dtype=np.int64)
        grid_b = np.zeros((where.size, cols.size), dtype=np.int64)
        grid_a[on] = cu - cu[:, at[job]][:, None]  # the change from its column now
        grid_b[on] = mu - mu[:, at[job]][:, None]
        need_a.append(grid_a)
        need_b.append(grid_b)
        values.append(table.tput[cols])
    left_a = room_a[:, None, None] - need_a[0][:, :, None] - need_a[1][:, None, :]
    left_b = room_b[:, None, None] - need_b[0][:, :, None] - need_b[1][:, None, :]
    fits = ((left_a >= 0) & (left_b >= 0)).all(axis=0)
    read = flat[((where * (size_a + 1))[:, None, None] + np.maximum(left_a, 0)) * (size_b + 1)
                + np.maximum(left_b, 0)]
    total = np.where(fits, values[0][:, None] + values[1][None, :] + read.sum(axis=0), -np.inf)
    now = total[at[first], at[second]]
    best = np.unravel_index(int(total.argmax()), total.shape)
    if not total[best] > now + 1e-12 * (1 + abs(now)):
        return False
    for job, col in zip((first, second), best, strict=True):
        mine, _, cu, mu = costs[job]
        used_a[mine] += cu[:, col] - cu[:, at[job]]
        used_b[mine] += mu[:, col] - mu[:, at[job]]
        at[job] = int(col)
    return True
