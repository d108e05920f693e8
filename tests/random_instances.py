"""Random small round instances for cross-checks against brute force (shared by the test modules)."""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import Cluster, Job, Profile, RoundInstance


def random_profile(rng: np.random.Generator, max_axis: int = 3, monotone: bool | None = None) -> Profile:
    """A profile on a random small grid; values rounded to 0.1 so that ties (and dominance) occur."""
    cpu = np.unique(rng.integers(1, 13, size=rng.integers(1, max_axis + 1))).astype(float)
    mem = np.unique(rng.choice([10.0, 20.83, 40.0, 62.5, 125.0, 250.0], size=rng.integers(1, max_axis + 1)))
    tput = np.round(rng.uniform(0.0, 3.0, size=(cpu.size, mem.size)), 1)
    if monotone if monotone is not None else rng.random() < 0.5:
        tput = np.maximum.accumulate(np.maximum.accumulate(tput, axis=0), axis=1)
    return Profile(cpu, mem, tput)


def random_instance(rng: np.random.Generator, max_jobs: int = 6, max_axis: int = 3) -> RoundInstance:
    """Random cluster (1-3 servers, 1-8 GPUs each) and up to ``max_jobs`` jobs, multi-GPU ones included."""
    servers = int(rng.integers(1, 4))
    gpus_per_server = int(rng.integers(1, 9))
    cluster = Cluster(
        servers,
        gpus_per_server,
        float(rng.integers(1, 33)),
        float(rng.choice([50.0, 100.0, 250.0, 500.0])),
    )
    free = cluster.total_gpus
    jobs = []
    for index in range(int(rng.integers(1, max_jobs + 1))):
        if free == 0:
            break
        gpus = int(rng.integers(1, min(free, 2 * gpus_per_server) + 1))
        free -= gpus
        jobs.append(Job(f"j{index}", gpus, random_profile(rng, max_axis)))
    return RoundInstance(cluster, tuple(jobs))


def job_configs(instance: RoundInstance, job: Job) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every per-GPU config of a job (its grid with the proportional point added, and no CPUs and no memory,
    worth 0, when its floor is 0: SPEC 4's bound on an allocation that starves it): CPU, GB, W."""
    cluster = instance.cluster
    grid = job.profile.with_point(cluster.cpu_per_gpu, cluster.mem_gb_per_gpu)
    cpu, mem = np.meshgrid(grid.cpu_per_gpu, grid.mem_gb_per_gpu, indexing="ij")
    cpu, mem, tput = cpu.ravel(), mem.ravel(), grid.tput.ravel()
    if grid.throughput(cluster.cpu_per_gpu, cluster.mem_gb_per_gpu) <= 0:
        cpu, mem, tput = np.append(cpu, 0.0), np.append(mem, 0.0), np.append(tput, 0.0)
    return cpu, mem, tput


def brute_force_ideal(instance: RoundInstance, gpu_weighted: bool = False) -> float:
    """Exhaustive enumeration of one config per job under the super-machine's CPU and memory (eqs. 1-5)."""
    cluster = instance.cluster
    floors = instance.floors
    cpu_used, mem_used, value = np.zeros(1), np.zeros(1), np.zeros(1)
    for job, floor in zip(instance.jobs, floors, strict=True):
        cpu, mem, tput = job_configs(instance, job)
        ok = tput >= floor
        weight = job.gpus if gpu_weighted else 1.0
        cpu_used = (cpu_used[:, None] + job.gpus * cpu[ok][None, :]).ravel()
        mem_used = (mem_used[:, None] + job.gpus * mem[ok][None, :]).ravel()
        value = (value[:, None] + weight * tput[ok][None, :]).ravel()
        fits = (cpu_used <= cluster.total_cpus + 1e-9) & (mem_used <= cluster.total_mem_gb + 1e-9)
        cpu_used, mem_used, value = cpu_used[fits], mem_used[fits], value[fits]
    return float(value.max())


def best_choice_total(options: list[list[tuple[float, np.ndarray]]], capacity: np.ndarray) -> float | None:
    """Depth-first search over one choice per job: ``options[j]`` lists job j's (value, use) pairs, ``use`` of the
    shape of ``capacity`` (servers x resources); the best total of choices whose uses fit together, None when
    none do. Each job's options are tried best first, and a branch stops when the best the rest could add does
    not beat the best found."""
    options = [sorted(choices, key=lambda choice: -choice[0]) for choices in options]
    best_rest = np.concatenate([np.cumsum([max((v for v, _ in o), default=-np.inf) for o in options][::-1])[::-1],
                                [0.0]])
    best = -np.inf

    def search(j: int, value: float, free: np.ndarray) -> None:
        nonlocal best
        if value + best_rest[j] <= best + 1e-12:
            return
        if j == len(options):
            best = value
            return
        for w, use in options[j]:
            if np.all(use <= free):
                search(j + 1, value + w, free - use)

    search(0, 0.0, capacity.copy())
    return None if best == -np.inf else float(best)


def in_cpu_unit(instance: RoundInstance, unit: float) -> RoundInstance:
    """``instance`` with every CPU figure (the servers' CPUs, the matrices' CPU axes) in a unit ``1 / unit`` times
    larger: with ``unit`` a power of two, the same round, whose optimum is the same."""
    return in_units(instance, cpu_unit=unit)


def in_units(instance: RoundInstance, cpu_unit: float = 1.0, mem_unit: float = 1.0) -> RoundInstance:
    """``instance`` with its CPU and memory figures times ``cpu_unit`` and ``mem_unit`` (powers of two: the same
    round)."""
    cluster = instance.cluster
    scaled = Cluster(cluster.servers, cluster.gpus_per_server, cluster.cpus_per_server * cpu_unit,
                     cluster.mem_gb_per_server * mem_unit)
    jobs = tuple(Job(job.id, job.gpus, Profile(job.profile.cpu_per_gpu * cpu_unit,
                                               job.profile.mem_gb_per_gpu * mem_unit, job.profile.tput))
                 for job in instance.jobs)
    return RoundInstance(scaled, jobs)
