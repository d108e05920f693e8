"""Traces: the jobs a simulation replays, and the production-derived trace generator (SPEC 5, paper 5.1).

A trace is a table of jobs: ``id``, ``arrival_s``, ``gpus``, ``duration_s`` (its run time alone at the
GPU-proportional share), ``model`` (a built-in profile) or an explicit ``profile``, ``profiling_s`` (time
spent profiling it on arrival before it can first run; 0 unless the trace says so) and ``iter_time_s`` (its
iteration time at the GPU-proportional share, when the trace records iterations: the artifact's progress
accounting counts whole iterations; ``None`` takes the built-in model's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import (
    MULTI_GPU_DEMANDS,
    draw_durations_min,
    draw_gpu_demands,
    draw_models,
    job_profiles,
)
from synergy_opt.hetero import type_matrices
from synergy_opt.instance import Profile, prefixed
from synergy_opt.profiles import DEFAULT_CPU_GPU_RATIO, model_info, model_names
from synergy_opt.profiling.delay import METHOD, Method, profile_matrix
from synergy_opt.profiling.measurement import MINUTES, MINUTES_PER_POINT
from synergy_opt.profiling.optimistic import DEFAULT_THRESHOLD, THRESHOLD
from synergy_opt.sim.artifact_profiles import artifact_profile
from synergy_opt.sim.trace_metadata import (
    COSTS,
    GENERATOR,
    MAX_TRACE_JOBS,
    PROFILING,
    TRACE_GENERATOR_ARGUMENTS,
    ProfilingMethod,
    TraceJobKind,
    check_kind_noise,
    generator_arguments,
    profiling_costs,
    trace_metadata,
)
from synergy_opt.validation import NON_NEGATIVE, POSITIVE, InstanceOf, Integer, Number, Optional, checked, text

__all__ = ["DURATION", "GENERATOR", "MAX_TRACE_JOBS", "PROFILING", "TRACE_COLUMNS", "ProfilingMethod", "Trace",
           "TraceJob", "generate_trace", "trace_job_from_fields", "with_profiling_delay"]

# Jobs are drawn in blocks, each from its own seed: the first k jobs of a longer trace are those of a k-job
# trace, so a simulation can draw more arrivals when its monitored jobs are still running.
_BLOCK = 1024
# A job's run time alone, at least a microsecond: a subnormal one (5e-324 s) divided by a speedup rounded to 0 s,
# and the job "finished" at once with a NaN mean speedup.
DURATION = Number(1e-6)

TRACE_COLUMNS = ("id", "arrival_s", "gpus", "duration_s", "model", "profiling_s", "iter_time_s")




def check_extension_fits(drawn: int, largest: int, field: str, value: Any) -> None:
    """Refuse, naming ``field``, a cluster whose largest GPU type (``largest`` GPUs) cannot hold a job of
    ``drawn`` GPUs, the largest a generated trace draws as it extends (0: it does not extend)."""
    if drawn > largest:
        raise InvalidInputError(field, value, f"a generated dynamic trace draws jobs of up to {drawn} GPUs as it "
                                "extends (while monitored jobs run), more than the cluster's largest GPU type "
                                "holds: give it more GPUs, single-GPU jobs or a static trace")


def drawn_gpus(multi_gpu: bool) -> int:
    """The largest GPU demand :func:`generate_trace` draws: 16 with the multi-GPU mix, else 1."""
    return int(MULTI_GPU_DEMANDS.max()) if multi_gpu else 1


@dataclass(frozen=True, eq=False)
class TraceJob:
    """One job of a trace."""

    id: str
    arrival_s: float
    gpus: int
    duration_s: float
    profile: Profile
    model: str | None = None
    profiling_s: float = 0.0
    iter_time_s: float | None = None
    # Its matrix per GPU type, for a heterogeneous cluster (sim/type_profiles.py); None: ``profile`` (or its
    # built-in model's, its Gavel record's) says.
    profiles: Mapping[str, Profile] | None = None

    def __post_init__(self) -> None:
        text("id", self.id)
        object.__setattr__(self, "arrival_s", NON_NEGATIVE("arrival_s", self.arrival_s))
        object.__setattr__(self, "gpus", Integer(1)("gpus", self.gpus))
        object.__setattr__(self, "duration_s", DURATION("duration_s", self.duration_s))
        object.__setattr__(self, "profiling_s", NON_NEGATIVE("profiling_s", self.profiling_s))
        object.__setattr__(self, "iter_time_s", Optional(POSITIVE)("iter_time_s", self.iter_time_s))
        InstanceOf(Profile)("profile", self.profile)
        Optional(text)("model", self.model)
        if self.profiles is not None:
            object.__setattr__(self, "profiles", type_matrices("profiles", self.profiles))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceJob):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def _key(self) -> tuple[Any, ...]:
        return (self.id, self.arrival_s, self.gpus, self.duration_s, self.profile, self.model, self.profiling_s,
                self.iter_time_s, None if self.profiles is None else tuple(self.profiles.items()))

    def iteration_time(self, cpu_per_gpu: int = DEFAULT_CPU_GPU_RATIO) -> float | None:
        """Seconds an iteration takes at the GPU-proportional share: its own ``iter_time_s``, else its built-in
        model's (as profiled at ``cpu_per_gpu``), else None."""
        if self.iter_time_s is not None:
            return self.iter_time_s
        if self.model in model_names():
            return model_info(self.model, cpu_per_gpu).iter_time_s
        return None


@dataclass(frozen=True, eq=False)
class Trace:
    """The jobs of a simulation, in trace order (the order ``monitor`` positions refer to).

    ``metadata`` records what made the trace; a generated trace can :meth:`extend` itself with more
    arrivals from the same generator.
    """

    jobs: tuple[TraceJob, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, (tuple, list)):
            raise InvalidInputError("jobs", self.jobs, "must be a tuple or list of TraceJob")
        jobs = tuple(self.jobs)
        seen: set[str] = set()
        for index, job in enumerate(jobs):
            if not isinstance(job, TraceJob):
                raise InvalidInputError(f"jobs[{index}]", job, "must be a TraceJob")
            if job.id in seen:
                raise InvalidInputError(f"jobs[{index}].id", job.id, "duplicate job id")
            seen.add(job.id)
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "metadata", trace_metadata("metadata", self.metadata))

    def __len__(self) -> int:
        return len(self.jobs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return self.jobs == other.jobs and self.metadata == other.metadata

    __hash__ = None  # type: ignore[assignment]

    @property
    def static(self) -> bool:
        """Every job arrives at time 0."""
        return all(job.arrival_s == 0 for job in self.jobs)

    @property
    def extendable(self) -> bool:
        """Made by :func:`generate_trace`, so more arrivals can be drawn."""
        return self.metadata.get("generator") == GENERATOR and self.metadata.get("load") is not None

    @property
    def largest_drawn_gpus(self) -> int:
        """The largest GPU demand the generator can draw when the trace extends (0 when it does not)."""
        return drawn_gpus(bool(self.metadata.get("multi_gpu"))) if self.extendable else 0

    def extend(self, jobs: int) -> Trace:
        """This trace followed by the generator's next arrivals, ``jobs`` jobs in all.

        The jobs held here are kept as they are (edited or not); only the generator's jobs beyond them are
        added, so a loaded trace goes on as the generator would have: those after the last of the generator's
        jobs held (by id; a trace with jobs dropped, or a slice of one, goes on from its last job), or, when it
        holds none of them, those after as many as it holds. A generated job whose id is held is skipped.
        """
        if not self.extendable:
            raise InvalidInputError("trace", self.metadata.get("generator"), "only a generated dynamic trace extends")
        # Checked when the trace was made; keys added since a trace was saved take their defaults.
        arguments = generator_arguments(self.metadata)
        costs = {argument: arguments.pop(argument) for argument, _rule, _default in COSTS.values()
                 if argument in arguments}
        method = arguments.pop("profiling", "none")
        need = jobs - len(self)
        if need <= 0:
            return self
        held = {job.id for job in self.jobs}
        # The generator's jobs drawn so far (a whole number: generator_arguments above checked it).
        drawn = max(self.metadata.get("jobs", 0), len(self))
        longer = generate_trace(jobs=drawn, **arguments)
        start = 1 + max((k for k, job in enumerate(longer.jobs) if job.id in held), default=len(self) - 1)
        skipped = 0
        while True:  # drawn again, longer, when held ids were skipped
            longer = generate_trace(jobs=start + need + skipped, **arguments)
            fresh = [k for k in range(start, len(longer.jobs)) if longer.jobs[k].id not in held]
            if len(fresh) >= need:
                break
            skipped += need - len(fresh)
        fresh = fresh[:need]
        more = Trace(tuple(longer.jobs[k] for k in fresh))
        if method != "none":  # the new jobs are profiled as the trace's were, at the same costs
            more = with_profiling_delay(more, method, **costs)
        return Trace(self.jobs + more.jobs, {**self.metadata, "jobs": fresh[-1] + 1})

    def to_frame(self) -> pd.DataFrame:
        """One row per job: the columns of ``TRACE_COLUMNS``."""
        rows = [
            (job.id, job.arrival_s, job.gpus, job.duration_s, job.model, job.profiling_s, job.iter_time_s)
            for job in self.jobs
        ]
        return pd.DataFrame(rows, columns=list(TRACE_COLUMNS))


@checked(**TRACE_GENERATOR_ARGUMENTS)
def generate_trace(
    jobs: int = 1000,
    load: float | None = 9.0,
    split: tuple[float, float, float] = (20, 70, 10),
    multi_gpu: bool = False,
    seed: int = 0,
    cpu_per_gpu: int = 3,
    profile_noise: float = 0.0,
    job_kind: TraceJobKind = "builtin",
    profiling: ProfilingMethod = "none",
) -> Trace:
    """A production-derived trace (SPEC 5), deterministic per seed.

    Parameters
    ----------
    jobs
        Number of jobs.
    load
        Poisson arrivals at ``load`` jobs per hour (exponential gaps, the first job at 0), at least
        ``MIN_LOAD`` (1e-6); ``None`` for a static trace with every job at 0.
    split
        Percentages of (image, language, speech) models; the model is uniform within its task.
    multi_gpu
        False: every job asks for 1 GPU; True: the multi-GPU mix of :func:`synergy_opt.generate_round`
        (1, 2, 4, 8, 16 GPUs with probabilities .70, .10, .12, .05, .03).
    cpu_per_gpu
        The CPU:GPU ratio whose built-in profiles the jobs carry (3, or the artifact's 4, 5, 6).
    profile_noise
        Per-job log-normal noise on each matrix, as in :func:`synergy_opt.generate_round`.
    job_kind
        Where each job's matrix comes from, as ``jobs`` of :func:`synergy_opt.generate_round`: ``"builtin"`` or
        ``"modelled"`` (a job performance model drawn around its model's fitted one); or ``"artifact"``: the
        matrix the paper's artifact runs a job of that model and GPU count by
        (:func:`~synergy_opt.sim.artifact_profiles.artifact_profile`: its model file's declared demand and
        speed-up, capped for a multi-GPU job beyond a server), so that a generated trace runs as the artifact's
        own runs at ratios 4-6 did (Figure 12); the same trace as ``"builtin"`` otherwise (arrivals, GPUs,
        models, durations), and noise-free (``profile_noise`` 0).
    profiling
        ``"none"``, or how each job is profiled on arrival: ``"optimistic"`` or ``"exhaustive"``; its
        ``profiling_s`` is then one minute per point that profiler measures on the job's matrix
        (:func:`with_profiling_delay`).

    Notes
    -----
    Durations at the proportional share are ``10^x`` minutes, ``x ~ U[1.5, 3]`` with probability 0.8 and
    ``U[3, 4]`` otherwise. The first ``k`` jobs do not depend on ``jobs``: a longer trace extends a shorter one.
    """
    check_kind_noise(job_kind, profile_noise, "profile_noise")
    parts = [_block(seed, block, load, split, multi_gpu, cpu_per_gpu, profile_noise, job_kind)
             for block in range(-(-jobs // _BLOCK))]
    offset = 0.0
    trace_jobs: list[TraceJob] = []
    for gaps, demands, names, minutes, profiles in parts:
        arrivals = offset + np.cumsum(gaps)
        offset = float(arrivals[-1]) if arrivals.size else offset
        for row in range(len(names)):
            index = len(trace_jobs)
            if index == jobs:
                break
            trace_jobs.append(TraceJob(
                f"j{index}", float(arrivals[row]), int(demands[row]), float(60.0 * minutes[row]), profiles[row],
                model=names[row],
            ))
    metadata = {"generator": GENERATOR, "jobs": jobs, "load": load, "split": list(split), "multi_gpu": multi_gpu,
                "seed": seed, "cpu_per_gpu": cpu_per_gpu, "profile_noise": profile_noise, "job_kind": job_kind,
                "profiling": profiling}
    trace = Trace(tuple(trace_jobs), metadata)
    if profiling == "none":
        return trace
    return with_profiling_delay(trace, profiling)


@checked(trace=InstanceOf(Trace), method=METHOD, minutes_per_point=MINUTES, threshold=THRESHOLD)
def with_profiling_delay(
    trace: Trace,
    method: Method = "optimistic",
    *,
    minutes_per_point: float = MINUTES_PER_POINT,
    threshold: float = DEFAULT_THRESHOLD,
) -> Trace:
    """``trace`` with each job's ``profiling_s`` set to what profiling its matrix by ``method`` costs.

    Parameters
    ----------
    method
        ``"optimistic"`` (:func:`~synergy_opt.profiling.profile_job`) or ``"exhaustive"``
        (:func:`~synergy_opt.profiling.profile_exhaustive`).
    minutes_per_point
        Simulated cost of one measured point (the paper: about a minute).
    threshold
        The optimistic profiler's flatness threshold.

    Notes
    -----
    The metadata records ``profiling`` (the method), and costs other than the defaults as
    ``profiling_minutes_per_point`` and ``profiling_threshold``, so that :meth:`Trace.extend` profiles the
    new jobs alike.
    """
    @cache
    def seconds(profile: Profile) -> float:
        result = profile_matrix(profile, method, minutes_per_point=minutes_per_point, threshold=threshold)
        return 60.0 * result.minutes

    jobs = tuple(replace(job, profiling_s=seconds(job.profile)) for job in trace.jobs)
    metadata = {key: value for key, value in trace.metadata.items() if key not in COSTS}
    return Trace(jobs, {**metadata, "profiling": method, **profiling_costs(minutes_per_point, threshold)})


def _block(
    seed: int, block: int, load: float | None, split: tuple[float, float, float], multi_gpu: bool,
    cpu_per_gpu: int, profile_noise: float, job_kind: TraceJobKind,
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, list[Profile]]:
    rng = np.random.default_rng([seed, block])
    if load is None:
        gaps = np.zeros(_BLOCK)
    else:
        gaps = rng.exponential(3600.0 / load, _BLOCK)
        if block == 0:
            gaps[0] = 0.0  # the first job opens the trace
    demands = draw_gpu_demands(rng, _BLOCK, multi_gpu)
    names = draw_models(rng, _BLOCK, split)
    minutes = draw_durations_min(rng, _BLOCK)
    # The matrices are drawn last: a trace of artifact jobs is the builtin one's but for them.
    if job_kind == "artifact":
        profiles = [artifact_profile(name, int(gpus), cpu_per_gpu) for name, gpus in zip(names, demands, strict=True)]
    else:
        profiles = job_profiles(rng, names, cpu_per_gpu, profile_noise, job_kind)
    return gaps, demands, names, minutes, profiles


def trace_job_from_fields(where: str, fields: Mapping[str, Any], profile: Profile) -> TraceJob:
    """A TraceJob from parsed fields, its errors prefixed with ``where`` (the row or JSON path)."""
    try:
        return TraceJob(
            fields["id"], fields["arrival_s"], fields["gpus"], fields["duration_s"], profile,
            model=fields.get("model"), profiling_s=fields.get("profiling_s", 0.0),
            iter_time_s=fields.get("iter_time_s"), profiles=fields.get("profiles"),
        )
    except InvalidInputError as error:
        raise prefixed(error, where) from None
