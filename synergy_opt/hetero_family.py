"""A family of heterogeneous rounds beyond ``generate_round(types=...)`` (issue 20's aims on rounds nobody tuned
against).

``generate_round(types=...)`` draws every type's servers alike (8 GPUs, 24 CPUs, 500 GB), fills each type with
the artifact's 1/2/4/8/16-GPU mix and lets every job use every type that holds it. The type choices of near-opt
and the joint decomposition were tuned on those rounds. Realistic clusters differ: GPU types come in servers of
their own shape (a K80 box of 4 GPUs, a V100 box of 8 with more CPUs per GPU), in skewed proportions, sometimes
without the reference type or with a fourth type, and some jobs cannot use every type. This family draws them:

- ``types``: any server types (:class:`~synergy_opt.hetero.ServerType`: servers, GPUs, CPUs and memory per
  server each), any GPU types (one Gavel did not measure takes a ``speed_ratios`` entry);
- ``demands``: :func:`~synergy_opt.round_family.draw_demands`'s kinds, drawn for each type's servers until it
  is full (that type is the jobs' baseline), so every type is at full load;
- ``split`` or ``models``, ``profile_noise`` and ``jobs`` (built-in or modelled) as
  :func:`~synergy_opt.round_family.family_round`; a job's matrices per type as ``generate_round``'s
  (:func:`~synergy_opt.generate.hetero_job_profiles`, one noise draw shared by its types), normalised to the
  reference type's proportional share (SPEC 7's unit, whatever that type's server shape);
- ``limited``: the share of jobs limited to some types (their baseline and a random subset of the others, on
  a stream of its own: ``limited=0`` leaves the other draws as they are).

:data:`HETERO_FAMILY` names the members the benchmarks report (each a fixed setting at ``scale`` 1, about 100
GPUs; ``scale`` multiplies every type's servers) and :func:`hetero_member_round` draws a member's round.
Everything is deterministic per seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.generate import (
    JOB_KIND,
    MAX_PROFILE_NOISE,
    JobKind,
    cluster_speed_ratios,
    draw_models,
    hetero_job_profiles,
)
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, ServerType, normalise
from synergy_opt.profiles import TASKS, model_info, model_names
from synergy_opt.profiling.gpu_types import builtin_speed_ratios
from synergy_opt.round_family import DEMANDS, MEMORY_BOUND_MODELS, Demands, GpuKind, draw_demands, model_choice
from synergy_opt.validation import SEED, InstanceOf, Integer, Items, Number, OneOf, Optional, Weights, checked

# The stream of the limited jobs' types (its own, so that limiting jobs does not shift the round's other draws).
LIMITED_STREAM = 20
# The matrices' grid: the built-in profiles' (the same matrices at every CPU:GPU ratio they were profiled for).
GRID_CPU_PER_GPU = 3
MAX_SCALE = 1024


def _cluster(name: str, value: Any) -> HeteroCluster:
    """``value`` if a cluster, else the cluster of the server types it lists (each a :class:`ServerType`)."""
    if isinstance(value, HeteroCluster):
        return value
    return HeteroCluster(Items(InstanceOf(ServerType), "server types (ServerType)")(name, value))


@checked(types=_cluster, demands=OneOf(DEMANDS),
         split=Weights(len(TASKS), "percentages of image, language, speech models"), models=model_choice,
         profile_noise=Number(0, MAX_PROFILE_NOISE), jobs=JOB_KIND, limited=Number(0, 1),
         speed_ratios=Optional(builtin_speed_ratios), seed=SEED)
def hetero_family_round(
    types: HeteroCluster | Sequence[ServerType],
    demands: Demands = "philly",
    split: tuple[float, float, float] = (20, 70, 10),
    models: tuple[str, ...] | None = None,
    profile_noise: float = 0.0,
    jobs: JobKind = "builtin",
    limited: float = 0.0,
    speed_ratios: Mapping[str, float] | None = None,
    seed: int = 0,
) -> HeteroRound:
    """A type-free heterogeneous round of the family, every type at full load (module docstring).

    Parameters
    ----------
    types
        The cluster, or its server types (the reference type: ``v100`` when there is one, else the first).
    demands
        How GPU demands are drawn for each type's servers (:func:`~synergy_opt.round_family.draw_demands`).
    split, models, profile_noise, jobs
        As for :func:`~synergy_opt.round_family.family_round`.
    limited
        The share of jobs (each with this probability) limited to their baseline type and a random subset of
        the other types that hold them.
    speed_ratios
        The GPU speed relative to a ``v100`` of each type Gavel did not measure (``{"a100": 2.0}``).
    seed
        Everything is drawn from ``numpy.random.default_rng(seed)`` (the limited jobs' types from a stream of
        their own).
    """
    cluster = _cluster("types", types)  # a HeteroCluster already when called through the checks
    used = cluster_speed_ratios(cluster, speed_ratios or {})
    _check_reference_share(cluster)
    rng = np.random.default_rng(seed)
    sizes, baselines = [], []
    for server_type in cluster.types:
        drawn = draw_demands(rng, server_type.total_gpus, demands, server_type.gpus_per_server)
        sizes.append(drawn)
        baselines += [server_type.name] * drawn.size
    order = rng.permutation(len(baselines))
    gpus = np.concatenate(sizes)[order]
    baseline = [baselines[j] for j in order]
    if models is None:
        names = draw_models(rng, gpus.size, split)
    else:
        names = [models[int(k)] for k in rng.integers(len(models), size=gpus.size)]
    limiter = np.random.default_rng([seed, LIMITED_STREAM])
    round_jobs = []
    for index, name in enumerate(names):
        # Normalised on every type, then the types that hold the job kept: one unit, also for the jobs the
        # reference type cannot hold.
        every = normalise(hetero_job_profiles(rng, name, cluster, used, profile_noise, GRID_CPU_PER_GPU, jobs),
                          cluster.reference_type)
        profiles = {kind: every[kind] for kind in cluster.names if cluster[kind].total_gpus >= gpus[index]}
        if limited > 0 and limiter.random() < limited:
            others = [kind for kind in profiles if kind != baseline[index]]
            keep = {baseline[index], *(kind for kind in others if limiter.random() < 0.5)}
            profiles = {kind: profile for kind, profile in profiles.items() if kind in keep}
        round_jobs.append(HeteroJob(f"j{index}", int(gpus[index]), profiles, baseline[index], name))
    metadata: dict[str, Any] = {
        "generator": "synergy_opt.hetero_family_round", "types": [t.to_dict() for t in cluster.types],
        "demands": demands, "split": list(split), "models": None if models is None else list(models),
        "profile_noise": profile_noise, "jobs": jobs, "limited": limited, "seed": seed,
    }
    if used:
        metadata["speed_ratios"] = used
    return HeteroRound(cluster, tuple(round_jobs), metadata)


def _check_reference_share(cluster: HeteroCluster) -> None:
    """Every job is normalised at the reference type's proportional share: it must lie on the matrices' grid
    (below its smallest point a matrix reads 0)."""
    grid = model_info(model_names()[0], GRID_CPU_PER_GPU).profile
    reference = cluster.reference_type
    where = f"types[{cluster.names.index(reference.name)}]"
    for field_name, per_gpu, least in (("cpus_per_server", reference.cpu_per_gpu, grid.cpu_per_gpu[0]),
                                       ("mem_gb_per_server", reference.mem_gb_per_gpu, grid.mem_gb_per_gpu[0])):
        if per_gpu < least:
            raise InvalidInputError(f"{where}.{field_name}", getattr(reference, field_name),
                                    f"the reference type {reference.name}'s share, {per_gpu:g} per GPU, is below the "
                                    f"matrices' smallest point ({least:g} per GPU), where every job is normalised")


# ------------------------------------------------------------------------------------------------- members


@dataclass(frozen=True)
class HeteroMember:
    """A member of the family: server types at ``scale`` 1 and :func:`hetero_family_round`'s other settings.

    ``gpu_kind`` is ``"single"`` when every job has one GPU, else ``"multi"``."""

    name: str
    gpu_kind: GpuKind
    description: str
    types: tuple[ServerType, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def cluster(self, scale: int = 1) -> HeteroCluster:
        """The member's cluster with every type's servers multiplied by ``scale``."""
        scale = Integer(1, MAX_SCALE)("scale", scale)
        return HeteroCluster(tuple(replace(t, servers=t.servers * scale) for t in self.types))


def _box(name: str, servers: int, gpus: int = 8, cpus_per_gpu: float = 3, mem_gb_per_gpu: float = 62.5
         ) -> ServerType:
    return ServerType(name, servers, gpus, gpus * cpus_per_gpu, gpus * mem_gb_per_gpu)


def _members() -> dict[str, HeteroMember]:
    even = (_box("k80", 4), _box("p100", 4), _box("v100", 4))
    members = [
        HeteroMember("skewed-k80", "multi", "philly demands; 8 K80, 4 P100, 2 V100 servers of 8 GPUs",
                     (_box("k80", 8), _box("p100", 4), _box("v100", 2))),
        HeteroMember("skewed-v100", "multi", "philly demands; 2 K80, 4 P100, 8 V100 servers of 8 GPUs",
                     (_box("k80", 2), _box("p100", 4), _box("v100", 8))),
        HeteroMember("shapes", "multi", "philly demands; K80 boxes of 4 GPUs, 4 CPUs and 62.5 GB per GPU; "
                     "P100 of 8, 3 CPUs, 31.25 GB; V100 of 16, 5 CPUs, 125 GB",
                     (_box("k80", 8, 4, 4), _box("p100", 4, 8, 3, 31.25), _box("v100", 2, 16, 5, 125))),
        HeteroMember("cpu-scarce", "multi", "philly demands; V100 servers with 2 CPUs per GPU, K80 with 6",
                     (_box("k80", 4, 8, 6), _box("p100", 4), _box("v100", 4, 8, 2))),
        HeteroMember("spanning", "multi", "spanning demands (every multi-GPU job spans servers)", even,
                     {"demands": "spanning"}),
        HeteroMember("odd", "multi", "odd demands: 1 GPU or 2-24 GPUs", even, {"demands": "odd"}),
        HeteroMember("limited", "multi", "philly demands; 40% of jobs limited to some types", even,
                     {"limited": 0.4}),
        HeteroMember("four-types", "multi", "philly demands; K80, P100, V100 and A100 (a GPU twice a V100's "
                     "speed, not in Gavel's data), 3 servers each",
                     (_box("k80", 3), _box("p100", 3), _box("v100", 3), _box("a100", 3, 8, 4, 125)),
                     {"speed_ratios": {"a100": 2.0}}),
        HeteroMember("no-v100", "multi", "philly demands; K80 and P100 only (P100 the reference type)",
                     (_box("p100", 6), _box("k80", 6))),
        HeteroMember("memory", "multi", "memory-bound models (AlexNet, ShuffleNet, M5) on 6 CPUs per GPU",
                     (_box("k80", 4, 8, 6), _box("p100", 4, 8, 6), _box("v100", 4, 8, 6)),
                     {"models": MEMORY_BOUND_MODELS}),
        HeteroMember("modelled", "multi", "philly demands, modelled jobs, noise 0.05", even,
                     {"jobs": "modelled", "profile_noise": 0.05}),
        HeteroMember("single-shapes", "single", "one GPU a job on the shapes member's servers, noise 0.05",
                     (_box("k80", 8, 4, 4), _box("p100", 4, 8, 3, 31.25), _box("v100", 2, 16, 5, 125)),
                     {"demands": "single", "profile_noise": 0.05}),
        HeteroMember("single-limited", "single", "one GPU a job, skewed to K80, 40% limited, modelled",
                     (_box("k80", 8), _box("p100", 4), _box("v100", 2)),
                     {"demands": "single", "limited": 0.4, "jobs": "modelled"}),
    ]
    return {member.name: member for member in members}


HETERO_FAMILY: Mapping[str, HeteroMember] = MappingProxyType(_members())


def hetero_member_round(name: str, scale: int = 1, seed: int = 0) -> HeteroRound:
    """Member ``name``'s round (its servers times ``scale``) for ``seed``."""
    if name not in HETERO_FAMILY:
        raise UnknownNameError("member", name, tuple(HETERO_FAMILY))
    member = HETERO_FAMILY[name]
    return hetero_family_round(member.cluster(scale), seed=seed, **member.settings)
