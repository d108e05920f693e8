"""The decomposition's master LP, priced by column generation (Dantzig-Wolfe over server patterns).

Rows: ``assign`` (every job of class ``q`` gets one column, ``= n_q``), ``cover`` (per item type: the patterns'
slots hold what the chosen columns ask for, ``sum_p a[p,t] x[p] - sum u y >= 0``) and ``servers``
(``sum_p x[p] <= s``). The job columns ``y`` are all there from the start; patterns ``x`` enter as the pricing
problem (:func:`~synergy_opt.joint.pricing.best_patterns`) finds them.

Bound. For any prices ``pi >= 0`` of the cover rows, every solution (integral or not) has value at most

    L(pi) = sum_q n_q max_{col of q} (w_col - u_col pi_t(col)) + s max(0, max_a pi . a)

(price the cover rows into the objective: the columns then decouple per class and the patterns per server;
the cover slack only lowers the value). The pricing DP gives the second term exactly, so ``L`` is a valid
bound at every iteration, not only at the end; at the LP optimum it equals the LP value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from synergy_opt.joint.model import ItemColumns
from synergy_opt.joint.pricing import ItemTypes, best_patterns

# Patterns added per pricing round (the best ones the DP found).
PATTERNS_PER_ROUND = 16
# Relative tolerance of "no pattern prices out" and of "the bound meets the LP".
_TOLERANCE = 1e-9
MAX_ROUNDS = 2_000
# Pricing rounds between two fixings of a dive (the LP need not be optimal to steer the rounding).
DIVE_ROUNDS = 3


@dataclass(frozen=True, eq=False)
class Prices:
    """Prices of the cover rows, the bound ``L`` they give, and the reduced costs they imply (all >= 0).

    ``column_rc[col] = best_q - (w_col - u_col pi_t)`` and a pattern's ``P - pi . a`` (``P`` the best pattern's
    value, or 0) are what a solution loses against ``L``: its value is ``L`` minus its columns' and servers'
    reduced costs minus the priced cover slack.
    """

    pi: np.ndarray
    bound: float
    best_pattern_value: float
    column_rc: np.ndarray


def price(items: ItemColumns, types: ItemTypes, servers: int, pi: np.ndarray, weight: np.ndarray | None = None
          ) -> tuple[Prices, np.ndarray, np.ndarray]:
    """``L(pi)`` and the reduced costs at ``pi`` (see the module docstring); also the best patterns found."""
    pi = np.maximum(pi, 0.0)
    cols = items.columns
    w = items.weight if weight is None else weight
    net = w - items.units * pi[items.col_item]
    best = np.full(cols.count.size, -np.inf)
    np.maximum.at(best, cols.cls, net)
    priced = best_patterns(types, pi, items.per_server, count=PATTERNS_PER_ROUND)
    top = max(priced.value, 0.0)
    bound = float(cols.count @ best + servers * top)
    rc = np.maximum(best[cols.cls] - net, 0.0)
    return Prices(pi, bound, top, rc), priced.patterns, priced.values


@dataclass
class ColumnGeneration:
    """The master LP on HiGHS, its patterns, and the best prices seen."""

    items: ItemColumns
    types: ItemTypes
    servers: int
    patterns: np.ndarray
    best: Prices | None = None
    lp_value: float | None = None
    rounds: int = 0
    converged: bool = False

    def __post_init__(self) -> None:
        import highspy  # imported on use, as the backends are

        items = self.items
        cols = items.columns
        n_cls, n_types = cols.count.size, items.item_size.size
        self._highspy = highspy
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        inf = highspy.kHighsInf
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        # Rows: assign (classes), cover (types), servers.
        h.addRows(n_cls, cols.count.astype(float), cols.count.astype(float), 0, np.zeros(0, np.int32),
                  np.zeros(0, np.int32), np.zeros(0))
        h.addRows(n_types, np.zeros(n_types), np.full(n_types, inf), 0, np.zeros(0, np.int32),
                  np.zeros(0, np.int32), np.zeros(0))
        h.addRows(1, np.array([-inf]), np.array([float(self.servers)]), 0, np.zeros(0, np.int32),
                  np.zeros(0, np.int32), np.zeros(0))
        n = cols.cls.size
        # y column j: +1 in its class's assign row, -u in its type's cover row.
        starts = np.arange(0, 2 * n, 2, dtype=np.int32)
        index = np.empty(2 * n, dtype=np.int32)
        index[0::2] = cols.cls
        index[1::2] = n_cls + items.col_item
        value = np.empty(2 * n)
        value[0::2] = 1.0
        value[1::2] = -items.units
        h.addCols(n, items.weight, np.zeros(n), cols.count[cols.cls].astype(float), 2 * n, starts, index, value)
        # Artificial slots per type (phase 1 only): cost -1, kept at 0 in phase 2.
        h.addCols(n_types, np.zeros(n_types), np.zeros(n_types), np.zeros(n_types), n_types,
                  np.arange(n_types, dtype=np.int32), (n_cls + np.arange(n_types)).astype(np.int32), np.ones(n_types))
        self._h = h
        self._n_y = n
        self._n_cls = n_cls
        self._n_types = n_types
        patterns, self.patterns = self.patterns, np.zeros((0, n_types), dtype=np.int64)
        self.add(patterns)

    @property
    def _first_pattern(self) -> int:
        return self._n_y + self._n_types

    def add(self, patterns: np.ndarray) -> int:
        """Add the patterns not there yet; returns how many were new."""
        if not len(patterns):
            return 0
        known = {p.tobytes() for p in self.patterns}
        new = [p for p in np.unique(patterns.astype(np.int64), axis=0) if p.tobytes() not in known and p.any()]
        if not new:
            return 0
        block = np.array(new)
        p, t = np.nonzero(block)
        order = np.lexsort((t, p))
        p, t = p[order], t[order]
        starts = np.searchsorted(p, np.arange(len(block))).astype(np.int32)
        # Each pattern: its items in the cover rows, and 1 in the servers row.
        counts = np.bincount(p, minlength=len(block))
        index, value = [], []
        for k in range(len(block)):
            lo, hi = starts[k], starts[k] + counts[k]
            index.append(np.r_[self._n_cls + t[lo:hi], self._n_cls + self._n_types])
            value.append(np.r_[block[k, t[lo:hi]].astype(float), 1.0])
        col_starts = np.cumsum([0] + [len(i) for i in index[:-1]]).astype(np.int32)
        flat_index = np.concatenate(index).astype(np.int32)
        flat_value = np.concatenate(value)
        inf = self._highspy.kHighsInf
        self._h.addCols(len(block), np.zeros(len(block)), np.zeros(len(block)), np.full(len(block), inf),
                        flat_index.size, col_starts, flat_index, flat_value)
        self.patterns = np.vstack([self.patterns, block])
        return len(block)

    def _solve_lp(self) -> tuple[float, np.ndarray, np.ndarray]:
        self._highspy.Highs.resetGlobalScheduler(True)
        self._h.run()
        solution = self._h.getSolution()
        duals = np.array(solution.row_dual)
        pi = -duals[self._n_cls:self._n_cls + self._n_types]
        return float(self._h.getInfo().objective_function_value), pi, np.array(solution.col_value)

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
            value, pi, _ = self._solve_lp()
            pi = np.minimum(np.maximum(pi, 0.0), 1.0)  # an artificial slot is worth at most its cost
            prices, patterns, values = price(self.items, self.types, self.servers, pi,
                                             weight=np.zeros(self._n_y))
            if value >= -_TOLERANCE:
                feasible = True
                break
            if prices.bound < -1e-7:
                feasible = False
                break
            added = self.add(patterns[values > float(self._dual_servers()) + 1e-12])
            if not added or (deadline is not None and time.perf_counter() > deadline):
                feasible = None if added else False
                break
        h.changeColsCost(n, np.arange(n, dtype=np.int32), self.items.weight)
        h.changeColsBounds(k, art, np.zeros(k), np.zeros(k))
        h.changeColsCost(k, art, np.zeros(k))
        return feasible

    def _dual_servers(self) -> float:
        return float(max(np.array(self._h.getSolution().row_dual)[-1], 0.0))

    def run(self, deadline: float | None, gap: float = 0.0, rounds: int = MAX_ROUNDS) -> Prices:
        """Price patterns in until none improves the LP (or the deadline, or ``L`` within ``gap`` of the LP, or
        after ``rounds`` pricing rounds)."""
        last = self.rounds + rounds
        while self.rounds < min(MAX_ROUNDS, last):
            self.rounds += 1
            value, pi, _ = self._solve_lp()
            self.lp_value = value
            prices, patterns, values = price(self.items, self.types, self.servers, pi)
            if self.best is None or prices.bound < self.best.bound:
                self.best = prices
            mu = self._dual_servers()
            tolerance = _TOLERANCE * max(1.0, abs(value))
            if self.best.bound - value <= max(tolerance, gap):
                self.converged = self.best.bound - value <= tolerance
                break
            if not self.add(patterns[values > mu + tolerance]):
                self.converged = True  # nothing prices out: the LP is optimal over every pattern
                break
            if deadline is not None and time.perf_counter() > deadline:
                break
        assert self.best is not None
        return self.best

    def lp_solution(self) -> tuple[np.ndarray, np.ndarray]:
        """The master LP's ``y`` and ``x`` (over :attr:`patterns`)."""
        x = np.array(self._h.getSolution().col_value)
        return x[:self._n_y], x[self._first_pattern:]

    def dive(self, deadline: float | None) -> np.ndarray | None:
        """Round the master LP to whole servers: fix the patterns the LP uses in full (else the most used one,
        rounded up), price again, repeat until every server has a pattern. Returns the server count of each
        pattern (a starting point for the restricted master MILP), or None at the deadline.

        Every price seen on the way still gives a valid ``L`` (it holds for any prices), so :attr:`best` keeps
        improving; the fixings only steer the LP towards whole servers.
        """
        fixed = np.zeros(len(self.patterns))
        while True:
            self.run(deadline, rounds=DIVE_ROUNDS)
            if len(fixed) < len(self.patterns):
                fixed = np.r_[fixed, np.zeros(len(self.patterns) - len(fixed))]
            _, x = self.lp_solution()
            left = self.servers - fixed.sum()
            free = np.maximum(x - fixed, 0.0)
            if left < 0.5 or free.sum() < 1e-6:
                return fixed
            if deadline is not None and time.perf_counter() > deadline:
                return None
            whole = np.floor(free + 1e-6)
            if whole.sum() >= 1:
                # As many whole servers as the LP uses, at most the servers left.
                order = np.argsort(-free)
                take = np.minimum(whole[order], np.maximum(left - np.cumsum(whole[order]) + whole[order], 0))
                fixed[order] += take
            else:
                fixed[int(np.argmax(free))] += 1
            k = len(self.patterns)
            cols = np.arange(self._first_pattern, self._first_pattern + k, dtype=np.int32)
            self._h.changeColsBounds(k, cols, fixed.astype(float), np.full(k, self._highspy.kHighsInf))
            self.converged = False
