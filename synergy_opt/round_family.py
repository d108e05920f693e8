"""A family of round generators beyond :func:`~synergy_opt.generate.generate_round` (issue 22).

``generate_round`` draws the paper's production-derived rounds: 8-GPU servers, the artifact's 1/2/4/8/16-GPU
mix, one split of tasks. The mechanisms were tuned on those rounds. This family covers what production rounds
can also look like, so that figures are measured on rounds nobody tuned against:

- GPU demands of any size up to a few servers, odd sizes included, and jobs that must span servers
  (``demands``, :data:`DEMANDS`);
- any split of image, language and speech models, from (100, 0, 0) to (0, 0, 100) (``split``), or a
  chosen set of models, e.g. the memory-bound ones (``models``, :data:`MEMORY_BOUND_MODELS`);
- CPU:GPU ratios 3-6 (``cpu_per_gpu``, the artifact's profiled ratios), servers of 4, 8 or 16 GPUs
  (``gpus_per_server``) and any memory per GPU (``mem_gb_per_gpu``);
- profile noise (``profile_noise``, 0-0.1 in the family) and modelled jobs (``jobs="modelled"``).

:func:`family_round` draws one round from such settings; :data:`FAMILY` names the members the benchmarks
report, each a fixed setting (one of them, ``*-mixed``, draws its setting per seed), and :func:`member_round`
draws a member's round. Everything is deterministic per seed. It reuses ``generate.py``'s pieces: the models
by split (:func:`~synergy_opt.generate.draw_models`), the profiles, their noise and modelled jobs
(:func:`~synergy_opt.generate.job_profiles`), the artifact's multi-GPU mix.

Demands (``G`` GPUs per server), each job drawn independently until the cluster is full; the last job is cut
to the GPUs left, so the round is exactly at full load and any size below the largest can occur:

===========  =====================================================================================
``single``   every job 1 GPU
``philly``   ``generate_round``'s mix: 1, 2, 4, 8, 16 GPUs w.p. 0.70, 0.10, 0.12, 0.05, 0.03
``powers``   1, 2, 4, 8, 16 GPUs, 1 four times as likely as each of the others (issue 22's generator)
``odd``      1 GPU w.p. 1/2, else any size from 2 to ``3 G`` (uniform): odd sizes, up to three servers
``spanning`` 1 GPU w.p. 1/2, else any size from ``G + 1`` to ``3 G``: every multi-GPU job spans servers
===========  =====================================================================================

Public API
----------
``family_round(gpus, demands, gpus_per_server, split, models, cpu_per_gpu, mem_gb_per_gpu, profile_noise,
jobs, seed) -> RoundInstance``
``draw_demands(rng, gpus, demands, gpus_per_server) -> ndarray``
``Member``, ``FAMILY``, ``member_round(name, gpus, seed, profile_noise=None) -> RoundInstance``
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import (
    GPUS_PER_SERVER,
    JOB_KIND,
    MAX_GPUS,
    MAX_PROFILE_NOISE,
    MEM_GB_PER_SERVER,
    MULTI_GPU_DEMANDS,
    MULTI_GPU_WEIGHTS,
    JobKind,
    draw_models,
    job_profiles,
)
from synergy_opt.instance import Cluster, Job, RoundInstance
from synergy_opt.profiles import TASKS, cpu_gpu_ratios, model_names
from synergy_opt.validation import SEED, Integer, Items, Number, OneOf, Optional, Rule, Weights, checked

Demands = Literal["single", "philly", "powers", "odd", "spanning"]
DEMANDS: tuple[str, ...] = get_args(Demands)
# Which of the aims a member is judged by: every job one GPU, or some with several.
GpuKind = Literal["single", "multi"]
# generate_round's memory per GPU (500 GB over 8 GPUs), the point the built-in profiles are normalised at.
DEFAULT_MEM_GB_PER_GPU = MEM_GB_PER_SERVER / GPUS_PER_SERVER
# The models whose best configs need more than the proportional memory (AlexNet and ShuffleNet from 12 CPUs
# per GPU, M5 from 6): with CPUs to spare (6 per GPU) memory is what they compete for.
MEMORY_BOUND_MODELS = ("alexnet", "shufflenet", "m5")
MAX_GPUS_PER_SERVER = 64
MAX_MEM_GB_PER_GPU = 1e4
# The family's noise (issue 22: noise 0-0.1); family_round itself takes any noise generate_round takes.
FAMILY_NOISE = 0.1
# powers: 1, 2, 4, 8, 16 GPUs, 1 four times as likely as each other size.
POWERS = np.array([1, 2, 4, 8, 16])
POWER_WEIGHTS = np.array([4.0, 1.0, 1.0, 1.0, 1.0]) / 8.0


# None, or a non-empty sequence of built-in model names (each checked against the known ones).
model_choice = Optional(Items(OneOf(model_names), "built-in model names"))


# The rules of family_round's arguments (synergy_opt.validation); gpus is checked against gpus_per_server.
FAMILY_ARGUMENTS: dict[str, Rule] = {
    "gpus": Integer(1, MAX_GPUS),
    "demands": OneOf(DEMANDS),
    "gpus_per_server": Integer(1, MAX_GPUS_PER_SERVER),
    "split": Weights(len(TASKS), "percentages of image, language, speech models"),
    "models": model_choice,
    "cpu_per_gpu": Integer(among=cpu_gpu_ratios()),
    "mem_gb_per_gpu": Number(0, MAX_MEM_GB_PER_GPU, low_open=True),
    "profile_noise": Number(0, MAX_PROFILE_NOISE),
    "jobs": JOB_KIND,
    "seed": SEED,
}


@checked(**FAMILY_ARGUMENTS)
def family_round(
    gpus: int = 128,
    demands: Demands = "single",
    gpus_per_server: int = GPUS_PER_SERVER,
    split: tuple[float, float, float] = (20, 70, 10),
    models: tuple[str, ...] | None = None,
    cpu_per_gpu: int = 3,
    mem_gb_per_gpu: float = DEFAULT_MEM_GB_PER_GPU,
    profile_noise: float = 0.0,
    jobs: JobKind = "builtin",
    seed: int = 0,
) -> RoundInstance:
    """A full-load round of the family: jobs drawn until their GPU demand fills ``gpus`` GPUs.

    Parameters
    ----------
    gpus
        Cluster size, a multiple of ``gpus_per_server``.
    demands
        How GPU demands are drawn (module docstring, :func:`draw_demands`).
    gpus_per_server
        GPUs per server ``G``; a server has ``G * cpu_per_gpu`` CPUs and ``G * mem_gb_per_gpu`` GB.
    split
        Percentages of (image, language, speech) models, the model uniform within its task (as
        ``generate_round``); ignored when ``models`` is given.
    models
        Built-in model names: each job's model uniform among them (e.g. :data:`MEMORY_BOUND_MODELS`).
    cpu_per_gpu
        CPU:GPU ratio of the servers, one the built-in profiles were profiled for (3, 4, 5, 6).
    mem_gb_per_gpu
        Memory per GPU of the servers (default 62.5 GB, ``generate_round``'s).
    profile_noise, jobs
        As for ``generate_round``: log-normal noise per matrix entry; built-in or modelled jobs.
    seed
        Everything is drawn from ``numpy.random.default_rng(seed)``.
    """
    if gpus % gpus_per_server:
        raise InvalidInputError("gpus", gpus, f"must be a multiple of gpus_per_server={gpus_per_server}")
    rng = np.random.default_rng(seed)
    cluster = Cluster(gpus // gpus_per_server, gpus_per_server, gpus_per_server * cpu_per_gpu,
                      gpus_per_server * mem_gb_per_gpu)
    sizes = draw_demands(rng, gpus, demands, gpus_per_server)
    if models is None:
        names = draw_models(rng, sizes.size, split)
    else:
        names = [models[int(k)] for k in rng.integers(len(models), size=sizes.size)]
    profiles = job_profiles(rng, names, cpu_per_gpu, profile_noise, jobs)
    round_jobs = tuple(Job(f"j{index}", int(size), profile, model=name)
                       for index, (size, name, profile) in enumerate(zip(sizes, names, profiles, strict=True)))
    metadata: dict[str, Any] = {
        "generator": "synergy_opt.family_round", "gpus": gpus, "demands": demands,
        "gpus_per_server": gpus_per_server, "split": list(split), "models": None if models is None else list(models),
        "cpu_per_gpu": cpu_per_gpu, "mem_gb_per_gpu": mem_gb_per_gpu, "profile_noise": profile_noise,
        "jobs": jobs, "seed": seed,
    }
    return RoundInstance(cluster, round_jobs, metadata)


def draw_demands(rng: np.random.Generator, gpus: int, demands: Demands, gpus_per_server: int) -> np.ndarray:
    """GPU demands filling exactly ``gpus`` GPUs, drawn one job after another by ``demands`` (module
    docstring); the last job is cut to the GPUs left."""
    if demands == "single":
        return np.ones(gpus, dtype=np.int64)
    sizes: list[int] = []
    left = gpus
    while left > 0:
        size = _draw_size(rng, demands, gpus_per_server)
        sizes.append(min(size, left))
        left -= sizes[-1]
    return np.array(sizes, dtype=np.int64)


def _draw_size(rng: np.random.Generator, demands: Demands, gpus_per_server: int) -> int:
    if demands == "philly":
        return int(rng.choice(MULTI_GPU_DEMANDS, p=MULTI_GPU_WEIGHTS))
    if demands == "powers":
        return int(rng.choice(POWERS, p=POWER_WEIGHTS))
    low = 2 if demands == "odd" else gpus_per_server + 1
    if rng.random() < 0.5:
        return 1
    return int(rng.integers(low, 3 * gpus_per_server + 1))


# ------------------------------------------------------------------------------------------------- members


@dataclass(frozen=True)
class Member:
    """A member of the family: a fixed setting of :func:`family_round` (or, with ``draw``, one drawn per seed).

    ``gpu_kind`` is ``"single"`` when every job has one GPU, else ``"multi"`` (the aims differ).
    """

    name: str
    gpu_kind: GpuKind
    description: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    draw: Callable[[np.random.Generator], dict[str, Any]] | None = None

    def settings_for(self, seed: int) -> dict[str, Any]:
        """``family_round``'s keyword arguments for ``seed`` (besides ``gpus`` and ``seed``)."""
        settings = dict(self.settings)
        if self.draw is not None:
            # Its own stream, so the setting drawn does not shift the round's draws.
            settings.update(self.draw(np.random.default_rng([seed, MIXED_STREAM])))
        return settings


MIXED_STREAM = 22
MIXED_SERVER_SIZES = (4, 8, 16)
MIXED_DEMANDS = ("philly", "powers", "odd", "spanning")


def _mixed(single: bool) -> Callable[[np.random.Generator], dict[str, Any]]:
    """Every axis drawn per seed: a split anywhere in the simplex (a corner one time in four), the memory-bound
    models one time in five, a CPU:GPU ratio 3-6, 4-, 8- or 16-GPU servers, noise 0-0.1, builtin or modelled."""
    def draw(rng: np.random.Generator) -> dict[str, Any]:
        corner = rng.random() < 0.25
        split = np.eye(3)[rng.integers(3)] * 100 if corner else rng.dirichlet(np.ones(3)) * 100
        settings: dict[str, Any] = {
            "demands": "single" if single else MIXED_DEMANDS[int(rng.integers(len(MIXED_DEMANDS)))],
            "split": tuple(round(float(v), 3) for v in split),
            "models": MEMORY_BOUND_MODELS if rng.random() < 0.2 else None,
            "cpu_per_gpu": int(rng.choice(cpu_gpu_ratios())),
            "gpus_per_server": int(rng.choice(MIXED_SERVER_SIZES)),
            "profile_noise": round(float(rng.uniform(0.0, FAMILY_NOISE)), 4),
            "jobs": "modelled" if rng.random() < 0.5 else "builtin",
        }
        return settings
    return draw


def _members() -> dict[str, Member]:
    members: list[Member] = []
    kinds: tuple[tuple[GpuKind, Demands], ...] = (("single", "single"), ("multi", "powers"))
    for kind, demands in kinds:
        prefix = "single" if kind == "single" else "multi"
        base = {"demands": demands}
        members += [
            Member(prefix, kind, f"{demands} demands, split (20, 70, 10), 8-GPU servers, CPU:GPU 3", base),
            Member(f"{prefix}-image", kind, "image models only: split (100, 0, 0)", {**base, "split": (100, 0, 0)}),
            Member(f"{prefix}-speech", kind, "speech models only: split (0, 0, 100)", {**base, "split": (0, 0, 100)}),
            Member(f"{prefix}-memory", kind, "memory-bound mix: AlexNet, ShuffleNet, M5 on CPU:GPU 6 servers",
                   {**base, "models": MEMORY_BOUND_MODELS, "cpu_per_gpu": 6}),
            Member(f"{prefix}-ratio-5", kind, "CPU:GPU 5 servers", {**base, "cpu_per_gpu": 5}),
            Member(f"{prefix}-modelled", kind, "modelled jobs (each job its own performance model)",
                   {**base, "jobs": "modelled"}),
            Member(f"{prefix}-servers-4", kind, "4-GPU servers", {**base, "gpus_per_server": 4}),
            Member(f"{prefix}-servers-16", kind, "16-GPU servers", {**base, "gpus_per_server": 16}),
        ]
        if kind == "multi":
            members += [
                Member("multi-odd", kind, "odd demands: 1 GPU or any size 2-24 (up to three servers)",
                       {"demands": "odd"}),
                Member("multi-spanning", kind, "spanning demands: 1 GPU or 9-24 GPUs (every multi-GPU job spans)",
                       {"demands": "spanning"}),
            ]
        members.append(Member(f"{prefix}-mixed", kind, "every axis drawn per seed (split, models, ratio, "
                              "server size, noise 0-0.1, modelled jobs" + ("" if kind == "single" else ", demands")
                              + ")", draw=_mixed(kind == "single")))
    return {member.name: member for member in members}


FAMILY: Mapping[str, Member] = MappingProxyType(_members())


@checked(name=OneOf(tuple(FAMILY)), gpus=Integer(1, MAX_GPUS), seed=SEED,
         profile_noise=Optional(Number(0, MAX_PROFILE_NOISE)))
def member_round(name: str, gpus: int = 128, seed: int = 0, profile_noise: float | None = None) -> RoundInstance:
    """The round of family member ``name`` (:data:`FAMILY`) at ``gpus`` GPUs for ``seed``.

    ``profile_noise`` replaces the member's (0 for a fixed member; drawn per seed in 0-0.1 for ``*-mixed``).
    The round's metadata names the member.
    """
    settings = FAMILY[name].settings_for(seed)
    if profile_noise is not None:
        settings["profile_noise"] = profile_noise
    instance = family_round(gpus, seed=seed, **settings)
    return RoundInstance(instance.cluster, instance.jobs, {**instance.metadata, "member": name})
