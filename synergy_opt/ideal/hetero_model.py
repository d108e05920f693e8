"""The ideal ILP of a heterogeneous round, type-free (formulations/heterogeneous.md, eqs. H0-H7; SPEC 7).

One super-machine per GPU type ``t``, with all ``s_t G_t`` GPUs, ``s_t C_t`` CPUs and ``s_t M_t`` GB of its
servers. Each job picks a type and a per-GPU config there: binary ``y[j,t,k]`` (an integer count per class
when jobs are merged), for the types the job may take.

    (H0)       j may take t  iff  W_j^t(c_t, m_t) >= floor_j       (its matrix there at t's proportional share
                                                                  reaches its floor)     admissible
    (H1) max   sum_j sum_t sum_k w_j W_j^t[k] y[j,t,k]          w_j = 1 (per job) or g_j (GPU-weighted)
    (H2)       sum_j sum_k g_j y[j,t,k]       <= s_t G_t    per t      block "gpu"    build_hetero_ideal
    (H3)       sum_j sum_k g_j c_k y[j,t,k]   <= s_t C_t    per t      block "cpu"    build_hetero_ideal
    (H4)       sum_j sum_k g_j m_k y[j,t,k]   <= s_t M_t    per t      block "mem"    build_hetero_ideal
    (H5)       sum_t sum_k y[j,t,k] = |class j|                        block "assign" build_hetero_ideal
    (H6)       W_j^t[k] >= W_j^t(c_t, m_t)  for every y[j,t,k] > 0     configs below removed, or block "floor"
    (H7)       c*_j = g_j c_k, m*_j = g_j m_k, type t_j = t   for the (t, k) chosen: HeteroIdealModel.decode

``floor_j`` is job ``j``'s throughput at the proportional share of its baseline type ``b_j``. By (H0) and (H6)
a job on type ``t`` gets at least ``t``'s proportional share's throughput, which is at least its baseline's:
no job is worse off than GPU-proportional on the type it runs on, nor than on its baseline. So the type-free
model is the best choice of types followed by today's model on each type (H8), and every homogeneous
formulation and mechanism applies to each type unchanged. (H6) as a row, ``sum_{t,k} (W_j^t[k] - W_j^t(c_t,
m_t)) y[j,t,k] >= 0``, is exact for one job. Exact reductions as in the homogeneous ILP
(:class:`~synergy_opt.ideal.model.Reductions`): configs below the floor removed, dominated configs removed
within each type, jobs alike in GPUs, baseline and every type's matrix merged into a class. Each type's
configs are those of :func:`~synergy_opt.ideal.model.config_columns`, the homogeneous builder's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.model import (
    OBJECTIVE,
    Objective,
    Reductions,
    columns_of_jobs,
    config_columns,
    fits_alone,
    row_labels,
)
from synergy_opt.profile_groups import ProfileGroup
from synergy_opt.solvers.model import LinearModel, ModelBuilder
from synergy_opt.validation import InstanceOf, Optional, checked

COUPLING = ("gpu", "cpu", "mem")


@dataclass(frozen=True, eq=False)
class HeteroIdealModel:
    """The built ILP of a heterogeneous round, plus what reads a solution back per job (type and config)."""

    model: LinearModel
    instance: HeteroRound
    objective_kind: Objective
    reductions: Reductions
    col_class: np.ndarray  # class of each y column (columns are grouped by class, in class order)
    col_type: np.ndarray  # type (its position in the cluster) of each column's config
    col_cpu: np.ndarray
    col_mem: np.ndarray
    col_tput: np.ndarray
    class_count: np.ndarray
    class_jobs: np.ndarray  # job indices, grouped by class in class order
    build_seconds: float
    allowed: np.ndarray  # (jobs, types): the types each job may take (H0), as admissible gives them

    @property
    def num_classes(self) -> int:
        return int(self.class_count.size)

    def decode(self, y: np.ndarray) -> np.ndarray:
        """Column chosen for each job (job order) from an integral ``y``."""
        return columns_of_jobs(y, self.class_jobs)

    @cached_property
    def coupling_rows(self) -> np.ndarray:
        """The rows of (H2)-(H4), GPU, CPU and memory, type by type within each block."""
        blocks = self.model.con_blocks
        return np.concatenate([np.arange(blocks[name].start, blocks[name].stop) for name in COUPLING])


@dataclass(frozen=True)
class TypeView:
    """The jobs with a matrix on one type, their matrices grouped by axes, and every job's throughput at the
    type's proportional share (NaN without a matrix there): read once per type, shared by the builder's steps
    (at 16384 GPUs grouping the matrices again for each step was most of the build)."""

    members: np.ndarray
    groups: list[ProfileGroup]
    share: np.ndarray


def type_views(instance: HeteroRound) -> list[TypeView]:
    views = []
    for name in instance.cluster.names:
        on_type = instance.type_profiles[name]
        views.append(TypeView(on_type.members, list(on_type.groups), instance.throughput_at_share(name)))
    return views


def admissible(instance: HeteroRound, views: list[TypeView] | None = None) -> np.ndarray:
    """``(jobs, types)``: whether job ``j`` may take type ``t`` (H0): it has a matrix there and that type's
    proportional share gives it at least its floor (so every mechanism's GPU-proportional fallback keeps the
    floor on any type it may get). A job's baseline type always qualifies. ``views``: the round's
    :func:`type_views`, when already read."""
    views = type_views(instance) if views is None else views
    n = len(instance.jobs)
    baseline = instance.baseline_index
    shares = np.column_stack([view.share for view in views]) if views else np.zeros((n, 0))
    floors = shares[np.arange(n), baseline]  # the floor (D7): the share of the baseline type
    ok = ~np.isnan(shares) & (np.nan_to_num(shares, nan=-np.inf) >= floors[:, None])
    ok[np.arange(n), baseline] = True
    return ok


def job_classes(instance: HeteroRound, merge: bool = True, views: list[TypeView] | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Classes of alike jobs: equal GPUs, baseline and matrix (by value) on every type they may take.

    Returns the class of each job, each class's first job (its representative) and each class's count;
    classes are numbered in the order of their first jobs. Without ``merge`` every job is its own class.
    ``views``: the round's :func:`type_views`, when already read.
    """
    jobs, cluster = instance.jobs, instance.cluster
    n = len(jobs)
    if not merge:
        return np.arange(n), np.arange(n), np.ones(n, dtype=np.int64)
    views = type_views(instance) if views is None else views
    allowed = admissible(instance, views)
    labels = np.full((n, len(cluster.types)), -1, dtype=np.int64)
    for k, view in enumerate(views):
        for g, group in enumerate(view.groups):
            rows = row_labels(group.tput.reshape(len(group.tput), -1))
            labels[view.members[group.jobs], k] = g * (n + 1) + rows[group.row]
    labels[~allowed] = -1  # a type a job may not take does not tell it apart
    # Every job a class of its own when some type's labels already tell every job apart (noisy matrices): what
    # np.unique's sort of whole rows below returns then, without it (4 ms at 3072 jobs).
    for column in labels.T:
        if np.unique(column).size == n:
            return np.arange(n), np.arange(n), np.ones(n, dtype=np.int64)
    baseline = instance.baseline_index
    key = np.column_stack([instance.gpus, baseline, labels])
    _, first, inverse, count = np.unique(key, axis=0, return_index=True, return_inverse=True, return_counts=True)
    # Classes in the order of their first jobs (np.unique orders them by key).
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    order = np.argsort(first, kind="stable")
    return rank[inverse.ravel()], first[order], count[order].astype(np.int64)


@checked(instance=InstanceOf(HeteroRound), objective=OBJECTIVE, reductions=Optional(InstanceOf(Reductions)))
def build_hetero_ideal(instance: HeteroRound, *, objective: Objective = "job",
                       reductions: Reductions | None = None) -> HeteroIdealModel:
    """Build the type-free ideal ILP of ``instance`` (the module docstring's equations)."""
    start = time.perf_counter()
    reductions = reductions or Reductions()
    cluster = instance.cluster
    jobs = instance.jobs
    types = len(cluster.types)
    views = type_views(instance)
    allowed = admissible(instance, views)
    gpus = instance.gpus
    class_of, representatives, count = job_classes(instance, reductions.merge_identical, views)
    class_jobs = np.argsort(class_of, kind="stable")
    class_index = np.full(len(jobs), -1, dtype=np.int64)
    class_index[representatives] = np.arange(representatives.size)

    pieces: list[tuple[np.ndarray, ...]] = []
    for k, (server_type, view) in enumerate(zip(cluster.types, views, strict=True)):
        share = view.share[representatives]  # the floor on this type (H6)
        for group in view.groups:
            # The group's members that represent a class allowed on this type, as a group of their own.
            owner = class_index[view.members[group.jobs]]
            taken = np.flatnonzero(owner >= 0)
            taken = taken[allowed[representatives[owner[taken]], k]]
            if not taken.size:
                continue
            owner = owner[taken]
            sub = ProfileGroup(group.cpu_axis, group.mem_axis, group.tput, np.arange(taken.size), group.row[taken])
            row, cpu, mem, tput = config_columns(sub, server_type.cpu_per_gpu, server_type.mem_gb_per_gpu,
                                                 share[owner], reductions)
            pieces.append((owner[row], np.full(row.size, k, dtype=np.int64), cpu, mem, tput, share[owner[row]]))
    col_class, col_type, col_cpu, col_mem, col_tput, col_floor = (
        np.concatenate([piece[i] for piece in pieces]) if pieces else np.zeros(0, dtype=dtype)
        for i, dtype in enumerate((np.int64, np.int64, float, float, float, float))
    )
    order = np.lexsort((np.arange(col_class.size), col_type, col_class))  # class, then type, then config order
    col_class, col_type, col_cpu, col_mem, col_tput, col_floor = (
        a[order] for a in (col_class, col_type, col_cpu, col_mem, col_tput, col_floor))
    class_gpus = gpus[representatives]
    capacity = np.array([[t.total_gpus, t.servers * t.cpus_per_server, t.servers * t.mem_gb_per_server]
                         for t in cluster.types], dtype=float).reshape(-1, 3)
    held = fits_alone(class_gpus[col_class], col_cpu, col_mem, capacity[col_type, 1], capacity[col_type, 2])
    col_class, col_type, col_cpu, col_mem, col_tput, col_floor = (
        a[held] for a in (col_class, col_type, col_cpu, col_mem, col_tput, col_floor))
    col_gpus = class_gpus[col_class]

    builder = ModelBuilder("hetero_ideal_allocation", "max")
    weight = col_tput * (col_gpus if objective == "gpu" else 1.0)
    y = builder.add_vars("y", col_class.size, lower=0.0, upper=count[col_class].astype(float), integer=True,
                         objective=weight)
    columns = np.arange(y.start, y.stop)
    builder.add_rows("assign", col_class, columns, np.ones(col_class.size), lower=count, upper=count,
                     count=count.size)
    for r, (name, use) in enumerate(zip(COUPLING, (col_gpus, col_gpus * col_cpu, col_gpus * col_mem), strict=True)):
        builder.add_rows(name, col_type, columns, use.astype(float), upper=capacity[:, r], count=types)
    if not reductions.fix_below_floor:
        builder.add_rows("floor", col_class, columns, col_tput - col_floor, lower=0.0, count=count.size,
                         equilibrate=True)
    return HeteroIdealModel(
        model=builder.build(), instance=instance, objective_kind=objective, reductions=reductions,
        col_class=col_class, col_type=col_type, col_cpu=col_cpu, col_mem=col_mem, col_tput=col_tput,
        class_count=count.astype(np.int64), class_jobs=class_jobs, build_seconds=time.perf_counter() - start,
        allowed=allowed,
    )
