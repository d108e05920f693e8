"""Fitting a :class:`JobModel` to a sensitivity matrix, and the fitted models of the ten built-in matrices.

A normalised matrix fixes only ratios of stage times, so the fit works in units of the iteration time and
scales the result to the artifact's measured iteration time at the reference point (``iter_time_s``). The
process memory and the storage bandwidth are fixed (20 GB, 62.5 MB/s per GPU); the fit chooses the GPU time,
the CPU time and serial fraction, the time to read a whole batch from storage (hence the item size) and the
dataset size, minimising the squared relative error over every grid point (scipy ``least_squares`` from a fixed
set of starts, the best kept: :func:`_multi_start`).

The start point is read off the matrix: the GPU time is the fastest iteration; the CPU stage is a line in
``1/c`` through the full-memory column where it is slower than that (Amdahl's law is linear in ``1/c``); the
storage stage is a line in memory through the top-CPU row where memory slows it. A stage the matrix never
shows (language models are flat) cannot be fitted; it is set to half the iteration time it would have to
stay below, so that jobs drawn around the model stay insensitive to it. When memory binds at one column
only, the storage line goes through the next column at the fastest iteration: the largest dataset the
matrix allows.

The fitted parameters of the built-in models are stored in ``synergy_opt/data/job_models.json`` (seeded
rounds must not depend on the scipy version); ``python -m synergy_opt.profiling --write`` refits and rewrites it.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Profile
from synergy_opt.profile import on_grid
from synergy_opt.profiles import model_info, model_names
from synergy_opt.profiling.model import (
    BATCH,
    POSITIVE_QUANTITY,
    PROCESS_MEM_GB,
    REFERENCE_CPU_PER_GPU,
    REFERENCE_MEM_GB_PER_GPU,
    STORAGE_MB_S_PER_GPU,
    JobModel,
)
from synergy_opt.validation import InstanceOf, OneOf, Optional, checked, text

_DATA = "data/job_models.json"
_FIELDS = ("batch", "gpu_s", "cpu_s", "serial_fraction", "dataset_gb", "item_mb")
# A stage that never binds on the grid is set to this fraction of the time it must stay below.
_HIDDEN_STAGE = 0.5
_SLOWER = 1 + 1e-9
BUILTIN_MODEL = OneOf(model_names)
# Multi-start: the log-scale step between starts, the box the log parameters stay in around the matrix's start
# (e^8 ~ 3000x either way: far beyond any fit, and no overflow in the model), and the relative improvement a
# later start must bring to replace the best (so ties keep the earlier, matrix-derived one).
_STEP = 1.0
_SPAN = 8.0
_TIE = 1e-9
_SCREEN = 30  # residual evaluations per start before the best are polished
_POLISHED = 4


@dataclass(frozen=True)
class FitResult:
    """A fitted model and how well it reproduces the matrix it was fitted to."""

    model: JobModel
    target: Profile
    fitted: Profile

    @property
    def relative_error(self) -> np.ndarray:
        """``|fitted - target| / target`` per grid point (absolute where the target is 0)."""
        scale = np.where(self.target.tput > 0, self.target.tput, 1.0)
        return np.abs(self.fitted.tput - self.target.tput) / scale

    @property
    def squared_error(self) -> float:
        """What the fit minimises: the sum of squared errors, each over the target's largest throughput."""
        scale = float(self.target.tput.max()) or 1.0
        return float(np.sum(((self.fitted.tput - self.target.tput) / scale) ** 2))

    @property
    def max_error(self) -> float:
        return float(self.relative_error.max())

    @property
    def rms_error(self) -> float:
        return float(np.sqrt(np.mean(self.relative_error**2)))

    @property
    def worst_point(self) -> tuple[float, float]:
        """The (CPUs, GB) per GPU where the fit is furthest from the target."""
        a, b = np.unravel_index(int(self.relative_error.argmax()), self.relative_error.shape)
        return float(self.target.cpu_per_gpu[a]), float(self.target.mem_gb_per_gpu[b])


@checked(profile=InstanceOf(Profile), iter_time_s=POSITIVE_QUANTITY, batch=BATCH, name=Optional(text))
def fit_job_model(profile: Profile, iter_time_s: float, batch: int, name: str | None = None) -> FitResult:
    """The :class:`JobModel` closest to ``profile`` normalised at 3 CPUs, 62.5 GB (``FitResult.target``, the matrix
    over its throughput there), in relative error.

    Parameters
    ----------
    profile
        The matrix to reproduce; its axes must include the reference point (3 CPUs, 62.5 GB per GPU).
    iter_time_s
        The job's seconds per iteration at the reference point (sets the time scale).
    batch
        Samples per iteration per GPU (sets the item size from the storage time).
    """
    cpu, mem, tput = profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput
    shown = profile.name or f"a {cpu.size} x {mem.size} matrix"
    if not (on_grid(cpu, REFERENCE_CPU_PER_GPU) and on_grid(mem, REFERENCE_MEM_GB_PER_GPU)):
        raise InvalidInputError(
            "profile", shown,
            f"its axes must hold the reference point ({REFERENCE_CPU_PER_GPU:g} CPUs, {REFERENCE_MEM_GB_PER_GPU:g} "
            "GB per GPU), where the matrix is normalised and iter_time_s is measured",
        )
    at_reference = profile.throughput(REFERENCE_CPU_PER_GPU, REFERENCE_MEM_GB_PER_GPU)
    if not at_reference > 0:
        raise InvalidInputError("profile", shown, "its throughput at the reference point is 0")
    # A job model is 1 at the reference point: the matrix is fitted (and compared) so normalised (a matrix twice
    # ResNet-50's was once fitted raw, 57% of its peak off; one of 1e-300 overflowed the fit's start).
    if at_reference != 1.0:
        profile = Profile(cpu, mem, tput / at_reference, name=profile.name)
        tput = profile.tput
    scale = tput.max()

    def residual(x: np.ndarray) -> np.ndarray:
        return ((_normalised(x, cpu, mem) - tput) / scale).ravel()

    try:
        x = _multi_start(residual, _start(cpu, mem, tput))
        model = _job_model(x, iter_time_s, batch, name)
    except (InvalidInputError, ValueError) as error:  # the fit left the model's ranges (or SciPy's): not its form
        raise InvalidInputError(
            "profile", shown, f"no job model fits it (the fit gives {error})"
        ) from None
    return FitResult(model, profile, model.profile(cpu, mem))


def _multi_start(residual: Callable[[np.ndarray], np.ndarray], start: np.ndarray) -> np.ndarray:
    """The least-squares point of lowest cost over a fixed set of starts.

    The model is a maximum of three stages, so the squared error has a local minimum for each stage that can
    be made to bind or not: one local solve lands in whichever basin its start is in, and which that is moves
    with the library's version. The starts are ``start`` and the 16 corners of a box of ``+-_STEP`` (log scale)
    around it in the four time and size parameters; each runs a few steps (``_SCREEN`` evaluations), the
    ``_POLISHED`` best run to convergence, and the lowest cost is kept. The first start keeps any tie, so a
    stage the matrix never shows stays where ``start`` put it.
    """
    lower = np.array([start[0] - _SPAN, start[1] - _SPAN, 0.0, start[3] - _SPAN, start[4] - _SPAN])
    upper = np.array([start[0] + _SPAN, start[1] + _SPAN, 1.0, start[3] + _SPAN, start[4] + _SPAN])

    def solve(point: np.ndarray, evaluations: int | None) -> tuple[float, np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            fit = least_squares(residual, np.clip(point, lower, upper), bounds=(lower, upper), max_nfev=evaluations)
        return float(fit.cost), fit.x

    offsets = [np.zeros(5), *(_corner(signs) * _STEP for signs in itertools.product((-1, 1), repeat=4))]
    screened = [solve(start + offset, _SCREEN) for offset in offsets]
    order = sorted(range(len(screened)), key=lambda index: (screened[index][0], index))[:_POLISHED]
    best_cost, best = np.inf, start
    for index in sorted(order):  # in start order, so that a tie keeps the earlier start
        cost, point = solve(screened[index][1], None)
        if not np.isfinite(best_cost) or cost < best_cost - _TIE * max(best_cost, 1e-12):
            best_cost, best = cost, point
    return best


def _corner(signs: tuple[int, ...]) -> np.ndarray:
    """A start offset: the signs on log GPU, log CPU, log read and log dataset; the serial fraction stays."""
    return np.array([signs[0], signs[1], 0.0, signs[2], signs[3]], dtype=float)


def _times(x: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Iteration time (in fit units) on the grid for parameters ``log g, log s, serial, log K, log D``."""
    gpu, cpu_time, serial, read, dataset = np.exp(x[0]), np.exp(x[1]), x[2], np.exp(x[3]), np.exp(x[4])
    cpu_stage = cpu_time * (serial + (1 - serial) / cpu)
    storage = read * np.maximum(1 - np.maximum(mem - PROCESS_MEM_GB, 0) / dataset, 0)
    return np.maximum(np.maximum(gpu, cpu_stage[:, None]), storage[None, :])


def _reference_time(x: np.ndarray) -> float:
    return float(_times(x, np.array([REFERENCE_CPU_PER_GPU]), np.array([REFERENCE_MEM_GB_PER_GPU]))[0, 0])


def _normalised(x: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    return np.where(mem[None, :] >= PROCESS_MEM_GB, _reference_time(x) / _times(x, cpu, mem), 0.0)


def _start(cpu: np.ndarray, mem: np.ndarray, tput: np.ndarray) -> np.ndarray:
    """Parameters read off the matrix (module docstring), the least-squares start."""
    with np.errstate(divide="ignore"):
        time = np.where(tput > 0, 1.0 / tput, np.inf)
    gpu = float(time.min())

    full_memory = time[:, -1]
    bound = full_memory > gpu * _SLOWER
    if bound.sum() >= 2:
        slope, intercept = np.polyfit(1.0 / cpu[bound], full_memory[bound], 1)
        serial_time, parallel_time = max(float(intercept), 0.0), max(float(slope), 1e-9)
    elif bound.sum() == 1:
        serial_time, parallel_time = 0.0, float(full_memory[bound][0] * cpu[bound][0])
    else:
        serial_time, parallel_time = 0.0, _HIDDEN_STAGE * float(full_memory[0]) * float(cpu[0])
    cpu_time = serial_time + parallel_time

    top_cpu = time[-1, :]
    bound = np.isfinite(top_cpu) & (top_cpu > top_cpu[-1] * _SLOWER) & (mem >= PROCESS_MEM_GB)
    cache = np.maximum(mem - PROCESS_MEM_GB, 0.0)
    if bound.sum() >= 2:
        slope, read = np.polyfit(cache[bound], top_cpu[bound], 1)
        read, dataset = float(read), float(read / max(-slope, 1e-12))
    elif bound.sum() == 1:
        first = int(np.flatnonzero(bound)[0])
        after = min(first + 1, mem.size - 1)
        slope = (top_cpu[after] - top_cpu[first]) / max(cache[after] - cache[first], 1e-9)
        read = float(top_cpu[first] - slope * cache[first])
        dataset = float(read / max(-slope, 1e-12))
    else:
        read, dataset = _HIDDEN_STAGE * float(top_cpu[0]), float(max(cache[-1], 1.0))
    return np.array([np.log(gpu), np.log(cpu_time), serial_time / cpu_time, np.log(read), np.log(dataset)])


def _job_model(x: np.ndarray, iter_time_s: float, batch: int, name: str | None) -> JobModel:
    scale = iter_time_s / _reference_time(x)
    read_s = float(np.exp(x[3])) * scale
    return JobModel(
        batch=batch,
        gpu_s=float(np.exp(x[0])) * scale,
        cpu_s=float(np.exp(x[1])) * scale,
        serial_fraction=float(x[2]),
        dataset_gb=float(np.exp(x[4])),
        item_mb=read_s * STORAGE_MB_S_PER_GPU / batch,
        name=name,
    )


@checked(name=BUILTIN_MODEL)
def fit_builtin(name: str) -> FitResult:
    """Fit the built-in model ``name`` afresh (see :func:`builtin_job_model` for the stored fit)."""
    info = model_info(name)
    return fit_job_model(info.profile, info.iter_time_s, _batch(name), name=name)


@checked(name=BUILTIN_MODEL)
def builtin_fit(name: str) -> FitResult:
    """The stored fit of built-in model ``name`` against its matrix."""
    model = builtin_job_model(name)
    target = model_info(name).profile
    return FitResult(model, target, model.profile(target.cpu_per_gpu, target.mem_gb_per_gpu))


@checked(name=BUILTIN_MODEL)  # before the cache: an unhashable name is an error naming it, not a TypeError
@cache
def builtin_job_model(name: str) -> JobModel:
    """The stored fitted :class:`JobModel` of built-in model ``name`` (one of ``model_names()``)."""
    fields = _stored()[name]
    return JobModel(
        batch=int(fields["batch"]), gpu_s=fields["gpu_s"], cpu_s=fields["cpu_s"],
        serial_fraction=fields["serial_fraction"], dataset_gb=fields["dataset_gb"], item_mb=fields["item_mb"],
        name=name,
    )


def _batch(name: str) -> int:
    return int(_raw_models()[name]["batch"])


@cache
def _raw_models() -> dict[str, Any]:
    text = resources.files("synergy_opt").joinpath("data/synergy_profiles.json").read_text()
    models: dict[str, Any] = json.loads(text)["models"]
    return models


@cache
def _stored() -> dict[str, dict[str, float]]:
    data: dict[str, dict[str, float]] = json.loads(resources.files("synergy_opt").joinpath(_DATA).read_text())[
        "models"
    ]
    return data


def _write(path: Path) -> None:
    models = {}
    for name in model_names():
        model = fit_builtin(name).model
        models[name] = {key: getattr(model, key) for key in _FIELDS}
    document = {
        "source": "synergy_opt.profiling.fit.fit_builtin on synergy_profiles.json; "
        "python -m synergy_opt.profiling --write rewrites it",
        "fixed": {"process_mem_gb": PROCESS_MEM_GB, "storage_mb_s": STORAGE_MB_S_PER_GPU},
        "units": {"gpu_s": "s/iteration", "cpu_s": "s/batch on one CPU", "dataset_gb": "GB", "item_mb": "MB"},
        "models": models,
    }
    path.write_text(json.dumps(document, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m synergy_opt.profiling",
                                     description="Refit the built-in job models and print their fit errors.")
    parser.add_argument("--write", action="store_true", help=f"rewrite synergy_opt/{_DATA}")
    args = parser.parse_args(argv)
    if args.write:
        _write(Path(str(resources.files("synergy_opt").joinpath(_DATA))))
    print(f"{'model':12s} {'max rel err':>11s} {'rms':>6s}  worst at (CPUs, GB)")
    for name in model_names():
        fit = fit_builtin(name)
        print(f"{name:12s} {fit.max_error:11.3f} {fit.rms_error:6.3f}  {fit.worst_point}")
