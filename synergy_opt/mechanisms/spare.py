"""Spending spare capacity: CPU and memory left idle on a server go to the jobs there that gain most.

Any mechanism can end with this step (``run_mechanism(..., spend_spare=True)``). Starting from a packed
:class:`~synergy_opt.mechanisms.state.ServerState`, a job may move to another of its configs (the ideal ILP's
columns, :mod:`~synergy_opt.mechanisms.configs`) when that config has a higher throughput and the extra CPUs
and memory it takes, in proportion to the job's GPUs on each of its servers (SPEC 1), are free on every one of
them. Among the moves that fit, the largest gains go first; the step repeats until no move fits.

Why it is safe: a move raises one job's throughput and touches nothing else, and it is made only when the
room is free on each server the job spans (per GPU, the same change everywhere), so no job's throughput falls
and no capacity is exceeded; jobs keep their servers and GPUs.

Public API
----------
``spend_spare(state, table=None) -> int``
    Moves made, in place.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.mechanisms.configs import ConfigTable, config_table
from synergy_opt.mechanisms.state import ServerState

# A gain must exceed this (relative to the throughput) to count: float noise is no reason to move a job.
_MIN_GAIN = 1e-9


def spend_spare(state: ServerState, table: ConfigTable | None = None) -> int:
    """Upgrade jobs into the free CPUs and memory of their servers (see the module docstring)."""
    instance = state.instance
    table = table if table is not None else config_table(instance)
    placed = np.array([p is not None for p in state.placements], dtype=bool)
    jobs = np.flatnonzero(placed)
    if jobs.size == 0:
        return 0
    moves = 0
    cpu_tol, mem_tol = state.cpu_tol, state.mem_tol
    while True:
        # Per job, the tightest per-GPU room over its servers.
        room_cpu = np.empty(jobs.size)
        room_mem = np.empty(jobs.size)
        now_cpu = np.empty(jobs.size)
        now_mem = np.empty(jobs.size)
        for k, job in enumerate(jobs):
            p = state.placements[job]
            assert p is not None
            servers = np.asarray(p.servers)
            n = np.asarray(p.gpus)
            room_cpu[k] = float(np.min((state.free_cpus[servers] + cpu_tol) / n))
            room_mem[k] = float(np.min((state.free_mem[servers] + mem_tol) / n))
            now_cpu[k], now_mem[k] = p.cpu_per_gpu, p.mem_per_gpu
        now_w = np.array([instance.jobs[j].profile.throughput(c, m) for j, c, m in
                          zip(jobs, now_cpu, now_mem, strict=True)])
        klass = table.klass[jobs]
        counts = table.start[klass + 1] - table.start[klass]
        owner = np.repeat(np.arange(jobs.size), counts)
        column = table.start[klass][owner] + (np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts))
        gain = table.tput[column] - now_w[owner]
        fits = ((table.cpu[column] - now_cpu[owner] <= room_cpu[owner])
                & (table.mem[column] - now_mem[owner] <= room_mem[owner])
                & (gain > _MIN_GAIN * (1 + now_w[owner])))
        if not fits.any():
            return moves
        # Each job's best move: the largest gain, then the smallest footprint.
        candidates = np.flatnonzero(fits)
        order = np.lexsort((table.footprint[column[candidates]], -gain[candidates], owner[candidates]))
        candidates = candidates[order]
        first = np.r_[True, owner[candidates][1:] != owner[candidates][:-1]]
        best = candidates[first]
        made = 0
        for pick in best[np.argsort(-gain[best], kind="stable")]:
            job = int(jobs[owner[pick]])
            p = state.placements[job]
            assert p is not None
            servers = np.asarray(p.servers)
            n = np.asarray(p.gpus)
            extra_cpu = n * (table.cpu[column[pick]] - p.cpu_per_gpu)
            extra_mem = n * (table.mem[column[pick]] - p.mem_per_gpu)
            # Earlier moves this pass may have taken the room: check again.
            if np.all(extra_cpu <= state.free_cpus[servers] + cpu_tol) and np.all(
                extra_mem <= state.free_mem[servers] + mem_tol
            ):
                state.set_demand(job, float(table.cpu[column[pick]]), float(table.mem[column[pick]]))
                made += 1
        moves += made
        if made == 0:
            return moves
