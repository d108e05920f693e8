"""GPU-proportional allocation: the baseline every DNN scheduler uses (paper section 2, SPEC 3).

Each job gets ``c_p = C/G`` CPUs and ``m_p = M/G`` GB per GPU. In policy order, its GPUs go best-fit to one
server when one has them free, else to the fewest servers. It places every job whose GPUs exist: at
proportional shares, CPU and memory are free wherever GPUs are.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.order import runs
from synergy_opt.mechanisms.packing import fill_servers, place_best_fit
from synergy_opt.mechanisms.state import ServerState


def pack_proportional(instance: RoundInstance, order: np.ndarray) -> ServerState:
    """Pack ``instance`` GPU-proportionally, jobs in ``order`` (job indices); return the packed state."""
    state = ServerState(instance)
    c_p, m_p = state.proportional
    gpus = instance.gpus[order]
    for start, stop in runs(gpus):
        jobs = order[start:stop]
        g = int(gpus[start])
        done = fill_servers(state, jobs, g, c_p, m_p)
        for job in jobs[done:]:
            place_best_fit(state, int(job), g, c_p, m_p)
    return state
