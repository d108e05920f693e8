"""The round-based simulation loop: policy, runnable set, mechanism, progress, JCT (paper sections 3, 5.3).

At each round boundary ``t = round_start_s + k * round_s`` (``round_start_s`` 0 unless given):

1. jobs whose arrival (plus profiling time) is ``<= t`` join the system;
2. the policy orders the jobs in the system; the runnable set is taken in that order, every job whose GPU
   demand still fits the free GPUs (a job that does not fit is passed over for the round, not blocking the
   rest: paper section 4.2; with ``backfill=False`` it blocks them, as in Gavel's FIFO);
3. the mechanism allocates the runnable set, unless the set and its order are those of the previous round,
   whose allocation is then reused (a deterministic mechanism would return the same);
4. each placed job progresses for the round at its speedup, its throughput at the allocated config over its
   throughput at the GPU-proportional share (a split job at its poorest server), by the run's accounting
   (:mod:`synergy_opt.sim.progress`): exactly, a job that finishes inside the round recording that time, or
   as the artifact does, in whole iterations with a finish at the round's end. Its resources free at the
   next boundary. A job that ran in the previous round and does not run now is preempted; when it next
   runs, the first ``preemption_overhead_s`` seconds of that round make no progress (checkpoint restore;
   default 0).

Rounds with no job in the system are skipped to the next arrival (``round_timing="gavel"`` times the rounds as
Gavel's simulator does instead: :mod:`synergy_opt.sim.timing`). The run ends when every monitored job has
finished (a generated trace draws more arrivals as long as needed), at ``until_s``, after ``max_rounds``
simulated rounds, or when jobs remain that no round can run and none will arrive (reported as unfinished;
``summary["stopped"]`` says which). Times and rounds are bounded as :mod:`synergy_opt.sim.bounds` states.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pandas as pd

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.hetero import HeteroCluster
from synergy_opt.instance import Cluster, Job, Profile, RoundInstance, trusted_round
from synergy_opt.mechanisms import MECHANISMS
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands, tolerance_option
from synergy_opt.profile import MAX_THROUGHPUT
from synergy_opt.sim.allocators import RoundPlan, TypeFreeIdeal, UserMechanism, make_allocator
from synergy_opt.sim.artifact_profiles import artifact_demands
from synergy_opt.sim.artifact_trace import is_artifact_record
from synergy_opt.sim.bounds import (
    MAX_ROUNDS,
    ROUND_S,
    ROUNDS,
    check_progress,
    check_rounds_needed,
    ready_time_error,
    ready_within_horizon,
)
from synergy_opt.sim.gavel_policies import (
    AGNOSTIC_POLICIES,
    GAVEL_POLICIES,
    GavelSelector,
    gavel_weights,
    step_rates,
)
from synergy_opt.sim.policies import (
    ARTIFACT_POLICIES,
    ARTIFACT_STARVATION_S,
    POLICIES,
    REFILL_POLICIES,
    JobStates,
    Policy,
    ranking,
    resolve_policy,
)
from synergy_opt.sim.progress import PROGRESS, Accounting, ExactProgress, make_accounting
from synergy_opt.sim.result import JOB_COLUMNS, ROUND_COLUMNS, SimResult, summarise
from synergy_opt.sim.state import JobArrays
from synergy_opt.sim.throughput import ThroughputTable
from synergy_opt.sim.timing import DEFAULT_ROUND_TIMING, ROUND_TIMING, Clock, RoundTiming, make_clock
from synergy_opt.sim.trace import MAX_TRACE_JOBS, Trace, TraceJob, check_extension_fits
from synergy_opt.validation import NON_NEGATIVE, POSITIVE, SEED, InstanceOf, Optional, boolean, checked

# A dynamic trace's first fifth warms the cluster up; the JCT figures are taken over the rest by default.
WARMUP_FRACTION = 0.2
# A generated trace draws arrivals up to this many times the monitored window's end, then arrivals stop: an
# overloaded cluster under a policy that starves old jobs (LAS) would otherwise never finish them.
MAX_ARRIVALS_FACTOR = 10
# The mechanisms standing for the paper's OPT (the artifact's ``+opt`` is the pooled ideal ILP: ``ideal``).
OPT_MECHANISMS = ("ideal", "opt")
# simulate(progress=...): called after each round with (time_s, monitored jobs finished, monitored jobs).
Progress = Callable[[float, int, int], None]


def _cluster(name: str, value: Any) -> Cluster | HeteroCluster:
    if not isinstance(value, (Cluster, HeteroCluster)):
        raise InvalidInputError(name, value, "must be a Cluster or a HeteroCluster")
    return value


@checked(trace=InstanceOf(Trace), cluster=_cluster, round_s=ROUND_S, seed=SEED,
         preemption_overhead_s=NON_NEGATIVE, until_s=Optional(POSITIVE), record_job_rounds=boolean,
         max_rounds=ROUNDS, backfill=boolean, accounting=PROGRESS, round_timing=ROUND_TIMING)
def simulate(
    trace: Trace,
    cluster: Cluster | HeteroCluster,
    policy: str | Policy = "fifo",
    mechanism: str | UserMechanism = "tune",
    round_s: float = 300.0,
    seed: int = 0,
    monitor: tuple[int, int] | None = None,
    *,
    preemption_overhead_s: float = 0.0,
    until_s: float | None = None,
    record_job_rounds: bool = False,
    max_rounds: int = MAX_ROUNDS,
    backfill: bool = True,
    progress: Progress | None = None,
    accounting: str = "exact",
    round_start_s: float = 0.0,
    round_timing: RoundTiming = DEFAULT_ROUND_TIMING,
    **mechanism_options: Any,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` round by round under ``policy`` and ``mechanism``.

    Parameters
    ----------
    trace
        The jobs (:func:`synergy_opt.generate_trace`, :func:`synergy_opt.load_trace`).
    cluster
        Homogeneous servers, or a :class:`~synergy_opt.hetero.HeteroCluster` of several GPU types
        (:mod:`synergy_opt.sim.hetero_run`: progress in the reference type's unit, the policy choosing each
        job's type, the mechanism per type); every job's GPU demand must fit in it (in one type).
    policy
        ``"fifo"``, ``"srtf"``, ``"las"``, ``"ftf"``, the artifact's ``"fifo-artifact"``, ``"las-artifact"``,
        ``"srtf-artifact"``, ``"ftf-artifact"``, ``"drf-artifact"``, ``"tetris-artifact"`` (docs/fidelity.md), or a
        callable of
        :class:`~synergy_opt.sim.JobStates` returning one priority key per job (lowest first); or one of Gavel's LP
        policies
        (``"max_min_fairness"``, ``"finish_time_fairness"``, ``"makespan"``, ``"max_sum_throughput"``:
        :mod:`synergy_opt.sim.gavel_policies`), whose round mechanism picks each round's jobs.
    mechanism
        A name of ``synergy_opt.MECHANISMS``, ``"ideal"`` (the ideal ILP's configs with no placement: an upper
        bound), ``"ideal-type-free"`` (on a heterogeneous cluster, the same with every job free to take any
        type: docs/sim.md; on one type ``"ideal"``) or ``"joint"`` (the realizable per-round optimum,
        ``time_limit`` 10 s a round unless given), or a callable taking the round's :class:`RoundInstance` (jobs
        in policy order) and returning an :class:`Allocation`. Every mechanism reads each job's matrix over its
        floor (:func:`over_floor`: the round's objective is the sum of speedups).
    round_s
        Round length in seconds (paper: 5-minute rounds), at most ``bounds.MAX_ROUND_S``; every job must be
        ready (arrival plus profiling) within 2^31 rounds (:mod:`synergy_opt.sim.bounds`).
    seed
        Passed to the exact solvers; the heuristics are deterministic.
    monitor
        ``(first, last)``: the trace positions ``first <= i < last`` the JCT figures are taken over; the run
        ends when they have all finished. Default: every job of a static trace; for a dynamic trace all but
        the first fifth (``WARMUP_FRACTION``), arrivals continuing past the trace's end when it was generated.
    preemption_overhead_s
        Seconds of no progress when a preempted job resumes (``0 <= . < round_s``).
    until_s
        Stop at this time even if monitored jobs remain (they are reported unfinished).
    record_job_rounds
        Keep one row per running job per round in ``SimResult.job_rounds``.
    max_rounds
        The most rounds simulated (default ``bounds.MAX_ROUNDS``, 200,000; at most 2^31): a run its monitored
        jobs cannot finish in is refused up front, and a run that reaches it stops.
    backfill
        True: a job that does not fit the free GPUs is passed over and the jobs behind it may run; False: the
        runnable set ends at the first job that does not fit (Gavel's FIFO, and many schedulers'); on a
        ``HeteroCluster`` a job with free GPUs only on types it cannot use is passed over either way. Gavel's
        policies pick the runnable set themselves: False is refused with them.
    progress
        Called after every simulated round with ``(time_s, monitored jobs finished, monitored jobs)``: what a
        progress bar shows during a long run (the command line's).
    accounting
        ``"exact"`` (seconds of progress at the speedup, a finish when it happens) or ``"artifact"`` (the
        paper's artifact: whole iterations per round, a finish at the round's end, whole-second arrivals;
        :mod:`synergy_opt.sim.progress`).
    round_start_s
        The first round boundary: rounds start at ``round_start_s + k * round_s`` (``0 <= . < round_s``). The
        artifact's ``--static`` runs start theirs at 1 s (``runner.py``, ``init_event_queue``), so its static
        records replay with 1.0 (docs/fidelity.md).
    round_timing
        ``"grid"``: every round starts on that grid, an idle stretch skipped to the first boundary at or after
        the next arrival. ``"gavel"``: as Gavel's simulator, a round after an idle stretch starts at the
        arrival itself, a round whose jobs all finish early ends at the last finish, and the first round after
        an idle stretch is credited with it in Gavel's round mechanism (:mod:`synergy_opt.sim.timing`).
    **mechanism_options
        Options of the mechanism (``run_mechanism``'s, or ``solve_ideal``'s / ``solve_joint``'s).
    """
    wall = time.perf_counter()
    if progress is not None and not callable(progress):
        raise InvalidInputError("progress", progress, "must be a function (time_s, finished, monitored) or None")
    run = prepare_run(trace, cluster, policy, mechanism, round_s, seed, monitor, preemption_overhead_s,
                      record_job_rounds, max_rounds, backfill, accounting, mechanism_options, round_start_s,
                      round_timing)
    run.progress = progress
    run.loop(until_s, max_rounds)
    settings: dict[str, Any] = {
        "policy": run.policy_name, "mechanism": run.mechanism_name, "gpus": cluster.total_gpus, "round_s": round_s,
        "monitor_first": run.first, "monitor_last": run.last, "preemption_overhead_s": preemption_overhead_s,
        "seed": seed, "backfill": backfill, "accounting": accounting, "round_start_s": round_start_s,
        "round_timing": round_timing,
    }
    if isinstance(cluster, HeteroCluster):
        settings["types"] = cluster.counts_text
    jobs, rounds, job_rounds = run.tables()
    summary = summarise(jobs, rounds, time.perf_counter() - wall, settings)
    summary["arrivals_capped"] = run.arrivals_capped
    summary["stopped"] = run.stopped
    return SimResult(jobs, rounds, summary, job_rounds, settings)


def prepare_run(trace: Trace, cluster: Cluster | HeteroCluster, policy: str | Policy, mechanism: str | UserMechanism,
                round_s: float, seed: int, monitor: tuple[int, int] | None, preemption_overhead_s: float,
                record_job_rounds: bool, max_rounds: int, backfill: bool, accounting: str,
                mechanism_options: dict[str, Any], round_start_s: float = 0.0,
                round_timing: RoundTiming = DEFAULT_ROUND_TIMING) -> _Run:
    """:func:`simulate`'s run before its first round, every up-front check made (the trace against the cluster,
    the policy and mechanism on it, the rounds the monitored jobs need): a sweep's command line calls it on
    every run before it writes its folder. The arguments are :func:`simulate`'s, checked already."""
    if preemption_overhead_s >= round_s:
        raise InvalidInputError("preemption_overhead_s", preemption_overhead_s, f"must be < round_s ({round_s:g})")
    round_start_s = NON_NEGATIVE("round_start_s", round_start_s)
    if round_start_s >= round_s:
        raise InvalidInputError("round_start_s", round_start_s, f"must be < round_s ({round_s:g})")
    selector = None
    if isinstance(policy, str) and policy in GAVEL_POLICIES:
        # An LP policy of Gavel's: its round mechanism picks each round's jobs (sim/gavel_policies.py).
        if not backfill:  # it was ignored without a word
            raise InvalidInputError("backfill", backfill, f"applies to the queue policies only, not {policy} "
                                    "(Gavel's policies pick each round's jobs by their own round mechanism)")
        weights = gavel_weights(trace.metadata, [job.id for job in trace.jobs])
        if isinstance(cluster, HeteroCluster):
            selector = GavelSelector(policy, tuple(t.total_gpus for t in cluster.types), round_s, weights,
                                     cluster.names, agnostic=policy in AGNOSTIC_POLICIES, seed=seed)
        else:
            selector = GavelSelector(policy, (cluster.total_gpus,), round_s, weights)
        policy_name, policy_fn = policy, POLICIES["fifo"]
    elif not (callable(policy) or (isinstance(policy, str) and policy in POLICIES)):  # named among them all
        raise UnknownNameError("policy", policy, (*POLICIES, *GAVEL_POLICIES))
    else:
        policy_name, policy_fn = resolve_policy(policy)
    # The artifact's policies by name or passed in as functions.
    artifact_keys = any(policy_fn is POLICIES[name] for name in ARTIFACT_POLICIES)
    refill = any(policy_fn is POLICIES[name] for name in REFILL_POLICIES)
    if (artifact_keys or refill) and isinstance(cluster, HeteroCluster):
        raise InvalidInputError("policy", policy_name, "the artifact's policies run on one GPU type (a Cluster)")
    mechanism_name, allocate = make_allocator(mechanism, mechanism_options, seed)
    if isinstance(allocate, TypeFreeIdeal) and not isinstance(cluster, HeteroCluster):
        allocate = allocate.on_one_type()  # no type to choose: the same bound as ideal's
    first, last = _monitor_window(trace, monitor)
    if last > len(trace):
        trace = trace.extend(last)
    if not trace.jobs:  # its figures would all be NaN (the command line refuses it too)
        raise InvalidInputError("trace", "0 jobs", "has no job to simulate")
    # An artifact record's arrivals are the artifact's own (a static run's 0.001 s apart): kept as written.
    rule = make_accounting(accounting, cpu_ratio(trace), whole_arrivals=not is_artifact_record(trace))
    _warn_of_another_ratio(trace, cluster)
    kind = RUNS[type(cluster)]
    run = kind(trace, cluster, policy_fn, allocate, round_s, preemption_overhead_s,  # type: ignore[arg-type]
               (first, last), record_job_rounds, backfill, selector, rule)
    run.mechanism_name = mechanism_name
    run.round_start = round_start_s
    run.round_timing = cast(RoundTiming, ROUND_TIMING("round_timing", round_timing))
    run.artifact_keys, run.refill = artifact_keys, refill
    # The artifact's keys read the speedup at the best case the mechanism uses (``threshold``: its earlier name).
    run.best_case_tolerance = tolerance_option(mechanism_options)
    # Else a drawn job that could never run is found hours into the run.
    check_extension_fits(trace.largest_drawn_gpus, run.max_job_gpus, "cluster", f"{run.max_job_gpus} GPUs")
    run.check_rounds_needed(max_rounds)
    run.policy_name = policy_name
    return run


def over_floor(profile: Profile, floor: float) -> Profile:
    """``profile`` in units of the job's floor (its throughput at the proportional share, or at the reference
    type's on a heterogeneous cluster), the unit progress is counted in: the matrix a round's mechanism reads,
    so that its objective is the sum of speedups whatever unit a job's matrix was given in (a matrix already
    in that unit is returned as it is)."""
    if floor == 1.0:
        return profile
    return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput / floor, profile.name)


class CpuRatioWarning(UserWarning):
    """A trace made for one CPU:GPU ratio runs on a cluster of another (:func:`simulate` warns; a sweep, whose
    setting names its ratio, does not)."""


def _warn_of_another_ratio(trace: Trace, cluster: Cluster | HeteroCluster) -> None:
    """Warn when a trace made for servers of one CPU:GPU ratio (its metadata's ``cpu_per_gpu``: its jobs carry
    that ratio's built-in profiles) runs on a cluster of another: its floors are read off the other ratio's
    matrices, and its JCTs belong to neither setting (the command line reads such a trace at the cluster's
    ratio). Not an error: running one ratio's jobs on other servers may be meant."""
    recorded = trace.metadata.get("cpu_per_gpu")
    if not isinstance(cluster, Cluster) or not isinstance(recorded, int) or isinstance(recorded, bool):
        return
    if abs(cluster.cpu_per_gpu - recorded) > 1e-9 * recorded:
        warnings.warn(f"trace.metadata.cpu_per_gpu={recorded}: the trace's jobs carry the built-in profiles of "
                      f"servers with {recorded} CPUs per GPU, and the cluster has {cluster.cpu_per_gpu:g} (make or "
                      f"read the trace at the cluster's ratio: generate_trace(cpu_per_gpu=...), load_trace(..., "
                      "cpu_per_gpu=...))", CpuRatioWarning, stacklevel=5)


def cpu_ratio(trace: Trace) -> int:
    """The CPU:GPU ratio whose built-in profiles the trace's jobs carry (3 unless its metadata says)."""
    ratio = trace.metadata.get("cpu_per_gpu", 3)
    return ratio if isinstance(ratio, int) else 3


def _monitor_window(trace: Trace, monitor: tuple[int, int] | None) -> tuple[int, int]:
    if monitor is None:
        if trace.static:
            return 0, len(trace)
        return int(len(trace) * WARMUP_FRACTION), len(trace)
    ok = (
        isinstance(monitor, (tuple, list)) and len(monitor) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in monitor)
    )
    if not ok or not 0 <= monitor[0] < monitor[1] <= MAX_TRACE_JOBS:
        raise InvalidInputError(
            "monitor", monitor, f"must be (first, last) trace positions with 0 <= first < last <= {MAX_TRACE_JOBS}"
        )
    first, last = int(monitor[0]), int(monitor[1])
    if last > len(trace) and not trace.extendable:
        raise InvalidInputError("monitor", monitor, f"the trace has {len(trace)} jobs and cannot draw more")
    return first, last


def _skip_target(ready: float, until_s: float | None) -> float:
    """Where an idle stretch skips to: the next ready time, or ``until_s`` when that comes first (the run stops
    at the first boundary at or after ``until_s``; skipping past it listed jobs arriving later as arrived)."""
    return ready if until_s is None else min(ready, until_s)


def _fill(order: np.ndarray, gpus: np.ndarray, total: int, backfill: bool = True) -> np.ndarray:
    """The jobs of ``order`` that fit, taken in order, passing over any that no longer fits (``backfill``) or
    stopping at the first (not)."""
    demand = np.cumsum(gpus[order])
    prefix = int(np.searchsorted(demand, total, side="right"))
    free = total - (int(demand[prefix - 1]) if prefix else 0)
    if prefix == order.size or free == 0 or not backfill:
        return order[:prefix]
    chosen = [order[:prefix]]
    rest = order[prefix:]
    extra = []
    for position in rest[gpus[rest] <= free]:
        need = gpus[position]
        if need <= free:
            extra.append(position)
            free -= need
            if free == 0:
                break
    chosen.append(np.array(extra, dtype=order.dtype))
    return np.concatenate(chosen)


class _Run:
    """The state of one simulation: per-job arrays indexed by trace position, grown when the trace extends."""

    def __init__(
        self, trace: Trace, cluster: Cluster, policy: Policy, allocate: Callable[[RoundInstance], RoundPlan],
        round_s: float, overhead: float, window: tuple[int, int], record_job_rounds: bool, backfill: bool = True,
        selector: GavelSelector | None = None, accounting: Accounting | None = None,
    ) -> None:
        self.cluster = cluster
        self.accounting = ExactProgress() if accounting is None else accounting
        self.policy = policy
        self.allocate = allocate
        self.round_s = round_s
        self.overhead = overhead
        self.first, self.last = window
        self.record = record_job_rounds
        self.backfill = backfill
        self.selector = selector
        self.capacity = self._capacity()
        self.rows: list[tuple[Any, ...]] = []
        self.job_rows: list[tuple[np.ndarray, ...]] = []
        self.trace = trace
        self.size = 0
        self.jobs: list[Job | None] = []
        self.state = JobArrays.of((), np.empty(0))
        self.admitted = 0
        self.ready_order = np.empty(0, dtype=np.int64)
        self.max_jobs = max(len(trace), min(MAX_ARRIVALS_FACTOR * self.last, MAX_TRACE_JOBS))
        self.arrivals_capped = False
        self.mechanism_name = "mechanism"
        self.policy_name = "policy"
        self.round_start = 0.0  # the first round boundary: rounds at round_start + k * round_s
        self.round_timing: RoundTiming = DEFAULT_ROUND_TIMING  # when rounds start (sim/timing.py)
        self.artifact_keys = False  # the policy reads JobStates.artifact_speedup
        # position -> speedup at its best case and demand shares (artifact keys)
        self.best_case: dict[int, tuple[float, np.ndarray]] = {}
        self.best_case_tolerance = DEFAULT_TOLERANCE  # the mechanism's, for those best cases
        self.at_share = np.empty(0, dtype=np.int64)  # the positions that ran the last round at the share
        self.last_run_end: dict[int, float] = {}  # position -> end of the last round it ran (artifact keys)
        self.starved: set[int] = set()  # positions past the artifact's starvation rule, for good
        self.refill = False  # a job the mechanism cannot place leaves its GPUs to the jobs after it
        self.refilled: tuple[np.ndarray, np.ndarray] | None = None  # the last (queue order, refilled set)
        self.stopped = "done"
        self.progress: Progress | None = None
        self._grow(trace)

    def check_rounds_needed(self, max_rounds: int) -> None:
        """Refuse up front a run whose monitored jobs need more than ``max_rounds`` rounds (sim/bounds.py)."""
        window = np.arange(self.first, min(self.last, self.size))
        best = self._best_throughputs(window) / self.state.floor[window]
        check_rounds_needed(self.state.duration[window], best, self.state.gpus[window], self.cluster.total_gpus,
                            self.round_s, max_rounds, self.first)

    def _floor_matrix(self, job: TraceJob) -> str:
        """Which of the job's matrices its floor is read from (for a message)."""
        return "profile"

    def _best_throughputs(self, positions: np.ndarray) -> np.ndarray:
        """Each job's most throughput anywhere (its matrix's peak), in its floor's unit."""
        return np.array([self.trace.jobs[int(p)].profile.tput.max() for p in positions])

    def _grow(self, trace: Trace, extension: bool = False) -> None:
        """Take the (longer) trace's jobs: the first ``self.size`` are those already simulated. Jobs ready
        beyond the horizon are refused, or, drawn by an ``extension``, cut off (arrivals stop there)."""
        old = self.size
        new_jobs = trace.jobs[old:]
        arrival = np.array([job.arrival_s for job in new_jobs], dtype=float)
        profiling = np.array([job.profiling_s for job in new_jobs], dtype=float)
        within = ready_within_horizon(arrival, profiling, self.round_s)
        if within < len(new_jobs):
            if not extension:
                raise ready_time_error(arrival[within], profiling[within], self.round_s, old + within)
            trace = Trace(trace.jobs[: old + within], trace.metadata)
            new_jobs = new_jobs[:within]
            self.max_jobs = len(trace)
        for offset, job in enumerate(new_jobs):
            if job.gpus > self.max_job_gpus:
                raise InvalidInputError(
                    f"trace.jobs[{old + offset}].gpus", job.gpus,
                    f"job {job.id!r} asks for more than {self.max_job_gpus_text}: it could never run",
                )
        self.trace = trace
        self.size = len(trace)
        if self.selector is not None:  # every job's, the drawn ones too
            self.selector.step_rates = step_rates(trace, cpu_ratio(trace))
        floors, (c_p, m_p) = self._floors(trace, old)
        zero = np.flatnonzero(floors <= 0)
        if zero.size:
            job = new_jobs[int(zero[0])]
            raise InvalidInputError(
                f"trace.jobs[{old + int(zero[0])}]", job.id,  # by its id: its matrix may be unnamed
                f"its {self._floor_matrix(job)} gives throughput 0 at the GPU-proportional share ({c_p:g} CPUs, "
                f"{m_p:g} GB per GPU): its duration there, and so its speedup, is undefined",
            )
        with np.errstate(over="ignore"):  # a floor of 1e-320 under a peak of 1: the speedup overflows
            speedup = self._best_throughputs(np.arange(old, self.size)) / floors
        # Its matrix over its floor is what the mechanisms read (over_floor): a matrix, at most MAX_THROUGHPUT.
        endless = np.flatnonzero(~(speedup <= MAX_THROUGHPUT))
        if endless.size:
            job = new_jobs[int(endless[0])]
            raise InvalidInputError(
                f"trace.jobs[{old + int(endless[0])}]", job.id,
                f"its {self._floor_matrix(job)} peaks more than {MAX_THROUGHPUT:g} times above its throughput at "
                f"the GPU-proportional share ({c_p:g} CPUs, {m_p:g} GB per GPU): its speedup is out of range",
            )
        fresh = JobArrays.of(new_jobs, floors, *self.accounting.arrivals(new_jobs, old))
        self.state = self.state.extended(fresh)
        self.jobs.extend([None] * len(new_jobs))
        # Admission follows ready time; jobs already admitted keep their place at the front.
        pending = np.arange(old, self.size)
        pending = pending[np.argsort(self.state.ready[pending], kind="stable")]
        self.ready_order = np.concatenate([self.ready_order[: self.admitted], pending])

    def _capacity(self) -> np.ndarray:
        """The cluster's GPUs, CPUs and GB: what the rounds' use percentages are of."""
        return np.array([self.cluster.total_gpus, self.cluster.total_cpus, self.cluster.total_mem_gb], dtype=float)

    def _round_columns(self) -> tuple[str, ...]:
        return ROUND_COLUMNS

    @property
    def max_job_gpus(self) -> int:
        """The most GPUs a job may ask for."""
        return int(self.cluster.total_gpus)

    @property
    def max_job_gpus_text(self) -> str:
        """Where :attr:`max_job_gpus` comes from, for messages."""
        return f"the cluster's {self.max_job_gpus} GPUs"

    def _floors(self, trace: Trace, old: int) -> tuple[np.ndarray, tuple[float, float]]:
        """The throughput at the GPU-proportional share of jobs ``old..`` (the unit of their progress), and
        that share (CPUs, GB per GPU)."""
        self.table = ThroughputTable([job.profile for job in trace.jobs])
        c_p, m_p = self.cluster.cpu_per_gpu, self.cluster.mem_gb_per_gpu
        return self.table.at(np.arange(old, len(trace)), c_p, m_p), (c_p, m_p)

    def _select(self, active: np.ndarray, states: JobStates) -> tuple[np.ndarray, np.ndarray]:
        """This round's runnable positions in order, and what identifies the round's choice (the same key as
        the previous round's: its allocation is reused)."""
        if self.selector is None:
            order = active[ranking(self.policy, states)]
            runnable = _fill(order, self.state.gpus, self.cluster.total_gpus, self.backfill)
            if self.refill:
                runnable = self._refill(order, runnable)
        else:
            runnable = self.selector.select(states)[0]
        return runnable, runnable

    def _refill(self, order: np.ndarray, runnable: np.ndarray) -> np.ndarray:
        """The runnable set as the artifact's FIFO finds it: every queued job tried in ``order``, each taking
        its GPUs if enough are free and the mechanism places it. Only a mechanism that may leave a job out
        (greedy) changes the GPU-count fill: it runs once on the whole queue (a round that may ask for more GPUs
        than the cluster has: greedy leaves out whatever does not fit, in order, as the artifact's loop does),
        and the jobs it placed are the round's."""
        mechanism = MECHANISMS.get(self.mechanism_name)
        if mechanism is None or mechanism.places_every_job:
            return runnable
        if self.refilled is not None and np.array_equal(self.refilled[0], order):
            return self.refilled[1]  # the same queue in the same order as last round: the same outcome
        queue = trusted_round(self.cluster, tuple(self._job(int(p)) for p in order), {})
        plan = self.allocate(queue)
        placed = set(plan.allocation.jobs) if plan.allocation is not None else set()
        chosen = order[[job.id in placed for job in queue.jobs]]
        self.refilled = (order, chosen)
        return chosen

    def _allocate(self, runnable: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        """Each runnable job's speedup, the resources in use (GPUs, CPUs, GB), whether the fallback ran, and
        whether the mechanism was called (a heterogeneous run may take a type's round from an earlier one)."""
        plan = self.allocate(RoundInstance(self.cluster, tuple(self._job(int(p)) for p in runnable)))
        speedup, use = self._score(runnable, plan)
        return speedup, use, plan.fallback, True

    def _artifact_keys(self, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:class:`JobStates`' ``artifact_speedup``, ``artifact_priority`` and ``artifact_demand_share`` of the
        active jobs. The speedup is 1 under the proportional mechanism and after a round at the share, else the
        speedup at the job's best case (the artifact resets every job's speedup to that after sorting, and its
        TUNE sets it to 1 when it gives the job the share; its OPT, ``allocate_round``, never does: under
        ``ideal`` and ``opt`` it stays the best case)."""
        missing = [p for p in active.tolist() if p not in self.best_case]
        if missing:
            # Trusted: the jobs arrived together may ask for more GPUs than the cluster has (each fits it).
            queue = trusted_round(self.cluster, tuple(self._job(p) for p in missing), {})
            cpu, mem = best_case_demands(queue, self.best_case_tolerance)
            at = np.array(missing, dtype=np.int64)
            speedup = self.table.at(at, cpu, mem) / self.state.floor[at]
            shares = artifact_demands(queue, cpu, mem)
            self.best_case.update(zip(missing, zip(speedup.tolist(), shares, strict=True), strict=True))
        cached = [self.best_case[p] for p in active.tolist()]
        best = np.array([speed for speed, _ in cached])
        shares = np.array([share for _, share in cached]).reshape(active.size, 3)
        if self.mechanism_name == "proportional":
            speedup = np.ones(active.size)
        elif self.mechanism_name in OPT_MECHANISMS:  # the artifact's OPT never sets a speedup to 1
            speedup = best
        else:
            speedup = np.where(np.isin(active, self.at_share), 1.0, best)
        return speedup, np.isin(active, list(self.starved)), shares

    def _mark_starved(self, now: float, active: np.ndarray) -> None:
        """The artifact's starvation rule: a job whose last run ended (or, never run, which arrived) more than
        ``ARTIFACT_STARVATION_S`` ago is starved for good."""
        for position in active.tolist():
            since = now - self.last_run_end.get(position, float(self.state.arrival[position]))
            if since > ARTIFACT_STARVATION_S:
                self.starved.add(position)

    def _job(self, position: int) -> Job:
        """The job at ``position`` as the mechanisms see it: its matrix over its floor (:func:`over_floor`)."""
        job = self.jobs[position]
        if job is None:
            spec = self.trace.jobs[position]
            job = Job(spec.id, spec.gpus, over_floor(spec.profile, float(self.state.floor[position])),
                      model=spec.model)
            self.jobs[position] = job
        return job

    def loop(self, until_s: float | None, max_rounds: int = MAX_ROUNDS) -> None:
        clock: Clock = make_clock(self.round_timing, self.round_start, self.round_s)
        active = np.empty(0, dtype=np.int64)
        ran_last = np.empty(0, dtype=np.int64)
        previous: np.ndarray | None = None
        fallback = False  # whether the allocation in force came from the fallback
        speedup = use = np.empty(0)
        monitored_left = self.last - self.first
        while monitored_left > 0:
            now = clock.now
            if until_s is not None and now >= until_s:
                self.stopped = "until_s"
                break
            if len(self.rows) >= max_rounds:
                self.stopped = "max_rounds"
                break
            if self.admitted == self.size and self.trace.extendable:
                if self.size < self.max_jobs:
                    self._grow(self.trace.extend(min(2 * self.size, self.max_jobs)), extension=True)
                else:
                    self.arrivals_capped = True
            ready_sorted = self.state.ready[self.ready_order]
            stop = int(np.searchsorted(ready_sorted, now, side="right"))
            if stop > self.admitted:
                active = np.concatenate([active, self.ready_order[self.admitted : stop]])
                self.admitted = stop
            if active.size == 0:
                if self.admitted == self.size:
                    self.stopped = "stuck"  # monitored jobs remain that will never arrive
                    break
                clock.skip_to(_skip_target(float(ready_sorted[self.admitted]), until_s))
                continue
            state = self.state
            artifact = self._artifact_keys(active) if self.artifact_keys else (None, None, None)
            states = JobStates(now, active, state.arrival[active], state.duration[active], state.remaining[active],
                               state.attained[active], state.gpus[active], *artifact)
            runnable, key = self._select(active, states)
            if self.artifact_keys:  # as the artifact, after its sort: it counts from the next round on
                self._mark_starved(now, active)
            changed = previous is None or not np.array_equal(key, previous)
            solved, seconds = False, 0.0
            if changed:
                started = time.perf_counter()
                speedup, use, fallback, solved = self._allocate(runnable)
                seconds = time.perf_counter() - started
                previous = key
            running = runnable[speedup > 0]
            rate = speedup[speedup > 0]
            preempted = np.setdiff1d(ran_last, running, assume_unique=True)
            self.state.preemptions[preempted] += 1
            held, left = self.state.run_s[running], self.state.remaining[running]
            finished, round_held = self._progress(now, running, rate, ran_last)
            if self.selector is not None:
                # Gavel's round mechanism may be credited an idle stretch before the round too (sim/timing.py).
                ran_s = self.state.run_s[running] - held + clock.idle_credit()
                self.selector.ran(running, ran_s, left - self.state.remaining[running], self.state.duration[running])
            ran_last = np.setdiff1d(running, finished, assume_unique=True)
            if self.artifact_keys:
                self.at_share = running[rate <= 1.0 + 1e-9]
                self.last_run_end.update(dict.fromkeys(running.tolist(), clock.round_end(round_held)))
            self.rows.append((now, active.size, runnable.size, running.size, *(100 * use / self.capacity),
                              seconds, solved, fallback))
            if finished.size:
                monitored_left -= int(np.count_nonzero((finished >= self.first) & (finished < self.last)))
                active = np.setdiff1d(active, finished, assume_unique=True)
            if self.progress is not None:
                self.progress(now, self.last - self.first - monitored_left, self.last - self.first)
            if running.size == 0 and not changed and self.admitted == self.size and not self._can_extend:
                self.stopped = "stuck"  # the same jobs, unrunnable, and nothing new will arrive
                break
            if running.size == 0 and self.admitted < self.size:
                # Nothing can progress until the next arrival changes the runnable set.
                skipped = clock.skip_to(_skip_target(float(self.state.ready[self.ready_order[self.admitted]]), until_s))
                if self.artifact_keys and skipped is not None:
                    # the rounds skipped would have marked starved jobs (marks only add)
                    self._mark_starved(skipped, active)
            else:
                clock.next_round(round_held)
        self.end_s = clock.now

    @property
    def _can_extend(self) -> bool:
        return self.trace.extendable and self.size < self.max_jobs

    def _score(self, runnable: np.ndarray, plan: RoundPlan, table: ThroughputTable | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Each runnable job's speedup over its floor, and the resources in use (GPUs, CPUs, GB), its
        throughput read from ``table`` (default the run's)."""
        table = self.table if table is None else table
        gpus = self.state.gpus[runnable]
        if plan.allocation is not None:
            ids = [self.trace.jobs[int(p)].id for p in runnable]
            throughput, use = table.of_allocation(runnable, ids, gpus, plan.allocation)
        else:
            assert plan.cpu_per_gpu is not None and plan.mem_gb_per_gpu is not None
            throughput = table.at(runnable, plan.cpu_per_gpu, plan.mem_gb_per_gpu)
            use = np.array([gpus.sum(), gpus @ plan.cpu_per_gpu, gpus @ plan.mem_gb_per_gpu], dtype=float)
        return throughput / self.state.floor[runnable], use

    def _progress(self, now: float, running: np.ndarray, rate: np.ndarray, ran_last: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Advance the running jobs by one round; returns the positions that finished in it, and the seconds each
        running job held its GPUs."""
        if running.size == 0:
            return running, np.empty(0)
        resumed = ~np.isin(running, ran_last, assume_unique=True) & (self.state.run_s[running] > 0)
        delay = np.where(resumed, self.overhead, 0.0)
        span = self.round_s - delay
        done, remaining, held_time, progress_time = self.accounting.advance(running, rate,
                                                                             self.state.remaining[running], span)
        held = delay + held_time
        before = self.state.remaining[running]
        check_progress(before, remaining, done, rate, lambda i: self.trace.jobs[int(running[i])].id,
                       self.mechanism_name)
        self.state.remaining[running] = remaining
        self.state.progress_s[running] += progress_time
        self.state.run_s[running] += held
        self.state.attained[running] += self.state.gpus[running] * held
        starts = running[np.isnan(self.state.first_start[running])]
        self.state.first_start[starts] = now
        finished = running[done]
        self.state.finish[finished] = now + held[done]
        if self.record:
            self.job_rows.append((np.full(running.size, now), running, rate, progress_time))
        return finished, held

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
        arrived = np.flatnonzero(self.state.arrival <= self.end_s) if self.size else np.empty(0, dtype=np.int64)
        specs = [self.trace.jobs[int(p)] for p in arrived]
        done_work = self.state.work[arrived] - self.state.remaining[arrived]
        progress_s = self.state.progress_s[arrived]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_speedup = np.where(progress_s > 0, done_work / progress_s, np.nan)
        jct = self.state.finish[arrived] - self.state.arrival[arrived]
        jobs = pd.DataFrame({
            "id": [s.id for s in specs],
            "arrival_s": self.state.arrival[arrived],
            "first_start_s": self.state.first_start[arrived],
            "finish_s": self.state.finish[arrived],
            "jct_s": jct,
            # Never negative: the rounds' held seconds, summed in floating point, may pass the JCT by an ulp.
            "queue_s": np.maximum(jct - self.state.run_s[arrived], 0.0),
            "gpus": self.state.gpus[arrived],
            "model": [s.model for s in specs],
            "mean_speedup": mean_speedup,
            "preemptions": self.state.preemptions[arrived],
            "duration_s": self.state.duration[arrived],
            "run_s": self.state.run_s[arrived],
            "profiling_s": [s.profiling_s for s in specs],
            "monitored": (arrived >= self.first) & (arrived < self.last),
        }, columns=list(JOB_COLUMNS))
        rounds = pd.DataFrame(self.rows, columns=list(self._round_columns()))
        job_rounds = None
        if self.record:
            parts = self.job_rows or [(np.empty(0),) * 4]
            time_s, position, rate, seconds = (np.concatenate(column) for column in zip(*parts, strict=True))
            ids = [self.trace.jobs[int(p)].id for p in position]
            job_rounds = pd.DataFrame({"time_s": time_s, "id": ids, "speedup": rate, "run_s": seconds})
        return jobs, rounds, job_rounds


# The loop for each kind of cluster; sim/hetero_run.py adds the heterogeneous one when the package loads.
RUNS: dict[type, type[_Run]] = {Cluster: _Run}
