"""Round instances as versioned JSON files (format ``synergy-round/1``), loaded and saved in one call.

Files are read as UTF-8 (at most ``synergy_opt.files.MAX_TEXT_BYTES``); metadata may nest at most
``synergy_opt.validation.MAX_JSON_DEPTH`` levels; a number no float holds (``1e400``, 5000 digits) is an error
naming its JSON path. Saving checks the whole instance, metadata included, before a file is opened, and
writes atomically (a temporary file renamed into place).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import atomic_open, read_text
from synergy_opt.instance import Cluster, Job, Profile, RoundInstance, prefixed
from synergy_opt.profiles import DEFAULT_CPU_GPU_RATIO, cpu_gpu_ratios, model_info
from synergy_opt.validation import MAX_JSON_DEPTH, OutOfRange, checked, json_value, path

FORMAT = "synergy-round/1"
_CLUSTER_FIELDS = ("servers", "gpus_per_server", "cpus_per_server", "mem_gb_per_server")
# Integers longer than this are kept as their text and reported with their path (Python refuses > 4300 digits).
_MAX_INT_DIGITS = 100


def round_instance(name: str, value: Any) -> RoundInstance:
    """The rule for a round argument: a :class:`RoundInstance`, or its JSON form (read as ``load_instance``
    reads it)."""
    if isinstance(value, RoundInstance):
        return value
    if isinstance(value, Mapping):
        try:
            return instance_from_dict(value)
        except InvalidInputError as error:
            raise prefixed(error, name) from None
    raise InvalidInputError(name, value, "must be a RoundInstance (or its JSON form, a dict)")



def load_instance(source: str | os.PathLike[str] | Mapping[str, Any]) -> RoundInstance:
    """Read a round instance from a JSON file path or from the already-parsed dictionary.

    Raises
    ------
    InvalidInputError
        Naming ``path`` (unreadable, too large, not UTF-8, malformed or too deeply nested JSON) or the JSON
        path of the field at fault (e.g. ``jobs[3].profile.tput[1][0]``).
    """
    if isinstance(source, Mapping):
        return instance_from_dict(source)
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidInputError("source", source, "must be a path to a JSON file or an instance dictionary")
    return instance_from_dict(read_json(Path(source)))


def read_json(source: Path) -> Any:
    """The JSON document in the file ``source``; an integer too long for any field, or a NaN or Infinity
    literal, is an error naming its JSON path."""
    text = read_text(source)
    odd: list[OutOfRange] = []

    def mark(literal: str) -> OutOfRange:
        odd.append(OutOfRange(literal))
        return odd[-1]

    try:
        data = json.loads(text, parse_int=lambda s: int(s) if len(s) <= _MAX_INT_DIGITS else mark(s),
                          parse_constant=mark)
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            "path", str(source), f"malformed JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    except RecursionError:
        raise InvalidInputError("path", str(source), f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    if odd:
        _raise_at(data, "")
    return data


@checked(instance=round_instance, path=path)
def save_instance(instance: RoundInstance, path: str | os.PathLike[str]) -> Path:
    """Write ``instance`` as JSON; jobs whose profile is their model's built-in one are saved by name.

    The instance is checked (metadata must be JSON: no sets, NaN or other objects) before any file is opened;
    the file is written to a temporary name and renamed, so it is never left half-written. File-system
    faults (a folder as ``path``, no permission) raise ``OSError``.
    """
    target = Path(path)
    text = json.dumps(instance_to_dict(instance), indent=1, allow_nan=False) + "\n"
    with atomic_open(target, encoding="utf-8") as handle:
        handle.write(text)
    return target


def instance_to_dict(instance: RoundInstance) -> dict[str, Any]:
    ratio = _profile_ratio(instance.cluster)
    jobs = []
    for job in instance.jobs:
        entry: dict[str, Any] = {"id": job.id, "gpus": job.gpus, **profile_entry(job.model, job.profile, ratio)}
        if job.arrival:
            entry["arrival"] = job.arrival
        if job.work is not None:
            entry["work"] = job.work
        jobs.append(entry)
    data: dict[str, Any] = {"format": FORMAT, "cluster": instance.cluster.to_dict(), "jobs": jobs}
    if instance.metadata:
        data["metadata"] = json_value("metadata", dict(instance.metadata))
    return data


def instance_from_dict(data: Any) -> RoundInstance:
    if not isinstance(data, Mapping):
        raise InvalidInputError("instance", data, "must be a JSON object")
    if data.get("format") != FORMAT:
        raise InvalidInputError("format", data.get("format"), f"expected {FORMAT!r}")
    cluster = _cluster(data.get("cluster"))
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list):
        raise InvalidInputError("jobs", raw_jobs, "must be a list of jobs")
    ratio = _profile_ratio(cluster)
    jobs = tuple(_job(f"jobs[{index}]", raw, ratio) for index, raw in enumerate(raw_jobs))
    metadata = data.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise InvalidInputError("metadata", metadata, "must be an object")
    return RoundInstance(cluster, jobs, json_value("metadata", metadata))


def _cluster(raw: Any) -> Cluster:
    if not isinstance(raw, Mapping):
        raise InvalidInputError("cluster", raw, "must be an object")
    for name in _CLUSTER_FIELDS:
        if name not in raw:
            raise InvalidInputError(f"cluster.{name}", None, "missing field")
    try:
        return Cluster(*(raw[name] for name in _CLUSTER_FIELDS))
    except InvalidInputError as error:
        raise prefixed(error, "cluster") from None


def _job(where: str, raw: Any, ratio: int) -> Job:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(where, raw, "must be an object")
    for name in ("id", "gpus"):
        if name not in raw:
            raise InvalidInputError(f"{where}.{name}", None, "missing field")
    model, profile = job_profile(where, raw, ratio)
    try:
        return Job(
            id=raw["id"],
            gpus=raw["gpus"],
            profile=profile,
            model=model,
            arrival=raw.get("arrival", 0.0),
            work=raw.get("work"),
        )
    except InvalidInputError as error:
        raise prefixed(error, where) from None


def job_profile(where: str, raw: Mapping[str, Any], ratio: int) -> tuple[str | None, Profile]:
    """A job entry's ``model`` name and its profile: the inline ``profile`` if given, else the model's built-in
    one (for servers with ``ratio`` CPUs per GPU). Errors are prefixed with ``where``."""
    model = raw.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidInputError(f"{where}.model", model, "must be a model name (a string)")
    try:
        if "profile" in raw:
            return model, _profile(raw["profile"], model)
        if model is not None:
            return model, model_info(model, ratio).profile
        raise InvalidInputError("model", None, "a job needs a built-in 'model' name or an inline 'profile'")
    except InvalidInputError as error:
        raise prefixed(error, where) from None


def profile_entry(model: str | None, profile: Profile, ratio: int) -> dict[str, Any]:
    """How a file names a job's matrix: its ``model``, and the matrix itself unless it is that model's built-in
    one (for servers with ``ratio`` CPUs per GPU); :func:`job_profile` reads it back."""
    entry: dict[str, Any] = {} if model is None else {"model": model}
    if model is None or not is_builtin(model, ratio, profile):
        entry["profile"] = profile.to_dict()
    return entry


def _profile(raw: Any, name: str | None) -> Profile:
    if not isinstance(raw, Mapping):
        raise InvalidInputError("profile", raw, "must be an object")
    for key in ("cpu_per_gpu", "mem_gb_per_gpu", "tput"):
        if key not in raw:
            raise InvalidInputError(f"profile.{key}", None, "missing field")
    try:
        return Profile(raw["cpu_per_gpu"], raw["mem_gb_per_gpu"], raw["tput"], name=name)
    except InvalidInputError as error:
        raise prefixed(error, "profile") from None


def _profile_ratio(cluster: Cluster) -> int:
    """Which profiled CPU:GPU variant of the built-in models matches this cluster's servers."""
    ratio = cluster.cpu_per_gpu
    return int(ratio) if ratio.is_integer() and int(ratio) in cpu_gpu_ratios() else DEFAULT_CPU_GPU_RATIO


def is_builtin(model: str, ratio: int, profile: Profile) -> bool:
    """Whether ``profile`` is the built-in matrix of ``model`` (so a file may name it instead of holding it)."""
    try:
        return model_info(model, ratio).profile == profile
    except InvalidInputError:
        return False


def _raise_at(value: Any, where: str, depth: int = 0) -> None:
    """Raise, naming its path, for the first number the parser marked as out of range (or NaN/Infinity)."""
    if isinstance(value, OutOfRange) or depth > MAX_JSON_DEPTH:
        json_value(where, value, depth)  # raises
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _raise_at(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key, depth + 1)
