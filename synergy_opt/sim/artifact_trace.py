"""The Synergy artifact's recorded traces (msr-fiddle/synergy ``simulator/runner.py --record_trace``).

One job a line, no header: ``job_id,model,arrival_s,total_iters,gpus`` (integers but the model name; the
artifact writes ``runner.record_job``'s fields as they are). A job's duration at the GPU-proportional share
is ``total_iters x`` its model's fair-share iteration time (the artifact's ``models/<model>_1.py``
``iter_time``, carried by the built-in profiles as ``iter_time_s``); the trace keeps that iteration time per
job (``TraceJob.iter_time_s``), so that the artifact's accounting (``simulate(accounting="artifact")``) counts
the same whole iterations. Job ids are the artifact's numbers as strings; trace order is file order. A job
takes the matrix the artifact runs it by (:func:`~synergy_opt.sim.artifact_profiles.artifact_profile`: its model
file's demand and speed-up, its model's own matrix at 3 CPUs a GPU but for a multi-GPU job whose best case exceeds
a server: its capped demand and linear speedup). Arrivals are read as written (whole seconds, but ``0.001 x id``
in a static run).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import read_text
from synergy_opt.generate import GENERATOR_ARGUMENTS
from synergy_opt.instance import Profile, prefixed
from synergy_opt.profiles import model_info
from synergy_opt.sim.artifact_profiles import artifact_profile, share_throughput
from synergy_opt.sim.trace import Trace, TraceJob
from synergy_opt.validation import boolean, checked, text

SOURCE = "synergy artifact record"
FIELDS = ("job_id", "model", "arrival_s", "total_iters", "gpus")
#: The artifact's recorded Figure 9 run, shipped with the package (its README says how it was recorded).
ARTIFACT_DATA = Path(__file__).resolve().parents[1] / "data" / "artifact"
FIG9_TRACE = ARTIFACT_DATA / "fig9_load9_seed42_trace.csv"
#: The artifact's per-job JCT files by the mechanism that reproduces them here.
FIG9_JCTS = {"proportional": ARTIFACT_DATA / "fig9_load9_seed42_jct_fair.csv",
             "tune-artifact": ARTIFACT_DATA / "fig9_load9_seed42_jct_tune.csv"}
#: Its setting: FIFO, 16 x (8 GPUs, 24 CPUs, 500 GB), 300 s rounds, these trace positions monitored.
FIG9_MONITOR = (4000, 5000)


def is_artifact_record(trace: Trace) -> bool:
    """Whether ``trace`` was read from an artifact record (its arrivals and matrices are the artifact's own)."""
    return trace.metadata.get("source") == SOURCE


def looks_like_artifact_record(content: str) -> bool:
    """Whether a CSV text is an artifact record: its first line five fields, the first an integer job id."""
    first = content.lstrip("\ufeff").partition("\n")[0].strip()
    cells = first.split(",")
    return len(cells) == len(FIELDS) and cells[0].strip().isdigit()


@checked(content=text, cpu_per_gpu=GENERATOR_ARGUMENTS["cpu_per_gpu"], capped=boolean)
def artifact_trace(content: str, cpu_per_gpu: int = 3, capped: bool = True) -> Trace:
    """The jobs of an artifact record (the file's text) as a :class:`Trace`.

    Parameters
    ----------
    content
        The record's text: ``job_id,model,arrival_s,total_iters,gpus`` per line, no header.
    cpu_per_gpu
        Which CPU:GPU variant of the built-in profiles the jobs carry (the artifact's ``models-<ratio>``).
    capped
        True: every job carries the matrix the artifact's TUNE, Synergy-GREEDY and proportional runs go by
        (:func:`~synergy_opt.sim.artifact_profiles.artifact_profile`: its model file's demand and speed-up, capped
        for a multi-GPU job whose best case exceeds a server); False: every job its model's own matrix, what the
        artifact's OPT (``+opt``, replayed by the ``ideal`` mechanism) reads, and at ratios 4-6 an iteration time
        that gives its OPT's double-counted credit (its own over its model's throughput at the ratio's share:
        docs/fidelity.md).

    Raises
    ------
    InvalidInputError
        Naming the row and field (``rows[3].total_iters``) of a malformed line: a wrong number of fields, a
        value that is not a whole number in range (an arrival may be any number of seconds >= 0: a static run
        writes ``0.0, 0.001, ...``), an unknown model, a repeated job id.
    """
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    for index, cells in enumerate(csv.reader(io.StringIO(content.lstrip("\ufeff"), newline=""))):
        if not cells or all(not cell.strip() for cell in cells):
            continue
        where = f"rows[{index}]"
        if len(cells) != len(FIELDS):
            reason = f"must have the {len(FIELDS)} fields {','.join(FIELDS)}"
            raise InvalidInputError(where, ",".join(cells)[:80], reason)
        job_id = str(_whole(where, "job_id", cells[0], 0))
        if job_id in seen:
            raise InvalidInputError(f"{where}.job_id", job_id, "duplicate job id")
        seen.add(job_id)
        name = cells[1].strip()
        try:
            info = model_info(name, cpu_per_gpu)
        except InvalidInputError as error:
            raise prefixed(error, where) from None
        iterations = _whole(where, "total_iters", cells[3], 1)
        gpus = _whole(where, "gpus", cells[4], 1)
        iter_time = info.iter_time_s if capped else info.iter_time_s / _opt_credit(info.profile, cpu_per_gpu)
        jobs.append(TraceJob(
            job_id, _arrival(where, cells[2]), gpus, iterations * iter_time,
            artifact_profile(name, gpus, cpu_per_gpu) if capped else info.profile, model=name, iter_time_s=iter_time,
        ))
    metadata: dict[str, Any] = {"source": SOURCE, "jobs_read": len(jobs), "cpu_per_gpu": cpu_per_gpu,
                                "capped": capped}
    return Trace(tuple(jobs), metadata)


def _opt_credit(profile: Profile, cpu_per_gpu: int) -> float:
    """What the artifact's OPT counts twice at a CPU:GPU ratio: its model's throughput at that ratio's share, in
    its matrix's unit (the 3-CPU share's at every ratio; exactly 1 at ratio 3). Its OPT credits a round
    ``floor(300 / (iter_time / tput))`` iterations (``opt_algo/synergy_opt.py``, ``allocate_round``) with ``tput``
    the model file's matrix as it is (``models-4/<model>_1.py``: "Still a 3-CPU tput matrix. Divide by 1.25") and
    ``iter_time`` already the ratio's share's (AlexNet at 4: 0.48 s = 0.6 / 1.25), so its jobs run that much
    faster than their speed-up over the share says: its ``+opt`` at ratios 4-6 gives its ratio-3 JCTs. The
    iteration time divided by it gives the same credit."""
    return share_throughput(profile, cpu_per_gpu)


def _arrival(where: str, cell: str) -> float:
    """An arrival in seconds: whole in the artifact's dynamic runs (its gaps are rounded up), ``0.001 x job id``
    in its static ones (``jobs/workload.py``, ``generate_next_job(arrival=0)``; ``deploy_trace/static_100job_*``)."""
    try:
        value = float(cell.strip())
    except ValueError:
        raise InvalidInputError(f"{where}.arrival_s", cell, "must be a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{where}.arrival_s", cell, "must be a finite number of seconds >= 0")
    return value


def _whole(where: str, name: str, cell: str, low: int) -> int:
    try:
        value = int(cell.strip())
    except ValueError:
        raise InvalidInputError(f"{where}.{name}", cell, "must be a whole number") from None
    if value < low:
        raise InvalidInputError(f"{where}.{name}", value, f"must be >= {low}")
    return value


def fig9_trace() -> Trace:
    """The artifact's recorded Figure 9 trace (9 jobs/h, seed 42, 6925 jobs)."""
    return artifact_trace(read_text(FIG9_TRACE))


def fig9_jcts(mechanism: str) -> dict[str, float]:
    """The artifact's JCT in seconds of each monitored job (id -> seconds) under ``"proportional"`` (its
    ``FIFO+fair``) or ``"tune-artifact"`` (its ``FIFO+tune``)."""
    if mechanism not in FIG9_JCTS:
        raise InvalidInputError("mechanism", mechanism, f"the artifact recorded {', '.join(FIG9_JCTS)}")
    rows = csv.DictReader(io.StringIO(read_text(FIG9_JCTS[mechanism])))
    return {row["job_id"]: float(row["jct_s"]) for row in rows}
