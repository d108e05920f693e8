"""Round instances as versioned JSON files, loaded and saved in one call.

``synergy-round/1``: a homogeneous round (:class:`~synergy_opt.instance.RoundInstance`)::

    {"format": "synergy-round/1", "cluster": {"servers": 2, "gpus_per_server": 8, "cpus_per_server": 24,
     "mem_gb_per_server": 500}, "jobs": [{"id": "j1", "gpus": 4, "model": "res18"}, ...], "metadata": {...}}

``synergy-round/2``: a heterogeneous round (:class:`~synergy_opt.hetero.HeteroRound`), the cluster a list of
server types and each job's matrices per GPU type (``types`` lists the ones it can use; a type missing from
``profiles`` takes its model's built-in matrix there, in the round's unit: :func:`builtin_in_round`)::

    {"format": "synergy-round/2", "cluster": {"types": [{"name": "k80", "servers": 2, "gpus_per_server": 8,
     "cpus_per_server": 24, "mem_gb_per_server": 500}, ...], "reference": "v100"},
     "jobs": [{"id": "j1", "gpus": 4, "model": "res18", "baseline": "k80", "types": ["k80", "v100"],
               "profiles": {"k80": {"cpu_per_gpu": [...], "mem_gb_per_gpu": [...], "tput": [[...]]}}}, ...]}

Both load with :func:`load_instance`; a version-1 file is read as it always was.

Files are read as UTF-8 (at most ``synergy_opt.files.MAX_TEXT_BYTES``); metadata may nest at most
``synergy_opt.validation.MAX_JSON_DEPTH`` levels; a number no float holds (``1e400``, 5000 digits) is an error
naming its JSON path (:func:`synergy_opt.validation.parse_json`, the one JSON reader). Saving checks the
whole instance, metadata included, before a file is opened, and writes atomically (a temporary file renamed
into place).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.files import atomic_open, read_text
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, ServerType, normalise
from synergy_opt.instance import Cluster, Job, Profile, RoundInstance, prefixed
from synergy_opt.profiles import (
    DEFAULT_CPU_GPU_RATIO,
    builtin_type_profile,
    cpu_gpu_ratios,
    gavel_gpu_types,
    model_info,
    model_names,
)
from synergy_opt.validation import checked, json_value, known_fields, parse_json, path

FORMAT = "synergy-round/1"
HETERO_FORMAT = "synergy-round/2"
FORMATS = (FORMAT, HETERO_FORMAT)
_CLUSTER_FIELDS = ("servers", "gpus_per_server", "cpus_per_server", "mem_gb_per_server")
# Every field a round file may hold (others are refused by name: a misspelt optional one took its default).
_ROUND_FIELDS = ("format", "cluster", "jobs", "metadata")
_JOB_FIELDS = ("id", "gpus", "model", "profile", "arrival", "work")
_HETERO_JOB_FIELDS = ("id", "gpus", "model", "types", "profiles", "baseline", "arrival", "work")


def any_round(name: str, value: Any) -> RoundInstance | HeteroRound:
    """The rule for a round argument of a function that takes both kinds: a :class:`RoundInstance` or a
    :class:`~synergy_opt.hetero.HeteroRound`, or the JSON form of either (read as ``load_instance`` reads it)."""
    if isinstance(value, (RoundInstance, HeteroRound)):
        return value
    if isinstance(value, Mapping):
        try:
            return instance_from_dict(value)
        except InvalidInputError as error:
            raise prefixed(error, name) from None
    raise InvalidInputError(name, value, "must be a RoundInstance or HeteroRound (or its JSON form, a dict)")


def round_instance(name: str, value: Any) -> RoundInstance:
    """The rule for a homogeneous round argument: a :class:`RoundInstance`, or its JSON form (read as
    ``load_instance`` reads it). A heterogeneous round is refused, naming the argument."""
    value = any_round(name, value)
    if isinstance(value, HeteroRound):
        raise InvalidInputError(name, "HeteroRound", f"takes a homogeneous round ({FORMAT}); a heterogeneous round "
                                "goes to the public solve_*, run_mechanism and evaluate functions")
    return value



def load_instance(source: str | os.PathLike[str] | Mapping[str, Any]) -> RoundInstance | HeteroRound:
    """Read a round instance from a JSON file path or from the already-parsed dictionary: a
    :class:`RoundInstance` (``synergy-round/1``) or a :class:`~synergy_opt.hetero.HeteroRound` (``/2``).

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
    return instance_from_dict(read_json(path("path", source)))


def read_json(source: Path) -> Any:
    """The JSON document in the file ``source`` (:func:`synergy_opt.validation.parse_json`'s rules); an
    integer too long for any field, or a NaN or Infinity literal, is an error naming its JSON path."""
    return parse_json(("path", str(source)), read_text(source))


@checked(instance=any_round, path=path)
def save_instance(instance: RoundInstance | HeteroRound, path: str | os.PathLike[str]) -> Path:
    """Write ``instance`` as JSON (``synergy-round/1``, or ``/2`` for a heterogeneous round); jobs whose profile
    is their model's built-in one (on a GPU type: its built-in matrix there) are saved by name.

    The instance is checked (metadata must be JSON: no sets, NaN or other objects) before any file is opened;
    the file is written to a temporary name and renamed, so it is never left half-written. File-system
    faults (a folder as ``path``, no permission) raise ``OSError``.
    """
    target = Path(path)
    text = json.dumps(instance_to_dict(instance), indent=1, allow_nan=False) + "\n"
    with atomic_open(target, encoding="utf-8") as handle:
        handle.write(text)
    return target


def instance_to_dict(instance: RoundInstance | HeteroRound) -> dict[str, Any]:
    if isinstance(instance, HeteroRound):
        return _hetero_to_dict(instance)
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


def instance_from_dict(data: Any) -> RoundInstance | HeteroRound:
    if not isinstance(data, Mapping):
        raise InvalidInputError("instance", data, "must be a JSON object")
    if data.get("format") not in FORMATS:
        raise InvalidInputError("format", data.get("format"), f"expected {FORMAT!r} or {HETERO_FORMAT!r}")
    known_fields("", data, _ROUND_FIELDS)
    if data["format"] == HETERO_FORMAT:
        return _hetero_from_dict(data)
    cluster = _cluster(data.get("cluster"))
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list):
        raise InvalidInputError("jobs", raw_jobs, "must be a list of jobs")
    ratio = _profile_ratio(cluster)
    jobs = tuple(_job(f"jobs[{index}]", raw, ratio) for index, raw in enumerate(raw_jobs))
    return RoundInstance(cluster, jobs, _metadata(data))


def _metadata(data: Mapping[str, Any]) -> Any:
    metadata = data.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise InvalidInputError("metadata", metadata, "must be an object")
    return json_value("metadata", metadata)


def _hetero_to_dict(instance: HeteroRound) -> dict[str, Any]:
    cluster = instance.cluster
    jobs = []
    for job in instance.jobs:
        entry: dict[str, Any] = {"id": job.id, "gpus": job.gpus}
        if job.model is not None:
            entry["model"] = job.model
        entry["baseline"] = job.baseline
        entry.update(type_profiles_entry(job.model, job.profiles, cluster))
        if job.arrival:
            entry["arrival"] = job.arrival
        if job.work is not None:
            entry["work"] = job.work
        jobs.append(entry)
    data: dict[str, Any] = {"format": HETERO_FORMAT, "cluster": cluster.to_dict(), "jobs": jobs}
    if instance.metadata:
        data["metadata"] = json_value("metadata", dict(instance.metadata))
    return data


def type_profiles_entry(model: str | None, profiles: Mapping[str, Profile], cluster: HeteroCluster
                        ) -> dict[str, Any]:
    """How a file names a job's matrices per GPU type: ``types``, and ``profiles`` holding each matrix that is
    not its model's built-in one on that type in ``cluster``'s unit (:func:`builtin_in_round`);
    :func:`job_type_profiles` reads it back."""
    entry: dict[str, Any] = {"types": list(profiles)}
    inline = {kind: profile.to_dict() for kind, profile in profiles.items()
              if model is None or not _is_builtin_in_round(model, kind, cluster, profile)}
    if inline:
        entry["profiles"] = inline
    return entry


def job_type_profiles(where: str, raw: Mapping[str, Any], cluster: HeteroCluster
                      ) -> tuple[str | None, dict[str, Profile]]:
    """A job entry's ``model`` and its matrix per GPU type of ``cluster`` (``types``: the inline one, else its
    model's built-in one there in the cluster's unit, :func:`builtin_in_round`)."""
    if "types" not in raw:
        raise InvalidInputError(f"{where}.types", None, "missing field")
    model = raw.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidInputError(f"{where}.model", model, "must be a model name (a string)")
    kinds = raw["types"]
    if not isinstance(kinds, list) or not kinds or not all(isinstance(kind, str) for kind in kinds):
        raise InvalidInputError(f"{where}.types", kinds, "must be a non-empty list of GPU type names")
    if len(set(kinds)) != len(kinds):
        raise InvalidInputError(f"{where}.types", kinds, "a GPU type may be listed once")
    inline = raw.get("profiles", {})
    if not isinstance(inline, Mapping):
        raise InvalidInputError(f"{where}.profiles", inline, "must be an object of GPU type -> matrix")
    for kind in inline:
        if kind not in kinds:
            raise InvalidInputError(f"{where}.profiles", kind, f"a matrix for a type not in types ({kinds})")
    profiles: dict[str, Profile] = {}
    for kind in kinds:
        if kind not in cluster.names:
            raise UnknownNameError(f"{where}.types", kind, cluster.names)
        try:
            if kind in inline:
                profiles[kind] = _profile(inline[kind], model, f"profiles.{kind}")
            elif model is not None:
                if model not in model_names():  # named here as the file names it (not the profile's "name")
                    raise UnknownNameError("model", model, model_names())
                # The built-in matrices exist on Gavel's measured types only.
                if kind not in gavel_gpu_types():
                    raise InvalidInputError(
                        f"types[{kinds.index(kind)}]", kind,
                        f"built-in model {model!r} has matrices on {', '.join(gavel_gpu_types())} only: give "
                        f"this type's matrix inline (profiles.{kind})")
                profiles[kind] = builtin_in_round(model, kind, cluster)
            else:
                raise InvalidInputError("model", None, f"a job needs a built-in 'model' name or an inline matrix "
                                        f"for type {kind!r}")
        except InvalidInputError as error:
            raise prefixed(error, where) from None
    return model, profiles


def _hetero_from_dict(data: Mapping[str, Any]) -> HeteroRound:
    cluster = _hetero_cluster(data.get("cluster"))
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list):
        raise InvalidInputError("jobs", raw_jobs, "must be a list of jobs")
    jobs = tuple(_hetero_job(f"jobs[{index}]", raw, cluster) for index, raw in enumerate(raw_jobs))
    return HeteroRound(cluster, jobs, _metadata(data))


def _hetero_cluster(raw: Any) -> HeteroCluster:
    if not isinstance(raw, Mapping):
        raise InvalidInputError("cluster", raw, "must be an object")
    known_fields("cluster", raw, ("types", "reference"))
    raw_types = raw.get("types")
    if not isinstance(raw_types, list):
        raise InvalidInputError("cluster.types", raw_types, "must be a list of server types")
    types = []
    for index, entry in enumerate(raw_types):
        where = f"cluster.types[{index}]"
        if not isinstance(entry, Mapping):
            raise InvalidInputError(where, entry, "must be an object")
        known_fields(where, entry, ("name", *_CLUSTER_FIELDS))
        for name in ("name", *_CLUSTER_FIELDS):
            if name not in entry:
                raise InvalidInputError(f"{where}.{name}", None, "missing field")
        try:
            types.append(ServerType(entry["name"], *(entry[name] for name in _CLUSTER_FIELDS)))
        except InvalidInputError as error:
            raise prefixed(error, where) from None
    try:
        return HeteroCluster(tuple(types), raw.get("reference"))
    except InvalidInputError as error:
        raise prefixed(error, "cluster") from None


def _hetero_job(where: str, raw: Any, cluster: HeteroCluster) -> HeteroJob:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(where, raw, "must be an object")
    known_fields(where, raw, _HETERO_JOB_FIELDS)
    for name in ("id", "gpus"):
        if name not in raw:
            raise InvalidInputError(f"{where}.{name}", None, "missing field")
    model, profiles = job_type_profiles(where, raw, cluster)
    try:
        return HeteroJob(raw["id"], raw["gpus"], profiles, raw.get("baseline"), model, raw.get("arrival", 0.0),
                         raw.get("work"))
    except InvalidInputError as error:
        raise prefixed(error, where) from None


def _cluster(raw: Any) -> Cluster:
    if not isinstance(raw, Mapping):
        raise InvalidInputError("cluster", raw, "must be an object")
    known_fields("cluster", raw, _CLUSTER_FIELDS)
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
    known_fields(where, raw, _JOB_FIELDS)
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


def inline_profiles(where: str, raw: Any, model: str | None) -> dict[str, Profile]:
    """Matrices per GPU type written inline, ``{type: {cpu_per_gpu, mem_gb_per_gpu, tput}}`` (a trace job's
    ``profiles``), named ``model``; errors name ``where`` and the type."""
    if not isinstance(raw, Mapping):  # its names and being non-empty: the job's own rule (hetero.type_matrices)
        raise InvalidInputError(where, raw, "must be an object of GPU type -> matrix")
    return {str(kind): _profile(matrix, model, f"{where}.{kind}") for kind, matrix in raw.items()}


def _profile(raw: Any, name: str | None, where: str = "profile") -> Profile:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(where, raw, "must be an object")
    known_fields(where, raw, ("cpu_per_gpu", "mem_gb_per_gpu", "tput"))
    for key in ("cpu_per_gpu", "mem_gb_per_gpu", "tput"):
        if key not in raw:
            raise InvalidInputError(f"{where}.{key}", None, "missing field")
    try:
        return Profile(raw["cpu_per_gpu"], raw["mem_gb_per_gpu"], raw["tput"], name=name)
    except InvalidInputError as error:
        raise prefixed(error, where) from None


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


def builtin_in_round(model: str, gpu_type: str, cluster: HeteroCluster) -> Profile:
    """The built-in model ``model``'s matrix on ``gpu_type`` (a Gavel type) in the unit of ``cluster``'s rounds
    (:attr:`~synergy_opt.hetero.HeteroCluster.normalises_builtin`): as built in on a ``v100`` reference, else
    divided by the model's built-in throughput at the reference type's proportional share (which must be a
    Gavel type: a named field's error otherwise), as ``generate_round`` divides its jobs'."""
    profile = builtin_type_profile(model, gpu_type, _profile_ratio(cluster[gpu_type].cluster))
    if not cluster.normalises_builtin:
        return profile
    reference = cluster.reference_type
    if reference.name not in gavel_gpu_types():
        raise InvalidInputError("model", model, f"a built-in model's matrices are put in the round's unit by its "
                                f"throughput on the reference type, and {reference.name!r} has no built-in "
                                f"matrix: give this job's matrices inline (synergy_opt.hetero.normalise)")
    own = builtin_type_profile(model, reference.name, _profile_ratio(reference.cluster))
    try:
        return normalise({gpu_type: profile, reference.name: own}, reference)[gpu_type]
    except InvalidInputError:
        raise InvalidInputError("model", model, f"its built-in matrix on the reference type {reference.name!r} is "
                                f"0 at that type's proportional share: give this job's matrices inline") from None


def _is_builtin_in_round(model: str, gpu_type: str, cluster: HeteroCluster, profile: Profile) -> bool:
    """Whether ``profile`` is :func:`builtin_in_round`'s matrix (so a file may name the model instead)."""
    try:
        return builtin_in_round(model, gpu_type, cluster) == profile
    except InvalidInputError:
        return False
