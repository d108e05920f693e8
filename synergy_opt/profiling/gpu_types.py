"""Job matrices per GPU type (SPEC 7, issue 20): the job performance model with its GPU stage scaled by a speed
ratio.

A GPU type changes only the GPU stage of an iteration (:class:`~synergy_opt.profiling.model.JobModel`): on a
GPU ``ratio`` times as fast, ``gpu_s`` becomes ``gpu_s / ratio``; the CPU and storage stages keep their time,
so a faster GPU needs more CPUs (and memory) to stay fed and a slower one needs fewer. Every matrix of a job is
in one unit, its throughput at the reference point (3 CPUs, 62.5 GB per GPU) on the reference type (ratio 1),
so throughputs on different types add up.

- :func:`type_profiles`: a job model's matrix on each type, from each type's speed ratio.
- The built-in models (:func:`builtin_type_matrix`, :func:`builtin_type_profiles`): on the reference type
  ``v100`` the built-in matrix itself. Its peak is GPU-bound, so the GPU stage is ``1 / max W`` (in units of
  the reference iteration) and everywhere the matrix is below its peak it *measures* the slowest of the other
  stages. A slower GPU therefore gives ``min(W, ratio * max W)`` exactly
  (:func:`synergy_opt.profiles.capped_at_gpu`; the ratios of ``k80`` and ``p100`` are Gavel's measurements,
  :func:`synergy_opt.profiles.speed_ratio`). A faster GPU needs the other stages where the matrix shows only
  the GPU (on its plateau): there they are the fitted model's (:func:`~synergy_opt.profiling.builtin_job_model`),
  never above the GPU stage they were hidden by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import type_name
from synergy_opt.instance import Profile
from synergy_opt.profile import throughput_matrix
from synergy_opt.profiles import (
    REFERENCE_GPU_TYPE,
    builtin_type_profile,
    capped_at_gpu,
    gavel_gpu_types,
    model_info,
)
from synergy_opt.profiling.fit import BUILTIN_MODEL, builtin_job_model
from synergy_opt.profiling.model import (
    MAX_QUANTITY,
    REFERENCE_CPU_PER_GPU,
    REFERENCE_MEM_GB_PER_GPU,
    JobModel,
)
from synergy_opt.validation import InstanceOf, Number, Optional, checked, real_array

# A matrix value this close to its peak is on the plateau, where the GPU stage binds.
_PLATEAU = 1e-9
# A GPU type's speed ratio, on the built-in path as on the modelled one: within the job model's range of
# quantities (a ratio of 1e-300 made matrices of 2.5e-300 on the built-in path, refused on the modelled one).
SPEED_RATIO = Number(1 / MAX_QUANTITY, MAX_QUANTITY)


def speed_ratio_map(name: str, value: Any) -> dict[str, float]:
    """The rule for speed ratios: GPU type name -> a number in [1e-30, 1e30] (``SPEED_RATIO``)."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(name, value, "must be a dict of GPU type -> speed ratio (a number in [1e-30, 1e30])")
    # Keys by the type name rule (a key 5 made a type '5', 'a 100' one that a round then refused).
    return {type_name(f"{name} key", kind): SPEED_RATIO(f"{name}[{kind!r}]", ratio) for kind, ratio in value.items()}


def builtin_speed_ratios(name: str, value: Any) -> dict[str, float]:
    """The rule for speed ratios over a ``v100``, the built-in matrices' type: :func:`speed_ratio_map`'s, and
    the ``v100``'s own ratio, if given, is 1."""
    ratios = speed_ratio_map(name, value)
    if ratios.get(REFERENCE_GPU_TYPE, 1) != 1:
        raise InvalidInputError(f"{name}[{REFERENCE_GPU_TYPE!r}]", ratios[REFERENCE_GPU_TYPE],
                                "the reference type's speed ratio is 1")
    return ratios


def with_gpu_speed(model: JobModel, ratio: float) -> JobModel:
    """The same job on a GPU ``ratio`` times as fast: its GPU stage takes ``gpu_s / ratio``, the rest is kept."""
    return replace(model, gpu_s=model.gpu_s / SPEED_RATIO("ratio", ratio))


@checked(model=InstanceOf(JobModel), ratios=speed_ratio_map)
def type_profiles(model: JobModel, ratios: Mapping[str, float], cpu_axis: Any, mem_axis: Any) -> dict[str, Profile]:
    """``model``'s matrix on each GPU type of ``ratios`` (its GPU's speed relative to the reference type's, on
    which ``model`` is the job), on the grid ``cpu_axis x mem_axis``, in units of ``model``'s throughput at the
    reference point (3 CPUs, 62.5 GB per GPU) on the reference type."""
    reference = float(model.iteration_time_s(REFERENCE_CPU_PER_GPU, REFERENCE_MEM_GB_PER_GPU))
    probe = model.profile(cpu_axis, mem_axis)  # checks the axes
    cpu, mem = probe.cpu_per_gpu[:, None], probe.mem_gb_per_gpu[None, :]
    profiles = {}
    for kind, ratio in ratios.items():
        try:
            faster = with_gpu_speed(model, ratio)
        except InvalidInputError as error:  # named by the ratio given, not the model field it would make
            raise InvalidInputError(f"ratios[{kind!r}]", ratio, f"the job's GPU stage would leave the job "
                                    f"model's range ({error})") from None
        tput = reference / faster.iteration_time_s(cpu, mem)
        profiles[kind] = Profile(probe.cpu_per_gpu, probe.mem_gb_per_gpu, tput, name=model.name)
    return profiles


def faster_gpu_matrix(tput: np.ndarray, ratio: float, other_stages: np.ndarray) -> np.ndarray:
    """A matrix ``tput`` of the slowest-stage form on a GPU ``ratio`` times as fast (any ratio of ``SPEED_RATIO``).

    In units of the iteration at the reference point: the GPU stage is ``g = 1 / max W`` (the peak is
    GPU-bound), the other stages together ``S = 1 / W`` wherever the matrix is below its peak (it measures
    them there) and ``min(other_stages, g)`` on the plateau (the GPU hides them: ``other_stages`` is their
    model, in the same unit). On the new GPU the iteration takes ``max(g / ratio, S)``. At ``ratio <= 1`` this
    is :func:`~synergy_opt.profiles.capped_at_gpu` (``other_stages`` plays no part).
    """
    tput = throughput_matrix("tput", tput)
    ratio = SPEED_RATIO("ratio", ratio)
    if ratio <= 1:
        return capped_at_gpu(tput, ratio)
    other_stages = real_array("other_stages", other_stages, np.ndim(tput))
    if other_stages.shape != np.shape(tput) or not np.all(np.isfinite(other_stages) & (other_stages >= 0)):
        raise InvalidInputError("other_stages", other_stages, f"must be finite times >= 0, one per matrix entry "
                                f"(shape {np.shape(tput)})")
    peak = float(tput.max(initial=0.0))
    if peak <= 0:
        return np.zeros_like(tput)
    gpu = 1.0 / peak
    with np.errstate(divide="ignore"):
        measured = np.where(tput > 0, 1.0 / np.where(tput > 0, tput, 1.0), np.inf)
    plateau = tput >= peak * (1 - _PLATEAU)
    other = np.where(plateau, np.minimum(other_stages, gpu), measured)
    return np.where(tput > 0, 1.0 / np.maximum(gpu / ratio, other), 0.0)


def builtin_other_stages(name: str) -> np.ndarray:
    """The fitted model's CPU and storage stages of built-in model ``name`` (the slower of the two) on its grid,
    in units of the fitted model's iteration at the reference point."""
    model = builtin_job_model(name)
    grid = model_info(name).profile
    _, cpu, read = model.stage_times_s(grid.cpu_per_gpu[:, None], grid.mem_gb_per_gpu[None, :])
    reference = float(model.iteration_time_s(REFERENCE_CPU_PER_GPU, REFERENCE_MEM_GB_PER_GPU))
    return np.asarray(np.maximum(cpu, read) / reference)


@checked(name=BUILTIN_MODEL, ratio=SPEED_RATIO)
def builtin_type_matrix(name: str, ratio: float) -> np.ndarray:
    """Built-in model ``name``'s matrix on a GPU ``ratio`` times as fast as a ``v100`` (module docstring)."""
    tput = model_info(name).profile.tput
    if ratio == 1:
        return np.array(tput)
    return faster_gpu_matrix(tput, ratio, builtin_other_stages(name) if ratio > 1 else np.zeros_like(tput))


@checked(name=BUILTIN_MODEL, ratios=Optional(builtin_speed_ratios))
def builtin_type_profiles(name: str, ratios: Mapping[str, float] | None = None, cpu_gpu_ratio: int = 3
                          ) -> dict[str, Profile]:
    """Built-in model ``name``'s matrix on every GPU type Gavel measured (``k80``, ``p100``, ``v100``) and on
    each type of ``ratios`` (its GPU's speed relative to a ``v100``, e.g. ``{"a100": 2.0}``; a type Gavel
    measured takes the ratio given here instead)."""
    grid = model_info(name, cpu_gpu_ratio).profile
    profiles = {kind: builtin_type_profile(name, kind, cpu_gpu_ratio) for kind in gavel_gpu_types()
                if kind not in (ratios or {})}
    for kind, ratio in (ratios or {}).items():
        profiles[kind] = Profile(grid.cpu_per_gpu, grid.mem_gb_per_gpu, builtin_type_matrix(name, ratio), name=name)
    return profiles
