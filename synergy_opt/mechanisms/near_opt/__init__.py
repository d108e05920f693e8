"""near-opt: a realizable allocation close to the joint optimum at scheduler speed (issue 11)."""

from __future__ import annotations

import os

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.configs import ConfigTable, config_table, priced_targets
from synergy_opt.mechanisms.near_opt.assign import Entries, assign_chunks, chunk_sizes
from synergy_opt.mechanisms.near_opt.rebalance import rebalance
from synergy_opt.mechanisms.near_opt.server_dp import ServerTables, Units, backtrack, choose_units, server_tables
from synergy_opt.mechanisms.spare import spend_spare as _spend
from synergy_opt.mechanisms.state import ServerState

PASSES = 3


def _split_columns(
    table: ConfigTable, units: Units, entries: Entries, split_jobs: np.ndarray, tables: ServerTables, servers: int,
    target: np.ndarray,
) -> tuple[dict[int, int], np.ndarray, np.ndarray]:
    """Configs of the jobs spread over several servers, by coordinate ascent on the round's total.

    Each split job in turn takes the config that maximises its own throughput plus the best throughput of the
    whole jobs on its servers in the room it leaves them (read off the forward tables), the other split jobs
    held where they are. Starts from the targets where the whole jobs still fit, else from the safe configs
    (which always fit); every later step keeps every server feasible and never lowers the total.
    Returns the configs and, per server, the CPU and memory units the split jobs take.
    """
    size = units.per_server
    final = tables.final
    # Start from every split job at its target; where the whole jobs of a server then do not fit (the forward
    # tables say so), the split job taking the most from such servers goes to its safe config, until every server fits (all
    # safe does).
    mine_of = {job: np.flatnonzero(entries.job == job) for job in split_jobs.tolist()}
    chosen = {job: int(target[job]) for job in mine_of}

    def split_use() -> tuple[np.ndarray, np.ndarray]:
        used_a = np.zeros(servers, dtype=np.int64)
        used_b = np.zeros(servers, dtype=np.int64)
        for job, mine in mine_of.items():
            col = chosen[job]
            np.add.at(used_a, entries.server[mine], units.cpu_units(entries.gpus[mine], table.cpu[col]))
            np.add.at(used_b, entries.server[mine], units.mem_units(entries.gpus[mine], table.mem[col]))
        return used_a, used_b

    while True:
        used_a, used_b = split_use()
        room_a, room_b = size - used_a, size - used_b
        fits = (room_a >= 0) & (room_b >= 0)
        fits[fits] = np.isfinite(final[np.flatnonzero(fits), room_a[fits], room_b[fits]])
        short = ~fits
        # One job at a time: the split job that takes the most from the short servers goes to its safe config.
        worst, most = -1, 0.0
        for job, mine in mine_of.items():
            safe = int(table.safe[table.klass[job]])
            if chosen[job] == safe or not short[entries.server[mine]].any():
                continue
            on_short = mine[short[entries.server[mine]]]
            n = entries.gpus[on_short]
            excess = float(np.sum(units.cpu_units(n, table.cpu[chosen[job]]) - units.cpu_units(n, table.cpu[safe]))
                           + np.sum(units.mem_units(n, table.mem[chosen[job]]) - units.mem_units(n, table.mem[safe])))
            if worst < 0 or excess > most:
                worst, most = job, excess
        if worst < 0:
            break
        chosen[worst] = int(table.safe[table.klass[worst]])

    for _ in range(PASSES):
        changed = False
        for job in split_jobs.tolist():
            mine = mine_of[job]
            where, n = entries.server[mine], entries.gpus[mine]
            now = chosen[job]
            base_a = size - used_a[where] + units.cpu_units(n, table.cpu[now])
            base_b = size - used_b[where] + units.mem_units(n, table.mem[now])
            q = table.klass[job]
            cols = np.arange(table.start[q], table.start[q + 1])
            room_a = base_a[:, None] - units.cpu_units(n[:, None], table.cpu[cols][None, :])
            room_b = base_b[:, None] - units.mem_units(n[:, None], table.mem[cols][None, :])
            ok = np.all((room_a >= 0) & (room_b >= 0), axis=0)
            rest = final[where[:, None], np.clip(room_a, 0, size), np.clip(room_b, 0, size)].sum(axis=0)
            total = np.where(ok, table.tput[cols] + rest, -np.inf)
            pick = int(cols[np.argmax(total)])
            if pick != now and total.max() > total[cols == now][0] + 1e-12:
                used_a[where] += units.cpu_units(n, table.cpu[pick]) - units.cpu_units(n, table.cpu[now])
                used_b[where] += units.mem_units(n, table.mem[pick]) - units.mem_units(n, table.mem[now])
                chosen[job] = pick
                changed = True
        if not changed:
            break
    return chosen, used_a, used_b


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
    dc = int(os.environ.get("DONOR_CHUNK", "0"))
    if dc:
        donor = (np.abs(cpu - cluster.cpu_per_gpu) > 1e-9) | (np.abs(mem - cluster.mem_gb_per_gpu) > 1e-9)
        chunk = np.where(donor, np.minimum(chunk, dc), chunk)
    entries = assign_chunks(instance, cpu, mem, weights, chunk)
    spans = np.bincount(entries.job, minlength=gpus.size)
    entries = rebalance(entries, cpu, mem, np.ones(entries.job.size, dtype=bool), instance)
    units = choose_units(table)

    split = np.flatnonzero(spans > 1)
    whole = spans[entries.job] == 1
    tables = server_tables(table, units, entries.server[whole], entries.job[whole], entries.gpus[whole],
                           cluster.servers)
    split_col, used_a, used_b = _split_columns(table, units, entries, split, tables, cluster.servers, target)
    columns = backtrack(tables, units.per_server - used_a, units.per_server - used_b)
    state = ServerState(instance)
    for job, server, n, col in zip(entries.job[whole], entries.server[whole], entries.gpus[whole], columns,
                                   strict=True):
        if col < 0:
            col = table.safe[table.klass[job]]
        state.place(int(job), (int(server),), (int(n),), float(table.cpu[col]), float(table.mem[col]))
    for job, col in split_col.items():
        mine = entries.job == job
        state.place(job, entries.server[mine], entries.gpus[mine], float(table.cpu[col]), float(table.mem[col]))
    if spend_spare:
        _spend(state, table)
    return state
