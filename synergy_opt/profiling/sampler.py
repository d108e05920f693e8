"""Modelled jobs: a :class:`JobModel` per job, its parameters varied around the fitted built-in model.

Log-normal noise on a matrix (``profile_noise``) makes jobs differ, but it tilts every flat region, so every
job's best case becomes the grid's top corner. Varying the job's *parameters* instead keeps the structure
real profiles have: a job is still as fast as its slowest stage, so its matrix keeps its plateaus and its
best case stays where its bottleneck moves. Each job draws four independent log-normal factors:

============  ======  ==============================================================
parameter     sigma   what it moves
============  ======  ==============================================================
gpu_s         0.2     the plateau: how much CPU and memory the job can use at all
cpu_s         0.2     where the CPU knee is
dataset_gb    0.1     how much memory the job can use (the MinIO cache it can fill)
item_mb       0.2     how slow a cache miss is
============  ======  ==============================================================

The dataset's spread is small on purpose. The built-in image and speech matrices read 0.1 at 20.83 GB, so
their fitted storage stage takes ten times the iteration time with no cache, and their datasets barely fit at
the proportional 62.5 GB: a dataset 10% larger already makes the proportional share storage-bound. With a
spread of 0.3, many image jobs are, and on single-GPU 128-GPU rounds TUNE's gain over proportional rises from
1.31 to 1.57, the ideal ILP's from 1.38 to 1.67 (medians of 10 seeds, ``benchmarks/bench_profiling.py``).
Pass another ``spread`` to :func:`draw_job_model` to vary it.

The serial fraction, batch, storage bandwidth and process memory stay the model's. A model whose stage
never binds (language models) keeps it at half the time it must stay below, so a factor of 2 is needed
before a drawn job becomes sensitive to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Profile
from synergy_opt.portable import exp
from synergy_opt.profiles import cpu_gpu_ratios, model_info
from synergy_opt.profiling.fit import BUILTIN_MODEL, builtin_job_model
from synergy_opt.profiling.model import JobModel
from synergy_opt.validation import InstanceOf, Integer, Number, OneOf, checked

# (parameter, sigma of its log-normal factor), in the order the factors are drawn.
PARAMETER_SPREAD: tuple[tuple[str, float], ...] = (
    ("gpu_s", 0.2),
    ("cpu_s", 0.2),
    ("dataset_gb", 0.1),
    ("item_mb", 0.2),
)
# The parameters a factor may scale (batch is an integer; a scaled serial fraction could pass 1).
SCALABLE_PARAMETERS = ("gpu_s", "cpu_s", "dataset_gb", "item_mb", "storage_mb_s", "process_mem_gb")
# As generate.MAX_PROFILE_NOISE: a log-normal factor of sigma 5 already spans e^(+-25).
MAX_SIGMA = 5.0
_SIGMA = Number(0, MAX_SIGMA)


def _spread(name: str, value: Any) -> tuple[tuple[str, float], ...]:
    """(parameter, sigma) pairs: a scalable parameter's name and a sigma in [0, MAX_SIGMA]."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(name, value, "must be a sequence of (parameter, sigma) pairs")
    pairs: list[tuple[str, float]] = []
    for index, pair in enumerate(value):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidInputError(f"{name}[{index}]", pair, "must be a (parameter, sigma) pair")
        parameter = OneOf(SCALABLE_PARAMETERS)(f"{name}[{index}][0]", pair[0])
        if any(parameter == known for known, _ in pairs):  # one factor per parameter (a second would replace it)
            raise InvalidInputError(f"{name}[{index}][0]", parameter, "is listed twice: give each parameter once")
        pairs.append((parameter, _SIGMA(f"{name}[{index}][1]", pair[1])))
    return tuple(pairs)


@checked(rng=InstanceOf(np.random.Generator), name=BUILTIN_MODEL, spread=_spread)
def draw_job_model(
    rng: np.random.Generator, name: str, spread: tuple[tuple[str, float], ...] = PARAMETER_SPREAD
) -> JobModel:
    """A job like built-in model ``name``: its fitted model with a log-normal factor on each parameter.

    Parameters
    ----------
    rng
        A ``numpy.random.Generator``; exactly ``len(spread)`` standard normals are drawn from it.
    name
        A built-in model (one of ``model_names()``).
    spread
        ``(parameter, sigma)`` pairs, each parameter one of ``SCALABLE_PARAMETERS`` (default
        ``PARAMETER_SPREAD``).

    Returns
    -------
    JobModel
        The fitted model of ``name`` with each named parameter multiplied by ``exp(sigma * z)``.
    """
    base = builtin_job_model(name)
    normals = rng.standard_normal(len(spread))
    varied = {key: getattr(base, key) * exp(sigma * z).item() for (key, sigma), z in zip(
        spread, normals, strict=True)}
    try:
        return replace(base, **varied)
    except InvalidInputError as error:  # a factor drawn far out took a parameter out of the model's range
        raise InvalidInputError("spread", spread, f"the drawn job leaves the model's range: {error}") from None


@checked(rng=InstanceOf(np.random.Generator), name=BUILTIN_MODEL, cpu_per_gpu=Integer(among=cpu_gpu_ratios()))
def modelled_profile(rng: np.random.Generator, name: str, cpu_per_gpu: int = 3) -> Profile:
    """The matrix of a job drawn by :func:`draw_job_model`, on the grid of the built-in ``name``."""
    grid = model_info(name, cpu_per_gpu).profile
    return draw_job_model(rng, name).profile(grid.cpu_per_gpu, grid.mem_gb_per_gpu)
