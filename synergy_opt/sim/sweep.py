"""A sweep of simulations: every (setting, seed, mechanism) as one run, here, in local processes or on Dask.

A run is self-contained and picklable (:class:`SimRun`): a generated trace is drawn in the worker from its
setting (deterministic per seed), a loaded trace travels with the run. Each run gives one summary row and its
per-job and per-round tables, each row prefixed with the run's setting columns (:data:`SETTING_COLUMNS`), so
that the runs of a sweep stack into one CSV each. Which process ran a run changes only the wall-time columns
(:data:`WALL_TIME_COLUMNS`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from synergy_opt.cli.parallel import run_in_order
from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import GPUS_PER_SERVER, MEM_GB_PER_SERVER
from synergy_opt.hetero import HeteroCluster
from synergy_opt.instance import Cluster
from synergy_opt.profiles import gavel_gpu_types
from synergy_opt.sim.bounds import MAX_ROUNDS
from synergy_opt.sim.engine import CpuRatioWarning, Progress, prepare_run, simulate
from synergy_opt.sim.result import JOB_COLUMNS, ROUND_COLUMNS, SUMMARY_KEYS
from synergy_opt.sim.timing import DEFAULT_ROUND_TIMING, RoundTiming
from synergy_opt.sim.trace import Trace, check_extension_fits, drawn_gpus, generate_trace
from synergy_opt.sim.trace_metadata import TraceJobKind
from synergy_opt.validation import check_arguments

# What identifies a run, in CSV order; ``trace`` is "generated" or the trace file's name.
SETTING_COLUMNS = (
    "trace", "cluster_gpus", "gpu_types", "cpu_per_gpu", "policy", "load", "split", "multi_gpu", "profile_noise",
    "job_kind", "trace_jobs", "round_s", "seed", "mechanism",
)
SUMMARY_COLUMNS = (
    *SETTING_COLUMNS, "monitor_first", "monitor_last", "preemption_overhead_s", "backfill", "round_timing",
    *SUMMARY_KEYS,
    "arrivals_capped", "stopped",
    "proportional_ratio",
)
PER_JOB_COLUMNS = (*SETTING_COLUMNS, *JOB_COLUMNS)
PER_ROUND_COLUMNS = (*SETTING_COLUMNS, *ROUND_COLUMNS)
# Columns that measure this machine, not the simulation: they differ between otherwise identical runs.
WALL_TIME_COLUMNS = ("wall_s", "mechanism_s")
GENERATED = "generated"
# Settings of the generator alone: a trace file's jobs have their own arrivals, noise and kinds.
GENERATOR_ONLY_COLUMNS = ("load", "profile_noise", "job_kind")


def generator_only(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The setting columns that say nothing of ``rows`` (tables' or summaries' rows) when all of them replayed
    trace files: the generator's; none when some were generated."""
    files = bool(rows) and all(row.get("trace") != GENERATED for row in rows)
    return GENERATOR_ONLY_COLUMNS if files else ()
REFERENCE_MECHANISM = "proportional"
# Imported once by the fork server, so that every worker process starts with the simulator loaded.
PRELOAD = ["synergy_opt.sim.sweep", "synergy_opt.mechanisms", "synergy_opt.ideal"]


@dataclass(frozen=True)
class SimSetting:
    """Everything a run depends on but its mechanism: the cluster, the trace and the policy.

    ``load`` is in jobs per hour (None: a static trace); ``jobs`` is the generated trace's length (it draws
    more arrivals while monitored jobs run); ``monitor``, ``backfill`` and ``round_timing`` are ``simulate``'s
    (``monitor`` None: its default).
    """

    gpus: int = 128
    cpu_per_gpu: int = 3
    policy: str = "fifo"
    load: float | None = 9.0
    split: tuple[float, float, float] = (20, 70, 10)
    multi_gpu: bool = False
    profile_noise: float = 0.0
    job_kind: TraceJobKind = "builtin"
    jobs: int = 1000
    seed: int = 0
    round_s: float = 300.0
    monitor: tuple[int, int] | None = None
    preemption_overhead_s: float = 0.0
    trace_name: str = GENERATED
    backfill: bool = True
    types: str = ""
    round_timing: RoundTiming = DEFAULT_ROUND_TIMING

    @property
    def cluster(self) -> Cluster | HeteroCluster:
        """8-GPU servers with 500 GB and ``8 * cpu_per_gpu`` CPUs each, as :func:`synergy_opt.generate_round`'s;
        with ``types`` (``"k80:2,v100:2"``: servers per GPU type) a :class:`HeteroCluster` of such servers."""
        if self.types:
            return HeteroCluster.of(self.types, GPUS_PER_SERVER, GPUS_PER_SERVER * self.cpu_per_gpu,
                                    MEM_GB_PER_SERVER)
        return Cluster(self.gpus // GPUS_PER_SERVER, GPUS_PER_SERVER, GPUS_PER_SERVER * self.cpu_per_gpu,
                       MEM_GB_PER_SERVER)

    def generator_arguments(self) -> dict[str, Any]:
        """The arguments of :func:`generate_trace` that make this setting's trace (when it is generated)."""
        return {"jobs": self.jobs, "load": self.load, "split": self.split, "multi_gpu": self.multi_gpu,
                "seed": self.seed, "cpu_per_gpu": self.cpu_per_gpu, "profile_noise": self.profile_noise,
                "job_kind": self.job_kind}

    def check_generated(self) -> None:
        """Refuse now, naming the field, what :func:`generate_trace` would refuse when the run starts (a sweep
        checks every setting before it writes its folder)."""
        check_arguments(generate_trace, **self.generator_arguments())
        cluster = self.cluster
        if isinstance(cluster, HeteroCluster):  # else each job was blamed for its model's missing matrix
            other = [name for name in cluster.names if name not in gavel_gpu_types()]
            if other:
                raise InvalidInputError("--types", self.types, f"a generated trace's jobs are built-in models, with "
                                        f"matrices on {', '.join(gavel_gpu_types())} only, not {other[0]!r}: give a "
                                        "trace (--trace) whose jobs carry their own matrices there")
        largest = max(t.total_gpus for t in cluster.types) if isinstance(cluster, HeteroCluster) else self.gpus
        check_extension_fits(drawn_gpus(self.multi_gpu) if self.load is not None else 0, largest,
                             "--types" if self.types else "--gpus", self.types or self.gpus)

    def columns(self) -> dict[str, Any]:
        """The setting's CSV columns (``SETTING_COLUMNS`` but ``mechanism``)."""
        return {
            "trace": self.trace_name, "cluster_gpus": self.gpus, "cpu_per_gpu": self.cpu_per_gpu, "policy": self.policy,
            "load": self.load, "split": split_text(self.split), "multi_gpu": self.multi_gpu,
            "profile_noise": self.profile_noise, "job_kind": self.job_kind, "trace_jobs": self.jobs,
            "round_s": self.round_s, "seed": self.seed, "gpu_types": self.types,
        }


def split_text(split: Sequence[float]) -> str:
    """``(20, 70, 10)`` as ``"20,70,10"``: one CSV field, the form ``--split`` takes."""
    return ",".join(f"{value:g}" for value in split)


@dataclass(frozen=True)
class SimRun:
    """One simulation: a setting, a mechanism and its options, and the trace when it was loaded from a file."""

    setting: SimSetting
    mechanism: str
    trace: Trace | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def make_trace(self) -> Trace:
        if self.trace is not None:
            return self.trace
        return generate_trace(**self.setting.generator_arguments())


@dataclass(frozen=True, eq=False)
class RunOutcome:
    """A run's summary row (``SUMMARY_COLUMNS`` but ``proportional_ratio``), per-job and per-round tables."""

    summary: dict[str, Any]
    jobs: pd.DataFrame
    rounds: pd.DataFrame


def run_one(run: SimRun, progress: Progress | None = None) -> RunOutcome:
    """Simulate ``run`` and label its results with its setting (``progress``: as :func:`simulate`'s)."""
    s = run.setting
    with _ratio_as_set():
        result = simulate(run.make_trace(), s.cluster, policy=s.policy, mechanism=run.mechanism,
                          round_s=s.round_s, seed=s.seed, monitor=s.monitor,
                          preemption_overhead_s=s.preemption_overhead_s, backfill=s.backfill, progress=progress,
                          round_timing=s.round_timing, **run.options)
    labels = {**s.columns(), "mechanism": run.mechanism}
    summary = {**result.summary, **labels}
    return RunOutcome(summary, _labelled(result.jobs, labels), _labelled(result.rounds, labels))


def check_run(run: SimRun) -> None:
    """The checks :func:`run_one`'s simulation makes before its first round (the trace against the cluster, the
    policy and mechanism on it), without simulating: the sweep's command line makes them before it writes its
    folder (a job the cluster cannot run was found after the run had begun). A generated trace is drawn here and
    again by the run (0.01-0.2 s a trace)."""
    s = run.setting
    with _ratio_as_set():
        prepare_run(run.make_trace(), s.cluster, s.policy, run.mechanism, s.round_s, s.seed, s.monitor,
                    s.preemption_overhead_s, False, MAX_ROUNDS, s.backfill, "exact", dict(run.options),
                    round_timing=s.round_timing)


@contextlib.contextmanager
def _ratio_as_set() -> Iterator[None]:
    """No warning of a trace run at another CPU:GPU ratio: a sweep's setting names its ratio (a trace file runs
    at its own unless the setting, --cpu-per-gpu, asks for another)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CpuRatioWarning)
        yield


def _labelled(frame: pd.DataFrame, labels: Mapping[str, Any]) -> pd.DataFrame:
    setting = pd.DataFrame({key: [value] * len(frame) for key, value in labels.items()}, index=frame.index,
                           columns=list(SETTING_COLUMNS))
    return pd.concat([setting, frame], axis=1)


def run_sweep(
    runs: Sequence[SimRun], *, workers: int = 1, dask: Any = None,
    progress: Callable[[RunOutcome], None] | None = None,
) -> list[RunOutcome]:
    """Run every simulation, in the order of ``runs`` (see :func:`synergy_opt.cli.parallel.run_in_order`)."""
    return run_in_order(run_one, runs, workers=workers, dask=dask, progress=progress, preload=PRELOAD)


def with_ratios(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each summary row with ``proportional_ratio``: proportional's average JCT over the run's, at the same
    setting and seed (3.4 = 3.4x shorter than under GPU-proportional); None without a proportional run."""
    key_columns = [column for column in SETTING_COLUMNS if column != "mechanism"]
    return [{**row, "proportional_ratio": ratio}
            for row, ratio in zip(summaries, _proportional_ratios(summaries, key_columns), strict=True)]


def _proportional_ratios(rows: Sequence[Mapping[str, Any]], key_columns: Sequence[str]) -> list[float | None]:
    """Each row's proportional average JCT over its own, proportional's row being the one with the same
    ``key_columns`` (None where there is none)."""
    reference = {tuple(row[c] for c in key_columns): row["avg_jct_h"]
                 for row in rows if row["mechanism"] == REFERENCE_MECHANISM}
    return [_ratio(reference.get(tuple(row[c] for c in key_columns)), row["avg_jct_h"]) for row in rows]


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or not np.isfinite(numerator) or not np.isfinite(denominator):
        return None
    return float(numerator / denominator) if denominator > 0 else None


# The figures of a sweep's table: means over seeds of each (setting, mechanism).
TABLE_MEANS = ("avg_jct_h", "p50_jct_h", "p95_jct_h", "p99_jct_h", "makespan_h", "rounds", "rounds_solved",
               "wall_s")
TABLE_COLUMNS = (*[c for c in SETTING_COLUMNS if c != "seed"], "runs", "seeds", *TABLE_MEANS, "unfinished",
                 "proportional_ratio")


def seed_means(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (setting, mechanism) in first-seen order: means over its seeds, the unfinished jobs summed,
    and ``proportional_ratio`` as the ratio of the mean average JCTs (proportional's over the mechanism's)."""
    group_columns = [c for c in SETTING_COLUMNS if c != "seed"]
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in summaries:
        groups.setdefault(tuple(row[c] for c in group_columns), []).append(row)
    table = []
    for key, group in groups.items():
        out: dict[str, Any] = dict(zip(group_columns, key, strict=True))
        out["runs"] = len(group)
        out["seeds"] = ",".join(str(row["seed"]) for row in group)
        for column in TABLE_MEANS:
            values = [float(row[column]) for row in group]
            out[column] = float(np.mean(values)) if values else None
        out["unfinished"] = sum(int(row["unfinished"]) for row in group)
        table.append(out)
    setting_columns = [c for c in group_columns if c != "mechanism"]
    for row, ratio in zip(table, _proportional_ratios(table, setting_columns), strict=True):
        row["proportional_ratio"] = ratio
    return table


def varying(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """The ``columns`` that take more than one value over ``rows`` (what a sweep sweeps)."""
    return [c for c in columns if len({_hashable(row.get(c)) for row in rows}) > 1]


def _hashable(value: Any) -> Any:
    if isinstance(value, float) and value != value:  # NaN (an empty CSV field read by pandas) never equals itself
        return None
    return tuple(value) if isinstance(value, list) else value
