"""What a profiler measured: the log of measured points and their simulated cost, and the checked meter.

A profiler reaches the job only through ``measure(cpus_per_gpu, mem_gb_per_gpu) -> throughput``: for a user,
a function that runs a few iterations of the job under those limits; in tests, a :class:`JobModel`. Each call
is one measured point, which costs ``minutes_per_point`` of (simulated) profiling time (the paper: about a
minute, 50 iterations). :class:`Meter` checks every value ``measure`` returns and keeps the log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.profile import THROUGHPUT_RANGE, Profile, profile_axis, throughputs_out_of_range
from synergy_opt.validation import POSITIVE, Function, InstanceOf, Number, call_user, checked

Measure = Callable[[float, float], float]
MINUTES_PER_POINT = 1.0
# A point costing more than this (about two years) is not a measurement; the bound keeps a profile's total
# cost finite.
MAX_MINUTES_PER_POINT = 1e6
MINUTES = Number(0, MAX_MINUTES_PER_POINT)
MEASURE = Function(2, "measure(cpus_per_gpu, mem_gb_per_gpu) -> throughput")


@dataclass(frozen=True)
class Measurement:
    """One measured point: the limits it ran under, the throughput it gave, and what it cost."""

    cpus_per_gpu: float
    mem_gb_per_gpu: float
    throughput: float
    minutes: float


@dataclass(frozen=True)
class ProfilingResult:
    """A profiled sensitivity matrix and the log of the points measured to make it.

    ``profile`` is in the units ``measure`` returns (see :func:`normalised` for the toolkit's convention).
    """

    profile: Profile
    measurements: tuple[Measurement, ...]
    method: str

    @property
    def points(self) -> int:
        """Number of points measured."""
        return len(self.measurements)

    @property
    def cpu_points(self) -> int:
        """Number of distinct CPU values measured."""
        return len({m.cpus_per_gpu for m in self.measurements})

    @property
    def minutes(self) -> float:
        """Simulated profiling time: the sum of the measured points' costs."""
        return float(sum(m.minutes for m in self.measurements))


# A measurement: a number, then checked as what a profile may hold (THROUGHPUT_RANGE), so that a value out of it
# is named as the measurement, not as the matrix entry it would fill.
MEASURED = Number()


class Meter:
    """Calls ``measure`` for a profiler, checks each value, logs it, and refuses to measure a point twice."""

    def __init__(self, measure: Measure, minutes_per_point: float = MINUTES_PER_POINT) -> None:
        self._measure = MEASURE("measure", measure)
        self._minutes = MINUTES("minutes_per_point", minutes_per_point)
        self._log: list[Measurement] = []
        self._seen: set[tuple[float, float]] = set()

    def __call__(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        point = (float(cpus_per_gpu), float(mem_gb_per_gpu))
        if point in self._seen:
            raise AssertionError(f"profiler bug: {point} measured twice")
        field = f"measure({point[0]:g}, {point[1]:g})"
        value = MEASURED(field, call_user("measure", self._measure, *point))
        if throughputs_out_of_range(value):
            raise InvalidInputError(field, value, f"a measured throughput must be {THROUGHPUT_RANGE}")
        self._seen.add(point)
        self._log.append(Measurement(point[0], point[1], value, self._minutes))
        return value

    @property
    def log(self) -> tuple[Measurement, ...]:
        return tuple(self._log)


def check_axes(cpu_axis: Sequence[float] | np.ndarray, mem_axis: Sequence[float] | np.ndarray) -> tuple[
    np.ndarray, np.ndarray
]:
    """The two axes as arrays: non-empty, finite, positive and strictly increasing (else InvalidInputError)."""
    return profile_axis("cpu_axis", cpu_axis), profile_axis("mem_axis", mem_axis)


@checked(profile=InstanceOf(Profile), cpus_per_gpu=POSITIVE, mem_gb_per_gpu=POSITIVE)
def normalised(profile: Profile, cpus_per_gpu: float = 3.0, mem_gb_per_gpu: float = 62.5) -> Profile:
    """``profile`` divided by its throughput at ``(cpus_per_gpu, mem_gb_per_gpu)`` (the toolkit's 1.0 point)."""
    reference = profile.throughput(cpus_per_gpu, mem_gb_per_gpu)
    if not reference > 0:
        raise InvalidInputError(
            "reference", (cpus_per_gpu, mem_gb_per_gpu), "the profile's throughput there is 0: cannot normalise"
        )
    return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput / reference, name=profile.name)
