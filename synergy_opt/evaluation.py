"""One evaluator for every Allocation of a round instance: every mechanism in the toolkit is scored here.

Throughput follows SPEC section 1: a job's per-GPU CPU and memory on each server are read off its grid
(largest grid point ``<=``, never over-claiming); a split job runs at the pace of its poorest server; a job
without exactly its GPUs does not run (throughput 0) and makes the allocation invalid.

On a heterogeneous round (:class:`~synergy_opt.hetero.HeteroRound`, SPEC 7) each server has its type's
capacity, a job is read off its matrix for the type of its servers, and a job on servers of two types, or of
a type it cannot use, does not run and makes the allocation invalid; floors are at the baseline type's share.
:meth:`Evaluation.by_type` gives the totals per type (SPEC 4's invariants hold per type).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError, SynergyError
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound
from synergy_opt.instance import Allocation, Job, Placement, RoundInstance
from synergy_opt.instance import allocation as allocation_rule
from synergy_opt.io import any_round
from synergy_opt.profile import Profile
from synergy_opt.validation import boolean, checked

# Relative slack on capacities: 24 CPUs split as 3 x 8.000000001 is not an overload.
CAPACITY_TOLERANCE = 1e-7
RESOURCES = ("gpus", "cpus", "mem_gb")


def keeps_floor(throughput: Any, floor: Any) -> Any:
    """Whether ``throughput`` keeps ``floor`` (numbers or arrays alike). Exact, as every model's floor is (the
    configs kept, a type's admissibility, the floor rows): both are values read off the grid, so equal ones
    compare equal. (A relative 1e-12 slack here let an allocation keep "its floor" on a type worth 5e-13 less
    than it, which the type-free ideal ILP rules out, 3.5 times the ILP's optimum; an absolute one hid 5e-10
    below a floor of 1 and flagged the same round at 1e4 times the throughputs.)"""
    return throughput >= floor


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
    # On a heterogeneous round: the GPU type of its servers (None when unplaced or on servers of two types).
    gpu_type: str | None = None
    # On a heterogeneous round: its throughput at the proportional share of the type it runs on, the floor
    # every model keeps there (formulations/heterogeneous.md, H6); NaN when placed on no one type it can use (no
    # model allows that: it breaks the rule), None when unplaced or on a homogeneous round.
    type_floor: float | None = None

    @property
    def placed(self) -> bool:
        return self.gpus_placed > 0

    @property
    def split(self) -> bool:
        return len(self.servers) > 1

    @property
    def meets_floor(self) -> bool:
        return bool(keeps_floor(self.throughput, self.floor))

    @property
    def meets_type_floor(self) -> bool:
        """The models' floor rule on the type it runs on: that type's share keeps its floor (H0) and it runs at
        or above that share's throughput (H6). On a homogeneous round it is :attr:`meets_floor` (the share is the
        floor)."""
        if self.type_floor is None:
            return self.meets_floor
        return bool(keeps_floor(self.type_floor, self.floor) and keeps_floor(self.throughput, self.type_floor))


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Totals and per-job scores of one allocation. ``problems`` is empty exactly when it is valid."""

    instance: RoundInstance | HeteroRound
    jobs: dict[str, JobScore]
    server_use: np.ndarray  # (servers, 3): GPUs, CPUs, GB in use
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        """No server over its capacity and every placed job with exactly its GPUs (``problems`` says what not)."""
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
        """Jobs without a GPU."""
        return tuple(job_id for job_id, score in self.jobs.items() if not score.placed)

    @property
    def split_jobs(self) -> tuple[str, ...]:
        """Jobs placed on more than one server."""
        return tuple(job_id for job_id, score in self.jobs.items() if score.split)

    @property
    def disproportionate_splits(self) -> tuple[str, ...]:
        """Split jobs whose CPU and memory are not in proportion to their GPUs on every server (SPEC 1)."""
        return tuple(job_id for job_id, score in self.jobs.items() if score.disproportionate)

    @property
    def floors_violated(self) -> tuple[str, ...]:
        """Placed jobs running below their GPU-proportional throughput (on a heterogeneous round: that of
        their baseline type)."""
        return tuple(job_id for job_id, s in self.jobs.items() if s.placed and not s.meets_floor)

    @property
    def type_floors_violated(self) -> tuple[str, ...]:
        """Placed jobs that break the models' floor rule on a heterogeneous round (:attr:`JobScore.meets_type_floor`:
        on a type whose share is below their floor, below that share's throughput, or on no one type they can
        use). Every model bounds the valid allocations that place every job (:attr:`unplaced` empty) where this
        and :attr:`floors_violated` are empty; on a homogeneous round it is :attr:`floors_violated`."""
        return tuple(job_id for job_id, s in self.jobs.items() if s.placed and not s.meets_type_floor)

    @property
    def capacity(self) -> np.ndarray:
        """A server's GPUs, CPUs and GB: ``(3,)`` on a homogeneous round, ``(servers, 3)`` on a heterogeneous one."""
        cluster = self.instance.cluster
        if isinstance(cluster, HeteroCluster):
            return cluster.capacity
        return np.array([cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server], dtype=float)

    @property
    def utilisation(self) -> dict[str, float]:
        """Fraction of the cluster's GPUs, CPUs and memory in use."""
        # Sums taken in units of the largest server's capacity: servers of 1e308 GB summed to inf (NaN use).
        capacity = np.broadcast_to(self.capacity, self.server_use.shape)
        unit = capacity.max(axis=0, initial=1.0)
        used = (self.server_use / unit).sum(axis=0) / (capacity / unit).sum(axis=0)
        return dict(zip(RESOURCES, (float(u) for u in used), strict=True))

    def by_type(self) -> dict[str, dict[str, float | int]]:
        """A heterogeneous round's totals per GPU type, over the jobs running there and its servers: the
        objectives, jobs placed, floors and type floors violated, split jobs, and the type's GPU, CPU and memory
        use."""
        instance = self.instance
        if not isinstance(instance, HeteroRound):
            raise InvalidInputError("evaluation", "homogeneous", "per-type totals are for a heterogeneous round")
        cluster = instance.cluster
        rows: dict[str, dict[str, float | int]] = {}
        for k, name in enumerate(cluster.names):
            scores = [s for s in self.jobs.values() if s.gpu_type == name]
            servers = cluster.server_types == k
            used = self.server_use[servers].sum(axis=0) / self.capacity[servers].sum(axis=0)
            rows[name] = {
                "objective": float(sum(s.throughput for s in scores)),
                "objective_gpu": float(sum(s.gpus * s.throughput for s in scores)),
                "jobs_placed": len(scores),
                "floors_violated": sum(not s.meets_floor for s in scores),
                "type_floors_violated": sum(not s.meets_type_floor for s in scores),
                "jobs_split": sum(s.split for s in scores),
                "gpu_util": float(used[0]),
                "cpu_util": float(used[1]),
                "mem_util": float(used[2]),
            }
        return rows

    def check(self) -> Evaluation:
        """Raise :class:`InvalidAllocationError` listing the problems, else return self."""
        if self.problems:
            shown = "; ".join(self.problems[:10])
            more = f" (and {len(self.problems) - 10} more)" if len(self.problems) > 10 else ""
            raise InvalidAllocationError(f"invalid allocation: {shown}{more}")
        return self

    def to_frame(self) -> Any:
        """One row per job (a pandas ``DataFrame`` indexed by job id): ``gpus``, ``gpus_placed`` (and ``gpu_type`` on
        a heterogeneous round), ``servers``, ``throughput``, ``floor``, ``meets_floor`` (and ``type_floor``,
        ``meets_type_floor`` on a heterogeneous round), ``split``, ``disproportionate``."""
        import pandas as pd  # pandas only when asked for: `import synergy_opt` stays light

        typed = isinstance(self.instance, HeteroRound)
        rows = [{"job": s.job_id, "gpus": s.gpus, "gpus_placed": s.gpus_placed, "gpu_type": s.gpu_type,
                 "servers": s.servers, "throughput": s.throughput, "floor": s.floor, "meets_floor": s.meets_floor,
                 "type_floor": s.type_floor, "meets_type_floor": s.meets_type_floor, "split": s.split,
                 "disproportionate": s.disproportionate} for s in self.jobs.values()]
        columns = ["job", "gpus", "gpus_placed", *(["gpu_type"] if typed else []), "servers", "throughput", "floor",
                   "meets_floor", *(["type_floor", "meets_type_floor"] if typed else []), "split", "disproportionate"]
        return pd.DataFrame(rows, columns=columns).set_index("job")

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


@checked(instance=any_round, allocation=allocation_rule, strict=boolean)
def evaluate(instance: RoundInstance | HeteroRound, allocation: Allocation, *, strict: bool = False) -> Evaluation:
    """Score ``allocation`` on ``instance``.

    A job with exactly its GPUs runs at its matrix's value at its CPUs and GB per GPU (the largest grid point at
    or below each, 0 below the grid); a job split over servers runs at its poorest server's pace (its per-GPU
    share there), so CPUs or memory out of proportion to the GPUs on a server are not gained
    (``JobScore.disproportionate`` flags it); a job without exactly its GPUs has throughput 0. A server may be
    over its capacity by ``CAPACITY_TOLERANCE`` (1e-7, relative: float rounding) before the allocation is
    invalid.

    Parameters
    ----------
    instance, allocation
        The round, homogeneous or heterogeneous, and where its jobs run (either may be given in its JSON
        form, a dict).
    strict
        Raise :class:`InvalidAllocationError` on an invalid allocation instead of warning.

    Raises
    ------
    InvalidInputError
        For an allocation of another round: a job id the instance does not have, or a server the cluster
        does not have (an allocation that overloads a server or gives a job the wrong GPU count, or on a
        heterogeneous round GPUs of two types or of a type the job cannot use, is invalid, and reported in
        ``problems``).
    """
    check_same_round(instance, allocation)
    cluster = instance.cluster
    use = np.zeros((cluster.servers, 3))
    problems: list[str] = []

    floors = instance.floors
    # Each type's share throughputs (H6's floors), read once per type a job runs on.
    type_floors: dict[str, np.ndarray] = {}
    scores: dict[str, JobScore] = {}
    jobs: Sequence[Job | HeteroJob] = instance.jobs
    for index, job in enumerate(jobs):
        parts = allocation.jobs.get(job.id, ())
        placed = sum(p.gpus for p in parts)
        for p in parts:
            use[p.server] += (p.gpus, p.cpus, p.mem_gb)
        if parts and placed != job.gpus:
            problems.append(f"job {job.id!r} placed with {placed} GPUs but needs {job.gpus}")
        type_floor = None
        if isinstance(instance, HeteroRound):
            profile, gpu_type = _matrix_on_type(instance, index, parts, problems)
            if profile is not None and gpu_type is not None:
                if gpu_type not in type_floors:
                    type_floors[gpu_type] = instance.throughput_at_share(gpu_type)
                type_floor = float(type_floors[gpu_type][index])
            elif parts:  # on two types, or one it cannot use
                type_floor = math.nan
        else:
            profile, gpu_type = instance.jobs[index].profile, None
        scores[job.id] = _score(job.id, job.gpus, parts, placed, profile, float(floors[index]), gpu_type, type_floor)

    if isinstance(cluster, HeteroCluster):
        capacity = cluster.capacity
    else:
        capacity = np.broadcast_to(
            np.array([cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server]), use.shape)
    over = use > capacity * (1 + CAPACITY_TOLERANCE)
    for server, resource in zip(*np.nonzero(over), strict=True):
        kind = f" ({cluster.type_of_server(int(server))})" if isinstance(cluster, HeteroCluster) else ""
        problems.append(
            f"server {server}{kind} uses {use[server, resource]:g} {RESOURCES[resource]} of "
            f"{capacity[server, resource]:g}"
        )
    evaluation = Evaluation(instance, scores, use, tuple(problems))
    if problems:
        if strict:
            evaluation.check()
        # stacklevel 3: past the @checked wrapper, at the caller's line.
        warnings.warn(f"invalid allocation: {'; '.join(problems[:5])}", InvalidAllocationWarning, stacklevel=3)
    return evaluation


def _score(job_id: str, gpus: int, parts: tuple[Placement, ...], placed: int, profile: Profile | None,
           floor: float, gpu_type: str | None, type_floor: float | None) -> JobScore:
    """One job's score: its poorest server's throughput when it has exactly its GPUs (and a matrix there)."""
    servers = tuple(p.server for p in parts)
    uneven = False
    if parts and placed == gpus and profile is not None:
        per_gpu = np.array([(p.cpus / p.gpus, p.mem_gb / p.gpus) for p in parts])
        throughput = float(np.min(profile.throughput(per_gpu[:, 0], per_gpu[:, 1])))
        uneven = bool(np.any(np.abs(per_gpu - per_gpu[0]) > CAPACITY_TOLERANCE * (1 + np.abs(per_gpu[0]))))
    else:
        throughput = 0.0
    return JobScore(job_id, gpus, placed, servers, throughput, floor, uneven, gpu_type, type_floor)


def _matrix_on_type(instance: HeteroRound, index: int, parts: tuple[Placement, ...],
                    problems: list[str]) -> tuple[Profile | None, str | None]:
    """The matrix a job of a heterogeneous round runs by, and the type of its servers; no matrix (and a
    problem) when its servers are of two types or of a type it cannot use."""
    if not parts:
        return None, None
    cluster, job = instance.cluster, instance.jobs[index]
    kinds = sorted({cluster.type_of_server(p.server) for p in parts})
    if len(kinds) > 1:
        problems.append(f"job {job.id!r} runs on GPUs of types {', '.join(kinds)}: all GPUs of a job are of one type")
        return None, None
    if kinds[0] not in job.profiles:
        problems.append(f"job {job.id!r} runs on type {kinds[0]}, which it cannot use ({', '.join(job.types)})")
        return None, kinds[0]
    return job.profiles[kinds[0]], kinds[0]


def check_same_round(instance: RoundInstance | HeteroRound, allocation: Allocation) -> None:
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
