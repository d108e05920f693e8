"""Type choices on a type-free heterogeneous round.

- :func:`share_types`: the heterogeneity-aware choice that ignores CPU and memory, as Gavel's max-throughput
  policy makes it: the most total throughput at each type's proportional share, within each type's GPUs
  (a transportation LP, HiGHS; integral for 1-GPU jobs, its few split jobs rounded as below).
- :func:`lp_types` (near-opt's, and a candidate of the joint decomposition), below.

The types of the type-free ideal ILP's LP relaxation (:mod:`synergy_opt.ideal.hetero_model`; :func:`solve_lp`:
the Lagrangian prices of its coupling rows, then HiGHS's dual simplex on the columns they leave): a vertex of it
splits at most as many job classes between types or configs as the model has coupling rows (three per type), so
it is the ideal ILP's choice but for a few jobs, at the cost of one LP instead of a proof. Each class's jobs take
its types in proportion to the LP's counts (whole parts first); the fractional rest goes, largest jobs first, to
the type of most share with room for its GPUs. When the rest finds no room (multi-GPU jobs, room split between
types), a small MILP re-assigns the split classes and the whole ones that lose least by changing type (at the
LP's prices) within each type's GPUs. When the LP does not solve or the repair finds nothing, the baseline types
(which hold every job) are returned.
"""

from __future__ import annotations

import time

import numpy as np

from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_core import DUAL_ITERATIONS, DUAL_TOLERANCE, SMOOTHING
from synergy_opt.ideal.hetero_knapsack import TypedKnapsack
from synergy_opt.ideal.hetero_model import HeteroIdealModel, admissible, build_hetero_ideal
from synergy_opt.ideal.lagrangian import Knapsack, dual_value, solve_dual
from synergy_opt.solvers import SolverParams, solve_model
from synergy_opt.solvers.model import ModelBuilder

# Whole classes (those that lose least by changing type) that the repair may move besides the split ones.
REPAIR_CANDIDATES = 48
# solve_lp's first columns: reduced cost at the Lagrangian prices at most this, relative to the bound and per job
# (the prices' own gap, about 1e-10 relative, spread over the jobs, is far below it); its restricted LP is the
# whole LP's optimum when within the second of the bound, relative; a column enters later when its reduced cost
# at the LP's duals is above the third, relative.
CANDIDATE_GAP = 1e-6
BOUND_TOLERANCE = 1e-9
PRICING_TOLERANCE = 1e-12
# baseline_bound's prices stop within this relative gap: any prices give a bound, and below about 1e-10 Kelley's
# cuts stall at the master LP's own precision (measured: 500 iterations, 0.15 s, on one type of a 3 x 1024 round).
BOUND_DUAL_TOLERANCE = 1e-9


def share_types(instance: HeteroRound) -> list[str]:
    """A type per job (job order): the most throughput at the types' proportional shares (module docstring)."""
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import quiet_highs, run  # highspy on first solve

    cluster = instance.cluster
    n, kinds = len(instance.jobs), len(cluster.types)
    allowed = admissible(instance)
    value = np.column_stack([instance.throughput_at_share(name) for name in cluster.names])
    job, kind = np.nonzero(allowed)
    gpus = instance.gpus.astype(float)
    lp = quiet_highs()
    lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
    lp.setOptionValue("solver", "simplex")
    capacity = np.array([t.total_gpus for t in cluster.types], dtype=float)
    lp.addRows(n + kinds, np.concatenate([np.ones(n), np.full(kinds, -highspy.kHighsInf)]),
               np.concatenate([np.ones(n), capacity]), 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    count = job.size
    lp.addCols(count, value[job, kind], np.zeros(count), np.ones(count), 2 * count,
               np.arange(0, 2 * count, 2, dtype=np.int32), np.column_stack([job, n + kind]).ravel().astype(np.int32),
               np.column_stack([np.ones(count), gpus[job]]).ravel())
    run(lp, 1)
    if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return list(instance.baselines)
    share = np.zeros((n, kinds))
    share[job, kind] = np.array(lp.getSolution().col_value)
    types = _rounded(instance, share, np.arange(n), np.ones(n, dtype=np.int64), allowed)
    return list(instance.baselines) if types is None else [cluster.names[int(k)] for k in types]


def _rounded(instance: HeteroRound, mass: np.ndarray, class_jobs: np.ndarray, class_count: np.ndarray,
             allowed: np.ndarray) -> np.ndarray | None:
    """Each class's jobs to types in proportion to ``mass`` (classes x types): whole parts first, the rest,
    largest jobs first, to the type of most share with room for its GPUs; None when some job finds no room."""
    cluster = instance.cluster
    offsets = np.concatenate([[0], np.cumsum(class_count)])
    class_gpus = instance.gpus[class_jobs[offsets[:-1]]]
    whole = np.floor(mass + 1e-6).astype(np.int64)
    room = np.array([t.total_gpus for t in cluster.types], dtype=np.int64) - class_gpus @ whole
    rest = class_count - whole.sum(axis=1)
    for q in np.flatnonzero(rest > 0)[np.argsort(-class_gpus[rest > 0], kind="stable")]:
        fraction = mass[q] - whole[q]
        for _ in range(int(rest[q])):
            for k in np.argsort(-fraction, kind="stable"):
                if allowed[class_jobs[offsets[q]], k] and fraction[k] > 1e-9 and room[k] >= class_gpus[q]:
                    whole[q, k] += 1
                    fraction[k] -= 1
                    room[k] -= class_gpus[q]
                    break
            else:
                return None
    return _class_types(class_jobs, whole)


def _class_types(class_jobs: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """A type per job (job order) from each class's count on each type (classes x types, each row summing to
    its class's jobs): a class's jobs, in ``class_jobs`` order, take its types in order (one vectorised repeat:
    a repeat per class took 8 ms on 3072 classes)."""
    types = np.empty(class_jobs.size, dtype=np.int64)
    types[class_jobs] = np.repeat(np.tile(np.arange(counts.shape[1]), counts.shape[0]), counts.ravel())
    return types


def baseline_bound(ideal: HeteroIdealModel, prices: np.ndarray | None = None, decide: float | None = None,
                   slack: float = 0.0) -> float:
    """An upper bound on the ideal ILP of the round's baseline types, fixed (so on every mechanism there): each
    type's Lagrangian dual of its CPU and memory rows over its baseline jobs' columns (the type-free model's
    columns on each class's baseline type are exactly that round's, H6), which equals that type's LP.

    With ``prices`` (one per coupling row, as the model orders them: the type-free LP's row duals, say) and
    ``decide``: when the Lagrangian bound at those prices (each type's at its CPU and memory prices: any
    prices give a bound) is at most ``decide``, that bound is returned without minimising (measured on noisy
    3 x 1024-GPU rounds: the type-free LP's prices decide near-opt's total against it on every round, where the
    minimum took about 70 of Kelley's cuts, 20 ms); otherwise the minimum, the baseline types' LP. ``slack``:
    the CPUs and memory taken that much larger, relative (a packing that fits servers within a tolerance of their
    capacities is bounded so)."""
    instance = ideal.instance
    cluster = instance.cluster
    offsets = np.concatenate([[0], np.cumsum(ideal.class_count)])
    class_baseline = instance.baseline_index[ideal.class_jobs[offsets[:-1]]]
    model = ideal.model
    rows = ideal.coupling_rows.reshape(3, len(cluster.types))  # gpu, cpu, mem rows, type by type
    knapsacks: dict[int, Knapsack] = {}
    for k in range(len(cluster.types)):
        cols = np.flatnonzero((ideal.col_type == k) & (class_baseline[ideal.col_class] == k))
        if not cols.size:
            continue
        usage = model.matrix[rows[1:, k]][:, cols].toarray()
        classes, local = np.unique(ideal.col_class[cols], return_inverse=True)
        knapsacks[k] = Knapsack(value=model.objective[cols], cpu=usage[0], mem=usage[1], col_class=local.ravel(),
                                class_count=ideal.class_count[classes].astype(float),
                                capacity=model.row_upper[rows[1:, k]].astype(float) * (1 + slack))
    if prices is not None and decide is not None:
        priced = np.maximum(np.asarray(prices, dtype=float).reshape(3, len(cluster.types)), 0.0)
        at_prices = sum(dual_value(knapsack, priced[1:, k])[0] for k, knapsack in knapsacks.items())
        if at_prices <= decide:
            return at_prices
    return sum(solve_dual(knapsack, tolerance=BOUND_DUAL_TOLERANCE, smoothing=SMOOTHING).bound
               for knapsack in knapsacks.values())


def lp_types(instance: HeteroRound, ideal: HeteroIdealModel | None = None,
             solution: tuple[np.ndarray, np.ndarray] | None = None) -> list[str]:
    """A type per job (job order), from the type-free ideal LP (module docstring); ``ideal`` is the round's
    type-free model when it is already built, ``solution`` its LP's column values and row duals when solved."""
    cluster = instance.cluster
    baseline = list(instance.baselines)
    ideal = ideal if ideal is not None else build_hetero_ideal(instance)
    if solution is None:
        solution = solve_lp(ideal)
        if solution is None:
            return baseline
    y, duals = solution
    # Summed column by column as np.add.at sums them (bincount, a tenth of its time; the same values).
    kinds = len(cluster.types)
    mass = np.bincount(ideal.col_class * kinds + ideal.col_type, weights=y,
                       minlength=ideal.num_classes * kinds).reshape(ideal.num_classes, kinds)
    types = _rounded(instance, mass, ideal.class_jobs, ideal.class_count, ideal.allowed)
    if types is None:  # the split jobs' GPUs do not fit the room left: a small exact repair
        lam = np.maximum(duals[ideal.coupling_rows], 0.0)
        priced = ideal.model.objective - ideal.model.matrix[ideal.coupling_rows].T @ lam
        types = _repaired(instance, ideal, mass, priced)
    return baseline if types is None else [cluster.names[int(k)] for k in types]


def solve_lp(ideal: HeteroIdealModel, time_limit: float | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """The type-free model's LP relaxation: column values and row duals (None when it does not solve to
    optimality, a time limit say).

    Through the Lagrangian prices of the coupling rows (as the core method computes them, Kelley's cuts): they
    leave about one column of (near) zero reduced cost per class, and HiGHS's dual simplex solves the LP over
    those columns alone (all rows kept; a vertex of it is one of the whole LP). Its optimum is the whole LP's
    when it reaches the Lagrangian bound (weak duality; then the prices and each class's best priced value are
    the row duals returned). Otherwise columns are generated: every column is priced at that LP's row duals,
    those that would enter are added, until none would. Measured on noisy 3 x 1024-GPU rounds (36 thousand
    columns): 0.8 s for the whole LP, about 0.1 s this way.
    """
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import quiet_highs, run  # highspy on first solve

    model = ideal.model
    if not model.num_vars:  # a round without jobs: nothing to price, every row empty
        return np.zeros(0), np.zeros(model.num_cons)
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    knapsack = TypedKnapsack.of(ideal)
    dual = solve_dual(knapsack, tolerance=DUAL_TOLERANCE, max_iterations=DUAL_ITERATIONS, smoothing=SMOOTHING)
    scale = max(1.0, abs(dual.bound))
    lp = quiet_highs()
    lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
    lp.setOptionValue("solver", "simplex")
    lp.addRows(model.num_cons, model.row_lower, model.row_upper, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
               np.zeros(0))
    order = np.zeros(0, dtype=np.int64)  # the model's column of each of the LP's
    taken = np.zeros(model.num_vars, dtype=bool)
    gap = CANDIDATE_GAP * scale / max(1.0, float(knapsack.class_count.sum()))
    entering = np.flatnonzero(dual.reduced_cost <= gap)
    prices_checked = False
    while entering.size:
        # Only the entering columns converted (the whole matrix to CSC took 3 ms at 3 x 1024 GPUs; the same arrays).
        part = model.matrix[:, entering].tocsc()
        lp.addCols(entering.size, model.objective[entering], model.col_lower[entering], model.col_upper[entering],
                   part.nnz, part.indptr[:-1].astype(np.int32), part.indices.astype(np.int32), part.data)
        order = np.concatenate([order, entering])
        taken[entering] = True
        if deadline is not None:
            lp.setOptionValue("time_limit", max(deadline - time.perf_counter(), 0.0))
        run(lp, 1)
        status = lp.getModelStatus()
        if status == highspy.HighsModelStatus.kTimeLimit:
            return None
        if status != highspy.HighsModelStatus.kOptimal:  # the prices' columns alone admit no solution: widen
            if taken.all():
                return None
            gap *= 1e3
            entering = np.flatnonzero(~taken & (dual.reduced_cost <= gap))
            if not entering.size or gap >= scale:  # none within the wider gap: every column left
                entering = np.flatnonzero(~taken)
            continue
        if not prices_checked and lp.getInfo().objective_function_value >= dual.bound - BOUND_TOLERANCE * scale:
            row_dual = np.zeros(model.num_cons)
            row_dual[ideal.coupling_rows] = dual.multipliers
            assign = model.con_blocks["assign"]
            row_dual[assign] = knapsack.priced(dual.multipliers)[1]
            break
        prices_checked = True
        row_dual = np.array(lp.getSolution().row_dual)
        # A column at zero would enter the basis of this maximisation if its reduced cost is positive.
        reduced = model.objective - model.matrix.T @ row_dual
        entering = np.flatnonzero(~taken & (reduced > PRICING_TOLERANCE * scale))
    y = np.zeros(model.num_vars)
    y[order] = lp.getSolution().col_value
    return y, row_dual


def _repaired(instance: HeteroRound, ideal: HeteroIdealModel, mass: np.ndarray, priced: np.ndarray
              ) -> np.ndarray | None:
    """The split classes and the ``REPAIR_CANDIDATES`` whole ones that lose least by changing type, re-assigned
    to types by a small MILP (HiGHS) of most priced value within each type's GPUs; the others keep their type."""
    kinds = len(instance.cluster.types)
    value = np.full((ideal.num_classes, kinds), -np.inf)
    np.maximum.at(value, (ideal.col_class, ideal.col_type), priced)
    offsets = np.concatenate([[0], np.cumsum(ideal.class_count)])
    class_gpus = instance.gpus[ideal.class_jobs[offsets[:-1]]]
    split = np.flatnonzero(np.any(np.abs(mass - np.rint(mass)) > 1e-6, axis=1))
    home = mass.argmax(axis=1)
    ranked = np.sort(value, axis=1)
    regret = ranked[:, -1] - ranked[:, -2] if kinds > 1 else np.full(ideal.num_classes, np.inf)
    movable = np.flatnonzero(np.isfinite(regret) & (class_gpus <= class_gpus[split].max(initial=0)))
    movable = np.setdiff1d(movable[np.argsort(regret[movable], kind="stable")], split)[:REPAIR_CANDIDATES]
    open_classes = np.concatenate([split, movable])
    fixed = np.ones(ideal.num_classes, dtype=bool)
    fixed[open_classes] = False
    room = np.array([t.total_gpus for t in instance.cluster.types], dtype=float)
    room -= np.bincount(home[fixed], weights=(class_gpus * ideal.class_count)[fixed], minlength=kinds)
    q, k = np.nonzero(np.isfinite(value[open_classes]))
    builder = ModelBuilder("type_repair", "max")
    x = builder.add_vars("x", q.size, upper=ideal.class_count[open_classes[q]].astype(float), integer=True,
                         objective=value[open_classes[q], k])
    cols = np.arange(x.start, x.stop)
    count = ideal.class_count[open_classes]
    builder.add_rows("assign", q, cols, np.ones(q.size), lower=count, upper=count, count=open_classes.size)
    builder.add_rows("gpus", k, cols, class_gpus[open_classes[q]].astype(float), upper=room, count=kinds)
    result = solve_model(builder.build(), "highs", SolverParams(mip_gap=1e-6))
    if not result.has_solution:
        return None
    counts = np.zeros((ideal.num_classes, kinds), dtype=np.int64)
    counts[fixed, home[fixed]] = ideal.class_count[fixed]
    np.add.at(counts, (open_classes[q], k), np.rint(result.solution()).astype(np.int64))
    return _class_types(ideal.class_jobs, counts)
