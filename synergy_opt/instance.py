"""The data model: Cluster, Job, RoundInstance, Allocation (frozen dataclasses); Profile is :mod:`synergy_opt.profile`.

Every constructor validates its own fields and raises :class:`InvalidInputError` naming the field and the
value; the JSON layer (:mod:`synergy_opt.io`) prefixes the path of the field inside the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.profile import (  # noqa: F401 (re-exported)
    GRID_TOLERANCE,
    Profile,
    grid_index,
    median_positive,
    on_grid,
)
from synergy_opt.profile_groups import ProfileGroup, group_profiles
from synergy_opt.validation import (
    MAX_GPUS_PER_SERVER,
    MAX_SERVERS,
    NON_NEGATIVE,
    POSITIVE,
    InstanceOf,
    Integer,
    Optional,
    known_fields,
    text,
)

# The fields' rules (synergy_opt.validation), named once.
_SERVERS = Integer(1, MAX_SERVERS)
_GPUS = Integer(1, MAX_GPUS_PER_SERVER * MAX_SERVERS)
_PLACED_GPUS = Integer(1, MAX_GPUS_PER_SERVER)
_SERVER_ID = Integer(0, MAX_SERVERS - 1)
_NAME = Optional(text)
_PLACEMENT_FIELDS = ("server", "gpus", "cpus", "mem_gb")


@dataclass(frozen=True)
class Cluster:
    """``servers`` homogeneous servers, each with the given GPUs, CPUs and memory."""

    servers: int
    gpus_per_server: int = 8
    cpus_per_server: float = 24
    mem_gb_per_server: float = 500

    def __post_init__(self) -> None:
        object.__setattr__(self, "servers", _SERVERS("servers", self.servers))
        object.__setattr__(self, "gpus_per_server", _PLACED_GPUS("gpus_per_server", self.gpus_per_server))
        object.__setattr__(self, "cpus_per_server", POSITIVE("cpus_per_server", self.cpus_per_server))
        object.__setattr__(self, "mem_gb_per_server", POSITIVE("mem_gb_per_server", self.mem_gb_per_server))

    @property
    def total_gpus(self) -> int:
        return self.servers * self.gpus_per_server

    @property
    def total_cpus(self) -> float:
        return self.servers * self.cpus_per_server

    @property
    def total_mem_gb(self) -> float:
        return self.servers * self.mem_gb_per_server

    @property
    def cpu_per_gpu(self) -> float:
        """GPU-proportional CPU share per GPU, ``c_p = C_i / G_i``."""
        return self.cpus_per_server / self.gpus_per_server

    @property
    def mem_gb_per_gpu(self) -> float:
        """GPU-proportional memory share per GPU, ``m_p = M_i / G_i``."""
        return self.mem_gb_per_server / self.gpus_per_server

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form, as a round file's ``cluster``."""
        return {
            "servers": self.servers,
            "gpus_per_server": self.gpus_per_server,
            "cpus_per_server": _plain(self.cpus_per_server),
            "mem_gb_per_server": _plain(self.mem_gb_per_server),
        }


@dataclass(frozen=True)
class Job:
    """A training job of one round: fixed GPU demand and its sensitivity profile."""

    id: str
    gpus: int
    profile: Profile
    model: str | None = None
    arrival: float = 0.0
    work: float | None = None

    def __post_init__(self) -> None:
        text("id", self.id)
        object.__setattr__(self, "gpus", _GPUS("gpus", self.gpus))
        InstanceOf(Profile)("profile", self.profile)
        object.__setattr__(self, "model", _NAME("model", self.model))
        object.__setattr__(self, "arrival", NON_NEGATIVE("arrival", self.arrival))
        object.__setattr__(self, "work", Optional(POSITIVE)("work", self.work))


@dataclass(frozen=True)
class RoundInstance:
    """A cluster plus the runnable jobs of one round (``sum g_j <= s * G``)."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        InstanceOf(Cluster)("cluster", self.cluster)
        if isinstance(self.jobs, (str, Mapping)) or not isinstance(self.jobs, Iterable):
            raise InvalidInputError("jobs", self.jobs, "must be a sequence of Job")
        jobs = tuple(self.jobs)
        object.__setattr__(self, "jobs", jobs)
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError("metadata", self.metadata, "must be a dict")
        seen: set[str] = set()
        for index, job in enumerate(jobs):
            InstanceOf(Job)(f"jobs[{index}]", job)
            if job.id in seen:
                raise InvalidInputError(f"jobs[{index}].id", job.id, "duplicate job id")
            seen.add(job.id)
        demand = sum(job.gpus for job in jobs)
        if demand > self.cluster.total_gpus:
            raise InvalidInputError(
                "jobs[*].gpus", demand,
                f"total GPU demand exceeds the cluster's {self.cluster.total_gpus} GPUs",
            )

    @cached_property
    def job_index(self) -> dict[str, int]:
        return {job.id: index for index, job in enumerate(self.jobs)}

    @cached_property
    def gpus(self) -> np.ndarray:
        """GPU demand per job, in job order."""
        return np.array([job.gpus for job in self.jobs], dtype=np.int64)

    @cached_property
    def floors(self) -> np.ndarray:
        """Each job's throughput at the GPU-proportional point (what GPU-proportional gives it)."""
        c_p, m_p = self.cluster.cpu_per_gpu, self.cluster.mem_gb_per_gpu
        floors = np.zeros(len(self.jobs))
        # One vectorised read per group of profiles sharing axes (a profile per job costs 8 ms at 1024 jobs).
        for group in self.profile_groups:
            floors[group.jobs] = group.read(group.row, c_p, m_p)
        floors.flags.writeable = False
        return floors

    @cached_property
    def profile_groups(self) -> tuple[ProfileGroup, ...]:
        """The jobs grouped by profile axes, each distinct profile's matrix stacked once (built once per round:
        the builders, the best-case demands and the mechanisms all read it; read-only)."""
        return tuple(group_profiles([job.profile for job in self.jobs]))

    def floor(self, job_id: str) -> float:
        return float(self.floors[self.job_index[job_id]])

    def largest_throughput(self) -> float:
        """The largest value of any job's matrix (0 for a round without jobs); over the round's stacked
        matrices, which the mechanisms read anyway (a read per job took 2.3 ms at 1024 jobs)."""
        return max((float(np.max(group.tput, initial=0.0)) for group in self.profile_groups), default=0.0)

    def median_throughput(self) -> float:
        """The median positive value of the jobs' matrices (0 when none is): the round's ordinary magnitude."""
        return median_positive(np.concatenate([group.tput.ravel() for group in self.profile_groups] or [np.zeros(0)]))

    def scaled(self, factor: float) -> RoundInstance:
        """The round with every matrix times ``factor`` (a profile shared by several jobs stays shared; a power
        of two keeps every comparison: the solvers' absolute tolerances are met on rounds of unusual units)."""
        profiles: dict[int, Profile] = {}
        jobs = []
        for job in self.jobs:
            profile = job.profile
            if id(profile) not in profiles:
                profiles[id(profile)] = Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput * factor,
                                                profile.name)
            jobs.append(Job(job.id, job.gpus, profiles[id(profile)], job.model, job.arrival, job.work))
        # Trusted: the same jobs, only their matrices scaled (the simulator's whole-queue rounds may ask for more
        # GPUs than the cluster has, which a checked round refuses).
        return trusted_round(self.cluster, tuple(jobs), self.metadata)


@dataclass(frozen=True)
class Placement:
    """The share of one job on one server: integral GPUs, and the CPUs and memory there."""

    server: int
    gpus: int
    cpus: float
    mem_gb: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "server", _SERVER_ID("server", self.server))
        object.__setattr__(self, "gpus", _PLACED_GPUS("gpus", self.gpus))
        object.__setattr__(self, "cpus", NON_NEGATIVE("cpus", self.cpus))
        object.__setattr__(self, "mem_gb", NON_NEGATIVE("mem_gb", self.mem_gb))

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form: ``server``, ``gpus``, ``cpus``, ``mem_gb``."""
        return {"server": self.server, "gpus": self.gpus, "cpus": _plain(self.cpus), "mem_gb": _plain(self.mem_gb)}


@dataclass(frozen=True)
class Allocation:
    """Where each placed job runs: job id -> its placements (one per server). Absent jobs are unplaced."""

    jobs: Mapping[str, tuple[Placement, ...]]

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, Mapping):
            raise InvalidInputError("jobs", self.jobs, "must be a dict of job id -> placements")
        jobs: dict[str, tuple[Placement, ...]] = {}
        for job_id, placements in self.jobs.items():
            where = f"jobs[{job_id!r}]"
            if not isinstance(job_id, str) or not job_id:
                raise InvalidInputError("jobs", job_id, "a job id is a non-empty string")
            if isinstance(placements, (str, Mapping)) or not isinstance(placements, Iterable):
                raise InvalidInputError(where, placements, "must be a sequence of Placement")
            parts = tuple(placements)
            for index, part in enumerate(parts):
                InstanceOf(Placement)(f"{where}[{index}]", part)
            servers = [p.server for p in parts]
            if len(set(servers)) != len(servers):
                raise InvalidInputError(where, servers, "a job may appear once per server")
            if parts:
                jobs[job_id] = tuple(sorted(parts, key=lambda p: p.server))
        object.__setattr__(self, "jobs", jobs)

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form, ``{"jobs": {job id: [placements]}}`` (:meth:`from_dict` reads it back)."""
        return {"jobs": {job_id: [p.to_dict() for p in parts] for job_id, parts in self.jobs.items()}}

    def to_frame(self) -> Any:
        """One row per placement (a pandas ``DataFrame``): ``job``, ``server``, ``gpus``, ``cpus``, ``mem_gb``."""
        import pandas as pd  # pandas only when asked for: `import synergy_opt` stays light

        rows = [{"job": job_id, **part.to_dict()} for job_id, parts in self.jobs.items() for part in parts]
        return pd.DataFrame(rows, columns=["job", "server", "gpus", "cpus", "mem_gb"])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Allocation:
        if isinstance(data, Mapping):
            known_fields("", data, ("jobs",))  # first: a misspelt 'job' is named with the closest
        if not isinstance(data, Mapping) or not isinstance(data.get("jobs"), Mapping):
            raise InvalidInputError("jobs", data, "an allocation is {'jobs': {job id: [placements]}}")
        jobs: dict[str, tuple[Placement, ...]] = {}
        for job_id, parts in data["jobs"].items():
            if not isinstance(job_id, str) or not job_id:
                raise InvalidInputError("jobs", job_id, "a job id is a non-empty string")
            if not isinstance(parts, list):
                raise InvalidInputError(f"jobs[{job_id!r}]", parts, "must be a list of placements")
            placed = []
            for index, part in enumerate(parts):
                where = f"jobs[{job_id!r}][{index}]"
                if not isinstance(part, Mapping):
                    raise InvalidInputError(where, part, "must be an object")
                # A misspelt field is named with the closest known one (an extra one was ignored before).
                known_fields(where, part, _PLACEMENT_FIELDS)
                missing = [key for key in _PLACEMENT_FIELDS if key not in part]
                if missing:
                    raise InvalidInputError(f"{where}.{missing[0]}", None, "missing field")
                try:
                    placed.append(Placement(part["server"], part["gpus"], part["cpus"], part["mem_gb"]))
                except InvalidInputError as error:
                    raise prefixed(error, where) from None
            jobs[job_id] = tuple(placed)
        return cls(jobs)

    def gpus_of(self, job_id: str) -> int:
        """GPUs placed for ``job_id`` over all its servers (0 when it is not placed)."""
        return sum(p.gpus for p in self.jobs.get(job_id, ()))

    def servers_of(self, job_id: str) -> tuple[int, ...]:
        """The servers ``job_id`` is placed on, in order (empty when it is not placed)."""
        return tuple(p.server for p in self.jobs.get(job_id, ()))


def job_throughputs(instance: RoundInstance, cpu_per_gpu: np.ndarray, mem_per_gpu: np.ndarray) -> np.ndarray:
    """Each job's ``W`` at its per-GPU point (job order), read as the evaluator reads it, vectorised per
    group of jobs sharing profile axes (largest grid point ``<=`` in each axis, 0 below the grid)."""
    value = np.zeros(len(instance.jobs))
    for group in instance.profile_groups:
        value[group.jobs] = group.read(group.row, cpu_per_gpu[group.jobs], mem_per_gpu[group.jobs])
    return value


def trusted_job(id: str, gpus: int, profile: Profile, model: str | None, arrival: float, work: float | None) -> Job:
    """A Job without re-validation, from the fields of a valid job (a heterogeneous job's view of one type)."""
    job = object.__new__(Job)
    job.__dict__.update(id=id, gpus=gpus, profile=profile, model=model, arrival=arrival, work=work)
    return job


def trusted_round(cluster: Cluster, jobs: tuple[Job, ...], metadata: Mapping[str, Any]) -> RoundInstance:
    """A RoundInstance of valid jobs with distinct ids, each of which fits the cluster, without re-validation
    (a heterogeneous round's view of one type: checking its jobs again took 1.7 ms a type at 1024 GPUs). Their
    total may exceed the cluster's GPUs only for a mechanism that leaves jobs out (the simulator's whole-queue
    round for the artifact's FIFO, ``sim/engine.py``)."""
    instance = object.__new__(RoundInstance)
    instance.__dict__.update(cluster=cluster, jobs=jobs, metadata=metadata)
    return instance


def trusted_placement(server: int, gpus: int, cpus: float, mem_gb: float) -> Placement:
    """A Placement without re-validation, for callers that only make valid ones (building 16k validated
    Placements and an Allocation costs more than TUNE itself: 0.3 s at 16384 GPUs)."""
    placement = object.__new__(Placement)
    placement.__dict__.update(server=server, gpus=gpus, cpus=float(cpus), mem_gb=float(mem_gb))
    return placement


def trusted_allocation(parts: dict[str, tuple[Placement, ...]]) -> Allocation:
    """An Allocation of valid placements (distinct servers per job, sorted by server) without re-validation."""
    allocation = object.__new__(Allocation)
    allocation.__dict__["jobs"] = parts
    return allocation


def prefixed(error: InvalidInputError, prefix: str, separator: str = ".") -> InvalidInputError:
    """The same error with the field's path inside its container prepended (``separator`` between them, but
    before an index)."""
    inner = error.field
    path = f"{prefix}{inner}" if inner.startswith("[") else f"{prefix}{separator}{inner}"
    if isinstance(error, UnknownNameError):
        return UnknownNameError(path, error.value, error.known)
    return InvalidInputError(path, error.value, error.reason)


# Integral floats below this are written as ints; larger ones stay floats (1e100 as an int is 101 digits, more
# than the JSON reader takes: a saved round would not load back).
_PLAIN_INT_BELOW = 2.0**53


def _plain(value: float) -> float | int:
    """Integral floats as ints, so saved JSON reads as written (24, not 24.0); huge ones as floats."""
    number = float(value)
    return int(number) if number.is_integer() and abs(number) < _PLAIN_INT_BELOW else number


def allocation(name: str, value: Any) -> Allocation:
    """The rule for an allocation argument: an :class:`Allocation`, or its JSON form ``{"jobs": {id: [...]}}``."""
    if isinstance(value, Allocation):
        return value
    if isinstance(value, Mapping):
        try:
            return Allocation.from_dict(value)
        except InvalidInputError as error:
            raise prefixed(error, name) from None
    raise InvalidInputError(name, value, "must be an Allocation (or its JSON form, a dict)")
