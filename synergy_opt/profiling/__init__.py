"""Where sensitivity matrices come from: a job performance model and optimistic profiling (paper section 3.1).

- :mod:`~synergy_opt.profiling.model`: :class:`JobModel` (iteration time = slowest of GPU, CPU with Amdahl's
  law, storage reads of MinIO cache misses) and its memory model :class:`MinIOCache`.
- :mod:`~synergy_opt.profiling.fit`: :func:`fit_job_model`, and the fitted models of the ten built-in matrices
  (:func:`builtin_job_model`, :func:`builtin_fit`).
- :mod:`~synergy_opt.profiling.optimistic`: :func:`profile_job`, the paper's CPU search at full memory with
  the memory axis from the memory model; :mod:`~synergy_opt.profiling.exhaustive`: :func:`profile_exhaustive`.
- :mod:`~synergy_opt.profiling.sampler`: :func:`draw_job_model`, jobs varied around a built-in model
  (``generate_round(jobs="modelled")``, ``generate_trace(job_kind="modelled")``).
- :mod:`~synergy_opt.profiling.delay`: :func:`profile_matrix`, what profiling a matrix costs (a trace's
  profiling delays: :func:`synergy_opt.sim.with_profiling_delay`).
"""

from typing import Any

from synergy_opt.moved import moved_name
from synergy_opt.profiling.delay import profile_matrix
from synergy_opt.profiling.exhaustive import profile_exhaustive
from synergy_opt.profiling.fit import FitResult, builtin_fit, builtin_job_model, fit_builtin, fit_job_model
from synergy_opt.profiling.measurement import Measurement, ProfilingResult, normalised
from synergy_opt.profiling.model import JobModel, MinIOCache
from synergy_opt.profiling.optimistic import MemoryModel, profile_job
from synergy_opt.profiling.sampler import draw_job_model, modelled_profile

__all__ = [
    "FitResult",
    "JobModel",
    "Measurement",
    "MemoryModel",
    "MinIOCache",
    "ProfilingResult",
    "builtin_fit",
    "builtin_job_model",
    "draw_job_model",
    "fit_builtin",
    "fit_job_model",
    "modelled_profile",
    "normalised",
    "profile_exhaustive",
    "profile_job",
    "profile_matrix",
]


def __getattr__(name: str) -> Any:
    raise moved_name(__name__, name)
