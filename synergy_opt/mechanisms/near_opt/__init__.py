"""near-opt: a realizable allocation close to the joint optimum at scheduler speed (issue 11)."""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.configs import ConfigTable, config_table, priced_targets
from synergy_opt.mechanisms.near_opt.assign import Entries, assign_chunks, chunk_sizes
from synergy_opt.mechanisms.near_opt.server_dp import Units, best_columns, choose_units
from synergy_opt.mechanisms.state import ServerState


def _split_columns(table: ConfigTable, entries: Entries, split: np.ndarray, units: Units,
                   instance: RoundInstance) -> dict[int, int]:
    """Configs of the jobs spread over several servers: the best one whose pieces leave every other job on
    those servers room for its safe config."""
    cluster = instance.cluster
    safe_col = table.safe[table.klass[entries.job]]
    safe_cpu = entries.gpus * table.cpu[safe_col]
    safe_mem = entries.gpus * table.mem[safe_col]
    base_cpu = np.bincount(entries.server, weights=safe_cpu, minlength=cluster.servers)
    base_mem = np.bincount(entries.server, weights=safe_mem, minlength=cluster.servers)
    chosen: dict[int, int] = {}
    for job in split:
        mine = np.flatnonzero(entries.job == job)
        servers, n = entries.server[mine], entries.gpus[mine]
        room_cpu = cluster.cpus_per_server - (base_cpu[servers] - safe_cpu[mine])
        room_mem = cluster.mem_gb_per_server - (base_mem[servers] - safe_mem[mine])
        q = table.klass[job]
        cols = np.arange(table.start[q], table.start[q + 1])
        fits = np.all(n[:, None] * table.cpu[cols][None, :] <= room_cpu[:, None] * (1 + 1e-9) + 1e-9, axis=0)
        fits &= np.all(n[:, None] * table.mem[cols][None, :] <= room_mem[:, None] * (1 + 1e-9) + 1e-9, axis=0)
        score = np.where(fits, table.tput[cols], -np.inf)
        best = int(cols[np.lexsort((table.footprint[cols], -score))[0]])
        chosen[int(job)] = best
        # This job now holds its chosen config on its servers.
        base_cpu[servers] += n * table.cpu[best] - safe_cpu[mine]
        base_mem[servers] += n * table.mem[best] - safe_mem[mine]
        safe_cpu[mine] = n * table.cpu[best]
        safe_mem[mine] = n * table.mem[best]
    return chosen


def pack_near_opt(instance: RoundInstance, order: np.ndarray, spend_spare: bool = True) -> ServerState:
    table = config_table(instance)
    priced = priced_targets(table)
    target = priced.column[table.klass]
    cpu, mem = table.cpu[target], table.mem[target]
    gpus = instance.gpus
    cluster = instance.cluster
    use = np.array([gpus @ cpu / cluster.total_cpus, gpus @ mem / cluster.total_mem_gb])
    weights = np.maximum(use, 1e-3)
    chunk = chunk_sizes(gpus, cpu, mem, instance)
    entries = assign_chunks(instance, cpu, mem, weights, chunk)
    units = choose_units(table)

    spans = np.bincount(entries.job, minlength=gpus.size)
    split = np.flatnonzero(spans > 1)
    split_col = _split_columns(table, entries, split, units, instance)
    is_split = spans[entries.job] > 1
    room_cpu = np.full(cluster.servers, units.per_server, dtype=np.int64)
    room_mem = room_cpu.copy()
    for k in np.flatnonzero(is_split):
        col = split_col[int(entries.job[k])]
        room_cpu[entries.server[k]] -= units.cpu_units(entries.gpus[k], table.cpu[col])
        room_mem[entries.server[k]] -= units.mem_units(entries.gpus[k], table.mem[col])
    whole = ~is_split
    columns, _ = best_columns(table, units, entries.server[whole], entries.job[whole], entries.gpus[whole],
                              room_cpu, room_mem)
    state = ServerState(instance)
    for job, server, n, col in zip(entries.job[whole], entries.server[whole], entries.gpus[whole], columns,
                                   strict=True):
        if col < 0:
            col = table.safe[table.klass[job]]
        state.place(int(job), (int(server),), (int(n),), float(table.cpu[col]), float(table.mem[col]))
    for job, col in split_col.items():
        mine = entries.job == job
        state.place(job, entries.server[mine], entries.gpus[mine], float(table.cpu[col]), float(table.mem[col]))
    return state
