"""What a simulation returns: per-job and per-round tables and the summary figures (JCT, makespan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

JOB_COLUMNS = (
    "id", "arrival_s", "first_start_s", "finish_s", "jct_s", "queue_s", "gpus", "model", "mean_speedup",
    "preemptions", "duration_s", "run_s", "profiling_s", "monitored",
)
ROUND_COLUMNS = (
    "time_s", "jobs_in_system", "runnable", "running", "gpu_util_pct", "cpu_util_pct", "mem_util_pct",
    "mechanism_s", "solved", "fallback",
)
SUMMARY_KEYS = (
    "avg_jct_h", "p50_jct_h", "p95_jct_h", "p99_jct_h", "makespan_h", "jobs", "monitored", "unfinished",
    "rounds", "rounds_solved", "mechanism_s", "wall_s",
)


@dataclass(frozen=True, eq=False)
class SimResult:
    """The outcome of :func:`synergy_opt.simulate`.

    Attributes
    ----------
    jobs
        One row per job that arrived (``JOB_COLUMNS``; times in seconds, NaN for what did not happen).
        ``queue_s`` is the time in the system not holding GPUs (JCT minus ``run_s``); ``mean_speedup`` is the
        work done over the time it ran past any restore overhead; ``monitored`` marks the jobs the JCT
        figures are taken over.
    rounds
        One row per simulated round (``ROUND_COLUMNS``): use of the cluster in percent, the mechanism's
        seconds, whether it was solved afresh (else an earlier round's allocation was reused: the previous
        round's, or on a heterogeneous cluster a type's round kept from any earlier one) and whether the exact
        optimum fell back to TUNE.
    summary
        ``SUMMARY_KEYS``: JCT figures in hours over the monitored jobs, the makespan (from the first monitored
        arrival to the last monitored finish), counts and wall time, plus the settings of the run.
    job_rounds
        With ``record_job_rounds=True``: one row per running job per round (``time_s``, ``id``, ``speedup``,
        ``run_s`` seconds progressing at that speedup), else None.
    """

    jobs: pd.DataFrame
    rounds: pd.DataFrame
    summary: dict[str, Any]
    job_rounds: pd.DataFrame | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def monitored_jobs(self) -> pd.DataFrame:
        return self.jobs[self.jobs["monitored"]]

    def to_frame(self) -> pd.DataFrame:
        """The per-job table (``jobs``), as every result of the toolkit that is a table offers."""
        return self.jobs


def summarise(jobs: pd.DataFrame, rounds: pd.DataFrame, wall_s: float, settings: dict[str, Any]) -> dict[str, Any]:
    """The summary figures of a run (see :class:`SimResult`)."""
    monitored = jobs[jobs["monitored"]]
    done = monitored["jct_s"].dropna().to_numpy() / 3600.0

    def stat(values: np.ndarray, q: float | None) -> float:
        if values.size == 0:
            return float("nan")
        return float(values.mean()) if q is None else float(np.percentile(values, q))

    # Monitored jobs that had not arrived when a run was stopped early count as unfinished too.
    window = int(settings["monitor_last"]) - int(settings["monitor_first"])
    makespan = float("nan")
    if window and len(monitored) == window and monitored["finish_s"].notna().all():
        makespan = float(monitored["finish_s"].max() - monitored["arrival_s"].min()) / 3600.0
    summary: dict[str, Any] = {
        "avg_jct_h": stat(done, None),
        "p50_jct_h": stat(done, 50),
        "p95_jct_h": stat(done, 95),
        "p99_jct_h": stat(done, 99),
        "makespan_h": makespan,
        "jobs": len(jobs),
        "monitored": window,
        "unfinished": window - int(monitored["finish_s"].notna().sum()),
        "rounds": len(rounds),
        "rounds_solved": int(rounds["solved"].sum()) if len(rounds) else 0,
        "mechanism_s": float(rounds["mechanism_s"].sum()) if len(rounds) else 0.0,
        "wall_s": wall_s,
    }
    summary.update(settings)
    return summary
