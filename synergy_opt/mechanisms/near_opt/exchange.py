"""Exchanges judged by the per-server programme: swaps between servers that raise the round's real total.

The local search of :mod:`~synergy_opt.mechanisms.near_opt.rebalance` balances the *targets* on the servers.
When the targets cannot all fit (the cluster's CPUs or memory used to the last unit, a server size that leaves
no exact packing, a split job whose config must fit on every one of its servers), what counts is what the
configs chosen afterwards give. This step searches on that value itself (on large clusters of small servers
after the re-picks of :mod:`~synergy_opt.mechanisms.near_opt.repick`). :func:`configure` chooses every job's
config for a placement (the per-server programme for the whole jobs, :mod:`~synergy_opt.mechanisms.near_opt.splits`
for the split ones) and scores it; then rounds of swaps of *mobiles* between two servers are judged exactly and
the best swaps that touch distinct servers are made.

Mobiles (on clusters of at most ``ALL_MOBILE`` servers every whole job; on larger ones, per server, its whole
job that lost most against its target, its lightest and its heaviest, and the ``LARGE_PIECES`` split jobs'
entries that lost most):

- a whole job (all its GPUs move);
- GPUs of a split job (a job on several servers): 1, 2, 4, ... or all of its GPUs on the server (on large
  clusters 1 or all); the job keeps its config, or moves to one of its *aims* (its target, or its best column
  below the target) on all its servers;
- GPUs of a whole multi-GPU job, 1, 2, 4, ... but not all (on large clusters 1): the job is *split off*, its
  config (its own or an aim) the same on both servers. This is how near-opt splits a job when splitting lets
  the round hold more.

Two mobiles of equal GPU count swap, so every server keeps its GPUs. How a swap is judged: with split jobs'
configs held (but the one that moves), every value needed is a read of a per-server table. For a whole mobile
the programme is run once more over its server's other whole jobs (a *virtual server* per mobile): the table
without it. A server's new value is that table in the room left once the arriving mobile is in: a whole job at
its best column (one read per column), GPUs of a split job at its config. A split job that changes its config
also changes what its other servers' whole jobs get, read off their tables at the room it leaves them. A swap's
gain is the new values less the old, so it is exact; swaps are made best first, no two sharing a server (or a
server of a split job whose config changes), and the tables of the servers touched are programmed again. A
swap worth nothing is made too when it gathers a split job on fewer servers (fewer servers per split job make
later raises possible; the number of (job, server) entries falls, so the search cannot cycle); ``PATIENCE``
rounds in a row without gain end it, ``ROUNDS`` at most (``LARGE_ROUNDS`` on clusters of more than
``ALL_PAIRS`` servers, where every pair of servers is not tried: each server that lost throughput meets the
``PARTNERS`` that lost least and the ``PARTNERS`` that lost most).

Every round is realizable (GPU counts per server never change, every server's whole jobs take the programme's
configs in the room its split jobs leave) and no worse than the one before. On small clusters the result is
configured once more at the end (split jobs' configs chosen afresh by the coordinate ascent) and the better of
the two kept.

Public API
----------
``Configured``, ``Placed``
``configure(table, units, entries, start) -> Configured``
``exchange(table, units, entries, target, rounds=None) -> Placed``
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from synergy_opt.mechanisms.configs import ConfigTable
from synergy_opt.mechanisms.group_first import group_first
from synergy_opt.mechanisms.near_opt.assign import Entries, merge_entries
from synergy_opt.mechanisms.near_opt.repick import repick
from synergy_opt.mechanisms.near_opt.server_dp import (
    ServerTables,
    Units,
    backtrack,
    final_tables,
    server_tables,
    units_of,
)
from synergy_opt.mechanisms.near_opt.splits import SplitChoice, split_columns

# At most this many rounds of swaps (each makes at least one swap, or the search ends).
ROUNDS = 12
# Large clusters of servers of at most this many GPUs are re-picked first (near_opt/repick.py): their servers
# hold few jobs, so a pair of servers rarely has a swap that helps, and their programme is cheap (issue-22
# family at 1024 GPUs, seeds 0-4: single-servers-4 98.64 -> 98.99% of the LP bound, multi-servers-4 98.41 ->
# 98.61, at no more time: TUNE's bound is then met more often).
REPICK_GPUS = 4
# On clusters of more than ALL_PAIRS servers (their placement needs less repair, and each round costs more).
LARGE_ROUNDS = 3
# Clusters of at most ALL_PAIRS servers try every pair of servers each round; larger ones pair each server that
# lost throughput with the PARTNERS servers that lost least and the PARTNERS that lost most.
ALL_PAIRS = 32
# Clusters of at most ALL_MOBILE servers take every whole job as a mobile; larger ones three per server (module
# docstring).
ALL_MOBILE = 32
MOBILES_PER_SERVER = 4
PARTNERS = 8
# On larger clusters, the split jobs' entries per server that may move in a round.
LARGE_PIECES = 2
# Rounds in a row without gain (only gathering split jobs) after which the search ends.
PATIENCE = 2
_GAIN = 1e-9


@dataclass(frozen=True, eq=False)
class Configured:
    """A placement with every job's config chosen: per job its column, per server the value of its whole jobs
    and the units its split jobs take, and the round's total."""

    entries: Entries  # one per (job, server), sorted by job then server
    column: np.ndarray  # per job
    spans: np.ndarray  # per job, its servers
    tables: ServerTables
    split: SplitChoice
    whole_value: np.ndarray  # per server
    total: float


def configure(table: ConfigTable, units: Units, entries: Entries, start: np.ndarray) -> Configured:
    """Every job's config for the placement ``entries`` (merged: one per job and server): the whole jobs' by
    the per-server programme, the split jobs' by :func:`~synergy_opt.mechanisms.near_opt.splits.split_columns`
    from their ``start`` columns (per job)."""
    instance = table.instance
    jobs, servers = len(instance.jobs), instance.cluster.servers
    spans = entries.spans(jobs)
    whole = spans[entries.job] == 1
    tables = server_tables(table, units, entries.server[whole], entries.job[whole], entries.gpus[whole], servers)
    split = split_columns(table, units, entries, np.flatnonzero(spans > 1), tables, start)
    room_a, room_b = units.cpu_per_server - split.cpu_units, units.mem_per_server - split.mem_units
    columns = backtrack(tables, room_a, room_b)
    column = np.empty(jobs, dtype=np.int64)
    column[entries.job[whole]] = np.where(columns >= 0, columns, table.safe[table.klass[entries.job[whole]]])
    for job, col in split.column.items():
        column[job] = col
    fits = (room_a >= 0) & (room_b >= 0)
    value = np.full(servers, -np.inf)
    value[fits] = tables.final[np.flatnonzero(fits), room_a[fits], room_b[fits]]
    return Configured(entries, column, spans, tables, split, value, float(table.tput[column].sum()))


@dataclass(frozen=True, eq=False)
class Placed:
    """A realizable round: the placement (one entry per job and server), every job's column, the total."""

    entries: Entries
    column: np.ndarray
    total: float


def exchange(table: ConfigTable, units: Units, entries: Entries, target: np.ndarray,
             rounds: int | None = None) -> Placed:
    """Rounds of swaps judged by the per-server programme (module docstring), from the configured placement
    ``entries``: never worse than it. On clusters of at most ``ALL_PAIRS`` servers the round found is configured
    once more at the end (the split jobs' configs chosen afresh); on larger ones it is returned as the search
    left it (every server's configs chosen exactly for its placement, the split jobs' as the swaps set them)."""
    first = configure(table, units, entries, target)
    small = first.whole_value.size <= ALL_PAIRS
    few = table.instance.cluster.gpus_per_server <= REPICK_GPUS
    if not small and few and np.all(np.isfinite(first.whole_value)):
        picked = repick(table, units, first.entries, first.column, first.spans, first.split.cpu_units,
                        first.split.mem_units, target)
        again = configure(table, units, merge_entries(picked.job, picked.server, picked.gpus), first.column)
        first = again if again.total >= first.total else first
    if not np.all(np.isfinite(first.whole_value)):  # a server over capacity (never seen): nothing to judge by
        return Placed(first.entries, first.column, first.total)
    state = _State.of(first)
    idle = 0
    memory = _Memory()
    for _ in range(rounds if rounds is not None else ROUNDS if small else LARGE_ROUNDS):
        swaps, changes = _best_swaps(table, units, state, target, memory)
        if not swaps:
            break
        moved = state.after(table, units, swaps, changes)
        memory.touched = moved.touched
        # Rounds that only gather split jobs (the total unchanged) may unlock gains; PATIENCE of them in a row end it.
        idle = 0 if moved.total > state.total * (1 + 1e-12) + _GAIN else idle + 1
        state = moved
        if idle >= PATIENCE:
            break
    if state.entries is first.entries:
        return Placed(first.entries, first.column, first.total)
    if not small:
        return Placed(state.entries, state.column, state.total)
    final = configure(table, units, state.entries, state.column)
    found = [(final.total, final.entries, final.column), (state.total, state.entries, state.column)]
    total, placement, column = max(found, key=lambda option: option[0])
    return Placed(placement, column, total)


@dataclass(frozen=True, eq=False)
class _State:
    """The search's round between configurations: the placement, every job's column (split jobs' held fixed),
    per server its whole jobs' table and value, and the units its split jobs take."""

    entries: Entries
    column: np.ndarray
    spans: np.ndarray
    final: np.ndarray  # (servers, a, b): the whole jobs' table of each server
    split_a: np.ndarray
    split_b: np.ndarray
    whole_value: np.ndarray
    total: float
    touched: np.ndarray | None = None  # the servers changed from the state before

    @classmethod
    def of(cls, configured: Configured) -> _State:
        return cls(configured.entries, configured.column, configured.spans, configured.tables.final,
                   configured.split.cpu_units, configured.split.mem_units, configured.whole_value,
                   configured.total)

    def after(self, table: ConfigTable, units: Units, swaps: list[tuple[int, int, int, int, int]],
              changes: list[tuple[int, int]]) -> _State:
        """The state once ``swaps`` are made and split jobs take their ``changes``: the tables and whole jobs'
        columns of the servers touched computed again (only theirs)."""
        entries = _swapped(self.entries, swaps)
        jobs = len(table.instance.jobs)
        column = self.column.copy()
        for job, col in changes:
            column[job] = col
        spans = entries.spans(jobs)
        servers = self.whole_value.size
        touched = np.zeros(servers, dtype=bool)
        for s, _, t, _, _ in swaps:
            touched[[s, t]] = True
        for job, _ in changes:
            touched[entries.server[entries.job == job]] = True
        # A split job gathered on one server is whole there now.
        merged = np.flatnonzero((spans == 1) & (self.spans > 1))
        for job in merged.tolist():
            touched[entries.server[entries.job == job]] = True
        split = spans[entries.job] > 1
        cols = column[entries.job[split]]
        split_a = np.bincount(entries.server[split], units.cpu_units(entries.gpus[split], table.cpu[cols]),
                              minlength=servers).astype(np.int64)
        split_b = np.bincount(entries.server[split], units.mem_units(entries.gpus[split], table.mem[cols]),
                              minlength=servers).astype(np.int64)
        # The touched servers' whole jobs, programmed again as servers 0..k-1.
        which = np.flatnonzero(touched)
        index = np.full(servers, -1, dtype=np.int64)
        index[which] = np.arange(which.size)
        mine = np.flatnonzero(~split & touched[entries.server])
        tables = server_tables(table, units, index[entries.server[mine]], entries.job[mine], entries.gpus[mine],
                               which.size)
        room_a, room_b = units.cpu_per_server - split_a[which], units.mem_per_server - split_b[which]
        chosen = backtrack(tables, room_a, room_b)
        column[entries.job[mine]] = np.where(chosen >= 0, chosen, table.safe[table.klass[entries.job[mine]]])
        final = self.final.copy()
        final[which] = tables.final
        whole_value = self.whole_value.copy()
        fits = (room_a >= 0) & (room_b >= 0)
        whole_value[which] = np.where(fits, tables.final[np.arange(which.size), np.maximum(room_a, 0),
                                                         np.maximum(room_b, 0)], -np.inf)
        total = float(whole_value.sum() + table.tput[column[np.flatnonzero(spans > 1)]].sum())
        return _State(entries, column, spans, final, split_a, split_b, whole_value, total, touched)


@dataclass(frozen=True, eq=False)
class _Mobiles:
    """What may move in a round: per mobile its server, job, GPUs, whether it is one GPU of a split job, the
    table of its server without it (an index into ``tables``) and the room left there without it."""

    server: np.ndarray
    job: np.ndarray
    gpus: np.ndarray
    piece: np.ndarray  # GPUs of a split job
    split_off: np.ndarray  # GPUs of a whole job, which splits it (the rest stays)
    table: np.ndarray
    room_a: np.ndarray
    room_b: np.ndarray
    tables: np.ndarray  # (tables, a, b)
    # For whole mobiles, what they take where they arrive, per column of their class (padded): CPU and memory
    # units and throughput (-inf on padding).
    arrive_a: np.ndarray
    arrive_b: np.ndarray
    arrive_value: np.ndarray


def _server_loss(table: ConfigTable, current: _State, target: np.ndarray) -> np.ndarray:
    """Per server, the throughput its jobs lost against their targets (a split job's loss shared by GPUs)."""
    entries = current.entries
    job = entries.job
    lost = (table.tput[target[job]] - table.tput[current.column[job]]) * entries.gpus / table.instance.gpus[job]
    return np.bincount(entries.server, lost, minlength=current.whole_value.size)


def _partners(table: ConfigTable, units: Units, current: _State, loss: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of servers a round tries (each once): every pair on small clusters, else each server that lost
    throughput with the ``PARTNERS`` servers that lost least (most idle room first) and those that lost most."""
    servers = loss.size
    hot = np.flatnonzero(loss > _GAIN * (1 + np.abs(loss).max(initial=0.0)))
    if servers < 2 or (hot.size == 0 and servers > ALL_PAIRS):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    entries = current.entries
    gpus, col = entries.gpus, current.column[entries.job]
    idle = (2.0 - np.bincount(entries.server, gpus * table.cpu[col], minlength=servers)
            / table.instance.cluster.cpus_per_server
            - np.bincount(entries.server, gpus * table.mem[col], minlength=servers)
            / table.instance.cluster.mem_gb_per_server)
    if servers <= ALL_PAIRS:
        s, t = np.nonzero(np.ones((servers, servers), dtype=bool))
    else:
        # Each hot server with the servers that lost least (most idle room first) and those that lost most.
        by = np.lexsort((-idle, loss))
        pick = np.concatenate((by[: PARTNERS + 1], by[::-1][: PARTNERS + 1]))
        s = np.repeat(hot, pick.size)
        t = np.tile(pick, hot.size)
    keep = s != t
    s, t = s[keep], t[keep]
    # Each unordered pair once.
    low, high = np.minimum(s, t), np.maximum(s, t)
    pairs = np.unique(low * servers + high)
    return pairs // servers, pairs % servers


def _mobiles(table: ConfigTable, units: Units, current: _State, target: np.ndarray,
             involved: np.ndarray, cache: dict[tuple[int, int, bytes], np.ndarray]) -> _Mobiles:
    """The mobiles on the ``involved`` servers (module docstring), with their servers' tables without them
    (``cache``: those of earlier rounds, by server, job and the server's whole jobs)."""
    entries, spans = current.entries, current.spans
    split_a, split_b = current.split_a, current.split_b
    room_a, room_b = units.cpu_per_server - split_a, units.mem_per_server - split_b
    here = involved[entries.server]
    whole = np.flatnonzero((spans[entries.job] == 1) & here)
    # Whole mobiles: per server, the whole job that lost most against its target, and the lightest.
    job = entries.job[whole]
    col = current.column[job]
    footprint = table.footprint[col] * entries.gpus[whole]
    lost = table.tput[target[job]] - table.tput[col]
    chosen = []
    # Per server: the whole job that lost most, the lightest, the heaviest; on small clusters up to
    # MOBILES_PER_SERVER, the others by what they lost.
    server = entries.server[whole]
    for sort_keys in ((-footprint, -lost), (footprint,), (-footprint,)):
        order = np.lexsort((*sort_keys, server))
        first = np.unique(server[order], return_index=True)[1]
        chosen.append(whole[order[first]])
    if current.whole_value.size <= ALL_MOBILE:
        order = np.lexsort((-footprint, -lost, server))
        rank = np.arange(order.size) - np.searchsorted(server[order], server[order])
        chosen.append(whole[order[rank < MOBILES_PER_SERVER]])
    mobile_whole = np.unique(np.concatenate(chosen))
    # Their servers' tables without them: the programme once more, one virtual server per mobile (kept from
    # earlier rounds while the server's whole jobs are the same).
    host = entries.server[mobile_whole]
    signature = _signatures(entries, whole, current.whole_value.size)
    keys = [(int(h), int(j), signature[int(h)]) for h, j in zip(host, entries.job[mobile_whole], strict=True)]
    missing = np.array([k not in cache for k in keys], dtype=bool)
    if missing.any():
        found = _without(table, units, entries, whole, mobile_whole, mobile_whole[missing])
        for key, found_table in zip((k for k, m in zip(keys, missing, strict=True) if m), found, strict=True):
            cache[key] = found_table
    shape = current.final.shape[1:]
    without = np.stack([cache[k] for k in keys]) if keys else np.zeros((0, *shape))
    # Piece mobiles: 1, 2, 4, ... GPUs and all the GPUs of every split job's entry; their server's own table, with
    # the room those GPUs free.
    split = np.flatnonzero((spans[entries.job] > 1) & here)
    large = current.whole_value.size > ALL_PAIRS
    if large:
        # On large clusters per server the split jobs' entries that lost most against their targets (each
        # judged pair costs; large clusters need less repair), one GPU or all of the entry.
        lost = (table.tput[target[entries.job[split]]] - table.tput[current.column[entries.job[split]]])
        order = np.lexsort((-lost, entries.server[split]))
        rank = np.arange(order.size) - np.searchsorted(entries.server[split][order], entries.server[split][order])
        split = np.sort(split[order[rank < LARGE_PIECES]])
    have = entries.gpus[split]
    powers = 2 ** np.arange(int(have.max(initial=1)).bit_length())
    if large:
        powers = powers[:1]
    sizes: list[tuple[np.ndarray, int | None]] = [(split[have >= size], int(size)) for size in powers]
    sizes.append((split[~np.isin(have, powers)], None))  # all of an entry (when not one of the sizes already)
    pieces = np.concatenate([k for k, _ in sizes])
    take = np.concatenate([np.full(k.size, size) if size else entries.gpus[k] for k, size in sizes]).astype(np.int64)
    p_job = entries.job[pieces]
    p_col = current.column[p_job]
    n = entries.gpus[pieces]
    free_a = units.cpu_units(n, table.cpu[p_col]) - units.cpu_units(n - take, table.cpu[p_col])
    free_b = units.mem_units(n, table.mem[p_col]) - units.mem_units(n - take, table.mem[p_col])
    p_server = entries.server[pieces]
    # Split-off mobiles: 1, 2, 4, ... GPUs (fewer than all) of each whole mobile of several GPUs; the table of its
    # server without the job (the GPUs left there are placed at the job's column when judged).
    g = entries.gpus[mobile_whole]
    off_sizes = 2 ** np.arange(int(g.max(initial=1)).bit_length())
    offs = [(np.flatnonzero(g > size), size) for size in (off_sizes[:1] if large else off_sizes)]
    off = np.concatenate([k for k, _ in offs]).astype(np.int64)
    off_take = np.concatenate([np.full(k.size, size) for k, size in offs]).astype(np.int64)
    kinds = (mobile_whole.size, pieces.size, off.size)
    return _Mobiles(
        server=np.concatenate((host, p_server, host[off])),
        job=np.concatenate((entries.job[mobile_whole], p_job, entries.job[mobile_whole][off])),
        gpus=np.concatenate((g, take, off_take)),
        piece=np.repeat([False, True, False], kinds),
        split_off=np.repeat([False, False, True], kinds),
        table=np.concatenate((np.arange(mobile_whole.size), mobile_whole.size + p_server, off)),
        room_a=np.concatenate((room_a[host], room_a[p_server] + free_a, room_a[host][off])),
        room_b=np.concatenate((room_b[host], room_b[p_server] + free_b, room_b[host][off])),
        tables=np.concatenate((without, current.final)),
        **_arrivals(table, units, entries.job[mobile_whole], g, pieces.size + off.size),
    )


def _without(table: ConfigTable, units: Units, entries: Entries, whole: np.ndarray, mobile: np.ndarray,
             need: np.ndarray) -> np.ndarray:
    """Per entry of ``need`` (whole mobiles), the table of its server's other whole jobs (``whole``: the whole
    entries). The programme runs once over each server's whole jobs that are not mobiles (``mobile``), and from
    that table per needed mobile over its server's other mobiles only (one virtual server each)."""
    servers = int(entries.server.max(initial=0)) + 1
    hosts = np.unique(entries.server[need])
    index = np.full(servers, -1, dtype=np.int64)
    index[hosts] = np.arange(hosts.size)
    fixed = whole[(index[entries.server[whole]] >= 0) & ~np.isin(whole, mobile)]
    start = final_tables(table, units, index[entries.server[fixed]], entries.job[fixed], entries.gpus[fixed],
                         hosts.size)
    same = entries.server[mobile][None, :] == entries.server[need][:, None]
    same &= mobile[None, :] != need[:, None]
    virtual, member = np.nonzero(same)
    others = mobile[member]
    return final_tables(table, units, virtual, entries.job[others], entries.gpus[others], need.size,
                        base=start[index[entries.server[need]]])


def _arrivals(table: ConfigTable, units: Units, job: np.ndarray, gpus: np.ndarray, pieces: int
              ) -> dict[str, np.ndarray]:
    """The ``arrive_*`` fields of :class:`_Mobiles` for whole jobs ``job`` with ``gpus`` GPUs, then ``pieces``
    rows that never arrive whole."""
    widest = int((table.start[1:] - table.start[:-1]).max(initial=1))
    cols, valid = _class_columns(table, job, widest)
    n = gpus[:, None]
    pad = np.zeros((pieces, widest), dtype=np.int64)
    return {"arrive_a": np.concatenate((units.cpu_units(n, table.cpu[cols]), pad)),
            "arrive_b": np.concatenate((units.mem_units(n, table.mem[cols]), pad)),
            "arrive_value": np.concatenate((np.where(valid, table.tput[cols], -np.inf),
                                            np.full((pieces, widest), -np.inf)))}


@dataclass
class _Memory:
    """What one search keeps from round to round: each whole mobile's table without it (by server, job and the
    server's whole jobs), the gains of the last round's swaps of two whole jobs (by their two jobs), valid
    while neither of their servers changes, and every job's aims."""

    tables: dict[tuple[int, int, bytes], np.ndarray] = field(default_factory=dict)
    pair_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pair_gains: np.ndarray = field(default_factory=lambda: np.zeros(0))
    touched: np.ndarray | None = None  # the servers the last round changed
    aims: np.ndarray | None = None  # _aims of the search's targets


def _signatures(entries: Entries, whole: np.ndarray, servers: int) -> list[bytes]:
    """Per server, its whole entries (job, GPUs) as bytes: equal exactly when the server's whole jobs are."""
    order = whole[np.lexsort((entries.job[whole], entries.server[whole]))]
    bounds = np.searchsorted(entries.server[order], np.arange(servers + 1))
    pairs = np.column_stack((entries.job[order], entries.gpus[order]))
    return [pairs[bounds[k]:bounds[k + 1]].tobytes() for k in range(servers)]


def _best_swaps(table: ConfigTable, units: Units, current: _State, target: np.ndarray, memory: _Memory
                ) -> tuple[list[tuple[int, int, int, int, int]], list[tuple[int, int]]]:
    """The round's swaps, (server, job, other server, other job, GPUs), best gains first, and the new columns
    of the split jobs they change, (job, column); no two touch a server in common."""
    servers = current.whole_value.size
    pair_s, pair_t = _partners(table, units, current, _server_loss(table, current, target))
    if pair_s.size == 0:
        return [], []
    involved = np.zeros(servers, dtype=bool)
    involved[pair_s] = involved[pair_t] = True
    mobiles = _mobiles(table, units, current, target, involved, memory.tables)
    # Mobiles by server; every pair of servers tried, every pair of their mobiles of equal GPUs.
    by = np.argsort(mobiles.server, kind="stable")
    first = np.searchsorted(mobiles.server[by], np.arange(servers + 1))
    count = first[1:] - first[:-1]
    size = count[pair_s] * count[pair_t]
    pair = np.repeat(np.arange(pair_s.size), size)
    within = np.arange(pair.size) - np.repeat(np.cumsum(size) - size, size)
    a = by[first[pair_s[pair]] + within // count[pair_t[pair]]]
    b = by[first[pair_t[pair]] + within % count[pair_t[pair]]]
    keep = (mobiles.gpus[a] == mobiles.gpus[b]) & (mobiles.job[a] != mobiles.job[b])
    a, b = a[keep], b[keep]
    if a.size == 0:
        return [], []
    if memory.aims is None:
        memory.aims = _aims(table, target)
    context = _Context.of(table, units, current, memory.aims)
    old = current.whole_value[mobiles.server[a]] + current.whole_value[mobiles.server[b]]
    gain = np.full(a.size, -np.inf)
    change = np.full(a.size, -1, dtype=np.int64)  # the job whose column changes (-1: none)
    column = np.full(a.size, -1, dtype=np.int64)
    whole = ~mobiles.piece & ~mobiles.split_off
    k = np.flatnonzero(whole[a] & whole[b])
    gain[k] = _whole_gains(mobiles, a[k], b[k], old[k], len(table.instance.jobs), memory)
    # A swap that moves GPUs of a split job may change that job's config as well (its column or its target); one
    # that splits off GPUs of a whole job gives it one config on both servers. Two split-offs never pair.
    for mover, other in ((a, b), (b, a)):
        for kind, judge in ((mobiles.piece, _piece_gain), (mobiles.split_off, _split_gain)):
            k = np.flatnonzero(kind[mover] & ~mobiles.split_off[other])
            if k.size:
                found, col = judge(table, units, context, mobiles, mover[k], other[k], target)
                better = found - old[k] > gain[k]
                gain[k[better]] = found[better] - old[k[better]]
                change[k[better]] = mobiles.job[mover[k[better]]]
                column[k[better]] = col[better]
    gain = np.where(np.isfinite(gain), gain, -np.inf)
    # A swap worth nothing is still made when it gathers split jobs on fewer servers (a split job on fewer
    # servers is easier to raise later): the number of (job, server) entries it removes.
    have = context.have
    gathered = (_leaves(have, mobiles, a) + _leaves(have, mobiles, b) - _enters(have, mobiles, a, b)
                - _enters(have, mobiles, b, a))
    tolerance = _GAIN * (1 + abs(current.total))
    worth = (gain > tolerance) | ((gain >= -tolerance) & (gathered > 0))
    score = np.where(gain > tolerance, gain, 0.0)
    candidates = np.flatnonzero(worth)
    # A split job whose column changes changes its other servers too.
    recolumned = (change >= 0) & (column != current.column[np.maximum(change, 0)])
    order = candidates[np.lexsort((-gathered[candidates], -score[candidates]))]
    swaps: list[tuple[int, int, int, int, int]] = []
    changes: list[tuple[int, int]] = []
    for k in _disjoint(order, mobiles.server[a], mobiles.server[b], recolumned, change, have).tolist():
        swaps.append((int(mobiles.server[a[k]]), int(mobiles.job[a[k]]), int(mobiles.server[b[k]]),
                      int(mobiles.job[b[k]]), int(mobiles.gpus[a[k]])))
        if change[k] >= 0:
            changes.append((int(change[k]), int(column[k])))
    return swaps, changes


@njit(cache=True)
def _disjoint(order: np.ndarray, s: np.ndarray, t: np.ndarray, recolumned: np.ndarray, change: np.ndarray,
              have: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The swaps taken, greedily in ``order``: each unless it touches a server a swap taken touches (its two
    servers, and every server of the split job whose column it changes), until every server is touched."""
    servers = have.shape[1]
    done = np.zeros(servers, dtype=np.bool_)
    taken = np.empty(order.size, dtype=np.int64)
    count, left = 0, servers
    for k in order:
        clash = done[s[k]] or done[t[k]]
        if recolumned[k]:
            for u in range(servers):
                clash = clash or (have[change[k], u] > 0 and done[u])
        if clash:
            continue
        for u in range(servers):
            if u == s[k] or u == t[k] or (recolumned[k] and have[change[k], u] > 0):
                left -= 0 if done[u] else 1
                done[u] = True
        taken[count] = k
        count += 1
        if left == 0:
            break
    return taken[:count]


def _leaves(have: np.ndarray, mobiles: _Mobiles, mover: np.ndarray) -> np.ndarray:
    """Per mobile, 1 when it takes all its job's GPUs off its server (a split job's entry goes)."""
    return (mobiles.piece[mover] & (mobiles.gpus[mover] == have[mobiles.job[mover], mobiles.server[mover]])
            ).astype(np.int64)


def _enters(have: np.ndarray, mobiles: _Mobiles, mover: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per pair, 1 when mobile ``mover[k]`` is a split job's GPUs arriving where that job has none."""
    return (mobiles.piece[mover] & (have[mobiles.job[mover], mobiles.server[other]] == 0)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class _Context:
    """What every judgement of a round reads: GPUs and entry of each job on each server, the room the split
    jobs leave per server, and for each entry of a split job and each of the job's aims (:func:`_aims`) the
    change in its server's whole value if the job took that column (and whether it does not fit there)."""

    have: np.ndarray  # (jobs, servers) GPUs
    entry: np.ndarray  # (jobs, servers) entry index, -1 where none
    room_a: np.ndarray
    room_b: np.ndarray
    current: _State
    aims: np.ndarray  # (jobs, aims): columns a split job may move to besides its own
    piece_delta: np.ndarray  # (entries, aims): per entry of a split job (0 where blocked)
    piece_blocked: np.ndarray  # (entries, aims): the aim does not fit that entry's server
    job_delta: np.ndarray  # (jobs, aims): the sums over its entries
    job_blocked: np.ndarray  # (jobs, aims): on how many of its servers the aim does not fit

    @classmethod
    def of(cls, table: ConfigTable, units: Units, current: _State, aims: np.ndarray) -> _Context:
        entries = current.entries
        jobs, servers = len(table.instance.jobs), current.whole_value.size
        # int32: half the memory of these (jobs, servers) grids, which are made afresh every round (at 1024 GPUs
        # two 1 MB int64 grids cost 0.8 ms, mostly fresh pages; two 0.5 MB int32 grids 0.03 ms).
        have = np.zeros((jobs, servers), dtype=np.int32)
        have[entries.job, entries.server] = entries.gpus
        entry = np.full((jobs, servers), -1, dtype=np.int32)
        entry[entries.job, entries.server] = np.arange(entries.job.size)
        room_a = units.cpu_per_server - current.split_a
        room_b = units.mem_per_server - current.split_b
        piece_delta = np.zeros((entries.job.size, aims.shape[1]))
        piece_blocked = np.zeros((entries.job.size, aims.shape[1]), dtype=bool)
        split = np.flatnonzero(current.spans[entries.job] > 1)
        job = entries.job[split]
        now, aim = current.column[job][:, None], aims[job]
        n, server = entries.gpus[split][:, None], entries.server[split][:, None]
        left_a = room_a[server] + units.cpu_units(n, table.cpu[now]) - units.cpu_units(n, table.cpu[aim])
        left_b = room_b[server] + units.mem_units(n, table.mem[now]) - units.mem_units(n, table.mem[aim])
        read = _read(current.final, np.broadcast_to(server, aim.shape), left_a, left_b)
        piece_blocked[split] = ~np.isfinite(read)
        piece_delta[split] = np.where(piece_blocked[split], 0.0, read - current.whole_value[server])
        job_delta = np.zeros((jobs, aims.shape[1]))
        job_blocked = np.zeros((jobs, aims.shape[1]), dtype=np.int64)
        np.add.at(job_delta, entries.job, piece_delta)
        np.add.at(job_blocked, entries.job, piece_blocked.astype(np.int64))
        return cls(have, entry, room_a, room_b, current, aims, piece_delta, piece_blocked, job_delta, job_blocked)


def _aims(table: ConfigTable, target: np.ndarray) -> np.ndarray:
    """Per job, the columns a swap may move it to besides its own: its target, and its best column below the
    target (no more CPUs or memory, less throughput; the target again when there is none), which often fits
    where the target does not."""
    klass = table.klass
    counts = table.start[klass + 1] - table.start[klass]
    job = np.repeat(np.arange(klass.size), counts)
    pair = table.start[klass][job] + (np.arange(job.size) - np.repeat(np.cumsum(counts) - counts, counts))
    aim = target[job]
    below = ((table.cpu[pair] <= table.cpu[aim] * (1 + 1e-9)) & (table.mem[pair] <= table.mem[aim] * (1 + 1e-9))
             & (table.tput[pair] < table.tput[aim] * (1 - 1e-9)))
    score = np.where(below, table.tput[pair], -np.inf)
    first = group_first(np.r_[0, np.cumsum(counts)], (-score,))
    second = np.where(np.isfinite(score[first]), pair[first], target)
    return np.column_stack((target, second))


def _class_columns(table: ConfigTable, job: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per job its class's columns, padded to ``width`` (padding repeats the first; ``valid`` marks the real)."""
    klass = table.klass[job]
    start, stop = table.start[klass], table.start[klass + 1]
    cols = start[:, None] + np.arange(width)[None, :]
    valid = cols < stop[:, None]
    return np.where(valid, cols, start[:, None]), valid


def _read(tables: np.ndarray, which: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``tables[which, a, b]``, ``-inf`` where ``a`` or ``b`` is negative (both are at most the table's size)."""
    ok = (a >= 0) & (b >= 0)
    read = tables[which, np.maximum(a, 0), np.maximum(b, 0)]
    return np.where(ok, read, -np.inf)


def _arrive_whole(mobiles: _Mobiles, tables: np.ndarray, which: np.ndarray, room_a: np.ndarray,
                  room_b: np.ndarray, come: np.ndarray) -> np.ndarray:
    """The best value of ``tables[which]`` (whole jobs of a server) plus whole mobile ``come`` at its best
    column, in the room ``room_a``, ``room_b`` (shape ``(pairs,)`` or ``(pairs, choices)``)."""
    shape = (which.size, room_a[0].size if room_a.size else 1)  # pairs, choices
    value = _best_arrival(tables, which, room_a.reshape(shape), room_b.reshape(shape), mobiles.arrive_a,
                          mobiles.arrive_b, mobiles.arrive_value, come)
    return value.reshape(room_a.shape)


@njit(cache=True)
def _best_arrival(tables: np.ndarray, which: np.ndarray, room_a: np.ndarray, room_b: np.ndarray,
                  arrive_a: np.ndarray, arrive_b: np.ndarray, arrive_value: np.ndarray, come: np.ndarray
                  ) -> np.ndarray:
    """Per pair ``k`` and choice ``c``: the most over mobile ``come[k]``'s columns of ``tables[which[k]]`` in the
    room left once it takes the column, plus the column's value (``-inf`` where none fits)."""
    value = np.full(room_a.shape, -np.inf)
    for k in range(room_a.shape[0]):
        table, m = tables[which[k]], come[k]
        for c in range(room_a.shape[1]):
            for col in range(arrive_a.shape[1]):
                a, b = room_a[k, c] - arrive_a[m, col], room_b[k, c] - arrive_b[m, col]
                read = table[a, b] if a >= 0 and b >= 0 else -np.inf
                value[k, c] = max(value[k, c], read + arrive_value[m, col])
    return value


def _whole_gains(mobiles: _Mobiles, a: np.ndarray, b: np.ndarray, old: np.ndarray, jobs: int,
                 memory: _Memory) -> np.ndarray:
    """The gains of swapping whole mobiles ``a[k]`` and ``b[k]``: those of the last round where neither server
    changed since (each judged once), the others judged now; kept for the next round."""
    low, high = np.minimum(mobiles.job[a], mobiles.job[b]), np.maximum(mobiles.job[a], mobiles.job[b])
    keys = low * jobs + high
    gain = np.full(a.size, np.nan)
    if memory.touched is not None and memory.pair_keys.size:
        fresh = np.flatnonzero(~(memory.touched[mobiles.server[a]] | memory.touched[mobiles.server[b]]))
        at = np.minimum(np.searchsorted(memory.pair_keys, keys[fresh]), memory.pair_keys.size - 1)
        hit = memory.pair_keys[at] == keys[fresh]
        gain[fresh[hit]] = memory.pair_gains[at[hit]]
    judge = np.flatnonzero(np.isnan(gain))
    gain[judge] = (_receive(mobiles, a[judge], b[judge]) + _receive(mobiles, b[judge], a[judge])) - old[judge]
    order = np.argsort(keys, kind="stable")
    memory.pair_keys, memory.pair_gains = keys[order], gain[order]
    return gain


def _receive(mobiles: _Mobiles, leave: np.ndarray, come: np.ndarray) -> np.ndarray:
    """Per pair, the value of the whole jobs on mobile ``leave[k]``'s server once it leaves and mobile
    ``come[k]`` arrives, both whole jobs (``-inf`` where it does not fit)."""
    return _arrive_whole(mobiles, mobiles.tables, mobiles.table[leave], mobiles.room_a[leave],
                         mobiles.room_b[leave], come)


def _piece_gain(table: ConfigTable, units: Units, context: _Context, mobiles: _Mobiles, mover: np.ndarray,
                other: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, when one GPU of split job ``z`` (mobile ``mover[k]``, on server ``s``) swaps with mobile
    ``other[k]`` (on ``t``) and ``z`` takes its column or one of its aims ``c'``: the new whole values of
    ``s`` and ``t`` plus the change of ``z``'s throughput and of the whole values on its other servers; and
    that column (:func:`_piece_totals`)."""
    current = context.current
    total = np.empty(mover.size)
    column = np.empty(mover.size, dtype=np.int64)
    _piece_totals(mover, other, mobiles.job, mobiles.server, mobiles.gpus, mobiles.piece, mobiles.table,
                  mobiles.room_a, mobiles.room_b, mobiles.tables, mobiles.arrive_a, mobiles.arrive_b,
                  mobiles.arrive_value, current.column, context.aims, context.entry, context.have, context.room_a,
                  context.room_b, context.job_delta, context.piece_delta, context.job_blocked,
                  context.piece_blocked, current.final, table.cpu, table.mem, table.tput, units.cpu, units.mem,
                  total, column)
    return total, column


@njit(cache=True)
def _piece_totals(mover: np.ndarray, other: np.ndarray, job: np.ndarray, server: np.ndarray, gpus: np.ndarray,
                  piece: np.ndarray, which: np.ndarray, room_a: np.ndarray, room_b: np.ndarray, tables: np.ndarray,
                  arrive_a: np.ndarray, arrive_b: np.ndarray, arrive_value: np.ndarray, column: np.ndarray,
                  aims: np.ndarray, entry: np.ndarray, have: np.ndarray, free_a: np.ndarray, free_b: np.ndarray,
                  job_delta: np.ndarray, piece_delta: np.ndarray, job_blocked: np.ndarray,
                  piece_blocked: np.ndarray, final: np.ndarray, cpu: np.ndarray, mem: np.ndarray,
                  tput: np.ndarray, unit_cpu: float, unit_mem: float, total: np.ndarray, chosen: np.ndarray
                  ) -> None:  # pragma: no cover - compiled
    """:func:`_piece_gain` pair by pair (mobiles' fields, the context's, the round's tables, the table's columns),
    into ``total`` and ``chosen``. Choice 0 is ``z``'s column, choice ``1 + i`` its aim ``i`` (all its columns:
    no better on the rounds tried, and 20 times slower); the first best choice is taken."""
    for k in range(mover.size):
        z, s, o = job[mover[k]], server[mover[k]], other[k]
        now = column[z]
        k_s, k_t = entry[z, s], entry[z, server[o]]
        n, n_s, m_t = gpus[mover[k]], have[z, s], have[z, server[o]]
        for c in range(1 + aims.shape[1]):
            col = now if c == 0 else aims[z, c - 1]
            # z's other servers at the aim: its total change less that of s and t (t's when z is there already).
            elsewhere = 0.0
            if c > 0:
                blocked = job_blocked[z, c - 1] - piece_blocked[k_s, c - 1]
                delta = job_delta[z, c - 1] - piece_delta[k_s, c - 1]
                if k_t >= 0:
                    blocked -= piece_blocked[k_t, c - 1]
                    delta -= piece_delta[k_t, c - 1]
                elsewhere = -np.inf if blocked > 0 else delta
            # s: z keeps n_s - n GPUs at col; the other mobile arrives.
            base_a = (free_a[s] + units_of(n_s, cpu[now], unit_cpu) - units_of(n_s - n, cpu[col], unit_cpu))
            base_b = (free_b[s] + units_of(n_s, mem[now], unit_mem) - units_of(n_s - n, mem[col], unit_mem))
            if piece[o]:
                w = job[o]
                there = have[w, s]
                add_a = units_of(there + gpus[o], cpu[column[w]], unit_cpu) - units_of(there, cpu[column[w]], unit_cpu)
                add_b = units_of(there + gpus[o], mem[column[w]], unit_mem) - units_of(there, mem[column[w]], unit_mem)
                value_s = _cell(final, s, base_a - add_a, base_b - add_b)
            else:
                value_s = -np.inf
                for a in range(arrive_a.shape[1]):
                    value_s = max(value_s, _cell(final, s, base_a - arrive_a[o, a], base_b - arrive_b[o, a])
                                  + arrive_value[o, a])
            # t: z has m_t GPUs there at its column, m_t + n at col after; the other mobile has left.
            need_a = units_of(m_t + n, cpu[col], unit_cpu) - units_of(m_t, cpu[now], unit_cpu)
            need_b = units_of(m_t + n, mem[col], unit_mem) - units_of(m_t, mem[now], unit_mem)
            value_t = _cell(tables, which[o], room_a[o] - need_a, room_b[o] - need_b)
            value = tput[col] - tput[now] + elsewhere + value_s + value_t
            if c == 0 or value > total[k]:
                total[k], chosen[k] = value, col


@njit(cache=True)
def _cell(tables: np.ndarray, which: int, a: int, b: int) -> float:  # pragma: no cover - compiled
    """``tables[which, a, b]``, ``-inf`` where ``a`` or ``b`` is negative (:func:`_read` of one cell; both are at
    most the table's size, as there: numba does not check the index)."""
    return tables[which, a, b] if a >= 0 and b >= 0 else -np.inf


def _arrive(table: ConfigTable, units: Units, context: _Context, mobiles: _Mobiles, tables: np.ndarray,
            which: np.ndarray, server: np.ndarray, room_a: np.ndarray, room_b: np.ndarray, come: np.ndarray
            ) -> np.ndarray:
    """Per pair and choice (``room_*`` of shape ``(pairs, choices)``), the value of ``tables[which[k]]`` (a table
    of ``server[k]``) in the room left once mobile ``come[k]`` arrives there: a whole job at its best column, or
    GPUs of a split job at its column."""
    value = np.full(room_a.shape, -np.inf)
    whole = ~mobiles.piece[come]
    if whole.any():
        value[whole] = _arrive_whole(mobiles, tables, which[whole], room_a[whole], room_b[whole], come[whole])
    piece = ~whole
    if piece.any():
        w = mobiles.job[come[piece]]
        col_w = context.current.column[w]
        there = context.have[w, server[piece]]
        moved = mobiles.gpus[come[piece]]
        add_a = units.cpu_units(there + moved, table.cpu[col_w]) - units.cpu_units(there, table.cpu[col_w])
        add_b = units.mem_units(there + moved, table.mem[col_w]) - units.mem_units(there, table.mem[col_w])
        value[piece] = _read(tables, np.broadcast_to(which[piece][:, None], room_a[piece].shape),
                             room_a[piece] - add_a[:, None], room_b[piece] - add_b[:, None])
    return value


def _split_gain(table: ConfigTable, units: Units, context: _Context, mobiles: _Mobiles, mover: np.ndarray,
                other: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, when ``n`` GPUs of whole job ``x`` (split-off mobile ``mover[k]``, on ``s``) swap with mobile
    ``other[k]`` (on ``t``) and ``x``, split now, takes its column or one of its aims ``c'`` on both: the new whole
    values of ``s`` and ``t`` plus ``x``'s throughput (no longer a whole job's); and that column."""
    current = context.current
    x = mobiles.job[mover]
    now = current.column[x][:, None]
    cols = np.concatenate((now, context.aims[x]), axis=1)
    n = mobiles.gpus[mover][:, None]
    keep = context.have[x, mobiles.server[mover]][:, None] - n
    # s: the table without x, x's other GPUs at c', and the other mobile arrives.
    base_a = mobiles.room_a[mover][:, None] - units.cpu_units(keep, table.cpu[cols])
    base_b = mobiles.room_b[mover][:, None] - units.mem_units(keep, table.mem[cols])
    value_s = _arrive(table, units, context, mobiles, mobiles.tables, mobiles.table[mover], mobiles.server[mover],
                      base_a, base_b, other)
    # t: without the other mobile, x's n GPUs at c'.
    value_t = _read(mobiles.tables, np.broadcast_to(mobiles.table[other][:, None], cols.shape),
                    mobiles.room_a[other][:, None] - units.cpu_units(n, table.cpu[cols]),
                    mobiles.room_b[other][:, None] - units.mem_units(n, table.mem[cols]))
    total = value_s + value_t + table.tput[cols]
    best = total.argmax(axis=1)
    rows = np.arange(x.size)
    return total[rows, best], cols[rows, best]


def _swapped(entries: Entries, swaps: list[tuple[int, int, int, int, int]]) -> Entries:
    """``entries`` with each swap made: ``gpus`` GPUs of each job move to the other's server; merged again."""
    job, server, gpus = [entries.job], [entries.server], [entries.gpus]
    for s, x, t, y, n in swaps:
        job.append(np.array([x, x, y, y]))
        server.append(np.array([s, t, t, s]))
        gpus.append(np.array([-n, n, -n, n]))
    merged = merge_entries(np.concatenate(job), np.concatenate(server), np.concatenate(gpus))
    keep = merged.gpus > 0
    return Entries(merged.job[keep], merged.server[keep], merged.gpus[keep])
