"""A job's resource-sensitivity matrix (paper section 3.1, SPEC 1) and the one rule for reading a grid.

Below the rest of the data model (:mod:`synergy_opt.instance`): the profile groups that a round builds from its
jobs' profiles (:mod:`synergy_opt.profile_groups`) need only this.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.validation import Optional, real_array, text

# Relative slack when reading a grid: 20.83 GB * 3 GPUs / 3 GPUs must still read the 20.83 column.
GRID_TOLERANCE = 1e-9
# The largest throughput a matrix may hold: sums over a round's jobs and GPUs, and their squares, stay finite (a
# matrix of 1e308 made every total inf, and the ideal ILP OPTIMAL at inf); far above any unit's throughput, so
# that matrices the package derives (speed ratios up to 1e30, a type-free round's normalisation) pass too.
MAX_THROUGHPUT = 1e100
# The least positive throughput: the solvers' scaling multiplies a model's coefficients by a power of two that
# brings its largest into their band, and below about 1e-308 (subnormal floats) that factor overflows (1e-310
# made every solve raise OverflowError); far below any unit's throughput, as MAX_THROUGHPUT is far above.
MIN_THROUGHPUT = 1e-300
# What a throughput may be, said once for every check of one (a matrix, a measurement, a memory model's grid).
THROUGHPUT_RANGE = f"finite, 0 or in [{MIN_THROUGHPUT:g}, {MAX_THROUGHPUT:g}]"


def throughputs_out_of_range(values: Any) -> np.ndarray:
    """Where ``values`` (floats) are no throughput: not finite, negative, above ``MAX_THROUGHPUT`` or positive
    below ``MIN_THROUGHPUT`` (``THROUGHPUT_RANGE``)."""
    values = np.asarray(values, dtype=float)
    tiny = (values > 0) & (values < MIN_THROUGHPUT)
    return ~np.isfinite(values) | (values < 0) | (values > MAX_THROUGHPUT) | tiny


def grid_index(axis: np.ndarray, value: Any) -> Any:
    """Index of the largest grid value ``<= value`` (within a relative 1e-9), -1 below the grid.

    The one rule for reading a grid: the evaluator, the floors and the model builders all use it.
    """
    return np.searchsorted(axis, np.asarray(value) * (1 + GRID_TOLERANCE), "right") - 1


def share_for_hairs(values: Any, share: float) -> Any:
    """``values`` with each one a hair above ``share`` (within the reading tolerance, so that ``share`` reads it)
    replaced by ``share``: what asks for that point asks the share, which always fits, not the hair more that a
    full server cannot give (the models' column there, the mechanisms' best-case demand)."""
    values = np.asarray(values)
    return np.where((values > share) & (values <= share * (1 + GRID_TOLERANCE)), share, values)


def on_grid(axis: np.ndarray, value: float) -> bool:
    """Whether ``value`` is one of the grid's values (within the same tolerance)."""
    below = int(grid_index(axis, value))
    # Either form of "within the tolerance": a value one float above the other's reach is still refused as
    # a separate axis point by profile_axis, so it must count as on the grid here (Profile.with_point).
    return below >= 0 and (axis[below] >= value * (1 - GRID_TOLERANCE) or axis[below] * (1 + GRID_TOLERANCE) >= value)


_NAME = Optional(text)


def profile_axis(name: str, values: Any) -> np.ndarray:
    """A profile axis: a non-empty, strictly increasing list of finite numbers > 0, read-only."""
    axis = real_array(name, values, ndim=1)
    if axis.size == 0:
        raise InvalidInputError(name, values, "must be a non-empty list of numbers")
    if not np.all(np.isfinite(axis)) or np.any(axis <= 0):
        raise InvalidInputError(name, values, "every value must be finite and > 0")
    if np.any(np.diff(axis) <= 0):
        raise InvalidInputError(name, values, "must be strictly increasing")
    # A value within the reading tolerance below the next reads as the next (grid_index): its own entries could
    # never be read, and a model offering them would claim what no allocation gets.
    close = np.flatnonzero(axis[1:] <= axis[:-1] * (1 + GRID_TOLERANCE))
    if close.size:
        low, high = float(axis[close[0]]), float(axis[close[0] + 1])
        raise InvalidInputError(name, values, f"{low!r} and {high!r} are within the grid's reading tolerance "
                                f"(relative {GRID_TOLERANCE:g}) and read as one point: keep one")
    axis.flags.writeable = False
    return axis


def throughput_matrix(name: str, values: Any) -> np.ndarray:
    """``values`` as a matrix of floats, each a throughput (``THROUGHPUT_RANGE``; else an error naming the first
    entry at fault, ``name[a][b]``)."""
    return _throughputs_in_range(name, real_array(name, values, ndim=2))


def _throughputs_in_range(name: str, tput: np.ndarray) -> np.ndarray:
    """``tput`` (floats), each entry checked as :func:`throughput_matrix` says."""
    bad = np.argwhere(throughputs_out_of_range(tput))
    if bad.size:
        a, b = (int(i) for i in bad[0])
        raise InvalidInputError(f"{name}[{a}][{b}]", float(tput[a, b]),
                                f"throughput must be {THROUGHPUT_RANGE} (a round's totals sum it over jobs and "
                                "GPUs; normalise the matrix, about 1 at the share)")
    return tput


@dataclass(frozen=True, eq=False)
class Profile:
    """Resource-sensitivity matrix ``W`` of one job (paper section 3.1).

    ``tput[a, b]`` is the normalised throughput with ``cpu_per_gpu[a]`` CPUs and ``mem_gb_per_gpu[b]`` GB
    per GPU. Axes are per GPU and strictly increasing.
    """

    cpu_per_gpu: np.ndarray
    mem_gb_per_gpu: np.ndarray
    tput: np.ndarray
    name: str | None = None

    def __post_init__(self) -> None:
        cpu = profile_axis("cpu_per_gpu", self.cpu_per_gpu)
        mem = profile_axis("mem_gb_per_gpu", self.mem_gb_per_gpu)
        tput = real_array("tput", self.tput, ndim=2)
        if tput.shape != (cpu.size, mem.size):
            raise InvalidInputError(
                "tput", self.tput,
                f"shape {tput.shape} does not match the axes ({cpu.size} CPU x {mem.size} memory values)",
            )
        tput = _throughputs_in_range("tput", tput)  # read as numbers above, before its shape was checked
        tput.flags.writeable = False
        object.__setattr__(self, "name", _NAME("name", self.name))
        object.__setattr__(self, "cpu_per_gpu", cpu)
        object.__setattr__(self, "mem_gb_per_gpu", mem)
        object.__setattr__(self, "tput", tput)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Profile):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @cached_property
    def _key(self) -> tuple[bytes, bytes, bytes]:
        return (self.cpu_per_gpu.tobytes(), self.mem_gb_per_gpu.tobytes(), self.tput.tobytes())

    def throughput(self, cpu_per_gpu: Any, mem_gb_per_gpu: Any) -> Any:
        """Throughput at any per-GPU point: the largest grid point ``<=`` in each axis, 0 below the grid."""
        for name, value in (("cpu_per_gpu", cpu_per_gpu), ("mem_gb_per_gpu", mem_gb_per_gpu)):
            read = np.asarray(value)
            # NaN sorts past every grid value: it read the matrix's last row, the peak, without a word.
            if read.dtype.kind not in "iuf" or (read.dtype.kind == "f" and np.isnan(read).any()):
                raise InvalidInputError(name, value, "must be a number (or an array of numbers), not NaN")
        a = grid_index(self.cpu_per_gpu, cpu_per_gpu)
        b = grid_index(self.mem_gb_per_gpu, mem_gb_per_gpu)
        inside = (a >= 0) & (b >= 0)
        value = np.where(inside, self.tput[np.maximum(a, 0), np.maximum(b, 0)], 0.0)
        return float(value) if np.ndim(value) == 0 else value

    def with_point(self, cpu_per_gpu: float, mem_gb_per_gpu: float) -> Profile:
        """The same profile with ``(cpu, mem)`` on the grid (rows/columns inserted by grid lookup)."""
        cpu, mem = self.cpu_per_gpu, self.mem_gb_per_gpu
        if on_grid(cpu, cpu_per_gpu) and on_grid(mem, mem_gb_per_gpu):
            return self
        cpu = cpu if on_grid(cpu, cpu_per_gpu) else np.union1d(cpu, [cpu_per_gpu])
        mem = mem if on_grid(mem, mem_gb_per_gpu) else np.union1d(mem, [mem_gb_per_gpu])
        tput = self.throughput(cpu[:, None], mem[None, :])
        return Profile(cpu, mem, tput, self.name)

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form: ``cpu_per_gpu``, ``mem_gb_per_gpu``, ``tput`` (a round file's inline matrix)."""
        return {
            "cpu_per_gpu": self.cpu_per_gpu.tolist(),
            "mem_gb_per_gpu": self.mem_gb_per_gpu.tolist(),
            "tput": self.tput.tolist(),
        }


def median_positive(values: np.ndarray) -> float:
    """The median of the positive entries of ``values`` (0 when none is): an ordinary throughput's magnitude
    (``band_scale``'s typical value)."""
    positive = values[values > 0]
    return float(np.median(positive)) if positive.size else 0.0
