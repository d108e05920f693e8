"""Branch-and-price across GPU types: the proof that types as an outer layer cannot give (heterogeneous.md, HJ9).

One master over the server loads of every type (:class:`~synergy_opt.joint.master.ColumnGeneration`, one
:class:`~synergy_opt.joint.master.ServerKind` per type): its job columns are every (class, type, config, mode)
of :func:`~synergy_opt.joint.hetero_model.type_shares`, each class's jobs assigned once across the types (HJ2),
each type's items covered by that type's loads (HJ3, HJ4), each type's loads priced exactly by its own pricing
problem. The branch-and-price of :mod:`synergy_opt.joint.branching` runs on it unchanged: its splits on job
columns decide jobs' types and configs, those on counts and patterns each type's loads, and its trees with
targets prove a bound on every solution of the type-free round. Its incumbents: integral LP solutions; at
nodes whose configs are whole, each type's demand placed on that type's servers
(:func:`~synergy_opt.joint.placing.place_demand`); and at each node whose rounded types are new, every type's
jobs at that type's ideal configs (:class:`TypeIdeals`, placed by the residual dive), else at a solution of that
type's round handed in (the type choices'), else at the node's configs. All are read back as allocations by
each type's items handed to its jobs (:func:`~synergy_opt.joint.model.place_items`); they are heuristics only
(every one a valid allocation of its value), the bound is the tree's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from synergy_opt.hetero import HeteroRound, join_allocations
from synergy_opt.ideal.hetero_model import job_classes
from synergy_opt.ideal.model import Objective, columns_of_jobs
from synergy_opt.ideal.solve import solve_ideal
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.joint.branching import BranchOutcome, Strong, target_trees
from synergy_opt.joint.hetero_model import type_shares
from synergy_opt.joint.master import ColumnGeneration, ServerKind
from synergy_opt.joint.model import ItemColumns, JointReductions, place_items
from synergy_opt.joint.placing import place_demand, residual_dive
from synergy_opt.joint.pricing import ItemTypes, PricingDeadline

# Seconds a placement of a node's whole configs may take per type (and a type's ideal ILP, TypeIdeals), and the most
# maximal loads listed to decide it (decomposition.py keeps 0.1 s for one type's trees). 0.1 s was too short when the
# shared machine ran slower (the code of the recorded rows took 4.1 s on 3 x 128 single-GPU seed 2, recorded at
# 2.9 s): placements the trees relied on ran out, and the multi-GPU rounds of seeds 1 and 8 took 329 and 361 nodes
# instead of 103 and 138 (0.3 s and 0.6 s give the same trees on the 20 rounds of seeds 0-9; seeds 10-19 take as
# long as with 0.1 s).
PACK_SECONDS, PACK_LISTED = 0.3, 500
# Seconds the residual dive may take to place a type's ideal configs (those it places take 0.02-0.15 s at 128 GPUs).
IDEAL_DIVE_SECONDS = 0.5
# Up to this many servers of a type, its placements are also sought by CP-SAT (as on one type).
CP_SERVERS = 12
# Splits of each kind compared by strong branching: twice one type's. Across types many jobs are spread nearly
# alike and the most spread is rarely the split that moves the bound: on the 3 x 128-GPU rounds 8 candidates
# closed trees in 2-7x fewer nodes and 1.5-7x less time than 4 (16: no fewer nodes than 8, more time).
STRONG_CANDIDATES = 8
# A split compared this many times is then scored by its mean falls (reliability branching).
RELIABLE = 2


# A type's round solved: its value and allocation (on the type's servers, numbered from 0).
TypePart = tuple[float, Allocation]


@dataclass(frozen=True, eq=False)
class TypedColumns:
    """The job columns of every type in one master's terms: ``items`` (columns ordered by class; each type's item
    types a range, :attr:`kinds`), the type of each column and its place in that type's share, the types' names."""

    items: ItemColumns
    kinds: tuple[ServerKind, ...]
    col_type: np.ndarray  # position in :attr:`names` of each column's type
    col_local: np.ndarray  # the column's place in its type's item columns
    names: tuple[str, ...]
    job_class: np.ndarray  # each job's class (job order)
    objective: Objective = "job"

    def job_columns(self, y: np.ndarray) -> np.ndarray:
        """The column of every job (job order) of integral job columns ``y``."""
        return columns_of_jobs(y, self.items.columns.class_jobs)


@dataclass(frozen=True, eq=False)
class Proof:
    """The search's outcome: the best allocation it found (None: none better than the incumbent given) and its
    value, the bound it proves (valid on every solution whenever it stops) and the tree's figures."""

    allocation: Allocation | None
    value: float
    bound: float
    outcome: BranchOutcome
    rounds: int


def typed_columns(instance: HeteroRound, consolidate: bool, split_penalty: float, objective: Objective,
                  reductions: JointReductions) -> TypedColumns:
    """Every type's share of the type-free joint model (:func:`type_shares`) joined into one master's columns."""
    class_of, representatives, count = job_classes(instance, reductions.merge_identical)
    shares = type_shares(instance, consolidate, split_penalty, objective, reductions, class_of, representatives,
                         count)
    cluster = instance.cluster
    kinds, parts, first = [], [], 0
    for position, (k, items, owner) in enumerate(shares):
        server_type = cluster.types[k]
        kinds.append(ServerKind(ItemTypes(items.item_size, items.item_cpu, items.item_mem, server_type.cluster),
                                first, server_type.servers))
        cols = items.columns
        parts.append((owner[cols.cls], cols.cpu, cols.mem, cols.tput, cols.whole, cols.gpus, items.weight,
                      items.units, items.col_item + first, np.full(cols.cls.size, position),
                      np.arange(cols.cls.size)))
        first += items.item_size.size
    cls, cpu, mem, tput, whole, gpus, weight, units, col_item, col_type, col_local = (
        np.concatenate([part[i] for part in parts]) for i in range(11))
    order = np.lexsort((np.arange(cls.size), cls))
    cls, cpu, mem, tput, whole, gpus, weight, units, col_item, col_type, col_local = (
        a[order] for a in (cls, cpu, mem, tput, whole, gpus, weight, units, col_item, col_type, col_local))
    template = shares[0][1]
    columns = replace(template.columns, cls=cls.astype(np.int64), cpu=cpu, mem=mem, tput=tput, whole=whole,
                      gpus=gpus, floor=np.zeros(count.size), count=count,
                      class_gpus=np.array([instance.jobs[int(r)].gpus for r in representatives]),
                      class_jobs=np.argsort(class_of, kind="stable"))
    joined = ItemColumns(columns, weight, units, col_item.astype(np.int64),
                         *(np.concatenate([getattr(items, name) for _, items, _ in shares])
                           for name in ("item_size", "item_cpu", "item_mem", "supply", "per_server")))
    names = tuple(cluster.types[k].name for k, _, _ in shares)
    return TypedColumns(joined, tuple(kinds), col_type.astype(np.int64), col_local.astype(np.int64), names,
                        np.asarray(class_of, dtype=np.int64), objective)


def decode(instance: HeteroRound, typed: TypedColumns, y: np.ndarray, loads: np.ndarray, count: np.ndarray
           ) -> Allocation:
    """The allocation of integral job columns ``y`` on servers loaded with ``loads`` (over the master's item
    types, each of one type), ``count`` servers each: every type's items handed to the jobs of that type."""
    chosen = typed.job_columns(y)
    per_type = {}
    for position, kind in enumerate(typed.kinds):
        jobs = np.flatnonzero(typed.col_type[chosen] == position)
        if not jobs.size:
            continue
        mine = np.flatnonzero(loads[:, kind.first:kind.stop].any(axis=1))
        per_type[typed.names[position]] = decode_type(instance, typed, position, jobs, chosen[jobs],
                                                      loads[mine, kind.first:kind.stop], count[mine])
    return join_allocations(instance.cluster, per_type)


def decode_type(instance: HeteroRound, typed: TypedColumns, position: int, jobs: np.ndarray, columns: np.ndarray,
                loads: np.ndarray, count: np.ndarray) -> Allocation:
    """The allocation of ``jobs`` on the type at ``position``, each on its column of ``columns``, on that type's
    servers loaded with ``loads`` (over the type's own item types), ``count`` servers each."""
    items, kind = typed.items, typed.kinds[position]
    rows = np.repeat(np.arange(len(loads)), np.rint(count).astype(np.int64))
    z = np.zeros((kind.servers, kind.stop - kind.first), dtype=np.int64)
    z[:rows.size] = loads[rows]
    ids = tuple(instance.jobs[j].id for j in jobs.tolist())
    return place_items(ids, instance.gpus[jobs], items.col_item[columns] - kind.first, items.columns.whole[columns],
                       items.columns.cpu[columns], items.columns.mem[columns], z)


class TypeIdeals:
    """Each type's ideal ILP on the jobs a node puts on it, as job columns: a type's ideal configs are optimal for
    its jobs whenever some placement holds them, and a node whose LP leans to the optimum's types rarely has its
    configs (on the 3 x 128 single-GPU round of seed 2 the optimum's types are a node's rounded types by node 30;
    its configs, a node's only after 745-1,012 nodes). Solved once per type and jobs (nodes' types differ on a
    few jobs; a type's ideal ILP takes about 10 ms at 128 GPUs, within PACK_SECONDS)."""

    def __init__(self, instance: HeteroRound, typed: TypedColumns, mip_gap: float) -> None:
        self.instance = instance
        self.typed = typed
        self.mip_gap = mip_gap
        cols = typed.items.columns
        # The columns of each (class, type, config): one per mode.
        self._columns: dict[tuple[int, int, float, float], list[int]] = {}
        for col, key in enumerate(zip(cols.cls.tolist(), typed.col_type.tolist(), cols.cpu.tolist(),
                                      cols.mem.tolist(), strict=True)):
            self._columns.setdefault(_config_key(*key), []).append(col)
        self._solved: dict[tuple[int, bytes], np.ndarray | None] = {}
        # The types' rounds of the last node types asked (a node asks for each of its types in turn).
        self._rounds: tuple[tuple[str, ...], dict[str, RoundInstance]] | None = None

    def of_type(self, position: int, jobs: np.ndarray, types: list[str], deadline: float | None
                ) -> np.ndarray | None:
        """The columns of the type at ``position``'s ideal configs for ``jobs`` (each job's type in ``types``), or
        None (its ideal ILP found no solution, or a config is no column of one mode)."""
        key = (position, jobs.tobytes())
        if key not in self._solved:
            if deadline is not None and time.perf_counter() > deadline:
                return None
            sub = self._rounds_of(types)[self.typed.names[position]] if jobs.size else None
            self._solved[key] = jobs if sub is None else self._ideal(position, jobs, sub, deadline)
        return self._solved[key]

    def _rounds_of(self, types: list[str]) -> dict[str, RoundInstance]:
        """Every type's round of ``types`` (one per job), built once for a node's types, not once per type."""
        key = tuple(types)
        if self._rounds is None or self._rounds[0] != key:
            self._rounds = (key, self.instance.per_type_of(types))
        return self._rounds[1]

    def _ideal(self, position: int, jobs: np.ndarray, sub: RoundInstance, deadline: float | None
               ) -> np.ndarray | None:
        limit = PACK_SECONDS if deadline is None else max(min(PACK_SECONDS, deadline - time.perf_counter()), 1e-3)
        ideal = solve_ideal(sub, objective=self.typed.objective, mip_gap=self.mip_gap, time_limit=limit)
        if not ideal.has_solution:
            return None
        found = []
        for job, cpu, mem in zip(jobs.tolist(), ideal.cpu_per_gpu.tolist(), ideal.mem_gb_per_gpu.tolist(),
                                 strict=True):
            match = self._columns.get(_config_key(int(self.typed.job_class[job]), position, cpu, mem), [])
            if len(match) != 1:
                return None
            found.append(match[0])
        return np.array(found, dtype=np.int64)


def fit_types(typed: TypedColumns, chosen: np.ndarray, lp_y: np.ndarray, gpus: np.ndarray) -> np.ndarray | None:
    """``chosen`` (every job's column) with jobs moved off types that get more GPUs than they have: each time the
    job alone in its class whose LP (``lp_y``, over the model's columns) holds most of it on a type with room,
    to that type's column the LP holds most (then the best worth); None when no move fits. The rounding of a
    node's columns keeps each job's type by its own LP mass, so on full types it often puts one job too many on
    one (3 x 128 single-GPU seed 12: the optimum's types one job off, by node 64)."""
    cols = typed.items.columns
    capacity = np.array([kind.types.cluster.total_gpus for kind in typed.kinds], dtype=float)
    out = chosen.copy()
    alone = cols.count[cols.cls] == 1
    order = np.lexsort((-typed.items.weight, -lp_y))  # each class's columns by LP value, then worth
    for _ in range(len(out) + 1):  # each move takes a job off an overfull type for good: at most len(out)
        load = np.bincount(typed.col_type[out], weights=gpus, minlength=capacity.size)
        over = np.flatnonzero(load > capacity)
        if not over.size:
            return out
        room = capacity - load
        # Moves: a job alone in its class on the overfull type, to a column of another type with room.
        jobs = np.flatnonzero((typed.col_type[out] == over[0]) & alone[out])
        cls = cols.cls[out[jobs]]
        move = np.isin(cols.cls[order], cls) & (typed.col_type[order] != over[0]) & alone[order]
        move &= room[typed.col_type[order]] >= cols.gpus[order]
        if not move.any():
            return None
        column = int(order[np.argmax(move)])  # the most LP value of those
        out[jobs[np.flatnonzero(cls == cols.cls[column])[0]]] = column
    return None


def _config_key(cls: int, kind: int, cpu: float, mem: float) -> tuple[int, int, float, float]:
    return cls, kind, round(cpu, 9), round(mem, 9)


def prove_across_types(instance: HeteroRound, typed: TypedColumns, incumbent: float, bound: float, mip_gap: float,
                       deadline: float | None, known: Mapping[tuple[str, tuple[str, ...]], TypePart] | None = None
                       ) -> Proof:
    """The branch-and-price across types from the root, with an incumbent worth ``incumbent`` found elsewhere (or
    -inf) and a known ``bound`` (the type-free ideal ILP's), until the bound is proven within ``mip_gap`` of the
    best solution or the deadline. ``known``: solutions of types' rounds found elsewhere (by the type's name and
    its jobs' ids), which the nodes' types may combine."""
    known = known or {}
    items = typed.items
    initial = [np.diag(items.per_server)]
    master = ColumnGeneration(items, typed.kinds, np.vstack(initial))
    best: list[tuple[float, Allocation]] = []

    def value() -> float:
        return max(incumbent, best[-1][0]) if best else incumbent

    def take(y: np.ndarray, loads: np.ndarray, count: np.ndarray) -> float:
        worth = float(items.weight @ y)
        if worth > value() + 1e-9:
            best.append((worth, decode(instance, typed, y, loads, count)))
        return value()

    tried: set[bytes] = set()
    # Each type's placement by its demand: nodes' configs differ on a few jobs, so most of a type's demands recur.
    # Failures are kept only when proven (one may be the time limit's, or lack loads priced since).
    placements: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray] | None] = {}

    def place_type(position: int, demand: np.ndarray, tree: ColumnGeneration, dive: bool
                   ) -> tuple[np.ndarray, np.ndarray] | None:
        key = (position, demand.tobytes())
        if key in placements:
            return placements[key]
        kind = typed.kinds[position]
        mine = slice(kind.first, kind.stop)
        if dive:
            # The residual dive places configs that fill the type's CPUs and memory (its ideal ILP's) where the
            # small MILPs of place_demand run out of their time (as for the ideal configs on one type).
            stop = time.perf_counter() + IDEAL_DIVE_SECONDS
            tried_dive = residual_dive(kind.types, demand, items.per_server[mine], kind.servers,
                                       stop if deadline is None else min(stop, deadline))
            if tried_dive.loads is not None and tried_dive.count is not None:
                placements[key] = (tried_dive.count, tried_dive.loads)
                return placements[key]
            if tried_dive.impossible:
                placements[key] = None
                return None
        patterns, pattern_kind = tree.known_patterns()
        found = place_demand(kind.types, demand, items.per_server[mine], kind.servers,
                             patterns[pattern_kind == position][:, mine], PACK_SECONDS, PACK_LISTED,
                             kind.types.grid if kind.servers <= CP_SERVERS else None)
        if found is not None:
            placements[key] = found
        return found

    def place_configs(y: np.ndarray, tree: ColumnGeneration) -> float:
        # A node's configs (rounded), each type's demand placed on its servers (each set of configs once).
        worth = float(items.weight @ y)
        if y.tobytes() in tried or worth > bound + 1e-9 * max(1.0, abs(bound)) or worth <= value() + 1e-9:
            return -math.inf
        tried.add(y.tobytes())
        demand = np.bincount(items.col_item, weights=items.units * y, minlength=items.item_size.size)
        demands = {position: np.rint(demand[kind.first:kind.stop]).astype(np.int64)
                   for position, kind in enumerate(typed.kinds) if demand[kind.first:kind.stop].any()}
        placed = []
        # The types placed before last: when another fails, their placements were not needed.
        for position, mine in sorted(demands.items(), key=lambda item: (item[0], item[1].tobytes()) in placements):
            found = place_type(position, mine, tree, dive=False)
            if found is None:
                return -math.inf
            kind = typed.kinds[position]
            loads = np.zeros((len(found[1]), items.item_size.size), dtype=np.int64)
            loads[:, kind.first:kind.stop] = found[1]
            placed.append((loads, found[0]))
        return take(y, np.vstack([p[0] for p in placed]), np.concatenate([p[1] for p in placed]))

    ideals = TypeIdeals(instance, typed, mip_gap)
    typed_nodes: set[bytes] = set()
    ids = tuple(job.id for job in instance.jobs)

    def place_columns(position: int, jobs: np.ndarray, columns: np.ndarray, tree: ColumnGeneration, dive: bool
                      ) -> TypePart | None:
        # ``jobs`` on the type at ``position``, each on its column of ``columns``, placed on that type's servers.
        kind = typed.kinds[position]
        demand = np.bincount(items.col_item[columns] - kind.first, weights=items.units[columns],
                             minlength=kind.stop - kind.first)
        found = place_type(position, np.rint(demand).astype(np.int64), tree, dive)
        if found is None:
            return None
        return float(items.weight[columns].sum()), decode_type(instance, typed, position, jobs, columns, found[1],
                                                               found[0])

    def type_part(position: int, jobs: np.ndarray, ideal: np.ndarray | None, chosen: np.ndarray,
                  tree: ColumnGeneration) -> TypePart | None:
        # The type's jobs at their ideal configs (optimal for them when placed), else a type choice's solution of
        # the same round, else at the node's configs (the residual dive first: on the 3 x 128-GPU multi-GPU round
        # of seed 1 it placed what place_demand's small MILPs did not within their time, 99 nodes against 349).
        placed = None if ideal is None else place_columns(position, jobs, ideal, tree, dive=True)
        if placed is None:
            placed = known.get((typed.names[position], tuple(ids[j] for j in jobs.tolist())))
        if placed is None:
            placed = place_columns(position, jobs, chosen[jobs], tree, dive=True)
        return placed

    def by_type(chosen: np.ndarray, tree: ColumnGeneration) -> float:
        # A node's types (each set of types once; fitted to the types' GPUs), every type's jobs as type_part has
        # them; not tried when the types' ideal configs are worth no more than the incumbent.
        fitted = fit_types(typed, chosen, tree.model_y(tree.lp_solution()[0]), instance.gpus)
        if fitted is None:
            return -math.inf
        chosen = fitted
        kinds = typed.col_type[chosen]
        if kinds.tobytes() in typed_nodes:
            return -math.inf
        typed_nodes.add(kinds.tobytes())
        names = [typed.names[k] for k in kinds.tolist()]
        jobs = [np.flatnonzero(kinds == position) for position in range(len(typed.kinds))]
        ideal = [ideals.of_type(position, mine, names, deadline) for position, mine in enumerate(jobs)]
        aim = sum(float(items.weight[chosen[mine] if columns is None else columns].sum())
                  for mine, columns in zip(jobs, ideal, strict=True))
        if aim <= value() + 1e-9:
            return -math.inf
        parts, total = {}, 0.0
        for position, mine in enumerate(jobs):
            if not mine.size:
                continue
            part = type_part(position, mine, ideal[position], chosen, tree)
            if part is None:
                return -math.inf
            total += part[0]
            parts[typed.names[position]] = part[1]
        if total > value() + 1e-9:
            best.append((total, join_allocations(instance.cluster, parts)))
        return value()

    def at_node(y: np.ndarray, tree: ColumnGeneration) -> float:
        # A node's types with each type's jobs at their best known configs, then the node's own configs, placed.
        return max(by_type(typed.job_columns(y), tree), place_configs(y, tree))

    try:
        master.run(deadline)
        priced = True
    except PricingDeadline:  # stopped in the first pricing: no bound from the master
        priced = False
    if priced and not (deadline is not None and time.perf_counter() > deadline):
        outcome = target_trees(master, value, bound, mip_gap, deadline,
                               lambda y, x, tree: take(y, tree.patterns, x), at_node,
                               strong=Strong(STRONG_CANDIDATES, RELIABLE))
    else:
        outcome = BranchOutcome(bound, False, 0)
    proven = min(bound, outcome.bound, master.best.bound if master.best is not None else math.inf)
    if best:
        return Proof(best[-1][1], best[-1][0], max(proven, best[-1][0]), outcome, master.rounds)
    return Proof(None, incumbent, max(proven, incumbent), outcome, master.rounds)
