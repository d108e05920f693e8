"""Placement (fragmentation) models of paper section 4.1.2 / SPEC 2.2, built once, vectorised.

Input: per job its GPUs ``g_j`` and the ideal totals ``c*_j``, ``m*_j`` (eqs. 6, 7); ``s`` identical servers
with ``G`` GPUs, ``C_i`` CPUs and ``M_i`` GB each. Two exact aggregations are used throughout:

- a *class* ``k`` is a set of ``n_k`` jobs with identical ``(g_k, c_k, m_k)``: they are interchangeable;
- a *type* ``t`` is a per-GPU demand ``(a_t, b_t) = (c_k/g_k, m_k/g_k)``: a GPU of a split job of type ``t``
  brings ``a_t`` CPUs and ``b_t`` GB wherever it goes (CPU and memory follow GPUs in proportion).

Placement LP (``build_placement_lp``), ``X[i,k] >= 0`` = jobs of class ``k`` on server ``i`` (fractional):

    (P1) min   sum_i sum_k (i + 1) v_k X[i,k]        v_k = g_k/G + c_k/C_i + m_k/M_i     "fill" objective
    (P2)       sum_i X[i,k] = n_k                    block "assign"
    (P3)       sum_k g_k X[i,k] <= G                 block "gpu"
    (P4)       sum_k c_k X[i,k] <= C_i               block "cpu"
    (P5)       sum_k m_k X[i,k] <= M_i               block "mem"

``X <= n_k`` is implied by (P2) and ``X >= 0`` and left out, so every non-zero of a basic solution is basic:
a vertex has at most ``K + 3s`` non-zeros and, laid out by :func:`overlay`, at most ``3s`` split jobs.

Why the zero objective: only a vertex matters (the bound), and the simplex's first feasible vertex keeps
most slack rows basic, so it splits few jobs. Measured on production rounds of 128-1024 GPUs (see
``formulations/placement.md``), "fill" (pack low-numbered servers first, the LP analogue of using the fewest
servers), size-weighted fill and closeness to a best-fit packing split as many jobs or more, lose as much
throughput after rounding, and "fill" makes HiGHS's dual simplex 10x slower on noisy multi-GPU rounds.

Split-job MILPs (``build_min_split_milp``, ``build_integral_milp(formulation="compact")``): integer
``U[i,k]`` = whole jobs of class ``k`` (``g_k <= G``) on server ``i``; ``R[i,t] >= 0`` = GPUs of type ``t``
on server ``i`` that belong to split jobs (continuous: the min-split MILP; integer: integral GPUs):

    (S1) min   n - sum_i sum_k U[i,k]                                         number of split jobs
    (S2)       sum_i R[i,t] + sum_{k in t} g_k sum_i U[i,k] = sum_{k in t} g_k n_k      block "assign"
    (S3)       sum_i U[i,k] <= n_k                                                     block "whole_total"
    (S4)       sum_k g_k U[i,k] + sum_t R[i,t] <= G                                    block "gpu"
    (S5)       sum_k c_k U[i,k] + sum_t a_t R[i,t] <= C_i                              block "cpu"
    (S6)       sum_k m_k U[i,k] + sum_t b_t R[i,t] <= M_i                              block "mem"

Pooling split GPUs by type is exact: any ``R`` is laid out into split jobs of that type, in server order.

Integral-GPU MILP, pattern formulation (``build_integral_milp(formulation="patterns")``): identical servers
make the compact model ``s!``-fold symmetric; here a server is described by its *pattern* ``P[p]``, GPUs per
type (every maximal one is enumerated), and how many servers use it, ``z_p``. Within a server, the GPUs of a
type ``t`` are cut into whole multi-GPU jobs by a *decomposition* ``q`` (jobs per size); ``y[p,t,q]`` counts
servers of pattern ``p`` that cut type ``t`` by ``q``:

    (Q1) min   n - n_1 - sum_{p,t,q} |q| y[p,t,q]          n_1: single-GPU jobs (never split)
    (Q2)       sum_p z_p <= s                                                        block "servers"
    (Q3)       sum_p P[p,t] z_p >= N_t          N_t = GPUs of type t                 block "cover"
    (Q4)       sum_q y[p,t,q] = z_p                                                  block "cut"
    (Q5)       sum_{p,q} q_g y[p,t,q] <= n_{t,g}                                     block "whole_total"

Extra GPUs of a cover (Q3) are left unused, so maximal patterns suffice; types and decompositions are
independent within a server, so the model is exact. It is used while the patterns stay few (``max_patterns``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.float_keys import rounded_mantissa
from synergy_opt.instance import Cluster
from synergy_opt.solvers.model import LinearModel, ModelBuilder

PlacementKind = Literal["lp", "milp", "milp-integral"]
PLACEMENT_KINDS: tuple[PlacementKind, ...] = ("lp", "milp", "milp-integral")
LpObjective = Literal["none", "fill"]
LP_OBJECTIVES: tuple[LpObjective, ...] = ("none", "fill")
Formulation = Literal["auto", "patterns", "compact"]
FORMULATIONS: tuple[Formulation, ...] = ("auto", "patterns", "compact")
# Shares below this many job units are solver noise, not a part of the job (LP tolerances are ~1e-7).
SHARE_TOLERANCE = 1e-6
# Relative shortfall of a solution's job counts tolerated (and spread over its pieces) when reading it back.
COVER_TOLERANCE = 1e-4
# Feasible server patterns enumerated at most, and columns of the pattern model at most: beyond either the
# compact formulation is used (HiGHS spends minutes in presolve on ~10^5 pattern columns, time limit or not).
MAX_PATTERNS = 20_000
MAX_PATTERN_COLUMNS = 50_000
# Relative slack on capacities when enumerating patterns (20.83 GB x 24 must fit 500 GB).
_FIT = 1e-9
# Per-GPU demands equal to this many bits of mantissa (about 12 significant digits) are one type (below).
ALIKE_BITS = 40


@dataclass(frozen=True, eq=False)
class PlacementDemands:
    """What the placement models place: per job ``g_j`` GPUs, ``c*_j`` CPUs and ``m*_j`` GB (totals)."""

    cluster: Cluster
    job_ids: tuple[str, ...]
    gpus: np.ndarray
    cpus: np.ndarray
    mem_gb: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.job_ids)
        seen: set[str] = set()
        for index, job_id in enumerate(self.job_ids):
            if job_id in seen:  # a split job's id would name two jobs
                raise InvalidInputError(f"job_ids[{index}]", job_id, "duplicate job id")
            seen.add(job_id)
        for name in ("gpus", "cpus", "mem_gb"):
            values = np.asarray(getattr(self, name), dtype=float)
            if values.shape != (n,):
                raise InvalidInputError(name, values.shape, f"must hold one value per job ({n})")
            bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
            if bad.size:
                raise InvalidInputError(f"{name}[{bad[0]}]", float(values[bad[0]]), "must be finite and >= 0")
        gpus = np.asarray(self.gpus, dtype=float)
        bad = np.flatnonzero((gpus < 1) | (gpus != np.rint(gpus)))
        if bad.size:
            raise InvalidInputError(f"gpus[{bad[0]}]", float(gpus[bad[0]]), "must be an integer >= 1")
        object.__setattr__(self, "gpus", gpus.astype(np.int64))
        object.__setattr__(self, "cpus", np.asarray(self.cpus, dtype=float))
        object.__setattr__(self, "mem_gb", np.asarray(self.mem_gb, dtype=float))

    @property
    def num_jobs(self) -> int:
        return len(self.job_ids)

    def within_totals(self, tolerance: float) -> PlacementDemands:
        """These demands with every job's CPUs (memory) scaled down alike to the cluster's total where they pass
        it by at most ``tolerance``, relative (an ILP's configs may, by its solver's feasibility tolerance: the
        placement's rows are exact); unchanged otherwise (further off they are no ILP's and stay infeasible)."""
        scaled = {}
        for name, have in (("cpus", self.cluster.total_cpus), ("mem_gb", self.cluster.total_mem_gb)):
            values = getattr(self, name)
            need = float(values.sum())
            scaled[name] = values * (have / need) if have < need <= have * (1 + tolerance) else values
        return replace(self, **scaled)

    def infeasibility(self) -> str | None:
        """Why no placement can exist (cluster totals), or None. The LP is feasible exactly when this is None."""
        cluster = self.cluster
        for name, need, have in (
            ("GPUs", float(self.gpus.sum()), float(cluster.total_gpus)),
            ("CPUs", float(self.cpus.sum()), cluster.total_cpus),
            ("GB of memory", float(self.mem_gb.sum()), cluster.total_mem_gb),
        ):
            if need > have * (1 + _FIT):
                return f"the jobs need {need:.12g} {name} but the cluster has {have:.12g}"  # 20.0000002, not 20
        return None


@dataclass(frozen=True, eq=False)
class JobGroups:
    """Jobs grouped into classes (identical demands) and classes into types (identical per-GPU demand)."""

    gpus: np.ndarray  # per class
    cpus: np.ndarray
    mem_gb: np.ndarray
    count: np.ndarray
    class_jobs: np.ndarray  # job indices, class by class
    class_type: np.ndarray  # type of each class
    type_cpu: np.ndarray  # per GPU, per type
    type_mem: np.ndarray

    @property
    def size(self) -> int:
        return int(self.count.size)

    @property
    def types(self) -> int:
        return int(self.type_cpu.size)

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.count)])

    def jobs_of(self, k: int) -> np.ndarray:
        offsets = self.offsets
        return self.class_jobs[offsets[k]:offsets[k + 1]]


def job_groups(demands: PlacementDemands, aggregate: bool = True) -> JobGroups:
    """Classes and types of ``demands``; without ``aggregate`` every job is its own class."""
    n = demands.num_jobs
    if aggregate:
        key = np.stack([demands.gpus.astype(float), demands.cpus, demands.mem_gb], axis=1)
        _, first, inverse, count = np.unique(key, axis=0, return_index=True, return_inverse=True,
                                             return_counts=True)
        class_jobs = np.argsort(inverse.ravel(), kind="stable")
    else:
        first, count, class_jobs = np.arange(n), np.ones(n, np.int64), np.arange(n)
    gpus, cpus, mem = demands.gpus[first], demands.cpus[first], demands.mem_gb[first]
    # Per-GPU demands alike to ALIKE_BITS bits are one type (3 x 20.83 / 3 and 20.83), which takes its
    # classes' largest. Rounded to 9 decimals instead, three 0.166666667 GB passed a server of 0.5 GB by more
    # than the patterns' relative fit tolerance: exact packings were lost (a false INFEASIBLE, or 2 jobs split
    # where none need be).
    per_gpu = np.stack([cpus / gpus, mem / gpus], axis=1)
    _, class_type = np.unique(rounded_mantissa(per_gpu, ALIKE_BITS), axis=0, return_inverse=True)
    class_type = class_type.ravel()
    type_values = np.zeros((int(class_type.max(initial=-1)) + 1, 2))
    np.maximum.at(type_values, class_type, per_gpu)
    return JobGroups(gpus, cpus, mem, count.astype(np.int64), class_jobs, class_type,
                     type_values[:, 0], type_values[:, 1])


@dataclass(frozen=True, eq=False)
class Patterns:
    """Server patterns (GPUs per type) and, per (pattern, type), the decompositions into whole jobs."""

    gpus: np.ndarray  # (patterns, types)
    cut_pattern: np.ndarray  # per y column: its pattern, type and decomposition
    cut_type: np.ndarray
    cut_jobs: np.ndarray  # (y columns, classes): whole jobs of each class in the decomposition


@dataclass(frozen=True, eq=False)
class PlacementModel:
    """A built placement model plus what is needed to read its solution back per job."""

    kind: PlacementKind
    formulation: str  # "lp", "compact" or "patterns"
    model: LinearModel
    demands: PlacementDemands
    groups: JobGroups
    build_seconds: float
    patterns: Patterns | None = None

    @property
    def servers(self) -> int:
        return self.demands.cluster.servers

    def grid(self, x: np.ndarray, block: str, columns: int) -> np.ndarray:
        """A (servers, columns) view of a server-major variable block."""
        return self.model.block(x, block).reshape(self.servers, columns)

    def decode(self, x: np.ndarray) -> np.ndarray:
        """Per-job shares ``(servers, jobs)``: the fraction of job ``j`` on server ``i`` (columns sum to 1)."""
        groups = self.groups
        if self.formulation == "lp":
            return _layout_lp(groups, np.maximum(self.grid(x, "x", groups.size), 0.0), self.servers)
        if self.formulation == "patterns":
            assert self.patterns is not None
            return _layout_patterns(self, x)
        whole = np.zeros((self.servers, groups.size))
        fits = groups.gpus <= self.demands.cluster.gpus_per_server
        whole[:, fits] = np.rint(self.grid(x, "u", int(fits.sum())))
        split = np.maximum(self.grid(x, "r", groups.types), 0.0)
        if self.kind == "milp-integral":
            split = np.rint(split)
        return _layout_split(groups, whole, split, self.servers)


# -- builders ------------------------------------------------------------------------------------------------
def build_placement_lp(
    demands: PlacementDemands, *, objective: LpObjective = "none", aggregate: bool = True
) -> PlacementModel:
    """The placement LP (P1-P5): a vertex of the feasible set (``objective="none"``), or of the "fill" optimum.

    "fill" charges each server's normalised load by its index, so the LP packs the first servers and leaves
    the slack on the last (it also breaks the symmetry of identical servers); see the module docstring for
    why it is not the default.
    """
    if objective not in LP_OBJECTIVES:
        raise InvalidInputError("objective", objective, f"choose one of {', '.join(LP_OBJECTIVES)}")
    start = time.perf_counter()
    cluster = demands.cluster
    groups = job_groups(demands, aggregate)
    servers, k = cluster.servers, groups.size
    builder = ModelBuilder("placement_lp", "min")
    size = _server_fraction(cluster, groups.gpus, groups.cpus, groups.mem_gb)
    cost = np.outer(np.arange(1, servers + 1), size).ravel() if objective == "fill" else 0.0
    x = builder.add_vars("x", servers * k, objective=cost)
    cells = np.arange(servers * k)
    server_of, class_of = cells // k, cells % k
    builder.add_rows("assign", class_of, x.start + cells, np.ones(cells.size), lower=groups.count,
                     upper=groups.count, count=k)
    _capacity_rows(builder, cluster, [(x.start + cells, server_of, groups.gpus[class_of], groups.cpus[class_of],
                                       groups.mem_gb[class_of])])
    return PlacementModel("lp", "lp", builder.build(), demands, groups, time.perf_counter() - start)


def build_min_split_milp(demands: PlacementDemands, *, aggregate: bool = True) -> PlacementModel:
    """The min-split MILP (S1-S6) with fractional split jobs (``R`` continuous)."""
    start = time.perf_counter()
    groups = job_groups(demands, aggregate)
    model = _split_model(demands.cluster, groups, "placement_min_split", integral=False)
    return PlacementModel("milp", "compact", model, demands, groups, time.perf_counter() - start)


def build_integral_milp(
    demands: PlacementDemands,
    *,
    aggregate: bool = True,
    formulation: Formulation = "auto",
    max_patterns: int = MAX_PATTERNS,
) -> PlacementModel:
    """The integral-GPU MILP: min split jobs, integral GPUs per server, CPU and memory in proportion.

    Parameters
    ----------
    formulation
        ``"patterns"`` (Q1-Q5, no server symmetry), ``"compact"`` (S1-S6 with ``R`` integer), or ``"auto"``:
        patterns unless there are more than ``max_patterns`` feasible server patterns (or the pattern model
        would have more than ``MAX_PATTERN_COLUMNS`` columns).
    """
    if formulation not in FORMULATIONS:
        raise InvalidInputError("formulation", formulation, f"choose one of {', '.join(FORMULATIONS)}")
    start = time.perf_counter()
    cluster = demands.cluster
    groups = job_groups(demands, aggregate)
    if formulation != "compact":
        limit = max_patterns if formulation == "auto" else None
        patterns = _server_patterns(cluster, groups, limit)
        small = patterns is not None and patterns.gpus.shape[0] + patterns.cut_pattern.size <= MAX_PATTERN_COLUMNS
        if patterns is not None and (small or formulation == "patterns"):
            model = _pattern_model(cluster, groups, patterns)
            return PlacementModel("milp-integral", "patterns", model, demands, groups, time.perf_counter() - start,
                                  patterns)
    model = _split_model(cluster, groups, "placement_integral", integral=True)
    return PlacementModel("milp-integral", "compact", model, demands, groups, time.perf_counter() - start)


PLACEMENT_BUILDERS: dict[str, Callable[..., PlacementModel]] = {
    "lp": build_placement_lp, "milp": build_min_split_milp, "milp-integral": build_integral_milp,
}


def build_placement(demands: PlacementDemands, kind: PlacementKind, **options: object) -> PlacementModel:
    """Dispatch on ``kind`` ("lp", "milp" or "milp-integral")."""
    if kind not in PLACEMENT_BUILDERS:
        raise InvalidInputError("placement", kind, f"choose one of {', '.join(PLACEMENT_KINDS)}")
    return PLACEMENT_BUILDERS[kind](demands, **options)


# -- model pieces --------------------------------------------------------------------------------------------
def _server_fraction(cluster: Cluster, gpus: np.ndarray, cpus: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Size of a demand as fractions of a server, summed over GPUs, CPUs and memory."""
    return gpus / cluster.gpus_per_server + cpus / cluster.cpus_per_server + mem / cluster.mem_gb_per_server


def _capacity_rows(
    builder: ModelBuilder,
    cluster: Cluster,
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> None:
    """GPU, CPU and memory rows per server from ``(columns, server, gpus, cpus, mem)`` coefficient parts."""
    columns, server = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    for index, (name, capacity) in enumerate(
        (("gpu", cluster.gpus_per_server), ("cpu", cluster.cpus_per_server), ("mem", cluster.mem_gb_per_server))
    ):
        values = np.concatenate([np.asarray(p[2 + index], dtype=float) for p in parts])
        nonzero = values != 0
        builder.add_rows(name, server[nonzero], columns[nonzero], values[nonzero], upper=capacity,
                         count=cluster.servers)


def _split_model(cluster: Cluster, groups: JobGroups, name: str, *, integral: bool) -> LinearModel:
    """(S1-S6): whole jobs ``U`` per (server, class that fits a server), split GPUs ``R`` per (server, type)."""
    servers, types = cluster.servers, groups.types
    fits = np.flatnonzero(groups.gpus <= cluster.gpus_per_server)
    builder = ModelBuilder(name, "min")
    per_server = np.minimum(groups.count[fits], cluster.gpus_per_server // groups.gpus[fits])
    u = builder.add_vars("u", servers * fits.size, upper=np.tile(per_server, servers).astype(float), integer=True,
                         objective=-1.0)
    r = builder.add_vars("r", servers * types, upper=float(cluster.gpus_per_server), integer=integral)
    u_cells, r_cells = np.arange(servers * fits.size), np.arange(servers * types)
    u_server, u_class = u_cells // max(fits.size, 1), fits[u_cells % max(fits.size, 1)]
    r_server, r_type = r_cells // types, r_cells % types
    units = np.bincount(groups.class_type, weights=groups.gpus * groups.count, minlength=types)
    builder.add_rows("assign", np.concatenate([groups.class_type[u_class], r_type]),
                     np.concatenate([u.start + u_cells, r.start + r_cells]),
                     np.concatenate([groups.gpus[u_class], np.ones(r_cells.size)]), lower=units, upper=units,
                     count=types)
    builder.add_rows("whole_total", u_cells % max(fits.size, 1), u.start + u_cells, np.ones(u_cells.size),
                     upper=groups.count[fits], count=fits.size)
    _capacity_rows(builder, cluster, [
        (u.start + u_cells, u_server, groups.gpus[u_class], groups.cpus[u_class], groups.mem_gb[u_class]),
        (r.start + r_cells, r_server, np.ones(r_cells.size), groups.type_cpu[r_type], groups.type_mem[r_type]),
    ])
    return replace(builder.build(), objective_offset=float(groups.count.sum()))


def _pattern_model(cluster: Cluster, groups: JobGroups, patterns: Patterns) -> LinearModel:
    """(Q1-Q5) over the enumerated patterns and decompositions."""
    count, types = patterns.gpus.shape
    builder = ModelBuilder("placement_integral_patterns", "min")
    z = builder.add_vars("z", count, upper=float(cluster.servers), integer=True)
    cuts = patterns.cut_pattern.size
    whole = patterns.cut_jobs.sum(axis=1)
    y = builder.add_vars("y", cuts, upper=float(cluster.servers), integer=True, objective=-whole.astype(float))
    builder.add_rows("servers", np.zeros(count, np.int64), z.start + np.arange(count), np.ones(count),
                     upper=float(cluster.servers), count=1)
    rows, cols = np.nonzero(patterns.gpus.T)
    units = np.bincount(groups.class_type, weights=groups.gpus * groups.count, minlength=types)
    builder.add_rows("cover", rows, z.start + cols, patterns.gpus.T[rows, cols].astype(float), lower=units,
                     count=types)
    # (Q4): one row per (pattern, type) that has decompositions.
    cut_key = patterns.cut_pattern * types + patterns.cut_type
    keys, cut_row = np.unique(cut_key, return_inverse=True)
    builder.add_rows("cut", np.concatenate([cut_row, np.arange(keys.size)]),
                     np.concatenate([y.start + np.arange(cuts), z.start + keys // types]),
                     np.concatenate([np.ones(cuts), -np.ones(keys.size)]), lower=0.0, upper=0.0, count=keys.size)
    multi = np.flatnonzero(patterns.cut_jobs.any(axis=0))
    rows, cols = np.nonzero(patterns.cut_jobs[:, multi].T)
    builder.add_rows("whole_total", rows, y.start + cols, patterns.cut_jobs[:, multi].T[rows, cols].astype(float),
                     upper=groups.count[multi].astype(float), count=multi.size)
    never_split = float(groups.count[groups.gpus == 1].sum())
    return replace(builder.build(), objective_offset=float(groups.count.sum()) - never_split)


# -- patterns ------------------------------------------------------------------------------------------------
def _server_patterns(cluster: Cluster, groups: JobGroups, limit: int | None) -> Patterns | None:
    """Every maximal server pattern and every decomposition, or None when more than ``limit`` patterns exist."""
    types = groups.types
    cap_cpu = cluster.cpus_per_server * (1 + _FIT)
    cap_mem = cluster.mem_gb_per_server * (1 + _FIT)
    available = np.bincount(groups.class_type, weights=groups.gpus * groups.count, minlength=types).astype(np.int64)
    most = np.minimum(available, cluster.gpus_per_server)
    found = np.zeros((1, types), dtype=np.int64)
    gpus = np.zeros(1, np.int64)
    cpus = np.zeros(1)
    mem = np.zeros(1)
    for t in range(types):
        # Extend every partial pattern by 0..most[t] GPUs of type t, keeping those that fit a server.
        reps = np.arange(most[t] + 1)
        g = gpus[:, None] + reps
        c = cpus[:, None] + reps * groups.type_cpu[t]
        m = mem[:, None] + reps * groups.type_mem[t]
        keep = (g <= cluster.gpus_per_server) & (c <= cap_cpu) & (m <= cap_mem)
        rows, extra = np.nonzero(keep)
        if limit is not None and rows.size > limit:
            return None
        found = found[rows]
        found[:, t] = reps[extra]
        gpus, cpus, mem = g[rows, extra], c[rows, extra], m[rows, extra]
    # Maximal: no GPU of any type (still available) can be added.
    addable = ((gpus[:, None] + 1 <= cluster.gpus_per_server) & (cpus[:, None] + groups.type_cpu <= cap_cpu)
               & (mem[:, None] + groups.type_mem <= cap_mem) & (found < most))
    found = found[~addable.any(axis=1)]
    cut_pattern, cut_type, cut_jobs = _decompositions(cluster, groups, found)
    return Patterns(found, cut_pattern, cut_type, cut_jobs)


def _decompositions(
    cluster: Cluster, groups: JobGroups, patterns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each (pattern, type with multi-GPU jobs), every way to cut its GPUs into whole multi-GPU jobs.

    Returns the y columns as (pattern, type, whole jobs per class). The empty cut is always one of them.
    """
    multi = np.flatnonzero((groups.gpus > 1) & (groups.gpus <= cluster.gpus_per_server))
    out_pattern, out_type, out_jobs = [], [], []
    for t in np.unique(groups.class_type[multi]):
        classes = multi[groups.class_type[multi] == t]
        # All multisets of whole jobs of these classes within a server's GPUs (few: G is small).
        cuts = np.zeros((1, classes.size), dtype=np.int64)
        for position, k in enumerate(classes):
            reps = np.arange(min(groups.count[k], cluster.gpus_per_server // groups.gpus[k]) + 1)
            grown = np.repeat(cuts, reps.size, axis=0)
            grown[:, position] = np.tile(reps, len(cuts))
            cuts = grown[grown @ groups.gpus[classes] <= cluster.gpus_per_server]
        used = cuts @ groups.gpus[classes]
        # Each pattern takes every cut that fits within its GPUs of type t.
        pattern, cut = np.nonzero(used[None, :] <= patterns[:, t][:, None])
        full = np.zeros((cut.size, groups.size), dtype=np.int64)
        full[:, classes] = cuts[cut]
        out_pattern.append(pattern)
        out_type.append(np.full(cut.size, t))
        out_jobs.append(full)
    if not out_pattern:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, groups.size), np.int64)
    return np.concatenate(out_pattern), np.concatenate(out_type), np.concatenate(out_jobs)


# -- reading solutions back ----------------------------------------------------------------------------------
def overlay(
    job_line: np.ndarray, job_size: np.ndarray, piece_line: np.ndarray, piece_len: np.ndarray, lines: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lay jobs and server pieces side by side on lines; return ``(job, piece, amount)`` of every overlap.

    Jobs (sorted by line) occupy consecutive intervals of their sizes; so do pieces (sorted by line), each
    line's pieces cut to its jobs' total (a shortfall of solver noise is spread over its pieces). A piece
    overlaps at most two jobs partially, so a line with ``p`` pieces has at most ``p - 1`` jobs on two or
    more pieces: over all lines, at most ``pieces - lines``. At a vertex of the LP that is ``<= 3s``.
    """
    need = np.bincount(job_line, weights=job_size, minlength=lines)
    have = np.bincount(piece_line, weights=piece_len, minlength=lines)
    # First-order solvers (no crossover) are accurate to ~1e-6; anything worse is not a placement.
    short = have < need * (1 - COVER_TOLERANCE)
    if short.any():
        bad = int(np.flatnonzero(short)[0])
        raise InvalidInputError("solution", float(have[bad]), f"covers {have[bad]:g} of the {need[bad]:g} units "
                                f"of line {bad}")
    scale = np.divide(need, have, out=np.ones(lines), where=(have > 0) & (have < need))
    piece_len = piece_len * scale[piece_line]
    line_start = np.concatenate([[0.0], np.cumsum(need)])
    cumulative = np.cumsum(piece_len)
    first = np.searchsorted(piece_line, np.arange(lines))
    before = np.concatenate([[0.0], cumulative])[first]
    piece_end = line_start[piece_line] + np.minimum(cumulative - before[piece_line], need[piece_line])
    job_end = np.cumsum(job_size.astype(float))
    points = np.unique(np.concatenate([[0.0], job_end, piece_end]))
    middle = (points[:-1] + points[1:]) / 2
    amount = np.diff(points)
    job = np.searchsorted(job_end, middle, side="right")
    piece = np.searchsorted(piece_end, middle, side="right")
    keep = (amount > 1e-12) & (job < job_end.size) & (piece < piece_end.size)
    return job[keep], piece[keep], amount[keep]


def _shares(servers: int, jobs: int, job: np.ndarray, server: np.ndarray, fraction: np.ndarray) -> np.ndarray:
    shares = np.zeros((servers, jobs))
    np.add.at(shares, (server, job), fraction)
    shares[shares < SHARE_TOLERANCE] = 0.0
    return shares / np.maximum(shares.sum(axis=0), 1e-300)


def _layout_lp(groups: JobGroups, counts: np.ndarray, servers: int) -> np.ndarray:
    """(P) solution -> shares: one line per class, jobs of one unit, pieces ``X[i,k]`` in server order."""
    counts = np.where(counts > SHARE_TOLERANCE, counts, 0.0)
    piece_line = np.repeat(np.arange(groups.size), servers)
    piece_server = np.tile(np.arange(servers), groups.size)
    job_line = np.repeat(np.arange(groups.size), groups.count)
    job, piece, amount = overlay(job_line, np.ones(job_line.size), piece_line, counts.T.ravel(), groups.size)
    return _shares(servers, job_line.size, groups.class_jobs[job], piece_server[piece], amount)


def _layout_split(groups: JobGroups, whole: np.ndarray, split: np.ndarray, servers: int) -> np.ndarray:
    """(S) solution -> shares. Per class, its first ``sum_i U[i,k]`` jobs are whole, laid over ``U[:,k]``;
    per type, the other jobs of its classes are laid, in GPUs, over ``R[:,t]`` in server order."""
    num_whole = np.minimum(whole.sum(axis=0), groups.count).astype(np.int64)
    offsets = groups.offsets
    rank = np.arange(groups.class_jobs.size) - np.repeat(offsets[:-1], groups.count)
    klass = np.repeat(np.arange(groups.size), groups.count)
    is_whole = rank < num_whole[klass]
    # Lines: one per class for its whole jobs, then one per type for the split ones.
    order = np.lexsort((rank, klass, np.where(is_whole, klass, groups.size + groups.class_type[klass])))
    job_line = np.where(is_whole, klass, groups.size + groups.class_type[klass])[order]
    job_size = np.where(is_whole, 1.0, groups.gpus[klass].astype(float))[order]
    split = np.where(split > SHARE_TOLERANCE, split, 0.0)
    piece_len = np.concatenate([whole.T.ravel(), split.T.ravel()])
    piece_line = np.concatenate([np.repeat(np.arange(groups.size), servers),
                                 groups.size + np.repeat(np.arange(groups.types), servers)])
    piece_server = np.tile(np.arange(servers), groups.size + groups.types)
    job, piece, amount = overlay(job_line, job_size, piece_line, piece_len, groups.size + groups.types)
    return _shares(servers, job_line.size, groups.class_jobs[order][job], piece_server[piece],
                   amount / job_size[job])


def _layout_patterns(placement: PlacementModel, x: np.ndarray) -> np.ndarray:
    """(Q) solution -> shares: servers take patterns in order; each (pattern, type) hands its decompositions
    to its servers in order; whole jobs go where cut, the rest of each type is laid over the GPUs left."""
    patterns, groups, servers = placement.patterns, placement.groups, placement.servers
    assert patterns is not None
    z = np.rint(placement.model.block(x, "z")).astype(np.int64)
    y = np.rint(placement.model.block(x, "y")).astype(np.int64)
    server_pattern = np.repeat(np.arange(z.size), z)[:servers]
    types = groups.types
    whole = np.zeros((servers, groups.size))
    used = np.zeros((servers, types))
    # Per (pattern, type): its servers in order take its cuts, y[c] servers per cut c.
    first_server = np.concatenate([[0], np.cumsum(z)])[:-1]
    cut_order = np.lexsort((np.arange(y.size), patterns.cut_type, patterns.cut_pattern))
    for p, t in {(int(p), int(t)) for p, t in zip(patterns.cut_pattern[y > 0], patterns.cut_type[y > 0],
                                                    strict=True)}:
        mine = cut_order[(patterns.cut_pattern[cut_order] == p) & (patterns.cut_type[cut_order] == t)]
        assigned = np.repeat(mine, y[mine])[: z[p]]
        hosts = first_server[p] + np.arange(assigned.size)
        whole[hosts] += patterns.cut_jobs[assigned]
        used[hosts, t] += patterns.cut_jobs[assigned] @ groups.gpus
    # Servers without a pattern (sum z < s) stay empty.
    left = -used
    left[: server_pattern.size] += patterns.gpus[server_pattern]
    return _layout_split(groups, whole, left, servers)
