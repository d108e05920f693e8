"""Joint exact MILP (SPEC 2.4): per-GPU configs and integral placement chosen together, built once, vectorised.

Servers are identical (``G`` GPUs, ``C`` CPUs, ``M`` GB each, ``s`` of them). Jobs with identical ``(g_j, W_j)``
form a class (as in the ideal ILP). A column is a (class, per-GPU config ``k``, mode) triple; the mode says how
a job is placed:

- *whole*: its ``g`` GPUs sit on one server (forced for ``g <= G`` when ``consolidate``; a 1-GPU job is whole);
- *pieces*: its GPUs may be spread over servers (always so for ``g > G``). With ``split_penalty = p`` a job in
  pieces is credited ``(1 - p) W``.

Columns that need the same server resources share an *item type* ``t = (size, c, m)``: a whole job of ``g``
GPUs is one item of size ``g``, a job in pieces is ``g`` items of size 1. ``y[col]`` counts the jobs of the
class using the column. Identical servers are unlabelled: a *pattern* ``a[p]`` is a load of items that fits one
server, and ``x[p]`` counts the servers loaded with it (``formulation="patterns"``, the default):

    (J1) max  sum_col w_col y[col]                        w = W, or (1 - p) W in pieces; x g_j if GPU-weighted
    (J2)      sum_{col of class q} y[col] = |q|             block "assign"   _assignment_rows
    (J3)      sum_p a[p,t] x[p] >= sum_{col->t} u_col y[col] block "cover"   _pattern_rows  (u = 1 whole, g pieces)
    (J4)      sum_p x[p] <= s                               block "servers"  _pattern_rows
    (J5)      sum_t size_t a[p,t] <= G, sum_t size_t c_t a[p,t] <= C, sum_t size_t m_t a[p,t] <= M
                                                            by construction  server_patterns
    (J6)      sum_k W[k] y[j,k] >= floor_j                  block "floor"    (or configs below the floor removed)
    (J7)      sum_col w_col y[col] <= U                     block "cutoff"   (optional; U a proven upper bound)

``formulation="servers"`` keeps one integer ``z[i,t]`` per server and item type instead of patterns:
``sum_i z[i,t] = sum_{col->t} u_col y[col]`` (block "link", ``_link_rows``) and the three capacity rows of (J5)
per server (blocks "gpu", "cpu", "mem", ``_server_rows``), optionally with the servers ordered by load
(block "order", ``_order_rows``).

Exact reductions (each switchable, see :class:`JointReductions`; proofs in ``formulations/joint.md``): the ideal
ILP's three (floor, dominance, identical jobs), configs that fit on no server dropped, columns pooled into item
types, and (servers formulation) the servers ordered by load. :func:`synergy_opt.joint.literal.build_joint_literal`
builds SPEC 2.4 as written, the reference the reductions are tested against.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.ideal.model import (
    OBJECTIVES,
    Objective,
    Reductions,
    columns_of_jobs,
    group_columns,
)
from synergy_opt.instance import Allocation, Cluster, Placement, RoundInstance
from synergy_opt.joint.pricing import ItemTypes, near_patterns
from synergy_opt.solvers.base import SolverParams
from synergy_opt.solvers.model import LinearModel, ModelBuilder

Formulation = Literal["patterns", "servers"]
FORMULATIONS: tuple[Formulation, ...] = ("patterns", "servers")
# Relative slack when testing "fits on a server": 3 x 8.0000000001 CPUs is not too big for 24.
_FIT_TOLERANCE = 1e-9
# Beyond this many maximal patterns the servers formulation is used instead: the generated rounds need at most
# ~2,400 at any size; noisy profiles (every job its own matrix) can need 10^5 and more, and HiGHS then stalls
# (measured: no incumbent after 90 s at 32 GPUs, time limit overshot). The enumeration holds at most
# _PARTIAL_FACTOR times as many partial loads, which bounds its memory.
PATTERN_LIMIT = 10_000
_PARTIAL_FACTOR = 20


@dataclass(frozen=True)
class JointReductions:
    """Exact reductions of the joint MILP; each is tested against the literal model (``literal.py``).

    Attributes
    ----------
    fix_below_floor, drop_dominated, merge_identical
        The ideal ILP's reductions (SPEC 2.1), applied to the columns the same way.
    drop_unplaceable
        Remove configs that fit on no server: ``c_k > C`` or ``m_k > M`` (one GPU), or ``g c_k > C`` or
        ``g m_k > M`` for a job that must sit whole on one server.
    pool_items
        One item type per ``(size, c, m)`` instead of one per column: columns that need the same resources are
        interchangeable on a server.
    order_servers
        Servers formulation only: servers ordered by non-increasing load, ``h . z[i] >= h . z[i+1]``. Valid, but
        measured slower with HiGHS, whose own symmetry detection it defeats; off by default.
    """

    fix_below_floor: bool = True
    drop_dominated: bool = True
    merge_identical: bool = True
    drop_unplaceable: bool = True
    pool_items: bool = True
    order_servers: bool = False

    def __post_init__(self) -> None:
        self.ideal()  # the ideal ILP's switches are checked where they are defined

    @classmethod
    def none(cls) -> JointReductions:
        return cls(False, False, False, False, False, False)

    def ideal(self) -> Reductions:
        """The ideal ILP's reductions with the same switches (the column helpers read these three)."""
        return Reductions(
            fix_below_floor=self.fix_below_floor,
            drop_dominated=self.drop_dominated,
            merge_identical=self.merge_identical,
        )


@dataclass(frozen=True, eq=False)
class JointModel:
    """The built joint MILP plus what is needed to read a solution back as an Allocation."""

    model: LinearModel
    instance: RoundInstance
    formulation: Formulation
    consolidate: bool
    split_penalty: float
    objective_kind: Objective
    reductions: JointReductions
    col_class: np.ndarray  # class of each y column
    col_cpu: np.ndarray  # per-GPU CPUs of the column's config
    col_mem: np.ndarray  # per-GPU GB of the column's config
    col_tput: np.ndarray  # W of the column's config
    col_whole: np.ndarray  # True: the job sits whole on one server; False: in pieces
    col_item: np.ndarray  # item type of the column
    col_weight: np.ndarray  # objective coefficient
    class_count: np.ndarray  # jobs per class
    class_gpus: np.ndarray  # g of each class
    class_jobs: np.ndarray  # job indices grouped by class, in class order
    item_size: np.ndarray  # GPUs per item, per item type
    item_cpu: np.ndarray  # per-GPU CPUs, per item type
    item_mem: np.ndarray  # per-GPU GB, per item type
    patterns: np.ndarray | None  # (patterns, item types) for the patterns formulation
    build_seconds: float

    @property
    def num_servers(self) -> int:
        return self.instance.cluster.servers

    @property
    def num_items(self) -> int:
        return int(self.item_size.size)

    def job_columns(self, y: np.ndarray) -> np.ndarray:
        """Column chosen for each job (job order) from an integral ``y``."""
        return columns_of_jobs(y, self.class_jobs)

    def server_items(self, x: np.ndarray) -> np.ndarray:
        """``z[i, t]``: room for items of type ``t`` on server ``i`` in an integral solution ``x``."""
        if self.patterns is None:
            z = np.rint(self.model.block(x, "z")).astype(np.int64)
            return z.reshape(self.num_servers, self.num_items)
        used = np.rint(self.model.block(x, "x")).astype(np.int64)
        loads = self.patterns[np.repeat(np.arange(used.size), np.maximum(used, 0))]
        z = np.zeros((self.num_servers, self.num_items), dtype=np.int64)
        z[: len(loads)] = loads
        return z

    def allocation(self, x: np.ndarray) -> Allocation:
        """The Allocation of an integral solution ``x``: CPU and memory per GPU times the GPUs on each server."""
        chosen = self.job_columns(self.model.block(x, "y"))
        return _place_items(self, chosen, self.server_items(x))


def build_joint(
    instance: RoundInstance,
    *,
    consolidate: bool = False,
    split_penalty: float = 0.0,
    objective: Objective = "job",
    reductions: JointReductions | None = None,
    formulation: Formulation = "patterns",
    upper_bound: float | None = None,
    pattern_limit: int = PATTERN_LIMIT,
    patterns: np.ndarray | None = None,
) -> JointModel:
    """Build the joint exact MILP of ``instance`` (equations in the module docstring).

    Parameters
    ----------
    consolidate
        Every job with ``g_j <= G`` runs whole on one server. Larger jobs are placed in pieces either way.
    split_penalty
        ``p`` in ``[0, 1]``: a job spread over more than one server is credited ``(1 - p) W`` instead of ``W``
        in the objective (floors still compare the unpenalised ``W``; the evaluator knows nothing of it).
    objective
        ``"job"``: sum of per-job throughput; ``"gpu"``: GPU-weighted.
    reductions
        Which exact reductions to apply (all by default); ``JointReductions.none()`` keeps one column per job
        and config and one item type per column.
    formulation
        ``"patterns"``: servers counted per load pattern (no server symmetry); ``"servers"``: one variable per
        server and item type. Patterns fall back to servers beyond ``pattern_limit`` patterns.
    upper_bound
        A proven upper bound on the optimum (e.g. the ideal ILP's); added as row (J7).
    pattern_limit
        Most patterns the patterns formulation may have (see :func:`server_patterns`).
    patterns
        The server loads to use instead of all maximal ones, ``(patterns, item types)`` over the item types of
        :func:`item_columns` (patterns formulation only): a restricted master, exact when the optimum's loads
        lie under some of them (:mod:`synergy_opt.joint.decomposition`).
    """
    start = time.perf_counter()
    check_options(objective, split_penalty, upper_bound, formulation)
    reductions = reductions or JointReductions()
    cluster = instance.cluster
    items = item_columns(instance, consolidate, split_penalty, objective, reductions)
    cols, weight, units, col_item = items.columns, items.weight, items.units, items.col_item
    i_size, i_cpu, i_mem, per_server = items.item_size, items.item_cpu, items.item_mem, items.per_server
    if patterns is not None:
        formulation = "patterns"
    elif formulation == "patterns":
        patterns = server_patterns(cluster, i_size, i_cpu, i_mem, per_server, limit=pattern_limit)
    if patterns is None:
        formulation = "servers"

    builder = ModelBuilder("joint_exact", "max")
    y = builder.add_vars("y", cols.cls.size, upper=cols.most_jobs, integer=True, objective=weight)
    y_cols = np.arange(y.start, y.stop)
    _assignment_rows(builder, cols, y_cols)
    if not reductions.fix_below_floor:
        builder.add_rows("floor", cols.cls, y_cols, cols.tput, lower=cols.floor, count=cols.count.size,
                         equilibrate=True)
    if patterns is not None:
        _pattern_rows(builder, y_cols, patterns, col_item, units, cluster.servers)
    else:
        servers = cluster.servers
        z = builder.add_vars("z", servers * i_size.size, upper=np.tile(per_server, servers).astype(float),
                             integer=True)
        z_cols = np.arange(z.start, z.stop).reshape(servers, i_size.size)
        _link_rows(builder, y_cols, z_cols, col_item, units)
        _server_rows(builder, z_cols, i_size, i_cpu, i_mem, cluster)
        if reductions.order_servers and servers > 1:
            _order_rows(builder, z_cols, i_size, i_cpu, i_mem, cluster)
    if upper_bound is not None:
        builder.add_rows("cutoff", np.zeros(y_cols.size, np.int64), y_cols, weight, upper=upper_bound, count=1)
    return JointModel(
        model=builder.build(),
        instance=instance,
        formulation=formulation,
        consolidate=consolidate,
        split_penalty=float(split_penalty),
        objective_kind=objective,
        reductions=reductions,
        col_class=cols.cls,
        col_cpu=cols.cpu,
        col_mem=cols.mem,
        col_tput=cols.tput,
        col_whole=cols.whole,
        col_item=col_item,
        col_weight=weight,
        class_count=cols.count,
        class_gpus=cols.class_gpus,
        class_jobs=cols.class_jobs,
        item_size=i_size,
        item_cpu=i_cpu,
        item_mem=i_mem,
        patterns=patterns,
        build_seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True, eq=False)
class ItemColumns:
    """The model's columns and the item types they ask for: what every joint formulation is built from."""

    columns: _JointColumns
    weight: np.ndarray  # objective coefficient of each column
    units: np.ndarray  # items of its type a job of the column takes: 1 whole item, or g pieces of one GPU
    col_item: np.ndarray  # item type of each column
    item_size: np.ndarray  # GPUs per item, per item type
    item_cpu: np.ndarray  # per-GPU CPUs, per item type
    item_mem: np.ndarray  # per-GPU GB, per item type
    supply: np.ndarray  # most items of each type all jobs together can ask for
    per_server: np.ndarray  # most items of each type one server can hold (and the supply allows)

    def of_columns(self, keep: np.ndarray) -> ItemColumns:
        """The same model over the columns ``keep`` only (ascending; every class keeps one), item types unchanged."""
        cols = self.columns
        kept = replace(cols, cls=cols.cls[keep], cpu=cols.cpu[keep], mem=cols.mem[keep], tput=cols.tput[keep],
                       whole=cols.whole[keep], gpus=cols.gpus[keep])
        return replace(self, columns=kept, weight=self.weight[keep], units=self.units[keep],
                       col_item=self.col_item[keep])


def item_columns(
    instance: RoundInstance,
    consolidate: bool,
    split_penalty: float,
    objective: Objective,
    reductions: JointReductions,
) -> ItemColumns:
    """Columns (class, config, mode) with their weights, pooled into item types ``(size, c, m)``."""
    cols = _columns(instance, consolidate, split_penalty, reductions)
    weight = cols.tput * np.where(cols.whole | (cols.gpus == 1), 1.0, 1.0 - split_penalty)
    if objective == "gpu":
        weight = weight * cols.gpus
    # Units of its item type that each job of a column takes: one whole item, or g single-GPU pieces.
    units = np.where(cols.whole, 1, cols.gpus)
    item_size = np.where(cols.whole, cols.gpus, 1)
    if reductions.pool_items:
        keys = np.stack([item_size, cols.cpu, cols.mem], axis=1)
        item_keys, col_item = np.unique(keys, axis=0, return_inverse=True)
        col_item = col_item.ravel()
        i_size, i_cpu, i_mem = item_keys[:, 0].astype(np.int64), item_keys[:, 1], item_keys[:, 2]
    else:
        col_item = np.arange(cols.cls.size)
        i_size, i_cpu, i_mem = item_size, cols.cpu, cols.mem
    supply = np.bincount(col_item, weights=units * cols.count[cols.cls], minlength=i_size.size).astype(np.int64)
    per_server = np.minimum(item_capacity(instance.cluster, i_size, i_cpu, i_mem), supply)
    return ItemColumns(cols, weight, units.astype(np.int64), col_item, i_size, i_cpu, i_mem, supply, per_server)


def direct_params(solver: str, params: SolverParams, patterns: bool = False) -> SolverParams:
    """The parameters for a direct joint model on HiGHS: presolve off on the patterns model (unless the caller
    sets it), and on the others under a short limit (:func:`synergy_opt.solvers.highs.short_limit_params`: its
    MIP presolve overruns such limits on these models). On the patterns model presolve ignored a 1 s limit for
    3-4 s (an independent tester's round) and once called a wrong optimum (2.0001 against 2.5001,
    ``test_a_direct_optimum_that_highs_presolve_gets_wrong_is_right_without_it``); without it the same optima
    came out on every round measured, in less time overall: 208 cases of a reviewer's (generated rounds of
    256-512 GPUs, the round family at 128 and 256, heterogeneous rounds) 49 s against 54 s, from 28x faster
    (0.15 s against 4.2 s) to 3.2x slower (0.84 s against 0.26 s); 16 small heterogeneous rounds 0.02-4.4 s
    against 0.06-18.7 s."""
    if solver != "highs":
        return params
    if patterns and "presolve" not in params.options:
        return replace(params, options={**params.options, "presolve": "off"})
    from synergy_opt.solvers.highs import short_limit_params  # highspy on first use (no solver library at import)

    return short_limit_params(params)


def check_options(objective: str, split_penalty: float, upper_bound: float | None, formulation: str) -> None:
    if objective not in OBJECTIVES:
        raise InvalidInputError("objective", objective, f"choose one of {', '.join(OBJECTIVES)}")
    if formulation not in FORMULATIONS:
        raise InvalidInputError("formulation", formulation, f"choose one of {', '.join(FORMULATIONS)}")
    if isinstance(split_penalty, bool) or not isinstance(split_penalty, (int, float, np.integer, np.floating)):
        raise InvalidInputError("split_penalty", split_penalty, "must be a number in [0, 1]")
    if not (math.isfinite(split_penalty) and 0.0 <= split_penalty <= 1.0):
        raise InvalidInputError("split_penalty", split_penalty, "must be a number in [0, 1]")
    if upper_bound is not None and not math.isfinite(upper_bound):
        raise InvalidInputError("upper_bound", upper_bound, "must be finite")


def item_capacity(cluster: Cluster, size: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """How many items of each type fit on one empty server (GPUs, CPUs and memory)."""
    tol = 1 + _FIT_TOLERANCE
    by_gpu = cluster.gpus_per_server // size
    with np.errstate(divide="ignore"):  # a config of no CPUs or memory (ideal.model.with_zero_config): no limit
        by_cpu = np.floor(cluster.cpus_per_server * tol / (size * cpu))
        by_mem = np.floor(cluster.mem_gb_per_server * tol / (size * mem))
    return np.minimum(np.minimum(by_gpu, by_cpu), by_mem).astype(np.int64)


def server_patterns(
    cluster: Cluster,
    size: np.ndarray,
    cpu: np.ndarray,
    mem: np.ndarray,
    upper: np.ndarray,
    limit: int = PATTERN_LIMIT,
    partial_factor: int = _PARTIAL_FACTOR,
) -> np.ndarray | None:
    """Every maximal load of one server: item counts ``a <= upper`` within (J5) to which no item can be added.

    Enumerated breadth-first over item types, vectorised (:func:`synergy_opt.joint.pricing.near_patterns` with
    every price zero). Returns None when there are more than ``limit`` maximal loads, or more than
    ``partial_factor * limit`` partial ones on the way (the caller then uses the servers formulation).
    """
    items = ItemTypes(size, cpu, mem, cluster)
    return near_patterns(items, np.zeros(size.size), 0.0, upper, limit, partial_factor=partial_factor)


@dataclass(frozen=True)
class _JointColumns:
    """Per column: class, config, mode; per class: count, GPUs, floor, jobs."""

    cls: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    tput: np.ndarray
    whole: np.ndarray
    gpus: np.ndarray  # g of the column's class
    floor: np.ndarray  # per class
    count: np.ndarray
    class_gpus: np.ndarray
    class_jobs: np.ndarray

    @cached_property
    def most_jobs(self) -> np.ndarray:
        """Per column, as floats: the most jobs it can take, its class's count (read-only)."""
        most = self.count[self.cls].astype(float)
        most.flags.writeable = False
        return most


def _columns(
    instance: RoundInstance, consolidate: bool, split_penalty: float, reductions: JointReductions
) -> _JointColumns:
    """The ideal ILP's class columns, each given its placement modes, minus those that fit on no server."""
    groups = [group_columns(instance, group, reductions.ideal()) for group in instance.profile_groups]
    base = np.cumsum([0] + [p.class_count.size for p in groups])

    def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
        # A round without jobs has no groups: its model is empty, not an error.
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

    cls = cat([p.col_class + b for p, b in zip(groups, base, strict=False)], np.int64)
    cpu = cat([p.col_cpu for p in groups], float)
    mem = cat([p.col_mem for p in groups], float)
    tput = cat([p.col_tput for p in groups], float)
    count = cat([p.class_count for p in groups], np.int64)
    class_gpus = cat([p.class_gpus for p in groups], np.int64)
    floor = cat([p.class_floor for p in groups], float)
    class_jobs = cat([p.class_jobs for p in groups], np.int64)

    cluster = instance.cluster
    g = class_gpus[cls]
    one_gpu, fits = g == 1, g <= cluster.gpus_per_server
    # Modes: 1-GPU jobs are whole; jobs that fit on a server are whole when consolidated, in pieces when splitting
    # is free (whole is a special case of pieces), and either when splitting costs a penalty; larger jobs in pieces.
    if consolidate:
        col, whole = np.arange(cls.size), fits
    elif split_penalty > 0:
        both = np.flatnonzero(fits & ~one_gpu)
        col = np.concatenate([np.arange(cls.size), both])
        whole = np.concatenate([one_gpu, np.ones(both.size, dtype=bool)])
    else:
        col, whole = np.arange(cls.size), one_gpu
    if reductions.drop_unplaceable:
        size = np.where(whole, g[col], 1)
        tol = 1 + _FIT_TOLERANCE
        keep = (size * cpu[col] <= cluster.cpus_per_server * tol) & (size * mem[col] <= cluster.mem_gb_per_server * tol)
        col, whole = col[keep], whole[keep]
    order = np.lexsort((~whole, col))  # class, config, then whole before pieces
    col, whole = col[order], whole[order]
    return _JointColumns(
        cls=cls[col],
        cpu=cpu[col],
        mem=mem[col],
        tput=tput[col],
        whole=whole,
        gpus=g[col],
        floor=floor,
        count=count,
        class_gpus=class_gpus,
        class_jobs=class_jobs,
    )


def _assignment_rows(builder: ModelBuilder, cols: _JointColumns, y_cols: np.ndarray) -> None:
    """(J2): every job of a class gets exactly one (config, mode)."""
    builder.add_rows("assign", cols.cls, y_cols, np.ones(y_cols.size), lower=cols.count, upper=cols.count,
                     count=cols.count.size)


def _pattern_rows(
    builder: ModelBuilder,
    y_cols: np.ndarray,
    patterns: np.ndarray,
    col_item: np.ndarray,
    units: np.ndarray,
    servers: int,
) -> None:
    """(J3), (J4): the servers' patterns hold every item the chosen configs ask for, on at most ``s`` servers."""
    count, items = patterns.shape
    x = builder.add_vars("x", count, upper=float(servers), integer=True)
    x_cols = np.arange(x.start, x.stop)
    p, t = np.nonzero(patterns)
    rows = np.concatenate([t, col_item])
    cols = np.concatenate([x_cols[p], y_cols])
    values = np.concatenate([patterns[p, t].astype(float), -units.astype(float)])
    builder.add_rows("cover", rows, cols, values, lower=0.0, count=items)
    builder.add_rows("servers", np.zeros(count, np.int64), x_cols, np.ones(count), upper=float(servers), count=1)


def _link_rows(
    builder: ModelBuilder, y_cols: np.ndarray, z_cols: np.ndarray, col_item: np.ndarray, units: np.ndarray
) -> None:
    """Servers formulation: the items on the servers are exactly those the chosen configs ask for."""
    servers, items = z_cols.shape
    rows = np.concatenate([np.tile(np.arange(items), servers), col_item])
    cols = np.concatenate([z_cols.ravel(), y_cols])
    values = np.concatenate([np.ones(servers * items), -units.astype(float)])
    builder.add_rows("link", rows, cols, values, lower=0.0, upper=0.0, count=items)


def _server_rows(
    builder: ModelBuilder, z_cols: np.ndarray, size: np.ndarray, cpu: np.ndarray, mem: np.ndarray, cluster: Cluster
) -> None:
    """Servers formulation, (J5) per server: GPUs, CPUs and memory."""
    servers, items = z_cols.shape
    rows = np.repeat(np.arange(servers), items)
    for name, per_item, capacity in (
        ("gpu", size.astype(float), float(cluster.gpus_per_server)),
        ("cpu", size * cpu, cluster.cpus_per_server),
        ("mem", size * mem, cluster.mem_gb_per_server),
    ):
        builder.add_rows(name, rows, z_cols.ravel(), np.tile(per_item, servers), upper=capacity, count=servers)


def order_weights(size: np.ndarray, cpu: np.ndarray, mem: np.ndarray, cluster: Cluster) -> np.ndarray:
    """Load signature ``h`` of each item type: its GPU, CPU and memory shares of a server, weighted 1, 1/2, 1/4.

    Any weights give a valid order (sort the servers of any solution by ``h . z``).
    """
    gpu_share = size / cluster.gpus_per_server
    cpu_share = size * cpu / cluster.cpus_per_server
    mem_share = size * mem / cluster.mem_gb_per_server
    return gpu_share + 0.5 * cpu_share + 0.25 * mem_share


def _order_rows(
    builder: ModelBuilder, z_cols: np.ndarray, size: np.ndarray, cpu: np.ndarray, mem: np.ndarray, cluster: Cluster
) -> None:
    """Servers formulation: ``h . z[i] - h . z[i+1] >= 0`` for consecutive servers."""
    servers, items = z_cols.shape
    h = order_weights(size, cpu, mem, cluster)
    rows = np.concatenate([np.repeat(np.arange(servers - 1), items)] * 2)
    cols = np.concatenate([z_cols[:-1].ravel(), z_cols[1:].ravel()])
    values = np.concatenate([np.tile(h, servers - 1), -np.tile(h, servers - 1)])
    builder.add_rows("order", rows, cols, values, lower=0.0, count=servers - 1)


def _place_items(joint: JointModel, chosen: np.ndarray, z: np.ndarray) -> Allocation:
    """Hand the items on each server to jobs (:func:`place_items`)."""
    instance = joint.instance
    return place_items(tuple(job.id for job in instance.jobs), instance.gpus, joint.col_item[chosen],
                       joint.col_whole[chosen], joint.col_cpu[chosen], joint.col_mem[chosen], z)


def place_items(ids: tuple[str, ...], gpus: np.ndarray, item: np.ndarray, whole: np.ndarray, cpu: np.ndarray,
                mem: np.ndarray, z: np.ndarray) -> Allocation:
    """Hand the items on each server (``z[i, t]``) to jobs: whole jobs take one item each, jobs in pieces take
    GPUs, preferring one server with room for all of them (best fit), else the servers with most room first.
    Job ``j`` (``ids[j]``, ``gpus[j]`` GPUs) takes items of type ``item[j]`` at ``cpu[j]``, ``mem[j]`` per GPU."""
    left = z.copy()
    parts: dict[int, dict[int, int]] = {}
    # Large jobs first so that they find whole servers before small ones fill them.
    for j in np.lexsort((np.arange(len(ids)), -gpus)):
        t = item[j]
        on: dict[int, int] = {}
        if whole[j]:
            server = int(np.flatnonzero(left[:, t] > 0)[0])
            left[server, t] -= 1
            on[server] = int(gpus[j])
        else:
            need = int(gpus[j])
            room = left[:, t]
            enough = np.flatnonzero(room >= need)
            if enough.size:
                server = int(enough[np.argmin(room[enough])])
                room[server] -= need
                on[server] = need
            else:
                for server in np.argsort(-room, kind="stable"):
                    take = int(min(room[server], need))
                    if take:
                        room[server] -= take
                        on[int(server)] = take
                        need -= take
                    if not need:
                        break
        parts[int(j)] = on
    jobs: dict[str, tuple[Placement, ...]] = {}
    for j, on in parts.items():
        c, m = cpu[j], mem[j]
        jobs[ids[j]] = tuple(Placement(s, n, n * c, n * m) for s, n in sorted(on.items()))
    return Allocation(jobs)
