"""A fast realizable round: the ideal ILP's configs placed on servers, repaired, then improved by local search.

1. Every job aims at its ideal config (the column of its class with the ideal ILP's per-GPU CPU and memory).
2. Jobs are placed largest first: a job that fits whole goes to the server with the fewest GPUs left that
   holds it at its aim (else at its best config that fits there); a job in pieces takes GPUs from the servers
   with the most free GPUs, at the best config every one of them holds. When nothing fits, the jobs already
   on the chosen servers drop to their cheapest configs (each at most the GPU-proportional share, so any
   server's GPUs can always be filled), which always makes room.
3. Each server then picks the configs of the jobs wholly on it exactly (a multiple-choice knapsack on its
   CPUs and memory, :func:`best_configs`), and a local search moves and swaps jobs between servers while the
   two servers' best configs gain.

The result is a :class:`Placement`: a column per job and GPUs per job per server, the form the restricted
master takes as its starting solution.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from synergy_opt.instance import Allocation, Cluster, RoundInstance
from synergy_opt.joint.model import ItemColumns
from synergy_opt.joint.pricing import undominated

_FIT = 1 + 1e-9
# Pairs of servers the local search tries per server that lost value against its jobs' aims.
PARTNERS = 24


@dataclass
class Placement:
    """A realizable round in the model's terms: the column of each job and its GPUs on each server."""

    column: np.ndarray  # per job (instance order)
    on: list[dict[int, int]]  # per job: server -> GPUs

    def loads(self, items: ItemColumns, servers: int) -> np.ndarray:
        """``(servers, item types)``: the items each server holds (a pattern per server)."""
        loads = np.zeros((servers, items.item_size.size), dtype=np.int64)
        for j, spread in enumerate(self.on):
            col = self.column[j]
            t = items.col_item[col]
            for server, gpus in spread.items():
                loads[server, t] += 1 if items.columns.whole[col] else gpus
        return loads


class _Jobs:
    """Per job (instance order): class, GPUs, and its columns' use and weight."""

    def __init__(self, items: ItemColumns, num_jobs: int) -> None:
        cols = items.columns
        self.items = items
        offsets = np.concatenate([[0], np.cumsum(cols.count)])
        self.job_class = np.empty(num_jobs, dtype=np.int64)
        for q in range(cols.count.size):
            self.job_class[cols.class_jobs[offsets[q]:offsets[q + 1]]] = q
        starts = np.searchsorted(cols.cls, np.arange(cols.count.size))
        ends = np.searchsorted(cols.cls, np.arange(cols.count.size), "right")
        self.class_cols = [np.arange(a, b) for a, b in zip(starts, ends, strict=True)]
        self.gpus = cols.class_gpus[self.job_class]

    def columns(self, j: int, whole: bool | None = None) -> np.ndarray:
        cols = self.class_cols[self.job_class[j]]
        if whole is None:
            return cols
        return cols[self.items.columns.whole[cols] == whole]


def place(items: ItemColumns, cluster: Cluster, aim_cpu: np.ndarray, aim_mem: np.ndarray, aim_value: np.ndarray,
          deadline: float | None = None) -> Placement | None:
    """A realizable round near the aims (per job: per-GPU CPU and GB, and the value it would have there); None
    when this greedy cannot place every job's GPUs (each job whole where it must be)."""
    jobs = _Jobs(items, aim_cpu.size)
    state = _Servers(items, jobs, cluster)
    cols = items.columns
    big_g = cluster.gpus_per_server
    capacity = state.capacity
    per_gpu = state.per_gpu

    def aim_of(j: int, options: np.ndarray) -> int:
        # The aim's column, else the best one no larger than the aim, else the cheapest.
        c, m = aim_cpu[j], aim_mem[j]
        below = options[(cols.cpu[options] <= c * _FIT) & (cols.mem[options] <= m * _FIT)]
        if below.size:
            return int(below[np.argmax(items.weight[below])])
        return int(options[np.argmin(cols.cpu[options] / capacity[0] + cols.mem[options] / capacity[1])])

    order = np.lexsort((-(aim_cpu / capacity[0] + aim_mem / capacity[1]), -jobs.gpus))
    for j in order:
        g = int(jobs.gpus[j])
        whole_cols, piece_cols = jobs.columns(j, True), jobs.columns(j, False)
        room = np.flatnonzero(state.free_gpus >= g)
        if room.size and (whole_cols.size or g <= big_g):
            # Wholly on one server (a job in pieces may sit on one server too): any column of its class.
            aim = aim_of(j, jobs.columns(j))
            need = g * per_gpu[aim]
            # A server that holds the aim, whose CPU and memory would run least ahead of its GPUs (keeps
            # servers balanced; largest jobs first, so sizes that divide G never fragment), fewest GPUs left.
            gpu_share = (big_g - state.free_gpus[room] + g) / big_g
            after = (state.used[room] + need) / capacity
            ahead = np.max(after - gpu_share[:, None], axis=1)
            misfit = np.any(after > 1, axis=1)
            for server in room[np.lexsort((state.free_gpus[room], np.round(ahead, 9), misfit))]:
                if state.add(int(server), j, aim):
                    break
            else:
                return None
            continue
        # In pieces over several servers: those with the most free GPUs.
        if state.free_gpus.sum() < g or not piece_cols.size:
            return None
        spread, left = {}, g
        for server in np.argsort(-state.free_gpus, kind="stable"):
            take = int(min(state.free_gpus[server], left))
            if take:
                spread[int(server)] = take
                left -= take
            if not left:
                break
        if not state.spread(j, spread, piece_cols):
            return None
    placement = Placement(state.column, state.on)
    state.improve(aim_value, deadline)
    return placement


def placement_of(items: ItemColumns, instance: RoundInstance, allocation: Allocation) -> Placement | None:
    """A realizable ``allocation`` of ``instance`` in the model's terms, or None when a job's config is no column
    (or its per-GPU share differs between its servers, or it is not placed).

    Each job takes the column of its class with its per-GPU CPUs and memory (a whole column when it sits on one
    server and its class has one, else in pieces); a config that is no column (dominated or below the grid) takes
    the best column within it, which asks for no more on any server."""
    jobs = _Jobs(items, len(instance.jobs))
    cols = items.columns
    column = np.full(len(instance.jobs), -1, dtype=np.int64)
    on: list[dict[int, int]] = []
    for j, job in enumerate(instance.jobs):
        parts = allocation.jobs.get(job.id, ())
        if not parts or sum(p.gpus for p in parts) != job.gpus:
            return None
        per_gpu = np.array([(p.cpus / p.gpus, p.mem_gb / p.gpus) for p in parts])
        if np.any(np.abs(per_gpu - per_gpu[0]) > 1e-9 * (1 + np.abs(per_gpu[0]))):
            return None
        spread: dict[int, int] = {}
        for p in parts:
            spread[p.server] = spread.get(p.server, 0) + p.gpus
        options = jobs.columns(j, True) if len(spread) == 1 and jobs.columns(j, True).size else jobs.columns(j, False)
        within = options[(cols.cpu[options] <= per_gpu[0, 0] * _FIT) & (cols.mem[options] <= per_gpu[0, 1] * _FIT)]
        if not within.size:
            return None
        column[j] = within[np.argmax(items.weight[within])]
        on.append(spread)
    return Placement(column, on)


def improve(items: ItemColumns, cluster: Cluster, placement: Placement, aim_value: np.ndarray,
            deadline: float | None = None) -> Placement:
    """``placement`` improved by the local search of :func:`place`: each server's jobs on their best configs
    together, then moves and swaps between servers while a pair gains (a realizable round stays one)."""
    jobs = _Jobs(items, placement.column.size)
    state = _Servers(items, jobs, cluster)
    for j, spread in enumerate(placement.on):
        state.put(j, int(placement.column[j]), spread)
    state.improve(aim_value, deadline)
    return Placement(state.column, state.on)


class _Servers:
    """Servers being filled: the jobs wholly on each, the use of jobs spread over several, free GPUs."""

    def __init__(self, items: ItemColumns, jobs: _Jobs, cluster: Cluster) -> None:
        cols = items.columns
        self.items, self.jobs = items, jobs
        servers = cluster.servers
        self.capacity = np.array([cluster.cpus_per_server, cluster.mem_gb_per_server]) * _FIT
        self.per_gpu = np.stack([cols.cpu, cols.mem], axis=1)
        self.free_gpus = np.full(servers, cluster.gpus_per_server, dtype=np.int64)
        self.used = np.zeros((servers, 2))  # CPUs and GB in use
        self.fixed = np.zeros((servers, 2))  # of that, by jobs spread over several servers
        self.piece_gpus = np.zeros(servers, dtype=np.int64)  # their GPUs
        self.gpus_per_server = cluster.gpus_per_server
        self.resident: list[list[int]] = [[] for _ in range(servers)]
        self.value = np.zeros(servers)  # weight of the resident jobs' columns
        self.column = np.full(jobs.gpus.size, -1, dtype=np.int64)
        self.on: list[dict[int, int]] = [{} for _ in range(jobs.gpus.size)]

    def best(self, server: int, members: list[int]) -> tuple[float, list[int]] | None:
        """The best columns of ``members`` all wholly on ``server`` (any column of their classes)."""
        room = self.capacity - self.fixed[server]
        if np.any(room < 0):
            return None
        if not members:
            return 0.0, []
        options = [self.jobs.columns(j) for j in members]
        flat = np.concatenate(options)
        use = np.repeat(self.jobs.gpus[members], [o.size for o in options])[:, None] * self.per_gpu[flat]
        bounds = np.cumsum([0] + [o.size for o in options])
        local = [np.arange(a, b) for a, b in itertools.pairwise(bounds)]
        found = best_configs(local, use, self.items.weight[flat], room)
        if found is None:
            return None
        return found[0], [int(flat[p]) for p in found[1]]

    def _set(self, server: int, members: list[int], found: tuple[float, list[int]]) -> None:
        self.resident[server] = members
        self.value[server] = found[0]
        self.column[members] = found[1]
        gpus = self.jobs.gpus[members]
        self.used[server] = self.fixed[server] + (gpus[:, None] * self.per_gpu[found[1]]).sum(axis=0)
        self.free_gpus[server] = self.gpus_per_server - self.piece_gpus[server] - int(gpus.sum())
        for j in members:
            self.on[j] = {server: int(self.jobs.gpus[j])}

    def put(self, j: int, col: int, spread: dict[int, int]) -> None:
        """Job ``j`` where it is, at column ``col``: a resident of its server when it uses one, else fixed use
        on each server it spans."""
        self.column[j] = col
        self.on[j] = dict(spread)
        for server, n in spread.items():
            use = n * self.per_gpu[col]
            self.used[server] += use
            self.free_gpus[server] -= n
            if len(spread) == 1:
                self.resident[server].append(j)
                self.value[server] += self.items.weight[col]
            else:
                self.fixed[server] += use
                self.piece_gpus[server] += n

    def add(self, server: int, j: int, aim: int) -> bool:
        """Put job ``j`` wholly on ``server``: at column ``aim`` if it fits, else with the server's best columns."""
        g = int(self.jobs.gpus[j])
        if np.all(self.used[server] + g * self.per_gpu[aim] <= self.capacity):
            self.resident[server].append(j)
            self.value[server] += self.items.weight[aim]
            self.column[j] = aim
            self.on[j] = {server: g}
            self.used[server] += g * self.per_gpu[aim]
            self.free_gpus[server] -= g
            return True
        members = [*self.resident[server], j]
        found = self.best(server, members)
        if found is None:
            return False
        self._set(server, members, found)
        return True

    def spread(self, j: int, spread: dict[int, int], options: np.ndarray) -> bool:
        """Put job ``j`` in pieces on ``spread``: the best column that fits every server there, else one within
        the GPU-proportional share with the residents of those servers reconfigured around it."""
        ok = np.ones(options.size, dtype=bool)
        for server, n in spread.items():
            ok &= np.all(self.used[server] + n * self.per_gpu[options] <= self.capacity, axis=1)
        fitting = options[ok]
        if fitting.size:
            col = int(fitting[np.argmax(self.items.weight[fitting])])
        else:  # a column within the GPU-proportional share, with the residents reconfigured around it
            within = options[np.all(self.per_gpu[options] <= self.capacity / self.gpus_per_server, axis=1)]
            if not within.size:
                return False
            col = int(within[np.argmax(self.items.weight[within])])
        for server, n in spread.items():
            self.fixed[server] += n * self.per_gpu[col]
            self.piece_gpus[server] += n
            found = self.best(server, self.resident[server])
            if found is None:
                return False
            self._set(server, list(self.resident[server]), found)
        self.column[j] = col
        self.on[j] = dict(spread)
        return True

    def improve(self, aim_value: np.ndarray, deadline: float | None) -> None:
        """Best columns per server, then moves and swaps of single-server jobs while a pair of servers gains."""
        for server, members in enumerate(self.resident):
            found = self.best(server, list(members))
            if found is not None:
                self._set(server, list(members), found)
        rng = np.random.default_rng(0)
        servers = len(self.resident)
        improved = True
        while improved:
            improved = False
            loss = np.array([aim_value[members].sum() - self.value[s] for s, members in enumerate(self.resident)])
            for a in np.argsort(-loss):
                if loss[a] <= 1e-9:
                    break
                if deadline is not None and time.perf_counter() > deadline:
                    return
                partners = rng.permutation(np.delete(np.arange(servers), a))[:PARTNERS]
                if self._improve_pair(int(a), partners, deadline):
                    improved = True

    def _improve_pair(self, a: int, partners: np.ndarray, deadline: float | None = None) -> bool:
        """The first move or swap of a job on server ``a`` with a partner's that raises the pair's value; False
        when ``deadline`` passes first (one pair's moves are hundreds of per-server programmes: checked per job,
        or a 0.05 s polish ran for seconds)."""
        gpus = self.jobs.gpus
        for b in (int(p) for p in partners):
            for x in list(self.resident[a]):
                if deadline is not None and time.perf_counter() > deadline:
                    return False
                for y in [None, *self.resident[b]]:
                    gx, gy = int(gpus[x]), 0 if y is None else int(gpus[y])
                    if self.free_gpus[b] + gy < gx or self.free_gpus[a] + gx < gy:
                        continue
                    new_a = [k for k in self.resident[a] if k != x] + ([] if y is None else [y])
                    new_b = [k for k in self.resident[b] if k != y] + [x]
                    found_a = self.best(a, new_a)
                    if found_a is None:
                        continue
                    found_b = self.best(b, new_b)
                    if found_b is None or found_a[0] + found_b[0] <= self.value[a] + self.value[b] + 1e-9:
                        continue
                    self._set(a, new_a, found_a)
                    self._set(b, new_b, found_b)
                    return True
        return False


def best_configs(options: list[np.ndarray], use: np.ndarray, weight: np.ndarray, room: np.ndarray
                 ) -> tuple[float, list[int]] | None:
    """The columns of largest total weight, one per job from ``options[k]``, whose ``use`` (CPUs and GB on this
    server, per column) fits ``room``: a dynamic programme over the jobs keeping undominated states.
    None when no choice fits."""
    states_use = np.zeros((1, 2))
    states_val = np.zeros(1)
    history: list[tuple[np.ndarray, np.ndarray]] = []
    for opts in options:
        new_use = (states_use[:, None, :] + use[opts][None, :, :]).reshape(-1, 2)
        new_val = (states_val[:, None] + weight[opts][None, :]).ravel()
        parent = np.repeat(np.arange(states_val.size), opts.size)
        choice = np.tile(opts, states_val.size)
        ok = np.all(new_use <= room, axis=1)
        new_use, new_val, parent, choice = new_use[ok], new_val[ok], parent[ok], choice[ok]
        if not new_val.size:
            return None
        keep = undominated(new_use, new_val)
        states_use, states_val = new_use[keep], new_val[keep]
        history.append((parent[keep], choice[keep]))
    best = int(np.argmax(states_val))
    chosen = []
    for parent, choice in reversed(history):
        chosen.append(int(choice[best]))
        best = int(parent[best])
    return float(states_val.max()), chosen[::-1]


