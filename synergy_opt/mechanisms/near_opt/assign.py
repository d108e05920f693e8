"""Placing jobs' GPUs on servers so that the target configs of the jobs sharing a server fit together.

Every job comes with a target per-GPU config (its priced ideal config). A job is one *chunk* when its GPUs and
their target CPUs and memory fit on one server, else chunks of the most GPUs that do (a job larger than a
server, or one whose target needs more than a server's CPUs or memory). Chunks are placed largest first, in
rounds: each round matches the chunks that need the most CPU and memory (priced) with the servers that have
the most room left, where a server's room counts what its still-free GPUs will need at the average target
of the chunks still to come (so room is reserved for the jobs still to come). A chunk too large for any
server's free GPUs is spread over the servers with the most free GPUs. Every GPU of every job is placed
when the round's GPUs fit the cluster.

Public API
----------
``assign_chunks(instance, gpus, cpu, mem, weights) -> Entries``
"""

from __future__ import annotations

from dataclasses import dataclass

import os

import numpy as np
from scipy.optimize import linear_sum_assignment

from synergy_opt.instance import RoundInstance


@dataclass(frozen=True)
class Entries:
    """``gpus[k]`` GPUs of job ``job[k]`` on server ``server[k]``; a job has one entry per server it uses."""

    job: np.ndarray
    server: np.ndarray
    gpus: np.ndarray


def chunk_sizes(gpus: np.ndarray, cpu: np.ndarray, mem: np.ndarray, instance: RoundInstance) -> np.ndarray:
    """Per job, the most GPUs of it one server can hold at its per-GPU target (at least 1)."""
    cluster = instance.cluster
    most = np.minimum(gpus, cluster.gpus_per_server)
    with np.errstate(divide="ignore"):
        by_cpu = np.floor(cluster.cpus_per_server * (1 + 1e-9) / np.where(cpu > 0, cpu, np.inf))
        by_mem = np.floor(cluster.mem_gb_per_server * (1 + 1e-9) / np.where(mem > 0, mem, np.inf))
    return np.maximum(np.minimum(most, np.minimum(by_cpu, by_mem)).astype(np.int64), 1)


def assign_chunks(
    instance: RoundInstance, cpu: np.ndarray, mem: np.ndarray, weights: np.ndarray, chunk: np.ndarray
) -> Entries:
    """Place every job's GPUs (see the module docstring); ``cpu``, ``mem`` are the per-GPU targets.

    ``weights`` (CPU, memory) scores a use of both resources as one number: how scarce each is.
    ``chunk[j]`` is the most GPUs of job ``j`` to put on one server together.
    """
    cluster = instance.cluster
    gpus = instance.gpus
    servers = cluster.servers
    # The chunks: job j gives gpus // chunk chunks of `chunk` GPUs and one of the remainder.
    whole = gpus // chunk
    rest = gpus - whole * chunk
    item_job = np.concatenate([np.repeat(np.arange(gpus.size), whole), np.flatnonzero(rest)])
    item_size = np.concatenate([np.repeat(chunk, whole), rest[rest > 0]])
    scale = np.array([cluster.cpus_per_server, cluster.mem_gb_per_server])
    per_gpu = np.column_stack((cpu, mem))[item_job] / scale  # fractions of a server per GPU
    weight = weights / weights.sum()
    cost = per_gpu @ weight  # one number per GPU of the item
    order = np.lexsort((-cost, -item_size))
    item_job, item_size, per_gpu, cost = item_job[order], item_size[order], per_gpu[order], cost[order]
    if os.environ.get("LAP"):
        return _assign_lap(instance, item_job, item_size, per_gpu)

    free = np.full(servers, cluster.gpus_per_server, dtype=np.int64)
    used = np.zeros(servers)  # weighted use, fractions of a server
    left_gpus = float(item_size.sum())
    left_use = float((item_size * cost).sum())
    out_job: list[np.ndarray] = []
    out_server: list[np.ndarray] = []
    out_gpus: list[np.ndarray] = []
    sizes = np.unique(item_size)[::-1]
    for size in sizes:
        pending = np.flatnonzero(item_size == size)  # costliest first
        while pending.size:
            mean = left_use / left_gpus if left_gpus > 0 else 0.0
            # Projected use: what is placed plus the free GPUs at the mean cost still to come.
            projected = used + free * mean
            eligible = np.flatnonzero(free >= size)
            if eligible.size == 0:
                for item in pending:
                    spread_job, spread_server, spread_gpus = _spread(int(item_job[item]), int(size), free)
                    used[spread_server] += spread_gpus * cost[item]
                    out_job.append(spread_job)
                    out_server.append(spread_server)
                    out_gpus.append(spread_gpus)
                left_gpus -= float(size * pending.size)
                left_use -= float(size * cost[pending].sum())
                break
            # One chunk per server this round: chunks above the mean cost go to the roomiest servers (the
            # costliest to the roomiest), chunks below it to the fullest (the cheapest to the fullest).
            count = min(pending.size, eligible.size)
            take = pending[:count]
            by_room = eligible[np.argsort(projected[eligible], kind="stable")]
            above = int(np.count_nonzero(cost[take] > mean))
            rooms = np.concatenate([by_room[:above], by_room[::-1][: count - above][::-1]])
            used[rooms] += size * cost[take]
            free[rooms] -= size
            left_gpus -= float(size * count)
            left_use -= float(size * cost[take].sum())
            out_job.append(item_job[take])
            out_server.append(rooms)
            out_gpus.append(np.full(count, size, dtype=np.int64))
            pending = pending[count:]
    job = np.concatenate(out_job) if out_job else np.zeros(0, dtype=np.int64)
    server = np.concatenate(out_server) if out_server else np.zeros(0, dtype=np.int64)
    count = np.concatenate(out_gpus) if out_gpus else np.zeros(0, dtype=np.int64)
    return _merge(job, server, count)


def _spread(job: int, size: int, free: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A chunk over the servers with the most free GPUs (fewest servers)."""
    order = np.argsort(-free, kind="stable")
    reach = np.cumsum(free[order])
    count = int(np.searchsorted(reach, size)) + 1
    servers = order[:count]
    gpus = free[servers].copy()
    gpus[-1] -= int(reach[count - 1]) - size
    free[servers] -= gpus
    return np.full(count, job), servers, gpus


def _merge(job: np.ndarray, server: np.ndarray, gpus: np.ndarray) -> Entries:
    """One entry per (job, server): chunks of one job on one server are added up."""
    key = job * (server.max(initial=0) + 1) + server
    unique, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=gpus).astype(np.int64)
    return Entries(unique // (server.max(initial=0) + 1), unique % (server.max(initial=0) + 1), total)


def _assign_lap(instance: RoundInstance, item_job: np.ndarray, item_size: np.ndarray, per_gpu: np.ndarray) -> Entries:
    cluster = instance.cluster
    servers = cluster.servers
    free = np.full(servers, cluster.gpus_per_server, dtype=np.int64)
    used = np.zeros((servers, 2))
    left_gpus = float(item_size.sum())
    left_use = (item_size[:, None] * per_gpu).sum(axis=0)
    out_job, out_server, out_gpus = [], [], []
    for size in np.unique(item_size)[::-1]:
        pending = np.flatnonzero(item_size == size)
        while pending.size:
            mean = left_use / left_gpus if left_gpus > 0 else np.zeros(2)
            eligible = np.flatnonzero(free >= size)
            if eligible.size == 0:
                for item in pending:
                    sj, ss, sg = _spread(int(item_job[item]), int(size), free)
                    used[ss] += sg[:, None] * per_gpu[item]
                    out_job.append(sj); out_server.append(ss); out_gpus.append(sg)
                left_gpus -= float(size * pending.size)
                left_use -= size * per_gpu[pending].sum(axis=0)
                break
            count = min(pending.size, eligible.size)
            take = pending[:count]
            projected = used[eligible] + free[eligible, None] * mean - 1.0  # (eligible, 2)
            step = size * (per_gpu[take] - mean)  # (count, 2)
            cost = 2 * step @ projected.T + (step ** 2).sum(axis=1)[:, None]
            rows, cols = linear_sum_assignment(cost)
            rooms = eligible[cols]
            take = take[rows]
            used[rooms] += size * per_gpu[take]
            free[rooms] -= size
            left_gpus -= float(size * count)
            left_use -= size * per_gpu[take].sum(axis=0)
            out_job.append(item_job[take]); out_server.append(rooms); out_gpus.append(np.full(count, size, dtype=np.int64))
            pending = pending[count:]
    return _merge(np.concatenate(out_job), np.concatenate(out_server), np.concatenate(out_gpus))
