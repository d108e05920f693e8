"""Gavel's policies in the simulator: an LP policy's time fractions turned into each round's runnable set by
Gavel's round mechanism (:mod:`synergy_opt.policies`).

On a cluster of one GPU type every job's throughput there is ``1 / duration_s`` (jobs per second at the
GPU-proportional share) and its steps left are ``remaining_s / duration_s``: the policies' LPs are unit-free,
so Gavel's steps and steps per second give the same fractions. When the set of jobs in the system changes
(an arrival or a finish) the policy's LP is solved again and the round mechanism resets (Gavel with its
allocation-reset throttle off); every round the mechanism picks the jobs that run, in its priority order, and
afterwards is told how long each ran. The runnable set is then handed to the mechanism as any policy's is.

Names (:data:`GAVEL_POLICIES`): ``max_min_fairness`` (Gavel's LAS over normalised throughput, weights from a
Gavel trace's priority weights, else 1), ``max_min_fairness_agnostic`` (Gavel's ``max_min_fairness``: every type
alike, the same as ``max_min_fairness`` on one type), ``max_min_fairness_water_filling`` (Gavel's
``max_min_fairness_water_filling_perf`` as its simulator runs it, without entities: every job raised as far as
it can, the least first), ``finish_time_fairness`` (Gavel's definition: the time a job would
have run alone on its isolated share accumulates round by round, as Gavel's does), ``makespan``,
``max_sum_throughput``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synergy_opt.errors import NoSolutionError
from synergy_opt.policies import (
    PolicyProblem,
    PolicyResult,
    solve_finish_time_fairness,
    solve_makespan,
    solve_max_min_fairness,
    solve_max_sum_throughput,
    solve_water_filling,
)
from synergy_opt.policies.rounds import RoundMechanism
from synergy_opt.sim.policies import JobStates
from synergy_opt.sim.trace import Trace

GPU_TYPE = "gpu"
# Gavel's heterogeneity-agnostic policies: every type alike to them, the type order shuffled each round.
AGNOSTIC_POLICIES = ("max_min_fairness_agnostic",)


@dataclass
class PolicyInput:
    """What a policy's LP gets each time the job set changes (one entry per job in the system)."""

    problem: PolicyProblem
    states: JobStates
    isolated_s: np.ndarray


def _max_min(data: PolicyInput) -> PolicyResult:
    return solve_max_min_fairness(data.problem)


def _water_filling(data: PolicyInput) -> PolicyResult:
    return solve_water_filling(data.problem)


def _finish_time(data: PolicyInput) -> PolicyResult:
    s = data.states
    return solve_finish_time_fairness(data.problem, s.remaining_s / s.duration_s, s.now_s - s.arrival_s,
                                      data.isolated_s)


def _makespan(data: PolicyInput) -> PolicyResult:
    # Gavel's point, not the LP's vertex: the vertex runs the jobs so that all finish at the makespan together
    # (msr_seed0_ed69ec on 32 V100s: 111.5 h of average JCT against Gavel's 48.4 h; docs/sim.md).
    return solve_makespan(data.problem, data.states.remaining_s / data.states.duration_s, point="gavel")


def _max_sum(data: PolicyInput) -> PolicyResult:
    return solve_max_sum_throughput(data.problem)


GAVEL_POLICIES: dict[str, Callable[[PolicyInput], PolicyResult]] = {
    "max_min_fairness": _max_min,
    "max_min_fairness_agnostic": _max_min,
    "max_min_fairness_water_filling": _water_filling,
    "finish_time_fairness": _finish_time,
    "makespan": _makespan,
    "max_sum_throughput": _max_sum,
}


# Gavel walks the types fastest first for its heterogeneity-aware policies (scheduler.py).
GAVEL_TYPE_ORDER = ("v100", "p100", "k80")


@dataclass
class GavelSelector:
    """Each round's jobs and their GPU types under one of :data:`GAVEL_POLICIES`.

    ``types`` and ``gpus`` describe the cluster; ``speeds[p, t]`` is trace position ``p``'s throughput at type
    ``t``'s proportional share over its floor (None: one type, every speed 1). ``agnostic`` reads every speed
    as 1 and shuffles the type order each round (Gavel's heterogeneity-agnostic policies); otherwise the types
    are walked in Gavel's order (v100, p100, k80; other types after them in the cluster's order).
    """

    name: str
    gpus: tuple[int, ...]
    round_s: float
    weights: Mapping[int, float] = field(default_factory=dict)  # trace position -> Gavel priority weight
    types: tuple[str, ...] = (GPU_TYPE,)
    speeds: np.ndarray | None = None
    agnostic: bool = False
    seed: int = 0
    # Trace position -> steps per second at the reference type's proportional share (NaN: not known); the
    # engine sets it from the trace it runs, again each time the trace grows (:func:`step_rates`).
    step_rates: np.ndarray | None = None
    rounds: RoundMechanism = field(init=False)
    members: frozenset[int] = field(default=frozenset(), init=False)
    isolated_s: dict[int, float] = field(default_factory=dict, init=False)
    iso_rate: dict[int, float] = field(default_factory=dict, init=False)
    placed: dict[int, int] = field(default_factory=dict, init=False)
    solves: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.solve = GAVEL_POLICIES[self.name]
        known = [name for name in GAVEL_TYPE_ORDER if name in self.types]
        self.order = [self.types.index(name) for name in known]
        self.order += [t for t in range(len(self.types)) if t not in self.order]
        self.rounds = RoundMechanism(tuple(self.types[t] for t in self.order), [self.gpus[t] for t in self.order],
                                     self.round_s, shuffle=self.agnostic, seed=self.seed)

    def _speeds(self, positions: np.ndarray) -> np.ndarray:
        if self.speeds is None or self.agnostic:
            return np.ones((positions.size, len(self.types)))
        return np.asarray(self.speeds[positions])

    def select(self, states: JobStates) -> tuple[np.ndarray, np.ndarray]:
        """The positions that run this round, in the round mechanism's order, and each one's type index."""
        positions = [int(p) for p in states.position]
        if frozenset(positions) != self.members:
            self._reallocate(states, positions)
        scale = dict(zip(map(str, positions), map(int, states.gpus), strict=True))
        usable = (np.asarray(self.speeds[states.position]) > 0) if self.speeds is not None else (
            np.ones((len(positions), len(self.types)), dtype=bool))
        can_run = {str(p): usable[i][self.order] for i, p in enumerate(positions)}
        chosen = self.rounds.schedule(scale, can_run)
        self.placed = {int(job): self.order[t] for job, t in chosen.items()}
        return (np.array(list(self.placed), dtype=np.int64),
                np.array(list(self.placed.values()), dtype=np.int64))

    def _reallocate(self, states: JobStates, positions: list[int]) -> None:
        for gone in self.members - set(positions):
            self.rounds.remove(str(gone))
            self.isolated_s.pop(gone, None)
            self.iso_rate.pop(gone, None)
        for position in positions:
            self.rounds.add(str(position))
            self.isolated_s.setdefault(position, 0.0)
        # Jobs per second on each type: speed there over the run time at the proportional share. Max-sum's LP
        # adds throughputs up, so units matter there: Gavel sums steps per second (jobs per second favoured
        # short jobs: 34.3 h against Gavel's 45.0 h of average JCT on msr_seed0_ed69ec, 3 x 16 GPUs).
        throughputs = self._speeds(states.position) / states.duration_s[:, None]
        if self.name == "max_sum_throughput" and self.step_rates is not None:
            rates = self.step_rates[states.position]
            if np.isfinite(rates).all():
                throughputs = self._speeds(states.position) * rates[:, None]
        problem = PolicyProblem(throughputs, states.gpus, np.array(self.gpus),
                                priority_weights=np.array([self.weights.get(p, 1.0) for p in positions]),
                                types=self.types, job_ids=tuple(map(str, positions)))
        self.iso_rate = dict(zip(positions, problem.isolated_throughputs(), strict=True))
        result = self.solve(PolicyInput(problem, states, np.array([self.isolated_s[p] for p in positions])))
        self.solves += 1
        if result.allocation is None:  # taken as "no job owed anything" before: another schedule, without a word
            raise NoSolutionError(f"{self.name} at {states.now_s:g} s: its LP ended {result.solve.status.value} "
                                  f"({result.solve.message}), with no time fractions to schedule the round by")
        allocation = result.allocation
        self.rounds.reset(states.now_s, {str(p): row[self.order] for p, row in zip(positions, allocation,
                                                                                    strict=True)})
        self.members = frozenset(positions)

    def ran(self, positions: np.ndarray, seconds: np.ndarray, work_s: np.ndarray, durations: np.ndarray) -> None:
        """After the round: ``seconds`` each job held its GPUs, ``work_s`` the work it did (seconds at the
        reference proportional share, of ``durations``)."""
        for position, held, work, duration in zip(positions, seconds, work_s, durations, strict=True):
            job = int(position)
            self.rounds.record(str(job), self.order.index(self.placed.get(job, 0)), float(held))
            rate = self.iso_rate.get(job, 0.0)
            if rate > 0:  # Gavel: steps done over the isolated throughput
                self.isolated_s[job] += float(work / duration) / rate


def step_rates(trace: Trace, cpu_per_gpu: int = 3) -> np.ndarray:
    """Each trace position's steps (iterations) per second at the reference type's proportional share: a Gavel
    job's ``total_steps`` over its run time there, else one over its iteration time (the trace's, else its
    built-in model's); NaN when neither is known."""
    gavel = trace.metadata.get("gavel")
    steps = gavel.get("jobs", {}) if isinstance(gavel, Mapping) else {}
    rates = np.full(len(trace), np.nan)
    for position, job in enumerate(trace.jobs):
        if job.id in steps:
            rates[position] = float(steps[job.id]["total_steps"]) / job.duration_s
        elif (seconds := job.iteration_time(cpu_per_gpu)) is not None:
            rates[position] = 1.0 / seconds
    return rates


def gavel_weights(trace_metadata: Mapping[str, Any], ids: list[str]) -> dict[int, float]:
    """Gavel's priority weights of a trace read from a Gavel file, by trace position (others: none)."""
    gavel = trace_metadata.get("gavel")
    if not isinstance(gavel, Mapping):
        return {}
    jobs = gavel.get("jobs", {})
    return {position: float(jobs[job_id]["priority_weight"]) for position, job_id in enumerate(ids)
            if job_id in jobs and float(jobs[job_id]["priority_weight"]) != 1.0}
