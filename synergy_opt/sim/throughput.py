"""Throughput of the simulated jobs, read off their grids in bulk (SPEC 1's rule, as the evaluator reads it).

The simulator scores thousands of rounds; :func:`synergy_opt.evaluate` checks one allocation thoroughly but
one job at a time. Here every job's matrix is stacked once with the others of the same axes
(:func:`synergy_opt.profile_groups.group_profiles`), so a round's allocation is read with one vectorised lookup
per distinct pair of axes (usually one), by the same rule (:meth:`ProfileGroup.read`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from synergy_opt.instance import Allocation, Profile
from synergy_opt.profile_groups import group_profiles


class ThroughputTable:
    """Throughput lookups for jobs known by their position in a list of profiles."""

    def __init__(self, profiles: Sequence[Profile]) -> None:
        self.groups = group_profiles(profiles)
        self.group_of = np.empty(len(profiles), dtype=np.int64)
        self.row_of = np.empty(len(profiles), dtype=np.int64)
        for index, group in enumerate(self.groups):
            self.group_of[group.jobs] = index
            self.row_of[group.jobs] = group.row

    def __len__(self) -> int:
        return int(self.group_of.size)

    def at(self, positions: ArrayLike, cpu_per_gpu: ArrayLike, mem_gb_per_gpu: ArrayLike) -> np.ndarray:
        """Throughput of job ``positions[i]`` with ``cpu_per_gpu[i]`` CPUs and ``mem_gb_per_gpu[i]`` GB per GPU."""
        positions = np.asarray(positions, dtype=np.int64)
        cpu = np.broadcast_to(np.asarray(cpu_per_gpu, dtype=float), positions.shape)
        mem = np.broadcast_to(np.asarray(mem_gb_per_gpu, dtype=float), positions.shape)
        out = np.zeros(positions.shape)
        groups = self.group_of[positions]
        for group in np.unique(groups):
            rows = groups == group
            out[rows] = self.groups[group].read(self.row_of[positions[rows]], cpu[rows], mem[rows])
        return out

    def of_allocation(
        self, positions: np.ndarray, ids: Sequence[str], gpus: np.ndarray, allocation: Allocation
    ) -> tuple[np.ndarray, np.ndarray]:
        """Throughput of each job of a round and the cluster-wide (GPUs, CPUs, GB) in use.

        ``positions``, ``ids`` and ``gpus`` describe the round's jobs in one order. A job runs at its poorest
        server's pace (SPEC 1); a job without exactly its GPUs does not run. Parts of ids not in the round
        are ignored.
        """
        slot = {job_id: index for index, job_id in enumerate(ids)}
        owner: list[int] = []
        part_gpus: list[int] = []
        part_cpus: list[float] = []
        part_mem: list[float] = []
        for job_id, parts in allocation.jobs.items():
            index = slot.get(job_id)
            if index is None:
                continue
            for part in parts:
                owner.append(index)
                part_gpus.append(part.gpus)
                part_cpus.append(part.cpus)
                part_mem.append(part.mem_gb)
        throughput = np.zeros(len(ids))
        if not owner:
            return throughput, np.zeros(3)
        who = np.array(owner, dtype=np.int64)
        g = np.array(part_gpus, dtype=float)
        c = np.array(part_cpus)
        m = np.array(part_mem)
        per_part = self.at(positions[who], c / g, m / g)
        slowest = np.full(len(ids), np.inf)
        np.minimum.at(slowest, who, per_part)
        placed = np.bincount(who, weights=g, minlength=len(ids))
        runs = placed == gpus
        throughput[runs] = slowest[runs]
        return throughput, np.array([g.sum(), c.sum(), m.sum()])
