"""Synergy-GREEDY (paper section 3.3, SPEC 3): first fit of each job's best-case demand, in policy order.

A job goes to the lowest-numbered server that holds its whole demand vector; a multi-GPU job that fits on no
single server takes GPUs server by server wherever its per-GPU demand fits. A job that fits nowhere is
skipped for the round (absent from the allocation): the fragmentation the paper shows in section 5.4.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands
from synergy_opt.packing.order import runs
from synergy_opt.packing.place import fill_servers, first_fit_spread, place_leftover
from synergy_opt.packing.state import ServerState


def pack_first_fit(
    instance: RoundInstance, order: np.ndarray, cpu: np.ndarray, mem: np.ndarray, skip: bool = True,
    fit: Literal["server", "gpu"] = "server",
) -> ServerState:
    """First fit of the static per-GPU demands ``cpu``, ``mem`` (job order), jobs taken in ``order``.

    ``skip=False`` places a job that fits nowhere on free GPUs with the CPU and memory left
    (:func:`~synergy_opt.packing.place.place_leftover`) instead of skipping it. ``fit="gpu"`` takes every job's
    GPUs in server order wherever its per-GPU demand fits, never looking for one server that holds it all.
    """
    state = ServerState(instance)
    gpus = instance.gpus
    demand = np.column_stack((gpus[order], cpu[order], mem[order]))
    unfit = _Unfit(state)
    for start, stop in runs(demand):
        g, c, m = int(demand[start, 0]), float(demand[start, 1]), float(demand[start, 2])
        if skip and unfit(g, c, m):
            continue
        jobs = order[start:stop]
        done = fill_servers(state, jobs, g, c, m, fit="first") if fit == "server" or g == 1 else 0
        for job in jobs[done:]:
            spread = first_fit_spread(state, g, c, m) if g > 1 else None
            if spread is not None:
                state.place(int(job), spread[0], spread[1], c, m)
            elif not skip:
                place_leftover(state, int(job), g, c, m)
    return state


class _Unfit:
    """Demands ``(GPUs, CPUs a GPU, GB a GPU)`` that fit nowhere in the state: fewer of their GPUs fit the
    servers' room than they need, so neither a server nor a spread holds them. Room only shrinks while jobs
    are placed, so a demand at least as large as one that did not fit never fits either: the least such
    demands are kept, and only a demand none of them bounds is measured server by server. The simulator's greedy
    refill hands over queues of hundreds on a full cluster, and measuring each was most of a run's time."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._least: list[tuple[int, float, float]] = []

    def __call__(self, gpus: int, cpu_per_gpu: float, mem_per_gpu: float) -> bool:
        if any(gpus >= g and cpu_per_gpu >= c and mem_per_gpu >= m for g, c, m in self._least):
            return True
        if self.state.capacity_for(cpu_per_gpu, mem_per_gpu).sum() >= gpus:
            return False
        self._least = [(g, c, m) for g, c, m in self._least
                       if not (g >= gpus and c >= cpu_per_gpu and m >= mem_per_gpu)]
        self._least.append((gpus, cpu_per_gpu, mem_per_gpu))
        return True


def pack_greedy(
    instance: RoundInstance, order: np.ndarray, best_case_tolerance: float = DEFAULT_TOLERANCE,
    fit: Literal["server", "gpu"] = "server",
) -> ServerState:
    """Synergy-GREEDY on ``instance`` with jobs in ``order`` (job indices); skipped jobs stay unplaced.
    ``fit="gpu"``: GPUs one at a time in server order wherever the per-GPU demand fits, as the paper's artifact
    places (``resources/cluster.py``, ``_top_synergy_gpus``; docs/fidelity.md, "Beyond Figure 9")."""
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    return pack_first_fit(instance, order, cpu, mem, skip=True, fit=fit)
