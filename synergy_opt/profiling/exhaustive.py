"""The exhaustive baseline: measure every point of the grid (the paper's 24 x 10 = 240 minutes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from synergy_opt.instance import Profile
from synergy_opt.profiling.measurement import (
    MEASURE,
    MINUTES,
    MINUTES_PER_POINT,
    Measure,
    Meter,
    ProfilingResult,
    check_axes,
)
from synergy_opt.validation import checked


@checked(measure=MEASURE, minutes_per_point=MINUTES)
def profile_exhaustive(
    measure: Measure,
    cpu_axis: Sequence[float] | np.ndarray,
    mem_axis: Sequence[float] | np.ndarray,
    *,
    minutes_per_point: float = MINUTES_PER_POINT,
) -> ProfilingResult:
    """Profile a job by measuring every ``(cpu, mem)`` point of the grid, from the top corner down.

    Parameters
    ----------
    measure
        ``measure(cpus_per_gpu, mem_gb_per_gpu) -> throughput``, called once per grid point.
    cpu_axis, mem_axis
        The grid (per GPU, strictly increasing).
    minutes_per_point
        Simulated cost of one measured point.
    """
    cpu, mem = check_axes(cpu_axis, mem_axis)
    meter = Meter(measure, minutes_per_point)
    tput = np.empty((cpu.size, mem.size))
    for a in reversed(range(cpu.size)):
        for b in reversed(range(mem.size)):
            tput[a, b] = meter(float(cpu[a]), float(mem[b]))
    return ProfilingResult(Profile(cpu, mem, tput), meter.log, "exhaustive")
