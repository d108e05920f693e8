"""The per-job state of a simulation: one numpy array per quantity, indexed by trace position."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from synergy_opt.sim.trace import TraceJob


@dataclass
class JobArrays:
    """What the engine tracks per job; times in seconds, NaN for what has not happened yet.

    Attributes
    ----------
    floor
        Throughput at the GPU-proportional share (speedups are relative to it).
    ready
        Arrival plus profiling time: when the job can first run.
    work, remaining
        Run time needed at the GPU-proportional share as the accounting counts it (the duration, or the
        artifact's whole iterations), and of that the run time still needed.
    attained
        GPU-seconds held so far (LAS's measure).
    run_s, progress_s
        Seconds holding GPUs, and of those the seconds making progress (past any restore overhead).
    """

    floor: np.ndarray
    arrival: np.ndarray
    ready: np.ndarray
    duration: np.ndarray
    gpus: np.ndarray
    work: np.ndarray
    remaining: np.ndarray
    attained: np.ndarray
    run_s: np.ndarray
    progress_s: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    preemptions: np.ndarray

    @classmethod
    def of(cls, jobs: Sequence[TraceJob], floors: np.ndarray, arrivals: np.ndarray | None = None,
           work: np.ndarray | None = None) -> JobArrays:
        """Fresh state for ``jobs`` (nothing run yet); ``arrivals`` and ``work`` replace their arrival times and
        the work left (default: their durations), as the run's accounting reads them."""
        count = len(jobs)
        duration = np.array([job.duration_s for job in jobs], dtype=float)
        arrival = np.array([job.arrival_s for job in jobs], dtype=float) if arrivals is None else arrivals
        work = duration.copy() if work is None else np.asarray(work, dtype=float)
        return cls(
            floor=np.asarray(floors, dtype=float),
            arrival=arrival,
            ready=arrival + np.array([job.profiling_s for job in jobs], dtype=float),
            duration=duration,
            gpus=np.array([job.gpus for job in jobs], dtype=np.int64),
            work=work,
            remaining=work.copy(),
            attained=np.zeros(count),
            run_s=np.zeros(count),
            progress_s=np.zeros(count),
            first_start=np.full(count, np.nan),
            finish=np.full(count, np.nan),
            preemptions=np.zeros(count, dtype=np.int64),
        )

    def extended(self, more: JobArrays) -> JobArrays:
        """These jobs followed by ``more``."""
        return JobArrays(**{f.name: np.concatenate([getattr(self, f.name), getattr(more, f.name)])
                            for f in fields(self)})
