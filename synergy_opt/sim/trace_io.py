"""Traces as files: versioned JSON and CSV (both lossless), the public Philly trace's job log, and the
Synergy artifact's recorded traces (:mod:`synergy_opt.sim.artifact_trace`).

JSON (``synergy-trace/1``)::

    {"format": "synergy-trace/1", "metadata": {...}, "jobs": [{"id": "j0", "arrival_s": 0.0, "gpus": 1,
     "duration_s": 14521.5, "model": "transformer", "profiling_s": 0.0}, ...]}

CSV: a first line ``# synergy-trace/1 {metadata as JSON}``, then the columns ``id, arrival_s, gpus,
duration_s, model, profiling_s, iter_time_s, profile`` (``profile``: the matrix as JSON, empty when the job's
built-in model has it; ``iter_time_s`` empty when the trace records no iterations; text cells are quoted). In
both, a job whose profile is its model's built-in one is saved by name; floats are written with ``repr`` so that
a trace reads back exactly. Reading goes through :func:`synergy_opt.files.read_text` (a regular file, UTF-8, the
size limit), and every JSON text (the file, the CSV's metadata line and ``profile`` cells) and every CSV number
cell through the one JSON reader (:func:`synergy_opt.validation.parse_json`: depth, integer digits, ASCII digits
only), so a CSV is held to the JSON reader's limits; a cell may be as long as the file. Writing is atomic.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import MAX_TEXT_BYTES, atomic_open, read_text
from synergy_opt.gavel_throughputs import GavelThroughputs
from synergy_opt.generate import GENERATOR_ARGUMENTS
from synergy_opt.io import inline_profiles, job_profile, profile_entry, read_json
from synergy_opt.profiles import DEFAULT_CPU_GPU_RATIO, REFERENCE_GPU_TYPE, model_names
from synergy_opt.sim.artifact_trace import artifact_trace, looks_like_artifact_record
from synergy_opt.sim.gavel import FORMAT_COLUMNS as GAVEL_FORMATS
from synergy_opt.sim.gavel import SUFFIX as GAVEL_SUFFIX
from synergy_opt.sim.gavel import read_gavel_trace
from synergy_opt.sim.philly import PHILLY_ARGUMENTS, philly_trace
from synergy_opt.sim.trace import TRACE_COLUMNS, Trace, TraceJob, trace_job_from_fields
from synergy_opt.sim.trace_metadata import trace_metadata
from synergy_opt.validation import (
    InstanceOf,
    OneOf,
    Optional,
    checked,
    json_number,
    json_value,
    known_fields,
    parse_json,
    path,
)

FORMAT = "synergy-trace/1"
_CSV_COLUMNS = (*TRACE_COLUMNS, "profile", "profiles")
_JSON_JOB_FIELDS = _CSV_COLUMNS  # a JSON job's fields (others are refused by name: a misspelt one took its default)
_SUFFIXES = (".json", ".csv")
# csv's field limit is process-wide: raised to the file limit while a trace is read, one reader at a time.
_FIELD_LIMIT = threading.Lock()
#: What ``load_trace(format=...)`` reads: this toolkit's JSON or CSV, the Philly job log, the artifact's record,
#: a Gavel trace (columns detected, or named).
TRACE_FORMATS = ("json", "csv", "philly", "artifact", *GAVEL_FORMATS)


@checked(trace=InstanceOf(Trace), path=path)
def save_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as JSON or CSV, by the file's suffix (``.json`` or ``.csv``); returns the path.

    The whole trace is converted before a file is opened, and the file is written atomically.
    """
    target = Path(path)
    as_json = _suffix(target) == ".json"
    text = json.dumps(trace_to_dict(trace), indent=1, allow_nan=False) + "\n" if as_json else _csv_text(trace)
    with atomic_open(target, encoding="utf-8", newline="") as handle:
        handle.write(text)
    return target


@checked(path=path, split=Optional(GENERATOR_ARGUMENTS["split"]), format=Optional(OneOf(TRACE_FORMATS)),
         **PHILLY_ARGUMENTS)
def load_trace(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    split: tuple[float, float, float] | None = None,
    seed: int = 0,
    cpu_per_gpu: int = DEFAULT_CPU_GPU_RATIO,
    max_gpus: int | None = None,
    throughputs: GavelThroughputs | str | os.PathLike[str] | None = None,
    gpu_type: str = REFERENCE_GPU_TYPE,
    job_models: Mapping[str, str] | None = None,
) -> Trace:
    """Read a trace: this toolkit's JSON or CSV, the Philly trace's ``cluster_job_log`` (a JSON list), a Gavel
    trace, or the Synergy artifact's recorded trace (``job_id,model,arrival_s,total_iters,gpus``, no header).

    Parameters
    ----------
    path
        A ``.csv`` file is read as CSV (an artifact record when its first line is five fields starting with an
        integer job id, this toolkit's CSV otherwise), a ``.trace`` file as a Gavel trace; anything else as JSON
        (an object: ``synergy-trace/1``; a list: Philly).
    format
        Name the format instead of detecting it from the suffix: ``"json"``, ``"csv"``, ``"philly"``,
        ``"artifact"`` (the artifact's own record files), or ``"gavel"`` (7 or 10 columns detected),
        ``"gavel-7"``, ``"gavel-10"``.
    split, seed
        For the Philly log only (see :func:`synergy_opt.sim.philly.philly_trace`): the workload split the
        models are drawn by (default (20, 70, 10)) and its seed.
    cpu_per_gpu, max_gpus
        For the Philly log and Gavel traces: the CPU:GPU ratio of the built-in profiles, and the largest GPU
        demand kept (larger jobs are skipped and counted). ``cpu_per_gpu`` also picks the profiles of an
        artifact record's models.
    throughputs, gpu_type, job_models
        For Gavel traces only (see :func:`synergy_opt.sim.gavel.parse_gavel_trace`): Gavel's throughputs (a
        file, default the shipped copy), the type whose run time is ``duration_s`` (``v100``), and the built-in
        model of each Gavel job type.

    Raises
    ------
    InvalidInputError
        Naming the file, or the JSON path / CSV row and field at fault.
    """
    source = Path(path)
    if format in GAVEL_FORMATS or (format is None and source.suffix.lower() == GAVEL_SUFFIX):
        return read_gavel_trace(source, format=format, throughputs=throughputs, gpu_type=gpu_type,
                                job_models=job_models, cpu_per_gpu=cpu_per_gpu, max_gpus=max_gpus)
    if format is None:
        format = "csv" if source.suffix.lower() == ".csv" else "json"
    if format in ("csv", "artifact"):
        content = read_text(source)
        if format == "artifact" or looks_like_artifact_record(content):
            return artifact_trace(content, cpu_per_gpu=cpu_per_gpu)
        try:
            return _trace_from_csv(content)
        except csv.Error as error:
            raise InvalidInputError("path", str(source), f"malformed CSV: {error}") from None
    data = read_json(source)
    if format == "philly" and not isinstance(data, list):
        raise InvalidInputError("trace", str(source), "a Philly cluster_job_log is a JSON list of jobs")
    if isinstance(data, list):
        return philly_trace(data, split=split or (20, 70, 10), seed=seed, cpu_per_gpu=cpu_per_gpu,
                            max_gpus=max_gpus)
    return trace_from_dict(data)


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """The JSON form of a trace."""
    ratio = _ratio(trace.metadata)
    jobs = []
    for job in trace.jobs:
        entry: dict[str, Any] = {"id": job.id, "arrival_s": job.arrival_s, "gpus": job.gpus,
                                 "duration_s": job.duration_s, **profile_entry(job.model, job.profile, ratio)}
        if job.profiling_s:
            entry["profiling_s"] = job.profiling_s
        if job.iter_time_s is not None:
            entry["iter_time_s"] = job.iter_time_s
        if job.profiles is not None:
            entry["profiles"] = _profiles_entry(job)
        jobs.append(entry)
    return {"format": FORMAT, "metadata": json_value("metadata", dict(trace.metadata)), "jobs": jobs}


def trace_from_dict(data: Any) -> Trace:
    """A trace from its JSON form."""
    if not isinstance(data, Mapping):
        raise InvalidInputError("trace", data, "must be a JSON object (or a list: the Philly job log)")
    if data.get("format") != FORMAT:
        raise InvalidInputError("format", data.get("format"), f"expected {FORMAT!r}")
    known_fields("", data, ("format", "metadata", "jobs"))
    metadata = trace_metadata("metadata", data.get("metadata", {}))
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list):
        raise InvalidInputError("jobs", raw_jobs, "must be a list of jobs")
    ratio = _ratio(metadata)
    jobs = []
    for index, raw in enumerate(raw_jobs):
        where = f"jobs[{index}]"
        if not isinstance(raw, Mapping):
            raise InvalidInputError(where, raw, "must be an object")
        known_fields(where, raw, _JSON_JOB_FIELDS)
        _require(where, raw, ("id", "arrival_s", "gpus", "duration_s"))
        jobs.append(_job(where, raw, ratio))
    return Trace(tuple(jobs), metadata)


def _job(where: str, raw: Mapping[str, Any], ratio: int) -> TraceJob:
    """A job from its parsed fields: its ``profiles`` per GPU type read, and its one-type matrix the inline
    ``profile``, its built-in model's, or (given neither) its ``v100`` matrix of ``profiles``."""
    if raw.get("profiles") is None:
        return trace_job_from_fields(where, raw, job_profile(where, raw, ratio)[1])
    fields = {**raw, "profiles": inline_profiles(f"{where}.profiles", raw["profiles"], raw.get("model"))}
    if "profile" in raw or raw.get("model") in model_names():
        profile = job_profile(where, raw, ratio)[1]
    elif REFERENCE_GPU_TYPE in fields["profiles"]:  # its model, if named, is a label of the user's
        profile = fields["profiles"][REFERENCE_GPU_TYPE]
    else:
        raise InvalidInputError(f"{where}.profile", None, f"a job whose profiles hold no {REFERENCE_GPU_TYPE!r} "
                                "matrix needs its one-type matrix: an inline 'profile' or a built-in 'model'")
    return trace_job_from_fields(where, fields, profile)


def _suffix(target: Path) -> str:
    suffix = target.suffix.lower()
    if suffix not in _SUFFIXES:
        raise InvalidInputError("path", str(target), f"must end in {' or '.join(_SUFFIXES)} (the format)")
    return suffix


def _ratio(metadata: Mapping[str, Any]) -> int:
    """The CPU:GPU ratio the trace's model names stand for (checked by ``trace_metadata``)."""
    return int(metadata.get("cpu_per_gpu", DEFAULT_CPU_GPU_RATIO))


def _require(where: str, raw: Mapping[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if name not in raw or raw[name] is None:
            raise InvalidInputError(f"{where}.{name}", None, "missing field")
        if raw[name] == "":  # an empty CSV cell, or an empty string given
            raise InvalidInputError(f"{where}.{name}", "", "must not be empty")


def _csv_text(trace: Trace) -> str:
    ratio = _ratio(trace.metadata)
    buffer = io.StringIO()
    buffer.write(f"# {FORMAT} {json.dumps(json_value('metadata', dict(trace.metadata)), allow_nan=False)}\n")
    # Text cells quoted, numbers not: a lone carriage return in an id survives the round trip.
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    # The profiles column only when a job has them: a reader of before them refuses the column.
    typed = any(job.profiles is not None for job in trace.jobs)
    writer.writerow(_CSV_COLUMNS if typed else _CSV_COLUMNS[:-1])
    for job in trace.jobs:
        inline = profile_entry(job.model, job.profile, ratio).get("profile")
        profile = "" if inline is None else json.dumps(inline)
        iter_time = "" if job.iter_time_s is None else job.iter_time_s
        row = [job.id, job.arrival_s, job.gpus, job.duration_s, job.model or "", job.profiling_s, iter_time, profile]
        if typed:
            row.append("" if job.profiles is None else json.dumps(_profiles_entry(job)))
        writer.writerow(row)
    return buffer.getvalue()


def _profiles_entry(job: TraceJob) -> dict[str, Any]:
    """A job's ``profiles`` as a file writes them: every type's matrix inline."""
    return {kind: profile.to_dict() for kind, profile in (job.profiles or {}).items()}


@contextlib.contextmanager
def _long_fields() -> Iterator[None]:
    """csv's field size limit raised to the file size limit (a 100 x 100 inline profile is 130 kB)."""
    with _FIELD_LIMIT:
        saved = csv.field_size_limit(MAX_TEXT_BYTES)
        try:
            yield
        finally:
            csv.field_size_limit(saved)


def _trace_from_csv(text: str) -> Trace:
    metadata: dict[str, Any] = {}
    if text.startswith("#"):
        first, _, text = text.partition("\n")
        header = first[1:].strip()
        tag, _, rest = header.partition(" ")
        if tag != FORMAT:
            raise InvalidInputError("format", tag, f"expected {FORMAT!r} in the CSV's first line")
        given = parse_json(("metadata", rest[:80]), rest, "metadata") if rest.strip() else {}
        metadata = trace_metadata("metadata", given)
    with _long_fields():
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)  # an unclosed quote is an error
        rows = list(reader)
        fieldnames = list(reader.fieldnames or ())
    # Names with spaces around them (a header written 'id, arrival_s, ...') are the usual cause of the two below.
    spaced = " (the header's names have spaces around them: write 'id,arrival_s,...')" if any(
        name != name.strip() for name in fieldnames) else ""
    missing = [name for name in ("id", "arrival_s", "gpus", "duration_s") if name not in fieldnames]
    if missing:
        raise InvalidInputError(f"columns.{missing[0]}", fieldnames, "missing column" + spaced)
    # A column read twice, or one the reader does not know (a misspelt 'iter_time'), would be dropped silently.
    repeated = [name for index, name in enumerate(fieldnames) if name in fieldnames[:index]]
    if repeated:
        raise InvalidInputError(f"columns.{repeated[0]}", fieldnames, "given twice")
    unknown = [name for name in fieldnames if name not in _CSV_COLUMNS]
    if unknown:
        raise InvalidInputError(f"columns.{unknown[0]}", fieldnames, f"not a trace column (columns: "
                                f"{', '.join(_CSV_COLUMNS)}){spaced}")
    ratio = _ratio(metadata)
    jobs = []
    for index, row in enumerate(rows):
        where = f"rows[{index}]"
        if None in row:  # more cells than columns
            raise InvalidInputError(where, row[None], f"has more cells than the {len(fieldnames)} columns")
        short = [name for name, value in row.items() if value is None]
        if short:  # fewer cells than columns (a row cut short): not read as empty cells
            cells = len(fieldnames) - len(short)
            raise InvalidInputError(where, cells, f"has {cells} cells for the {len(fieldnames)} columns (no "
                                    f"{short[0]}); an empty cell is written, not left out")
        _require(where, row, ("id", "arrival_s", "gpus", "duration_s"))
        raw: dict[str, Any] = {"id": row["id"], **{name: json_number(f"{where}.{name}", row[name])
                                    for name in ("arrival_s", "gpus", "duration_s")}}
        if row.get("model"):
            raw["model"] = row["model"]
        if row.get("profiling_s"):
            raw["profiling_s"] = json_number(f"{where}.profiling_s", row["profiling_s"])
        if row.get("iter_time_s"):
            raw["iter_time_s"] = json_number(f"{where}.iter_time_s", row["iter_time_s"])
        for name in ("profile", "profiles"):
            if row.get(name):
                cell = row[name]
                raw[name] = parse_json((f"{where}.{name}", cell[:80]), cell, f"{where}.{name}")
        jobs.append(_job(where, raw, ratio))
    try:
        return Trace(tuple(jobs), metadata)
    except InvalidInputError as error:  # a duplicate id, named by its row as every other fault of the file
        if not error.field.startswith("jobs["):
            raise
        raise InvalidInputError("rows" + error.field.removeprefix("jobs"), error.value, error.reason) from None
