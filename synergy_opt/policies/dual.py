"""The Lagrangian dual of the requirement LP (formulations/policies.md, row D3): B2 priced, every other row kept.

For prices ``p >= 0`` of the types' GPUs (the LP of :class:`~synergy_opt.policies.decomposed.Requirements`):

    D(p) = W . p + max_{z >= z_lower} [ z - sum_k h_k(a[k] + z) ],

``h_k(v)`` the least cost ``sum_t weights[k] p[t] x[k, t]`` of ``c[k] . x[k] >= v`` with ``sum_t x[k, t] <= 1``:
0 for ``v <= 0``, infinite above ``max_t c[k, t]``, and in between the lower convex hull of the origin and the
points ``(c[k, t], weights[k] p[t])`` (using type ``t`` all the time). Every ``D(p)`` is an upper bound on the
LP's ``z`` (weak duality) and ``min_p D(p)`` is its optimum (strong duality). ``D`` is convex and piecewise linear;
``W - loads`` is a subgradient, ``loads[t]`` the GPUs of type ``t`` the rows take at the inner maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Hull:
    """Each row's cost hull: vertices ``(need, cost, type)`` left to right (``need`` inf past the last), and the
    slope of the segment ending at each vertex."""

    need: np.ndarray
    cost: np.ndarray
    type: np.ndarray
    slope: np.ndarray

    def segment(self, v: np.ndarray) -> np.ndarray:
        """The segment each need ``v > 0`` falls on (0: from the origin), clipped to the last."""
        index = (v[:, None] > self.need).sum(axis=1)
        return np.minimum(index, (self.need < np.inf).sum(axis=1) - 1)


def _pick(values: np.ndarray, columns: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, columns[:, None], axis=1)[:, 0]


def hull(coefficients: np.ndarray, usable: np.ndarray, costs: np.ndarray) -> Hull:
    """Lower convex hulls from the origin, by gift wrapping: at most one vertex per type (``costs[k, t]``:
    ``weights[k] p[t]``). Every row must have a usable type."""
    rows, types = coefficients.shape
    reach = np.where(usable, coefficients, -np.inf)  # a type a row cannot use is never ahead
    need = np.full((rows, types), np.inf)
    cost = np.zeros((rows, types))
    kind = np.zeros((rows, types), dtype=np.int64)
    slope = np.full((rows, types), np.inf)
    at_need, at_cost = np.zeros(rows), np.zeros(rows)
    for step in range(types):
        gap = reach - at_need[:, None]  # -inf once a row's hull is done (at_need inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            rise = np.where(gap > 0, (costs - at_cost[:, None]) / gap, np.inf)
        # Least slope (of equal slopes the nearer point: the farther one follows at the same slope).
        rank = rise.argmin(axis=1)
        least = _pick(rise, rank)
        going = least < np.inf
        if not going.any():
            break
        at_need = np.where(going, _pick(reach, rank), np.inf)
        at_cost = np.where(going, _pick(costs, rank), 0.0)
        need[:, step], cost[:, step], kind[:, step], slope[:, step] = at_need, at_cost, rank, least
    return Hull(need, cost, kind, slope)


@dataclass(frozen=True, eq=False)
class DualPoint:
    """``D(p)``, a subgradient, the inner maximum's ``z`` and each row's need ``a + z`` there, the hulls, and the
    rows' time fractions there (``(rows, types)``)."""

    value: float
    gradient: np.ndarray
    z: float
    need: np.ndarray
    hull: Hull
    x: np.ndarray


def dual_point(coefficients: np.ndarray, offsets: np.ndarray, weights: np.ndarray, gpus: np.ndarray,
               usable: np.ndarray, z_lower: float, prices: np.ndarray) -> DualPoint:
    """``D(prices)`` (see the module); every row must have a usable type."""
    rows, types = coefficients.shape
    index = np.arange(rows)
    shape = hull(coefficients, usable, weights[:, None] * prices[None, :])
    real = shape.need < np.inf
    start = np.concatenate([np.zeros((rows, 1)), shape.need[:, :-1]], axis=1)  # each segment's first need
    before = np.concatenate([np.zeros((rows, 1)), shape.slope[:, :-1]], axis=1)
    # F'(z) = 1 - (sum of the slopes of the segments the needs a + z are on): F's maximum is where it reaches 0.
    at = (start - offsets[:, None])[real]
    rise = shape.slope[real] - before[real]
    order = np.argsort(at, kind="stable")
    reached = np.flatnonzero(np.cumsum(rise[order]) >= 1.0)
    top = float(np.min(_pick(shape.need, real.sum(axis=1) - 1) - offsets, initial=np.inf))
    z = float(at[order[reached[0]]]) if reached.size else top
    z = min(max(z, z_lower), top)
    need = offsets + z
    segment = shape.segment(need)
    previous = np.maximum(segment - 1, 0)
    later = segment > 0
    low_need = np.where(later, _pick(shape.need, previous), 0.0)
    low_cost = np.where(later, _pick(shape.cost, previous), 0.0)
    positive = need > 0
    spend = np.where(positive, low_cost + _pick(shape.slope, segment) * (need - low_need), 0.0)
    # Time fractions: on the first segment the type alone, then a mix of two types all the time.
    share = np.where(positive, (need - low_need) / (_pick(shape.need, segment) - low_need), 0.0)
    x = np.zeros((rows, types))
    x[index, _pick(shape.type, segment)] += share
    x[index, _pick(shape.type, previous)] += np.where(later & positive, 1.0 - share, 0.0)
    loads = weights @ x
    return DualPoint(float(gpus @ prices + z - spend.sum()), gpus - loads, z, need, shape, x)
