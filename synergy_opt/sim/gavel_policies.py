"""Gavel's policies in the simulator: an LP policy's time fractions turned into each round's runnable set by
Gavel's round mechanism (:mod:`synergy_opt.policies`).

On a cluster of one GPU type every job's throughput there is ``1 / duration_s`` (jobs per second at the
GPU-proportional share) and its steps left are ``remaining_s / duration_s``: the policies' LPs are unit-free,
so Gavel's steps and steps per second give the same fractions. When the set of jobs in the system changes
(an arrival or a finish) the policy's LP is solved again and the round mechanism resets (Gavel with its
allocation-reset throttle off); every round the mechanism picks the jobs that run, in its priority order, and
afterwards is told how long each ran. The runnable set is then handed to the mechanism as any policy's is.

Names (:data:`GAVEL_POLICIES`): ``max_min_fairness`` (Gavel's LAS over normalised throughput, weights from a
Gavel trace's priority weights, else 1), ``finish_time_fairness`` (Gavel's definition: the time a job would
have run alone on its isolated share accumulates round by round, as Gavel's does), ``makespan``,
``max_sum_throughput``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synergy_opt.policies import (
    PolicyProblem,
    PolicyResult,
    solve_finish_time_fairness,
    solve_makespan,
    solve_max_min_fairness,
    solve_max_sum_throughput,
)
from synergy_opt.policies.rounds import RoundMechanism
from synergy_opt.sim.policies import JobStates

GPU_TYPE = "gpu"


@dataclass
class PolicyInput:
    """What a policy's LP gets each time the job set changes (one entry per job in the system)."""

    problem: PolicyProblem
    states: JobStates
    isolated_s: np.ndarray


def _max_min(data: PolicyInput) -> PolicyResult:
    return solve_max_min_fairness(data.problem)


def _finish_time(data: PolicyInput) -> PolicyResult:
    s = data.states
    return solve_finish_time_fairness(data.problem, s.remaining_s / s.duration_s, s.now_s - s.arrival_s,
                                      data.isolated_s)


def _makespan(data: PolicyInput) -> PolicyResult:
    return solve_makespan(data.problem, data.states.remaining_s / data.states.duration_s)


def _max_sum(data: PolicyInput) -> PolicyResult:
    return solve_max_sum_throughput(data.problem)


GAVEL_POLICIES: dict[str, Callable[[PolicyInput], PolicyResult]] = {
    "max_min_fairness": _max_min,
    "finish_time_fairness": _finish_time,
    "makespan": _makespan,
    "max_sum_throughput": _max_sum,
}


@dataclass
class GavelSelector:
    """The runnable set of each round under one of :data:`GAVEL_POLICIES` on a one-type cluster of ``gpus``."""

    name: str
    gpus: int
    round_s: float
    weights: Mapping[int, float] = field(default_factory=dict)  # trace position -> Gavel priority weight
    rounds: RoundMechanism = field(init=False)
    members: frozenset[int] = field(default=frozenset(), init=False)
    isolated_s: dict[int, float] = field(default_factory=dict, init=False)
    iso_rate: dict[int, float] = field(default_factory=dict, init=False)
    solves: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.solve = GAVEL_POLICIES[self.name]
        self.rounds = RoundMechanism((GPU_TYPE,), [self.gpus], self.round_s)

    def select(self, states: JobStates) -> np.ndarray:
        """The positions that run this round, in the round mechanism's order."""
        positions = [int(p) for p in states.position]
        if frozenset(positions) != self.members:
            self._reallocate(states, positions)
        scale = dict(zip(map(str, positions), map(int, states.gpus), strict=True))
        can_run = {job: np.ones(1, dtype=bool) for job in scale}
        placed = self.rounds.schedule(scale, can_run)
        return np.array([int(job) for job in placed], dtype=np.int64)

    def _reallocate(self, states: JobStates, positions: list[int]) -> None:
        for gone in self.members - set(positions):
            self.rounds.remove(str(gone))
            self.isolated_s.pop(gone, None)
            self.iso_rate.pop(gone, None)
        for position in positions:
            self.rounds.add(str(position))
            self.isolated_s.setdefault(position, 0.0)
        problem = PolicyProblem((1.0 / states.duration_s)[:, None], states.gpus, np.array([self.gpus]),
                                priority_weights=np.array([self.weights.get(p, 1.0) for p in positions]),
                                types=(GPU_TYPE,), job_ids=tuple(map(str, positions)))
        isolated = problem.isolated_throughputs()
        self.iso_rate = dict(zip(positions, isolated, strict=True))
        data = PolicyInput(problem, states, np.array([self.isolated_s[p] for p in positions]))
        result = self.solve(data)
        self.solves += 1
        allocation = result.allocation if result.allocation is not None else np.zeros((len(positions), 1))
        self.rounds.reset(states.now_s, dict(zip(map(str, positions), allocation, strict=True)))
        self.members = frozenset(positions)

    def ran(self, positions: np.ndarray, seconds: np.ndarray, work_s: np.ndarray, durations: np.ndarray) -> None:
        """After the round: ``seconds`` each job held its GPUs, ``work_s`` the work it did (seconds at the
        proportional share, of ``durations``)."""
        for position, held, work, duration in zip(positions, seconds, work_s, durations, strict=True):
            self.rounds.record(str(int(position)), 0, float(held))
            rate = self.iso_rate.get(int(position), 0.0)
            if rate > 0:  # Gavel: steps done over the isolated throughput
                self.isolated_s[int(position)] += float(work / duration) / rate


def gavel_weights(trace_metadata: Mapping[str, Any], ids: list[str]) -> dict[int, float]:
    """Gavel's priority weights of a trace read from a Gavel file, by trace position (others: none)."""
    gavel = trace_metadata.get("gavel")
    if not isinstance(gavel, Mapping):
        return {}
    jobs = gavel.get("jobs", {})
    return {position: float(jobs[job_id]["priority_weight"]) for position, job_id in enumerate(ids)
            if job_id in jobs and float(jobs[job_id]["priority_weight"]) != 1.0}
