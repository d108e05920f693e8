"""Gavel's traces (Narayanan et al., OSDI '20; github.com/stanford-futuredata/gavel, MIT License) as simulator traces.

A Gavel trace is a TSV file, one job a line, in one of two forms (``scheduler/utils.py``'s ``parse_trace``):

- the older 7 columns (the shipped ``msr`` traces): ``job_type, command, num_steps_arg, needs_data_dir,
  total_steps, arrival_time, scale_factor``;
- the current 10 columns: ``job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps,
  scale_factor, priority_weight, SLO, arrival_time``.

A job is a Gavel job type (``"ResNet-18 (batch size 32)"``) run for ``total_steps`` steps on ``scale_factor``
GPUs. Its run time alone on a GPU type is ``total_steps / throughput[type][job_type][scale_factor]``, the
throughputs (steps per second) read from a Gavel-format file or the shipped copy of Gavel's isolated
throughputs. The trace's ``duration_s`` is that run time on ``gpu_type`` (default ``v100``, Gavel's reference
type); it stands for the run time at the GPU-proportional share, as Gavel measured each job with a whole
server's CPUs and memory per GPU. A job whose (job type, scale factor) has no throughput entry on one of the
trace's ``types`` is skipped and counted (Gavel cannot run it either), as is one whose throughput on
``gpu_type`` is 0 (its run time there is undefined) or that asks for more than ``max_gpus``. A throughput of 0
on another type (Gavel's ResNet-50 at batch size 128 on 2-8 K80s) means the job cannot use that type.

Gavel knows no CPU or memory sensitivity: each job takes the matrix of a built-in model
(:data:`DEFAULT_JOB_MODELS`, chosen by the job type's family; users pass ``job_models``). What Gavel knows of
each job, and the throughputs its job types have on every type, stay in ``trace.metadata["gavel"]`` (by job
id, so that they survive ``save_trace``); :func:`gavel_jobs` gives them as a table with the run time per type.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.files import read_text
from synergy_opt.gavel_throughputs import GavelThroughputs, load_gavel_throughputs, shipped_file
from synergy_opt.generate import GENERATOR_ARGUMENTS
from synergy_opt.hetero import REFERENCE_GPU_TYPE
from synergy_opt.policies.problem import PRIORITY_WEIGHT
from synergy_opt.profiles import DEFAULT_CPU_GPU_RATIO, model_info, model_names
from synergy_opt.sim.trace import Trace, TraceJob
from synergy_opt.validation import Integer, Optional, Rule, checked, json_number, path, text

SOURCE = "gavel trace"
SUFFIX = ".trace"
# format= names: the columns detected from the file, or named.
FORMAT_COLUMNS: dict[str, int | None] = {"gavel": None, "gavel-7": 7, "gavel-10": 10}
GAVEL_TRACES = ("msr_seed0_23dbec", "msr_seed0_ed69ec", "msr_seed0_103959")

# Gavel's job families (the job type without its batch size) -> the built-in model whose CPU/memory matrix
# the job takes. Same network where the toolkit has it; otherwise the built-in model whose input pipeline is
# most alike (docs/sim.md, "Gavel's traces", says why each).
DEFAULT_JOB_MODELS: dict[str, str] = {
    "ResNet-18": "res18",
    "ResNet-50": "res50",
    "Transformer": "transformer",
    "LM": "lstm",
    "Recommendation": "gnmt",
    "A3C": "alexnet",
    "CycleGAN": "res50",
}

_COLUMNS = {
    7: ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor"),
    10: ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
         "scale_factor", "priority_weight", "SLO", "arrival_time"),
}
_STEPS = Integer(1)
_SCALE = Integer(1)

GAVEL_ARGUMENTS: dict[str, Rule] = {
    "gpu_type": text,
    "cpu_per_gpu": GENERATOR_ARGUMENTS["cpu_per_gpu"],
    "max_gpus": Optional(Integer(1)),
}


def gavel_trace_file(name: str) -> Path:
    """The path of a shipped Gavel trace, by its name (:data:`GAVEL_TRACES`, the ``.trace`` optional)."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    if stem not in GAVEL_TRACES:
        raise UnknownNameError("trace", name, GAVEL_TRACES)
    return shipped_file(f"traces/{stem}{SUFFIX}")


def _check_job_models(job_models: Mapping[str, str] | None, table: GavelThroughputs) -> None:
    """``job_models``' models are built-in ones and its keys job types or families of ``table`` (a misspelt key
    was ignored without a word, its jobs given the default model)."""
    if job_models is None:
        return
    if not isinstance(job_models, Mapping):
        raise InvalidInputError("job_models", job_models, "must be a dict of Gavel job type or family -> model")
    job_types = {job_type for entries in table.steps_per_s.values() for job_type, _scale in entries}
    known = sorted(job_types | {job_family(job_type) for job_type in job_types})
    for key, model in job_models.items():
        text("job_models", key)
        if key not in known:
            raise UnknownNameError("job_models", key, known)
        if model not in model_names():
            raise UnknownNameError(f"job_models.{key}", model, model_names())


def job_family(job_type: str) -> str:
    """The job type without its batch size: ``"ResNet-18 (batch size 32)"`` -> ``"ResNet-18"``."""
    return job_type.split(" (", 1)[0]


def job_model(job_type: str, job_models: Mapping[str, str] | None = None) -> str:
    """The built-in model a Gavel job type takes its CPU/memory matrix from: ``job_models`` by the full job type
    or its family first, then :data:`DEFAULT_JOB_MODELS`."""
    for table in (job_models or {}, DEFAULT_JOB_MODELS):
        for key in (job_type, job_family(job_type)):
            if key in table:
                return table[key]
    raise InvalidInputError("job_models", job_type,
                            f"Gavel job type with no built-in model; give job_models={{{job_family(job_type)!r}: "
                            f"one of {', '.join(model_names())}}}")


@checked(path=path, **GAVEL_ARGUMENTS)
def read_gavel_trace(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    throughputs: GavelThroughputs | str | os.PathLike[str] | None = None,
    gpu_type: str = REFERENCE_GPU_TYPE,
    types: tuple[str, ...] | None = None,
    job_models: Mapping[str, str] | None = None,
    cpu_per_gpu: int = DEFAULT_CPU_GPU_RATIO,
    max_gpus: int | None = None,
) -> Trace:
    """The jobs of a Gavel trace file (see the module's rules); the options as :func:`parse_gavel_trace`'s, and
    ``throughputs`` may also be the path of a throughput file (:func:`load_gavel_throughputs`)."""
    source = Path(path)
    if not isinstance(throughputs, GavelThroughputs):
        throughputs = load_gavel_throughputs(throughputs)
    return parse_gavel_trace(read_text(source), name=source.name, format=format,
                             throughputs=throughputs, gpu_type=gpu_type, types=types,
                             job_models=job_models, cpu_per_gpu=cpu_per_gpu, max_gpus=max_gpus)


@checked(**GAVEL_ARGUMENTS)
def parse_gavel_trace(
    content: str,
    *,
    name: str = "",
    format: str | None = None,
    throughputs: GavelThroughputs | None = None,
    gpu_type: str = REFERENCE_GPU_TYPE,
    types: tuple[str, ...] | None = None,
    job_models: Mapping[str, str] | None = None,
    cpu_per_gpu: int = DEFAULT_CPU_GPU_RATIO,
    max_gpus: int | None = None,
) -> Trace:
    """A Gavel trace's text as a :class:`Trace`.

    Parameters
    ----------
    format
        ``"gavel"`` or None (7 or 10 columns, detected from the first line), ``"gavel-7"`` or ``"gavel-10"``.
    throughputs
        Gavel's throughputs (default: the shipped copy).
    gpu_type
        The type whose run time is each job's ``duration_s`` (one of ``types``).
    types
        The GPU types a job must have a throughput on to be kept (default: every type of ``throughputs`` but
        the ``_unconsolidated`` ones).
    job_models
        Gavel job type, or family (``"ResNet-18"``), -> built-in model; over :data:`DEFAULT_JOB_MODELS`.
    cpu_per_gpu
        The CPU:GPU ratio whose built-in profiles the jobs carry.
    max_gpus
        Jobs asking for more GPUs are skipped and counted.

    Raises
    ------
    InvalidInputError
        Naming the line and column at fault (``lines[4].total_steps``), an unknown format, type or model, or a
        job type that neither ``throughputs`` nor Gavel's table knows (``lines[4].job_type``: a typo; one only a
        smaller ``throughputs`` lacks is skipped and counted).
    """
    if format is not None and format not in FORMAT_COLUMNS:
        raise UnknownNameError("format", format, tuple(FORMAT_COLUMNS))
    table = throughputs or load_gavel_throughputs()
    if types is not None and (isinstance(types, str) or not all(isinstance(gpu, str) for gpu in types)):
        raise InvalidInputError("types", types, "must be a sequence of GPU type names")
    kept_types = tuple(types) if types is not None else table.consolidated_types
    if len(set(kept_types)) < len(kept_types):
        raise InvalidInputError("types", types, "names a GPU type twice")
    for gpu in kept_types:
        if gpu not in table.steps_per_s:
            raise UnknownNameError("types", gpu, table.types)
    if gpu_type not in kept_types:
        raise UnknownNameError("gpu_type", gpu_type, kept_types)
    _check_job_models(job_models, table)
    rows = [line for line in content.splitlines() if line.strip()]
    columns = FORMAT_COLUMNS[format] if format is not None else None
    if columns is None and rows:
        columns = len(rows[0].split("\t"))
        if columns not in _COLUMNS:
            raise InvalidInputError("lines[0]", rows[0][:80], f"has {columns} tab-separated columns; a Gavel trace "
                                    "has 7 (older form) or 10")
    skipped: Counter[str] = Counter()
    jobs: list[TraceJob] = []
    gavel_jobs: dict[str, dict[str, Any]] = {}
    used: set[tuple[str, int]] = set()
    # A job type no table knows (neither the one given nor Gavel's) is a typo, not a job to skip (it was counted
    # as skipped); one only a smaller table given lacks is skipped, as one without a throughput on its scale.
    shipped = table if throughputs is None else load_gavel_throughputs()
    known = {job_type for source in (table, shipped) for rates in source.steps_per_s.values() for job_type, _ in rates}
    for index, line in enumerate(rows):
        fields = _fields(index, line, columns or 7)
        job_type, scale = fields["job_type"], fields["scale_factor"]
        if job_type not in known:
            raise UnknownNameError(f"lines[{index}].job_type", job_type, sorted(known))
        rates = [table.get(gpu, job_type, scale) for gpu in kept_types]
        if any(rate is None for rate in rates):
            skipped[f"no throughput for {job_type} on {scale} GPUs"] += 1
            continue
        if not rates[kept_types.index(gpu_type)]:
            skipped[f"throughput 0 for {job_type} on {scale} {gpu_type} GPUs"] += 1
            continue
        if max_gpus is not None and scale > max_gpus:
            skipped[f"more than {max_gpus} GPUs"] += 1
            continue
        model = job_model(job_type, job_models)
        used.add((job_type, scale))
        job_id = f"j{index}"
        duration = fields["total_steps"] / rates[kept_types.index(gpu_type)]  # type: ignore[operator]
        jobs.append(TraceJob(job_id, fields["arrival_time"], scale, duration,
                             model_info(model, cpu_per_gpu).profile, model=model))
        gavel_jobs[job_id] = {"job_type": job_type, "scale_factor": scale, "total_steps": fields["total_steps"],
                              "priority_weight": fields["priority_weight"], "slo": fields["SLO"]}
    families = sorted({job_family(job_type) for job_type, _ in used})
    metadata = {
        "source": SOURCE, "file": name, "format": f"gavel-{columns or 7}", "throughputs": table.source,
        "gpu_type": gpu_type, "types": list(kept_types), "jobs_read": len(rows),
        "skipped": dict(sorted(skipped.items())), "cpu_per_gpu": cpu_per_gpu,
        "job_models": {family: job_model(family, job_models) for family in families},
        "gavel": {"jobs": gavel_jobs, "steps_per_s": _used_throughputs(table, kept_types, used)},
    }
    return Trace(tuple(jobs), metadata)


def _fields(index: int, line: str, columns: int) -> dict[str, Any]:
    """One line's fields, checked; ``priority_weight`` 1 and ``SLO`` None in the 7-column form."""
    parts = line.rstrip("\r\n").split("\t")
    where = f"lines[{index}]"
    if len(parts) != columns:
        raise InvalidInputError(where, line[:80], f"has {len(parts)} tab-separated columns, expected {columns}")
    raw = dict(zip(_COLUMNS[columns], parts, strict=True))
    fields: dict[str, Any] = {"job_type": text(f"{where}.job_type", raw["job_type"].strip())}
    fields["total_steps"] = _STEPS(f"{where}.total_steps", json_number(f"{where}.total_steps", raw["total_steps"]))
    fields["scale_factor"] = _SCALE(f"{where}.scale_factor",
                                    json_number(f"{where}.scale_factor", raw["scale_factor"]))
    arrival = json_number(f"{where}.arrival_time", raw["arrival_time"])
    if not math.isfinite(arrival) or arrival < 0:
        raise InvalidInputError(f"{where}.arrival_time", raw["arrival_time"], "must be a finite number >= 0")
    fields["arrival_time"] = float(arrival)
    fields["priority_weight"] = 1.0
    fields["SLO"] = None
    if columns == 10:
        weight = json_number(f"{where}.priority_weight", raw["priority_weight"])
        fields["priority_weight"] = PRIORITY_WEIGHT(f"{where}.priority_weight", weight)
        slo = json_number(f"{where}.SLO", raw["SLO"])
        if not math.isfinite(slo):
            raise InvalidInputError(f"{where}.SLO", raw["SLO"], "must be a finite number (negative: none)")
        fields["SLO"] = float(slo) if slo >= 0 else None  # Gavel reads a negative SLO as none
    return fields


def _used_throughputs(table: GavelThroughputs, types: tuple[str, ...],
                      used: set[tuple[str, int]]) -> dict[str, dict[str, dict[str, float]]]:
    """The throughputs of the job types the trace holds, as JSON: ``{gpu_type: {job_type: {"scale": steps/s}}}``."""
    plain: dict[str, dict[str, dict[str, float]]] = {}
    for gpu in types:
        per_job: dict[str, dict[str, float]] = {}
        for job_type, scale in sorted(used):
            per_job.setdefault(job_type, {})[str(scale)] = table.steps_per_s[gpu][(job_type, scale)]
        plain[gpu] = per_job
    return plain


def gavel_jobs(trace: Trace) -> pd.DataFrame:
    """What Gavel knows of each job of a trace read from a Gavel file, one row per job in trace order.

    Columns: ``id``, ``job_type``, ``scale_factor``, ``total_steps``, ``priority_weight``, ``slo`` (NaN: no
    SLO), then ``duration_s.<type>`` for each of the trace's types: ``total_steps / throughput`` on that type
    (infinite where the type cannot run the job).
    """
    gavel = trace.metadata.get("gavel")
    if not isinstance(gavel, Mapping):
        raise InvalidInputError("trace.metadata.gavel", None, "the trace was not read from a Gavel file")
    rates = gavel["steps_per_s"]
    rows = []
    for job in trace.jobs:
        info = gavel["jobs"].get(job.id)
        if info is None:
            raise InvalidInputError("trace.metadata.gavel.jobs", job.id, "no Gavel record for this job")
        row = {"id": job.id, **info}
        for gpu, per_job in rates.items():
            rate = per_job[info["job_type"]][str(info["scale_factor"])]
            row[f"duration_s.{gpu}"] = info["total_steps"] / rate if rate > 0 else math.inf
        rows.append(row)
    columns = ["id", "job_type", "scale_factor", "total_steps", "priority_weight", "slo",
               *[f"duration_s.{gpu}" for gpu in rates]]
    return pd.DataFrame(rows, columns=columns)
