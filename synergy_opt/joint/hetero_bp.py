"""Branch-and-price across GPU types: the proof that types as an outer layer cannot give (heterogeneous.md, HJ9).

One master over the server loads of every type (:class:`~synergy_opt.joint.master.ColumnGeneration`, one
:class:`~synergy_opt.joint.master.ServerKind` per type): its job columns are every (class, type, config, mode)
of :func:`~synergy_opt.joint.hetero_model.type_shares`, each class's jobs assigned once across the types (HJ2),
each type's items covered by that type's loads (HJ3, HJ4), each type's loads priced exactly by its own pricing
problem. The branch-and-price of :mod:`synergy_opt.joint.branching` runs on it unchanged: its splits on job
columns decide jobs' types and configs, those on counts and patterns each type's loads, and its trees with
targets prove a bound on every solution of the type-free round. Its incumbents: integral LP solutions, and at
nodes whose configs are whole, each type's demand placed on that type's servers
(:func:`~synergy_opt.joint.placing.place_demand`); both read back as allocations by each type's items handed
to its jobs (:func:`~synergy_opt.joint.model.place_items`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from synergy_opt.hetero import HeteroRound, join_allocations
from synergy_opt.ideal.hetero_model import job_classes
from synergy_opt.ideal.model import Objective, columns_of_jobs
from synergy_opt.instance import Allocation
from synergy_opt.joint.branching import BranchOutcome, Strong, target_trees
from synergy_opt.joint.hetero_model import type_shares
from synergy_opt.joint.master import ColumnGeneration, ServerKind
from synergy_opt.joint.model import ItemColumns, JointReductions, place_items
from synergy_opt.joint.placing import place_demand
from synergy_opt.joint.pricing import ItemTypes, PricingDeadline

# Seconds a placement of a node's whole configs may take per type, and the most maximal loads listed to decide it.
PACK_SECONDS, PACK_LISTED = 0.1, 500
# Up to this many servers of a type, its placements are also sought by CP-SAT (as on one type).
CP_SERVERS = 12
# Splits of each kind compared by strong branching: twice one type's. Across types many jobs are spread nearly
# alike and the most spread is rarely the split that moves the bound: on the 3 x 128-GPU rounds 8 candidates
# closed trees in 2-7x fewer nodes and 1.5-7x less time than 4 (16: no fewer nodes than 8, more time).
STRONG_CANDIDATES = 8
# A split compared this many times is then scored by its mean falls (reliability branching).
RELIABLE = 2


@dataclass(frozen=True, eq=False)
class TypedColumns:
    """The job columns of every type in one master's terms: ``items`` (columns ordered by class; each type's item
    types a range, :attr:`kinds`), the type of each column and its place in that type's share, the types' names."""

    items: ItemColumns
    kinds: tuple[ServerKind, ...]
    col_type: np.ndarray  # position in :attr:`names` of each column's type
    col_local: np.ndarray  # the column's place in its type's item columns
    names: tuple[str, ...]


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
    return TypedColumns(joined, tuple(kinds), col_type.astype(np.int64), col_local.astype(np.int64), names)


def decode(instance: HeteroRound, typed: TypedColumns, y: np.ndarray, loads: np.ndarray, count: np.ndarray
           ) -> Allocation:
    """The allocation of integral job columns ``y`` on servers loaded with ``loads`` (over the master's item
    types, each of one type), ``count`` servers each: every type's items handed to the jobs of that type."""
    items = typed.items
    chosen = columns_of_jobs(y, items.columns.class_jobs)
    ids = tuple(job.id for job in instance.jobs)
    gpus = instance.gpus
    per_type = {}
    for position, kind in enumerate(typed.kinds):
        jobs = np.flatnonzero(typed.col_type[chosen] == position)
        if not jobs.size:
            continue
        mine = np.flatnonzero(loads[:, kind.first:kind.stop].any(axis=1))
        rows = np.repeat(mine, np.rint(count[mine]).astype(np.int64))
        z = np.zeros((kind.servers, kind.stop - kind.first), dtype=np.int64)
        z[:rows.size] = loads[rows, kind.first:kind.stop]
        col = chosen[jobs]
        per_type[typed.names[position]] = place_items(
            tuple(ids[j] for j in jobs), gpus[jobs], items.col_item[col] - kind.first, items.columns.whole[col],
            items.columns.cpu[col], items.columns.mem[col], z)
    return join_allocations(instance.cluster, per_type)


def prove_across_types(instance: HeteroRound, typed: TypedColumns, incumbent: float, bound: float, mip_gap: float,
                       deadline: float | None) -> Proof:
    """The branch-and-price across types from the root, with an incumbent worth ``incumbent`` found elsewhere (or
    -inf) and a known ``bound`` (the type-free ideal ILP's), until the bound is proven within ``mip_gap`` of the
    best solution or the deadline."""
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
    # Failures are not kept (one may be the time limit's, or lack loads priced since).
    placements: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] = {}

    def place_type(position: int, demand: np.ndarray, tree: ColumnGeneration) -> tuple[np.ndarray, np.ndarray] | None:
        key = (position, demand.tobytes())
        if key in placements:
            return placements[key]
        kind = typed.kinds[position]
        mine = slice(kind.first, kind.stop)
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
            found = place_type(position, mine, tree)
            if found is None:
                return -math.inf
            kind = typed.kinds[position]
            loads = np.zeros((len(found[1]), items.item_size.size), dtype=np.int64)
            loads[:, kind.first:kind.stop] = found[1]
            placed.append((loads, found[0]))
        return take(y, np.vstack([p[0] for p in placed]), np.concatenate([p[1] for p in placed]))

    try:
        master.run(deadline)
        priced = True
    except PricingDeadline:  # stopped in the first pricing: no bound from the master
        priced = False
    if priced and not (deadline is not None and time.perf_counter() > deadline):
        outcome = target_trees(master, value, bound, mip_gap, deadline,
                               lambda y, x, tree: take(y, tree.patterns, x), place_configs,
                               strong=Strong(STRONG_CANDIDATES, RELIABLE))
    else:
        outcome = BranchOutcome(bound, False, 0)
    proven = min(bound, outcome.bound, master.best.bound if master.best is not None else math.inf)
    if best:
        return Proof(best[-1][1], best[-1][0], max(proven, best[-1][0]), outcome, master.rounds)
    return Proof(None, incumbent, max(proven, incumbent), outcome, master.rounds)
