"""Branch-and-price on the master: the bound tightens below the root until it meets the incumbent.

Every node is the master LP (:class:`~synergy_opt.joint.master.ColumnGeneration`) with bounds on some job
columns and on some counts of servers, priced out by column generation; its ``L`` bounds every solution in the
node whenever the pricing stops. A node whose bound is within the gap of the incumbent is closed. Otherwise its
LP solution is split, in this order:

0. on servers of several kinds (GPU types), a job alone in its class whose LP spreads it over kinds: on the
   kind it leans to least wholly, or not on that kind (its other columns, or those of that kind, bounded by 0;
   the assignment of jobs to types of heterogeneous.md, HJ9);
1. a job column ``y`` with a fractional value ``v``: ``y <= floor(v)`` or ``y >= ceil(v)`` (the pricing is
   unchanged, the class term of ``L`` respects the bounds);
2. else (every job's config is whole, so every item type's demand too) a count of servers holding at least
   ``k`` items of type ``t``, ``N = sum_{p: a[p,t] >= k} x[p]``, with a fractional value: ``N <= floor`` or
   ``N >= ceil`` (a row of the master; its multiplier is a bonus on those patterns in the pricing, separable by
   item type: :class:`~synergy_opt.joint.pricing.Bonus`);
3. else the pattern ``p`` used a fractional number of times with the most items: the count of servers whose
   load holds at least ``p`` (``a >= p`` component-wise) is fractional; split on it as in 2 (with the
   components that keep it fractional, :func:`pattern_condition`), its multiplier a bonus on a conjunction of
   components, tracked by a flag in the pricing (at most :data:`~synergy_opt.joint.pricing.MAX_FLAGS` on a
   path: a node that would need more stays open, so the tree ends incomplete with a valid bound);
4. else the LP solution is integral: an incumbent, and the node is solved.

Each split leaves every integral solution of the node in exactly one child, so the search is exact; it is
finite because every split cuts off the node's LP solution and the integral solutions are finitely many.
Nodes are taken best bound first.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

import numpy as np

from synergy_opt.joint.master import ColumnGeneration, Condition, Prices
from synergy_opt.joint.pricing import MAX_FLAGS

# Values this close to an integer count as integral.
_INTEGRAL = 1e-6
# Splits compared by strong branching per kind (the most fractional ones), and the least fall a child scores.
STRONG_CANDIDATES = 4
_SCORE_FLOOR = 1e-6
# The first target's distance below the bound (relative), and how much further each next one aims.
TARGET_GAP, TARGET_GROWTH = 2e-4, 1.5


@dataclass
class BranchOutcome:
    """The search's result: the bound it proves (:attr:`Tree.bound`), whether the tree was exhausted, and how
    many nodes it solved."""

    bound: float
    complete: bool
    nodes: int
    splits: dict[str, int] = field(default_factory=dict)


@dataclass
class _Node:
    """Bounds of a node: on job columns (those not default) and on branch rows, and the bound it inherits."""

    bound: float
    depth: int
    y_lower: dict[int, float]
    y_upper: dict[int, float]
    rows: dict[int, tuple[float, float]]


def cutoff_of(incumbent: float, mip_gap: float) -> float:
    """The bound at or below which a node holds nothing better than ``incumbent`` by more than the gap (and a
    relative 1e-9 for the LP's noise: an absolute 1e-9 proved a round of throughputs near 1e-9 optimal at 0)."""
    if not math.isfinite(incumbent):
        return incumbent
    return incumbent + (mip_gap + 1e-9) * max(abs(incumbent), 1e-10)


# The splits tried, in order (a test may reorder them or leave counts out: the search stays exact as long as
# "column" and "pattern" are there; "type" splits only on servers of several kinds).
RULES = ("type", "column", "count", "pattern")

# A split: its kind, its children (down, up) and what it splits on (the same key at every node).
Split = tuple[str, list[_Node], Hashable]


@dataclass
class Strong:
    """How a node's split is chosen: among the first ``candidates`` of its kind, the one whose children's LPs
    over the generated patterns fall furthest. A split already compared ``reliable`` times (None: never) is
    scored by its mean falls then, without LPs (reliability branching). ``falls`` is kept across trees."""

    candidates: int = STRONG_CANDIDATES
    reliable: int | None = None
    falls: dict[Hashable, list[tuple[float, float]]] = field(default_factory=dict)


# An integral LP solution of a tree's node: ``y`` over the model's job columns, ``x`` over the patterns of the
# tree's master (given last); returns the incumbent's value after it.
OnIncumbent = Callable[[np.ndarray, np.ndarray, ColumnGeneration], float]
# A node's configs rounded (over the model's job columns), and the tree's master (its known patterns).
OnWholeConfigs = Callable[[np.ndarray, ColumnGeneration], float]


class Tree:
    """The branch-and-price tree: open nodes best bound first; :meth:`search` may be called again to go on
    (after a node limit or a deadline), and :meth:`offer` takes an incumbent found elsewhere."""

    def __init__(self, master: ColumnGeneration, mip_gap: float, on_incumbent: OnIncumbent,
                 incumbent: float = -math.inf, root_bound: float = math.inf,
                 y_lower: Mapping[int, float] | None = None, y_upper: Mapping[int, float] | None = None,
                 rules: tuple[str, ...] = RULES, on_whole_configs: OnWholeConfigs | None = None,
                 strong: Strong | None = None, target: bool = False) -> None:
        self.master = master
        # Whether ``incumbent`` is a target (no solution known to be worth it), which :meth:`lower` may lower.
        self.target = target
        self.rules = rules
        self.strong = strong or Strong()
        self.on_whole_configs = on_whole_configs
        self.mip_gap = mip_gap
        self.on_incumbent = on_incumbent
        self.incumbent = incumbent
        self.nodes = 0
        self.splits = {"type": 0, "column": 0, "count": 0, "pattern": 0}
        self._heap: list[tuple[float, int, int, _Node]] = []
        self._counter = itertools.count()
        self._closed_bound = -math.inf  # the largest bound of a node closed within the gap (above the incumbent)
        # While the incumbent is a target: the nodes closed by their bound, each with it (lowering reopens some),
        # and the largest bound of a solved node (whose solution is at most the incumbent; none is reopened).
        self._closed: list[tuple[float, _Node]] = []
        self._solved_bound = -math.inf
        self._stuck_bound = -math.inf  # the largest bound of a node left open because it cannot be split further
        self._push(_Node(root_bound, 0, dict(y_lower or {}), dict(y_upper or {}), {}))

    @property
    def complete(self) -> bool:
        """Whether every node is closed: :attr:`bound` is then proven for the whole tree."""
        return not self._heap and self._stuck_bound == -math.inf

    @property
    def bound(self) -> float:
        """A bound on every solution of the tree's root: the open nodes', the closed ones', the incumbent."""
        open_bound = max((node.bound for *_, node in self._heap), default=-math.inf)
        return max(self.incumbent, self._closed_bound, self._stuck_bound, open_bound)

    def offer(self, value: float) -> None:
        """An incumbent found elsewhere."""
        if value > self.incumbent:
            self.incumbent, self.target = value, False

    def lower(self, value: float) -> None:
        """The target replaced by a solution worth ``value`` whose cut-off is at least the target; :meth:`search`
        then goes on to prove it, as a plain tree from the root would. What the tree did stays valid for it: a
        node closed at or below the new cut-off holds nothing better than the gap allows, and every fixing by
        reduced cost left out only solutions worth at most the target, so at most the cut-off (as the master's
        own reduction did). The nodes closed above the new cut-off are reopened with their bounds; the target
        itself stays a floor of :attr:`bound`, as the solutions those fixings left out may be worth up to it."""
        cutoff = cutoff_of(value, self.mip_gap)
        assert self.target and value < self.incumbent <= cutoff
        target, self.incumbent, self.target = self.incumbent, value, False
        kept = [target, self._solved_bound]
        for bound, node in self._closed:
            if bound > cutoff:
                self._push(_Node(bound, node.depth, node.y_lower, node.y_upper, node.rows))
            else:
                kept.append(bound)
        self._closed = []
        self._closed_bound = max(kept)

    def _push(self, node: _Node) -> None:
        heapq.heappush(self._heap, (-node.bound, -node.depth, next(self._counter), node))

    def _close(self, bound: float, node: _Node) -> bool:
        if bound > cutoff_of(self.incumbent, self.mip_gap):
            return False
        self._closed_bound = max(self._closed_bound, bound)
        if self.target:
            self._closed.append((bound, node))
        return True

    def search(self, deadline: float | None, nodes: int | None = None) -> bool:
        """Solve open nodes, best bound first, until the tree is complete, the deadline, or ``nodes`` more
        nodes; returns :attr:`complete`."""
        master = self.master
        stop = None if nodes is None else self.nodes + nodes
        while self._heap and self.nodes != stop:
            if deadline is not None and time.perf_counter() > deadline:
                break
            _, _, _, node = heapq.heappop(self._heap)
            if self._close(node.bound, node):
                continue
            _apply(master, node)
            cutoff = cutoff_of(self.incumbent, self.mip_gap)
            lp = master.solve_node(deadline, cutoff)
            self.nodes += 1
            bound = min(node.bound, lp.bound)
            if self._close(bound, node):
                continue
            if not lp.converged:  # the deadline: the node stays open with the bound it has
                self._push(_Node(bound, node.depth, node.y_lower, node.y_upper, node.rows))
                break
            if lp.prices is not None:
                # Against the incumbent (or target) itself, not the cut-off: a solution fixed out is then worth
                # no more than it, so :attr:`bound` stays a bound on every solution, not one within the gap.
                node = _fix_by_reduced_cost(node, lp.prices, self.incumbent)
            if self.on_whole_configs is not None and lp.artificial <= _INTEGRAL:
                # Each job's config rounded (most of them are whole in the LP): a placement of those configs on
                # the patterns priced so far is worth about the node's LP value.
                self.offer(self.on_whole_configs(master.model_y(_rounded(master, lp.y)), master))
                if self._close(bound, node):
                    continue
            try:
                candidates = _candidates(master, node, lp.y, lp.x, bound, self.rules, self.strong.candidates)
            except _Unsplittable:
                self._stuck_bound = max(self._stuck_bound, bound)
                continue
            if not candidates:
                if lp.artificial > _INTEGRAL:
                    continue  # an integral LP solution leaning on artificial slots: no real solution here
                self.offer(self.on_incumbent(master.model_y(np.rint(lp.y)), np.rint(lp.x), master))
                solved = min(bound, lp.value)
                self._closed_bound = max(self._closed_bound, solved)
                self._solved_bound = max(self._solved_bound, solved)
                continue
            kind, children, _ = _choose(master, candidates, lp.value, self.strong)
            self.splits[kind] += 1
            for child in children:
                self._push(child)
        return self.complete


def branch_and_price(master: ColumnGeneration, incumbent: float, mip_gap: float, deadline: float | None,
                     on_incumbent: OnIncumbent, root_bound: float = math.inf,
                     y_lower: Mapping[int, float] | None = None, y_upper: Mapping[int, float] | None = None,
                     node_limit: int | None = None) -> BranchOutcome:
    """Search a tree (:class:`Tree`) from the root (the whole model, or the part within the column bounds
    given) until it is complete, the deadline or ``node_limit`` nodes; ``on_incumbent`` takes an integral LP
    solution (:data:`OnIncumbent`) and returns the incumbent's value after it.
    ``root_bound`` is a bound known for the root (the ideal ILP's)."""
    tree = Tree(master, mip_gap, on_incumbent, incumbent, root_bound, y_lower, y_upper)
    tree.search(deadline, node_limit)
    return BranchOutcome(tree.bound, tree.complete, tree.nodes, tree.splits)


def target_trees(master: ColumnGeneration, incumbent: Callable[[], float], bound: float, mip_gap: float,
                 deadline: float | None, on_incumbent: OnIncumbent, on_whole_configs: OnWholeConfigs | None = None,
                 rules: tuple[str, ...] = RULES,
                 stop_early: bool = True, strong: Strong | None = None) -> BranchOutcome:
    """Trees with a target, from the root, until one proves ``bound`` within the gap of the incumbent (read by
    ``incumbent()``, -inf when there is none; the callbacks are :class:`Tree`'s), or the deadline.

    A tree searched as if an incumbent were worth a *target* just below the bound fixes and closes far more;
    when it ends without a solution above the target it has proven that none exists, the target is the new
    bound, and the next tree aims lower. Once a solution above the target appears, the tree goes on with it as
    a plain branch-and-price; when it ends having found one within the gap below the target, it goes on to prove
    that one (:meth:`Tree.lower`). ``stop_early=False``: one plain tree, not closed by ``bound`` (tests). The outcome's
    bound is valid whenever the search stops; complete means the last tree was exhausted. ``strong``: how splits
    are chosen (:class:`Strong`, one for all the trees)."""
    if master.best is not None:  # the root's L bounds every solution; targets above it would be wasted trees
        bound = min(bound, master.best.bound)
    below, first = TARGET_GAP, True
    strong = strong or Strong()
    splits: dict[str, int] = {}
    nodes = 0
    while True:
        value = incumbent()
        # No target once it would fall far below the bound, or when a complete target tree found nothing at all
        # (then a plain tree settles whether any solution exists).
        aim = stop_early and math.isfinite(bound) and below < 1.0 and (math.isfinite(value) or first)
        target = bound - below * max(abs(bound), 1.0) if aim else -math.inf
        if target <= cutoff_of(value, mip_gap):
            # A tree aiming within the gap of the incumbent closes hardly more than a plain one, and when it ends
            # without a better solution it proves a bound above what the incumbent needs: go plain at once.
            target = -math.inf
        floor = max(value, target)
        # Each tree on the master without what no solution above its incumbent (or target) uses, by the root's
        # prices: smaller LPs, the same tree (splits on job columns are keyed by the model's columns, so strong
        # branching's scores carry over from tree to tree).
        searched = master.reduced(floor)
        tree = Tree(searched, mip_gap, on_incumbent, floor, root_bound=bound if stop_early else math.inf,
                    rules=rules, on_whole_configs=on_whole_configs, strong=strong, target=target > value)
        tree.search(deadline)
        found = incumbent()
        if tree.complete and tree.target and found < tree.incumbent <= cutoff_of(found, mip_gap):
            # The target is proven out, and a solution it found lies within the gap of it: the same tree goes on
            # to prove that one, instead of a plain tree from the root (on the 3 x 128-GPU multi-GPU round of
            # seed 5, 425 nodes after a target tree of 183 found the optimum).
            tree.lower(found)
            tree.search(deadline)
        if searched is not master:  # the root counts every pricing round and pattern priced
            master.rounds += searched.rounds
            master.tree_patterns += len(searched.own_patterns())
        nodes += tree.nodes
        splits = {kind: splits.get(kind, 0) + count for kind, count in tree.splits.items()}
        bound = min(bound, tree.bound)
        if not tree.complete or target <= value or incumbent() >= target or not tree.target:
            return BranchOutcome(bound, tree.complete, nodes, splits)
        below, first = below * TARGET_GROWTH, False


def _rounded(master: ColumnGeneration, y: np.ndarray) -> np.ndarray:
    """``y`` with every class's jobs on whole columns: the whole parts, then the largest remainders."""
    cls, count = master.items.columns.cls, master.items.columns.count
    whole = np.floor(y + _INTEGRAL)
    left = count - np.bincount(cls, weights=whole, minlength=count.size)
    order = np.lexsort((-(y - whole), cls))
    starts = np.searchsorted(cls[order], np.arange(count.size))
    rank = np.arange(order.size) - starts[cls[order]]
    whole[order] += rank < left[cls[order]]
    return whole


def _fix_by_reduced_cost(node: _Node, prices: Prices, incumbent: float) -> _Node:
    """``node`` with every job column whose next unit costs at least ``prices.bound - incumbent`` capped at its
    lower bound: a solution in the node using it is worth at most ``bound - reduced cost <= incumbent``, no
    better than the incumbent."""
    fixed = np.flatnonzero(prices.bound - prices.column_rc <= incumbent)
    if not fixed.size:
        return node
    # Dict operations over the columns at once (a node may fix thousands; a loop per column was a tenth of a
    # hard 3 x 128-GPU round's time).
    capped = dict.fromkeys(fixed.tolist(), 0.0)
    capped.update({col: node.y_lower[col] for col in node.y_lower.keys() & capped.keys()})
    return _Node(node.bound, node.depth, node.y_lower, {**node.y_upper, **capped}, node.rows)


def _apply(master: ColumnGeneration, node: _Node) -> None:
    """Set the master to ``node``'s bounds."""
    items = master.items
    lower = np.zeros(items.columns.cls.size)
    upper = items.columns.most_jobs.copy()
    for bounds, given in ((lower, node.y_lower), (upper, node.y_upper)):
        if given:
            bounds[np.fromiter(given.keys(), np.int64, len(given))] = np.fromiter(given.values(), float, len(given))
    master.restrict(lower, upper, node.rows)


def _choose(master: ColumnGeneration, candidates: list[Split], value: float, strong: Strong) -> Split:
    """The split whose children's LPs over the generated patterns fall furthest (product of the falls):
    strong branching without pricing, a guess that keeps the tree small; a split compared often enough is
    scored by its mean falls (:class:`Strong`)."""
    if len(candidates) == 1:
        return candidates[0]
    scores = []
    for _, children, key in candidates:
        seen = strong.falls.setdefault(key, [])
        if strong.reliable is not None and len(seen) >= strong.reliable:
            down, up = np.mean(seen, axis=0)
        else:
            down, up = (max(value - _restricted(master, child), _SCORE_FLOOR) for child in children)
            seen.append((down, up))
        scores.append(down * up)
    return candidates[int(np.argmax(scores))]


def _restricted(master: ColumnGeneration, node: _Node) -> float:
    _apply(master, node)
    return master.restricted_value()


def _candidates(master: ColumnGeneration, node: _Node, y: np.ndarray, x: np.ndarray, bound: float,
                rules: tuple[str, ...] = RULES, count: int = STRONG_CANDIDATES) -> list[Split]:
    """Splits of a node whose LP solution is ``(y, x)``: at most ``count`` of the first rule in ``rules`` that
    has any (rules 0-3 of the module docstring); none when it is integral."""
    for rule in rules:
        out = _SPLITS[rule](master, node, y, x, bound, count)
        if out:
            return out
    return []


def _pattern_splits(master: ColumnGeneration, node: _Node, y: np.ndarray, x: np.ndarray, bound: float,
                    count: int) -> list[Split]:
    """Rule 3 when some pattern is used fractionally."""
    used = np.flatnonzero(x > _INTEGRAL)
    if not np.any(np.abs(x[used] - np.rint(x[used])) > _INTEGRAL):
        return []
    condition, value = pattern_condition(master.patterns[used], x[used])
    if len(condition) > 1:
        conditions = {master.branch_rows[row] for row in node.rows} | {condition}
        if sum(len(c) for c in conditions if len(c) > 1) > MAX_FLAGS:
            raise _Unsplittable
    return [("pattern", _row_children(master, node, bound, condition, value), condition)]


def _type_splits(master: ColumnGeneration, node: _Node, y: np.ndarray, x: np.ndarray, bound: float,
                 count: int) -> list[Split]:
    """Rule 0 on the jobs (classes of one job) spread over kinds most evenly."""
    if len(master.kinds) == 1:
        return []
    cols = master.items.columns
    kind = master.column_kind
    alone = cols.count[cols.cls] == 1
    mass = np.zeros((cols.count.size, len(master.kinds)))
    np.add.at(mass, (cols.cls[alone], kind[alone]), y[alone])
    spread = np.minimum(mass, 1.0 - mass)
    out: list[Split] = []
    for flat in np.argsort(-spread, axis=None)[:count]:
        q, k = np.unravel_index(int(flat), mass.shape)
        if spread[q, k] <= _INTEGRAL:
            break
        mine = np.flatnonzero(cols.cls == q)
        on = {**node.y_upper, **{int(c): 0.0 for c in mine[kind[mine] != k]}}
        off = {**node.y_upper, **{int(c): 0.0 for c in mine[kind[mine] == k]}}
        out.append(("type", [_Node(bound, node.depth + 1, node.y_lower, on, node.rows),
                             _Node(bound, node.depth + 1, node.y_lower, off, node.rows)], ("type", int(q), int(k))))
    return out


def _column_splits(master: ColumnGeneration, node: _Node, y: np.ndarray, x: np.ndarray, bound: float,
                   count: int) -> list[Split]:
    """Rule 1 on the most fractional job columns."""
    frac = np.abs(y - np.rint(y))
    out: list[Split] = []
    for col in np.argsort(-frac)[:count]:
        if frac[col] <= _INTEGRAL:
            break
        col = int(col)
        down = _Node(bound, node.depth + 1, node.y_lower, {**node.y_upper, col: math.floor(y[col])}, node.rows)
        up = _Node(bound, node.depth + 1, {**node.y_lower, col: math.ceil(y[col])}, node.y_upper, node.rows)
        out.append(("column", [down, up], int(master.model_column(np.array(col)))))
    return out


def _count_splits(master: ColumnGeneration, node: _Node, y: np.ndarray, x: np.ndarray, bound: float,
                  count: int) -> list[Split]:
    """Rule 2 on the most fractional counts of servers holding at least ``k`` items of a type."""
    used = np.flatnonzero(x > _INTEGRAL)
    patterns = master.patterns[used]
    counts: list[tuple[float, Condition, float]] = []
    for t in map(int, np.flatnonzero(patterns.any(axis=0))):
        for k in range(1, int(patterns[:, t].max()) + 1):
            value = float(x[used] @ (patterns[:, t] >= k))
            f = abs(value - round(value))
            if f > _INTEGRAL:
                counts.append((f, ((t, k),), value))
    return [("count", _row_children(master, node, bound, condition, value), condition)
            for _, condition, value in sorted(counts, reverse=True)[:count]]


def _row_children(master: ColumnGeneration, node: _Node, bound: float, condition: Condition, value: float
                  ) -> list[_Node]:
    """``N <= floor(value)`` and ``N >= ceil(value)`` for the servers whose load meets ``condition``, within the
    node's bounds on that row."""
    row = master.branch_row(condition)
    lo, hi = node.rows.get(row, (-math.inf, math.inf))
    # Clamped to the node's bounds: a child never loosens them (the LP can stray outside only on artificial
    # slots; a child whose bounds cross is then empty and closes at once).
    down = {**node.rows, row: (lo, min(hi, float(math.floor(value))))}
    up = {**node.rows, row: (max(lo, float(math.ceil(value))), hi)}
    return [_Node(bound, node.depth + 1, node.y_lower, node.y_upper, down),
            _Node(bound, node.depth + 1, node.y_lower, node.y_upper, up)]


def pattern_condition(patterns: np.ndarray, x: np.ndarray) -> tuple[Condition, float]:
    """Rule 3: a condition met by a fractional number of servers when every single count is integral.

    Take a pattern ``p`` used fractionally with the most items of those: the used patterns that meet ``a >= p``
    (every component ``a[t] >= p[t]``) are ``p`` and patterns used a whole number of times (a fractional one
    would hold more items), so that count is fractional. Components are then dropped while the count stays
    fractional (fewer components split more patterns apart).
    """
    fractional = np.flatnonzero(np.abs(x - np.rint(x)) > _INTEGRAL)
    p = fractional[np.argmax(patterns[fractional].sum(axis=1))]
    components = [(int(t), int(patterns[p, t])) for t in np.flatnonzero(patterns[p])]

    def count(parts: list[tuple[int, int]]) -> float:
        met = np.all([patterns[:, t] >= k for t, k in parts], axis=0) if parts else np.ones(len(x), dtype=bool)
        return float(x @ met)

    for component in list(components):
        fewer = [c for c in components if c != component]
        value = count(fewer)
        if fewer and abs(value - round(value)) > _INTEGRAL:
            components = fewer
    return tuple(components), count(components)


_SPLITS = {"type": _type_splits, "column": _column_splits, "count": _count_splits, "pattern": _pattern_splits}


class _Unsplittable(Exception):
    """A node whose only split would need more pricing flags than :data:`MAX_FLAGS`."""
