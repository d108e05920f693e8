"""What a trace's metadata says that the trace's behaviour depends on, checked whenever a Trace is made.

Metadata is free-form JSON, except for what the toolkit reads back from it:

- ``cpu_per_gpu``: the CPU:GPU ratio whose built-in profiles the trace's model names stand for (a file names
  a job's matrix by its model when it is that model's built-in one at this ratio);
- the arguments of :func:`~synergy_opt.sim.trace.generate_trace`, in a trace whose ``generator`` is
  ``GENERATOR``: :meth:`Trace.extend` draws more arrivals with them, so they pass the generator's own rules
  (a missing ``split``, or ``split = 5``, is an error naming ``metadata.split`` when the trace is made, not a
  ``KeyError`` mid-run). The keys a generated trace has recorded from the start are required; those added
  since (``job_kind``, ``profiling``, the profiling costs) take their defaults when absent;
- ``gavel`` (a trace read from a Gavel file): each job's record (``job_type``, ``scale_factor``,
  ``total_steps``, ``priority_weight``, ``slo``) and the throughputs of its job type on every GPU type
  (``steps_per_s[gpu][job_type][scale]``, finite numbers >= 0), and ``gpu_type``, the type whose run times are
  the durations: the heterogeneous simulator builds each job's matrices from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import GENERATOR_ARGUMENTS, JobKind
from synergy_opt.policies.problem import PRIORITY_WEIGHT
from synergy_opt.profiling.measurement import MINUTES, MINUTES_PER_POINT
from synergy_opt.profiling.optimistic import DEFAULT_THRESHOLD, THRESHOLD
from synergy_opt.validation import NON_NEGATIVE, Integer, Number, OneOf, Optional, Rule, json_value, text

GENERATOR = "synergy_opt.generate_trace"
# Far beyond any experiment (the paper's need about 7,000); a trace this long takes minutes and gigabytes.
MAX_TRACE_JOBS = 1_000_000
# Below one job in about 114 years, arrivals of a long trace leave any float's range (load=1e-306 gave
# arrival_s=inf); the simulator's own horizon (sim/bounds.py) is much nearer still.
MIN_LOAD = 1e-6
LOAD = Optional(Number(MIN_LOAD))
ProfilingMethod = Literal["none", "optimistic", "exhaustive"]
# A generated trace's jobs take the generator's kinds, or "artifact": the matrices the paper's artifact runs its
# jobs by (sim/artifact_profiles.py), which the round generators below the simulator cannot read.
TraceJobKind = Literal[JobKind, "artifact"]
TRACE_JOB_KIND = OneOf(get_args(TraceJobKind))
PROFILING = OneOf(get_args(ProfilingMethod))
# Costs of the profiling delays other than the defaults (recorded by with_profiling_delay).
COSTS: dict[str, tuple[str, Rule, float]] = {
    "profiling_minutes_per_point": ("minutes_per_point", MINUTES, MINUTES_PER_POINT),
    "profiling_threshold": ("threshold", THRESHOLD, DEFAULT_THRESHOLD),
}
# generate_trace's rules, for its arguments and for the metadata that records them.
TRACE_GENERATOR_ARGUMENTS: dict[str, Rule] = {
    "jobs": Integer(0, MAX_TRACE_JOBS), "load": LOAD, "job_kind": TRACE_JOB_KIND, "profiling": PROFILING,
    **GENERATOR_ARGUMENTS,
}
# Recorded by every generated trace since the first format; job_kind and profiling came later.
_REQUIRED = ("load", "split", "multi_gpu", "seed", "cpu_per_gpu", "profile_noise")
_OPTIONAL = ("job_kind", "profiling")


def trace_metadata(name: str, value: Any) -> dict[str, Any]:
    """The rule for a trace's metadata: JSON data (``validation.json_value``) whose keys the toolkit reads
    (module docstring) pass their rules; returns it as plain JSON data."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(name, value, "must be a dict")
    metadata: dict[str, Any] = json_value(name, dict(value))
    if "cpu_per_gpu" in metadata:
        GENERATOR_ARGUMENTS["cpu_per_gpu"](f"{name}.cpu_per_gpu", metadata["cpu_per_gpu"])
    if metadata.get("generator") == GENERATOR:
        generator_arguments(metadata, name)
    if "gavel" in metadata:
        gavel_record(f"{name}.gavel", metadata["gavel"], metadata.get("gpu_type"), f"{name}.gpu_type")
    return metadata


_GAVEL_JOB: dict[str, Rule] = {"job_type": text, "scale_factor": Integer(1), "total_steps": Integer(1),
                               "priority_weight": PRIORITY_WEIGHT, "slo": Optional(NON_NEGATIVE)}


def gavel_record(name: str, value: Any, gpu_type: Any, gpu_type_name: str) -> None:
    """The rule for what a Gavel trace's metadata records (module docstring): every job's fields, and its job
    type's throughput on every GPU type, positive on ``gpu_type``."""
    record = _mapping(name, value)
    jobs, rates = (_mapping(f"{name}.{key}", record.get(key)) for key in ("jobs", "steps_per_s"))
    if gpu_type is not None and gpu_type not in rates:
        raise InvalidInputError(gpu_type_name, gpu_type, f"has no throughputs in {name}.steps_per_s")
    for gpu, per_job in rates.items():
        for job_type, per_scale in _mapping(f"{name}.steps_per_s.{gpu}", per_job).items():
            for scale, rate in _mapping(f"{name}.steps_per_s.{gpu}.{job_type}", per_scale).items():
                NON_NEGATIVE(f"{name}.steps_per_s.{gpu}.{job_type}.{scale}", rate)
    for job_id, job in jobs.items():
        where = f"{name}.jobs.{job_id}"
        fields = _mapping(where, job)
        for key, rule in _GAVEL_JOB.items():
            if key not in fields:
                raise InvalidInputError(f"{where}.{key}", None, "missing")
            rule(f"{where}.{key}", fields[key])
        for gpu, per_job in rates.items():
            rate = per_job.get(fields["job_type"], {}).get(str(fields["scale_factor"]))
            if rate is None or (gpu == gpu_type and not rate > 0):
                raise InvalidInputError(f"{name}.steps_per_s.{gpu}", fields["job_type"],
                                        f"has no{' positive' if rate is not None else ''} throughput on "
                                        f"{fields['scale_factor']} GPUs for job {job_id}")


def _mapping(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(name, value, "must be a dict")
    return value


def generator_arguments(metadata: Mapping[str, Any], name: str = "metadata") -> dict[str, Any]:
    """The :func:`generate_trace` arguments (but ``jobs``, checked only) a generated trace's metadata records,
    checked by the generator's rules, and the profiling costs (``minutes_per_point``, ``threshold``) it records."""
    missing = [key for key in _REQUIRED if key not in metadata]
    if missing:
        raise InvalidInputError(f"{name}.{missing[0]}", None,
                                f"missing: a trace made by {GENERATOR} records it (it draws more arrivals with it)")
    arguments = {key: TRACE_GENERATOR_ARGUMENTS[key](f"{name}.{key}", metadata[key])
                 for key in (*_REQUIRED, *_OPTIONAL) if key in metadata}
    if "jobs" in metadata:  # the jobs drawn so far: a run that extends the trace draws that many again
        TRACE_GENERATOR_ARGUMENTS["jobs"](f"{name}.jobs", metadata["jobs"])
    for key, (argument, rule, _default) in COSTS.items():
        if key in metadata:
            arguments[argument] = rule(f"{name}.{key}", metadata[key])
    check_kind_noise(arguments.get("job_kind", "builtin"), arguments["profile_noise"], f"{name}.profile_noise")
    return arguments


def check_kind_noise(job_kind: str, profile_noise: float, field: str) -> None:
    """Refuse, naming ``field``, noise on jobs of kind ``"artifact"``: the artifact runs a model's jobs by one
    speed-up, its model file's."""
    if job_kind == "artifact" and profile_noise > 0:
        raise InvalidInputError(field, profile_noise, "must be 0 with job_kind='artifact' (the artifact runs every "
                                "job of a model by its model file's one speed-up)")


def profiling_costs(minutes_per_point: float, threshold: float) -> dict[str, float]:
    """The metadata keys that record profiling costs other than the defaults."""
    given = {"minutes_per_point": minutes_per_point, "threshold": threshold}
    return {key: given[argument] for key, (argument, _rule, default) in COSTS.items() if given[argument] != default}
