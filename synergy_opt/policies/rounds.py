"""Gavel's round mechanism: time fractions per (job, GPU type) into whole-GPU assignments, round by round.

As Gavel's scheduler (``scheduler/scheduler.py``: ``_reset_time_run_so_far``, ``_update_priorities``,
``_schedule_jobs_on_workers_helper``), with its allocation-reset throttle off (every change of the job set
resets):

- **Time received.** Per type, each job's seconds run on it since the last reset, and the type's total; a
  reset (a new allocation) starts every job at half a round on every type (Gavel's ``time_per_iteration / 2``)
  and adds to each job's *deficit* the time it was owed since the last reset (its old fraction times the
  elapsed time) less the time it got.
- **Priority** of job ``j`` on type ``t``: ``x[j, t] / f[j, t]``, ``f`` the job's share of the type's time
  received since the reset; 0 where ``x`` is 0 or the job cannot run on the type; ``x * 1e9`` where the type has
  received no time yet.
- **Schedule.** Types in order (Gavel: fastest first, ``v100, p100, k80``, for heterogeneity-aware policies;
  shuffled each round, seeded, for agnostic ones); each type's jobs by priority, then deficit, then
  fraction, largest first (ties: the order jobs joined; keys that differ only by float noise tie:
  ``TIE_BITS``, ``TIE_SECONDS``); walking that list, a job is placed on the type if it
  is not placed yet, can run there and its GPUs fit what is left of the type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.float_keys import rounded_mantissa
from synergy_opt.policies.problem import whole_counts
from synergy_opt.validation import POSITIVE

# Gavel's priority of a job on a type that has received no time since the reset ("don't use inf").
UNSEEN_PRIORITY = 1e9
# The schedule compares priorities and fractions to this many bits (about 9 significant digits), deficits
# (seconds) to this resolution: the LP gives two jobs of a unique 0.5 each 0.4999999999999999 and
# 0.5000000000000001, which decided the order against the joining order (by the jobs' durations, through the LP's
# arithmetic).
TIE_BITS = 30
TIE_SECONDS = 1e-6


class RoundMechanism:
    """Gavel's per-round job-to-type assignment for a set of jobs that changes over time (see the module).

    Parameters
    ----------
    types, gpus
        The GPU types in scheduling order and their GPU counts.
    round_s
        Round length (Gavel's ``time_per_iteration``).
    shuffle
        Shuffle the type order every round (Gavel does for heterogeneity-agnostic policies).
    seed
        For the shuffle.
    """

    def __init__(self, types: Sequence[str], gpus: Sequence[int], round_s: float, shuffle: bool = False,
                 seed: int = 0) -> None:
        if len(types) != len(gpus) or not types:
            raise InvalidInputError("gpus", gpus, f"must give one GPU count per type ({len(types)})")
        if len(set(types)) != len(types):
            raise InvalidInputError("types", types, "must name distinct types")
        self.types = tuple(types)
        self.gpus = whole_counts("gpus", gpus, len(types), low=0)
        self.round_s = POSITIVE("round_s", round_s)
        self.shuffle = shuffle
        self.rng = np.random.default_rng(seed)
        self.jobs: dict[str, int] = {}  # job -> its place in joining order
        self.received: dict[str, np.ndarray] = {}
        self.deficit: dict[str, np.ndarray] = {}
        self.type_time = np.zeros(len(types))
        self.allocation: dict[str, np.ndarray] = {}
        self.last_reset_s = 0.0
        self.resets = 0

    def add(self, job: str) -> None:
        """A job joins: half a round received on every type, no deficit (Gavel's ``add_job``)."""
        if job in self.jobs:
            return
        self.jobs[job] = len(self.jobs)
        self.received[job] = np.full(len(self.types), self.round_s / 2)
        self.deficit[job] = np.zeros(len(self.types))

    def remove(self, job: str) -> None:
        """A job leaves (finished)."""
        self.jobs.pop(job, None)
        self.received.pop(job, None)
        self.deficit.pop(job, None)
        self.allocation.pop(job, None)

    def reset(self, now_s: float, allocation: Mapping[str, np.ndarray]) -> None:
        """A new allocation: deficits accrue under the old one, every job restarts at half a round per type."""
        elapsed = now_s - self.last_reset_s
        half = self.round_s / 2
        self.type_time = np.zeros(len(self.types))
        for job in self.jobs:
            got = self.received[job] - half
            owed = self.allocation.get(job, np.zeros(len(self.types))) * elapsed
            self.deficit[job] += owed - got
            self.received[job] = np.full(len(self.types), half)
            self.type_time += half
        self.allocation = {job: np.asarray(allocation[job], dtype=float) for job in self.jobs}
        self.last_reset_s = now_s
        self.resets += 1

    def _stacked(self, can_run: Mapping[str, np.ndarray]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The jobs in joining order, and their priorities, deficits and fractions as ``(jobs, types)`` arrays."""
        jobs = list(self.jobs)
        none = np.zeros(len(self.types))
        x = np.array([self.allocation.get(job, none) for job in jobs]).reshape(len(jobs), len(self.types))
        received = np.array([self.received[job] for job in jobs]).reshape(x.shape)
        usable = np.array([np.asarray(can_run[job], dtype=bool) for job in jobs]).reshape(x.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(self.type_time > 0, received / np.where(self.type_time > 0, self.type_time, 1.0), 0.0)
            priority = np.where(fraction > 0, x / np.where(fraction > 0, fraction, 1.0), x * UNSEEN_PRIORITY)
        priority = np.where((x > 0) & usable, priority, 0.0)
        deficit = np.array([self.deficit[job] for job in jobs]).reshape(x.shape)
        return jobs, priority, deficit, x

    def priorities(self, can_run: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each job's priority on each type (see the module)."""
        jobs, priority, _, _ = self._stacked(can_run)
        return dict(zip(jobs, priority, strict=True))

    def schedule(self, scale_factors: Mapping[str, int], can_run: Mapping[str, np.ndarray]) -> dict[str, int]:
        """This round's assignment: job -> index of its type (jobs left out do not run)."""
        jobs, priority, deficit, x = self._stacked(can_run)
        order = np.arange(len(self.types))
        if self.shuffle:
            order = self.rng.permutation(order)
        left = self.gpus.copy()
        placed: dict[str, int] = {}
        joined = np.arange(len(jobs))
        for t in order:
            # Largest (priority, deficit, fraction) first; ties in joining order, as Gavel's stable sort.
            queue = np.lexsort((joined, -rounded_mantissa(x[:, t], TIE_BITS), -np.round(deficit[:, t] / TIE_SECONDS),
                                -rounded_mantissa(priority[:, t], TIE_BITS)))
            for index in queue:
                if left[t] == 0:
                    break
                job = jobs[index]
                if job in placed or not can_run[job][t] or scale_factors[job] > left[t]:
                    continue
                placed[job] = int(t)
                left[t] -= scale_factors[job]
        return placed

    def record(self, job: str, type_index: int, seconds: float) -> None:
        """``job`` ran ``seconds`` on type ``type_index`` this round."""
        if job in self.received:
            self.received[job][type_index] += seconds
            self.type_time[type_index] += seconds
