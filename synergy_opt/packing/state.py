"""The server-state structure every mechanism packs into (one per mechanism run).

A job's placement is ``(servers, gpus on each, cpu_per_gpu, mem_per_gpu)``: CPU and memory are always held in
proportion to the job's GPUs on each server (paper section 4.2, SPEC 1), so one per-GPU demand describes the
job on all of its servers. Demands are per GPU throughout, so a job can be moved between its ideal and the
GPU-proportional point ``(c_p, m_p)`` without knowing where it runs.

Public API
----------
``ServerState(instance)``
    Empty cluster: ``free_gpus`` (int64), ``free_cpus`` and ``free_mem`` (float64), one entry per server.
``state.capacity_for(cpu_per_gpu, mem_per_gpu) -> ndarray``
    Per server, how many GPUs of a job with this per-GPU demand still fit there.
``state.fits(gpus, cpu_per_gpu, mem_per_gpu, servers=None) -> ndarray[bool]``
    Per server (or per server of ``servers``), whether the whole job fits on that one server.
``state.place(job, servers, gpus, cpu_per_gpu, mem_per_gpu) -> JobPlacement``
    Take the resources (no check: callers choose servers with ``fits`` / ``capacity_for``).
``state.place_many(jobs, servers, gpus, cpu_per_gpu, mem_per_gpu)``
    The same for identical single-server jobs, ``jobs[k]`` on ``servers[k]``, booked in one numpy pass.
``state.release(job) -> JobPlacement``
    Give a placed job's resources back.
``state.changed_since(clock) -> ndarray``
    Servers changed after a past ``state.clock`` (to re-check only those after a search failed everywhere).
``state.set_demand(job, cpu_per_gpu, mem_per_gpu)``
    Change a placed job's per-GPU demand where it is (used by demotion); may overcommit, see ``overcommitted``.
``state.floors``
    Each job's floor, ``W`` at ``(c_p, m_p)`` (computed once, vectorised).
``state.to_allocation() -> Allocation``
    The placements made so far (unplaced jobs are absent).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Allocation, Placement, RoundInstance, trusted_allocation, trusted_placement

# Absolute slack per server, as a fraction of its capacity: float sums such as 8 x 3.0000000001 CPUs must still
# fit, and stay well inside the evaluator's 1e-7 relative tolerance.
FIT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class JobPlacement:
    """Where one job runs: ``gpus[k]`` GPUs on ``servers[k]``, each GPU with the same CPU and memory."""

    servers: tuple[int, ...]
    gpus: tuple[int, ...]
    cpu_per_gpu: float
    mem_per_gpu: float


class ServerState:
    """Free GPUs, CPUs and memory per server, plus the placement of every job packed so far.

    Parameters
    ----------
    instance
        The round being packed; job ``k`` is ``instance.jobs[k]`` and is named by that index everywhere.
    """

    def __init__(self, instance: RoundInstance) -> None:
        cluster = instance.cluster
        self.instance = instance
        self.cluster = cluster
        servers = cluster.servers
        self.free_gpus = np.full(servers, cluster.gpus_per_server, dtype=np.int64)
        self.free_cpus = np.full(servers, float(cluster.cpus_per_server))
        self.free_mem = np.full(servers, float(cluster.mem_gb_per_server))
        self.placements: list[JobPlacement | None] = [None] * len(instance.jobs)
        # Per server: job index -> its GPUs there; demotion needs the jobs sharing a server.
        self.jobs_on: list[dict[int, int]] = [{} for _ in range(servers)]
        # The demotion's per-profile lookup tables, made on first use (demotion.py).
        self.tables: Any = None
        # Logical time of each server's last change: lets a caller re-check only servers changed since a
        # search that failed everywhere (see packing.place_run_with_fallback).
        self.clock = 0
        self.changed_at = np.zeros(servers, dtype=np.int64)
        self.cpu_tol = FIT_TOLERANCE * cluster.cpus_per_server
        self.mem_tol = FIT_TOLERANCE * cluster.mem_gb_per_server
        #: The GPU-proportional per-GPU point ``(c_p, m_p)``.
        self.proportional: tuple[float, float] = (cluster.cpu_per_gpu, cluster.mem_gb_per_gpu)
        self._job_gpus = instance.gpus.tolist()

    # -- queries -------------------------------------------------------------------------------------------
    def changed_since(self, clock: int) -> np.ndarray:
        """Servers whose resources changed after logical time ``clock`` (a past value of ``state.clock``)."""
        return np.flatnonzero(self.changed_at > clock)

    @cached_property
    def floors(self) -> np.ndarray:
        """Each job's throughput at ``(c_p, m_p)``, in job order (what demotion must never go below)."""
        return self.instance.floors

    def is_placed(self, job: int) -> bool:
        return self.placements[job] is not None

    def placement(self, job: int) -> JobPlacement:
        placed = self.placements[job]
        if placed is None:
            raise InvalidInputError("job", job, "is not placed")
        return placed

    def capacity_for(self, cpu_per_gpu: float, mem_per_gpu: float) -> np.ndarray:
        """Per server, the number of GPUs of a job with this per-GPU demand that still fit there."""
        # Capped in floating point before the cast: CPUs per server of 1e20 over a small demand overflow int64.
        gpus = self.free_gpus.astype(float)
        if cpu_per_gpu > 0:
            gpus = np.minimum(gpus, np.floor((self.free_cpus + self.cpu_tol) / cpu_per_gpu))
        if mem_per_gpu > 0:
            gpus = np.minimum(gpus, np.floor((self.free_mem + self.mem_tol) / mem_per_gpu))
        return np.maximum(gpus, 0).astype(np.int64)

    def fits(
        self, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, servers: np.ndarray | None = None
    ) -> np.ndarray:
        """Per server (of ``servers``, default all), whether all ``gpus`` GPUs of the job, with their CPU and
        memory, fit on it alone."""
        index = slice(None) if servers is None else servers
        return (
            (self.free_gpus[index] >= gpus)
            & (self.free_cpus[index] >= gpus * cpu_per_gpu - self.cpu_tol)
            & (self.free_mem[index] >= gpus * mem_per_gpu - self.mem_tol)
        )

    def overcommitted(self, servers: np.ndarray | list[int] | None = None) -> np.ndarray:
        """Servers (of ``servers``, default all) whose CPUs or memory are overcommitted beyond the tolerance."""
        index = np.arange(self.cluster.servers) if servers is None else np.asarray(servers, dtype=np.int64)
        over = (self.free_cpus[index] < -self.cpu_tol) | (self.free_mem[index] < -self.mem_tol)
        return index[over]

    def free_score(self, servers: np.ndarray | None = None) -> np.ndarray:
        """Free resources per server (of ``servers``, default all) as one number, each resource as a fraction
        of a server: best fit's key."""
        cluster = self.cluster
        index = slice(None) if servers is None else servers
        return (
            self.free_gpus[index] / cluster.gpus_per_server
            + self.free_cpus[index] / cluster.cpus_per_server
            + self.free_mem[index] / cluster.mem_gb_per_server
        )

    # -- updates -------------------------------------------------------------------------------------------
    def place(
        self,
        job: int,
        servers: list[int] | tuple[int, ...] | np.ndarray,
        gpus: list[int] | tuple[int, ...] | np.ndarray,
        cpu_per_gpu: float,
        mem_per_gpu: float,
    ) -> JobPlacement:
        """Give ``job`` ``gpus[k]`` GPUs on ``servers[k]`` with ``cpu_per_gpu`` CPUs and ``mem_per_gpu`` GB each.

        The caller has checked the fit; this only books the resources. Raises
        :class:`~synergy_opt.errors.InvalidInputError` on a job already placed or a wrong GPU total.
        """
        if self.placements[job] is not None:
            raise InvalidInputError("job", job, "is already placed; release it first")
        parts = tuple(map(int, servers))
        counts = tuple(map(int, gpus))
        need = self._job_gpus[job]
        if sum(counts) != need or len(parts) != len(counts) or min(counts, default=0) < 1:
            raise InvalidInputError("gpus", counts, f"job {job} needs {need} GPUs as positive counts per server")
        self._check_servers(parts)
        cpu, mem = self._check_demand(cpu_per_gpu, mem_per_gpu)
        placed = JobPlacement(parts, counts, cpu, mem)
        self._book(placed, job, -1)
        self.placements[job] = placed
        return placed

    def place_many(
        self, jobs: list[int] | np.ndarray, servers: list[int] | np.ndarray, gpus: int, cpu_per_gpu: float,
        mem_per_gpu: float,
    ) -> None:
        """Place identical single-server jobs at once: ``jobs[k]`` gets ``gpus`` GPUs on ``servers[k]``.

        The same bookkeeping as :meth:`place` per job, with the per-server sums done in one numpy pass.
        """
        jobs = [int(job) for job in jobs]
        servers = [int(server) for server in servers]
        if len(jobs) != len(servers) or len(set(jobs)) != len(jobs):
            raise InvalidInputError("servers", len(servers), f"one server per distinct job ({len(jobs)} jobs)")
        for job in jobs:
            if self.placements[job] is not None:
                raise InvalidInputError("job", job, "is already placed; release it first")
            if self._job_gpus[job] != gpus:
                raise InvalidInputError("gpus", gpus, f"job {job} needs {self._job_gpus[job]} GPUs")
        if servers and (min(servers) < 0 or max(servers) >= self.cluster.servers):
            raise InvalidInputError("servers", servers, f"must be in 0..{self.cluster.servers - 1}")
        cpu, mem = self._check_demand(cpu_per_gpu, mem_per_gpu)
        for job, server in zip(jobs, servers, strict=True):
            self.placements[job] = JobPlacement((server,), (gpus,), cpu, mem)
            self.jobs_on[server][job] = gpus
        self.clock += 1
        if len(servers) <= 16:  # small batches: scalar updates beat numpy's per-call overhead
            for server, count in Counter(servers).items():
                self.free_gpus[server] -= count * gpus
                self.free_cpus[server] -= count * (gpus * cpu)
                self.free_mem[server] -= count * (gpus * mem)
                self.changed_at[server] = self.clock
            return
        used, counts = np.unique(np.asarray(servers, dtype=np.int64), return_counts=True)
        self.free_gpus[used] -= counts * gpus
        self.free_cpus[used] -= counts * (gpus * cpu)
        self.free_mem[used] -= counts * (gpus * mem)
        self.changed_at[used] = self.clock

    def release(self, job: int) -> JobPlacement:
        """Return ``job``'s resources to its servers; the job becomes unplaced."""
        placed = self.placement(job)
        self._book(placed, job, +1)
        self.placements[job] = None
        return placed

    def set_demand(self, job: int, cpu_per_gpu: float, mem_per_gpu: float) -> JobPlacement:
        """Move a placed job to a new per-GPU demand on the same servers (may leave a server overcommitted)."""
        placed = self.release(job)
        return self.place(job, placed.servers, placed.gpus, cpu_per_gpu, mem_per_gpu)

    def _check_servers(self, servers: tuple[int, ...]) -> None:
        # Allocations are built from placements without re-validation, so they must be valid here.
        if len(set(servers)) != len(servers) or min(servers) < 0 or max(servers) >= self.cluster.servers:
            raise InvalidInputError("servers", servers, f"must be distinct servers in 0..{self.cluster.servers - 1}")

    @staticmethod
    def _check_demand(cpu_per_gpu: float, mem_per_gpu: float) -> tuple[float, float]:
        cpu, mem = float(cpu_per_gpu), float(mem_per_gpu)
        if not (0.0 <= cpu < np.inf and 0.0 <= mem < np.inf):
            raise InvalidInputError("demand", (cpu, mem), "per-GPU CPUs and memory must be finite and >= 0")
        return cpu, mem

    def _book(self, placed: JobPlacement, job: int, sign: int) -> None:
        self.clock += 1
        for server, gpus in zip(placed.servers, placed.gpus, strict=True):
            self.free_gpus[server] += sign * gpus
            self.free_cpus[server] += sign * gpus * placed.cpu_per_gpu
            self.free_mem[server] += sign * gpus * placed.mem_per_gpu
            self.changed_at[server] = self.clock
            if sign < 0:
                self.jobs_on[server][job] = gpus
            else:
                del self.jobs_on[server][job]

    # -- output --------------------------------------------------------------------------------------------
    def to_allocation(self) -> Allocation:
        """The placements made so far as an :class:`~synergy_opt.instance.Allocation` (job ids as keys)."""
        jobs = self.instance.jobs
        parts: dict[str, tuple[Placement, ...]] = {}
        for job, placed in enumerate(self.placements):
            if placed is None:
                continue
            c, m = placed.cpu_per_gpu, placed.mem_per_gpu
            if len(placed.servers) == 1:  # the common case, without the sort
                gpus = placed.gpus[0]
                parts[jobs[job].id] = (trusted_placement(placed.servers[0], gpus, gpus * c, gpus * m),)
                continue
            pairs = zip(placed.servers, placed.gpus, strict=True)
            parts[jobs[job].id] = tuple(
                trusted_placement(server, gpus, gpus * c, gpus * m) for server, gpus in sorted(pairs)
            )
        return trusted_allocation(parts)

    def copy(self) -> ServerState:
        """An independent copy (placements are immutable and shared)."""
        other = ServerState.__new__(ServerState)
        other.__dict__.update(self.__dict__)
        other.free_gpus = self.free_gpus.copy()
        other.free_cpus = self.free_cpus.copy()
        other.free_mem = self.free_mem.copy()
        other.changed_at = self.changed_at.copy()
        other.placements = list(self.placements)
        other.jobs_on = [dict(jobs) for jobs in self.jobs_on]
        other.tables = self.tables  # deterministic caches: sharing them changes nothing
        return other
