"""Tetris (Grandl et al., SIGCOMM '14) as the paper's big-data baseline (section 5.7).

Jobs are fed their best-case demands as static demands. As in Tetris, each server in turn, while it has room,
takes the pending job whose demand vector best aligns with its free resources: the largest dot product of
the demand and the free vector, both as fractions of a server (ties: policy order). Jobs that fit on no
single server (wider than a server, or crowded out) then go, in policy order, to the fewest servers that hold
their demand, else onto free GPUs with the CPU and memory left there (``skip=True``: they wait instead).

Jobs with equal demand vectors are interchangeable for the score, so the scan is over demand classes (at most
one per grid config and GPU count), not over jobs.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands
from synergy_opt.packing.place import fewest_servers, place_leftover
from synergy_opt.packing.state import ServerState


def pack_tetris(
    instance: RoundInstance, order: np.ndarray, best_case_tolerance: float = DEFAULT_TOLERANCE, skip: bool = False
) -> ServerState:
    """Tetris on ``instance`` with jobs in ``order`` (job indices, the tie-break)."""
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    state = ServerState(instance)
    cluster = state.cluster
    gpus = instance.gpus
    scale = np.array([cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server], dtype=float)
    demand = np.column_stack((gpus, gpus * cpu, gpus * mem))[order]
    classes, of_job = np.unique(demand, axis=0, return_inverse=True)
    of_job = of_job.ravel()
    # Each class's jobs in policy order, and a cursor to the next unplaced one.
    members = [order[of_job == k] for k in range(len(classes))]
    cursor = np.zeros(len(classes), dtype=np.int64)
    left = np.array([m.size for m in members])
    head = np.array([int(np.flatnonzero(of_job == k)[0]) for k in range(len(classes))])  # policy rank of next
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(len(order))
    shape = classes / scale
    slack = np.array([0.0, state.cpu_tol, state.mem_tol]) / scale
    for server in range(cluster.servers):
        while True:
            free = np.array([state.free_gpus[server], state.free_cpus[server], state.free_mem[server]]) / scale
            fit = (left > 0) & (shape <= free + slack).all(axis=1)
            if not fit.any():
                break
            score = np.where(fit, shape @ free, -np.inf)
            best = np.flatnonzero(score >= score.max() * (1 - 1e-12))
            k = int(best[np.argmin(head[best])])
            job = int(members[k][cursor[k]])
            state.place(job, (server,), (int(classes[k, 0]),), cpu[job], mem[job])
            cursor[k] += 1
            left[k] -= 1
            if left[k]:
                head[k] = rank_of[members[k][cursor[k]]]
    for job in order:
        job = int(job)
        if state.is_placed(job):
            continue
        g = int(gpus[job])
        spread = fewest_servers(state, g, cpu[job], mem[job]) if g > 1 else None
        if spread is not None:
            state.place(job, spread[0], spread[1], cpu[job], mem[job])
        elif not skip:
            place_leftover(state, job, g, cpu[job], mem[job])
    return state
