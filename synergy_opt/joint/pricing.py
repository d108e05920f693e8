"""Server patterns priced exactly: the decomposition's pricing problem and its near-optimal patterns.

A *pattern* ``a`` is a load of one server: ``a[t]`` items of type ``t = (size, c, m)`` with
``sum size a <= G``, ``sum size c a <= C`` and ``sum size m a <= M``, and at most as many of a type as the jobs
can ask for (``caps``). Given item prices ``pi >= 0`` the pricing problem is ``max pi . a`` over patterns, a
bounded integer knapsack with three rows. Every item takes at least one GPU, so a pattern holds at most ``G``
items: :func:`best_patterns` is a dynamic programme over the item types whose states are indexed by the GPUs
used (at most ``G + 1`` values), each keeping the undominated (CPU, memory, value) states: exact.
:func:`near_patterns` lists every maximal pattern within the item caps whose value is at least a given one
(with zero prices: every pattern of a round, for the direct patterns model, when it has few), breadth-first
over item types with bounds on what is still to come.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synergy_opt.instance import Cluster
from synergy_opt.joint.grid import Grid, grid_patterns, integer_grid

# Relative slack when testing "fits on a server" (as the model's builder does).
_FIT = 1 + 1e-9
# Values this close count as equal (sums taken in another order).
_VALUE_TOLERANCE = 1e-9
# Dominance between states is tested on a grid of distinct CPU x memory values while it has at most this many
# cells; beyond it only states with equal CPU are compared (still exact, less pruning).
_GRID_CELLS = 2_000_000
# Up to this many states, dominance is tested pair by pair (cheaper than the grid for few states).
_PAIRWISE = 200
# Seconds the list programme takes per state of a level to prune it (about 1 us: 2.8 s for 2.8 million states of
# a fuzzed round's 16-GPU servers), to see whether a level would end past the deadline.
PRUNE_SECONDS_PER_STATE = 1e-6
# Components of multi-component conditions the DP tracks, one bit each of an int64 flag word.
MAX_FLAGS = 62


@dataclass(frozen=True, eq=False)
class ItemTypes:
    """Item types of one round: GPUs per item and per-GPU CPUs and GB; and the server they go on."""

    size: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    cluster: Cluster

    @property
    def need(self) -> np.ndarray:
        """``(types, 3)``: GPUs, CPUs and GB one item takes."""
        return np.stack([self.size, self.size * self.cpu, self.size * self.mem], axis=1).astype(float)

    @property
    def capacity(self) -> np.ndarray:
        c = self.cluster
        return np.array([c.gpus_per_server, c.cpus_per_server * _FIT, c.mem_gb_per_server * _FIT])

    def fits(self, patterns: np.ndarray) -> np.ndarray:
        """Whether each pattern (rows) fits one server: its sums within the capacity (its relative slack
        included), the test every pattern routine here makes (the tests check them against it)."""
        return np.all(patterns @ self.need <= self.capacity, axis=1)

    @cached_property
    def grid(self) -> Grid | None:
        """The integer grid the loads' sums lie on, when there is a small one (:mod:`synergy_opt.joint.grid`)."""
        return integer_grid(self.need, self.capacity)


@dataclass(frozen=True)
class Priced:
    """The pricing problem's answer: the best value and a few of the best patterns (best first)."""

    value: float
    patterns: np.ndarray  # (k, types)
    values: np.ndarray


@dataclass(frozen=True)
class Bonus:
    """Value a pattern gains (or, when negative, loses) for each condition it meets; a condition is a set of
    components ``a[item] >= at_least`` that must all hold.

    The branch-and-price's rows on the patterns (servers whose loads meet a condition) enter the pricing problem
    this way. A condition of one component is separable by item type; one of several is tracked by a flag per
    partial load until its last item type has been decided.
    """

    item: np.ndarray  # per component
    at_least: np.ndarray  # per component (>= 1)
    condition: np.ndarray  # per component: the condition it belongs to
    value: np.ndarray  # per condition

    @classmethod
    def of_conditions(cls, conditions: list[tuple[tuple[int, int], ...]], value: np.ndarray) -> Bonus:
        """From conditions given as tuples of ``(item, at_least)`` components."""
        parts = [(t, k, c) for c, components in enumerate(conditions) for t, k in components]
        item, at_least, condition = (np.array(x, dtype=np.int64) for x in zip(*parts, strict=True)) if parts else \
            (np.zeros(0, np.int64),) * 3
        return cls(item, at_least, condition, np.asarray(value, dtype=float))

    def met(self, patterns: np.ndarray) -> np.ndarray:
        """``(patterns, conditions)``: whether each pattern meets each condition."""
        held = (patterns[:, self.item] >= self.at_least[None, :]).astype(np.int64)
        count = np.zeros((len(patterns), self.value.size), dtype=np.int64)
        np.add.at(count.T, self.condition, held.T)
        return count == np.bincount(self.condition, minlength=self.value.size)[None, :]

    def of(self, patterns: np.ndarray) -> np.ndarray:
        """The bonus of each pattern (rows)."""
        return np.asarray(self.met(patterns) @ self.value, dtype=float).reshape(len(patterns))

    def best_gain(self, items: int) -> np.ndarray:
        """Per item type, the most the conditions with a component on it can add (0 when none is positive)."""
        positive = np.maximum(self.value, 0.0)[self.condition]
        return np.bincount(self.item, weights=positive, minlength=items)

    def single(self) -> np.ndarray:
        """Mask of the conditions of one component."""
        return np.bincount(self.condition, minlength=self.value.size) == 1

    def within(self, first: int, stop: int) -> Bonus:
        """The conditions whose components are all on item types ``first, ..., stop - 1``, those numbered from 0
        (the pricing problem of one kind of server in a master of several)."""
        inside = (self.item >= first) & (self.item < stop)
        if inside.all():
            return self if first == 0 else Bonus(self.item - first, self.at_least, self.condition, self.value)
        whole = np.bincount(self.condition, weights=inside, minlength=self.value.size) == \
            np.bincount(self.condition, minlength=self.value.size)
        number = np.cumsum(whole) - 1
        keep = whole[self.condition]
        return Bonus(self.item[keep] - first, self.at_least[keep], number[self.condition[keep]], self.value[whole])


class PricingDeadline(Exception):
    """The list pricing passed its deadline between two levels (no answer: a partial one bounds nothing)."""


def best_patterns(items: ItemTypes, prices: np.ndarray, caps: np.ndarray, count: int = 1,
                  bonus: Bonus | None = None, beat: float = 0.0, on_grid: bool = True,
                  deadline: float | None = None) -> Priced:
    """``max prices . a + bonus(a)`` over the patterns of one server with ``a <= caps``, exactly; up to ``count``
    of the best.

    A dynamic programme over the GPUs used: a load is built as a sequence of items in a fixed order of the item
    types (best value per GPU first), so every load arises once and the caps hold (a state knows its last type and
    how many of it it holds); level ``g`` holds the partial loads of ``g`` GPUs, and each grows into level
    ``g + size`` by one more item of its last type or a later one. A state another at its level dominates (no
    more CPU or memory, no later place in the order, no less value, the same conditions of the bonus met) is
    dropped: whatever completes it completes the other. States that cannot beat the best value seen (nor
    ``beat``), even with every GPU, every CPU or every GB left at the best value per unit of the types still open
    to them, are dropped too. When no pattern is worth more than ``beat``, the answer is ``beat`` (an upper bound
    on the best value) and the empty pattern; otherwise the best value is exact.

    When the loads' sums lie on a small integer grid (``items.grid``) and the bonus has conditions of one
    component only, the same answer comes from the dense programme of :mod:`synergy_opt.joint.grid` instead
    (``on_grid=False`` keeps this one: tests compare the two). Past ``deadline`` (a ``time.perf_counter`` time)
    the list programme raises :class:`PricingDeadline` between levels: off the grid one call took 0.4-4.5 s on
    16-GPU servers (a fuzzed round, 9-16 s past a 1 s limit).
    """
    bonus = bonus if bonus is not None and bonus.item.size else None
    gain = np.zeros(prices.size) if bonus is None else bonus.best_gain(prices.size)
    types = np.flatnonzero((prices + gain > _VALUE_TOLERANCE) & (caps > 0))
    empty = Priced(max(beat, 0.0), np.zeros((1, prices.size), dtype=np.int64), np.zeros(1))
    if not types.size:
        return empty
    if on_grid and items.grid is not None and (bonus is None or bonus.single().all()):
        return _on_grid(items.grid, prices, caps, types, bonus, count, beat, empty)
    optimistic = prices + gain  # an item's value with every positive bonus of its type (bounds only)
    types = types[np.lexsort((types, -optimistic[types] / items.size[types]))]
    size, need, value, cap = items.size[types], items.need[types], prices[types], caps[types]
    steps = None if bonus is None else _BonusSteps(bonus, types, cap)
    capacity = items.capacity
    gpus = int(items.cluster.gpus_per_server)
    to_go = _best_per_gpus(size, optimistic[types], gpus)
    # The best value per CPU and per GB of the types from k on (what the CPUs or GBs left can add at most).
    per_unit = optimistic[types][:, None] / np.maximum(need[:, 1:], 1e-12)
    suffix = np.vstack([np.maximum.accumulate(per_unit[::-1], axis=0)[::-1], np.zeros((1, 2))])
    width = int(cap.max()) + 1
    by_size = [(int(g), np.flatnonzero(size == g)) for g in np.unique(size)]
    levels = [_Level.root()]
    pending: list[list[_Level]] = [[] for _ in range(gpus + 1)]
    best = max(beat, 0.0)
    for g in range(gpus + 1):
        _check(deadline)
        if g:
            level = _Level.concatenate(pending[g])
            # A level off the grid may hold millions of states, seconds to prune: not begun when it would end late.
            _check(deadline, level.value.size)
            reach = np.minimum(to_go[level.last, gpus - g],
                               np.min((capacity[1:] - level.use) * suffix[level.last], axis=1))
            keep = level.value + reach >= best - _VALUE_TOLERANCE
            if keep.any():
                best = max(best, float(level.value[keep].max()))
                order = level.last[keep] * width + level.count[keep]
                keep[keep] = undominated(level.use[keep], level.value[keep], order,
                                         group=None if steps is None else steps.group(level.take(keep), order))
            levels.append(level.take(keep))
        state = levels[g]
        if not state.value.size:
            continue
        for grown_size, of in by_size:
            if g + grown_size > gpus:
                continue
            _check(deadline)
            gain_of = value[of] + to_go[of, gpus - g - grown_size]
            if steps is not None:
                gain_of = gain_of + steps.most[of]
            ok = (of[None, :] >= state.last[:, None]) & \
                (state.value[:, None] + gain_of[None, :] >= best - _VALUE_TOLERANCE)
            parent, which = np.nonzero(ok)
            if not parent.size:
                continue
            t = of[which]
            held = np.where(t == state.last[parent], state.count[parent] + 1, 1)
            use = state.use[parent] + need[t, 1:]
            fits = (held <= cap[t]) & (use[:, 0] <= capacity[1]) & (use[:, 1] <= capacity[2])
            parent, t, held, use = parent[fits], t[fits], held[fits], use[fits]
            val = state.value[parent] + value[t]
            flags = state.flags[parent]
            if steps is not None:
                flags, val = steps.add(t, held, flags, val)
            pending[g + grown_size].append(_Level(use, val, t, held, flags, parent))
    values = np.concatenate([level.value for level in levels])
    if values.max(initial=-np.inf) <= beat:
        return empty
    where = np.concatenate([np.full(level.value.size, g) for g, level in enumerate(levels)])
    index = np.concatenate([np.arange(level.value.size) for level in levels])
    chosen = np.argsort(-values, kind="stable")[:count]
    patterns = np.zeros((chosen.size, prices.size), dtype=np.int64)
    for row, k in enumerate(chosen):
        at, i = int(where[k]), int(index[k])
        while at > 0:
            item = int(levels[at].last[i])
            patterns[row, types[item]] += 1
            at, i = at - int(size[item]), int(levels[at].parent[i])
    return Priced(max(float(values[chosen[0]]), beat), patterns, values[chosen])


def _check(deadline: float | None, states: int = 0) -> None:
    """Raise :class:`PricingDeadline` past ``deadline``, or when pruning ``states`` states would end past it."""
    if deadline is not None and time.perf_counter() + states * PRUNE_SECONDS_PER_STATE > deadline:
        raise PricingDeadline


def _on_grid(grid: Grid, prices: np.ndarray, caps: np.ndarray, types: np.ndarray, bonus: Bonus | None, count: int,
             beat: float, empty: Priced) -> Priced:
    """:func:`best_patterns` by the dense programme: the types worth adding, each condition's bonus paid by the
    item that brings its type's count to the condition's."""
    open_caps = np.zeros_like(caps)
    open_caps[types] = caps[types]
    pay = None
    if bonus is not None:
        pay = np.zeros((prices.size, int(open_caps.max()) + 1))
        reached = bonus.at_least <= open_caps[bonus.item]  # a count never reached: its condition is never met
        np.add.at(pay, (bonus.item[reached], bonus.at_least[reached]), bonus.value[bonus.condition[reached]])
    loads, values = grid_patterns(grid, prices, open_caps, pay, count)
    if values.max(initial=-np.inf) <= beat:
        return empty
    return Priced(max(float(values[0]), beat), loads, values)


@dataclass(frozen=True)
class _Level:
    """Partial loads of one GPU count: CPU and GB used, value, last type (its place in the order) and how many
    of it, the conditions of the bonus met so far, and the state of the level below each grew from."""

    use: np.ndarray
    value: np.ndarray
    last: np.ndarray
    count: np.ndarray
    flags: np.ndarray
    parent: np.ndarray

    @classmethod
    def root(cls) -> _Level:
        zero = np.zeros(1, dtype=np.int64)
        return cls(np.zeros((1, 2)), np.zeros(1), zero, zero, zero, np.full(1, -1))

    @classmethod
    def concatenate(cls, parts: list[_Level]) -> _Level:
        if not parts:
            none = np.zeros(0, dtype=np.int64)
            return cls(np.zeros((0, 2)), np.zeros(0), none, none, none, none)
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                     ("use", "value", "last", "count", "flags", "parent")))

    def take(self, keep: np.ndarray) -> _Level:
        return _Level(self.use[keep], self.value[keep], self.last[keep], self.count[keep], self.flags[keep],
                      self.parent[keep])


class _BonusSteps:
    """The bonus as the sequence DP adds it: an item that brings its type's count to ``k`` meets the components
    ``(type, k)``; a condition of one component pays at once, one of several when its last component is met
    (a flag bit per component of those)."""

    def __init__(self, bonus: Bonus, types: np.ndarray, cap: np.ndarray) -> None:
        place = np.full(int(max(types.max(), bonus.item.max())) + 1, -1)
        place[types] = np.arange(types.size)
        at = place[bonus.item]
        width = int(cap.max()) + 1
        single = bonus.single()
        # Per (type, count): what single conditions pay, and which flag bits of the others get set.
        self.pay = np.zeros((types.size, width + 1))
        self.bits = np.zeros((types.size, width + 1), dtype=np.int64)
        multi = [j for j in range(bonus.item.size) if not single[bonus.condition[j]]]
        if len(multi) > MAX_FLAGS:  # the tree leaves such a node open (branching._Unsplittable)
            raise ValueError(f"more than {MAX_FLAGS} components of multi-component conditions")
        for j in range(bonus.item.size):
            if at[j] < 0 or bonus.at_least[j] > cap[at[j]]:
                continue  # a count the DP never reaches: the condition is never met
            if single[bonus.condition[j]]:
                self.pay[at[j], bonus.at_least[j]] += bonus.value[bonus.condition[j]]
            else:
                self.bits[at[j], bonus.at_least[j]] |= 1 << multi.index(j)
        self.conditions = [(sum(1 << multi.index(j) for j in multi if bonus.condition[j] == c), float(bonus.value[c]))
                           for c in np.unique(bonus.condition[multi])] if multi else []
        self.most = np.bincount(at[at >= 0], weights=np.maximum(bonus.value[bonus.condition], 0.0)[at >= 0],
                                minlength=types.size)
        self.counted = np.zeros(types.size, dtype=bool)  # types with conditions on their counts
        self.counted[at[at >= 0]] = True

    def group(self, level: _Level, order: np.ndarray) -> np.ndarray:
        """States that may dominate one another: the same conditions met, and, when the last type has
        conditions on its count, the same last type and count (what more items of it pay depends on it)."""
        exact = np.where(self.counted[level.last], order, -1)
        _, group = np.unique(np.stack([level.flags, exact], axis=1), axis=0, return_inverse=True)
        return group.ravel()

    def add(self, t: np.ndarray, held: np.ndarray, flags: np.ndarray, val: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
        """An item of type ``t`` bringing its count to ``held``: the new flags and values."""
        val = val + self.pay[t, held]
        new = flags | self.bits[t, held]
        for mask, value in self.conditions:
            done = ((new & mask) == mask) & ((flags & mask) != mask)
            val = val + value * done
        return new, val


def _best_per_gpus(size: np.ndarray, value: np.ndarray, gpus: int) -> np.ndarray:
    """``to_go[k, g]``: the most value ``g`` GPUs can hold from types ``k, k+1, ...`` (CPU, memory and caps
    ignored: an unbounded knapsack by GPUs), by one pass from the last type back."""
    to_go = np.zeros((size.size + 1, gpus + 1))
    row = [0.0] * (gpus + 1)
    for k in range(size.size - 1, -1, -1):
        s, v = int(size[k]), float(value[k])
        for g in range(s, gpus + 1):
            row[g] = max(row[g], v + row[g - s])
        for g in range(1, gpus + 1):
            row[g] = max(row[g], row[g - 1])
        to_go[k] = row
    return to_go


def _undominated_pairwise(gpu: np.ndarray, cpu: np.ndarray, mem: np.ndarray, value: np.ndarray,
                          group: np.ndarray | None) -> np.ndarray:
    """:func:`undominated` by comparing every pair (faster for few states): of equal resources the largest value
    (the first of equals) is kept; a state is dropped when one with no more of any resource, less of one, has
    at least its value (and the same ``group``)."""
    index = np.arange(value.size)
    no_more = (gpu[:, None] <= gpu) & (cpu[:, None] <= cpu) & (mem[:, None] <= mem)  # [j, i]: j uses no more
    if group is not None:
        no_more &= group[:, None] == group
    same = no_more & (gpu[:, None] == gpu) & (cpu[:, None] == cpu) & (mem[:, None] == mem)
    better = value[:, None] > value
    beats_equal = same & (better | ((value[:, None] == value) & (index[:, None] < index)))
    beats_below = no_more & ~same & (value[:, None] >= value - _VALUE_TOLERANCE)
    return ~np.any(beats_equal | beats_below, axis=0)


def undominated(use: np.ndarray, value: np.ndarray, gpu: np.ndarray | None = None,
                group: np.ndarray | None = None) -> np.ndarray:
    """Mask of the states no other state dominates (no more GPUs, CPU or memory, no less value); only states of
    the same ``group`` (if given) are compared.

    Of states with equal resources one is kept. On a grid of the distinct values of each resource, the best
    value with no more of any is a running maximum; a state is dominated when the best value strictly below it
    in one resource (and no more in the others) is at least its own. Grids too large for memory fall back to
    comparing states of equal GPUs and CPU only (still exact, less pruning).
    """
    n = value.size
    if n <= 1:
        return np.ones(n, dtype=bool)
    gpu = np.zeros(n, dtype=np.int64) if gpu is None else gpu
    if n <= _PAIRWISE:
        return _undominated_pairwise(gpu, np.round(use[:, 0], 9), np.round(use[:, 1], 6), value, group)
    if group is not None and np.any(group != group[0]):
        keep = np.zeros(n, dtype=bool)
        for g in np.unique(group):
            mine = np.flatnonzero(group == g)
            keep[mine] = undominated(use[mine], value[mine], gpu[mine])
        return keep
    ranks, sizes = [], []
    for values, digits in ((gpu, 0), (use[:, 0], 9), (use[:, 1], 6)):
        key, rank = np.unique(np.round(values, digits), return_inverse=True)
        ranks.append(rank.ravel())
        sizes.append(key.size)
    cell = np.ravel_multi_index(tuple(ranks), tuple(sizes))
    # One state per cell: the one of largest value.
    order = np.lexsort((-value, cell))
    first = np.r_[True, cell[order][1:] != cell[order][:-1]]
    kept = order[first]
    keep = np.zeros(n, dtype=bool)
    if int(np.prod(sizes)) <= _GRID_CELLS:
        grid = np.full(tuple(sizes), -np.inf)
        grid[tuple(r[kept] for r in ranks)] = value[kept]
        running = grid
        for axis in range(3):
            running = np.maximum.accumulate(running, axis=axis)
        below = np.full(grid.shape, -np.inf)
        below[1:, :, :] = running[:-1, :, :]
        below[:, 1:, :] = np.maximum(below[:, 1:, :], running[:, :-1, :])
        below[:, :, 1:] = np.maximum(below[:, :, 1:], running[:, :, :-1])
        dominated = below[tuple(r[kept] for r in ranks)] >= value[kept] - _VALUE_TOLERANCE
    else:
        # Equal GPUs and CPU only: memory ascending within each, dominated by a running maximum before it.
        group_key = ranks[0][kept] * sizes[1] + ranks[1][kept]
        inner = np.lexsort((ranks[2][kept], group_key))
        kept = kept[inner]
        v, group = value[kept], group_key[inner]
        starts = np.r_[True, group[1:] != group[:-1]]
        lift = 2.0 * (np.ptp(v) + 1.0)
        index = np.cumsum(starts)
        running = np.maximum.accumulate(v + lift * index) - lift * index
        before = np.r_[-np.inf, running[:-1]]
        before[starts] = -np.inf
        dominated = before >= v - _VALUE_TOLERANCE
    keep[kept[~dominated]] = True
    return keep


def near_patterns(items: ItemTypes, prices: np.ndarray, floor_value: float, caps: np.ndarray,
                  limit: int, partial_factor: int = 20) -> np.ndarray | None:
    """Every maximal pattern with ``a <= caps`` and ``prices . a >= floor_value``; None past ``limit`` of them
    (or past ``partial_factor * limit`` partial loads on the way).

    Maximal: no item of a type with room left under its cap fits any more. A pattern of value at least
    ``floor_value`` extends to a maximal one of value at least as large (prices are >= 0), so these cover
    every such pattern. Item types are taken highest price per GPU first; a partial load is dropped when even
    the best completion (by GPUs, by CPUs and by memory alone, each relaxed) cannot reach ``floor_value``.
    """
    types = np.flatnonzero(caps > 0)
    num = prices.size
    if not types.size:
        return np.zeros((1, num), dtype=np.int64) if floor_value <= _VALUE_TOLERANCE else np.zeros((0, num), np.int64)
    need_all = items.need
    capacity = items.capacity
    ratio = prices[types] / items.size[types]
    types = types[np.lexsort((types, -ratio))]
    need, value, cap = need_all[types], prices[types], caps[types]
    # Suffix bounds: the best value per GPU, per CPU and per GB among the types still to come.
    with np.errstate(divide="ignore", invalid="ignore"):
        per_unit = np.where(need > 0, value[:, None] / need, np.where(value[:, None] > 0, np.inf, 0.0))
    suffix = np.maximum.accumulate(per_unit[::-1], axis=0)[::-1]
    suffix = np.vstack([suffix, np.zeros((1, 3))])
    loads = np.zeros((1, types.size), dtype=np.int32)
    used = np.zeros((1, 3))
    val = np.zeros(1)
    threshold = floor_value - _VALUE_TOLERANCE * max(1.0, abs(floor_value))
    for k in range(types.size):
        with np.errstate(divide="ignore", invalid="ignore"):  # a need of 0 (ideal.model.with_zero_config): no limit
            per_need = np.where(need[k] > 0, (capacity - used) / need[k], np.inf)
        room = np.floor(np.min(per_need, axis=1) + 1e-9).astype(np.int64)
        # The 1e-9 only undoes the division's rounding: a load fits when its sums are within the capacity (its
        # relative slack included), as best_patterns and the grid test it, not 1e-9 of an item beyond.
        room -= np.any(used + room[:, None] * need[k] > capacity, axis=1)
        reps = np.minimum(np.maximum(room, 0), cap[k]) + 1
        if reps.sum() > partial_factor * limit:
            return None
        parent = np.repeat(np.arange(len(loads)), reps)
        count = (np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)).astype(np.int32)
        loads = loads[parent]
        loads[:, k] = count
        used = used[parent] + count[:, None] * need[k]
        val = val[parent] + count * value[k]
        left = capacity - used
        with np.errstate(invalid="ignore"):
            reach = val + np.min(np.where(suffix[k + 1] > 0, left * suffix[k + 1], 0.0), axis=1)
        keep = reach >= threshold
        loads, used, val = loads[keep], used[keep], val[keep]
    addable = np.all(used[:, None, :] + need[None, :, :] <= capacity, axis=2) & (loads < cap[None, :])
    maximal = ~addable.any(axis=1)
    if maximal.sum() > limit:
        return None
    out = np.zeros((int(maximal.sum()), num), dtype=np.int64)
    out[:, types] = loads[maximal]
    return out
