"""Prices of the GPU types for the decomposed policy solves, by a trust-region cutting-plane method.

The decomposed solves (:mod:`synergy_opt.policies.decomposed`) fix every job whose cheapest type at the types'
prices is clear, so they need prices close to the LP's optimal ones, found by maximising a concave
piecewise-linear function of ``K`` numbers (one per GPU type) given by an oracle (value and supergradient):
Kelley's cutting planes in a trust region (a box around the best point, doubled after a good step, halved after a
poor one), each master a ``K + 1``-variable LP kept warm in one HiGHS object. Two functions
(formulations/policies.md, row D3):

- the LP without its time rows (B3): ``g(lam) = sum_k min_t lam[t] * b[k, t]`` on ``sum_t lam[t] = 1``,
  ``b[k, t] = need[k] * weights[k] / (coefficients[k, t] * gpus[t])``; with every offset 0 the relaxed LP's
  optimum is ``1 / max g`` and ``lam[t] / gpus[t]`` are prices (:func:`relaxation_oracle`);
- the whole LP's Lagrangian dual (:mod:`synergy_opt.policies.dual`).

HiGHS solves the masters whatever the backend: the prices only steer which jobs are fixed, and every result is
certified against a dual bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np

from synergy_opt.solvers.highs import quiet_highs, run

TOLERANCE = 1e-9
SMALLEST_RADIUS = 1e-12
MAX_ITERATIONS = 100
START_RADIUS = 0.25  # of the box's width, per coordinate
WARM_RADIUS = 0.01  # from given prices


@dataclass(frozen=True)
class Maximised:
    """The best point found, its value, and how many oracle calls it took."""

    point: np.ndarray
    value: float
    iterations: int


Oracle = Callable[[np.ndarray], tuple[float, np.ndarray]]


class _Master:
    """max theta s.t. theta <= f_k + s_k . (lam - q_k) for every cut, ``sum lam`` = 1 (``equal``) or <= 1,
    lam in the trust region."""

    def __init__(self, size: int, equal: bool) -> None:
        self.size = size
        self.h = quiet_highs()
        # Tighter than HiGHS's default 1e-7, which would stall the model's gap near 1e-8 (relative).
        for option in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
            self.h.setOptionValue(option, 1e-10)
        inf = highspy.kHighsInf
        self.h.addVars(size + 1, np.r_[np.zeros(size), -inf], np.r_[np.ones(size), inf])
        self.h.changeColCost(size, 1.0)
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.h.addRow(1.0 if equal else 0.0, 1.0, size, np.arange(size, dtype=np.int32), np.ones(size))
        self.columns = np.arange(size + 1, dtype=np.int32)

    def cut(self, value: float, gradient: np.ndarray, point: np.ndarray) -> None:
        # theta - s . lam <= f - s . q
        self.h.addRow(-highspy.kHighsInf, float(value - gradient @ point), self.size + 1, self.columns,
                      np.r_[-gradient, 1.0])

    def solve(self, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, float] | None:
        self.h.changeColsBounds(self.size, self.columns[:-1], lower, upper)
        run(self.h, 1)
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        x = np.asarray(self.h.getSolution().col_value)
        return x[:-1], float(x[-1])


def maximise(oracle: Oracle, size: int, start: np.ndarray | None = None, *, equal: bool = True,
             scale: float = 0.0, radius: float = START_RADIUS, tolerance: float = TOLERANCE,
             max_iterations: int = MAX_ITERATIONS) -> Maximised:
    """Maximise a concave function given by ``oracle`` (value and a supergradient) over ``lam >= 0`` with
    ``sum lam = 1`` (``equal``) or ``<= 1``, from ``start`` in a trust region of ``radius`` (smaller from a
    good start).

    Stops when the cutting-plane model's maximum over the trust region is within ``tolerance * max(|f|, scale) *
    radius`` of the best value: by concavity the best value is then within ``tolerance * max(|f|, scale)`` of the
    maximum.
    """
    center = np.full(size, 1.0 / size) if start is None else _into(np.asarray(start, dtype=float), equal)
    value, gradient = oracle(center)
    master = _Master(size, equal)
    master.cut(value, gradient, center)
    for iteration in range(1, max_iterations + 1):
        solved = master.solve(np.maximum(center - radius, 0.0), np.minimum(center + radius, 1.0))
        if solved is None:
            break
        point, model = solved
        if model - value <= tolerance * max(abs(value), scale) * radius:
            return Maximised(center, value, iteration)
        point = _into(point, equal)  # HiGHS meets the sum to its tolerance only
        new_value, new_gradient = oracle(point)
        master.cut(new_value, new_gradient, point)
        gain = new_value - value
        if gain >= 0.1 * (model - value):
            if gain >= 0.5 * (model - value):
                radius = min(2 * radius, 1.0)
            center, value = point, new_value
        else:
            radius /= 2
            if radius < SMALLEST_RADIUS:
                return Maximised(center, value, iteration)
    return Maximised(center, value, max_iterations)


def minimise_dual(evaluate: Oracle, gpus: np.ndarray, cap: float, start: np.ndarray | None, scale: float
                  ) -> np.ndarray:
    """Prices ``p >= 0`` of the types' GPUs minimising a convex dual function (``evaluate``: its value and a
    subgradient) known to have a minimiser with ``W . p <= cap``: the maximum of ``-D`` over ``q[t] = p[t] W[t] /
    cap``, ``sum q <= 1`` (types without GPUs priced 0), from ``start`` (small steps) when it prices something."""
    open_types = np.flatnonzero(gpus > 0)
    per_unit = cap / gpus[open_types]

    def prices(q: np.ndarray) -> np.ndarray:
        full = np.zeros(gpus.size)
        full[open_types] = q * per_unit
        return full

    def oracle(q: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = evaluate(prices(q))
        return -value, -gradient[open_types] * per_unit

    begin = None if start is None else start[open_types] / per_unit
    warm = begin is not None and begin.sum() > 0
    best = maximise(oracle, open_types.size, begin if warm else None, equal=False, scale=scale,
                    radius=WARM_RADIUS if warm else START_RADIUS)
    return prices(best.point)


def _into(point: np.ndarray, equal: bool) -> np.ndarray:
    """``point`` made exactly feasible: nonnegative, its sum 1 (``equal``) or at most 1."""
    point = np.maximum(point, 0.0)
    total = point.sum()
    if equal and total <= 0:
        return np.full(point.size, 1.0 / point.size)
    return point / total if equal or total > 1 else point


def relaxation_oracle(b: np.ndarray) -> Oracle:
    """``g`` of row D1 for ``b`` (``inf`` where a row cannot use a type) and its supergradient, each type's load
    ``sum_k b[k, t]`` over the rows whose cheapest type is ``t`` (``g`` equals it on ``lam`` and bounds it above
    elsewhere)."""
    rows = np.arange(b.shape[0])

    def oracle(lam: np.ndarray) -> tuple[float, np.ndarray]:
        with np.errstate(invalid="ignore"):
            cost = np.where(np.isfinite(b), lam[None, :] * b, np.inf)
        cheapest = cost.argmin(axis=1)
        load = np.bincount(cheapest, weights=b[rows, cheapest], minlength=b.shape[1])
        return float(cost[rows, cheapest].sum()), load

    return oracle
