"""Built-in profiles: the ten models profiled by the Synergy OSDI '22 artifact.

Source: ``synergy_opt/data/synergy_profiles.json``, the sensitivity matrices of the paper's artifact
(github.com/msr-fiddle/synergy, MIT License, ``simulator/models*/<model>_1.py``), paper Table 4. Throughput
is normalised to the GPU-proportional share (3 CPUs, 62.5 GB per GPU) = 1.0 and both axes are per GPU.
The file also holds the artifact's figures for servers with 4, 5 or 6 CPUs per GPU (section 5.5): the
matrices are the same, only the speed-up at the best point and the iteration time change.

On other GPU types (SPEC 7): the matrices were measured on V100 GPUs (the paper's testbed), so ``v100`` is the
reference type; on ``k80`` and ``p100`` each model's GPU stage is slowed by the speed ratio Gavel measured for
the nearest Gavel job type (``data/gavel/``, MIT License, github.com/stanford-futuredata/gavel):
:func:`builtin_type_profile`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.gavel_throughputs import GavelThroughputs, load_gavel_throughputs
from synergy_opt.hetero import REFERENCE_GPU_TYPE
from synergy_opt.instance import Profile
from synergy_opt.profile import throughput_matrix
from synergy_opt.validation import Integer, Number, OneOf, checked

TASKS = ("image", "language", "speech")
DEFAULT_CPU_GPU_RATIO = 3


@dataclass(frozen=True)
class ModelInfo:
    """One built-in model: its task, its matrix and the artifact's figures for one CPU:GPU ratio."""

    name: str
    task: str
    profile: Profile
    speedup_at_best: float
    iter_time_s: float
    cpu_gpu_ratio: int


@cache
def _raw() -> dict[str, Any]:
    text = resources.files("synergy_opt").joinpath("data/synergy_profiles.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def source() -> str:
    """Where the built-in profiles come from."""
    return str(_raw()["source"])


def reference_server() -> dict[str, float]:
    """The server the built-in models were profiled on: its GPUs, CPUs, memory (GB) and storage (MB/s)."""
    return {key: float(value) for key, value in _raw()["reference_server"].items()}


def model_names() -> tuple[str, ...]:
    """The built-in models' names (``res18``, ``m5``, ...), the paper's ten, in the data file's order."""
    return tuple(_raw()["models"])


def models_by_task() -> dict[str, tuple[str, ...]]:
    models = _raw()["models"]
    return {task: tuple(name for name, m in models.items() if m["task"] == task) for task in TASKS}


def cpu_gpu_ratios() -> tuple[int, ...]:
    return (DEFAULT_CPU_GPU_RATIO, *sorted(int(r) for r in _raw()["cpu_gpu_ratio_variants"]))


@cache
def model_info(name: str, cpu_gpu_ratio: int = DEFAULT_CPU_GPU_RATIO) -> ModelInfo:
    """The built-in model ``name`` as profiled for servers with ``cpu_gpu_ratio`` CPUs per GPU."""
    data = _raw()
    if name not in data["models"]:
        raise UnknownNameError("model", name, model_names())
    base = data["models"][name]
    if cpu_gpu_ratio == DEFAULT_CPU_GPU_RATIO:
        variant = base
    elif str(cpu_gpu_ratio) in data["cpu_gpu_ratio_variants"]:
        variant = data["cpu_gpu_ratio_variants"][str(cpu_gpu_ratio)][name]
    else:
        raise InvalidInputError("cpu_gpu_ratio", cpu_gpu_ratio, f"profiled ratios are {cpu_gpu_ratios()}")
    profile = Profile(data["cpu_per_gpu"], data["mem_gb_per_gpu"], variant["tput"], name=name)
    return ModelInfo(
        name=name,
        task=base["task"],
        profile=profile,
        speedup_at_best=float(variant["speedup_at_best"]),
        iter_time_s=float(variant["iter_time_s"]),
        cpu_gpu_ratio=cpu_gpu_ratio,
    )


# The Gavel job type (github.com/stanford-futuredata/gavel, MIT License; data/gavel/) whose measured speed on each
# GPU type stands for each built-in model's GPU stage. The GPU stage's speed across GPU generations is set by
# the network's kind of computation, so each model takes the Gavel network of its kind, at Gavel's batch
# size nearest its own (formulations/heterogeneous.md, section 2, says why for each).
GAVEL_JOB_TYPES = {
    "alexnet": "ResNet-18 (batch size 256)",  # an image CNN light per sample; Synergy's batch 512
    "res18": "ResNet-18 (batch size 256)",  # the same network, Gavel's largest batch
    "res50": "ResNet-50 (batch size 128)",  # the same network, Gavel's largest batch
    "mobilenet": "ResNet-18 (batch size 256)",  # a light image CNN
    "shufflenet": "ResNet-18 (batch size 256)",  # a light image CNN
    "gnmt": "LM (batch size 80)",  # LSTM layers (recurrent), Gavel's largest LM batch (GNMT's: 128)
    "transformer": "Transformer (batch size 128)",  # the same architecture and batch
    "lstm": "LM (batch size 20)",  # an LSTM language model, the same batch
    "m5": "ResNet-18 (batch size 256)",  # a convolutional (1-D) audio classifier
    "deepspeech": "LM (batch size 20)",  # recurrent layers dominate its GPU time; the same batch
}


@cache
def _gavel() -> GavelThroughputs:
    return load_gavel_throughputs()


def gavel_gpu_types() -> tuple[str, ...]:
    """The GPU types Gavel measured (``k80``, ``p100``, ``v100``): the built-in models have matrices on each."""
    return _gavel().consolidated_types


def gavel_speed_ratio(job_type: str, gpu_type: str, gpus: int = 1) -> float:
    """Gavel's measured steps per second of ``job_type`` on ``gpu_type`` over those on a ``v100`` (``gpus``
    GPUs, consolidated)."""
    table = _gavel()
    if gpu_type not in gavel_gpu_types():
        raise UnknownNameError("gpu_type", gpu_type, gavel_gpu_types())
    known = tuple(dict.fromkeys(job for job, _ in table.steps_per_s[REFERENCE_GPU_TYPE]))
    if job_type not in known:
        raise UnknownNameError("job_type", job_type, known)
    steps = table.get(gpu_type, job_type, gpus), table.get(REFERENCE_GPU_TYPE, job_type, gpus)
    if steps[0] is None or steps[1] is None:
        raise InvalidInputError("gpus", gpus, f"Gavel has no measurement of {job_type!r} on {gpus} GPUs")
    return steps[0] / steps[1]


def speed_ratio(name: str, gpu_type: str) -> float:
    """How fast built-in model ``name``'s GPU stage runs on ``gpu_type`` relative to a ``v100`` (its Gavel job
    type's measured ratio, one GPU)."""
    if name not in GAVEL_JOB_TYPES:
        raise UnknownNameError("model", name, model_names())
    return gavel_speed_ratio(GAVEL_JOB_TYPES[name], gpu_type)


CAP_RATIO = Number(0, 1, low_open=True)


def capped_at_gpu(tput: np.ndarray, ratio: float) -> np.ndarray:
    """A matrix on a GPU ``ratio <= 1`` times as fast as the one it was profiled on.

    The iteration takes its slowest stage, the GPU's at the matrix's peak (the peak is GPU-bound: more CPU and
    memory no longer help). A slower GPU makes that stage ``1 / ratio`` times longer and leaves the others, so
    the iteration time becomes the larger of the two: ``W_t = min(W, ratio * max W)``. Exact for any matrix of
    that form, whatever its CPU and storage stages are (a faster GPU needs them:
    :func:`synergy_opt.profiling.builtin_type_matrix`).
    """
    tput = throughput_matrix("tput", tput)  # a NaN entry made every entry NaN, a list raised AttributeError
    ratio = CAP_RATIO("ratio", ratio)  # a matrix is capped for a GPU no faster than its own
    return np.minimum(tput, ratio * tput.max(initial=0.0))


def builtin_type_profile(name: str, gpu_type: str, cpu_gpu_ratio: int = DEFAULT_CPU_GPU_RATIO) -> Profile:
    """The built-in model ``name``'s matrix on Gavel's GPU type ``gpu_type`` (:func:`gavel_gpu_types`), in units
    of its throughput at the reference point (3 CPUs, 62.5 GB per GPU on a ``v100``). On ``v100`` it is the
    built-in matrix itself; on the slower ``k80`` and ``p100``, :func:`capped_at_gpu` at the model's
    :func:`speed_ratio`."""
    # Checked before the cache, which takes hashable arguments only (a list raised "unhashable" from inside it).
    if not isinstance(gpu_type, str):
        raise InvalidInputError("gpu_type", gpu_type, "must be a GPU type's name")
    return _builtin_type_profile(OneOf(model_names)("name", name), gpu_type,
                                 Integer(among=cpu_gpu_ratios())("cpu_gpu_ratio", cpu_gpu_ratio))


@cache
def _builtin_type_profile(name: str, gpu_type: str, cpu_gpu_ratio: int) -> Profile:
    profile = model_info(name, cpu_gpu_ratio).profile
    if gpu_type == REFERENCE_GPU_TYPE:
        return profile
    if gpu_type not in gavel_gpu_types():
        raise UnknownNameError("gpu_type", gpu_type, gavel_gpu_types())
    tput = capped_at_gpu(profile.tput, speed_ratio(name, gpu_type))
    return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, tput, name=name)


@checked(name=OneOf(model_names), cpu_gpu_ratio=Integer(among=cpu_gpu_ratios()))
def builtin_profile(name: str, cpu_gpu_ratio: int = DEFAULT_CPU_GPU_RATIO) -> Profile:
    """The sensitivity matrix of built-in model ``name`` (see :func:`model_names`)."""
    return model_info(name, cpu_gpu_ratio).profile
