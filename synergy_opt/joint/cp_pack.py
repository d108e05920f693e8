"""Server loads that hold a given demand of item types, by CP-SAT on the integer grid.

``z[i, t]`` items of type ``t`` on server ``i``: every type's demand placed exactly, every server within its GPUs,
CPU units and memory units (:class:`~synergy_opt.joint.grid.Grid`, on which "fits" is exact). On rounds of few
servers this decides in a fraction of a second placements the priced loads of the decomposition miss (the
configs of the ideal ILP on 8 servers of 16 GPUs, whose CPUs and memory are all in use: every server must be
filled exactly). On many servers the symmetric model is slow; the callers use it on few servers only.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.joint.grid import Grid


def cp_pack(grid: Grid, demand: np.ndarray, caps: np.ndarray, servers: int, seconds: float, work: float
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct loads (``(k, types)``, none empty) of at most ``servers`` servers holding exactly ``demand``
    (each load at most ``caps`` of a type) and how many servers take each, or None (none exists, or none found
    within ``seconds`` or CP-SAT's deterministic time ``work``: the same answer however loaded the machine)."""
    from ortools.sat.python import cp_model  # CP-SAT on first use (importing the package loads no solver)

    if seconds <= 0:
        return None
    used = np.flatnonzero(demand > 0)
    need = grid.need[used]
    capacity = np.array(grid.shape) - 1
    model = cp_model.CpModel()
    z = [[model.new_int_var(0, int(min(caps[t], demand[t])), f"z{i}_{t}") for t in used] for i in range(servers)]
    for k, t in enumerate(used):
        model.add(sum(z[i][k] for i in range(servers)) == int(demand[t]))
    for i in range(servers):
        for r in range(3):
            if np.any(need[:, r]):
                model.add(sum(int(need[k, r]) * z[i][k] for k in range(used.size)) <= int(capacity[r]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(min(seconds, 1e6))
    solver.parameters.max_deterministic_time = float(work)
    solver.parameters.num_workers = 1
    if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    loads = np.zeros((servers, demand.size), dtype=np.int64)
    for i in range(servers):
        loads[i, used] = [solver.value(v) for v in z[i]]
    distinct, count = np.unique(loads[loads.any(axis=1)], axis=0, return_counts=True)
    return distinct, count.astype(float)
