"""SPEC 2.4 as written (``build_joint_literal``): binary config choices, integer GPUs per server, no reductions.

The reference every reduction of :func:`synergy_opt.joint.model.build_joint` is tested against; small
instances only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from synergy_opt.ideal.model import Objective, with_zero_config
from synergy_opt.instance import Allocation, Placement, RoundInstance
from synergy_opt.joint.model import check_options
from synergy_opt.solvers.model import LinearModel, ModelBuilder


@dataclass(frozen=True, eq=False)
class LiteralJointModel:
    """SPEC 2.4 as written: binary ``y[j,k]``, integer ``n[i,j,k]``, binary ``u[i,j,k]`` (job whole on ``i``).

    The reference for every reduction of :func:`build_joint`; only for small instances.
    """

    model: LinearModel
    instance: RoundInstance
    consolidate: bool
    split_penalty: float
    objective_kind: Objective
    col_job: np.ndarray  # job of each (job, config) column
    col_cpu: np.ndarray
    col_mem: np.ndarray
    build_seconds: float
    formulation: str = "literal"

    def allocation(self, x: np.ndarray) -> Allocation:
        servers = self.instance.cluster.servers
        y = np.rint(self.model.block(x, "y")).astype(np.int64)
        n = np.rint(self.model.block(x, "n")).astype(np.int64).reshape(servers, -1)
        jobs: dict[str, tuple[Placement, ...]] = {}
        for col in np.flatnonzero(y):
            c, m = self.col_cpu[col], self.col_mem[col]
            on = np.flatnonzero(n[:, col])
            jobs[self.instance.jobs[self.col_job[col]].id] = tuple(
                Placement(int(s), int(n[s, col]), n[s, col] * c, n[s, col] * m) for s in on
            )
        return Allocation(jobs)


def build_joint_literal(
    instance: RoundInstance,
    *,
    consolidate: bool = False,
    split_penalty: float = 0.0,
    objective: Objective = "job",
) -> LiteralJointModel:
    """SPEC 2.4 with nothing reduced: every job, every grid config (the proportional point inserted; no CPUs and no
    memory for a job of floor 0, ideal.model.with_zero_config), every server.

    ``u[i,j,k]`` exists for jobs with ``1 < g_j <= G``: ``n[i,j,k] >= g_j u[i,j,k]`` and
    ``sum_i u[i,j,k] <= y[j,k]`` (``=`` when consolidating); the objective credits
    ``(1 - p) W y + p W sum_i u``, i.e. ``W`` for a whole job and ``(1 - p) W`` for a split one.
    """
    start = time.perf_counter()
    check_options(objective, split_penalty, None, "patterns")
    cluster = instance.cluster
    servers, big_g = cluster.servers, cluster.gpus_per_server
    # Seeded with empty arrays so that a round without jobs gives an empty model.
    col_job: list[np.ndarray] = [np.zeros(0, np.int64)]
    col_cpu: list[np.ndarray] = [np.zeros(0)]
    col_mem: list[np.ndarray] = [np.zeros(0)]
    col_tput: list[np.ndarray] = [np.zeros(0)]
    for j, job in enumerate(instance.jobs):
        profile = job.profile.with_point(cluster.cpu_per_gpu, cluster.mem_gb_per_gpu)
        cpu_axis, mem_axis, grid = with_zero_config(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput[None],
                                                    instance.floors[j:j + 1])
        a, b = np.meshgrid(cpu_axis, mem_axis, indexing="ij")
        col_job.append(np.full(a.size, j))
        col_cpu.append(a.ravel())
        col_mem.append(b.ravel())
        col_tput.append(grid[0].ravel())
    job_of = np.concatenate(col_job)
    cpu, mem, tput = np.concatenate(col_cpu), np.concatenate(col_mem), np.concatenate(col_tput)
    g = instance.gpus[job_of]
    ncols = job_of.size
    jobs = len(instance.jobs)
    has_u = (g > 1) & (g <= big_g) & (consolidate or split_penalty > 0)
    # A consolidated job is whole, so y carries all of W; otherwise y carries (1 - p) W and u the rest.
    whole_forced = consolidate & (g <= big_g)
    weight = tput * np.where((g > 1) & ~whole_forced, 1.0 - split_penalty, 1.0)
    weight_u = tput * (0.0 if consolidate else split_penalty)
    scale = g if objective == "gpu" else 1
    u_cols_of = np.flatnonzero(has_u)

    builder = ModelBuilder("joint_literal", "max")
    y = builder.add_vars("y", ncols, upper=1.0, integer=True, objective=weight * scale)
    n = builder.add_vars("n", servers * ncols, upper=np.tile(np.minimum(g, big_g), servers).astype(float), integer=True)
    u = builder.add_vars("u", servers * u_cols_of.size, upper=1.0, integer=True,
                         objective=np.tile((weight_u * scale)[u_cols_of], servers))
    y_idx = np.arange(y.start, y.stop)
    n_idx = np.arange(n.start, n.stop).reshape(servers, ncols)
    u_idx = np.arange(u.start, u.stop).reshape(servers, u_cols_of.size)
    builder.add_rows("assign", job_of, y_idx, np.ones(ncols), lower=1.0, upper=1.0, count=jobs)
    builder.add_rows("floor", job_of, y_idx, tput, lower=instance.floors, count=jobs, equilibrate=True)
    builder.add_rows(
        "link",
        np.concatenate([np.tile(np.arange(ncols), servers), np.arange(ncols)]),
        np.concatenate([n_idx.ravel(), y_idx]),
        np.concatenate([np.ones(servers * ncols), -g.astype(float)]),
        lower=0.0, upper=0.0, count=ncols,
    )
    rows = np.repeat(np.arange(servers), ncols)
    for name, per_gpu, capacity in (("gpu", np.ones(ncols), float(big_g)), ("cpu", cpu, cluster.cpus_per_server),
                                    ("mem", mem, cluster.mem_gb_per_server)):
        builder.add_rows(name, rows, n_idx.ravel(), np.tile(per_gpu, servers), upper=capacity, count=servers)
    if u_cols_of.size:
        k = u_cols_of.size
        # n[i,j,k] - g u[i,j,k] >= 0: a job counted whole on server i has all its GPUs there.
        builder.add_rows(
            "whole",
            np.tile(np.arange(servers * k), 2),
            np.concatenate([n_idx[:, u_cols_of].ravel(), u_idx.ravel()]),
            np.concatenate([np.ones(servers * k), -np.tile(g[u_cols_of], servers).astype(float)]),
            lower=0.0, count=servers * k,
        )
        # sum_i u[i,j,k] - y[j,k] <= 0 (= 0 when consolidating: the job must be whole somewhere).
        builder.add_rows(
            "one_server",
            np.concatenate([np.tile(np.arange(k), servers), np.arange(k)]),
            np.concatenate([u_idx.ravel(), y_idx[u_cols_of]]),
            np.concatenate([np.ones(servers * k), -np.ones(k)]),
            lower=0.0 if consolidate else -np.inf, upper=0.0, count=k,
        )
    return LiteralJointModel(
        model=builder.build(),
        instance=instance,
        consolidate=consolidate,
        split_penalty=float(split_penalty),
        objective_kind=objective,
        col_job=job_of,
        col_cpu=cpu,
        col_mem=mem,
        build_seconds=time.perf_counter() - start,
    )
