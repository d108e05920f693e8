"""Scheduling policies: which waiting and running jobs come first at a round boundary (paper section 2.2).

A policy is a small function of the job state: it takes :class:`JobStates` (one entry per job in the
system) and returns one priority key per job; the lowest key runs first. Ties go to the earlier arrival,
then the earlier trace position. Users pass their own callable of the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError


@dataclass(frozen=True)
class JobStates:
    """The jobs in the system at ``now_s``, one entry per job (all arrays of the same length).

    Attributes
    ----------
    position
        Trace position of each job.
    arrival_s, duration_s
        Arrival time and run time alone at the GPU-proportional share.
    remaining_s
        Run time still needed at the GPU-proportional share.
    attained_gpu_s
        GPU-seconds run so far (GPUs x seconds held).
    gpus
        GPU demand.
    """

    now_s: float
    position: np.ndarray
    arrival_s: np.ndarray
    duration_s: np.ndarray
    remaining_s: np.ndarray
    attained_gpu_s: np.ndarray
    gpus: np.ndarray


Policy = Callable[[JobStates], np.ndarray]


def fifo(jobs: JobStates) -> np.ndarray:
    """First in, first out: by arrival."""
    return jobs.arrival_s


def srtf(jobs: JobStates) -> np.ndarray:
    """Shortest remaining time first, remaining time at the GPU-proportional share."""
    return jobs.remaining_s


def las(jobs: JobStates) -> np.ndarray:
    """Least attained service first: GPU-seconds run so far."""
    return jobs.attained_gpu_s


def ftf(jobs: JobStates) -> np.ndarray:
    """Finish-time fairness (Themis): ``(time in the system + remaining time) / duration``, largest first."""
    return -(jobs.now_s - jobs.arrival_s + jobs.remaining_s) / jobs.duration_s


POLICIES: dict[str, Policy] = {"fifo": fifo, "srtf": srtf, "las": las, "ftf": ftf}


def resolve_policy(policy: str | Policy) -> tuple[str, Policy]:
    """The policy's name and function, from a name of ``POLICIES`` or a user's callable."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise UnknownNameError("policy", policy, tuple(POLICIES))
        return policy, POLICIES[policy]
    if callable(policy):
        return getattr(policy, "__name__", "custom"), policy
    raise UnknownNameError("policy", policy, tuple(POLICIES))


def ranking(policy: Policy, jobs: JobStates) -> np.ndarray:
    """Indices into ``jobs`` in priority order: by the policy's key, then arrival, then trace position."""
    try:
        keys = np.asarray(policy(jobs), dtype=float)
    except (TypeError, ValueError) as error:
        raise InvalidInputError("policy", policy, f"must return one number per job ({error})") from None
    if keys.shape != jobs.position.shape or not np.all(np.isfinite(keys)):
        raise InvalidInputError(
            "policy", keys if keys.size <= 8 else f"array of shape {keys.shape}",
            f"must return one finite key per job ({jobs.position.size} jobs)",
        )
    return np.lexsort((jobs.position, jobs.arrival_s, keys))
