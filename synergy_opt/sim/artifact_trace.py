"""The Synergy artifact's recorded traces (msr-fiddle/synergy ``simulator/runner.py --record_trace``).

One job a line, no header: ``job_id,model,arrival_s,total_iters,gpus`` (integers but the model name; the
artifact writes ``runner.record_job``'s fields as they are). A job's duration at the GPU-proportional share
is ``total_iters x`` its model's fair-share iteration time (the artifact's ``models/<model>_1.py``
``iter_time``, carried by the built-in profiles as ``iter_time_s``); the trace keeps that iteration time per
job (``TraceJob.iter_time_s``), so that the artifact's accounting (``simulate(accounting="artifact")``) counts
the same whole iterations. Job ids are the artifact's numbers as strings; trace order is file order. A job
takes the matrix the artifact runs it by (:func:`artifact_profile`: its model file's demand and speed-up, its
model's own matrix at 3 CPUs a GPU but for a multi-GPU job whose best case exceeds a server: its capped demand and
linear speedup). Arrivals are read as written (whole seconds, but ``0.001 x id`` in a static run).
"""

from __future__ import annotations

import csv
import io
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import read_text
from synergy_opt.generate import GENERATOR_ARGUMENTS
from synergy_opt.instance import Cluster, Job, Profile, RoundInstance, prefixed
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.profiles import model_info
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
        (:func:`artifact_profile`: its model file's demand and speed-up, capped for a multi-GPU job whose best case
        exceeds a server); False: every job its model's own matrix, what the artifact's OPT (``+opt``, replayed by
        the ``ideal`` mechanism) reads at 3 CPUs a GPU (at other ratios its OPT was not recorded).

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
        jobs.append(TraceJob(
            job_id, _arrival(where, cells[2]), gpus, iterations * info.iter_time_s,
            artifact_profile(name, gpus, cpu_per_gpu) if capped else info.profile, model=name,
            iter_time_s=info.iter_time_s,
        ))
    metadata: dict[str, Any] = {"source": SOURCE, "jobs_read": len(jobs), "cpu_per_gpu": cpu_per_gpu,
                                "capped": capped}
    return Trace(tuple(jobs), metadata)


# The artifact's servers (its configs/default_cluster.ini): 8 GPUs, 8 x the CPU:GPU ratio CPUs, 500 GB.
ARTIFACT_SERVER_GPUS = 8
ARTIFACT_SERVER_MEM_GB = 500.0


# The demand per GPU the artifact's model files declare (``self.cpus``, ``self.mem`` in ``simulator/models-<ratio>/
# <model>_1.py``, msr-fiddle/synergy) is each built-in matrix's best case at every CPU:GPU ratio but these CPUs:
# at 6 CPUs a GPU AlexNet and ShuffleNet ask for 24 (speed-ups 2.18 and 2.59, "3.83/1.75" and "4.54/1.75" in the
# files' comments, points their matrices do not have: there 12 CPUs give 2.94 and 2.89, 1.68 and 1.65 times the
# share's 1.75).
ARTIFACT_DECLARED_CPUS = {6: {"alexnet": 24.0, "shufflenet": 24.0}}


@cache
def artifact_profile(name: str, gpus: int, cpu_per_gpu: int = 3) -> Profile:
    """The matrix an artifact job of built-in model ``name`` on ``gpus`` GPUs runs by.

    The artifact grants a job one speed-up, its model file's (``self.speedup``; the built-in profiles'
    ``speedup_at_best`` at each CPU:GPU ratio), at the demand the file declares (its best case here, but for
    :data:`ARTIFACT_DECLARED_CPUS`), and nothing between the share and that point. At 3 CPUs a GPU the model's
    own matrix gives exactly that; at 4 and 5 the files round the speed-ups (MobileNet at 4: 1.2, its matrix
    1.1923), at 6 two models declare another point. A job of 2-8 GPUs whose best case (times its GPUs) exceeds a
    server's CPUs or memory is capped: the artifact (``jobs/workload.py``, ``add_synergy_profile``) caps its
    demand at one server's and makes its speedup a straight line in CPUs between the share (1) and its best
    case, ``1 + (s - 1) (c_cap - c_p) / (c_best - c_p)`` (a 4-GPU AlexNet: 6 CPUs and 125 GB a GPU at 1.6467; a
    3-GPU one: 8 CPUs at 2.078). So where the model's matrix does not already give it, the matrix here is the
    share's throughput at every config from the share up, that speed-up times it from the (capped) declared
    point up (the point put on the grid), and the model's below the share, all over the share's throughput (1
    at the share: at ratios 4-6 every job's matrix is in that unit, the model's own divided by it where nothing
    else changes); its best case
    (:func:`~synergy_opt.mechanisms.demand.best_case_demands`) is then that point. A job of more than 8 GPUs
    runs at the share at speedup 1 there, as the model's matrix already gives it with the server cap.

    Not modelled: M5 at 6 CPUs a GPU declares 6 CPUs and 187.5 GB at speed-up 1, so the artifact books 187.5 GB
    for no gain; here its best case is the share (a best case is the least config reaching the most throughput).
    """
    info = model_info(name, cpu_per_gpu)
    profile = info.profile
    share_cpu, share_mem = float(cpu_per_gpu), ARTIFACT_SERVER_MEM_GB / ARTIFACT_SERVER_GPUS
    server_cpus = ARTIFACT_SERVER_GPUS * cpu_per_gpu
    one = RoundInstance(Cluster(1, ARTIFACT_SERVER_GPUS, server_cpus, ARTIFACT_SERVER_MEM_GB), (Job("j", 1, profile),))
    best_cpu, best_mem = (float(v[0]) for v in best_case_demands(one))
    best_cpu = ARTIFACT_DECLARED_CPUS.get(cpu_per_gpu, {}).get(name, best_cpu)
    cap_cpu = min(best_cpu, server_cpus / gpus)
    cap_mem = min(best_mem, ARTIFACT_SERVER_MEM_GB / gpus)
    # Speedups are over the share's throughput: 1 at ratio 3, 1.15-1.75 in the matrices of other ratios (they keep
    # ratio 3's unit), so there every job's matrix is rebuilt in the share's unit, one unit for the whole record.
    floor = float(profile.throughput(share_cpu, share_mem))
    speedup = info.speedup_at_best
    as_declared = profile.throughput(best_cpu, best_mem) / floor == speedup  # the speedup the simulator reads
    uncapped = (cap_cpu, cap_mem) == (best_cpu, best_mem)
    if floor == 1.0 and (gpus > ARTIFACT_SERVER_GPUS or (uncapped and as_declared)):
        return profile
    if gpus > ARTIFACT_SERVER_GPUS:  # at the share, speedup 1: the model's matrix with the server cap
        return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput / floor, name=profile.name)
    if not uncapped and best_cpu > share_cpu:
        speedup = 1.0 + (speedup - 1.0) * (cap_cpu - share_cpu) / (best_cpu - share_cpu)  # the artifact's line
    cpu_axis = np.union1d(profile.cpu_per_gpu, [cap_cpu])
    mem_axis = np.union1d(profile.mem_gb_per_gpu, [cap_mem])
    cpu, mem = np.meshgrid(cpu_axis, mem_axis, indexing="ij")
    tput = np.asarray(profile.throughput(cpu, mem), dtype=float)  # new points read the grid below them
    # In units of the share's throughput, so that a speedup read off the matrix (over the share's) is the
    # artifact's number itself: its accounting takes whole iterations, floor(round_s / (iter_time / speedup)),
    # where one ulp can cost one (no float divided by 1.53 gives 1.92).
    tput = np.where((cpu >= share_cpu) & (mem >= share_mem), np.minimum(tput, floor), tput) / floor
    tput[(cpu >= cap_cpu) & (mem >= cap_mem)] = speedup
    ratio = "" if cpu_per_gpu == 3 else f"-r{cpu_per_gpu}"
    return Profile(cpu_axis, mem_axis, tput, name=f"{name}-x{gpus}{ratio}-artifact")


# Five of the artifact's models declare their least memory per GPU as ``int(62.5/3)`` (``models/gnmt_1.py``), 20 GB,
# where the built-in matrices' grid point is 20.83: a best case there is 20 GB in its DRF and TETRIS keys (bert and
# vae are not built-in models; listed as the artifact has them).
ARTIFACT_WHOLE_GB_MODELS = ("bert", "gnmt", "lstm", "transformer", "vae")
ARTIFACT_LEAST_MEM_GB = (20.83, 20.0)  # (the grid's point, what those models declare)


def artifact_demands(instance: RoundInstance, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Each job's demand as the artifact's DRF and TETRIS read it, as shares of the cluster's GPUs, CPUs and GB
    (one row per job): its best case per GPU (``cpu``, ``mem``: ``best_case_demands``') times its GPUs, a total
    beyond one server's capped at the server's, or, for a job of more GPUs than a server, at its share
    (``jobs/workload.py``, ``add_synergy_profile``), memory per GPU as the artifact's models declare it. Exact
    for the jobs of an artifact record (``artifact_trace``: a best case already within a server's, as its
    capped matrices give); on other jobs the artifact capped its own best case, which may differ (a 4-GPU
    AlexNet of the built-in matrix: 24 CPUs and 250 GB here, 500 GB there)."""
    cluster = instance.cluster
    grid, declared = ARTIFACT_LEAST_MEM_GB
    whole = np.array([job.model in ARTIFACT_WHOLE_GB_MODELS for job in instance.jobs], dtype=bool)
    mem = np.where(whole & np.isclose(mem, grid, rtol=1e-9, atol=0.0), declared, mem)
    gpus = instance.gpus.astype(float)
    wide = gpus > cluster.gpus_per_server

    def capped(total: np.ndarray, server: float, share: float) -> np.ndarray:
        return np.where(total > server, np.where(wide, share * gpus, server), total)

    return np.column_stack([gpus / cluster.total_gpus,
                            capped(cpu * gpus, cluster.cpus_per_server, cluster.cpu_per_gpu) / cluster.total_cpus,
                            capped(mem * gpus, cluster.mem_gb_per_server, cluster.mem_gb_per_gpu)
                            / cluster.total_mem_gb])


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
