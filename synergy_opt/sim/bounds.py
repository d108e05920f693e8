"""The simulator's stated bounds: how far in time a run reaches, how many rounds it simulates, and progress.

- **Time.** Every time a run derives is a round boundary ``k * round_s`` plus at most one round
  (plus ``round_start_s``, under a round; with ``round_timing="gavel"``, a ready time plus rounds of at most
  ``round_s`` each, one per simulated round: no further). A job's
  ready time (arrival plus profiling) must be at most ``MAX_READY_ROUNDS`` (2^31) rounds, and a run
  simulates at most ``max_rounds <= MAX_ROUNDS_LIMIT`` (2^31) rounds past it, so every time stays below 2^32
  rounds, where a float still resolves 2^-20 of a round (0.3 ms of a 300-s round); ``round_s`` is at most
  ``MAX_ROUND_S``. A job ready later is refused naming its ``arrival_s`` (or ``profiling_s``): at 1e19 s a
  float's spacing is 2048 s, and the JCT came out 0 with a negative queue time.
- **Rounds.** A run simulates at most ``max_rounds`` rounds (default ``MAX_ROUNDS``; rounds with no job in
  the system are skipped and not counted). Up front, a run whose monitored jobs need more, by a lower bound
  (one job's work at its best speedup over the grid; all their GPU-work at best speedups on the whole
  cluster), is refused with that reason; a run that still reaches the bound stops, its unfinished jobs
  reported (``summary["stopped"] == "max_rounds"``).
- **Progress.** A running job whose remaining work a round leaves unchanged in floating point (a speedup so
  small that its progress is below the float spacing of what is left) would never finish: an error naming
  the mechanism, the job and its speedup.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.validation import Integer, Number

MAX_ROUND_S = 1e9  # seconds (about 30 years), as validation.MAX_TIME_LIMIT
MAX_READY_ROUNDS = 2**31
MAX_ROUNDS_LIMIT = 2**31
# Far above the paper's experiments (Figure 9: about 8,700 rounds; 5,000 jobs at 1 job/h: about 60,000).
MAX_ROUNDS = 200_000
ROUND_S = Number(0, MAX_ROUND_S, low_open=True)
ROUNDS = Integer(1, MAX_ROUNDS_LIMIT)


# What to do when a trace needs more rounds than a run may take (the command line has --round-s only).
MORE_ROUNDS = "use longer rounds (round_s; --round-s) or raise simulate(max_rounds=...)"


def ready_within_horizon(arrival: np.ndarray, profiling: np.ndarray, round_s: float) -> int:
    """How many of the jobs, from the first, are ready within the horizon (``MAX_READY_ROUNDS`` rounds):
    the caller refuses the next one, or cuts the jobs there."""
    horizon = MAX_READY_ROUNDS * round_s
    with np.errstate(over="ignore"):
        ready = arrival + profiling
    late = np.flatnonzero(~(ready <= horizon))
    return int(late[0]) if late.size else int(arrival.size)


def ready_time_error(arrival: float, profiling: float, round_s: float, position: int) -> InvalidInputError:
    """The error for a job ready beyond the horizon, naming the field that puts it there."""
    horizon = MAX_READY_ROUNDS * round_s
    arrival, profiling = float(arrival), float(profiling)  # Python floats overflow to inf without a warning
    field, value = ("arrival_s", arrival) if arrival > horizon else ("profiling_s", profiling)
    return InvalidInputError(
        f"trace.jobs[{position}].{field}", value,
        f"the job would be ready at {arrival + profiling:g} s, beyond the simulator's horizon of 2^31 rounds "
        f"({horizon:g} s at round_s={round_s:g}), where times are no longer resolved to a round: use longer rounds",
    )


def check_rounds_needed(
    duration: np.ndarray, best_speedup: np.ndarray, gpus: np.ndarray, total_gpus: int, round_s: float,
    max_rounds: int, offset: int,
) -> None:
    """Refuse a run whose jobs (those that must finish: the monitored ones, from trace position ``offset``)
    need more than ``max_rounds`` rounds by the lower bounds of the module docstring."""
    if duration.size == 0:
        return
    with np.errstate(over="ignore"):
        alone = duration / (best_speedup * round_s)
        together = float(np.sum(gpus * (duration / best_speedup))) / (total_gpus * round_s)
    worst = int(np.argmax(alone))
    slack = 1 + 1e-9  # the engine finishes a job due within float rounding of a round's end in that round
    if alone[worst] > max_rounds * slack:
        raise InvalidInputError(
            f"trace.jobs[{offset + worst}].duration_s", float(duration[worst]),
            f"needs at least {alone[worst]:.4g} rounds of {round_s:g} s (at its best speedup "
            f"{best_speedup[worst]:.4g}), more than max_rounds={max_rounds}: "
            + MORE_ROUNDS,
        )
    if together > max_rounds * slack:
        raise InvalidInputError(
            "max_rounds", max_rounds,
            f"the monitored jobs need at least {together:.4g} rounds of {round_s:g} s (their GPU-seconds at "
            f"their best speedups over the cluster's {total_gpus} GPUs): "
            + MORE_ROUNDS,
        )


def check_progress(
    before: np.ndarray, after: np.ndarray, done: np.ndarray, rate: np.ndarray, job_id: Callable[[int], str],
    mechanism: str,
) -> None:
    """Raise if a running job that did not finish has as much work left after the round as before
    (``job_id(i)`` names the ``i``-th running job)."""
    stalled = np.flatnonzero(~done & (after >= before))
    if stalled.size:
        at = int(stalled[0])
        raise InvalidInputError(
            "mechanism", mechanism,
            f"runs job {job_id(at)!r} at speedup {rate[at]:.3g}, so slowly that a round's progress is lost to "
            f"rounding against the {before[at]:.6g} s of work it has left: it would never finish",
        )
