"""Demotion: free room on chosen servers by moving above-proportional jobs towards GPU-proportional (section 4.2).

A job is *above proportional* when it holds more than ``(c_p, m_p)`` per GPU in CPU or in memory. On a server
where every job is at or below proportional in both, the free CPUs and memory are at least proportional to
the free GPUs, so any job at or below proportional that gets only free GPUs fits. Demotion therefore always
succeeds: in the worst case every above-proportional job on the server is switched to proportional.

To release *just what is needed*, one job is first lowered only as far as the shortfall requires: to the grid
config, at most its current one in each resource, with the highest throughput that still meets its floor and
frees the shortfall (the least throughput lost). Only when no single job can cover the shortfall so is the job
that helps most switched to proportional, and the search repeats. Lowering a job never grows it anywhere; a
switch to proportional can grow a job that was above in one resource and below in the other ("mixed"), so
its other servers are checked and, if overcommitted, repaired the same way.

Public API
----------
``is_above_proportional(state, cpu_per_gpu, mem_per_gpu) -> bool``
``make_room(state, needs) -> tuple[int, ...]``
    ``needs`` maps server -> (CPUs, GB) that must be free there; returns the jobs demoted (in order).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from synergy_opt.errors import SynergyError
from synergy_opt.instance import GRID_TOLERANCE
from synergy_opt.packing.state import ServerState

# Relative slack when comparing per-GPU configs and throughputs.
_TOLERANCE = 1e-9


class DemotionError(SynergyError):
    """Room could not be made: the server state broke the invariants demotion relies on (a bug)."""


def is_above_proportional(state: ServerState, cpu_per_gpu: float, mem_per_gpu: float) -> bool:
    """Whether a per-GPU demand exceeds the GPU-proportional share in CPU or in memory."""
    c_p, m_p = state.proportional
    return bool(cpu_per_gpu > c_p * (1 + _TOLERANCE) or mem_per_gpu > m_p * (1 + _TOLERANCE))


def make_room(state: ServerState, needs: dict[int, tuple[float, float]]) -> tuple[int, ...]:
    """Demote jobs until each server ``s`` of ``needs`` has ``needs[s]`` (CPUs, GB) free.

    Every other server stays within capacity. Each demoted job keeps at least its floor.

    Parameters
    ----------
    state
        The cluster; changed in place.
    needs
        Server -> (CPUs, GB) to free there. The caller guarantees the needs are at most proportional to the
        free GPUs of each server (what a job at or below proportional would use).

    Returns
    -------
    tuple of int
        The demoted jobs, first demotion first, each once.
    """
    demoted: list[int] = []
    pending = list(needs)
    while pending:
        server = pending.pop()
        need_cpu, need_mem = needs.get(server, (0.0, 0.0))
        while True:
            short_cpu = need_cpu - float(state.free_cpus[server])
            short_mem = need_mem - float(state.free_mem[server])
            if short_cpu <= state.cpu_tol and short_mem <= state.mem_tol:
                break
            shortfall = (max(short_cpu, 0.0), max(short_mem, 0.0))
            job, config = _choose(state, server, shortfall)
            before = state.placement(job)
            after = state.set_demand(job, *config)
            demoted.append(job)
            if after.cpu_per_gpu > before.cpu_per_gpu or after.mem_per_gpu > before.mem_per_gpu:
                # A mixed job switched to proportional grew on its other servers: check them again.
                pending.extend(s for s in after.servers if s != server and s not in pending)
    return tuple(dict.fromkeys(demoted))


@dataclass(frozen=True)
class _ConfigTable:
    """One profile's grid: its axes as lists (``bisect`` reads a point ten times faster than
    ``Profile.throughput``), its throughputs and each grid point's footprint (CPUs and memory per GPU as
    fractions of the proportional share, summed)."""

    cpu_axis: list[float]
    mem_axis: list[float]
    grid: np.ndarray
    footprint: np.ndarray
    corners: dict[tuple[int, int], tuple[float, float, float, float] | None] = field(default_factory=dict)

    def throughput(self, cpu_per_gpu: float, mem_per_gpu: float) -> float:
        """``W`` at a per-GPU point, by :func:`~synergy_opt.instance.grid_index`'s rule (the evaluator's)."""
        a = bisect_right(self.cpu_axis, cpu_per_gpu * (1 + GRID_TOLERANCE)) - 1
        b = bisect_right(self.mem_axis, mem_per_gpu * (1 + GRID_TOLERANCE)) - 1
        return float(self.grid[a, b]) if a >= 0 and b >= 0 else 0.0

    def best_within(self, cpu_cap: float, mem_cap: float) -> tuple[float, float, float, float] | None:
        """The best grid config with at most ``cpu_cap`` CPUs and ``mem_cap`` GB per GPU (exact comparisons):
        the highest throughput, then the smallest footprint, the fewest CPUs, the least memory; as
        ``(W, footprint, CPUs, GB)``, or None when no grid point is that small. The axes are sorted, so those
        configs are a corner of the grid."""
        a, b = bisect_right(self.cpu_axis, cpu_cap), bisect_right(self.mem_axis, mem_cap)
        if (a, b) not in self.corners:  # profiles shared by many jobs meet the same corners again
            self.corners[a, b] = self._best_in_corner(a, b)
        return self.corners[a, b]

    def _best_in_corner(self, a: int, b: int) -> tuple[float, float, float, float] | None:
        if a == 0 or b == 0:
            return None
        corner = self.grid[:a, :b]
        top = corner.max()
        rows, cols = np.nonzero(corner == top)
        _, i, j = min((float(self.footprint[i, j]), i, j) for i, j in zip(rows.tolist(), cols.tolist(), strict=True))
        return float(top), float(self.footprint[i, j]), self.cpu_axis[i], self.mem_axis[j]


class _Tables:
    """Every profile's :class:`_ConfigTable` (views of its group's arrays), made when demotion first looks at
    one of its jobs."""

    def __init__(self, state: ServerState) -> None:
        c_p, m_p = state.proportional
        self.groups = state.instance.profile_groups
        jobs = len(state.instance.jobs)
        self.job_group = np.zeros(jobs, dtype=np.int64)
        self.job_row = np.zeros(jobs, dtype=np.int64)
        self.shared = []
        for index, group in enumerate(self.groups):
            self.job_group[group.jobs] = index
            self.job_row[group.jobs] = group.row
            footprint = group.cpu_axis[:, None] / c_p + group.mem_axis[None, :] / m_p
            self.shared.append((group.cpu_axis.tolist(), group.mem_axis.tolist(), footprint))
        self.tables: dict[tuple[int, int], _ConfigTable] = {}
        self.of_job: list[_ConfigTable | None] = [None] * jobs
        self.floors: list[float] = state.floors.tolist()  # Python floats: read per candidate

    def of(self, job: int) -> _ConfigTable:
        table = self.of_job[job]
        if table is None:
            key = (int(self.job_group[job]), int(self.job_row[job]))
            table = self.tables.get(key)
            if table is None:
                cpu_axis, mem_axis, footprint = self.shared[key[0]]
                table = _ConfigTable(cpu_axis, mem_axis, self.groups[key[0]].tput[key[1]], footprint)
                self.tables[key] = table
            self.of_job[job] = table
        return table


def _table(state: ServerState, job: int) -> _ConfigTable:
    if state.tables is None:
        state.tables = _Tables(state)
    return state.tables.of(job)


def _choose(state: ServerState, server: int, shortfall: tuple[float, float]) -> tuple[int, tuple[float, float]]:
    """The job on ``server`` to demote for ``shortfall`` and its new per-GPU config."""
    candidates = []
    for job in state.jobs_on[server]:
        placed = state.placements[job]
        if placed is not None and is_above_proportional(state, placed.cpu_per_gpu, placed.mem_per_gpu):
            candidates.append(job)
    if not candidates:
        raise DemotionError(
            f"server {server} is short of {shortfall} (CPUs, GB) with no above-proportional job to demote"
        )
    partial = [option for job in candidates if (option := _lower(state, server, job, shortfall)) is not None]
    if partial:
        _, job, config = min(partial)
        return job, config
    return min(candidates, key=lambda job: _switch_key(state, server, job, shortfall)), state.proportional


def _lower(
    state: ServerState, server: int, job: int, shortfall: tuple[float, float]
) -> tuple[tuple[float, float, int], int, tuple[float, float]] | None:
    """The best grid config that frees ``shortfall`` on ``server`` by lowering ``job`` alone, or ``None``.

    Returns ``(rank key, job, config)``; the key orders by throughput lost, then footprint, then job.
    """
    placed = state.placement(job)
    gpus_here = state.jobs_on[server][job]
    table = _table(state, job)
    cpu_cap = _bound(placed.cpu_per_gpu, shortfall[0] / gpus_here)
    mem_cap = _bound(placed.mem_per_gpu, shortfall[1] / gpus_here)
    best = table.best_within(cpu_cap, mem_cap)
    # Strictly: throughputs and floors are both values read off the grid, so no rounding separates them.
    if best is None or best[0] < state.tables.floors[job]:
        return None
    tput, footprint, cpu, mem = best
    loss = table.throughput(placed.cpu_per_gpu, placed.mem_per_gpu) - tput
    return (loss, footprint, job), job, (cpu, mem)


def _bound(current: float, cut: float) -> float:
    """The largest per-GPU value allowed after cutting ``cut`` from ``current`` (with slack for grid values),
    strictly below ``current`` when anything is cut, so that every lowering makes progress."""
    if cut <= 0:
        return current * (1 + _TOLERANCE)
    cap = current - cut
    return min(cap + _TOLERANCE * abs(cap), math.nextafter(current, -math.inf))


def _switch_key(state: ServerState, server: int, job: int, shortfall: tuple[float, float]) -> tuple[bool, float, int]:
    """Order for switching a job to proportional: jobs that grow nowhere first, then the most help here."""
    placed = state.placement(job)
    gpus_here = state.jobs_on[server][job]
    c_p, m_p = state.proportional
    cluster = state.cluster
    release = (gpus_here * (placed.cpu_per_gpu - c_p), gpus_here * (placed.mem_per_gpu - m_p))
    capacity = (cluster.cpus_per_server, cluster.mem_gb_per_server)
    # Release beyond the shortfall does not help here; a resource the switch grows counts against it.
    helps = sum(min(r, s) / c for r, s, c in zip(release, shortfall, capacity, strict=True))
    mixed = placed.cpu_per_gpu < c_p * (1 - _TOLERANCE) or placed.mem_per_gpu < m_p * (1 - _TOLERANCE)
    return mixed, -helps, job
