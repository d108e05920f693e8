"""The decomposition's master LP, priced by column generation (Dantzig-Wolfe over server patterns).

Rows: ``assign`` (every job of class ``q`` gets one column, ``= n_q``), ``cover`` (per item type: the patterns'
slots hold what the chosen columns ask for, ``sum_p a[p,t] x[p] - sum u y >= 0``), ``servers``
(``sum_p x[p] <= s``), and the branch-and-price's rows on the patterns (``sum_{p: a[p,t] >= k} x[p]``, free
until a node bounds them, :meth:`ColumnGeneration.restrict`). The job columns ``y`` are all there from the start;
patterns ``x`` enter as the pricing problem (:func:`~synergy_opt.joint.pricing.best_patterns`) finds them.

Servers of several shapes (a heterogeneous round's GPU types, :class:`ServerKind`): each kind has its own item
types (a range of the master's), its own ``servers`` row (``sum_{p of k} x[p] <= s_k``) and its own pricing
problem; a job column asks for items of one kind. ``L`` below then sums ``s_k max(0, ...)`` over the kinds.

Bound. For any prices ``pi >= 0`` of the cover rows and multipliers ``lambda`` of the branch rows of the right
sign (``>= 0`` on an upper bound ``r``, ``<= 0`` on a lower one), every solution (integral or not) within the
columns' bounds has value at most

    L = sum_q max_{y_q} sum_{col of q} (w_col - u_col pi_t(col)) y_col
        + s max(0, max_a pi . a - sum_rows lambda [a[t] >= k]) + sum_rows lambda r

(price the rows into the objective: the columns then decouple per class, each class's jobs taking their best
columns within the bounds, and the patterns per server; the rows' slacks only lower the value). The pricing
gives the second term exactly, so ``L`` is a valid bound at every iteration, not only at the end; at the LP
optimum it equals the LP value. Without bounds and rows it is
``sum_q n_q max_{col of q} (w_col - u_col pi_t) + s max(0, max_a pi . a)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from synergy_opt.joint.model import ItemColumns
from synergy_opt.joint.pricing import Bonus, ItemTypes, PricingDeadline, best_patterns

# Patterns added per pricing round (the best ones the DP found).
PATTERNS_PER_ROUND = 16
# Relative tolerance of "no pattern prices out" and of "the bound meets the LP".
_TOLERANCE = 1e-9
MAX_ROUNDS = 2_000
# Pricing rounds between two fixings of a dive (the LP need not be optimal to steer the rounding).
DIVE_ROUNDS = 3
# Cost of an artificial slot, in units of the largest total weight, while nodes of the branch-and-price are
# solved: a node whose restrictions no generated pattern meets yet stays feasible, and one that is infeasible
# ends below any incumbent once priced out.
ARTIFICIAL_COST = 4.0
# A condition on a pattern: components (item type, at least), all of which it meets.
Condition = tuple[tuple[int, int], ...]


@dataclass(frozen=True, eq=False)
class Prices:
    """Prices of the cover rows, the bound ``L`` they give, and the reduced costs they imply (all >= 0).

    ``column_rc[col] = best_q - (w_col - u_col pi_t)`` and a pattern's ``P - pi . a`` (``P`` the best pattern's
    value, or 0) are what a solution loses against ``L``: its value is ``L`` minus its columns' and servers'
    reduced costs minus the priced cover slack (without bounds and rows). At a node ``column_rc`` is what one
    more unit of a column costs against the node's ``L`` (:func:`class_best`); reduced-cost fixing uses it.
    """

    pi: np.ndarray
    bound: float
    pattern_values: np.ndarray  # per server kind, its best pattern's value (at least 0)
    column_rc: np.ndarray


@dataclass(frozen=True, eq=False)
class ServerKind:
    """Servers of one shape: the master's item types ``first, first + 1, ...`` are theirs (``types`` numbers them
    from 0), and there are ``servers`` of them."""

    types: ItemTypes
    first: int
    servers: int

    @property
    def stop(self) -> int:
        return self.first + int(self.types.size.size)


@dataclass(frozen=True, eq=False)
class Restriction:
    """A node's bounds on the job columns and multipliers of its rows on the patterns, for :func:`price`."""

    y_lower: np.ndarray
    y_upper: np.ndarray
    bonus: Bonus  # minus each row's multiplier, on the patterns it counts
    constant: float  # sum of multiplier x bound


def price(items: ItemColumns, kinds: tuple[ServerKind, ...], pi: np.ndarray, weight: np.ndarray | None = None,
          restriction: Restriction | None = None, beat: np.ndarray | None = None, cutoff: float = -np.inf,
          deadline: float | None = None) -> tuple[Prices, np.ndarray, np.ndarray, np.ndarray]:
    """``L`` at ``pi`` (and the node's ``restriction``; see the module docstring), the reduced costs, and the
    best patterns found (worth ``pi . a + bonus(a)``) with the kind of each. Only patterns worth more than
    ``beat`` (per kind: the LP's price of a server) are sought, nor (one kind) than the value below which ``L``
    would be at most ``cutoff`` (the node is closed then, new patterns or not): when there are none, that value
    stands for the best, an upper bound on it."""
    pi = np.maximum(pi, 0.0)
    cols = items.columns
    w = items.weight if weight is None else weight
    net = w - items.units * pi[items.col_item]
    best = np.full(cols.count.size, -np.inf)
    np.maximum.at(best, cols.cls, net)
    if restriction is None:
        classes = float(cols.count @ best)
        constant = 0.0
        rc = np.maximum(best[cols.cls] - net, 0.0)
    else:
        classes, rc = class_best(net, cols.cls, cols.count, restriction.y_lower, restriction.y_upper)
        constant = restriction.constant
    beat = np.zeros(len(kinds)) if beat is None else np.array(beat, dtype=float)
    if len(kinds) == 1 and np.isfinite(cutoff) and np.isfinite(classes):
        enough = (cutoff - classes - constant) / kinds[0].servers
        beat[0] = max(beat[0], enough - _TOLERANCE * max(1.0, abs(enough)))  # below it, L is under the cut-off
    tops, found, values, kind_of = [], [], [], []
    for k, kind in enumerate(kinds):
        mine = slice(kind.first, kind.stop)
        bonus = None if restriction is None else restriction.bonus.within(kind.first, kind.stop)
        priced = best_patterns(kind.types, pi[mine], items.per_server[mine], count=PATTERNS_PER_ROUND, bonus=bonus,
                               beat=float(beat[k]), deadline=deadline)
        tops.append(max(priced.value, 0.0))
        patterns = np.zeros((len(priced.patterns), pi.size), dtype=np.int64)
        patterns[:, mine] = priced.patterns
        found.append(patterns)
        values.append(priced.values)
        kind_of.append(np.full(len(patterns), k))
    top = np.array(tops)
    bound = classes + float(np.array([kind.servers for kind in kinds]) @ top) + constant
    return Prices(pi, bound, top, rc), np.vstack(found), np.concatenate(values), np.concatenate(kind_of)


def class_best(net: np.ndarray, cls: np.ndarray, count: np.ndarray, lower: np.ndarray, upper: np.ndarray
               ) -> tuple[float, np.ndarray]:
    """``sum_q max sum_{col of q} net y`` over ``lower <= y <= upper`` with ``sum_{col of q} y = n_q``: each class
    takes its lower bounds, then its best columns up to their upper bounds (-inf when a class cannot be met).
    Also what one more unit of each column would cost against it (the net of the class's last free unit taken
    minus the column's; infinite when the class has no free unit)."""
    left = count - np.bincount(cls, weights=lower, minlength=count.size)
    order = np.lexsort((-net, cls))
    room = (upper - lower)[order]
    total = np.cumsum(room)
    starts = np.searchsorted(cls[order], np.arange(count.size))
    before = total - room - np.r_[0.0, total][starts][cls[order]]
    take = np.clip(left[cls[order]] - before, 0.0, room)
    placed = np.bincount(cls[order], weights=take, minlength=count.size)
    marginal = np.full(count.size, np.inf)
    np.minimum.at(marginal, cls[order][take > 0], net[order][take > 0])
    rc = np.maximum(marginal[cls] - net, 0.0)
    if np.any(left < -1e-9) or np.any(placed < left - 1e-9):
        return -np.inf, rc
    return float(lower @ net + take @ net[order]), rc


@dataclass
class NodeLP:
    """A node's master LP after column generation: its bound (valid whenever it stopped), LP value and
    solution, and whether it was priced out (``converged``) or stopped at the cut-off or the deadline."""

    bound: float
    value: float
    converged: bool
    y: np.ndarray
    x: np.ndarray
    artificial: float  # artificial slots in the LP solution (0 when it is a solution of the real master)
    prices: Prices | None = None  # the prices of the least bound (their column_rc: what one more unit costs)


@dataclass
class ColumnGeneration:
    """The master LP on HiGHS, its patterns, the branch rows, and the best prices seen at the root."""

    items: ItemColumns
    kinds: tuple[ServerKind, ...]
    patterns: np.ndarray
    best: Prices | None = None
    lp_value: float | None = None
    rounds: int = 0
    converged: bool = False
    # A master :meth:`reduced` from another (the root's): that one, and the model's column of each job column here.
    root: ColumnGeneration | None = None
    model_columns: np.ndarray | None = None
    # Patterns priced in the trees' reduced masters (not kept here: each tree starts from the root's patterns; kept,
    # they changed the trees: 128-GPU noisy multi-GPU seed 3 took 94 nodes and 4.7 s instead of 56 and 2.5 s).
    tree_patterns: int = 0

    def __post_init__(self) -> None:
        import highspy  # imported on use, as the backends are

        from synergy_opt.solvers.highs import quiet_highs  # highspy on first use (no solver library at import)

        items = self.items
        cols = items.columns
        n_cls, n_types = cols.count.size, items.item_size.size
        self._highspy = highspy
        h = quiet_highs()
        inf = highspy.kHighsInf
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        # Rows: assign (classes), cover (types), servers.
        h.addRows(n_cls, cols.count.astype(float), cols.count.astype(float), 0, np.zeros(0, np.int32),
                  np.zeros(0, np.int32), np.zeros(0))
        h.addRows(n_types, np.zeros(n_types), np.full(n_types, inf), 0, np.zeros(0, np.int32),
                  np.zeros(0, np.int32), np.zeros(0))
        servers = np.array([float(kind.servers) for kind in self.kinds])
        h.addRows(servers.size, np.full(servers.size, -inf), servers, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
                  np.zeros(0))
        n = cols.cls.size
        # y column j: +1 in its class's assign row, -u in its type's cover row.
        starts = np.arange(0, 2 * n, 2, dtype=np.int32)
        index = np.empty(2 * n, dtype=np.int32)
        index[0::2] = cols.cls
        index[1::2] = n_cls + items.col_item
        value = np.empty(2 * n)
        value[0::2] = 1.0
        value[1::2] = -items.units
        h.addCols(n, items.weight, np.zeros(n), cols.most_jobs, 2 * n, starts, index, value)
        # Artificial slots per type (phase 1, and nodes of the branch-and-price): kept at 0 otherwise.
        h.addCols(n_types, np.zeros(n_types), np.zeros(n_types), np.zeros(n_types), n_types,
                  np.arange(n_types, dtype=np.int32), (n_cls + np.arange(n_types)).astype(np.int32), np.ones(n_types))
        self._h = h
        self._n_y = n
        self._n_cls = n_cls
        self._n_types = n_types
        self._servers_rows = n_cls + n_types + np.arange(len(self.kinds))
        self._first_branch = n_cls + n_types + len(self.kinds)
        self._item_kind = np.repeat(np.arange(len(self.kinds)), [kind.stop - kind.first for kind in self.kinds])
        self.pattern_kind = np.zeros(0, dtype=np.int64)  # the kind of each pattern
        # More than any two solutions can differ by: an integral LP solution that needs an artificial slot is
        # then worse than every real solution of its node.
        most = np.zeros(n_cls)
        np.maximum.at(most, cols.cls, np.abs(items.weight))
        self._artificial_cost = ARTIFICIAL_COST * (1.0 + float(cols.count @ most))
        self._artificial_cols: list[int] = list(range(n, n + n_types))
        self._pattern_cols = np.zeros(0, dtype=np.int64)
        self._known: set[bytes] = set()
        # Branch rows: the condition each counts (components (item type, at least)), and the bounds a node gave.
        self.branch_rows: list[Condition] = []
        self._branch_index: dict[Condition, int] = {}
        self._branch_bounds = np.zeros((0, 2))
        self._y_bounds = (np.zeros(n), cols.most_jobs)
        self._artificial_on: float | None = None  # the artificial slots' cost while nodes are solved
        self._patterns_bounded = False  # a dive gave patterns lower bounds
        patterns, self.patterns = self.patterns, np.zeros((0, n_types), dtype=np.int64)
        self.add(patterns)
        self._first_priced = len(self.patterns)  # the patterns before it were given, not priced here

    @property
    def column_kind(self) -> np.ndarray:
        """The kind of servers each job column asks items of."""
        return self._item_kind[self.items.col_item]

    @property
    def _num_cols(self) -> int:
        return int(self._h.getNumCol())

    def add(self, patterns: np.ndarray) -> int:
        """Add the patterns not there yet; returns how many were new."""
        if not len(patterns):
            return 0
        new = [p for p in np.unique(patterns.astype(np.int64), axis=0) if p.tobytes() not in self._known and p.any()]
        if not new:
            return 0
        block = np.array(new)
        index, value = [], []
        rows = self._first_branch + np.arange(len(self.branch_rows), dtype=np.int64)
        counted = self._counted(block)
        kind = self._item_kind[np.argmax(block != 0, axis=1)]
        for k in range(len(block)):
            t = np.flatnonzero(block[k])
            # Each pattern: its items in the cover rows, 1 in its kind's servers row and in the branch rows
            # counting it.
            index.append(np.r_[self._n_cls + t, self._servers_rows[kind[k]], rows[counted[k]]])
            value.append(np.r_[block[k, t].astype(float), 1.0, np.ones(int(counted[k].sum()))])
        col_starts = np.cumsum([0] + [len(i) for i in index[:-1]]).astype(np.int32)
        flat_index = np.concatenate(index).astype(np.int32)
        flat_value = np.concatenate(value)
        inf = self._highspy.kHighsInf
        first = self._num_cols
        self._h.addCols(len(block), np.zeros(len(block)), np.zeros(len(block)), np.full(len(block), inf),
                        flat_index.size, col_starts, flat_index, flat_value)
        self._pattern_cols = np.r_[self._pattern_cols, np.arange(first, first + len(block))]
        self._known.update(p.tobytes() for p in block)
        self.patterns = np.vstack([self.patterns, block])
        self.pattern_kind = np.r_[self.pattern_kind, kind]
        return len(block)

    def _counted(self, patterns: np.ndarray) -> np.ndarray:
        """``(patterns, branch rows)``: whether each branch row counts each pattern (it meets the condition)."""
        if not self.branch_rows:
            return np.zeros((len(patterns), 0), dtype=bool)
        return Bonus.of_conditions(self.branch_rows, np.zeros(len(self.branch_rows))).met(patterns)

    def branch_row(self, condition: Condition) -> int:
        """The row ``sum_{p meets condition} x[p]`` (created free on first use), by its number; a condition is a
        tuple of components ``(item type, at least)``, all of which a pattern meets."""
        key = tuple(sorted((int(t), int(k)) for t, k in condition))
        if key in self._branch_index:
            return self._branch_index[key]
        inf = self._highspy.kHighsInf
        counted = np.flatnonzero(Bonus.of_conditions([key], np.zeros(1)).met(self.patterns)[:, 0])
        self._h.addRow(-inf, inf, counted.size, self._pattern_cols[counted].astype(np.int32), np.ones(counted.size))
        row = self._h.getNumRow() - 1
        # An artificial column for the row's lower bound (no generated pattern may meet it yet).
        self._h.addCols(1, np.array([-self._artificial_cost]), np.zeros(1), np.array([inf]), 1,
                        np.zeros(1, np.int32), np.array([row], np.int32), np.ones(1))
        self._artificial_cols.append(self._num_cols - 1)
        number = len(self.branch_rows)
        self.branch_rows.append(key)
        self._branch_index[key] = number
        self._branch_bounds = np.vstack([self._branch_bounds, [-np.inf, np.inf]])
        return number

    def restrict(self, y_lower: np.ndarray, y_upper: np.ndarray, rows: Mapping[int, tuple[float, float]]) -> None:
        """Set a node: bounds of the job columns, bounds of the branch rows given (the others free), patterns
        free, and artificial slots allowed at their cost (:data:`ARTIFICIAL_COST`). Only what changed is handed
        to HiGHS (its basis then warm-starts the node's LP)."""
        self._set_artificial(self._artificial_cost)
        if self._patterns_bounded:
            k = self._pattern_cols.size
            self._h.changeColsBounds(k, self._pattern_cols.astype(np.int32), np.zeros(k),
                                     np.full(k, self._highspy.kHighsInf))
            self._patterns_bounded = False
        self._set_y_bounds(y_lower.astype(float), y_upper.astype(float))
        bounds = np.tile([-np.inf, np.inf], (len(self.branch_rows), 1))
        for number, (lo, hi) in rows.items():
            bounds[number] = (lo, hi)
        self._set_row_bounds(bounds)

    def unrestrict(self) -> None:
        """Back to the root master: default column bounds, branch rows free, no artificial slots."""
        cols = self.items.columns
        self._set_artificial(None)
        self._set_y_bounds(np.zeros(cols.cls.size), cols.most_jobs)
        self._set_row_bounds(np.tile([-np.inf, np.inf], (len(self.branch_rows), 1)))

    def _set_artificial(self, cost: float | None) -> None:
        """Allow the artificial slots of the cover rows at ``cost`` each, or (None) keep them at 0."""
        if cost == self._artificial_on:
            return
        art = np.array(self._artificial_cols[:self._n_types], dtype=np.int32)
        upper = self._highspy.kHighsInf if cost is not None else 0.0
        self._h.changeColsBounds(art.size, art, np.zeros(art.size), np.full(art.size, upper))
        self._h.changeColsCost(art.size, art, np.full(art.size, -(cost or 0.0)))
        self._artificial_on = cost

    def _set_y_bounds(self, lower: np.ndarray, upper: np.ndarray) -> None:
        changed = np.flatnonzero((lower != self._y_bounds[0]) | (upper != self._y_bounds[1])).astype(np.int32)
        if changed.size:
            self._h.changeColsBounds(changed.size, changed, lower[changed], upper[changed])
        self._y_bounds = (lower, upper)

    def _set_row_bounds(self, bounds: np.ndarray) -> None:
        inf = self._highspy.kHighsInf
        first = self._first_branch
        for changed in np.flatnonzero(np.any(bounds != self._branch_bounds, axis=1)):
            lo, hi = bounds[changed]
            self._h.changeRowBounds(first + int(changed), lo if np.isfinite(lo) else -inf,
                                    hi if np.isfinite(hi) else inf)
        self._branch_bounds = bounds

    def _solve_lp(self) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        from synergy_opt.solvers.highs import run  # highspy on first use (no solver library at import)

        run(self._h, 1)
        solution = self._h.getSolution()
        duals = np.array(solution.row_dual)
        pi = -duals[self._n_cls:self._n_cls + self._n_types]
        value = float(self._h.getInfo().objective_function_value)
        return value, pi, duals, np.array(solution.col_value)

    def _restriction(self, duals: np.ndarray) -> Restriction | None:
        """The node's column bounds and its branch rows' multipliers, of the right sign for each bound."""
        if not self.branch_rows and np.all(self._y_bounds[0] == 0) and \
                np.array_equal(self._y_bounds[1], self.items.columns.most_jobs):
            return None
        lam = duals[self._first_branch:self._first_branch + len(self.branch_rows)]
        lo, hi = self._branch_bounds.T
        lam = np.where(lam > 0, np.where(np.isfinite(hi), lam, 0.0), np.where(np.isfinite(lo), lam, 0.0))
        used = np.flatnonzero(lam != 0)
        bonus = Bonus.of_conditions([self.branch_rows[u] for u in used], -lam[used])
        constant = float(np.sum(np.where(lam[used] > 0, lam[used] * hi[used], lam[used] * lo[used])))
        return Restriction(self._y_bounds[0], self._y_bounds[1], bonus, constant)

    def phase_one(self, deadline: float | None) -> bool | None:
        """Find LP-feasible patterns: minimise the artificial slots. True: feasible; False: proven infeasible
        (every solution would need artificial slots, by the same bound with zero weights); None: out of time."""
        h = self._h
        n, k = self._n_y, self._n_types
        inf = self._highspy.kHighsInf
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.zeros(n))
        art = np.arange(n, n + k, dtype=np.int32)
        h.changeColsBounds(k, art, np.zeros(k), np.full(k, inf))
        h.changeColsCost(k, art, -np.ones(k))
        feasible = None
        while True:
            value, pi, _, _ = self._solve_lp()
            pi = np.minimum(np.maximum(pi, 0.0), 1.0)  # an artificial slot is worth at most its cost
            try:
                prices, patterns, values, kind = price(self.items, self.kinds, pi, weight=np.zeros(self._n_y),
                                                       deadline=deadline)
            except PricingDeadline:
                break  # out of time: feasible stays None
            if value >= -_TOLERANCE:
                feasible = True
                break
            if prices.bound < -1e-7:
                feasible = False
                break
            added = self.add(patterns[values > self._dual_servers()[kind] + 1e-12])
            if not added or (deadline is not None and time.perf_counter() > deadline):
                feasible = None if added else False
                break
        h.changeColsCost(n, np.arange(n, dtype=np.int32), self.items.weight)
        h.changeColsBounds(k, art, np.zeros(k), np.zeros(k))
        h.changeColsCost(k, art, np.zeros(k))
        return feasible

    def _dual_servers(self) -> np.ndarray:
        return np.maximum(np.array(self._h.getSolution().row_dual)[self._servers_rows], 0.0)

    def run(self, deadline: float | None, gap: float = 0.0, rounds: int = MAX_ROUNDS,
            first_deadline: float | None = None) -> Prices:
        """Price patterns in until none improves the LP (or the deadline, or ``L`` within ``gap`` of the LP, or
        after ``rounds`` pricing rounds). The first pricing ever may run to ``first_deadline`` (by default
        ``deadline``): without a bound nothing after it can run. Raises :class:`PricingDeadline` when that deadline
        stops it."""
        last = self.rounds + rounds
        while self.rounds < min(MAX_ROUNDS, last):
            self.rounds += 1
            value, pi, duals, _ = self._solve_lp()
            self.lp_value = value
            mu = np.maximum(duals[self._servers_rows], 0.0)
            try:
                until = deadline if self.best is not None or first_deadline is None else first_deadline
                prices, patterns, values, kind = price(self.items, self.kinds, pi, beat=mu, deadline=until)
            except PricingDeadline:  # this round's pricing unfinished: the bound stays the best seen
                if self.best is not None:
                    break
                raise
            if self.best is None or prices.bound < self.best.bound:
                self.best = prices
            tolerance = _TOLERANCE * max(1.0, abs(value))
            if self.best.bound - value <= max(tolerance, gap):
                self.converged = self.best.bound - value <= tolerance
                break
            if not self.add(patterns[values > mu[kind] + tolerance]):
                self.converged = True  # nothing prices out: the LP is optimal over every pattern
                break
            if deadline is not None and time.perf_counter() > deadline:
                break
        assert self.best is not None
        return self.best

    def reduced(self, incumbent: float) -> ColumnGeneration:
        """A master of the same model without the job columns and patterns that no solution better than
        ``incumbent`` uses, by the prices of this master's least bound (:attr:`best`): a solution using one is worth
        at most ``L`` minus its reduced cost. A tree would fix those job columns at 0 anyway (a pattern removed may
        be priced again); removed, its LPs are smaller (on the 3 x 128-GPU rounds the root's prices and the type
        choices' incumbent leave 22-32% of the job columns, and the LP solves cold in 27-42% less time). This
        master itself without prices or a finite incumbent, or when ``L`` is no better than the incumbent (nothing
        better exists, and the tree closes at its root); otherwise every class keeps its best column."""
        if self.best is None or not math.isfinite(incumbent) or incumbent >= self.best.bound:
            return self
        best = self.best
        room = best.bound - incumbent + _TOLERANCE * max(1.0, abs(best.bound))
        kept = np.flatnonzero(best.column_rc < room)
        pattern_rc = best.pattern_values[self.pattern_kind] - self.patterns @ best.pi
        reduced = ColumnGeneration(self.items.of_columns(kept), self.kinds, self.patterns[pattern_rc < room],
                                   root=self.root or self, model_columns=self.model_column(kept))
        return reduced

    def model_column(self, columns: np.ndarray) -> np.ndarray:
        """The model's job columns of this master's ``columns``."""
        return columns if self.model_columns is None else self.model_columns[columns]

    def model_y(self, y: np.ndarray) -> np.ndarray:
        """Job column values ``y`` of this master as the model's (0 on the columns it does not have)."""
        if self.root is None or self.model_columns is None:
            return y
        out = np.zeros(self.root.items.weight.size)
        out[self.model_columns] = y
        return out

    def own_patterns(self) -> np.ndarray:
        """The patterns priced in this master, not those it was given."""
        return self.patterns[self._first_priced:]

    def known_patterns(self) -> tuple[np.ndarray, np.ndarray]:
        """The patterns a placement may use, with their server kinds: the root's and, for a reduced master, those
        priced here since (not those of the trees searched before it)."""
        if self.root is None:
            return self.patterns, self.pattern_kind
        return (np.vstack([self.root.patterns, self.own_patterns()]),
                np.concatenate([self.root.pattern_kind, self.pattern_kind[self._first_priced:]]))

    def solve_node(self, deadline: float | None, cutoff: float) -> NodeLP:
        """Column generation at the node :meth:`restrict` set, until priced out, until its bound is at most
        ``cutoff`` (the node can be pruned), or the deadline. Its bound is the least ``L`` seen."""
        bound = np.inf
        best: Prices | None = None
        while True:
            self.rounds += 1
            value, pi, duals, solution = self._solve_lp()
            status = self._h.getModelStatus()
            if status == self._highspy.HighsModelStatus.kInfeasible:
                return NodeLP(-np.inf, -np.inf, True, np.zeros(self._n_y), np.zeros(0), 0.0)
            restriction = self._restriction(duals)
            mu = np.maximum(duals[self._servers_rows], 0.0)
            try:
                prices, patterns, values, kind = price(self.items, self.kinds, pi, restriction=restriction, beat=mu,
                                                       cutoff=cutoff, deadline=deadline)
            except PricingDeadline:  # this round's pricing unfinished: the node keeps the bound it had
                return self._node_lp(bound, value, False, solution, best)
            if prices.bound < bound:
                bound, best = prices.bound, prices
            tolerance = _TOLERANCE * max(1.0, abs(value))
            converged = bound - value <= tolerance
            if not converged and bound > cutoff:
                converged = not self.add(patterns[values > mu[kind] + tolerance])
            if converged or bound <= cutoff or (deadline is not None and time.perf_counter() > deadline):
                return self._node_lp(bound, value, converged, solution, best)

    def _node_lp(self, bound: float, value: float, converged: bool, solution: np.ndarray, best: Prices | None
                 ) -> NodeLP:
        y = solution[:self._n_y]
        # Patterns priced in after this LP have no value in it yet.
        x = np.zeros(self._pattern_cols.size)
        solved = self._pattern_cols < solution.size
        x[solved] = solution[self._pattern_cols[solved]]
        artificial = float(solution[[c for c in self._artificial_cols if c < solution.size]].sum())
        return NodeLP(float(bound), value, converged, y, x, artificial, best)

    def restricted_value(self) -> float:
        """The LP value over the patterns generated so far at the node :meth:`restrict` set (no pricing: not a
        bound, a guess of a child's bound for choosing a split)."""
        self._solve_lp()
        if self._h.getModelStatus() == self._highspy.HighsModelStatus.kInfeasible:
            return -np.inf
        return float(self._h.getInfo().objective_function_value)

    def lp_solution(self) -> tuple[np.ndarray, np.ndarray]:
        """The master LP's ``y`` and ``x`` (over :attr:`patterns`)."""
        x = np.array(self._h.getSolution().col_value)
        return x[:self._n_y], x[self._pattern_cols]

    def dive(self, deadline: float | None) -> np.ndarray | None:
        """Round the master LP to whole servers: fix the patterns the LP uses in full (else the most used one,
        rounded up), price again, repeat until every server has a pattern. Returns the server count of each
        pattern (a starting point for the restricted master MILP), or None at the deadline.

        Every price seen on the way still gives a valid ``L`` (it holds for any prices), so :attr:`best` keeps
        improving; the fixings only steer the LP towards whole servers.
        """
        self.unrestrict()
        fixed = np.zeros(len(self.patterns))
        while True:
            self.run(deadline, rounds=DIVE_ROUNDS)
            if len(fixed) < len(self.patterns):
                fixed = np.r_[fixed, np.zeros(len(self.patterns) - len(fixed))]
            _, x = self.lp_solution()
            servers = np.array([kind.servers for kind in self.kinds], dtype=float)
            left = servers - np.bincount(self.pattern_kind, weights=fixed, minlength=len(self.kinds))
            free = np.maximum(x - fixed, 0.0) * (left[self.pattern_kind] > 0.5)  # kinds with servers left
            if free.sum() < 1e-6:
                return fixed
            if deadline is not None and time.perf_counter() > deadline:
                return None
            whole = np.floor(free + 1e-6)
            if whole.sum() >= 1:
                # As many whole servers as the LP uses, at most the servers left of each kind.
                for p in np.argsort(-free)[:int(np.count_nonzero(whole))]:
                    take = min(whole[p], left[self.pattern_kind[p]])
                    fixed[p] += take
                    left[self.pattern_kind[p]] -= take
            else:
                fixed[int(np.argmax(free))] += 1
            k = len(self.patterns)
            cols = self._pattern_cols.astype(np.int32)
            self._h.changeColsBounds(k, cols, fixed.astype(float), np.full(k, self._highspy.kHighsInf))
            self._patterns_bounded = True
            self.converged = False
