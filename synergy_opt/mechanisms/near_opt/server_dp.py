"""Exact per-server choice of configs once GPUs are placed: a small two-resource knapsack per server.

Given which jobs sit on each server (and with how many GPUs), the configs that maximise the server's total
throughput within its CPUs and memory are found by dynamic programming over a grid of resource *units*, all
servers at once (numpy, one pass per job slot and distinct unit cost). CPUs and memory are counted in units
of ``c_p / q`` and ``m_p / q`` (``q`` chosen per round, see :func:`choose_units`), so a server has ``G q`` of
each; a config's use is rounded *up* to whole units. Rounding up never over-claims (a server within its units
is within its capacity), and for the built-in profiles (CPUs in whole numbers, memory in multiples of
500/24 GB) ``q = 3`` makes every use exact, so the result is the exact optimum of each server's problem.
On other grids it is the exact optimum of a slightly conservative problem. The proportional share is always
exactly ``q`` units per GPU, so a server holds all its jobs at their safe configs (at most proportional).

Public API
----------
``choose_units(table) -> Units``
``best_columns(table, units, server, job, gpus, cpu_room, mem_room) -> ndarray``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.mechanisms.configs import ConfigTable

# Finest grid tried: q units per proportional share (a server has G q units of each resource).
MAX_UNITS_PER_SHARE = 8
# A use within this many units below a whole number of units counts as that number (20.83 GB is 1 unit of
# 500/24 GB); anything more above is rounded up.
_SNAP = 1e-3


@dataclass(frozen=True)
class Units:
    """Resource units of the per-server dynamic programme: ``cpu`` CPUs and ``mem`` GB each."""

    cpu: float
    mem: float
    per_server: int  # units of either resource a server has (G q)

    def cpu_units(self, gpus: np.ndarray, cpu_per_gpu: np.ndarray) -> np.ndarray:
        return _units(gpus * cpu_per_gpu / self.cpu)

    def mem_units(self, gpus: np.ndarray, mem_per_gpu: np.ndarray) -> np.ndarray:
        return _units(gpus * mem_per_gpu / self.mem)


def _units(amount: np.ndarray) -> np.ndarray:
    return np.ceil(np.asarray(amount) - _SNAP).astype(np.int64)


def choose_units(table: ConfigTable) -> Units:
    """The coarsest grid (smallest ``q``) on which every column's CPUs and memory per GPU are whole units."""
    cluster = table.instance.cluster
    c_p, m_p = cluster.cpu_per_gpu, cluster.mem_gb_per_gpu
    cpu_values, mem_values = np.unique(table.cpu), np.unique(table.mem)
    chosen = MAX_UNITS_PER_SHARE
    for q in range(1, MAX_UNITS_PER_SHARE + 1):
        exact = all(
            np.all(_units(values * q / share) - values * q / share <= _SNAP)
            for values, share in ((cpu_values, c_p), (mem_values, m_p))
        )
        if exact:
            chosen = q
            break
    return Units(c_p / chosen, m_p / chosen, cluster.gpus_per_server * chosen)


def best_columns(
    table: ConfigTable,
    units: Units,
    server: np.ndarray,
    job: np.ndarray,
    gpus: np.ndarray,
    cpu_room: np.ndarray,
    mem_room: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For each entry (``job`` with ``gpus`` GPUs on ``server``, each job once), its column in a best choice.

    Parameters
    ----------
    server, job, gpus
        One entry per job placed whole on one server.
    cpu_room, mem_room
        Per server, the units its entries may use together.

    Returns
    -------
    column, value
        The chosen column per entry, and per server the best total throughput (``-inf`` where nothing fits).
    """
    servers = cpu_room.size
    a_max, b_max = int(cpu_room.max(initial=0)), int(mem_room.max(initial=0))
    # Entries by server; slot t of a server is its t-th entry.
    order = np.argsort(server, kind="stable")
    server, job, gpus = server[order], job[order], gpus[order]
    first = np.searchsorted(server, np.arange(servers))
    slot = np.arange(server.size) - first[server]
    # Every (entry, column) pair with its unit costs; pairs that cannot fit an empty server are dropped.
    klass = table.klass[job]
    counts = table.start[klass + 1] - table.start[klass]
    entry = np.repeat(np.arange(server.size), counts)
    column = table.start[klass][entry] + (np.arange(entry.size) - np.repeat(np.cumsum(counts) - counts, counts))
    cu = units.cpu_units(gpus[entry], table.cpu[column])
    mu = units.mem_units(gpus[entry], table.mem[column])
    fits = (cu <= cpu_room[server[entry]]) & (mu <= mem_room[server[entry]])
    entry, column, cu, mu = entry[fits], column[fits], cu[fits], mu[fits]
    value = table.tput[column]

    # Forward: best[t][s, a, b] = best throughput of server s's first t entries within a CPU and b memory units.
    best = [np.zeros((servers, a_max + 1, b_max + 1))]
    slots = int(slot.max(initial=-1)) + 1
    pair_slot = slot[entry]
    for t in range(slots):
        previous = best[-1]
        here = np.flatnonzero(pair_slot == t)
        current = previous.copy()
        has_entry = np.unique(server[entry[here]])
        current[has_entry] = -np.inf
        # Pairs of this slot with equal unit costs shift every server's table alike: one pass per cost.
        cost_key = cu[here] * (b_max + 1) + mu[here]
        for key in np.unique(cost_key):
            pick = here[cost_key == key]
            a, b = divmod(int(key), b_max + 1)
            rows = server[entry[pick]]
            # Two columns of one entry may share a cost: the better one counts (max over duplicates).
            gain = np.full(servers, -np.inf)
            np.maximum.at(gain, rows, value[pick])
            rows = np.unique(rows)
            shifted = previous[rows, : a_max + 1 - a, : b_max + 1 - b] + gain[rows, None, None]
            current[rows, a:, b:] = np.maximum(current[rows, a:, b:], shifted)
        best.append(current)

    # Backward: from each server's room, the entry of each slot takes a column that attains the optimum.
    total = best[-1][np.arange(servers), np.minimum(cpu_room, a_max), np.minimum(mem_room, b_max)]
    a_left, b_left = np.minimum(cpu_room, a_max).copy(), np.minimum(mem_room, b_max).copy()
    chosen = np.full(server.size, -1, dtype=np.int64)
    for t in range(slots - 1, -1, -1):
        here = np.flatnonzero(pair_slot == t)
        rows = server[entry[here]]
        a, b = a_left[rows] - cu[here], b_left[rows] - mu[here]
        ok = (a >= 0) & (b >= 0) & np.isfinite(total[rows])
        reach = np.where(ok, best[t][rows, np.maximum(a, 0), np.maximum(b, 0)] + value[here], -np.inf)
        target = best[t + 1][rows, a_left[rows], b_left[rows]]
        attains = ok & (reach >= target - 1e-9 * (1 + np.abs(target)))
        # The first attaining pair of each entry (pairs are in entry order).
        hit = here[attains]
        hit_entry = entry[hit]
        keep = np.r_[True, hit_entry[1:] != hit_entry[:-1]] if hit.size else np.zeros(0, dtype=bool)
        hit = hit[keep]
        chosen[entry[hit]] = column[hit]
        a_left[server[entry[hit]]] -= cu[hit]
        b_left[server[entry[hit]]] -= mu[hit]
    result = np.empty_like(chosen)
    result[order] = chosen
    return result, total
