"""Production-derived round instances (SPEC section 5, paper section 5.1), deterministic per seed.

With ``types`` (servers per GPU type), a heterogeneous round (SPEC 7): each type is filled at full load by its
own draws of GPU demands, which makes that type the jobs' *baseline* (where a heterogeneity-agnostic
scheduler happened to put them), and the jobs come in a shuffled order. Models are drawn as on one type,
independently of the type. Each job can use every type that holds its GPUs, with its model's matrix there
(:func:`synergy_opt.profiles.builtin_type_profile`; a type Gavel did not measure takes a ``speed_ratios``
entry, :func:`synergy_opt.profiling.gpu_types.builtin_type_profiles`), or a modelled job's
(:func:`synergy_opt.profiling.gpu_types.type_profiles`). Noise draws one log-normal factor per grid point and
job, shared by its types' matrices (one job measured on several GPUs: its CPU and storage stages do not change
with the GPU), each matrix then made monotone. Throughputs are in units of the reference type's share
(``v100``'s when the cluster has it: the built-in matrices unchanged there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args, overload

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, normalise, parse_type_counts
from synergy_opt.instance import Cluster, Job, Profile, RoundInstance
from synergy_opt.portable import exp, power_of_ten
from synergy_opt.profiles import (
    TASKS,
    cpu_gpu_ratios,
    gavel_gpu_types,
    model_info,
    models_by_task,
    speed_ratio,
)
from synergy_opt.profiling.gpu_types import builtin_speed_ratios, builtin_type_profiles, type_profiles
from synergy_opt.profiling.sampler import draw_job_model, modelled_profile
from synergy_opt.validation import SEED, Integer, Number, OneOf, Optional, Rule, Weights, boolean, checked

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


def type_counts(name: str, value: Any) -> dict[str, int]:
    """The rule for servers per GPU type: a dict of type -> servers, or ``"k80:4,p100:4,v100:4"``."""
    counts = parse_type_counts(name, value) if isinstance(value, str) else value
    if not isinstance(counts, Mapping) or not counts:
        raise InvalidInputError(name, value, "must be a dict of GPU type -> servers (or 'k80:4,p100:4,v100:4')")
    return {str(kind): Integer(1, MAX_GPUS // GPUS_PER_SERVER)(f"{name}[{kind!r}]", servers)
            for kind, servers in counts.items()}


@overload
def generate_round(gpus: int | None = None, split: tuple[float, float, float] = ..., multi_gpu: bool = ...,
                   seed: int = ..., profile_noise: float = ..., cpu_per_gpu: int = ..., jobs: JobKind = ...,
                   *, types: None = None, speed_ratios: Mapping[str, float] | None = ...) -> RoundInstance: ...


@overload
def generate_round(gpus: int | None = None, split: tuple[float, float, float] = ..., multi_gpu: bool = ...,
                   seed: int = ..., profile_noise: float = ..., cpu_per_gpu: int = ..., jobs: JobKind = ...,
                   *, types: Mapping[str, int] | str, speed_ratios: Mapping[str, float] | None = ...
                   ) -> HeteroRound: ...


@checked(gpus=Optional(Integer(GPUS_PER_SERVER, MAX_GPUS, step=GPUS_PER_SERVER)), jobs=JOB_KIND,
         types=Optional(type_counts), speed_ratios=Optional(builtin_speed_ratios), **GENERATOR_ARGUMENTS)
def generate_round(
    gpus: int | None = None,
    split: tuple[float, float, float] = (20, 70, 10),
    multi_gpu: bool = False,
    seed: int = 0,
    profile_noise: float = 0.0,
    cpu_per_gpu: int = 3,
    jobs: JobKind = "builtin",
    *,
    types: Mapping[str, int] | str | None = None,
    speed_ratios: Mapping[str, float] | None = None,
) -> RoundInstance | HeteroRound:
    """A full-load round: jobs drawn until their GPU demand fills a cluster of ``gpus`` GPUs.

    Parameters
    ----------
    gpus
        Cluster size; a multiple of 8 (8-GPU servers with 500 GB and ``8 * cpu_per_gpu`` CPUs each). Default
        128, or with ``types`` their servers' GPUs (a ``gpus`` given must then be that total).
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
    types
        Servers per GPU type, e.g. ``{"k80": 8, "p100": 8, "v100": 8}`` or ``"k80:8,p100:8,v100:8"``: a
        heterogeneous, type-free round (:class:`~synergy_opt.hetero.HeteroRound`, module docstring).
    speed_ratios
        With ``types``: the GPU speed of a type Gavel did not measure relative to a ``v100`` (``{"a100":
        2.0}``), for every model.
    """
    if types is not None:
        counts = type_counts("types", types)
        total = GPUS_PER_SERVER * sum(counts.values())
        if gpus is not None and gpus != total:
            raise InvalidInputError("gpus", gpus, f"the types' servers have {total} GPUs")
        return _hetero_round(counts, split, multi_gpu, seed, profile_noise, cpu_per_gpu, jobs, speed_ratios or {})
    if speed_ratios:
        raise InvalidInputError("speed_ratios", speed_ratios, "speed ratios are for a round of several types")
    gpus = 128 if gpus is None else gpus
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
    return power_of_ten(exponent)


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
    tput = profile.tput * exp(sigma * normal)
    tput = np.maximum.accumulate(np.maximum.accumulate(tput, axis=0), axis=1)
    return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, tput, name=profile.name)


def _hetero_round(counts: dict[str, int], split: tuple[float, float, float], multi_gpu: bool, seed: int,
                  profile_noise: float, cpu_per_gpu: int, jobs: JobKind, ratios: Mapping[str, float]) -> HeteroRound:
    """The heterogeneous round of :func:`generate_round` with ``types`` (module docstring)."""
    rng = np.random.default_rng(seed)
    cluster = HeteroCluster.of(counts, GPUS_PER_SERVER, GPUS_PER_SERVER * cpu_per_gpu, MEM_GB_PER_SERVER)
    used = cluster_speed_ratios(cluster, ratios)
    demands, baselines = [], []
    for server_type in cluster.types:
        drawn = _gpu_demands(rng, server_type.total_gpus, multi_gpu)
        demands.append(drawn)
        baselines += [server_type.name] * drawn.size
    order = rng.permutation(len(baselines))
    gpus = np.concatenate(demands)[order]
    baseline = [baselines[j] for j in order]
    names = draw_models(rng, len(gpus), split)
    durations = draw_durations_min(rng, len(gpus))
    round_jobs = []
    for index, name in enumerate(names):
        every = hetero_job_profiles(rng, name, cluster, used, profile_noise, cpu_per_gpu, jobs)
        if cluster.normalises_builtin:  # by the reference type's matrix, also for a job too large for it
            every = normalise(every, cluster.reference_type)
        profiles = {kind: every[kind] for kind in cluster.names if cluster[kind].total_gpus >= gpus[index]}
        share = cluster[baseline[index]]
        floor = profiles[baseline[index]].throughput(share.cpu_per_gpu, share.mem_gb_per_gpu)
        round_jobs.append(HeteroJob(f"j{index}", int(gpus[index]), profiles, baseline[index], name,
                                    work=float(durations[index] * max(floor, 1e-9))))
    metadata: dict[str, Any] = {
        "generator": "synergy_opt.generate_round",
        "types": dict(counts),
        "split": list(split),
        "multi_gpu": multi_gpu,
        "seed": seed,
        "profile_noise": profile_noise,
        "cpu_per_gpu": cpu_per_gpu,
        "jobs": jobs,
    }
    if used:
        metadata["speed_ratios"] = dict(used)
    return HeteroRound(cluster, tuple(round_jobs), metadata)


def cluster_speed_ratios(cluster: HeteroCluster, ratios: Mapping[str, float]) -> dict[str, float]:
    """``speed_ratios`` for ``cluster``: each names a type of the cluster (one that is not would be ignored
    silently), and each type Gavel did not measure has one."""
    for kind, ratio in ratios.items():
        if kind not in cluster.names:
            raise InvalidInputError(f"speed_ratios[{kind!r}]", ratio,
                                    f"not a GPU type of the cluster ({', '.join(cluster.names)})")
    missing = [kind for kind in cluster.names if kind not in gavel_gpu_types() and kind not in ratios]
    if missing:
        raise InvalidInputError("types", missing[0], "a GPU type Gavel did not measure needs its speed_ratios entry")
    return dict(ratios)


def hetero_job_profiles(rng: np.random.Generator, name: str, cluster: HeteroCluster, ratios: Mapping[str, float],
                        profile_noise: float, cpu_per_gpu: int = 3, jobs: JobKind = "builtin") -> dict[str, Profile]:
    """A job of built-in model ``name``: its matrix on every type of ``cluster`` (module docstring; ``ratios``:
    the speed ratios of types Gavel did not measure; the caller keeps the types that hold the job's GPUs), in
    units of the reference point on a ``v100`` (3 CPUs, 62.5 GB per GPU), not normalised to the cluster's
    reference type. Draws a modelled job's model, then one noise factor per grid point shared by its types, from
    ``rng``."""
    if jobs == "modelled":
        grid = model_info(name, cpu_per_gpu).profile
        model = draw_job_model(rng, name)
        try:
            every = type_profiles(model, {kind: _ratio(name, kind, ratios) for kind in cluster.names},
                                  grid.cpu_per_gpu, grid.mem_gb_per_gpu)
        except InvalidInputError as error:  # a ratio the caller gave (Gavel's measured ones are moderate)
            if not error.field.startswith("ratios["):
                raise
            raise InvalidInputError(f"speed_{error.field}", error.value, error.reason) from None
    else:
        every = builtin_type_profiles(name, ratios, cpu_per_gpu)
    profiles = {kind: every[kind] for kind in cluster.names}
    if profile_noise > 0:
        normal = rng.standard_normal(next(iter(profiles.values())).tput.shape)
        profiles = {kind: _noisy(profile, normal, profile_noise) for kind, profile in profiles.items()}
    return profiles


def _ratio(name: str, kind: str, given: Mapping[str, float]) -> float:
    """A type's GPU speed relative to a v100 for built-in model ``name``: given, else Gavel's measurement."""
    return given[kind] if kind in given else speed_ratio(name, kind)
