"""Production-derived round instances (SPEC section 5, paper section 5.1), deterministic per seed."""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np

from synergy_opt.instance import Cluster, Job, Profile, RoundInstance
from synergy_opt.profiles import TASKS, cpu_gpu_ratios, model_info, models_by_task
from synergy_opt.profiling.sampler import modelled_profile
from synergy_opt.validation import SEED, Integer, Number, OneOf, Rule, Weights, boolean, checked

GPUS_PER_SERVER = 8
MEM_GB_PER_SERVER = 500.0
# Multi-GPU trace: the artifact's synthetic 1/2/4/8-GPU split with a Philly-like 16-GPU tail.
MULTI_GPU_DEMANDS = np.array([1, 2, 4, 8, 16])
MULTI_GPU_WEIGHTS = np.array([0.70, 0.10, 0.12, 0.05, 0.03])
MAX_GPUS = 2**20
# A log-normal factor with sigma 5 already spans e^(+-25); beyond, throughputs overflow to inf.
MAX_PROFILE_NOISE = 5.0
# Where each job's matrix comes from: its model's built-in matrix, or a performance model drawn around it.
JobKind = Literal["builtin", "modelled"]
JOB_KIND = OneOf(get_args(JobKind))
# The rules of the arguments generate_round and the trace generator share (synergy_opt.validation).
GENERATOR_ARGUMENTS: dict[str, Rule] = {
    "split": Weights(len(TASKS), "percentages of image, language, speech models"),
    "multi_gpu": boolean,
    "seed": SEED,
    "profile_noise": Number(0, MAX_PROFILE_NOISE),
    "cpu_per_gpu": Integer(among=cpu_gpu_ratios()),
}


@checked(gpus=Integer(GPUS_PER_SERVER, MAX_GPUS, step=GPUS_PER_SERVER), jobs=JOB_KIND, **GENERATOR_ARGUMENTS)
def generate_round(
    gpus: int = 128,
    split: tuple[float, float, float] = (20, 70, 10),
    multi_gpu: bool = False,
    seed: int = 0,
    profile_noise: float = 0.0,
    cpu_per_gpu: int = 3,
    jobs: JobKind = "builtin",
) -> RoundInstance:
    """A full-load round: jobs drawn until their GPU demand fills a cluster of ``gpus`` GPUs.

    Parameters
    ----------
    gpus
        Cluster size; a multiple of 8 (8-GPU servers with 500 GB and ``8 * cpu_per_gpu`` CPUs each).
    split
        Percentages of (image, language, speech) models; the model is uniform within its task.
    multi_gpu
        False: every job asks for 1 GPU. True: Philly-like demands of 1-16 GPUs.
    profile_noise
        Standard deviation of a per-entry log-normal factor on each job's matrix (kept monotone), so that
        no two jobs are alike.
    cpu_per_gpu
        CPU:GPU ratio of the servers; 3 (default) or one of the artifact's profiled variants 4, 5, 6.
    jobs
        ``"builtin"``: each job carries its model's built-in matrix. ``"modelled"``: each job's matrix comes
        from a job performance model drawn around its model's fitted one
        (:func:`synergy_opt.profiling.draw_job_model`), so jobs differ but keep their flat regions.
    """
    rng = np.random.default_rng(seed)
    cluster = Cluster(gpus // GPUS_PER_SERVER, GPUS_PER_SERVER, GPUS_PER_SERVER * cpu_per_gpu, MEM_GB_PER_SERVER)
    demands = _gpu_demands(rng, gpus, multi_gpu)
    names = draw_models(rng, len(demands), split)
    durations = draw_durations_min(rng, len(demands))
    profiles = job_profiles(rng, names, cpu_per_gpu, profile_noise, jobs)
    round_jobs = []
    for index, (demand, name, profile) in enumerate(zip(demands, names, profiles, strict=True)):
        floor = profile.throughput(cluster.cpu_per_gpu, cluster.mem_gb_per_gpu)
        work = float(durations[index] * max(floor, 1e-9))
        round_jobs.append(Job(f"j{index}", int(demand), profile, model=name, work=work))
    metadata: dict[str, Any] = {
        "generator": "synergy_opt.generate_round",
        "gpus": gpus,
        "split": list(split),
        "multi_gpu": multi_gpu,
        "seed": seed,
        "profile_noise": profile_noise,
        "cpu_per_gpu": cpu_per_gpu,
        "jobs": jobs,
    }
    return RoundInstance(cluster, tuple(round_jobs), metadata)


def _gpu_demands(rng: np.random.Generator, gpus: int, multi_gpu: bool) -> np.ndarray:
    if not multi_gpu:
        return np.ones(gpus, dtype=np.int64)
    demands = []
    free = gpus
    while free > 0:
        demand = int(rng.choice(MULTI_GPU_DEMANDS, p=MULTI_GPU_WEIGHTS))
        # The last draws shrink to what is left, so the round is exactly at full load.
        demand = min(demand, int(MULTI_GPU_DEMANDS[free >= MULTI_GPU_DEMANDS].max()))
        demands.append(demand)
        free -= demand
    return np.array(demands, dtype=np.int64)


def draw_gpu_demands(rng: np.random.Generator, count: int, multi_gpu: bool) -> np.ndarray:
    """``count`` independent GPU demands: all 1, or the multi-GPU mix (``MULTI_GPU_DEMANDS``)."""
    if not multi_gpu:
        return np.ones(count, dtype=np.int64)
    return rng.choice(MULTI_GPU_DEMANDS, size=count, p=MULTI_GPU_WEIGHTS).astype(np.int64)


def draw_models(rng: np.random.Generator, count: int, split: tuple[float, float, float]) -> list[str]:
    """A built-in model per job: its task by the workload ``split``, uniform within the task."""
    weights = np.asarray(split, dtype=float)
    by_task = models_by_task()
    tasks = rng.choice(len(TASKS), size=count, p=weights / weights.sum())
    picks = rng.random(count)
    names = []
    for task, pick in zip(tasks, picks, strict=True):
        choices = by_task[TASKS[task]]
        names.append(choices[int(pick * len(choices))])
    return names


def draw_durations_min(rng: np.random.Generator, count: int) -> np.ndarray:
    """Duration at proportional share: ``10^x`` minutes, ``x ~ U[1.5, 3]`` w.p. 0.8, else ``U[3, 4]``."""
    short = rng.random(count) < 0.8
    exponent = np.where(short, rng.uniform(1.5, 3.0, count), rng.uniform(3.0, 4.0, count))
    return np.power(10.0, exponent)


def job_profiles(
    rng: np.random.Generator, names: list[str], cpu_per_gpu: int, profile_noise: float, jobs: JobKind = "builtin"
) -> list[Profile]:
    """Each job's matrix: its model's built-in profile, or a modelled one (``jobs="modelled"``), with per-job
    noise when ``profile_noise > 0``.

    Draws from ``rng`` job after job, so the first ``k`` profiles of ``n`` are those of ``k`` (traces grow).
    """
    if jobs == "modelled":
        # Imported here: the profiling package reaches the simulator's traces, which import this module.

        profiles = []
        for name in names:
            profile = modelled_profile(rng, name, cpu_per_gpu)
            if profile_noise > 0:
                profile = _noisy(profile, rng.standard_normal(profile.tput.shape), profile_noise)
            profiles.append(profile)
        return profiles
    infos = {name: model_info(name, cpu_per_gpu) for name in set(names)}
    if not infos:
        return []
    noise = rng.standard_normal((len(names), *next(iter(infos.values())).profile.tput.shape))
    profiles = []
    for index, name in enumerate(names):
        profile = infos[name].profile
        if profile_noise > 0:
            profile = _noisy(profile, noise[index], profile_noise)
        profiles.append(profile)
    return profiles


def _noisy(profile: Profile, normal: np.ndarray, sigma: float) -> Profile:
    """Log-normal noise per entry, then made monotone again: more CPU or memory never slows a job."""
    tput = profile.tput * np.exp(sigma * normal)
    tput = np.maximum.accumulate(np.maximum.accumulate(tput, axis=0), axis=1)
    return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, tput, name=profile.name)
