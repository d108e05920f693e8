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
    for start, stop in runs(demand):
        jobs = order[start:stop]
        g, c, m = int(demand[start, 0]), float(demand[start, 1]), float(demand[start, 2])
        done = fill_servers(state, jobs, g, c, m, fit="first") if fit == "server" or g == 1 else 0
        for job in jobs[done:]:
            spread = first_fit_spread(state, g, c, m) if g > 1 else None
            if spread is not None:
                state.place(int(job), spread[0], spread[1], c, m)
            elif not skip:
                place_leftover(state, int(job), g, c, m)
    return state


def pack_greedy(
    instance: RoundInstance, order: np.ndarray, best_case_tolerance: float = DEFAULT_TOLERANCE,
    fit: Literal["server", "gpu"] = "server",
) -> ServerState:
    """Synergy-GREEDY on ``instance`` with jobs in ``order`` (job indices); skipped jobs stay unplaced.
    ``fit="gpu"``: GPUs one at a time in server order wherever the per-GPU demand fits, as the paper's artifact
    places (``resources/cluster.py``, ``_top_synergy_gpus``; docs/fidelity.md, "Beyond Figure 9")."""
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    return pack_first_fit(instance, order, cpu, mem, skip=True, fit=fit)
