"""How a round's run turns into progress: the exact accounting and the Synergy artifact's (SPEC 8).

The engine (:mod:`synergy_opt.sim.engine`) asks its accounting two things: each arriving job's arrival time
as the run sees it, and, for the jobs that run in a round, whether each finished, the seconds it made progress
and the seconds it held its GPUs.

- ``"exact"`` (the default): work is seconds at the GPU-proportional share; a job at speedup ``s`` does
  ``s`` seconds of it per second; a job that finishes inside a round records that exact time.
- ``"artifact"``: the accounting of the paper's artifact simulator (msr-fiddle/synergy, ``jobs/job.py``
  ``Job.allocate``, ``events/job_lease_end_event.py``), each rule measured on its recorded Figure 9 run:

  1. a job is credited whole iterations per round, ``floor(round_s / (iter_time / s))``, capped at its total
     (``iter_time`` its iteration time at the proportional share, ``s`` its speedup that round);
  2. a job whose iterations are done is noticed at the round's end, which is its finish time (the rest of
     the round is lost), and it holds its GPUs until then;
  3. arrivals are whole seconds (the artifact's gaps are, and its recorded traces say so): a fractional
     arrival is rounded up, except in an artifact record (its static runs write ``0.0, 0.001, ...``).

  A job's total iterations are its duration over its iteration time (``TraceJob.iter_time_s``, else its
  built-in model's), rounded up: exactly the recorded count for an artifact trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, get_args

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.profiles import DEFAULT_CPU_GPU_RATIO
from synergy_opt.sim.trace import TraceJob
from synergy_opt.validation import OneOf

ProgressMode = Literal["exact", "artifact"]
PROGRESS = OneOf(get_args(ProgressMode))
# A job due within float rounding of the round's end finishes in it, not one round later.
_FINISH_TOLERANCE = 1e-12
# Durations recorded as iterations x iteration time read back as that many iterations despite float rounding.
_ITERATION_SLACK = 1e-9
# Iterations of one job, at most (a duration of 1e300 s is refused by the round limit, not cast past int64).
_MOST_ITERATIONS = 2.0**62


class Accounting(Protocol):
    """What the engine needs of a progress rule; arrays are per job, indexed by trace position."""

    def arrivals(self, jobs: Sequence[TraceJob], first_position: int) -> tuple[np.ndarray, np.ndarray]:
        """Arrival times of newly known jobs (trace positions from ``first_position``) and the work each starts
        with (seconds at the proportional share: what SRTF and FTF rank it by before it runs), as the run uses
        them."""
        ...

    def advance(
        self, running: np.ndarray, rate: np.ndarray, remaining: np.ndarray, span: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One round of the ``running`` jobs at speedups ``rate``, each able to progress for ``span`` seconds
        (the round less any restore delay).

        ``remaining`` is their work left (seconds at the proportional share). Returns ``(done, remaining
        after, held, progressing)``: which finished, their work left, the seconds each held its GPUs past the
        delay (to its finish, or the round's end), and the seconds of those it made progress (its work done
        over ``rate``).
        """
        ...


class ExactProgress:
    """Seconds of progress at the speedup; a finish at the moment the work is done."""

    def arrivals(self, jobs: Sequence[TraceJob], first_position: int) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([job.arrival_s for job in jobs], dtype=float),
                np.array([job.duration_s for job in jobs], dtype=float))

    def advance(
        self, running: np.ndarray, rate: np.ndarray, remaining: np.ndarray, span: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        need = remaining / rate
        done = need <= span * (1 + _FINISH_TOLERANCE)
        held = np.where(done, need, span)
        return done, np.where(done, 0.0, remaining - rate * span), held, held


class ArtifactProgress:
    """The artifact's whole iterations per round, finishes at the round's end, whole-second arrivals."""

    def __init__(self, cpu_per_gpu: int = DEFAULT_CPU_GPU_RATIO, whole_arrivals: bool = True) -> None:
        self.cpu_per_gpu = cpu_per_gpu
        self.whole_arrivals = whole_arrivals
        self.iter_time = np.empty(0)
        self.total = np.empty(0, dtype=np.int64)
        self.done = np.empty(0, dtype=np.int64)

    def arrivals(self, jobs: Sequence[TraceJob], first_position: int) -> tuple[np.ndarray, np.ndarray]:
        """Arrivals rounded up to the second (``whole_arrivals``; an artifact record's are kept: they are the
        artifact's own, whole except in its static runs); the work, as after every round, is the iterations left
        times the iteration time (a duration of 900 s at 7 s an iteration is 129 iterations: 903 s, not 900)."""
        iter_time = np.array([self._iter_time(first_position + k, job) for k, job in enumerate(jobs)], dtype=float)
        duration = np.array([job.duration_s for job in jobs], dtype=float)
        # Capped below int64's range before the cast (the run's round limit refuses such a job, later).
        iterations = np.minimum(np.ceil(duration / iter_time * (1 - _ITERATION_SLACK)), _MOST_ITERATIONS)
        total = np.maximum(iterations, 1).astype(np.int64)
        self.iter_time = np.concatenate([self.iter_time, iter_time])
        self.total = np.concatenate([self.total, total])
        self.done = np.concatenate([self.done, np.zeros(len(jobs), dtype=np.int64)])
        arrival = np.array([job.arrival_s for job in jobs], dtype=float)
        return (np.ceil(arrival) if self.whole_arrivals else arrival), total * iter_time

    def advance(
        self, running: np.ndarray, rate: np.ndarray, remaining: np.ndarray, span: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        iter_time = self.iter_time[running]
        # The artifact's own arithmetic (jobs/job.py): iteration time over the speedup, then whole iterations.
        credited = np.floor(span / (iter_time / rate)).astype(np.int64)
        total = self.total[running]
        stuck = np.flatnonzero((credited == 0) & (self.done[running] < total))
        if stuck.size:  # the engine's stall check would blame rounding: name the cause
            k = int(stuck[0])
            raise InvalidInputError(
                f"trace.jobs[{int(running[k])}].iter_time_s", float(iter_time[k]),
                f"at speedup {rate[k]:.3g} an iteration takes {iter_time[k] / rate[k]:.6g} s, more than the "
                f"{span[k]:.6g} s it ran this round: accounting='artifact' credits whole iterations per round, so "
                "the round made no progress (use longer rounds, less preemption overhead or accounting='exact')",
            )
        done_iterations = np.minimum(self.done[running] + credited, total)
        progressing = (done_iterations - self.done[running]) * (iter_time / rate)
        self.done[running] = done_iterations
        done = done_iterations >= total
        # Even a job done early holds its GPUs to the round's end, when its finish is noticed; it progressed only
        # for its iterations (the rest of the round, and a part iteration, are lost).
        return done, (total - done_iterations) * iter_time, span.copy(), progressing

    def _iter_time(self, position: int, job: TraceJob) -> float:
        seconds = job.iteration_time(self.cpu_per_gpu)
        if seconds is not None:
            return seconds
        raise InvalidInputError(
            f"trace.jobs[{position}].iter_time_s", None,
            "accounting='artifact' counts whole iterations: the job needs an iteration time or a built-in model",
        )


def make_accounting(mode: str, cpu_per_gpu: int = DEFAULT_CPU_GPU_RATIO, whole_arrivals: bool = True) -> Accounting:
    """The accounting named ``mode`` (``"exact"`` or ``"artifact"``; ``whole_arrivals``: the artifact's rounds
    arrivals up to the second)."""
    mode = PROGRESS("accounting", mode)
    return ExactProgress() if mode == "exact" else ArtifactProgress(cpu_per_gpu, whole_arrivals)
