"""When the simulator's rounds start (``simulate(round_timing=...)``): on a fixed grid, or as Gavel's simulator
times them.

- ``"grid"`` (the default): rounds start at ``round_start_s + k * round_s``; a stretch with nothing to run
  (no job in the system, or none that can run until the next arrival) is skipped to the first boundary at or
  after the next job's ready time.
- ``"gavel"``: as Gavel's ``Scheduler.simulate`` (stanford-futuredata/gavel, ``scheduler/scheduler.py``):

  1. after such a stretch the next round starts at the next job's ready time itself (Gavel jumps to the
     arrival: ``self._current_timestamp = next_job_arrival_time``);
  2. a round ends when the last of its jobs stops: ``round_s`` after it started, or earlier when every job
     that ran in it finished earlier (Gavel: the round ends at its jobs' latest finish time);
  3. the first round after such a stretch is credited to Gavel's round mechanism with the stretch too: each
     job that ran in it is counted as having run from the end of the last round that ran a job (the run's
     start before the first) to its own end (Gavel measures a job's execution time from
     ``current_round_start_time``, which an idle stretch leaves at the previous round's end). Only the
     round mechanism's time received (its priorities and deficits) reads it; a job's progress and JCT do not.

  What is not reproduced: Gavel runs whole steps, ``int(throughput * round_s)`` a round, so its rounds end a
  fraction of a step early (about 359.9 s of 360) and drift against a 360-s step; here work is continuous.
"""

from __future__ import annotations

import math
from typing import Literal, Protocol, get_args

import numpy as np

from synergy_opt.validation import OneOf

RoundTiming = Literal["grid", "gavel"]
ROUND_TIMING = OneOf(get_args(RoundTiming))
DEFAULT_ROUND_TIMING: RoundTiming = "grid"


class Clock(Protocol):
    """The time of the current round and how the next one is found."""

    @property
    def now(self) -> float:
        """When the current round starts."""
        ...

    def idle_credit(self) -> float:
        """Seconds the current round is credited to the round mechanism beyond its jobs' own (rule 3)."""
        ...

    def round_end(self, held: np.ndarray) -> float:
        """When the current round ends, its running jobs having held their GPUs ``held`` seconds each."""
        ...

    def next_round(self, held: np.ndarray) -> None:
        """Move to the round after the current one (which ran jobs for ``held`` seconds each)."""
        ...

    def skip_to(self, ready: float) -> float | None:
        """Move to the first round at or after ``ready`` (later than the current round's start); returns the
        start of the last round skipped over (None: none is)."""
        ...


class GridClock:
    """Rounds at ``start + k * round_s``."""

    def __init__(self, start: float, round_s: float) -> None:
        self.start, self.round_s = start, round_s
        self.k = 0

    @property
    def now(self) -> float:
        return self.start + self.k * self.round_s

    def idle_credit(self) -> float:
        return 0.0

    def round_end(self, held: np.ndarray) -> float:
        return self.now + self.round_s

    def next_round(self, held: np.ndarray) -> None:
        self.k += 1

    def skip_to(self, ready: float) -> float | None:
        self.k = self._round_of(ready)
        return self.start + (self.k - 1) * self.round_s

    def _round_of(self, ready: float) -> int:
        """The first round after the current one whose boundary is at or after ``ready``, read as :attr:`now`
        reads a boundary (a division can land one round past a ready time on a boundary)."""
        start, round_s, k = self.start, self.round_s, self.k
        later = max(k + 1, math.ceil((ready - start) / round_s))
        while later - 1 > k and start + (later - 1) * round_s >= ready:
            later -= 1
        return later


class GavelClock:
    """Gavel's round timing (the module's rules 1-3)."""

    def __init__(self, start: float, round_s: float) -> None:
        self.round_s = round_s
        self._now = start
        self.last_end = start  # the end of the last round that ran a job (Gavel's current_round_end_time)

    @property
    def now(self) -> float:
        return self._now

    def idle_credit(self) -> float:
        return self._now - self.last_end

    def round_end(self, held: np.ndarray) -> float:
        return self._now + (float(held.max()) if held.size else self.round_s)

    def next_round(self, held: np.ndarray) -> None:
        end = self.round_end(held)
        if held.size:
            self.last_end = end
        self._now = end

    def skip_to(self, ready: float) -> float | None:
        self._now = ready
        return None


def make_clock(timing: RoundTiming, start: float, round_s: float) -> Clock:
    """The clock of ``round_timing`` ``timing`` for rounds of ``round_s`` from ``start``."""
    return GavelClock(start, round_s) if timing == "gavel" else GridClock(start, round_s)
