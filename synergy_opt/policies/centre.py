"""Gavel's makespan point: the analytic centre of the allocations that finish every job within Gavel's
bisected makespan.

Gavel's ``min_total_duration_perf`` bisects the makespan ``T`` from ``[100, 1e6]`` seconds until the bracket is
within 5%, asking cvxpy (ECOS) at each ``T`` for any allocation that finishes every job's remaining steps
within ``T`` (objective ``Maximize(1)``), and keeps the last one found. With a constant objective an
interior-point method's iterates sit at the analytic centre of that feasible set, so Gavel's allocation is
(close to) that centre, not a vertex: every job gets time beyond what it needs, which short jobs feel most.
A vertex gives most jobs exactly what they need to finish at ``T`` together; on Gavel's ``msr_seed0_ed69ec``
on 32 V100s that nearly doubles the average JCT (docs/sim.md, "Against Gavel's simulator").

The centre maximises the sum of the logarithms of every slack of Gavel's constraints at ``T``, as its cvxpy
model states them: ``x[i, t] >= 0`` (every type, usable or not), ``sum_t x[i, t] <= 1``, ``sum_i s_i x[i, t]
<= G_t`` and ``sum_t X[i, t] x[i, t] >= R_i / T``. The barrier is strictly convex on a bounded set, so the
centre is unique; Newton's method finds it, each step one small solve per job plus one of the types' size
(the capacity rows couple the jobs only through a rank-``types`` term: the Sherman-Morrison-Woodbury formula).
"""

from __future__ import annotations

import numpy as np

# Gavel's bisection (scheduler/policies/min_total_duration.py): the first bracket, its growth when no T in it
# is feasible, and the bracket's width at which it stops.
GAVEL_FIRST_BRACKET_S = (100.0, 1e6)
GAVEL_BRACKET_GROWTH = 10.0
GAVEL_BRACKET_RATIO = 1.05
# A T within this (relative) of the least makespan counts as infeasible: the centre's set then has an interior
# wide enough to start from the LP's optimum. (ECOS may call some such T feasible; against T >= least exactly,
# 0.17% of makespans get another T, 2.5-6.5% higher.)
FEASIBLE_MARGIN = 1e-4
NEWTON_TOLERANCE = 1e-12  # half the squared Newton decrement: the barrier is this close to its least value
NEWTON_STEPS = 200


def gavel_makespan(least_s: float) -> float:
    """The makespan Gavel's bisection settles on when the least makespan is ``least_s`` seconds: the
    smallest ``T`` it tried that an allocation meets (``least_s`` must be finite and > 0). It is within 5% above
    the least, or up to 7% when the least lies just below a bracket's top (then no ``T`` of that bracket is
    feasible and the next one's bisection starts at its bottom). A least beyond float's range comes back as it
    is (Gavel's loop would not end)."""
    feasible_from = least_s * (1 + FEASIBLE_MARGIN)
    low, high = GAVEL_FIRST_BRACKET_S
    found = None
    while found is None:
        if not np.isfinite(high):
            return feasible_from
        last_high = high
        while GAVEL_BRACKET_RATIO * low < high:
            middle = (low + high) / 2 if low + high < np.inf else low / 2 + high / 2  # no overflow near 1e308
            if middle >= feasible_from:
                found = high = middle
            else:
                low = middle
        low, high = last_high, last_high * GAVEL_BRACKET_GROWTH
    return found


def _slacks(x: np.ndarray, throughputs: np.ndarray, scale: np.ndarray, gpus: np.ndarray, need: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The slack of every constraint at ``x``: its bounds, each job's time left, each type's GPUs free, each
    job's throughput above its need."""
    return x, 1.0 - x.sum(axis=1), gpus - scale @ x, (throughputs * x).sum(axis=1) - need


def _log_barrier(slacks: tuple[np.ndarray, ...]) -> float:
    """Minus the summed logarithms of ``slacks``; infinite outside the set (a slack not above 0)."""
    if any((s <= 0).any() for s in slacks):
        return np.inf
    return -float(sum(np.log(s).sum() for s in slacks))


def _barrier(x: np.ndarray, *data: np.ndarray) -> float:
    return _log_barrier(_slacks(x, *data))


def interior_start(optimum: np.ndarray, throughputs: np.ndarray, scale_factors: np.ndarray, gpus: np.ndarray,
                   need: np.ndarray) -> np.ndarray | None:
    """A point strictly inside the centre's set: the LP's optimum at the least makespan (each job's
    throughput there is above ``need``, the throughput that finishes it within the bisected makespan), cleaned
    of solver round-off, moved part of the way to a small uniform allocation. None if a job has no room above
    its need there (the set's interior too thin)."""
    jobs, types = optimum.shape
    scale = np.asarray(scale_factors, dtype=float)
    x = np.clip(optimum, 0.0, 1.0)
    x /= np.maximum(x.sum(axis=1), 1.0)[:, None]
    x *= min(1.0, float(np.min(gpus / np.maximum(scale @ x, 1e-300))))
    uniform = np.full((jobs, types), 0.5 * min(1.0 / types, float(np.min(gpus)) / float(scale.sum())))
    # Moving a share w towards the uniform point keeps job i's finish row strictly met while w < a/(1+a),
    # a = its surplus over its need (the uniform point may meet no need); every other row gains slack.
    above = (throughputs * x).sum(axis=1) / need - 1.0
    if not np.all(above > 0):
        return None
    weight = 0.5 * float(np.min(above / (1.0 + above)))
    start = (1 - weight) * x + weight * uniform
    return start if np.isfinite(_barrier(start, throughputs, scale, gpus, need)) else None


def analytic_centre(start: np.ndarray, throughputs: np.ndarray, scale_factors: np.ndarray, gpus: np.ndarray,
                    need: np.ndarray) -> tuple[np.ndarray, int]:
    """The analytic centre of ``{x >= 0, sum_t x[i, t] <= 1, sum_i s_i x[i, t] <= gpus[t], sum_t X[i, t]
    x[i, t] >= need[i]}`` by damped Newton steps from ``start`` (strictly inside); returns it and the steps
    taken."""
    x = np.array(start, dtype=float)
    scale = np.asarray(scale_factors, dtype=float)
    data = (throughputs, scale, gpus, need)
    types = x.shape[1]
    diagonal = np.arange(types)
    for step in range(NEWTON_STEPS):
        slacks = _slacks(x, *data)
        bounds, time_left, room, surplus = slacks
        gradient = (-1.0 / bounds + (1.0 / time_left)[:, None] + scale[:, None] / room[None, :]
                    - throughputs / surplus[:, None])
        # Per job, the Hessian of its own terms (its bounds, its time row, its finish row): types x types.
        blocks = ((1.0 / time_left**2)[:, None, None] * np.ones((1, types, types))
                  + (1.0 / surplus**2)[:, None, None] * throughputs[:, :, None] * throughputs[:, None, :])
        blocks[:, diagonal, diagonal] += 1.0 / bounds**2
        try:
            inverse = np.linalg.inv(blocks)
            # The capacity rows add U diag(1/room^2) U^T, U[(i, t), t] = s_i: Woodbury.
            solved = np.einsum("kij,kj->ki", inverse, -gradient)
            coupling = np.diag(room**2) + np.einsum("k,kij->ij", scale**2, inverse)
            weights = np.linalg.solve(coupling, scale @ solved)
        except np.linalg.LinAlgError:  # singular in float64 (slacks decades apart): x, strictly inside, as it is
            return x, step
        direction = solved - np.einsum("kij,kj->ki", inverse, scale[:, None] * weights[None, :])
        decrement = -float((gradient * direction).sum())
        if decrement / 2 <= NEWTON_TOLERANCE:
            return x, step
        length, value = 1.0, _log_barrier(slacks)  # the slacks at x, computed once a step
        while _barrier(x + length * direction, *data) > value - 0.25 * length * decrement:
            length /= 2
            if length < 1e-12:  # round-off: as close as float64 gets
                return x, step
        x = x + length * direction
    return x, NEWTON_STEPS
