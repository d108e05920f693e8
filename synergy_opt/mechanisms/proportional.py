"""GPU-proportional allocation: the baseline every DNN scheduler uses (paper section 2, SPEC 3).

Each job gets ``c_p = C/G`` CPUs and ``m_p = M/G`` GB per GPU. In policy order, its GPUs go best-fit to one
server when one has them free, else to the fewest servers. It places every job whose GPUs exist: at
proportional shares, CPU and memory are free wherever GPUs are, so only free GPUs decide (best fit is the
fewest free GPUs that suffice, ties to the lowest server).
"""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.packing.order import runs
from synergy_opt.packing.place import fewest_servers, fill_servers
from synergy_opt.packing.state import ServerState


def pack_proportional(instance: RoundInstance, order: np.ndarray) -> ServerState:
    """Pack ``instance`` GPU-proportionally, jobs in ``order`` (job indices); return the packed state."""
    state = ServerState(instance)
    c_p, m_p = state.proportional
    gpus = instance.gpus[order]
    too_many = state.cluster.gpus_per_server + 1
    for start, stop in runs(gpus):
        jobs = order[start:stop]
        g = int(gpus[start])
        # Long runs of equal demands in one pass; short ones (most, in a multi-GPU trace) one by one.
        done = fill_servers(state, jobs, g, c_p, m_p) if len(jobs) > 8 else 0
        for job in jobs[done:]:
            # Free CPUs and memory follow free GPUs here, so the best fit is read off the GPUs alone.
            free = state.free_gpus
            server = int(np.where(free >= g, free, too_many).argmin())
            if free[server] >= g:
                state.place(int(job), (server,), (g,), c_p, m_p)
                continue
            spread = fewest_servers(state, g, c_p, m_p)
            if spread is not None:
                state.place(int(job), spread[0], spread[1], c_p, m_p)
    return state
