"""Built-in profiles: the ten models profiled by the Synergy OSDI '22 artifact.

Source: ``synergy_opt/data/synergy_profiles.json``, the sensitivity matrices of the paper's artifact
(github.com/msr-fiddle/synergy, MIT License, ``simulator/models*/<model>_1.py``), paper Table 4. Throughput
is normalised to the GPU-proportional share (3 CPUs, 62.5 GB per GPU) = 1.0 and both axes are per GPU.
The file also holds the artifact's figures for servers with 4, 5 or 6 CPUs per GPU (section 5.5): the
matrices are the same, only the speed-up at the best point and the iteration time change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.instance import Profile
from synergy_opt.validation import Integer, OneOf, checked

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


@checked(name=OneOf(model_names), cpu_gpu_ratio=Integer(among=cpu_gpu_ratios()))
def builtin_profile(name: str, cpu_gpu_ratio: int = DEFAULT_CPU_GPU_RATIO) -> Profile:
    """The sensitivity matrix of built-in model ``name`` (see :func:`model_names`)."""
    return model_info(name, cpu_gpu_ratio).profile
