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
1.29 to 1.54, the ideal ILP's from 1.38 to 1.67 (medians of 10 seeds, ``benchmarks/bench_profiling.py``).
Pass another ``spread`` to :func:`draw_job_model` to vary it.

The serial fraction, batch, storage bandwidth and process memory stay the model's. A model whose stage
never binds (language models) keeps it at half the time it must stay below, so a factor of 2 is needed
before a drawn job becomes sensitive to it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from synergy_opt.instance import Profile
from synergy_opt.profiles import model_info
from synergy_opt.profiling.fit import builtin_job_model
from synergy_opt.profiling.model import JobModel

# (parameter, sigma of its log-normal factor), in the order the factors are drawn.
PARAMETER_SPREAD: tuple[tuple[str, float], ...] = (
    ("gpu_s", 0.2),
    ("cpu_s", 0.2),
    ("dataset_gb", 0.1),
    ("item_mb", 0.2),
)


def draw_job_model(
    rng: np.random.Generator, name: str, spread: tuple[tuple[str, float], ...] = PARAMETER_SPREAD
) -> JobModel:
    """A job like built-in model ``name``: its fitted model with a log-normal factor on each parameter.

    ``spread`` names the parameters and their sigmas (default ``PARAMETER_SPREAD``); exactly ``len(spread)``
    standard normals are drawn from ``rng``.
    """
    base = builtin_job_model(name)
    normals = rng.standard_normal(len(spread))
    varied = {key: getattr(base, key) * float(np.exp(sigma * z)) for (key, sigma), z in zip(
        spread, normals, strict=True)}
    return replace(base, **varied)


def modelled_profile(rng: np.random.Generator, name: str, cpu_per_gpu: int = 3) -> Profile:
    """The matrix of a job drawn by :func:`draw_job_model`, on the grid of the built-in ``name``."""
    grid = model_info(name, cpu_per_gpu).profile
    return draw_job_model(rng, name).profile(grid.cpu_per_gpu, grid.mem_gb_per_gpu)
