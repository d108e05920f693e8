"""Optimistic profiling (paper section 3.1): a search of the CPU axis at full memory, memory from a model.

The search measures the CPU axis at full memory only. It measures both ends of the axis, then bisects every
stretch between two measured neighbours that still matters, from the fewest CPUs up:

- the paper's rule: a stretch whose upper end improves on its lower end by less than ``threshold`` (10%)
  is flat enough to skip (not the lowest stretch, which has no trend below it: see the next rule);
- a stretch is also skipped when it is already pinned down. In the plane of time per sample (``1 / W``)
  against ``1 / c``, a CPU stage that follows Amdahl's law is a straight line, and the slowest of it and a
  plateau (the GPU, or the storage) is convex. So the chord between the two neighbours bounds a skipped
  point from above, and the upper end's time and the trend below the stretch (the secant from the lowest
  measured point, extended) bound it from below. When the two bounds are within ``threshold / 4`` of each
  other, and a measured point between confirms the trend, measuring would not change the profile: on a job
  of that form only the knee is searched for, and on one that is not (a jump the trend did not predict)
  the unconfirmed trend pins nothing.

Skipped points take the lower bound on time (the larger of the upper end and the trend below, never beyond
the chord): exact for a job of that form, except on the lowest stretch (within ``threshold / 4`` there), and
within the stretch's improvement (below ``threshold``) otherwise, for a job whose throughput never falls with
more CPUs (one that peaks inside a skipped stretch is not bounded: formulations/profiling.md, section 3).
Every other memory value comes from ``memory_model.throughput(W at full memory, mem)``, e.g. the job's
:class:`MinIOCache`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Profile
from synergy_opt.profile import THROUGHPUT_RANGE, throughputs_out_of_range
from synergy_opt.profiling.measurement import (
    MEASURE,
    MINUTES,
    MINUTES_PER_POINT,
    Measure,
    Meter,
    ProfilingResult,
    check_axes,
)
from synergy_opt.validation import Function, Number, call_user, callable_name, checked, real_array

DEFAULT_THRESHOLD = 0.1
THRESHOLD = Number(0, 1, low_open=True, high_open=True)
_THROUGHPUT = Function(2, "throughput(at_full_memory, mem_gb_per_gpu)")
# How close the two bounds of a skipped stretch must be, as a fraction of ``threshold``.
_PINNED = 0.25


class MemoryModel(Protocol):
    """Throughput at any memory from the throughput measured at full memory (e.g. :class:`MinIOCache`)."""

    def throughput(self, at_full_memory: Any, mem_gb_per_gpu: Any) -> Any: ...


def memory_model_rule(name: str, value: Any) -> Any:
    """An object with a method ``throughput(at_full_memory, mem_gb_per_gpu)`` (:class:`MemoryModel`)."""
    method = getattr(value, "throughput", None)
    if not callable(method):
        raise InvalidInputError(name, value, f"must have a method {_THROUGHPUT.shape}")
    _THROUGHPUT(f"{name}.throughput", method)
    return value


@checked(measure=MEASURE, memory_model=memory_model_rule, threshold=THRESHOLD, minutes_per_point=MINUTES)
def profile_job(
    measure: Measure,
    cpu_axis: Sequence[float] | np.ndarray,
    mem_axis: Sequence[float] | np.ndarray,
    memory_model: MemoryModel,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    minutes_per_point: float = MINUTES_PER_POINT,
) -> ProfilingResult:
    """Profile a job optimistically: measure part of the CPU axis at full memory, model the rest.

    Parameters
    ----------
    measure
        ``measure(cpus_per_gpu, mem_gb_per_gpu) -> throughput``, the only access to the job; it is called at
        most once per point, always at the largest memory value.
    cpu_axis, mem_axis
        The grid (per GPU, strictly increasing).
    memory_model
        Gives the throughput at every memory value from the one measured at full memory
        (:attr:`JobModel.memory_model` for a modelled job: in samples per second, so ``measure`` must be too,
        ``JobModel.samples_per_s``; its storage cap never binds a normalised ``measure``). Its
        ``throughput(at_full_memory, mem_gb_per_gpu)`` is called once, with arrays: ``at_full_memory`` of shape
        ``(cpus, 1)`` and ``mem_gb_per_gpu`` of shape ``(1, mems)``, and must return the ``(cpus, mems)`` grid
        (numpy's broadcasting: ``np.minimum``, not ``min``), or one column ``(cpus, 1)`` when memory changes
        nothing; anything else (a number, one row) is an error.
    threshold
        The paper's flatness threshold in (0, 1): a stretch of the CPU axis improving by less is not searched.
    minutes_per_point
        Simulated cost of one measured point.

    Returns
    -------
    ProfilingResult
        The profile (in ``measure``'s units) and the log of measured points.
    """
    cpu, mem = check_axes(cpu_axis, mem_axis)
    meter = Meter(measure, minutes_per_point)
    full_memory = float(mem[-1])
    at_full = search_cpu_axis(lambda c: meter(c, full_memory), cpu, threshold)
    # The model's output is numbers by the toolkit's one rule (no strings, booleans or masked arrays).
    given = call_user("memory_model", memory_model.throughput, at_full[:, None], mem[None, :])
    shape = f"({cpu.size} x {mem.size})"
    try:
        modelled = real_array("throughput(...)", given, ndim=None)
    except InvalidInputError as error:
        raise InvalidInputError("memory_model", callable_name(memory_model),
                                f"must give a throughput at every grid point {shape}: {error}") from None
    # The grid, or one column (a model that ignores memory). A number or one row was spread over the grid: the
    # same throughput at every CPU count (float(np.min(...)) where np.minimum was meant).
    if modelled.shape not in ((cpu.size, mem.size), (cpu.size, 1)):
        raise InvalidInputError("memory_model", callable_name(memory_model), f"must give a throughput at every "
                                f"grid point {shape} (or one column, {cpu.size} x 1): it gave shape {modelled.shape}")
    tput = np.array(np.broadcast_to(modelled, (cpu.size, mem.size)))
    if throughputs_out_of_range(tput).any():
        raise InvalidInputError("memory_model", callable_name(memory_model),
                                f"must give a throughput ({THROUGHPUT_RANGE}) at every grid point")
    # The model fills other memory values only: what was measured at full memory stays as measured.
    tput[:, -1] = at_full
    return ProfilingResult(Profile(cpu, mem, tput), meter.log, "optimistic")


def search_cpu_axis(measure_at: Callable[[float], float], cpu: np.ndarray, threshold: float) -> np.ndarray:
    """Throughput on every point of ``cpu``, measuring as few as the module docstring's search needs."""
    values = np.full(cpu.size, np.nan)
    for index in (cpu.size - 1, 0):
        if np.isnan(values[index]):
            values[index] = measure_at(float(cpu[index]))
    while True:
        stretch = _next_stretch(cpu, values, threshold)
        if stretch is None:
            break
        middle = (stretch[0] + stretch[1]) // 2
        values[middle] = measure_at(float(cpu[middle]))
    return _filled(cpu, values)


def _next_stretch(cpu: np.ndarray, values: np.ndarray, threshold: float) -> tuple[int, int] | None:
    """The lowest-CPU stretch between measured neighbours that is neither flat nor pinned down."""
    measured = np.flatnonzero(~np.isnan(values))
    for low, high in itertools.pairwise(measured):
        # The paper's flat rule, where a trend below bounds the skipped points (not on the lowest stretch).
        if high - low < 2 or (low > measured[0] and values[high] < values[low] * (1 + threshold)):
            continue
        inside = np.arange(low + 1, high)
        tolerance = _PINNED * threshold
        lower, upper = _time_bounds(cpu, values, measured, int(low), int(high), inside, confirmed=tolerance)
        if np.any(~np.isfinite(upper)) or np.any(upper > lower * (1 + tolerance)):
            return int(low), int(high)
    return None


def _filled(cpu: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Every unmeasured point from its measured neighbours (the lower bound on time, module docstring)."""
    filled = values.copy()
    measured = np.flatnonzero(~np.isnan(values))
    for low, high in itertools.pairwise(measured):
        if high - low < 2:
            continue
        inside = np.arange(low + 1, high)
        if values[low] == 0:
            # A job that cannot run at the lower end: no trend to follow; the throughput of the lower end
            # (never over-claim).
            filled[inside] = 0.0
            continue
        lower, _ = _time_bounds(cpu, values, measured, int(low), int(high), inside)
        filled[inside] = 1.0 / lower
    return filled


def _time_bounds(
    cpu: np.ndarray,
    values: np.ndarray,
    measured: np.ndarray,
    low: int,
    high: int,
    inside: np.ndarray,
    confirmed: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds on ``1 / W`` at the points ``inside`` the stretch ``(low, high)``.

    The lower bound follows the trend below the stretch (the secant from the lowest measured point where
    the job runs to ``low``); with ``confirmed`` given, only once a measured point between them lies on it
    within that relative tolerance, so that a job not of the assumed form cannot pin a stretch it never saw.
    """
    with np.errstate(divide="ignore"):
        time = 1.0 / values
    x = 1.0 / cpu

    def line(a: int, b: int, at: np.ndarray) -> np.ndarray:
        return time[a] + (time[b] - time[a]) * (x[at] - x[a]) / (x[b] - x[a])

    if not math.isfinite(time[low]):
        return np.full(inside.size, time[high]), np.full(inside.size, np.inf)
    upper = line(low, high, inside)
    # Monotone: fewer CPUs are never faster than the upper end.
    bounds = [np.full(inside.size, time[high])]
    running = measured[np.isfinite(time[measured])]
    first = int(running[0])
    if first < low:
        between = running[(running > first) & (running < low)]
        on_trend = between.size > 0 and bool(
            np.all(np.abs(time[between] - line(first, low, between)) <= confirmed * time[between])
        ) if confirmed is not None else True
        trend = line(first, low, inside)
        # A trend above the chord by more than the tolerance is no job of the assumed (convex) form's: a step the
        # trend did not predict, which must pin nothing (clipped to the chord, it once pinned such a stretch at
        # the chord: 25% over the job's throughput).
        if on_trend and (confirmed is None or bool(np.all(trend <= upper * (1 + confirmed)))):
            bounds.append(trend)
    lower = np.minimum(np.max(bounds, axis=0), upper)
    return lower, upper
