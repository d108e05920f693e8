"""The joint exact MILP of a heterogeneous round, type-free (formulations/heterogeneous.md, eqs. HJ1-HJ6).

Each type's share of the model is the homogeneous joint model's (:mod:`synergy_opt.joint.model`) over the jobs
that may take that type (H0), with its floors (H6) and its server shape: columns (class, config, mode) pooled
into that type's item types, and that type's server loads. The types are joined by one assignment row per
class of jobs, so each job takes one (type, config, mode):

    (HJ1) max  sum_t sum_{col of t} w_col y[col]
    (HJ2)      sum_t sum_{col of class q on t} y[col] = |q|          block "assign"        build_hetero_joint
    (HJ3)      sum_{p of t} a[p,i] x_t[p] >= sum_{col->i} u_col y[col]  per item i of t, block "cover:t"
    (HJ4)      sum_{p of t} x_t[p] <= s_t                              block "servers:t"
    (HJ5)      loads fit a server of type t (its GPUs, CPUs, memory)   by construction (server_patterns)
    (HJ6)      sum (W - W^t(c_t, m_t)) y >= 0 per class                  block "floor", or configs below removed

A type whose maximal loads are too many to list (``PATTERN_LIMIT``) takes the servers formulation instead: one
integer ``z[i, item]`` per server of that type and item (blocks "link:t", "gpu:t", "cpu:t", "mem:t"). Classes
are jobs alike in GPUs, baseline and every type's matrix (:func:`~synergy_opt.ideal.hetero_model.job_classes`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from synergy_opt.hetero import HeteroRound, join_allocations
from synergy_opt.ideal.hetero_model import admissible, job_classes
from synergy_opt.ideal.model import Objective, columns_of_jobs
from synergy_opt.instance import Allocation, Cluster, Job, RoundInstance
from synergy_opt.joint.model import (
    PATTERN_LIMIT,
    ItemColumns,
    JointReductions,
    check_options,
    item_capacity,
    item_columns,
    place_items,
    server_patterns,
)
from synergy_opt.solvers.model import LinearModel, ModelBuilder


@dataclass(frozen=True, eq=False)
class TypeShare:
    """One type's share of the model: its item columns (the homogeneous ones, over ``classes``: the class of
    each candidate job), its loads (None: the servers formulation) and its global item and column offsets."""

    kind: int
    name: str
    cluster: Cluster
    items: ItemColumns
    classes: np.ndarray
    patterns: np.ndarray | None
    item_offset: int


@dataclass(frozen=True, eq=False)
class HeteroJointModel:
    """The built MILP, plus what reads a solution back as an Allocation of the round's servers."""

    model: LinearModel
    instance: HeteroRound
    consolidate: bool
    split_penalty: float
    objective_kind: Objective
    reductions: JointReductions
    shares: tuple[TypeShare, ...]
    col_class: np.ndarray  # class of each y column (grouped by class, in class order)
    col_type: np.ndarray
    col_local: np.ndarray  # the column's position in its type's item columns
    class_count: np.ndarray
    class_jobs: np.ndarray
    build_seconds: float

    def allocation(self, x: np.ndarray) -> Allocation:
        """The Allocation of an integral solution ``x``: each type's items handed to its jobs."""
        chosen = columns_of_jobs(self.model.block(x, "y"), self.class_jobs)
        ids = tuple(job.id for job in self.instance.jobs)
        gpus = self.instance.gpus
        per_type = {}
        for share in self.shares:
            jobs = np.flatnonzero(self.col_type[chosen] == share.kind)
            if not jobs.size:
                continue
            local = self.col_local[chosen[jobs]]
            cols, items = share.items.columns, share.items
            z = self._server_items(share, x)
            per_type[share.name] = place_items(tuple(ids[j] for j in jobs), gpus[jobs], items.col_item[local],
                                               cols.whole[local], cols.cpu[local], cols.mem[local], z)
        return join_allocations(self.instance.cluster, per_type)

    def _server_items(self, share: TypeShare, x: np.ndarray) -> np.ndarray:
        servers, count = share.cluster.servers, share.items.item_size.size
        if share.patterns is None:
            return np.rint(self.model.block(x, f"z:{share.name}")).astype(np.int64).reshape(servers, count)
        used = np.rint(self.model.block(x, f"x:{share.name}")).astype(np.int64)
        loads = share.patterns[np.repeat(np.arange(used.size), np.maximum(used, 0))]
        z = np.zeros((servers, count), dtype=np.int64)
        z[: len(loads)] = loads
        return z


def type_shares(instance: HeteroRound, consolidate: bool, split_penalty: float, objective: Objective,
                reductions: JointReductions, class_of: np.ndarray, representatives: np.ndarray,
                class_count: np.ndarray) -> list[tuple[int, ItemColumns, np.ndarray]]:
    """Per type: the homogeneous joint columns of the classes that may take it, each class one job of its
    GPUs and that type's matrix (so the floors are that type's share, H6), its item supply from the class
    counts. Returns ``(type, columns, the class of each of the columns' local classes)``."""
    allowed = admissible(instance)
    jobs = instance.jobs
    out = []
    for k, server_type in enumerate(instance.cluster.types):
        classes = np.flatnonzero(allowed[representatives, k])
        if not classes.size:
            continue
        candidates = tuple(Job(f"c{c}", jobs[int(representatives[c])].gpus,
                               jobs[int(representatives[c])].profiles[server_type.name]) for c in classes)
        # Room for every candidate at once: only the servers' shape matters to the columns (their supply is set
        # from the class counts below).
        gpus = sum(job.gpus for job in candidates)
        servers = -(-gpus // server_type.gpus_per_server)
        shape = Cluster(servers, server_type.gpus_per_server, server_type.cpus_per_server,
                        server_type.mem_gb_per_server)
        one_each = replace(reductions, merge_identical=False)
        items = item_columns(RoundInstance(shape, candidates), consolidate, split_penalty, objective, one_each)
        cols = items.columns
        owner = classes[cols.class_jobs]  # the class of each local class (one candidate each)
        count = class_count[owner]
        supply = np.bincount(items.col_item, weights=items.units * count[cols.cls],
                             minlength=items.item_size.size).astype(np.int64)
        per_server = np.minimum(item_capacity(server_type.cluster, items.item_size, items.item_cpu,
                                              items.item_mem), supply)
        cols = replace(cols, count=count)
        items = replace(items, columns=cols, supply=supply, per_server=per_server)
        out.append((k, items, owner))
    return out


def build_hetero_joint(instance: HeteroRound, *, consolidate: bool = False, split_penalty: float = 0.0,
                       objective: Objective = "job", reductions: JointReductions | None = None,
                       upper_bound: float | None = None, pattern_limit: int = PATTERN_LIMIT) -> HeteroJointModel:
    """Build the type-free joint MILP of ``instance`` (the module docstring's equations)."""
    start = time.perf_counter()
    check_options(objective, split_penalty, upper_bound, "patterns")
    reductions = reductions or JointReductions()
    class_of, representatives, class_count = job_classes(instance, reductions.merge_identical)
    cluster = instance.cluster
    shares: list[TypeShare] = []
    pieces = []
    offset = 0
    for k, items, classes in type_shares(instance, consolidate, split_penalty, objective, reductions, class_of,
                                         representatives, class_count):
        server_type = cluster.types[k]
        patterns = server_patterns(server_type.cluster, items.item_size, items.item_cpu, items.item_mem,
                                   items.per_server, limit=pattern_limit)
        shares.append(TypeShare(k, server_type.name, server_type.cluster, items, classes, patterns, offset))
        cols = items.columns
        floor_gap = cols.tput - cols.floor[cols.cls]
        pieces.append((classes[cols.cls], np.full(cols.cls.size, k), np.arange(cols.cls.size), items.weight,
                       items.units, items.col_item + offset, floor_gap, cols.most_jobs))
        offset += items.item_size.size
    col_class, col_type, col_local, weight, units, col_item, floor_gap, most = (
        np.concatenate([piece[i] for piece in pieces]) if pieces else np.zeros(0) for i in range(8))
    order = np.lexsort((np.arange(col_class.size), col_type, col_class))
    col_class, col_type, col_local = (a[order].astype(np.int64) for a in (col_class, col_type, col_local))
    weight, units, col_item, floor_gap, most = (a[order] for a in (weight, units, col_item, floor_gap, most))
    col_item = col_item.astype(np.int64)

    builder = ModelBuilder("hetero_joint_exact", "max")
    y = builder.add_vars("y", col_class.size, upper=most.astype(float), integer=True, objective=weight)
    y_cols = np.arange(y.start, y.stop)
    builder.add_rows("assign", col_class, y_cols, np.ones(y_cols.size), lower=class_count, upper=class_count,
                     count=class_count.size)
    if not reductions.fix_below_floor:
        builder.add_rows("floor", col_class, y_cols, floor_gap, lower=0.0, count=class_count.size, equilibrate=True)
    for share in shares:
        mine = np.flatnonzero(col_type == share.kind)
        local_item = col_item[mine] - share.item_offset
        if share.patterns is not None:
            _pattern_rows(builder, share, y_cols[mine], local_item, units[mine])
        else:
            _server_rows(builder, share, y_cols[mine], local_item, units[mine])
    if upper_bound is not None:
        builder.add_rows("cutoff", np.zeros(y_cols.size, np.int64), y_cols, weight, upper=upper_bound, count=1)
    return HeteroJointModel(
        model=builder.build(), instance=instance, consolidate=consolidate, split_penalty=float(split_penalty),
        objective_kind=objective, reductions=reductions, shares=tuple(shares), col_class=col_class,
        col_type=col_type, col_local=col_local, class_count=class_count, class_jobs=np.argsort(class_of, kind="stable"),
        build_seconds=time.perf_counter() - start,
    )


def _pattern_rows(builder: ModelBuilder, share: TypeShare, y_cols: np.ndarray, item: np.ndarray,
                  units: np.ndarray) -> None:
    """(HJ3), (HJ4) for one type."""
    assert share.patterns is not None
    count, items = share.patterns.shape
    x = builder.add_vars(f"x:{share.name}", count, upper=float(share.cluster.servers), integer=True)
    x_cols = np.arange(x.start, x.stop)
    p, t = np.nonzero(share.patterns)
    builder.add_rows(f"cover:{share.name}", np.concatenate([t, item]), np.concatenate([x_cols[p], y_cols]),
                     np.concatenate([share.patterns[p, t].astype(float), -units.astype(float)]), lower=0.0,
                     count=items)
    builder.add_rows(f"servers:{share.name}", np.zeros(count, np.int64), x_cols, np.ones(count),
                     upper=float(share.cluster.servers), count=1)


def _server_rows(builder: ModelBuilder, share: TypeShare, y_cols: np.ndarray, item: np.ndarray,
                 units: np.ndarray) -> None:
    """The servers formulation for one type: items on its servers, each server's GPUs, CPUs and memory."""
    items = share.items
    servers, count = share.cluster.servers, items.item_size.size
    z = builder.add_vars(f"z:{share.name}", servers * count, upper=np.tile(items.per_server, servers).astype(float),
                         integer=True)
    z_cols = np.arange(z.start, z.stop).reshape(servers, count)
    builder.add_rows(f"link:{share.name}", np.concatenate([np.tile(np.arange(count), servers), item]),
                     np.concatenate([z_cols.ravel(), y_cols]),
                     np.concatenate([np.ones(servers * count), -units.astype(float)]), lower=0.0, upper=0.0,
                     count=count)
    rows = np.repeat(np.arange(servers), count)
    cluster = share.cluster
    for name, per_item, capacity in (
        ("gpu", items.item_size.astype(float), float(cluster.gpus_per_server)),
        ("cpu", items.item_size * items.item_cpu, cluster.cpus_per_server),
        ("mem", items.item_size * items.item_mem, cluster.mem_gb_per_server),
    ):
        builder.add_rows(f"{name}:{share.name}", rows, z_cols.ravel(), np.tile(per_item, servers), upper=capacity,
                         count=servers)
