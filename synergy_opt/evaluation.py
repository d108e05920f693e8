"""One evaluator for every Allocation of a round instance: every mechanism in the toolkit is scored here.

Throughput follows SPEC section 1: a job's per-GPU CPU and memory on each server are read off its grid
(largest grid point ``<=``, never over-claiming); a split job runs at the pace of its poorest server; a job
without exactly its GPUs does not run (throughput 0) and makes the allocation invalid.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synergy_opt.errors import InvalidInputError, SynergyError
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.instance import allocation as allocation_rule
from synergy_opt.io import round_instance
from synergy_opt.validation import boolean, checked

# Relative slack on capacities: 24 CPUs split as 3 x 8.000000001 is not an overload.
CAPACITY_TOLERANCE = 1e-7
RESOURCES = ("gpus", "cpus", "mem_gb")


class InvalidAllocationError(SynergyError):
    """An allocation that exceeds a capacity or gives a job another GPU count than it asks for."""


class InvalidAllocationWarning(UserWarning):
    """Emitted whenever an invalid allocation is evaluated without ``strict=True``."""


@dataclass(frozen=True)
class JobScore:
    """How one job fares under an allocation."""

    job_id: str
    gpus: int
    gpus_placed: int
    servers: tuple[int, ...]
    throughput: float
    floor: float
    # Split with unequal CPU or memory per GPU across its servers (it runs at its poorest server's pace).
    disproportionate: bool = False

    @property
    def placed(self) -> bool:
        return self.gpus_placed > 0

    @property
    def split(self) -> bool:
        return len(self.servers) > 1

    @property
    def meets_floor(self) -> bool:
        return self.throughput >= self.floor - 1e-9


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Totals and per-job scores of one allocation. ``problems`` is empty exactly when it is valid."""

    instance: RoundInstance
    jobs: dict[str, JobScore]
    server_use: np.ndarray  # (servers, 3): GPUs, CPUs, GB in use
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.problems

    @cached_property
    def objective(self) -> float:
        """Sum of per-job throughput (eq. 1)."""
        return float(sum(score.throughput for score in self.jobs.values()))

    @cached_property
    def objective_gpu(self) -> float:
        """GPU-weighted throughput, ``sum g_j W_j``."""
        return float(sum(score.gpus * score.throughput for score in self.jobs.values()))

    @property
    def unplaced(self) -> tuple[str, ...]:
        return tuple(job_id for job_id, score in self.jobs.items() if not score.placed)

    @property
    def split_jobs(self) -> tuple[str, ...]:
        return tuple(job_id for job_id, score in self.jobs.items() if score.split)

    @property
    def disproportionate_splits(self) -> tuple[str, ...]:
        """Split jobs whose CPU and memory are not in proportion to their GPUs on every server (SPEC 1)."""
        return tuple(job_id for job_id, score in self.jobs.items() if score.disproportionate)

    @property
    def floors_violated(self) -> tuple[str, ...]:
        """Placed jobs running below their GPU-proportional throughput."""
        return tuple(job_id for job_id, s in self.jobs.items() if s.placed and not s.meets_floor)

    @property
    def capacity(self) -> np.ndarray:
        cluster = self.instance.cluster
        return np.array([cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server], dtype=float)

    @property
    def utilisation(self) -> dict[str, float]:
        """Fraction of the cluster's GPUs, CPUs and memory in use."""
        used = self.server_use.sum(axis=0) / (self.capacity * self.instance.cluster.servers)
        return dict(zip(RESOURCES, (float(u) for u in used), strict=True))

    def check(self) -> Evaluation:
        """Raise :class:`InvalidAllocationError` listing the problems, else return self."""
        if self.problems:
            shown = "; ".join(self.problems[:10])
            more = f" (and {len(self.problems) - 10} more)" if len(self.problems) > 10 else ""
            raise InvalidAllocationError(f"invalid allocation: {shown}{more}")
        return self

    def summary(self) -> dict[str, float | int | bool]:
        """The totals as one flat row (what the benchmark tables print)."""
        util = self.utilisation
        return {
            "objective": self.objective,
            "objective_gpu": self.objective_gpu,
            "valid": self.valid,
            "floors_violated": len(self.floors_violated),
            "jobs_unplaced": len(self.unplaced),
            "jobs_split": len(self.split_jobs),
            "gpu_util": util["gpus"],
            "cpu_util": util["cpus"],
            "mem_util": util["mem_gb"],
        }


@checked(instance=round_instance, allocation=allocation_rule, strict=boolean)
def evaluate(instance: RoundInstance, allocation: Allocation, *, strict: bool = False) -> Evaluation:
    """Score ``allocation`` on ``instance``.

    Parameters
    ----------
    instance, allocation
        The round and where its jobs run (either may be given in its JSON form, a dict).
    strict
        Raise :class:`InvalidAllocationError` on an invalid allocation instead of warning.

    Raises
    ------
    InvalidInputError
        For an allocation of another round: a job id the instance does not have, or a server the cluster
        does not have (an allocation that overloads a server or gives a job the wrong GPU count is invalid,
        and reported in ``problems``).
    """
    check_same_round(instance, allocation)
    cluster = instance.cluster
    use = np.zeros((cluster.servers, 3))
    problems: list[str] = []

    floors = instance.floors
    scores: dict[str, JobScore] = {}
    for index, job in enumerate(instance.jobs):
        parts = allocation.jobs.get(job.id, ())
        placed = sum(p.gpus for p in parts)
        servers = tuple(p.server for p in parts)
        for p in parts:
            use[p.server] += (p.gpus, p.cpus, p.mem_gb)
        if parts and placed != job.gpus:
            problems.append(f"job {job.id!r} placed with {placed} GPUs but needs {job.gpus}")
        uneven = False
        if parts and placed == job.gpus:
            per_gpu = np.array([(p.cpus / p.gpus, p.mem_gb / p.gpus) for p in parts])
            throughput = float(np.min(job.profile.throughput(per_gpu[:, 0], per_gpu[:, 1])))
            uneven = bool(np.any(np.abs(per_gpu - per_gpu[0]) > CAPACITY_TOLERANCE * (1 + np.abs(per_gpu[0]))))
        else:
            throughput = 0.0
        scores[job.id] = JobScore(job.id, job.gpus, placed, servers, throughput, float(floors[index]), uneven)

    capacity = np.array([cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server])
    over = use > capacity * (1 + CAPACITY_TOLERANCE)
    for server, resource in zip(*np.nonzero(over), strict=True):
        problems.append(
            f"server {server} uses {use[server, resource]:g} {RESOURCES[resource]} of {capacity[resource]:g}"
        )
    evaluation = Evaluation(instance, scores, use, tuple(problems))
    if problems:
        if strict:
            evaluation.check()
        warnings.warn(f"invalid allocation: {'; '.join(problems[:5])}", InvalidAllocationWarning, stacklevel=2)
    return evaluation


def check_same_round(instance: RoundInstance, allocation: Allocation) -> None:
    """Raise :class:`InvalidInputError` naming a job id or server of ``allocation`` that ``instance`` lacks."""
    known = instance.job_index
    servers = instance.cluster.servers
    for job_id, parts in allocation.jobs.items():
        if job_id not in known:
            ids = [name for name in allocation.jobs if name not in known]
            raise InvalidInputError(f"allocation.jobs[{job_id!r}]", job_id, f"no such job in this round ({len(ids)} "
                                    f"of the allocation's {len(allocation.jobs)} jobs are not): an allocation of "
                                    "another round?")
        for index, part in enumerate(parts):
            if part.server >= servers:
                raise InvalidInputError(f"allocation.jobs[{job_id!r}][{index}].server", part.server,
                                        f"the cluster has servers 0..{servers - 1}")
