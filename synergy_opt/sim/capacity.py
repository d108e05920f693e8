"""How much load a cluster sustains under a mechanism: a fluid bound, and a measurement by saturation.

A load (jobs/h) is sustained when the queue does not grow without end. Two figures, for generated traces
(SPEC 5: models by the split, durations ``D`` at the proportional share, GPU demands ``g``):

- **Bound** (:func:`fluid_capacity`): the cluster pooled into one machine, every job's work done at configs
  the mechanism may use, mixed as well as possible. With ``y[k, c]`` the jobs/h of model ``k`` whose work is
  done at config ``c`` (per GPU: ``c_cpu`` CPUs, ``c_mem`` GB, speedup ``s[k, c]``), a load ``lam`` is
  sustainable only if there are ``y >= 0`` with ``sum_c y[k, c] = p_k * lam`` for every model and, for each
  resource (GPUs, CPUs, memory; a GPU's use being 1, ``c_cpu``, ``c_mem``),
  ``sum_{k, c} y[k, c] * E[g] E[D] * use[c] / s[k, c] <= capacity``. The largest such ``lam`` is an LP.
  ``configs="proportional"``: only the share (GPU-proportional's capacity, exactly ``GPUs / (E[g] E[D])``);
  ``"best-or-share"``: each job's best case or the share (the artifact's all-or-nothing TUNE); ``"grid"``:
  every grid config at or above the job's floor (bounds TUNE, near-opt, the ideal bound: none beats the
  pooled optimum). It ignores placement and FIFO's order, so it is an upper bound.
- **Measured** (:func:`saturated_throughput`): a run at a load far above capacity, so that the queue never
  empties; the jobs finished per hour after a warm-up are what the cluster sustains under that mechanism and
  policy (with FIFO the running jobs are the oldest, as at a load just above capacity).
  :func:`saturated_run` also gives the finished jobs' mix: the bound for that mix is the one to hold the
  measurement against, since a window's draw moves the rate by a few percent (its durations are heavy-tailed).

``E[D]`` is estimated from 2,000,000 draws of the generator's own duration rule (standard error about 0.15%),
so the bound follows whatever the generator draws.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, get_args

import numpy as np
from scipy.optimize import linprog

from synergy_opt.generate import MULTI_GPU_DEMANDS, MULTI_GPU_WEIGHTS, draw_durations_min
from synergy_opt.instance import Cluster, Job, RoundInstance
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.profiles import TASKS, model_info, models_by_task
from synergy_opt.sim.engine import simulate
from synergy_opt.sim.trace import Trace, generate_trace
from synergy_opt.validation import OneOf

Configs = Literal["proportional", "best-or-share", "grid"]
CONFIGS = OneOf(get_args(Configs))
_DRAWS = 2_000_000


@cache
def mean_duration_h() -> float:
    """``E[D]`` in hours: the mean of the generator's durations at the proportional share."""
    return float(draw_durations_min(np.random.default_rng(20240611), _DRAWS).mean()) / 60.0


def mean_gpus(multi_gpu: bool) -> float:
    """``E[g]``: 1, or the multi-GPU mix's mean."""
    return float(MULTI_GPU_DEMANDS @ MULTI_GPU_WEIGHTS) if multi_gpu else 1.0


def model_shares(split: tuple[float, float, float]) -> dict[str, float]:
    """Each built-in model's share of the jobs: its task's by ``split``, uniform within the task."""
    weights = np.asarray(split, dtype=float) / float(sum(split))
    shares = {}
    for task, weight in zip(TASKS, weights, strict=True):
        names = models_by_task()[task]
        for name in names:
            shares[name] = float(weight) / len(names)
    return shares


def fluid_capacity(
    cluster: Cluster, split: tuple[float, float, float] = (20, 70, 10), multi_gpu: bool = False,
    cpu_per_gpu: int = 3, configs: str = "grid", *, shares: Mapping[str, float] | None = None,
    work_h: float | None = None,
) -> float:
    """The fluid upper bound on the sustainable load, jobs/h (see the module's docstring).

    ``shares`` (model -> fraction of the jobs) and ``work_h`` (mean GPU-hours per job at the share) replace
    the generator's, e.g. by a trace's own (:func:`trace_mix`).
    """
    configs = CONFIGS("configs", configs)
    c_p, m_p = cluster.cpu_per_gpu, cluster.mem_gb_per_gpu
    mix = model_shares(split) if shares is None else dict(shares)
    shares = {name: share for name, share in mix.items() if share > 0}
    work = mean_gpus(multi_gpu) * mean_duration_h() if work_h is None else work_h  # GPU-hours a job
    columns: list[tuple[int, float, float, float]] = []  # (model, CPUs, GB, speedup)
    for k, name in enumerate(shares):
        profile = model_info(name, cpu_per_gpu).profile
        floor = float(profile.throughput(c_p, m_p))
        points = [(c_p, m_p)]
        if configs == "best-or-share":
            best_cpu, best_mem = best_case_demands(RoundInstance(cluster, (Job("j", 1, profile),)))
            points.append((float(best_cpu[0]), float(best_mem[0])))
        elif configs == "grid":
            points += [(float(c), float(m)) for c in profile.cpu_per_gpu for m in profile.mem_gb_per_gpu]
        for point_cpu, point_mem in points:
            tput = float(profile.throughput(point_cpu, point_mem))
            if tput >= floor * (1 - 1e-9):
                columns.append((k, point_cpu, point_mem, tput / floor))
    # Variables: y per column, then lam. Maximise lam.
    count = len(columns)
    objective = np.zeros(count + 1)
    objective[-1] = -1.0
    equal = np.zeros((len(shares), count + 1))
    for j, (k, *_rest) in enumerate(columns):
        equal[k, j] = 1.0
    equal[:, -1] = -np.array(list(shares.values()))
    upper = np.zeros((3, count + 1))
    for j, (_k, column_cpu, column_mem, speedup) in enumerate(columns):
        upper[:, j] = work * np.array([1.0, column_cpu, column_mem]) / speedup
    capacity = [cluster.total_gpus, cluster.total_cpus, cluster.total_mem_gb]
    result = linprog(objective, A_ub=upper, b_ub=capacity, A_eq=equal, b_eq=np.zeros(len(shares)),
                     bounds=[(0, None)] * (count + 1), method="highs")
    if result.status != 0:  # pragma: no cover - the share alone is always feasible
        raise RuntimeError(f"fluid capacity LP: {result.message}")
    return float(result.x[-1])


def trace_mix(trace: Trace, first: int = 0, last: int | None = None) -> tuple[dict[str, float], float, float]:
    """A trace's jobs ``first <= i < last``: each model's share, the mean GPU-hours a job at the share, and
    the arrival rate (jobs/h); with :func:`fluid_capacity` they say how close to capacity the trace runs."""
    jobs = trace.jobs[first:last]
    shares, work_h = _mix([job.model for job in jobs], [job.gpus * job.duration_s for job in jobs])
    span_h = (jobs[-1].arrival_s - jobs[0].arrival_s) / 3600.0
    return shares, work_h, (len(jobs) - 1) / span_h


def _mix(models: Sequence[str | None], gpu_seconds: Sequence[float]) -> tuple[dict[str, float], float]:
    """Each model's share of the jobs and their mean GPU-hours at the share."""
    counts = Counter(models)
    shares = {str(name): count / len(models) for name, count in counts.items()}
    return shares, float(sum(gpu_seconds)) / len(models) / 3600.0


@dataclass(frozen=True)
class Saturation:
    """A saturated run (:func:`saturated_run`): the jobs finished per hour in its window, and those jobs' mix
    (``shares``, ``work_h`` as :func:`trace_mix` gives them), for the window's own :func:`fluid_capacity`."""

    jobs_per_h: float
    shares: dict[str, float]
    work_h: float


def saturated_run(
    mechanism: str, cluster: Cluster, *, split: tuple[float, float, float] = (20, 70, 10), multi_gpu: bool = False,
    seed: int = 0, load: float = 20.0, warmup_h: float = 150.0, until_h: float = 450.0, policy: str = "fifo",
    accounting: str = "exact", **options: Any,
) -> Saturation:
    """Jobs finished per hour between ``warmup_h`` and ``until_h`` with arrivals at ``load`` jobs/h, far
    above capacity, so that the queue never empties (checked: raises if it ran dry); and their mix."""
    trace = generate_trace(jobs=int(load * until_h) + 1, load=load, split=split, multi_gpu=multi_gpu, seed=seed)
    result = simulate(trace, cluster, policy=policy, mechanism=mechanism, monitor=(0, len(trace)),
                      until_s=until_h * 3600.0, accounting=accounting, **options)
    jobs = result.jobs
    finish = jobs["finish_s"].to_numpy() / 3600.0
    arrived = jobs["arrival_s"].to_numpy() / 3600.0
    window = (finish > warmup_h) & (finish <= until_h)
    waiting_at_end = np.count_nonzero((arrived <= until_h) & ~(finish <= until_h))
    if waiting_at_end <= cluster.total_gpus:
        raise RuntimeError(f"load {load:g} jobs/h did not saturate {mechanism}: raise it")
    done = jobs[window]
    shares, work_h = _mix(list(done["model"]), list(done["gpus"] * done["duration_s"]))
    return Saturation(len(done) / (until_h - warmup_h), shares, work_h)


def saturated_throughput(mechanism: str, cluster: Cluster, **arguments: Any) -> float:
    """:func:`saturated_run`'s jobs finished per hour (its arguments)."""
    return saturated_run(mechanism, cluster, **arguments).jobs_per_h
