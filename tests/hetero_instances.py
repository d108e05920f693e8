"""Random tiny heterogeneous rounds (2-3 GPU types, noisy matrices) and brute force over them (issue 20's tests).

A job's matrices per type are one random matrix times a per-type GPU cap with log-normal noise per entry, so
types are related as the generator relates them (a slower GPU caps the peak) but no two jobs are alike.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

import synergy_opt as so
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, ServerType
from tests.random_instances import best_choice_total, random_profile

NAMES = ("k80", "p100", "v100")


def random_hetero_round(rng: np.random.Generator, types: int | None = None, max_jobs: int = 4,
                        max_axis: int = 3, type_free: bool = True) -> HeteroRound:
    """2-3 types of 1-2 servers (1-4 GPUs, 2-24 CPUs, 50-500 GB each), up to ``max_jobs`` jobs of 1-4 GPUs."""
    count = int(types if types is not None else rng.integers(2, 4))
    kinds = []
    for name in NAMES[:count]:
        kinds.append(ServerType(name, int(rng.integers(1, 3)), int(rng.integers(1, 5)), float(rng.integers(2, 25)),
                                float(rng.choice([50.0, 100.0, 250.0, 500.0]))))
    cluster = HeteroCluster(tuple(kinds))
    free = {t.name: t.total_gpus for t in kinds}
    jobs = []
    for index in range(int(rng.integers(1, max_jobs + 1))):
        open_types = [name for name, left in free.items() if left > 0]
        if not open_types:
            break
        baseline = str(rng.choice(open_types))
        gpus = int(rng.integers(1, min(free[baseline], 4) + 1))
        free[baseline] -= gpus
        base = random_profile(rng, max_axis, monotone=True)
        profiles = {}
        for k, server_type in enumerate(kinds):
            if server_type.total_gpus < gpus or (not type_free and server_type.name != baseline):
                continue
            cap = (k + 1) / count * base.tput.max()
            noisy = np.minimum(base.tput, cap) * np.exp(0.05 * rng.standard_normal(base.tput.shape))
            noisy = np.maximum.accumulate(np.maximum.accumulate(noisy, axis=0), axis=1)
            profiles[server_type.name] = so.Profile(base.cpu_per_gpu, base.mem_gb_per_gpu, np.round(noisy, 3))
        if type_free and rng.random() < 0.3 and len(profiles) > 1:  # some jobs limited to fewer types
            drop = [name for name in profiles if name != baseline]
            profiles.pop(str(rng.choice(drop)))
        jobs.append(HeteroJob(f"j{index}", gpus, profiles, baseline))
    return HeteroRound(cluster, tuple(jobs))


def job_options(instance: HeteroRound, index: int) -> list[tuple[int, float, float, float]]:
    """Every (type, per-GPU CPUs, per-GPU GB, W) a job may take in the type-free ILP: each type whose proportional
    share reaches its floor (H0), that type's grid with the share added, configs at or above the share's
    throughput (H6)."""
    job = instance.jobs[index]
    options = []
    for k, server_type in enumerate(instance.cluster.types):
        if server_type.name not in job.profiles:
            continue
        profile = job.profiles[server_type.name]
        floor = profile.throughput(server_type.cpu_per_gpu, server_type.mem_gb_per_gpu)
        if floor < instance.floors[index]:
            continue
        grid = profile.with_point(server_type.cpu_per_gpu, server_type.mem_gb_per_gpu)
        if floor <= 0:  # no CPUs and no memory, worth 0: what an allocation may give a job of floor 0 (SPEC 4)
            options.append((k, 0.0, 0.0, 0.0))
        for a, c in enumerate(grid.cpu_per_gpu):
            for b, m in enumerate(grid.mem_gb_per_gpu):
                if grid.tput[a, b] >= floor:
                    options.append((k, float(c), float(m), float(grid.tput[a, b])))
    return options


def brute_force_hetero_ideal(instance: HeteroRound, gpu_weighted: bool = False) -> float:
    """Every combination of one option per job, each type's GPUs, CPUs and memory within its servers' totals
    (partial combinations over a total already are dropped: they only grow)."""
    cluster = instance.cluster
    caps = np.array([[t.total_gpus, t.servers * t.cpus_per_server, t.servers * t.mem_gb_per_server]
                     for t in cluster.types]).ravel()
    use, value = np.zeros((1, caps.size)), np.zeros(1)
    for index, job in enumerate(instance.jobs):
        options = job_options(instance, index)
        step = np.zeros((len(options), caps.size))
        gain = np.zeros(len(options))
        for o, (k, c, m, w) in enumerate(options):
            step[o, 3 * k:3 * k + 3] = (job.gpus, job.gpus * c, job.gpus * m)
            gain[o] = w * (job.gpus if gpu_weighted else 1)
        use = (use[:, None, :] + step[None, :, :]).reshape(-1, caps.size)
        value = (value[:, None] + gain[None, :]).ravel()
        fits = np.all(use <= caps * (1 + 1e-9) + 1e-9, axis=1)
        use, value = use[fits], value[fits]
    return float(value.max()) if value.size else -np.inf


def brute_force_hetero_joint(instance: HeteroRound, consolidate: bool = False) -> float | None:
    """Best objective over every (type, config) a job may take (``job_options``) and every way of spreading its
    GPUs over that type's servers (one server when ``consolidate`` and it fits one; by default any job may split,
    as in solve_joint), by depth-first search; None when nothing is feasible."""
    cluster = instance.cluster
    capacity = cluster.capacity * (1 + 1e-9)
    options: list[list[tuple[float, np.ndarray]]] = []
    for index, job in enumerate(instance.jobs):
        choices = []
        for k, c, m, w in job_options(instance, index):
            server_type = cluster.types[k]
            servers = list(cluster.server_range(server_type.name))
            big_g = server_type.gpus_per_server
            spreads = [n for n in itertools.product(range(min(job.gpus, big_g) + 1), repeat=len(servers))
                       if sum(n) == job.gpus]
            if consolidate and job.gpus <= big_g:
                spreads = [n for n in spreads if np.count_nonzero(n) == 1]
            for n in spreads:
                use = np.zeros_like(capacity)
                use[servers] = np.outer(n, [1.0, c, m])
                if np.all(use <= capacity):
                    choices.append((w, use))
        options.append(choices)
    return best_choice_total(options, capacity)


def in_cpu_unit(instance: HeteroRound, unit: float) -> HeteroRound:
    """``instance`` with every CPU figure (the servers' CPUs, the matrices' CPU axes) in a unit ``1 / unit`` times
    larger: with ``unit`` a power of two, the same round (no comparison changes), whose optimum is the same."""
    types = tuple(dataclasses.replace(t, cpus_per_server=t.cpus_per_server * unit) for t in instance.cluster.types)
    cluster = HeteroCluster(types, instance.cluster.reference)
    jobs = tuple(dataclasses.replace(job, profiles={kind: so.Profile(p.cpu_per_gpu * unit, p.mem_gb_per_gpu, p.tput)
                                                    for kind, p in job.profiles.items()})
                 for job in instance.jobs)
    return HeteroRound(cluster, jobs, instance.metadata)
