"""Configs of the jobs spread over several servers, chosen against the per-server programmes' tables.

A split job runs one per-GPU config on all its servers (SPEC 1), so its config couples those servers. The
forward tables of :func:`~synergy_opt.mechanisms.near_opt.server_dp.server_tables` give, for every server
and every room left to its whole jobs, their best total; so a split job's config can be judged exactly
(its own throughput plus the best of the whole jobs on its servers in the room it leaves them), the other
split jobs held fixed.

1. Start: every split job at its target config. While some server's whole jobs cannot fit in the room left
   (the table reads ``-inf``), the split job that takes the most from such servers goes to its safe config
   (at most proportional); with every split job safe every server fits, so this ends feasible.
2. Coordinate ascent: each split job in turn takes its best config as judged above; passes repeat while
   any job changes (at most ``PASSES``). Every step keeps every server feasible and never lowers the total.

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
    size = units.per_server
    final = tables.final
    mine_of = {int(job): np.flatnonzero(entries.job == job) for job in split_jobs}
    chosen = {job: int(target[job]) for job in mine_of}

    def use_of(job: int, column: int) -> tuple[np.ndarray, np.ndarray]:
        n = entries.gpus[mine_of[job]]
        return units.cpu_units(n, table.cpu[column]), units.mem_units(n, table.mem[column])

    def split_use() -> tuple[np.ndarray, np.ndarray]:
        used_a = np.zeros(servers, dtype=np.int64)
        used_b = np.zeros(servers, dtype=np.int64)
        for job, mine in mine_of.items():
            a, b = use_of(job, chosen[job])
            np.add.at(used_a, entries.server[mine], a)
            np.add.at(used_b, entries.server[mine], b)
        return used_a, used_b

    # 1. Targets, with the heaviest split job on an infeasible server moved to safe until all fit.
    while True:
        used_a, used_b = split_use()
        room_a, room_b = size - used_a, size - used_b
        short = (room_a < 0) | (room_b < 0)
        ok = np.flatnonzero(~short)
        short[ok] = ~np.isfinite(final[ok, room_a[ok], room_b[ok]])
        worst, most = -1, -1.0
        for job, mine in mine_of.items():
            safe = int(table.safe[table.klass[job]])
            on_short = short[entries.server[mine]]
            if chosen[job] == safe or not on_short.any():
                continue
            a, b = use_of(job, chosen[job])
            a_safe, b_safe = use_of(job, safe)
            excess = float(np.sum((a - a_safe)[on_short]) + np.sum((b - b_safe)[on_short]))
            if excess > most:
                worst, most = job, excess
        if worst < 0:
            break
        chosen[worst] = int(table.safe[table.klass[worst]])

    # 2. Coordinate ascent on the total.
    for _ in range(PASSES):
        changed = False
        for job, mine in mine_of.items():
            where, n = entries.server[mine], entries.gpus[mine]
            now_a, now_b = use_of(job, chosen[job])
            base_a = size - used_a[where] + now_a
            base_b = size - used_b[where] + now_b
            q = table.klass[job]
            cols = np.arange(table.start[q], table.start[q + 1])
            room_a = base_a[:, None] - units.cpu_units(n[:, None], table.cpu[cols][None, :])
            room_b = base_b[:, None] - units.mem_units(n[:, None], table.mem[cols][None, :])
            fits = np.all((room_a >= 0) & (room_b >= 0), axis=0)
            rest = final[where[:, None], np.clip(room_a, 0, size), np.clip(room_b, 0, size)].sum(axis=0)
            total = np.where(fits, table.tput[cols] + rest, -np.inf)
            best = int(np.argmax(total))
            current = int(np.flatnonzero(cols == chosen[job])[0])
            if total[best] > total[current] + 1e-12 * (1 + abs(total[current])):
                new_a, new_b = use_of(job, int(cols[best]))
                np.add.at(used_a, where, new_a - now_a)
                np.add.at(used_b, where, new_b - now_b)
                chosen[job] = int(cols[best])
                changed = True
        if not changed:
            break
    return SplitChoice(chosen, used_a, used_b)
