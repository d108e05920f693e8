"""The public Philly trace (Microsoft, msr-fiddle/philly-traces) as a simulator trace.

Its ``cluster_job_log`` is a JSON list of jobs, each with ``jobid``, ``submitted_time``
(``"%Y-%m-%d %H:%M:%S"``), ``status`` and ``attempts``; an attempt has ``start_time``, ``end_time`` and
``detail``, a list of ``{"ip": server, "gpus": [gpu names]}``. Per job we take its last attempt that ran (both
times present, end after start, at least one GPU): GPU demand is that attempt's GPU count and duration its
end minus start (read as the run time at the GPU-proportional share). Arrival is the submission time, from
the first job's that ran. The log names no models: each job gets one drawn by the workload split, seeded. Jobs
that never ran, lack times or GPUs, repeat a job id, or ask for more than ``max_gpus`` are skipped and
counted in the trace's metadata (``skipped``), whatever their ``status`` (killed and failed jobs did run).
Models and arrivals are drawn and counted over every job that ran, before ``max_gpus`` drops any, so that a
job is the same on every cluster size. A
time is missing when absent, null, empty or "None"; another value that is not a time is an error naming it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import GENERATOR_ARGUMENTS, draw_models
from synergy_opt.profiles import model_info
from synergy_opt.sim.trace import Trace, TraceJob
from synergy_opt.validation import SEED, Integer, Optional, Rule, checked

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
SOURCE = "philly cluster_job_log"
PHILLY_ARGUMENTS: dict[str, Rule] = {
    "seed": SEED, "cpu_per_gpu": GENERATOR_ARGUMENTS["cpu_per_gpu"], "max_gpus": Optional(Integer(1)),
}


@checked(split=GENERATOR_ARGUMENTS["split"], **PHILLY_ARGUMENTS)
def philly_trace(
    log: list[Any],
    split: tuple[float, float, float] = (20, 70, 10),
    seed: int = 0,
    cpu_per_gpu: int = 3,
    max_gpus: int | None = None,
) -> Trace:
    """The jobs of a Philly ``cluster_job_log`` (already parsed) as a :class:`Trace` (see the module's rules)."""
    if not isinstance(log, list):
        raise InvalidInputError("log", log, "a Philly cluster_job_log is a JSON list of jobs")
    skipped: Counter[str] = Counter()
    kept: list[tuple[datetime, str, int, float]] = []
    seen: set[str] = set()
    for index, entry in enumerate(log):
        if not isinstance(entry, Mapping):
            raise InvalidInputError(f"[{index}]", entry, "a Philly job log entry must be an object")
        jobid = entry.get("jobid")
        if not isinstance(jobid, str) or not jobid:
            raise InvalidInputError(f"[{index}].jobid", jobid, "must be a non-empty string")
        reason, run = _last_run(f"[{index}]", entry)
        if run is None:
            skipped[reason] += 1
        elif jobid in seen:
            skipped["repeated jobid"] += 1
        else:
            seen.add(jobid)
            kept.append((run[0], jobid, run[1], run[2]))
    kept.sort(key=lambda job: job[0])  # stable: log order among equal submission times
    # Models and arrival times are those of every job that ran, whatever max_gpus drops: a job is the same on
    # clusters of every size (drawn after dropping, a sweep's sizes ran different workloads).
    rng = np.random.default_rng(seed)
    names = draw_models(rng, len(kept), split)
    start = kept[0][0] if kept else None
    too_big = sum(1 for job in kept if max_gpus is not None and job[2] > max_gpus)
    if too_big:
        skipped[f"more than {max_gpus} GPUs"] += too_big
    jobs = tuple(
        TraceJob(jobid, (submitted - start).total_seconds() if start else 0.0, gpus, duration,
                 model_info(name, cpu_per_gpu).profile, model=name)
        for (submitted, jobid, gpus, duration), name in zip(kept, names, strict=True)
        if max_gpus is None or gpus <= max_gpus
    )
    metadata = {"source": SOURCE, "jobs_read": len(log), "skipped": dict(sorted(skipped.items())),
                "split": list(split), "seed": seed, "cpu_per_gpu": cpu_per_gpu, "max_gpus": max_gpus,
                "first_submitted": start.strftime(TIME_FORMAT) if start else None}
    return Trace(jobs, metadata)


def _time(field: str, value: Any) -> datetime | None:
    """A Philly time, None where the log has none (missing, null, empty or "None", as Philly writes it); any
    other value is an error naming ``field`` (a malformed time is not a missing one)."""
    if value is None or value in ("None", ""):
        return None
    if isinstance(value, str):
        try:
            return datetime.strptime(value, TIME_FORMAT)
        except ValueError:
            pass
    raise InvalidInputError(field, value, "must be a time like 2017-10-03 08:33:12, or None")


def _last_run(where: str, entry: Mapping[str, Any]) -> tuple[str, tuple[datetime, int, float] | None]:
    """``(reason skipped, None)`` or ``("", (submitted, GPUs, duration))`` from the job's last attempt that ran."""
    submitted = _time(f"{where}.submitted_time", entry.get("submitted_time"))
    if submitted is None:
        return "no submitted_time", None
    attempts = entry.get("attempts")
    if attempts is not None and not isinstance(attempts, list):
        raise InvalidInputError(f"{where}.attempts", attempts, "must be a list of attempts")
    if not attempts:
        return "never ran", None
    for number in reversed(range(len(attempts))):
        attempt = attempts[number]
        if not isinstance(attempt, Mapping):
            continue
        began = _time(f"{where}.attempts[{number}].start_time", attempt.get("start_time"))
        ended = _time(f"{where}.attempts[{number}].end_time", attempt.get("end_time"))
        if began is None or ended is None or ended <= began:
            continue
        detail = attempt.get("detail")
        servers = detail if isinstance(detail, list) else []
        gpus = 0
        for slot, server in enumerate(servers):
            names = server.get("gpus") if isinstance(server, Mapping) else None
            if names is not None and not isinstance(names, list):
                field = f"{where}.attempts[{number}].detail[{slot}].gpus"
                raise InvalidInputError(field, names, "must be a list of GPU names")
            gpus += len(names or ())
        if gpus > 0:
            return "", (submitted, gpus, (ended - began).total_seconds())
    return "no attempt with times and GPUs", None
