"""What profiling a job's matrix costs: the points a profiler measures (a trace's ``TraceJob.profiling_s``,
:func:`synergy_opt.sim.with_profiling_delay`).

A job of a trace is known by its matrix, so profiling it is simulated by profiling that matrix: ``measure``
reads the matrix, and the optimistic profiler's memory model is the matrix's own memory shape (the paper's
MinIO model is exact for a modelled job, within 3% for ResNet18). Only the number of measured points matters
for the delay: ``profiling_s = 60 * minutes_per_point * points``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Profile
from synergy_opt.profiling.exhaustive import profile_exhaustive
from synergy_opt.profiling.measurement import MINUTES, MINUTES_PER_POINT, ProfilingResult
from synergy_opt.profiling.optimistic import DEFAULT_THRESHOLD, THRESHOLD, profile_job
from synergy_opt.validation import InstanceOf, OneOf, checked

Method = Literal["optimistic", "exhaustive"]
METHOD = OneOf(get_args(Method))


@dataclass(frozen=True)
class MatrixMemory:
    """A memory model that knows a matrix's memory shape: the throughput at full memory scaled column-wise."""

    profile: Profile

    def throughput(self, at_full_memory: Any, mem_gb_per_gpu: Any) -> np.ndarray:
        tput = self.profile.tput
        full = tput[:, -1:]
        ratio = np.divide(tput, full, out=np.zeros_like(tput), where=full > 0)
        # The grid's own rows: the profiler asks for the whole grid at once.
        return np.asarray(at_full_memory) * ratio[:, _columns(self.profile, mem_gb_per_gpu)]


def _columns(profile: Profile, mem_gb_per_gpu: Any) -> np.ndarray:
    columns = np.searchsorted(profile.mem_gb_per_gpu, np.ravel(mem_gb_per_gpu))
    if np.any(columns >= profile.mem_gb_per_gpu.size) or not np.allclose(
        profile.mem_gb_per_gpu[np.minimum(columns, profile.mem_gb_per_gpu.size - 1)], np.ravel(mem_gb_per_gpu)
    ):
        raise InvalidInputError("mem_gb_per_gpu", mem_gb_per_gpu, "must be the matrix's own memory axis")
    return columns


@checked(profile=InstanceOf(Profile), method=METHOD, minutes_per_point=MINUTES, threshold=THRESHOLD)
def profile_matrix(
    profile: Profile,
    method: Method = "optimistic",
    *,
    minutes_per_point: float = MINUTES_PER_POINT,
    threshold: float = DEFAULT_THRESHOLD,
) -> ProfilingResult:
    """Profile a job whose true matrix is ``profile`` with the ``method`` profiler, on the matrix's own grid."""
    if method == "exhaustive":
        return profile_exhaustive(
            profile.throughput, profile.cpu_per_gpu, profile.mem_gb_per_gpu, minutes_per_point=minutes_per_point
        )
    return profile_job(
        profile.throughput, profile.cpu_per_gpu, profile.mem_gb_per_gpu, MatrixMemory(profile), threshold,
        minutes_per_point=minutes_per_point,
    )
