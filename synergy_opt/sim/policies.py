"""Scheduling policies: which waiting and running jobs come first at a round boundary (paper section 2.2).

A policy is a small function of the job state: it takes :class:`JobStates` (one entry per job in the
system) and returns one priority key per job; the lowest key runs first. Ties go to the earlier arrival,
then the earlier trace position. Users pass their own callable of the same shape: it is checked for its
signature up front, sees read-only arrays (sorting ``jobs.position`` in place is an error, not a changed
run), and its keys are real numbers by the toolkit's one rule (``validation.real_array``: no strings,
booleans, ``Decimal`` or masked arrays), finite, one per job. What it raises is reported as its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.validation import Function, call_user, callable_name, real_array


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
    artifact_speedup
        What the paper's artifact divides a job's remaining time by under its TUNE and Synergy-GREEDY
        (``jobs/job.py``, ``remaining_duration(fair=False)``): 1 after a round at the GPU-proportional share,
        else the job's speedup at its best case; 1 under the proportional mechanism (its ``+fair``). Given to
        the ``*-artifact`` policies only (None otherwise: ones).
    artifact_priority
        The artifact's starvation rule (``schedulers/*_synergy_new.py``): True for a job that once waited more
        than 1000 hours since it last ran (or arrived), for good; its LAS, SRTF and FTF take such jobs first.
        Given to the ``*-artifact`` policies only (None otherwise: none).
    artifact_demand_share
        Each job's demand as the artifact's DRF and TETRIS read it (``jobs/job.py``, ``get_dominant_share``,
        ``get_remaining_weighted_duration``): its GPUs, and its CPUs and GB at its best case, each over the
        cluster's total, one row ``(gpu, cpu, mem)`` per job
        (:func:`~synergy_opt.sim.artifact_profiles.artifact_demands`).
        Given to the ``*-artifact`` policies only (None otherwise).
    """

    now_s: float
    position: np.ndarray
    arrival_s: np.ndarray
    duration_s: np.ndarray
    remaining_s: np.ndarray
    attained_gpu_s: np.ndarray
    gpus: np.ndarray
    artifact_speedup: np.ndarray | None = None
    artifact_priority: np.ndarray | None = None
    artifact_demand_share: np.ndarray | None = None

    def __post_init__(self) -> None:
        # Read-only views: a policy cannot change the engine's state (nor the caller's arrays' flags).
        for item in fields(self):
            if item.name != "now_s" and getattr(self, item.name) is not None:
                view = np.asarray(getattr(self, item.name)).view()
                view.flags.writeable = False
                object.__setattr__(self, item.name, view)


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


def _finish_time_ratio(jobs: JobStates, remaining_s: np.ndarray) -> np.ndarray:
    """``(time in the system + remaining time) / duration``."""
    return (jobs.now_s - jobs.arrival_s + remaining_s) / jobs.duration_s


def ftf(jobs: JobStates) -> np.ndarray:
    """Finish-time fairness (Themis): the finish-time ratio at the GPU-proportional share, largest first (the job
    worst off)."""
    return -_finish_time_ratio(jobs, jobs.remaining_s)


def _artifact_remaining(jobs: JobStates) -> np.ndarray:
    """The artifact's remaining time: at the share over :attr:`JobStates.artifact_speedup`."""
    return jobs.remaining_s if jobs.artifact_speedup is None else jobs.remaining_s / jobs.artifact_speedup


def fifo_artifact(jobs: JobStates) -> np.ndarray:
    """The paper's artifact's FIFO (``schedulers/fifo_synergy_new.py``): by arrival, and the engine lets a job
    the mechanism could not place leave its GPUs to the jobs after it in the queue (the artifact's loop tries
    every queued job in turn; only Synergy-Greedy ever fails to place one)."""
    return jobs.arrival_s


def _starved_first(jobs: JobStates, key: np.ndarray) -> np.ndarray:
    """``key`` with the jobs of :attr:`JobStates.artifact_priority` moved ahead of every other, in key order."""
    if jobs.artifact_priority is None or not jobs.artifact_priority.any():
        return key
    return np.where(jobs.artifact_priority, key - 2.0 * (np.abs(key).max() + 1.0), key)


def las_artifact(jobs: JobStates) -> np.ndarray:
    """The paper's artifact's LAS (msr-fiddle/synergy ``schedulers/las_synergy_new.py``): ``las`` with its
    starvation rule (:attr:`JobStates.artifact_priority`)."""
    return _starved_first(jobs, jobs.attained_gpu_s)


def srtf_artifact(jobs: JobStates) -> np.ndarray:
    """The paper's artifact's SRTF (``schedulers/srtf_synergy_new.py``): the remaining time over the speedup it
    expects (:attr:`JobStates.artifact_speedup`; under the proportional mechanism the remaining time at the
    share), starved jobs first."""
    return _starved_first(jobs, _artifact_remaining(jobs))


def ftf_artifact(jobs: JobStates) -> np.ndarray:
    """The paper's artifact's FTF (``schedulers/ftf_synergy_new.py``, ``FTF.schedule``): the finish-time ratio
    of its remaining time (:func:`srtf_artifact`'s) smallest first, so newcomers run before the jobs that waited
    longest, starved jobs first (docs/fidelity.md, "Beyond Figure 9")."""
    return _starved_first(jobs, _finish_time_ratio(jobs, _artifact_remaining(jobs)))


def _demand_share(jobs: JobStates) -> np.ndarray:
    if jobs.artifact_demand_share is None:
        raise InvalidInputError("policy", "drf-artifact/tetris-artifact", "reads JobStates.artifact_demand_share, "
                                "which the simulator gives the artifact's policies only")
    return jobs.artifact_demand_share


def drf_artifact(jobs: JobStates) -> np.ndarray:
    """The paper's artifact's DRF (``schedulers/drf.py``): a job order, not an allocator. Smallest dominant share
    first: the largest of the job's GPUs, CPUs and GB at its best case over the cluster's
    (:attr:`JobStates.artifact_demand_share`), with the starvation rule; the mechanism its suffix names places
    the jobs, refilling as :func:`fifo_artifact` (the artifact's ``DRF`` is Synergy-GREEDY, ``DRF+tune`` TUNE)."""
    return _starved_first(jobs, _demand_share(jobs).max(axis=1))


def tetris_artifact(jobs: JobStates) -> np.ndarray:
    """The paper's artifact's TETRIS (``schedulers/tetris.py``): a job order, smallest first of the sum of the
    job's demand shares (:attr:`JobStates.artifact_demand_share`) times its remaining time over the speedup it
    expects (:func:`srtf_artifact`'s), with the starvation rule; placed and refilled as :func:`drf_artifact`."""
    return _starved_first(jobs, _demand_share(jobs).sum(axis=1) * _artifact_remaining(jobs))


POLICIES: dict[str, Policy] = {"fifo": fifo, "srtf": srtf, "las": las, "ftf": ftf, "fifo-artifact": fifo_artifact,
                               "las-artifact": las_artifact, "srtf-artifact": srtf_artifact,
                               "ftf-artifact": ftf_artifact, "drf-artifact": drf_artifact,
                               "tetris-artifact": tetris_artifact}
#: The policies whose runnable set the mechanism may refill, job by job (:func:`fifo_artifact`): the artifact's
#: FIFO, DRF and TETRIS loops try every queued job in order.
REFILL_POLICIES = ("fifo-artifact", "drf-artifact", "tetris-artifact")
#: The policies that read :attr:`JobStates.artifact_speedup` and ``artifact_priority`` (the engine computes
#: them for these only).
ARTIFACT_POLICIES = ("las-artifact", "srtf-artifact", "ftf-artifact", "drf-artifact", "tetris-artifact")
#: The artifact's starvation rule: a job not run for longer than this gets top priority for good.
ARTIFACT_STARVATION_S = 1000 * 3600.0
_POLICY = Function(1, "policy(jobs: JobStates) -> one key per job")


def resolve_policy(policy: str | Policy) -> tuple[str, Policy]:
    """The policy's name and function, from a name of ``POLICIES`` or a user's callable."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise UnknownNameError("policy", policy, tuple(POLICIES))
        return policy, POLICIES[policy]
    if callable(policy):
        return getattr(policy, "__name__", "custom"), _POLICY("policy", policy)
    raise UnknownNameError("policy", policy, tuple(POLICIES))


def ranking(policy: Policy, jobs: JobStates) -> np.ndarray:
    """Indices into ``jobs`` in priority order: by the policy's key, then arrival, then trace position."""
    given = call_user("policy", policy, jobs)
    count = jobs.position.size
    try:
        keys = real_array("keys", given, ndim=1)
    except InvalidInputError as error:
        raise InvalidInputError("policy", callable_name(policy),
                                f"must return one real number per job ({count} jobs): {error}") from None
    if keys.shape != jobs.position.shape or not np.all(np.isfinite(keys)):
        shown = keys.tolist() if keys.size <= 8 else f"array of shape {keys.shape}"
        raise InvalidInputError("policy", callable_name(policy),
                                f"must return one finite key per job ({count} jobs), returned {shown}")
    return np.lexsort((jobs.position, jobs.arrival_s, keys))
