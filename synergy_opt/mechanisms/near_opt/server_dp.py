"""Exact per-server choice of configs once GPUs are placed: a small two-resource knapsack per server.

Given which jobs sit on each server (and with how many GPUs), the configs that maximise the server's total
throughput within its CPUs and memory are found by dynamic programming over a grid of resource *units*, all
servers at once (a compiled loop per server, slot and column: numba). CPUs are counted in units of ``c_p /
q_c`` and memory in units of ``m_p / q_m`` (``q_c``, ``q_m`` chosen per round and per resource, see
:func:`choose_units`), so a server has ``G q_c`` CPU and ``G q_m`` memory units; a config's use is rounded
*up* to whole units. Rounding up never over-claims (a server within its units is within its capacity), and for
the built-in profiles (CPUs in whole numbers, memory in multiples of 500/24 GB) ``q_c = c_p`` (1 CPU) and
``q_m = 3`` make every use exact, so the result is the exact optimum of each server's problem. On other grids
it is the exact optimum of a slightly conservative problem. The proportional share is always exactly ``q``
units per GPU in each resource, so a server holds all its jobs at their safe configs (at most proportional).

Public API
----------
``choose_units(table) -> Units``
``server_tables(table, units, server, job, gpus, servers, base=None) -> ServerTables``
``final_tables(table, units, server, job, gpus, servers, base=None) -> ndarray``
``backtrack(tables, cpu_room, mem_room) -> ndarray``
``units_of(gpus, per_gpu, unit) -> int`` (compiled)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, vectorize

from synergy_opt.mechanisms.configs import ConfigTable

# Finest grid tried per resource: q units per proportional share (a server has G q units of it). Each resource
# has its own q, so every built-in grid is exact at every profiled CPU:GPU ratio (1 CPU: q_c = 3..6; 500/24 GB:
# q_m = 3), where one q for both needed 12 or 15 at ratios 4 and 5 and fell back to 8 (units of 0.625 CPU).
MAX_UNITS_PER_SHARE = 8
# A grid is taken as exact when every use is at most this many units *below* a whole number (20.83 GB is 1
# unit of 500/24 GB); a use above a whole number is never taken as exact.
_SNAP = 1e-3
# Only float rounding (1 + 1e-15 units for an exact 20.8333... GB) is taken off before rounding up: a server's
# at most G entries then under-count by at most G * 1e-9 of its G q units, far inside the evaluator's slack.
_FLOAT_ROUNDING = 1e-9


@dataclass(frozen=True)
class Units:
    """Resource units of the per-server dynamic programme: ``cpu`` CPUs and ``mem`` GB each; a server has
    ``cpu_per_server`` and ``mem_per_server`` of them."""

    cpu: float
    mem: float
    cpu_per_server: int  # G q_c
    mem_per_server: int  # G q_m

    def cpu_units(self, gpus: np.ndarray, cpu_per_gpu: np.ndarray) -> np.ndarray:
        return _units(gpus * cpu_per_gpu / self.cpu)

    def mem_units(self, gpus: np.ndarray, mem_per_gpu: np.ndarray) -> np.ndarray:
        return _units(gpus * mem_per_gpu / self.mem)


@vectorize(["int64(float64)"], cache=True)
def _units(amount: float) -> int:  # pragma: no cover - compiled
    """Whole units covering ``amount`` (rounded up: 1.0005 units is 2, 0.9998 is 1): a compiled ufunc, so that
    arrays (:class:`Units`) and compiled loops (:func:`units_of`) round by the one rule."""
    return int(np.ceil(amount - _FLOAT_ROUNDING))


# Compiled callers in other modules (exchange._piece_totals) keep their own cached copy of this rule: numba's
# cache checks only the caller's file, so after changing _units or _FLOAT_ROUNDING clear the __pycache__
# directories (a clean clone, as CI's, has none).
@njit(cache=True)
def units_of(gpus: int, per_gpu: float, unit: float) -> int:  # pragma: no cover - compiled
    """:meth:`Units.cpu_units` (``unit`` = ``Units.cpu``) or ``mem_units`` of one entry, in compiled loops."""
    return _units(gpus * per_gpu / unit)


def choose_units(table: ConfigTable) -> Units:
    """Per resource, the coarsest grid (smallest ``q``) on which every column's use per GPU is whole units, or
    at most ``_SNAP`` units below them (rounding those up wastes less than a thousandth of a unit); the finest
    tried (``MAX_UNITS_PER_SHARE``) when none is exact."""
    cluster = table.instance.cluster
    c_p, m_p = cluster.cpu_per_gpu, cluster.mem_gb_per_gpu
    q_c, q_m = (_per_share(np.unique(values), share) for values, share in ((table.cpu, c_p), (table.mem, m_p)))
    return Units(c_p / q_c, m_p / q_m, cluster.gpus_per_server * q_c, cluster.gpus_per_server * q_m)


def _per_share(values: np.ndarray, share: float) -> int:
    for q in range(1, MAX_UNITS_PER_SHARE + 1):
        if np.all(_units(values * q / share) - values * q / share <= _SNAP):
            return q
    return MAX_UNITS_PER_SHARE


@dataclass(frozen=True, eq=False)
class ServerTables:
    """The forward pass: ``value(s, a, b)`` is the best total throughput of the whole jobs on server ``s``
    within ``a`` CPU and ``b`` memory units (``-inf`` where they do not fit)."""

    best: np.ndarray  # (slots + 1, servers, a, b): per slot t over the first t entries of each server
    server: np.ndarray  # per (entry, column) pair: its entry's server
    entry: np.ndarray
    column: np.ndarray
    cu: np.ndarray
    mu: np.ndarray
    value: np.ndarray
    slot: np.ndarray  # per pair: its entry's slot
    order: np.ndarray  # entries sorted by server (the input order of entry k is order[k])

    @property
    def final(self) -> np.ndarray:
        return self.best[-1]


def server_tables(
    table: ConfigTable, units: Units, server: np.ndarray, job: np.ndarray, gpus: np.ndarray, servers: int,
    base: np.ndarray | None = None,
) -> ServerTables:
    """Dynamic programme over the whole jobs of every server at once (entries: ``job`` with ``gpus`` GPUs on
    ``server``, each job once), for every budget up to a server's units. ``base`` (servers, a, b) is where each
    server's programme starts (default 0 everywhere: no jobs yet), e.g. the table of jobs the entries join."""
    pairs = _Pairs.of(table, units, server, job, gpus, servers)
    best = np.empty((pairs.slots + 1, servers, units.cpu_per_server + 1, units.mem_per_server + 1))
    best[0] = 0.0 if base is None else base
    _forward(best, pairs.server, pairs.slot, pairs.cu, pairs.mu, pairs.value)
    return ServerTables(best, pairs.server, pairs.entry, pairs.column, pairs.cu, pairs.mu, pairs.value, pairs.slot,
                        pairs.order)


def final_tables(
    table: ConfigTable, units: Units, server: np.ndarray, job: np.ndarray, gpus: np.ndarray, servers: int,
    base: np.ndarray | None = None,
) -> np.ndarray:
    """``server_tables(...).final`` alone (servers, a, b), without keeping the tables of every slot."""
    pairs = _Pairs.of(table, units, server, job, gpus, servers)
    final = np.zeros((servers, units.cpu_per_server + 1, units.mem_per_server + 1)) if base is None else base.copy()
    _final(final, pairs.server, pairs.cu, pairs.mu, pairs.value, pairs.slot)
    return final


@dataclass(frozen=True, eq=False)
class _Pairs:
    """Every (entry, column) pair the programme tries, in server, slot (entry) and column order."""

    server: np.ndarray
    entry: np.ndarray  # in server order (the input order of entry k is order[k])
    column: np.ndarray
    cu: np.ndarray
    mu: np.ndarray
    value: np.ndarray
    slot: np.ndarray  # its entry's slot on its server
    order: np.ndarray
    slots: int  # the most entries on a server

    @classmethod
    def of(cls, table: ConfigTable, units: Units, server: np.ndarray, job: np.ndarray, gpus: np.ndarray,
           servers: int) -> _Pairs:
        size_a, size_b = units.cpu_per_server, units.mem_per_server
        order = np.argsort(server, kind="stable")
        server, job, gpus = server[order], job[order], gpus[order]
        first = np.searchsorted(server, np.arange(servers))
        slot = np.arange(server.size) - first[server]
        klass = table.klass[job]
        counts = table.start[klass + 1] - table.start[klass]
        entry = np.repeat(np.arange(server.size), counts)
        column = table.start[klass][entry] + (np.arange(entry.size) - np.repeat(np.cumsum(counts) - counts, counts))
        cu = units.cpu_units(gpus[entry], table.cpu[column])
        mu = units.mem_units(gpus[entry], table.mem[column])
        # A column that leaves the server's other entries less than their least use can never be chosen (exact).
        # Every entry has a column (a class has one at least), so its pairs are one run from its first.
        runs = np.cumsum(counts) - counts
        least_a = np.minimum.reduceat(cu, runs) if runs.size else np.zeros(0, dtype=np.int64)
        least_b = np.minimum.reduceat(mu, runs) if runs.size else np.zeros(0, dtype=np.int64)
        others_a = np.bincount(server, least_a, minlength=servers)[server] - least_a  # per entry
        others_b = np.bincount(server, least_b, minlength=servers)[server] - least_b
        fits = (cu <= size_a - others_a[entry]) & (mu <= size_b - others_b[entry])
        entry, column, cu, mu = entry[fits], column[fits], cu[fits], mu[fits]
        return cls(server[entry], entry, column, cu, mu, table.tput[column], slot[entry], order,
                   int(slot.max(initial=-1)) + 1)


@njit(cache=True)
def _forward(best: np.ndarray, server: np.ndarray, slot: np.ndarray, cost_a: np.ndarray, cost_b: np.ndarray,
             value: np.ndarray) -> None:
    """Fill ``best[1:]`` from ``best[0]``: ``best[t + 1, s]`` is the best of ``best[t, s]`` shifted by a pair of
    slot ``t`` on server ``s`` (its costs) plus its value, or ``best[t, s]`` itself when ``s`` has no entry in
    slot ``t``. Pairs are in server then slot order."""
    p = 0
    for s in range(best.shape[1]):
        for t in range(best.shape[0] - 1):
            stop = _slot_end(server, slot, p, s, t)
            if stop == p:
                best[t + 1, s] = best[t, s]
            else:
                _step(best[t, s], best[t + 1, s], cost_a, cost_b, value, p, stop)
            p = stop


@njit(cache=True)
def _final(final: np.ndarray, server: np.ndarray, cost_a: np.ndarray, cost_b: np.ndarray, value: np.ndarray,
           slot: np.ndarray) -> None:
    """:func:`_forward` keeping only each server's last table, in ``final`` (which holds the start)."""
    scratch = np.empty(final.shape[1:])
    p = 0
    for s in range(final.shape[0]):
        while p < server.size and server[p] == s:
            stop = _slot_end(server, slot, p, s, slot[p])
            scratch[:] = final[s]
            _step(scratch, final[s], cost_a, cost_b, value, p, stop)
            p = stop


@njit(cache=True)
def _slot_end(server: np.ndarray, slot: np.ndarray, p: int, s: int, t: int) -> int:
    """The end of the run of pairs from ``p`` that are of server ``s`` and slot ``t``."""
    while p < server.size and server[p] == s and slot[p] == t:
        p += 1
    return p


@njit(cache=True)
def _step(previous: np.ndarray, current: np.ndarray, cost_a: np.ndarray, cost_b: np.ndarray, value: np.ndarray,
          start: int, stop: int) -> None:
    """One slot of one server: ``current`` is the best over pairs ``start:stop`` of ``previous`` shifted by the
    pair's costs plus its value (``-inf`` where none fits). Rows and columns of ``previous`` before its first
    finite cell add nothing, so they are skipped."""
    size_a, size_b = previous.shape
    low_a, low_b = size_a, size_b
    for i in range(size_a):
        for j in range(size_b):
            if previous[i, j] > -np.inf:
                low_a, low_b = min(low_a, i), min(low_b, j)
    current[:] = -np.inf
    for q in range(start, stop):
        a, b, v = cost_a[q], cost_b[q], value[q]
        for i in range(low_a, size_a - a):
            _row_max(current[i + a, low_b + b:], previous[i, low_b:], v, size_b - b - low_b)


@njit(cache=True)
def _row_max(current: np.ndarray, previous: np.ndarray, v: float, count: int) -> None:  # pragma: no cover
    """``current[j] = max(current[j], previous[j] + v)`` for the first ``count`` cells (rows as 1-d views: a
    third less time than indexing the 2-d tables cell by cell)."""
    for j in range(count):
        current[j] = max(current[j], previous[j] + v)


def backtrack(tables: ServerTables, cpu_room: np.ndarray, mem_room: np.ndarray) -> np.ndarray:
    """The column of each entry (input order) in a best choice within each server's room (-1: none fits)."""
    size_a, size_b = tables.final.shape[1:]
    chosen = np.full(tables.order.size, -1, dtype=np.int64)
    _backtrack(tables.best, tables.server, tables.slot, tables.entry, tables.column, tables.cu, tables.mu,
               tables.value, np.minimum(cpu_room, size_a - 1), np.minimum(mem_room, size_b - 1), chosen)
    result = np.empty_like(chosen)
    result[tables.order] = chosen
    return result


@njit(cache=True)
def _backtrack(best: np.ndarray, server: np.ndarray, slot: np.ndarray, entry: np.ndarray, column: np.ndarray,
               cost_a: np.ndarray, cost_b: np.ndarray, value: np.ndarray, room_a: np.ndarray, room_b: np.ndarray,
               chosen: np.ndarray) -> None:
    """Per server within its room (where its table is finite there), from its last slot down: the first pair of
    the slot's entry whose value from the table before it reaches the table's (up to 1e-9 relative)."""
    first = np.searchsorted(server, np.arange(best.shape[1] + 1))
    for s in range(best.shape[1]):
        a_left, b_left = room_a[s], room_b[s]
        if a_left < 0 or b_left < 0 or best[-1, s, a_left, b_left] == -np.inf:
            continue
        for t in range(best.shape[0] - 2, -1, -1):
            target = best[t + 1, s, a_left, b_left]
            for q in range(first[s], first[s + 1]):
                if slot[q] != t:
                    continue
                a, b = a_left - cost_a[q], b_left - cost_b[q]
                if a >= 0 and b >= 0 and best[t, s, a, b] + value[q] >= target - 1e-9 * (1 + abs(target)):
                    chosen[entry[q]] = column[q]
                    a_left, b_left = a, b
                    break
