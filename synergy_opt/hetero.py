"""Heterogeneous clusters (SPEC 7, issue 20): GPU types as a third dimension of the data model.

- A :class:`HeteroCluster` is a list of :class:`ServerType`: a GPU type's name, its server count and GPUs, CPUs
  and memory per server. Servers are numbered across the cluster, type after type in the order given, so an
  :class:`~synergy_opt.instance.Allocation` names servers as on a homogeneous cluster. The proportional share
  per GPU is per type, ``C_t / G_t`` and ``M_t / G_t``. One type is the *reference*: ``v100`` when the cluster
  has it (the built-in matrices were profiled on the paper's testbed, servers of 8 V100 GPUs, 24 CPUs and
  500 GB), else the first type.
- A :class:`HeteroJob` holds one matrix per GPU type it can use (``profiles``; their axes may differ by type)
  and a *baseline* type, the one a heterogeneity-agnostic (or policy-chosen) GPU allocation gives it. Every
  matrix is in one unit, the job's throughput at the proportional share of the reference type, so that
  throughputs on different types add up. All GPUs of a job are of one type.
- A :class:`HeteroRound` is the round: its cluster, its jobs, and each job's *floor*, its throughput at the
  proportional share of its baseline type. It is *type-fixed* when every job can use exactly one type (a
  heterogeneity-aware policy chose the types), *type-free* otherwise (the formulations choose them too).

A homogeneous :class:`~synergy_opt.instance.Cluster` and :class:`~synergy_opt.instance.RoundInstance` stay what
they are (one type, every formulation unchanged). A type-fixed round is solved type by type:
:meth:`HeteroRound.per_type` gives each type's homogeneous round (its servers, numbered from 0, and the jobs
fixed to it), :func:`join_allocations` puts the per-type allocations back on the cluster's server numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.instance import (
    Allocation,
    Cluster,
    Job,
    Placement,
    RoundInstance,
    prefixed,
    trusted_allocation,
    trusted_job,
    trusted_placement,
    trusted_round,
)
from synergy_opt.profile import Profile, median_positive
from synergy_opt.profile_groups import ProfileGroup, group_profiles, subset_groups
from synergy_opt.validation import MAX_SERVERS, InstanceOf, Optional, text

# The GPU type the built-in matrices were profiled on, the reference type of a cluster that has it: the paper's
# testbed servers (8 V100 GPUs, 24 CPUs, 500 GB). Defined once here, the lowest module that needs it.
REFERENCE_GPU_TYPE = "v100"
# A type name: what a file, a command line (``k80:4,v100:4``) and a metadata key can all carry.
_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_CLUSTER_FIELDS = ("servers", "gpus_per_server", "cpus_per_server", "mem_gb_per_server")


def type_name(name: str, value: Any) -> str:
    """The rule for a GPU type's name: letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit."""
    value = text(name, value)
    if not _TYPE_NAME.match(value):
        raise InvalidInputError(name, value, "a GPU type's name is letters, digits, '_', '.' or '-' (e.g. 'v100')")
    return value


def type_matrices(name: str, value: Any) -> dict[str, Profile]:
    """The rule for a job's matrices per GPU type: a non-empty mapping of type name -> :class:`Profile`, as a
    dict in the order given."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidInputError(name, value, "must be a non-empty dict of GPU type -> Profile")
    matrices: dict[str, Profile] = {}
    for kind, profile in value.items():
        type_name(name, kind)
        matrices[kind] = InstanceOf(Profile)(f"{name}[{kind!r}]", profile)
    return matrices


@dataclass(frozen=True)
class ServerType:
    """``servers`` servers of GPU type ``name``, each with the given GPUs, CPUs and memory (as a
    :class:`~synergy_opt.instance.Cluster`'s, whose rules apply)."""

    name: str
    servers: int
    gpus_per_server: int = 8
    cpus_per_server: float = 24
    mem_gb_per_server: float = 500

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", type_name("name", self.name))
        # The homogeneous cluster of this type's servers checks (and normalises) the four numbers.
        cluster = Cluster(*(getattr(self, key) for key in _CLUSTER_FIELDS))
        for key in _CLUSTER_FIELDS:
            object.__setattr__(self, key, getattr(cluster, key))

    @cached_property
    def cluster(self) -> Cluster:
        """This type's servers as a homogeneous cluster (servers numbered from 0)."""
        return Cluster(self.servers, self.gpus_per_server, self.cpus_per_server, self.mem_gb_per_server)

    @property
    def total_gpus(self) -> int:
        return self.servers * self.gpus_per_server

    @property
    def cpu_per_gpu(self) -> float:
        """The type's GPU-proportional CPU share per GPU, ``C_t / G_t``."""
        return self.cluster.cpu_per_gpu

    @property
    def mem_gb_per_gpu(self) -> float:
        """The type's GPU-proportional memory share per GPU, ``M_t / G_t``."""
        return self.cluster.mem_gb_per_gpu

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.cluster.to_dict()}


@dataclass(frozen=True)
class HeteroCluster:
    """Servers of several GPU types, numbered type after type; ``reference`` names the unit type (module
    docstring): default ``v100`` when present, else the first type."""

    types: tuple[ServerType, ...]
    reference: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.types, (str, Mapping)) or not isinstance(self.types, Iterable):
            raise InvalidInputError("types", self.types, "must be a sequence of ServerType")
        types = tuple(self.types)
        if not types:
            raise InvalidInputError("types", [], "a cluster has at least one server type")
        seen: set[str] = set()
        for index, server_type in enumerate(types):
            InstanceOf(ServerType)(f"types[{index}]", server_type)
            if server_type.name in seen:
                raise InvalidInputError(f"types[{index}].name", server_type.name, "duplicate GPU type")
            seen.add(server_type.name)
        servers = sum(t.servers for t in types)
        if servers > MAX_SERVERS:
            raise InvalidInputError("types[*].servers", servers, f"must be at most {MAX_SERVERS} servers in all")
        object.__setattr__(self, "types", types)
        reference = Optional(text)("reference", self.reference)
        if reference is None:
            reference = REFERENCE_GPU_TYPE if REFERENCE_GPU_TYPE in seen else types[0].name
        elif reference not in seen:
            raise UnknownNameError("reference", reference, tuple(t.name for t in types))
        object.__setattr__(self, "reference", reference)

    @classmethod
    def of(
        cls,
        servers: Mapping[str, int] | str,
        gpus_per_server: int = 8,
        cpus_per_server: float = 24,
        mem_gb_per_server: float = 500,
        *,
        reference: str | None = None,
    ) -> HeteroCluster:
        """Servers per type, all of one shape: ``HeteroCluster.of({"k80": 4, "v100": 4})`` or
        ``HeteroCluster.of("k80:4,v100:4")``."""
        counts = parse_type_counts("servers", servers) if isinstance(servers, str) else servers
        if not isinstance(counts, Mapping):
            raise InvalidInputError("servers", servers, "must be a dict of GPU type -> servers (or 'k80:4,v100:4')")
        types = []
        for name, count in counts.items():
            try:
                types.append(ServerType(name, count, gpus_per_server, cpus_per_server, mem_gb_per_server))
            except InvalidInputError as error:
                raise prefixed(error, f"servers[{name!r}]") from None
        return cls(tuple(types), reference)

    @classmethod
    def homogeneous(cls, cluster: Cluster, name: str = REFERENCE_GPU_TYPE) -> HeteroCluster:
        """A homogeneous cluster as one server type named ``name``."""
        InstanceOf(Cluster)("cluster", cluster)
        fields = cluster.to_dict()
        return cls((ServerType(name, *(fields[key] for key in _CLUSTER_FIELDS)),))

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.types)

    @property
    def counts_text(self) -> str:
        """Servers per type as :meth:`of` reads them (``"k80:4,v100:4"``): a result's label of the cluster."""
        return ",".join(f"{t.name}:{t.servers}" for t in self.types)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {name: index for index, name in enumerate(self.names)}

    def index(self, name: str) -> int:
        """Position of type ``name`` in the cluster (:class:`UnknownNameError` naming the types otherwise)."""
        if name not in self._index:
            raise UnknownNameError("gpu_type", name, self.names)
        return self._index[name]

    def __getitem__(self, name: str) -> ServerType:
        return self.types[self.index(name)]

    @property
    def reference_type(self) -> ServerType:
        return self[str(self.reference)]

    @property
    def normalises_builtin(self) -> bool:
        """Whether a built-in model's matrices are divided by its throughput at the reference type's
        proportional share to be in this cluster's unit (:func:`normalise`): when the reference is not the
        ``v100``. On a ``v100`` reference they are taken as built in (1 at 3 CPUs and 62.5 GB per GPU on a
        ``v100``), so that a one-type round reads a homogeneous one's numbers. ``generate_round`` and round files
        both follow this rule."""
        return self.reference != REFERENCE_GPU_TYPE

    @property
    def servers(self) -> int:
        """All servers of every type."""
        return int(self.offsets[-1])

    @property
    def total_gpus(self) -> int:
        return sum(t.total_gpus for t in self.types)

    @cached_property
    def offsets(self) -> np.ndarray:
        """First server number of each type, and the number of servers last: type ``k`` has servers
        ``offsets[k] .. offsets[k + 1] - 1``."""
        offsets = np.concatenate([[0], np.cumsum([t.servers for t in self.types])]).astype(np.int64)
        offsets.flags.writeable = False
        return offsets

    def server_range(self, name: str) -> range:
        """The cluster's server numbers of type ``name``."""
        k = self.index(name)
        return range(int(self.offsets[k]), int(self.offsets[k + 1]))

    @cached_property
    def server_types(self) -> np.ndarray:
        """The type (its position) of every server."""
        kinds = np.repeat(np.arange(len(self.types)), [t.servers for t in self.types])
        kinds.flags.writeable = False
        return kinds

    def type_of_server(self, server: int) -> str:
        return self.names[int(self.server_types[server])]

    @cached_property
    def capacity(self) -> np.ndarray:
        """``(servers, 3)``: every server's GPUs, CPUs and GB."""
        per_type = np.array([[t.gpus_per_server, t.cpus_per_server, t.mem_gb_per_server] for t in self.types],
                            dtype=float)
        capacity = per_type[self.server_types]
        capacity.flags.writeable = False
        return capacity

    @cached_property
    def share_per_gpu(self) -> np.ndarray:
        """``(2, types)``: each type's GPU-proportional share per GPU, CPUs (row 0) and GB (row 1), so that
        ``share_per_gpu[:, kinds]`` is the share of jobs on types ``kinds`` (positions)."""
        shares = np.array([[t.cpu_per_gpu for t in self.types], [t.mem_gb_per_gpu for t in self.types]])
        shares.flags.writeable = False
        return shares

    def to_dict(self) -> dict[str, Any]:
        return {"types": [t.to_dict() for t in self.types], "reference": self.reference}


def parse_type_counts(name: str, value: str) -> dict[str, int]:
    """``"k80:4,p100:4,v100:4"`` as ``{"k80": 4, "p100": 4, "v100": 4}`` (the counts are checked where used)."""
    counts: dict[str, int] = {}
    for part in text(name, value).split(","):
        kind, sep, count = part.strip().partition(":")
        # ASCII digits only: str.isdigit() also holds for '²' (int() then fails) and '٣' (read as 3).
        if not sep or not (count.strip().isascii() and count.strip().isdigit()):
            raise InvalidInputError(name, value, "write GPU types as type:count pairs, e.g. 'k80:4,p100:4,v100:4'")
        kind = type_name(name, kind.strip())
        if kind in counts:
            raise InvalidInputError(name, value, f"GPU type {kind!r} is given twice")
        counts[kind] = int(count)
    return counts


@dataclass(frozen=True)
class HeteroJob:
    """A job of a heterogeneous round: one matrix per GPU type it can use, and its baseline type.

    ``profiles`` maps each usable type to the job's matrix there (limiting a job to some types is giving it
    only those). ``baseline`` may be left out when the job has one type. The other fields are a
    :class:`~synergy_opt.instance.Job`'s.
    """

    id: str
    gpus: int
    profiles: Mapping[str, Profile]
    baseline: str | None = None
    model: str | None = None
    arrival: float = 0.0
    work: float | None = None

    def __post_init__(self) -> None:
        profiles = type_matrices("profiles", self.profiles)
        object.__setattr__(self, "profiles", profiles)
        baseline = Optional(text)("baseline", self.baseline)
        if baseline is None:
            if len(profiles) > 1:
                raise InvalidInputError("baseline", None, f"a job of several types ({', '.join(profiles)}) needs "
                                        "a baseline type")
            baseline = next(iter(profiles))
        elif baseline not in profiles:
            raise UnknownNameError("baseline", baseline, tuple(profiles))
        object.__setattr__(self, "baseline", baseline)
        # A homogeneous Job checks the id, GPUs, model, arrival and work.
        base = Job(self.id, self.gpus, profiles[baseline], self.model, self.arrival, self.work)
        for key in ("id", "gpus", "model", "arrival", "work"):
            object.__setattr__(self, key, getattr(base, key))

    def __hash__(self) -> int:  # as a Job is hashable (its profiles by value)
        return hash((self.id, self.gpus, tuple(self.profiles.items()), self.baseline, self.model, self.arrival,
                     self.work))

    @property
    def types(self) -> tuple[str, ...]:
        """The GPU types the job can use, in the order its profiles are given."""
        return tuple(self.profiles)

    @property
    def baseline_type(self) -> str:
        return str(self.baseline)

    def on(self, gpu_type: str) -> Job:
        """The homogeneous job it is on type ``gpu_type``: the same fields, that type's matrix."""
        if gpu_type not in self.profiles:
            raise UnknownNameError("gpu_type", gpu_type, self.types)
        # The fields were checked when the job was made.
        return trusted_job(self.id, self.gpus, self.profiles[gpu_type], self.model, self.arrival, self.work)

    def limited_to(self, types: Iterable[str], baseline: str | None = None) -> HeteroJob:
        """The same job allowed only ``types`` (its baseline kept unless another is given)."""
        kinds = [types] if isinstance(types, str) else list(types)
        for kind in kinds:
            if kind not in self.profiles:
                raise UnknownNameError("types", kind, self.types)
        chosen = baseline if baseline is not None else (self.baseline if self.baseline in kinds else None)
        return HeteroJob(self.id, self.gpus, {kind: self.profiles[kind] for kind in kinds}, chosen, self.model,
                         self.arrival, self.work)

    def fixed_to(self, gpu_type: str) -> HeteroJob:
        """The job fixed to ``gpu_type``: its only type, hence its baseline (a checked job's fields, not checked
        again: type-fixed rounds are made of every job on every round of a heterogeneous mechanism)."""
        if gpu_type not in self.profiles:
            raise UnknownNameError("types", gpu_type, self.types)
        job = object.__new__(HeteroJob)
        job.__dict__.update(self.__dict__, profiles={gpu_type: self.profiles[gpu_type]}, baseline=gpu_type)
        return job


@dataclass(frozen=True)
class TypeProfiles:
    """The jobs of a round with a matrix on one type (job indices, ascending) and those matrices grouped by
    axes (:func:`~synergy_opt.profile_groups.group_profiles`: a group's ``jobs`` index ``members``)."""

    members: np.ndarray
    groups: tuple[ProfileGroup, ...]


@dataclass(frozen=True)
class HeteroRound:
    """A heterogeneous cluster and the runnable jobs of one round (module docstring).

    Checked when built: every job's types are the cluster's and hold its GPUs; the baseline types hold every
    job at once (``sum of g_j over jobs of baseline t <= GPUs of t``), so every job at its baseline's
    proportional share is an allocation's worth of GPUs, as ``sum g_j <= s G`` is on one type.
    """

    cluster: HeteroCluster
    jobs: tuple[HeteroJob, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        InstanceOf(HeteroCluster)("cluster", self.cluster)
        if isinstance(self.jobs, (str, Mapping)) or not isinstance(self.jobs, Iterable):
            raise InvalidInputError("jobs", self.jobs, "must be a sequence of HeteroJob")
        jobs = tuple(self.jobs)
        object.__setattr__(self, "jobs", jobs)
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError("metadata", self.metadata, "must be a dict")
        cluster = self.cluster
        seen: set[str] = set()
        baseline_demand = np.zeros(len(cluster.types), dtype=np.int64)
        for index, job in enumerate(jobs):
            InstanceOf(HeteroJob)(f"jobs[{index}]", job)
            if job.id in seen:
                raise InvalidInputError(f"jobs[{index}].id", job.id, "duplicate job id")
            seen.add(job.id)
            for kind in job.types:
                if kind not in cluster.names:
                    raise UnknownNameError(f"jobs[{index}].profiles", kind, cluster.names)
                if job.gpus > cluster[kind].total_gpus:
                    raise InvalidInputError(f"jobs[{index}].gpus", job.gpus,
                                            f"more than type {kind!r}'s {cluster[kind].total_gpus} GPUs (all GPUs "
                                            "of a job are of one type)")
            baseline_demand[cluster.index(job.baseline_type)] += job.gpus
        for k, server_type in enumerate(cluster.types):
            if baseline_demand[k] > server_type.total_gpus:
                raise InvalidInputError("jobs[*].baseline", server_type.name,
                                        f"the jobs of baseline {server_type.name!r} need {baseline_demand[k]} GPUs, "
                                        f"more than its {server_type.total_gpus}")

    @cached_property
    def job_index(self) -> dict[str, int]:
        return {job.id: index for index, job in enumerate(self.jobs)}

    @cached_property
    def gpus(self) -> np.ndarray:
        """GPU demand per job, in job order."""
        gpus = np.array([job.gpus for job in self.jobs], dtype=np.int64)
        gpus.flags.writeable = False
        return gpus

    @property
    def baselines(self) -> tuple[str, ...]:
        """Each job's baseline type, in job order (its floor is its throughput at that type's share)."""
        return tuple(job.baseline_type for job in self.jobs)

    @cached_property
    def baseline_index(self) -> np.ndarray:
        """Each job's baseline type, as its position in the cluster (read-only; the type-free model's steps all
        read it: 2 ms a read at 3072 jobs)."""
        index = self.cluster._index
        kinds = np.array([index[job.baseline_type] for job in self.jobs], dtype=np.int64)
        kinds.flags.writeable = False
        return kinds

    @property
    def type_fixed(self) -> bool:
        """Every job can use exactly one type (so the round splits by type)."""
        return all(len(job.profiles) == 1 for job in self.jobs)

    @cached_property
    def type_profiles(self) -> dict[str, TypeProfiles]:
        """Per type (cluster order), the jobs with a matrix there and those matrices grouped, read once per round
        (the shares, the type-free model and each type's round all read them; read-only)."""
        out = {}
        for name in self.cluster.names:
            members = [(j, job.profiles[name]) for j, job in enumerate(self.jobs) if name in job.profiles]
            index = np.array([j for j, _ in members], dtype=np.int64)
            index.flags.writeable = False
            out[name] = TypeProfiles(index, tuple(group_profiles([profile for _, profile in members])))
        return out

    def throughput_at_share(self, gpu_type: str) -> np.ndarray:
        """Each job's throughput at type ``gpu_type``'s proportional share (NaN for jobs without that type)."""
        server_type = self.cluster[gpu_type]
        out = np.full(len(self.jobs), np.nan)
        on_type = self.type_profiles[gpu_type]
        # One vectorised read per group of profiles sharing axes, as RoundInstance.floors reads them.
        for group in on_type.groups:
            out[on_type.members[group.jobs]] = group.read(group.row, server_type.cpu_per_gpu,
                                                          server_type.mem_gb_per_gpu)
        return out

    @cached_property
    def floors(self) -> np.ndarray:
        """Each job's floor: its throughput at the proportional share of its baseline type."""
        floors = np.zeros(len(self.jobs))
        baselines = np.array(self.baselines, dtype=object)
        for name in self.cluster.names:
            on = baselines == name
            if on.any():
                floors[on] = self.throughput_at_share(name)[on]
        floors.flags.writeable = False
        return floors

    def floor(self, job_id: str) -> float:
        """``job_id``'s floor: its throughput at its baseline type's proportional share."""
        return float(self.floors[self.job_index[job_id]])

    @cached_property
    def reference_throughputs(self) -> np.ndarray:
        """Each job's throughput at the reference type's proportional share, the unit of its matrices (a
        simulator's progress is throughput over this); 1.0, the unit itself, for a job without that type."""
        values = self.throughput_at_share(str(self.cluster.reference))
        values = np.where(np.isnan(values), 1.0, values)
        values.flags.writeable = False
        return values

    def with_types(self, choice: Mapping[str, str] | Sequence[str]) -> HeteroRound:
        """The type-fixed round with every job fixed to its chosen type (job id -> type, or one per job in
        order); the chosen type becomes its baseline, so its floor is that type's proportional share."""
        if isinstance(choice, Mapping):
            missing = [job.id for job in self.jobs if job.id not in choice]
            if missing:
                raise InvalidInputError("choice", missing[0], "every job needs a type")
            kinds = [choice[job.id] for job in self.jobs]
        else:
            kinds = list(choice)
            if len(kinds) != len(self.jobs):
                raise InvalidInputError("choice", len(kinds), f"one type per job ({len(self.jobs)})")
        jobs = []
        for index, (job, kind) in enumerate(zip(self.jobs, kinds, strict=True)):
            try:
                jobs.append(job.fixed_to(kind))
            except InvalidInputError as error:
                raise prefixed(error, f"choice[{index}]") from None
        return HeteroRound(self.cluster, tuple(jobs), self.metadata)

    def largest_throughput(self) -> float:
        """The largest value of any job's matrix on any type (0 for a round without jobs)."""
        return max((float(np.max(profile.tput, initial=0.0)) for job in self.jobs
                    for profile in job.profiles.values()), default=0.0)

    def median_throughput(self) -> float:
        """The median positive value of the jobs' matrices on every type (0 when none is)."""
        return median_positive(np.concatenate([profile.tput.ravel() for job in self.jobs
                                               for profile in job.profiles.values()] or [np.zeros(0)]))

    def scaled(self, factor: float) -> HeteroRound:
        """The round with every matrix times ``factor`` (a power of two keeps every comparison: the solvers'
        absolute tolerances are met on rounds of unusual units this way)."""
        jobs = tuple(replace(job, profiles={kind: Profile(p.cpu_per_gpu, p.mem_gb_per_gpu, p.tput * factor, p.name)
                                            for kind, p in job.profiles.items()}) for job in self.jobs)
        return HeteroRound(self.cluster, jobs, self.metadata)

    def at_baseline(self) -> HeteroRound:
        """The type-fixed round of the baseline types (the type rule of the paper's mechanisms)."""
        return self if self.type_fixed else self.with_types(self.baselines)

    def per_type(self) -> dict[str, RoundInstance]:
        """Each type's homogeneous round (a type-fixed round only): that type's servers, numbered from 0, and
        the jobs fixed to it, in round order; a type without jobs has an empty round."""
        if not self.type_fixed:
            raise InvalidInputError("instance", "type-free", "only a type-fixed round splits by type (fix the "
                                    "types first: with_types or at_baseline)")
        return self.per_type_of(self.baselines)

    def per_type_of(self, types: Sequence[str]) -> dict[str, RoundInstance]:
        """``with_types(types).per_type()`` (one type per job, in job order), without building the type-fixed
        round between them (checking its jobs again took 10-30 ms on a 3 x 1024-GPU round)."""
        kinds = list(types)
        if len(kinds) != len(self.jobs):
            raise InvalidInputError("types", len(kinds), f"one type per job ({len(self.jobs)})")
        members: dict[str, list[Job]] = {kind: [] for kind in self.cluster.names}
        chosen: dict[str, list[int]] = {kind: [] for kind in self.cluster.names}
        for index, (job, kind) in enumerate(zip(self.jobs, kinds, strict=True)):
            if kind not in members:
                raise UnknownNameError(f"types[{index}]", kind, self.cluster.names)
            try:
                members[kind].append(job.on(kind))
            except InvalidInputError as error:
                raise prefixed(error, f"types[{index}]") from None
            chosen[kind].append(index)
        rounds = {}
        for kind, jobs in members.items():
            cluster, metadata = self.cluster[kind].cluster, {**self.metadata, "gpu_type": kind}
            # The jobs are valid and their ids distinct (the round's): only their GPUs are checked, by the
            # checked constructor when they do not fit (its error).
            fits = sum(job.gpus for job in jobs) <= cluster.total_gpus
            sub = trusted_round(cluster, tuple(jobs), metadata) if fits else RoundInstance(cluster, tuple(jobs),
                                                                                            metadata)
            on_type = self.type_profiles[kind]
            # Its profile groups read from the round's (RoundInstance.profile_groups is cached, read-only).
            sub.__dict__["profile_groups"] = tuple(subset_groups(
                on_type.groups, np.searchsorted(on_type.members, np.array(chosen[kind], dtype=np.int64))))
            rounds[kind] = sub
        return rounds

    @classmethod
    def homogeneous(cls, instance: RoundInstance, name: str = REFERENCE_GPU_TYPE) -> HeteroRound:
        """A homogeneous round as a one-type round (every job fixed to ``name``)."""
        InstanceOf(RoundInstance)("instance", instance)
        jobs = tuple(HeteroJob(job.id, job.gpus, {name: job.profile}, name, job.model, job.arrival, job.work)
                     for job in instance.jobs)
        return cls(HeteroCluster.homogeneous(instance.cluster, name), jobs, instance.metadata)


def normalise(profiles: Mapping[str, Profile], reference: ServerType) -> dict[str, Profile]:
    """A job's matrices in the unit of heterogeneous rounds: each divided by its throughput at ``reference``'s
    proportional share on that type's matrix (measured samples per second, say, become comparable across
    types and add up). The job needs a matrix on the reference type, positive at that share."""
    InstanceOf(ServerType)("reference", reference)
    if reference.name not in profiles:
        raise UnknownNameError("profiles", reference.name, tuple(profiles))
    unit = profiles[reference.name].throughput(reference.cpu_per_gpu, reference.mem_gb_per_gpu)
    if not unit > 0:
        raise InvalidInputError(f"profiles[{reference.name!r}]", unit, "throughput at the reference type's "
                                "proportional share must be > 0 to normalise by")
    return {kind: Profile(p.cpu_per_gpu, p.mem_gb_per_gpu, p.tput / unit, p.name) for kind, p in profiles.items()}


def run_per_type(fixed: HeteroRound, order: Sequence[str] | None,
                 run: Callable[[RoundInstance, list[str]], Allocation],
                 types: Sequence[str] | None = None) -> Allocation:
    """``run(type's round, its job ids in priority order)`` on every type (with jobs) of a type-fixed round, the
    allocations joined: how a homogeneous mechanism allocates a type-fixed round. ``order`` lists every job
    id, highest priority first (None: as listed). ``types``: the round ``fixed.with_types(types)`` instead of
    ``fixed`` (which may be type-free then), without building it."""
    ranked = [job.id for job in fixed.jobs] if order is None else list(order)
    allocations = {}
    rounds = fixed.per_type() if types is None else fixed.per_type_of(types)
    for kind, sub in rounds.items():
        if sub.jobs:
            on_type = sub.job_index
            allocations[kind] = run(sub, [job_id for job_id in ranked if job_id in on_type])
    return join_allocations(fixed.cluster, allocations)


def join_allocations(cluster: HeteroCluster, per_type: Mapping[str, Allocation]) -> Allocation:
    """One allocation of the cluster from one per type (each numbering its type's servers from 0)."""
    jobs: dict[str, tuple[Placement, ...]] = {}
    for kind, allocation in per_type.items():
        offset = int(cluster.offsets[cluster.index(kind)])
        for job_id, parts in allocation.jobs.items():
            if job_id in jobs:
                raise InvalidInputError(f"per_type[{kind!r}].jobs", job_id, "a job is placed on two types")
            # The first type's servers keep their numbers: its placements serve as they are (a third of the
            # Placements of a 3-type round not built again).
            jobs[job_id] = parts if offset == 0 else tuple(trusted_placement(p.server + offset, p.gpus, p.cpus,
                                                                                p.mem_gb) for p in parts)
    return trusted_allocation(jobs)


def split_allocation(cluster: HeteroCluster, allocation: Allocation) -> dict[str, Allocation]:
    """The inverse of :func:`join_allocations`: each type's part, its servers numbered from 0. A job on
    servers of several types is an error (all GPUs of a job are of one type)."""
    parts_of: dict[str, dict[str, tuple[Placement, ...]]] = {name: {} for name in cluster.names}
    for job_id, parts in allocation.jobs.items():
        for index, part in enumerate(parts):
            if part.server >= cluster.servers:
                raise InvalidInputError(f"allocation.jobs[{job_id!r}][{index}].server", part.server,
                                        f"the cluster has servers 0..{cluster.servers - 1}")
        kinds = {int(cluster.server_types[p.server]) for p in parts}
        if len(kinds) > 1:
            raise InvalidInputError(f"allocation.jobs[{job_id!r}]", sorted(cluster.names[k] for k in kinds),
                                    "a job's GPUs are all of one type")
        k = kinds.pop()
        offset = int(cluster.offsets[k])
        parts_of[cluster.names[k]][job_id] = tuple(Placement(p.server - offset, p.gpus, p.cpus, p.mem_gb)
                                                   for p in parts)
    return {name: Allocation(jobs) for name, jobs in parts_of.items()}
