"""The LP of max-min fairness, makespan and finish-time fairness's steps, solved exactly with most jobs fixed.

Each of these LPs is, after scaling its rows (formulations/policies.md, rows D1-D4),

    maximise z  subject to  c[k] . x[k] >= a[k] + z   for every row k,   and rows B1-B3,

one ``z`` column in every row, ``K`` GPU types (a few) and one row per job or class. At the LP's optimal prices
``p`` of the types (B2's duals) almost every job runs on one type only, the one with the least ``p[t] / c[k, t]``,
and not all the time. A job fixed so takes ``x[k, t] = (a[k] + z) / c[k, t]``: it adds ``weights[k] / c[k, t]``
GPUs of type ``t`` per unit of ``a[k] + z`` to B2 and leaves the LP. So:

1. prices, and an upper bound on ``z``: when every ``a`` is 0 (max-min, makespan) first from the LP without its
   time rows, whose dual is a function of ``K`` numbers (:mod:`synergy_opt.policies.prices`); else, or when that
   bound is not reached, from the whole LP's Lagrangian dual (:mod:`synergy_opt.policies.dual`);
2. the rows whose cheapest type beats the next by more than ``MARGIN``, and whose time row (or ``x >= 0``) is not
   near binding, are fixed (D2); the reduced LP of the rest (a restriction: its solution is feasible for the whole
   LP, so its ``z`` is a lower bound) is solved by the chosen backend;
3. lower bound within ``CERTIFY`` (relative) of the upper bound: optimal (D4). Otherwise the margin grows tenfold
   and it repeats; past ``FREE_SHARE`` of the rows free, or after ``ROUNDS`` rounds, the whole LP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import highspy
import numpy as np

from synergy_opt.policies.dual import DualPoint, dual_point, hull
from synergy_opt.policies.prices import maximise, minimise_dual, relaxation_oracle
from synergy_opt.policies.problem import add_fractions
from synergy_opt.policies.solve import Solved, large_lp_options
from synergy_opt.solvers import DEFAULT_SOLVER, SolveResult, SolverParams, solve_model
from synergy_opt.solvers.highs import run, to_highs
from synergy_opt.solvers.model import LinearModel, ModelBuilder

CERTIFY = 1e-7  # relative gap accepted: the backends' default feasibility tolerances
MARGIN = 1e-3  # a row is fixed when its cheapest type is cheaper than the next by more than this (relative)
ROUNDS = 4
FREE_SHARE = 0.5  # above this share of free rows, the whole LP
TIE_BREAK = 1e-6


@dataclass(frozen=True, eq=False)
class Requirements:
    """``maximise z`` s.t. ``coefficients[k] . x[k] >= offsets[k] + z``, ``sum_k weights[k] x[k, t] <= gpus[t]``,
    ``sum_t x[k, t] <= 1``, ``x >= 0`` (0 where the coefficient or the type's GPUs are 0), ``z >= z_lower``.

    Either every offset is 0 or ``z_lower`` is ``-inf`` (the policies' cases). ``scale``: the size of ``z`` the
    certificate's tolerance is relative to, at least (0: ``|z|`` alone).
    """

    coefficients: np.ndarray
    offsets: np.ndarray
    weights: np.ndarray
    gpus: np.ndarray
    z_lower: float = 0.0
    scale: float = 0.0
    usable: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "usable", (self.coefficients > 0) & (self.gpus > 0)[None, :])

    def rows(self, picked: np.ndarray, unit: float = 1.0) -> Requirements:
        """Rows ``picked``, with ``z`` counted in ``unit`` (every row divided by it)."""
        return Requirements(self.coefficients[picked] / unit, self.offsets[picked] / unit, self.weights[picked],
                            self.gpus, self.z_lower / unit, self.scale / unit)

    def dual(self, prices: np.ndarray) -> DualPoint:
        """The Lagrangian dual at ``prices`` (every row must be servable)."""
        return dual_point(self.coefficients, self.offsets, self.weights, self.gpus, self.usable, self.z_lower, prices)


@dataclass(frozen=True, eq=False)
class Decomposed:
    """A decomposed solve: ``z`` and ``x`` (``(rows, types)``) at the optimum (None without), the last reduced
    LP's result, the prices used last (in the LP's units), LPs solved, rows left free, and the seconds spent."""

    z: float | None
    x: np.ndarray | None
    result: SolveResult
    prices: np.ndarray | None
    lps: int
    free_rows: int
    build_seconds: float
    solve_seconds: float


def relaxation_prices(req: Requirements) -> tuple[np.ndarray, float]:
    """Prices from the LP without time rows (row D3) and, when every offset is 0, its optimum (an upper bound on
    the whole LP's ``z``; ``inf`` otherwise). Rows are weighted by what they need: 1 each when offsets are 0, else
    ``max(a[k], 0)`` (the need at ``z = 0``). With offsets 0 the prices are the relaxed LP's duals."""
    open_types = req.gpus > 0
    if not open_types.any() or not req.usable.any():
        return np.zeros(req.gpus.size), np.inf
    homogeneous = not req.offsets.any()
    need = np.ones(req.offsets.size) if homogeneous else np.maximum(req.offsets, 0.0)
    usable = req.usable[:, open_types]
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(usable, (need * req.weights)[:, None]
                     / (np.where(usable, req.coefficients[:, open_types], 1.0) * req.gpus[open_types]), np.inf)
    best = maximise(relaxation_oracle(b), int(open_types.sum()))
    bound = 1.0 / best.value if homogeneous and best.value > 0 else np.inf
    prices = np.zeros(req.gpus.size)
    prices[open_types] = best.point / req.gpus[open_types] * (bound if bound < np.inf else 1.0)
    return prices, bound


def dual_prices(req: Requirements, start: np.ndarray) -> tuple[np.ndarray, DualPoint]:
    """Prices minimising the Lagrangian dual (row D3), from ``start``, and the dual there. At the optimum
    ``W . p <= cap``, ``cap`` the dual at ``p = 0`` plus the largest offset."""
    cap = req.dual(np.zeros(req.gpus.size)).value + max(float(req.offsets.max(initial=0.0)), 0.0)

    def evaluate(prices: np.ndarray) -> tuple[float, np.ndarray]:
        point = req.dual(prices)
        return point.value, point.gradient

    prices = minimise_dual(evaluate, req.gpus, cap, start, max(req.scale, cap * 1e-6))
    return prices, req.dual(prices)


def cheapest(req: Requirements, prices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's cheapest type at ``prices`` (least ``p[t] / c[k, t]``) and its relative margin over the next
    (``inf`` with one usable type; 0 for a tie at price 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(req.usable, prices[None, :] / np.where(req.usable, req.coefficients, 1.0), np.inf)
    ordered = np.sort(ratio, axis=1)
    first = ordered[:, 0]
    second = ordered[:, 1] if ratio.shape[1] > 1 else np.full(first.size, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(first > 0, second / first - 1.0, np.where(second > 0, np.inf, 0.0))
    return ratio.argmin(axis=1), margin


@dataclass(frozen=True, eq=False)
class Split:
    """Row D2's split: which rows stay free, and each fixed row's time as ``x[k] = offset[k] + slope[k] * z``
    (``(rows, types)``), valid for ``z`` in ``[low[k], high[k]]``."""

    free: np.ndarray
    offset: np.ndarray
    slope: np.ndarray
    low: np.ndarray
    high: np.ndarray


def split(req: Requirements, prices: np.ndarray, need: np.ndarray, margin: float, mixes: bool) -> Split:
    """Row D2's split at ``prices``, ``need[k]`` each row's ``a + z`` near the optimum (or above it). A row is
    fixed where its cost hull (:mod:`~synergy_opt.policies.dual`) puts it: its cheapest type, part of the time
    (the hull's first segment), or with ``mixes`` two types all the time (a later segment). It stays free on a
    near tie of its cheapest type (``margin``, relative) or with its need within ``margin`` of its segment's ends."""
    rows, types = req.coefficients.shape
    index = np.arange(rows)
    shape = hull(req.coefficients, req.usable, req.weights[:, None] * prices[None, :])
    segment = shape.segment(need)
    previous = np.maximum(segment - 1, 0)
    low = np.where(segment > 0, shape.need[index, previous], 0.0)
    high = shape.need[index, segment]
    width = high - low
    _, ties = cheapest(req, prices)
    free = (ties <= margin) | (need >= high - margin * width) | ((segment > 0) & (not mixes))
    free |= (need <= low + margin * width) & ((segment > 0) | (req.offsets != 0))  # x >= 0 may bind
    # x[upper type] = (need - low) / width, x[lower type] = (high - need) / width; on the first segment need / c.
    offset, slope = np.zeros((rows, types)), np.zeros((rows, types))
    upper, lower = shape.type[index, segment], shape.type[index, previous]
    offset[index, upper] += (req.offsets - low) / width
    slope[index, upper] += 1.0 / width
    mixed = segment > 0
    offset[index[mixed], lower[mixed]] += (high - req.offsets)[mixed] / width[mixed]
    slope[index[mixed], lower[mixed]] -= 1.0 / width[mixed]
    return Split(free, offset, slope, low - req.offsets, high - req.offsets)


@dataclass(frozen=True, eq=False)
class Reduced:
    """The reduced LP (D2) of one split, and ``z``'s bounds from the fixed rows."""

    model: LinearModel
    split: Split
    lower: float
    upper: float


def reduced_lp(req: Requirements, parts: Split, ceiling: float) -> Reduced:
    """Row D2: maximise z over the free rows (B1-B3 and ``c . x - z >= a``) with the fixed rows' GPUs, affine in
    ``z``, in B2 and their ranges as bounds on ``z`` (``ceiling``: rows that can run nowhere, ``z <= -a``)."""
    types = req.gpus.size
    free, fixed = parts.free, ~parts.free
    slope = req.weights[fixed] @ parts.slope[fixed]
    constant = req.weights[fixed] @ parts.offset[fixed]
    lower = max(req.z_lower, float(np.max(parts.low[fixed], initial=-np.inf)))
    upper = min(ceiling, float(np.min(parts.high[fixed], initial=np.inf)))
    builder = ModelBuilder("requirements_reduced", "max")
    z = builder.add_vars("z", 1, lower=lower, upper=upper, objective=1.0)
    x = add_fractions(builder, req.usable[free], req.weights[free], req.gpus - constant, shared=(z.start, slope))
    rows = int(free.sum())
    local = np.arange(rows)
    builder.add_rows(  # c[k] . x[k] - z >= a[k]
        "requirement", np.concatenate([np.repeat(local, types), local]),
        np.concatenate([x.start + np.arange(rows * types), np.full(rows, z.start)]),
        np.concatenate([req.coefficients[free].ravel(), -np.ones(rows)]), lower=req.offsets[free], count=rows)
    return Reduced(builder.build(), parts, lower, upper)


def solve_reduced(model: LinearModel, solver: str, params: SolverParams) -> SolveResult:
    """A reduced LP on ``solver`` (HiGHS's interior point for a large one, as for the whole LPs)."""
    options = large_lp_options(model, solver, params.options)  # the whole LP, when it comes to that
    return solve_model(model, solver, replace(params, options=dict(options)))


def _solution(req: Requirements, reduced: Reduced, result: SolveResult) -> tuple[float, np.ndarray]:
    z = float(result.values(reduced.model, "z")[0])
    parts = reduced.split
    x = parts.offset + parts.slope * z
    x[parts.free] = result.values(reduced.model, "x").reshape(-1, req.gpus.size)
    return z, np.clip(x, 0.0, 1.0)


def solve_requirements(req: Requirements, solver: str, params: SolverParams,
                       prices: np.ndarray | None = None, exact: bool = True) -> Decomposed:
    """Solve the LP of :class:`Requirements` exactly (to ``CERTIFY``) by reduced LPs on ``solver`` (see the
    module); ``prices`` (the last solve's, of a similar LP) split the first reduced LP. Not ``exact``: that
    reduced LP alone, uncertified (a feasible point, ``result.bound`` None)."""
    started = time.perf_counter()
    served = np.asarray(req.usable.any(axis=1))
    homogeneous = not req.offsets.any()
    bound = np.inf
    if prices is None:
        prices, bound = relaxation_prices(req.rows(served))
    # z in units of the relaxation's bound: the backends' tolerances are absolute, and makespan's z is ~1e-6.
    unit = bound if 0 < bound < np.inf else 1.0
    sub = req.rows(served, unit)
    prices, bound = prices / unit, bound / unit
    tie = _tie_breaker(sub, prices)
    ceiling = float(np.min(-req.offsets[~served], initial=np.inf)) / unit  # rows no type serves: 0 >= a + z
    # Stages: the relaxation's prices and bound; or prices given (or a reduced LP's duals); then the dual's.
    stage = "relaxed" if np.isfinite(bound) else "given"
    # Each row's need a + z: up to the relaxation's bound (1 in its unit), or near 0 (finish-time fairness's steps).
    need = np.ones(sub.offsets.size) if stage == "relaxed" else np.maximum(sub.offsets, 0.0) + float(homogeneous)
    if not exact:
        bound = np.nan
    point: DualPoint | None = None
    solve_s, lps, margin = 0.0, 0, MARGIN
    result: SolveResult | None = None
    free = np.ones(sub.offsets.size, dtype=bool)
    resplit = False
    for round_ in range(ROUNDS + 1):
        if stage == "dual" and point is None and sub.offsets.size:
            prices, point = dual_prices(sub, prices)
            bound, need = point.value, point.need
        parts = split(sub, prices + tie, need, margin, mixes=stage != "relaxed")
        free = parts.free
        if round_ == ROUNDS or free.sum() > FREE_SHARE * free.size:
            free[:] = True
        reduced = reduced_lp(sub, parts, ceiling)
        result = solve_reduced(reduced.model, solver, params)
        lps += 1
        solve_s += result.solve_seconds
        if result.has_solution:
            z, x = _solution(sub, reduced, result)
            tolerance = CERTIFY * max(abs(z), sub.scale, np.finfo(float).tiny)
            certified = z if free.all() or z >= ceiling - tolerance else bound if bound - z <= tolerance else None
            if certified is None and exact and solver == DEFAULT_SOLVER:
                # HiGHS's own duals of the reduced LP price every row right when its split was right.
                found = highs_prices(reduced.model)
                if found is not None and (found[sub.gpus > 0] > 0).all():
                    value = sub.dual(found).value
                    certified, prices = (value if value - z <= tolerance else None), found
                    if certified is None and stage != "dual" and not resplit:  # once: split again at them
                        resplit, need = True, np.maximum(sub.offsets + z, 0.0)
                        continue
            if certified is not None or not exact:
                full = np.zeros(req.coefficients.shape)
                full[served] = x
                reached = None if certified is None else certified * unit
                return Decomposed(z * unit, full, replace(result, objective=z * unit, bound=reached), prices * unit,
                                  lps, int(free.sum()), time.perf_counter() - started - solve_s, solve_s)
        if free.all():
            break
        if stage != "dual" and sub.offsets.size:
            stage = "dual"
        else:
            margin *= 10
    assert result is not None
    return Decomposed(None, None, result, None, lps, int(free.sum()), time.perf_counter() - started - solve_s,
                      solve_s)


def highs_prices(model: LinearModel) -> np.ndarray | None:
    """The B2 rows' duals of a reduced LP by HiGHS (the neutral backends return no duals): a fast path to
    certify it on the default backend."""
    h = to_highs(model)
    run(h, 1)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.abs(np.asarray(h.getSolution().row_dual)[model.con_blocks["capacity"]])


def _tie_breaker(req: Requirements, prices: np.ndarray) -> np.ndarray:
    """Prices a millionth of ``z``'s size (``W . tie = 1e-6``) in the direction of ``prices``, or of the GPUs
    where a price is 0, added to the split's prices: where the dual's optimum leaves a type's GPUs idle (price 0,
    say a makespan set by one long job) every row would tie on it, and none could be fixed."""
    open_types = req.gpus > 0
    direction = prices if (prices[open_types] > 0).all() else np.where(open_types, 1.0, 0.0)
    total = float(req.gpus @ direction)
    return direction * (TIE_BREAK / total) if total > 0 else direction


def solve_decomposed(req: Requirements, rows: np.ndarray, total: int, solver: str, params: SolverParams,
                     started: float, prices: np.ndarray | None = None, exact: bool = True
                     ) -> tuple[Solved, Decomposed]:
    """:func:`solve_requirements` on ``req``, whose rows are rows ``rows`` of ``total`` (the others get no time),
    as the policies' :class:`Solved`; every second since ``started`` outside the backends counts as building."""
    decomposed = solve_requirements(req, solver, params, prices, exact)
    x = None
    if decomposed.x is not None:
        x = np.zeros((total, req.gpus.size))
        x[rows] = decomposed.x
    built = time.perf_counter() - started - decomposed.solve_seconds
    return Solved(decomposed.result, x, built, decomposed.solve_seconds), decomposed
