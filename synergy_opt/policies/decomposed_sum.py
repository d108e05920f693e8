"""Max-sum-throughput (row S1) solved exactly with most jobs fixed, as :mod:`~synergy_opt.policies.decomposed`
solves the requirement LP (formulations/policies.md, row S2).

At prices ``p >= 0`` of the types' GPUs a job does best alone with all its time on the type of largest profit
``v[k, t] - w[k] p[t]`` if that is positive, else with none, so the Lagrangian dual (B2 priced)

    L(p) = W . p + sum_k max(0, max_t (v[k, t] - w[k] p[t]))

bounds the LP's optimum for every ``p`` and ``min_p L`` is the optimum. So: prices minimising ``L``
(:func:`~synergy_opt.policies.prices.minimise_dual`); every job whose best choice (a type, or none) beats the next
by more than ``MARGIN`` of its largest value fixed at it; the LP of the rest (capacity less the fixed jobs'
GPUs) by the chosen backend; its value plus the fixed jobs' within ``CERTIFY`` of ``L(p)``: optimal. Else the
margin tenfold; the whole LP past half the jobs free or after ``ROUNDS`` rounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from synergy_opt.policies.decomposed import CERTIFY, FREE_SHARE, MARGIN, ROUNDS, solve_reduced
from synergy_opt.policies.prices import minimise_dual
from synergy_opt.policies.problem import add_fractions
from synergy_opt.policies.solve import Solved
from synergy_opt.solvers import SolveResult, SolverParams
from synergy_opt.solvers.model import ModelBuilder


@dataclass(frozen=True, eq=False)
class Choices:
    """Each row's best choice at some prices (a type, or -1: none), the margin over its next, and ``L(p)``'s
    value and subgradient there."""

    best: np.ndarray
    margin: np.ndarray
    value: float
    gradient: np.ndarray


def choices(values: np.ndarray, usable: np.ndarray, weights: np.ndarray, gpus: np.ndarray,
            prices: np.ndarray) -> Choices:
    """Row S2 at ``prices`` (``values[k, t]``: what job ``k`` earns with all its time on ``t``)."""
    profit = np.where(usable, values - weights[:, None] * prices[None, :], -np.inf)
    options = np.concatenate([np.zeros((profit.shape[0], 1)), profit], axis=1)  # column 0: no time
    ordered = np.sort(options, axis=1)
    best = options.argmax(axis=1) - 1
    top = ordered[:, -1]
    load = np.bincount(best[best >= 0], weights=weights[best >= 0], minlength=gpus.size)
    return Choices(best, ordered[:, -1] - ordered[:, -2], float(gpus @ prices + top.sum()), gpus - load)


def solve_sum_decomposed(values: np.ndarray, weights: np.ndarray, gpus: np.ndarray, usable: np.ndarray,
                         solver: str, params: SolverParams, started: float) -> tuple[Solved, int, int]:
    """Maximise ``sum values * x`` over rows B1-B3 (weights: GPUs per unit of ``x``) exactly (see the module); the
    policies' :class:`Solved` (every second since ``started`` outside the backends counts as building), the LPs
    solved and the rows left free."""
    usable = usable & (gpus > 0)[None, :]
    rows, types = values.shape
    cap = float(np.where(usable, values, 0.0).max(axis=1, initial=0.0).sum())  # L(0): W . p* <= L(p*) <= L(0)

    def evaluate(prices: np.ndarray) -> tuple[float, np.ndarray]:
        found = choices(values, usable, weights, gpus, prices)
        return found.value, found.gradient

    # No job can use any type (no GPUs at all, say): nothing to price, every job without time.
    prices = minimise_dual(evaluate, gpus, cap, None, cap * 1e-9) if usable.any() else np.zeros(types)
    at = choices(values, usable, weights, gpus, prices)
    scale = np.where(usable, values, 0.0).max(axis=1, initial=0.0)
    margin, solve_s, lps = MARGIN, 0.0, 0
    result: SolveResult | None = None
    for round_ in range(ROUNDS + 1):
        free = at.margin <= margin * scale
        if round_ == ROUNDS or free.sum() > FREE_SHARE * rows:
            free[:] = True
        fixed = np.flatnonzero(~free & (at.best >= 0))
        x = np.zeros((rows, types))
        x[fixed, at.best[fixed]] = 1.0
        builder = ModelBuilder("max_sum_throughput_reduced", "max")
        add_fractions(builder, usable[free], weights[free], gpus - weights @ x, values[free].ravel())
        model = builder.build()
        result = solve_reduced(model, solver, params)
        lps += 1
        solve_s += result.solve_seconds
        if result.has_solution and result.objective is not None:
            earned = float(result.objective) + float((values * x).sum())
            if free.all() or at.value - earned <= CERTIFY * max(abs(earned), np.finfo(float).tiny):
                x[free] = result.values(model, "x").reshape(-1, types)
                # The whole LP's objective, and the bound that certified it.
                solved = replace(result, objective=earned, bound=earned if free.all() else at.value)
                seconds = time.perf_counter() - started - solve_s
                return Solved(solved, np.clip(x, 0.0, 1.0), seconds, solve_s), lps, int(free.sum())
        if free.all():
            break
        margin *= 10
    assert result is not None
    return Solved(result, None, time.perf_counter() - started - solve_s, solve_s), lps, rows

