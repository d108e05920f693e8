"""Spending spare capacity: CPU and memory left idle on a server go to the jobs there that gain most.

Any mechanism can end with this step (``run_mechanism(..., spend_spare=True)``). A job may move to another of
its configs (the ideal ILP's columns, :mod:`~synergy_opt.mechanisms.configs`) when that config has a higher
throughput and the extra CPUs and memory it takes, in proportion to the job's GPUs on each of its servers
(SPEC 1: one per-GPU config on every server it spans), are free on every one of them. Each pass offers every
job its best move that fits (the largest gain, then the smallest footprint) and makes them in order of gain,
each checked again against what the earlier ones took; passes repeat until no move fits.

Why it is safe: a move raises one job's throughput and changes nothing else, and it is made only when the
room is free on each server the job spans, so no job's throughput falls and no capacity is exceeded. Jobs
keep their servers and GPUs. A job whose CPU or memory per GPU differs between its servers (no mechanism
here makes one) is left as it is.

Public API
----------
``spend_spare(instance, allocation, table=None) -> Allocation``
"""

from __future__ import annotations

import numpy as np

from synergy_opt.evaluation import CAPACITY_TOLERANCE
from synergy_opt.instance import Allocation, Placement, RoundInstance
from synergy_opt.mechanisms.configs import ConfigTable, config_table, job_throughputs

# A gain must exceed this (relative to the throughput) to count: float noise is no reason to move a job.
_MIN_GAIN = 1e-9
# Room is compared with a slack well inside the evaluator's tolerance.
_SLACK = 1e-3 * CAPACITY_TOLERANCE


def spend_spare(instance: RoundInstance, allocation: Allocation, table: ConfigTable | None = None) -> Allocation:
    """``allocation`` with idle CPUs and memory given to the jobs that gain most (see the module docstring).

    Parameters
    ----------
    instance
        The round ``allocation`` was made for.
    allocation
        Any valid allocation of the round (unplaced jobs stay unplaced).
    table
        The round's config table, if already built.

    Returns
    -------
    Allocation
        The same placements, with some jobs at higher-throughput configs.
    """
    cluster = instance.cluster
    table = table if table is not None else config_table(instance)
    index = instance.job_index
    # Every (job, server) part, and per job its per-GPU CPUs and memory.
    part_job, part_server, part_gpus, part_cpus, part_mem = [], [], [], [], []
    for job_id, parts in allocation.jobs.items():
        for p in parts:
            part_job.append(index[job_id])
            part_server.append(p.server)
            part_gpus.append(p.gpus)
            part_cpus.append(p.cpus)
            part_mem.append(p.mem_gb)
    if not part_job:
        return allocation
    job, server = np.array(part_job), np.array(part_server)
    gpus = np.array(part_gpus, dtype=float)
    cpus, mem = np.array(part_cpus, dtype=float), np.array(part_mem, dtype=float)
    free_cpu = cluster.cpus_per_server - np.bincount(server, weights=cpus, minlength=cluster.servers)
    free_mem = cluster.mem_gb_per_server - np.bincount(server, weights=mem, minlength=cluster.servers)
    order = np.argsort(job, kind="stable")
    job, server, gpus, cpus, mem = job[order], server[order], gpus[order], cpus[order], mem[order]
    jobs, first = np.unique(job, return_index=True)
    per_cpu = np.minimum.reduceat(cpus / gpus, first)
    per_mem = np.minimum.reduceat(mem / gpus, first)
    even = (np.maximum.reduceat(cpus / gpus, first) - per_cpu <= CAPACITY_TOLERANCE * (1 + per_cpu)) & (
        np.maximum.reduceat(mem / gpus, first) - per_mem <= CAPACITY_TOLERANCE * (1 + per_mem)
    )
    cpu_now, mem_now = np.zeros(len(instance.jobs)), np.zeros(len(instance.jobs))
    cpu_now[jobs], mem_now[jobs] = per_cpu, per_mem
    w_now = job_throughputs(instance, cpu_now, mem_now)
    slack_cpu, slack_mem = _SLACK * cluster.cpus_per_server, _SLACK * cluster.mem_gb_per_server
    moved: set[int] = set()
    part_of = job  # per part, its job
    while True:
        # Per job, the tightest per-GPU room over its servers.
        room_cpu = np.minimum.reduceat((free_cpu[server] + slack_cpu) / gpus, first)
        room_mem = np.minimum.reduceat((free_mem[server] + slack_mem) / gpus, first)
        candidates = jobs[even]
        klass = table.klass[candidates]
        counts = table.start[klass + 1] - table.start[klass]
        owner = np.repeat(np.arange(candidates.size), counts)
        column = table.start[klass][owner] + (np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts))
        who = candidates[owner]
        gain = table.tput[column] - w_now[who]
        fits = ((table.cpu[column] - cpu_now[who] <= room_cpu[even][owner])
                & (table.mem[column] - mem_now[who] <= room_mem[even][owner])
                & (gain > _MIN_GAIN * (1 + w_now[who])))
        if not fits.any():
            break
        offers = np.flatnonzero(fits)
        offers = offers[np.lexsort((table.footprint[column[offers]], -gain[offers], owner[offers]))]
        best = offers[np.r_[True, owner[offers][1:] != owner[offers][:-1]]]
        made = 0
        for pick in best[np.argsort(-gain[best], kind="stable")]:
            j = int(who[pick])
            mine = np.flatnonzero(part_of == j)
            extra_cpu = gpus[mine] * (table.cpu[column[pick]] - cpu_now[j])
            extra_mem = gpus[mine] * (table.mem[column[pick]] - mem_now[j])
            # Earlier moves of this pass may have taken the room: check again.
            if np.all(extra_cpu <= free_cpu[server[mine]] + slack_cpu) and np.all(
                extra_mem <= free_mem[server[mine]] + slack_mem
            ):
                np.subtract.at(free_cpu, server[mine], extra_cpu)
                np.subtract.at(free_mem, server[mine], extra_mem)
                cpu_now[j], mem_now[j] = table.cpu[column[pick]], table.mem[column[pick]]
                w_now[j] = table.tput[column[pick]]
                moved.add(j)
                made += 1
        if made == 0:
            break
    if not moved:
        return allocation
    parts = dict(allocation.jobs)
    for j in moved:
        job_id = instance.jobs[j].id
        parts[job_id] = tuple(
            Placement(p.server, p.gpus, p.gpus * float(cpu_now[j]), p.gpus * float(mem_now[j])) for p in parts[job_id]
        )
    return Allocation(parts)
