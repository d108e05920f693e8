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
``state.fits(gpus, cpu_per_gpu, mem_per_gpu) -> ndarray[bool]``
    Per server, whether the whole job fits on that one server.
``state.place(job, servers, gpus, cpu_per_gpu, mem_per_gpu) -> JobPlacement``
    Take the resources (no check: callers choose servers with ``fits`` / ``capacity_for``).
``state.release(job) -> JobPlacement``
    Give a placed job's resources back.
``state.set_demand(job, cpu_per_gpu, mem_per_gpu)``
    Change a placed job's per-GPU demand where it is (used by demotion); may overcommit, see ``overcommitted``.
``state.to_allocation() -> Allocation``
    The placements made so far (unplaced jobs are absent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Allocation, Placement, RoundInstance

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

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus)

    @property
    def split(self) -> bool:
        return len(self.servers) > 1


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
        self.cpu_tol = FIT_TOLERANCE * cluster.cpus_per_server
        self.mem_tol = FIT_TOLERANCE * cluster.mem_gb_per_server

    # -- queries -------------------------------------------------------------------------------------------
    @property
    def proportional(self) -> tuple[float, float]:
        """The GPU-proportional per-GPU point ``(c_p, m_p)``."""
        return self.cluster.cpu_per_gpu, self.cluster.mem_gb_per_gpu

    def is_placed(self, job: int) -> bool:
        return self.placements[job] is not None

    def placement(self, job: int) -> JobPlacement:
        placed = self.placements[job]
        if placed is None:
            raise InvalidInputError("job", job, "is not placed")
        return placed

    def capacity_for(self, cpu_per_gpu: float, mem_per_gpu: float) -> np.ndarray:
        """Per server, the number of GPUs of a job with this per-GPU demand that still fit there."""
        gpus = self.free_gpus
        if cpu_per_gpu > 0:
            gpus = np.minimum(gpus, np.floor((self.free_cpus + self.cpu_tol) / cpu_per_gpu).astype(np.int64))
        if mem_per_gpu > 0:
            gpus = np.minimum(gpus, np.floor((self.free_mem + self.mem_tol) / mem_per_gpu).astype(np.int64))
        return np.maximum(gpus, 0)

    def fits(self, gpus: int, cpu_per_gpu: float, mem_per_gpu: float) -> np.ndarray:
        """Per server, whether all ``gpus`` GPUs of the job (with their CPU and memory) fit on it alone."""
        return (
            (self.free_gpus >= gpus)
            & (self.free_cpus >= gpus * cpu_per_gpu - self.cpu_tol)
            & (self.free_mem >= gpus * mem_per_gpu - self.mem_tol)
        )

    def overcommitted(self, servers: np.ndarray | list[int] | None = None) -> np.ndarray:
        """Servers (of ``servers``, default all) whose CPUs or memory are overcommitted beyond the tolerance."""
        index = np.arange(self.cluster.servers) if servers is None else np.asarray(servers, dtype=np.int64)
        over = (self.free_cpus[index] < -self.cpu_tol) | (self.free_mem[index] < -self.mem_tol)
        return index[over]

    def free_score(self) -> np.ndarray:
        """Free resources per server as one number, each resource as a fraction of a server: best fit's key."""
        cluster = self.cluster
        return (
            self.free_gpus / cluster.gpus_per_server
            + self.free_cpus / cluster.cpus_per_server
            + self.free_mem / cluster.mem_gb_per_server
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
        parts = tuple(int(s) for s in servers)
        counts = tuple(int(g) for g in gpus)
        need = self.instance.jobs[job].gpus
        if sum(counts) != need or len(parts) != len(counts) or min(counts, default=0) < 1:
            raise InvalidInputError("gpus", counts, f"job {job} needs {need} GPUs as positive counts per server")
        placed = JobPlacement(parts, counts, float(cpu_per_gpu), float(mem_per_gpu))
        self._book(placed, job, -1)
        self.placements[job] = placed
        return placed

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

    def _book(self, placed: JobPlacement, job: int, sign: int) -> None:
        for server, gpus in zip(placed.servers, placed.gpus, strict=True):
            self.free_gpus[server] += sign * gpus
            self.free_cpus[server] += sign * gpus * placed.cpu_per_gpu
            self.free_mem[server] += sign * gpus * placed.mem_per_gpu
            if sign < 0:
                self.jobs_on[server][job] = gpus
            else:
                del self.jobs_on[server][job]

    # -- output --------------------------------------------------------------------------------------------
    def to_allocation(self) -> Allocation:
        """The placements made so far as an :class:`~synergy_opt.instance.Allocation` (job ids as keys)."""
        jobs = self.instance.jobs
        return Allocation({
            jobs[job].id: tuple(
                Placement(server, gpus, gpus * placed.cpu_per_gpu, gpus * placed.mem_per_gpu)
                for server, gpus in zip(placed.servers, placed.gpus, strict=True)
            )
            for job, placed in enumerate(self.placements)
            if placed is not None
        })

    def copy(self) -> ServerState:
        """An independent copy (placements are immutable and shared)."""
        other = ServerState.__new__(ServerState)
        other.__dict__.update(self.__dict__)
        other.free_gpus = self.free_gpus.copy()
        other.free_cpus = self.free_cpus.copy()
        other.free_mem = self.free_mem.copy()
        other.placements = list(self.placements)
        other.jobs_on = [dict(jobs) for jobs in self.jobs_on]
        return other
