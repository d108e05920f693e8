"""Placing jobs' GPUs on servers so that the target configs of the jobs sharing a server fit together.

Every job comes with a target per-GPU config (its priced ideal config). It is cut into *chunks*, GPUs that go
to one server together: a job at the proportional share is one chunk when it fits a server (its neighbours
do not care where it runs), else chunks of the most GPUs a server holds; a multi-GPU job above or below the
proportional share in CPU or memory is cut into single GPUs, so that its GPUs can sit next to jobs that
complement it (a CPU-hungry job beside one that gives CPU away). Chunks of one job that land on one server
join again; a job whose chunks land on several servers is split (CPU and memory per GPU the same on each).

Chunks are placed largest first, in rounds: each round gives at most one chunk to each server with room for
it, by an optimal assignment (``scipy.optimize.linear_sum_assignment``; in interleaved blocks of at most
``BLOCK`` servers on large clusters) of the round's chunks to the servers
that minimises the growth of the sum over servers of the squared *projected excess*: what is placed on a
server, plus its still-free GPUs at the average target per GPU of the chunks still to come (room reserved
for the jobs still to come), minus its capacity, in CPU and memory as fractions of a server. A chunk larger
than every server's free GPUs is spread over the servers with the most free GPUs. Every GPU of every job is
placed when the round's GPUs fit the cluster.

Public API
----------
``Entries``
``chunk_sizes(instance, cpu_per_gpu, mem_per_gpu) -> ndarray``
``blocks(count, parts=None) -> list[ndarray]``
``assign_chunks(instance, cpu_per_gpu, mem_per_gpu, chunk) -> Entries`` (chunks)
``merge_entries(job, server, gpus) -> Entries``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from synergy_opt.instance import RoundInstance

# Relative slack when comparing per-GPU values with the proportional share.
_TOLERANCE = 1e-9
# Largest optimal assignment solved at once (servers); larger rounds are cut into interleaved blocks.
BLOCK = 128


@dataclass(frozen=True)
class Entries:
    """``gpus[k]`` GPUs of job ``job[k]`` on server ``server[k]``: chunks (several of one job may share a server)
    until :func:`merge_entries` makes them one entry per server a job uses."""

    job: np.ndarray
    server: np.ndarray
    gpus: np.ndarray

    def spans(self, jobs: int) -> np.ndarray:
        """Per job, the number of servers it uses."""
        merged = merge_entries(self.job, self.server, self.gpus)
        return np.bincount(merged.job, minlength=jobs)


def blocks(count: int, parts: int | None = None) -> list[np.ndarray]:
    """Positions ``0..count-1`` dealt round-robin into ``parts`` blocks (default: enough for at most ``BLOCK``
    each): one optimal assignment per block instead of one over everything (cubic in its size), each block a
    sample of every rank. With ``c <= e`` positions dealt into as many blocks, block ``b`` of the ``c`` never
    outnumbers block ``b`` of the ``e``."""
    parts = max(1, -(-count // BLOCK)) if parts is None else parts
    return [np.arange(b, count, parts) for b in range(parts)]


def chunk_sizes(instance: RoundInstance, cpu_per_gpu: np.ndarray, mem_per_gpu: np.ndarray) -> np.ndarray:
    """Per job, the most GPUs of it to place on one server together (see the module docstring)."""
    cluster = instance.cluster
    with np.errstate(divide="ignore"):
        by_cpu = np.floor(cluster.cpus_per_server * (1 + _TOLERANCE) / np.where(cpu_per_gpu > 0, cpu_per_gpu, np.inf))
        by_mem = np.floor(cluster.mem_gb_per_server * (1 + _TOLERANCE) / np.where(mem_per_gpu > 0, mem_per_gpu, np.inf))
    fits = np.minimum(np.minimum(instance.gpus, cluster.gpus_per_server), np.minimum(by_cpu, by_mem))
    neutral = (np.abs(cpu_per_gpu - cluster.cpu_per_gpu) <= _TOLERANCE * cluster.cpu_per_gpu) & (
        np.abs(mem_per_gpu - cluster.mem_gb_per_gpu) <= _TOLERANCE * cluster.mem_gb_per_gpu
    )
    return np.where(neutral, np.maximum(fits, 1), 1).astype(np.int64)


def assign_chunks(
    instance: RoundInstance, cpu_per_gpu: np.ndarray, mem_per_gpu: np.ndarray, chunk: np.ndarray
) -> Entries:
    """Place every job's GPUs in chunks of at most ``chunk[j]`` (see the module docstring)."""
    cluster = instance.cluster
    gpus = instance.gpus
    whole = gpus // chunk
    rest = gpus - whole * chunk
    item_job = np.concatenate([np.repeat(np.arange(gpus.size), whole), np.flatnonzero(rest)])
    item_size = np.concatenate([np.repeat(chunk, whole), rest[rest > 0]])
    scale = np.array([cluster.cpus_per_server, cluster.mem_gb_per_server])
    per_gpu = np.column_stack((cpu_per_gpu, mem_per_gpu))[item_job] / scale  # fractions of a server per GPU
    # Largest chunks first; within a size the hungriest first (so they meet the emptiest servers).
    order = np.lexsort((-per_gpu.sum(axis=1), -item_size))
    item_job, item_size, per_gpu = item_job[order], item_size[order], per_gpu[order]

    free = np.full(cluster.servers, cluster.gpus_per_server, dtype=np.int64)
    used = np.zeros((cluster.servers, 2))
    left_gpus = float(item_size.sum())
    left_use = (item_size[:, None] * per_gpu).sum(axis=0)
    out_job: list[np.ndarray] = []
    out_server: list[np.ndarray] = []
    out_gpus: list[np.ndarray] = []

    def put(items: np.ndarray, servers: np.ndarray, counts: np.ndarray) -> None:
        nonlocal left_gpus, left_use
        np.add.at(used, servers, counts[:, None] * per_gpu[items])
        np.subtract.at(free, servers, counts)
        left_gpus -= float(counts.sum())
        left_use = left_use - (counts[:, None] * per_gpu[items]).sum(axis=0)
        out_job.append(item_job[items])
        out_server.append(servers)
        out_gpus.append(counts)

    for size in np.unique(item_size)[::-1]:
        pending = np.flatnonzero(item_size == size)
        while pending.size:
            eligible = np.flatnonzero(free >= size)
            if eligible.size == 0:
                for item in pending:
                    servers, counts = _spread(int(size), free)
                    put(np.full(servers.size, item), servers, counts)
                break
            mean = left_use / left_gpus if left_gpus > 0 else np.zeros(2)
            take = pending[: eligible.size]
            projected = used[eligible] + free[eligible, None] * mean - 1.0  # (servers, 2)
            step = size * (per_gpu[take] - mean)  # (chunks, 2): how a chunk moves its server's projection
            by_room = np.argsort(projected.sum(axis=1), kind="stable")
            # Blocks mix costly and cheap chunks, roomy and full servers (see blocks()).
            rooms_blocks = blocks(eligible.size)
            for chunks, rooms in zip(blocks(take.size, len(rooms_blocks)), rooms_blocks, strict=True):
                mine, there = step[chunks], projected[by_room[rooms]]
                # Written out for the two resources: not @ (BLAS products wake BLAS threads, which costs
                # milliseconds on a shared machine), nor einsum (three times slower at this size); same values.
                cross = mine[:, 0:1] * there[None, :, 0] + mine[:, 1:2] * there[None, :, 1]
                growth = 2 * cross + (mine[:, 0] * mine[:, 0] + mine[:, 1] * mine[:, 1])[:, None]
                rows, cols = linear_sum_assignment(growth)
                put(take[chunks[rows]], eligible[by_room[rooms[cols]]], np.full(rows.size, size, dtype=np.int64))
            pending = pending[take.size:]
    job, server, gpus = np.concatenate(out_job), np.concatenate(out_server), np.concatenate(out_gpus)
    # By job: a server's k-th entry is then an arbitrary one of its jobs, not the k-th round's (similar) chunk,
    # which is what the local search's picks need.
    order = np.lexsort((server, job))
    return Entries(job[order], server[order], gpus[order])


def _spread(size: int, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A chunk over the servers with the most free GPUs (the fewest servers)."""
    order = np.argsort(-free, kind="stable")
    reach = np.cumsum(free[order])
    count = int(np.searchsorted(reach, size)) + 1
    servers = order[:count]
    gpus = free[servers].copy()
    gpus[-1] -= int(reach[count - 1]) - size
    return servers, gpus


def merge_entries(job: np.ndarray, server: np.ndarray, gpus: np.ndarray) -> Entries:
    """One entry per (job, server), sorted by job then server: GPUs of one job on one server added up."""
    stride = int(server.max(initial=0)) + 1
    unique, inverse = np.unique(job * stride + server, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=gpus).astype(np.int64)
    return Entries(unique // stride, unique % stride, total)
