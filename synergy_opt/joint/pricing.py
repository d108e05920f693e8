"""Server patterns priced exactly: the decomposition's pricing problem and its near-optimal patterns.

A *pattern* ``a`` is a load of one server: ``a[t]`` items of type ``t = (size, c, m)`` with
``sum size a <= G``, ``sum size c a <= C`` and ``sum size m a <= M``, and at most as many of a type as the jobs
can ask for (``caps``). Given item prices ``pi >= 0`` the pricing problem is ``max pi . a`` over patterns, a
bounded integer knapsack with three rows. Every item takes at least one GPU, so a pattern holds at most ``G``
items: :func:`best_patterns` is a dynamic programme over the item types whose states are indexed by the GPUs
used (at most ``G + 1`` values), each keeping the undominated (CPU, memory, value) states: exact.
:func:`near_patterns` lists every maximal pattern within the item caps whose value is at least a given one
(the patterns a proof must consider), breadth-first over item types with bounds on what is still to come.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.instance import Cluster

# Relative slack when testing "fits on a server" (as the model's builder does).
_FIT = 1 + 1e-9
# Values this close count as equal (sums taken in another order).
_VALUE_TOLERANCE = 1e-9
# Dominance between states is tested on a grid of distinct CPU x memory values while it has at most this many
# cells; beyond it only states with equal CPU are compared (still exact, less pruning).
_GRID_CELLS = 2_000_000


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

    @property
    def fit_alone(self) -> np.ndarray:
        """How many items of each type fit on an empty server."""
        return np.floor(np.min(self.capacity / self.need, axis=1) + 1e-9).astype(np.int64)

    def fits(self, patterns: np.ndarray) -> np.ndarray:
        """Whether each pattern (rows) fits one server."""
        return np.all(patterns @ self.need <= self.capacity + 1e-9, axis=1)


@dataclass(frozen=True)
class Priced:
    """The pricing problem's answer: the best value and a few of the best patterns (best first)."""

    value: float
    patterns: np.ndarray  # (k, types)
    values: np.ndarray


def best_patterns(items: ItemTypes, prices: np.ndarray, caps: np.ndarray, count: int = 1) -> Priced:
    """``max prices . a`` over the patterns of one server with ``a <= caps``, exactly; up to ``count`` of the best.

    A dynamic programme over the item types: a state is a partial load (GPUs, CPUs, GB used, value); each type
    adds 0 to ``caps[t]`` items. Of states with equal GPUs, one another dominates (no more CPU, no more memory,
    no less value) is dropped: whatever completes it completes the other. States that cannot beat the best
    value seen, even with every GPU left at the best value per GPU of the types to come, are dropped too.
    """
    types = np.flatnonzero((prices > _VALUE_TOLERANCE) & (caps > 0))
    empty = Priced(0.0, np.zeros((1, prices.size), dtype=np.int64), np.zeros(1))
    if not types.size:
        return empty
    if np.all(caps[types] >= items.fit_alone[types]):
        # The caps say nothing the server's capacity does not: no counts to track, a pass over GPU levels.
        return _best_by_levels(items, prices, types, count)
    # Largest value per GPU first: good loads appear early and prune the rest.
    types = types[np.lexsort((types, -prices[types] / items.size[types]))]
    size, need, value, cap = items.size[types], items.need[types], prices[types], caps[types]
    capacity = items.capacity
    gpus = int(items.cluster.gpus_per_server)
    to_go = _best_per_gpus(size, value, gpus)
    gpu = np.zeros(1, dtype=np.int64)
    use = np.zeros((1, 2))
    val = np.zeros(1)
    history: list[tuple[np.ndarray, np.ndarray]] = []
    best = 0.0
    for k in range(types.size):
        room = np.floor(np.min((capacity - np.column_stack([gpu, use])) / need[k], axis=1) + 1e-9).astype(np.int64)
        reps = np.minimum(np.maximum(room, 0), cap[k]) + 1
        parent = np.repeat(np.arange(val.size), reps)
        copies = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
        gpu = gpu[parent] + copies * size[k]
        use = use[parent] + copies[:, None] * need[k, 1:]
        val = val[parent] + copies * value[k]
        best = max(best, float(val.max()))
        keep = val + to_go[k + 1, gpus - gpu] >= best - _VALUE_TOLERANCE
        keep[keep] = undominated(use[keep], val[keep], gpu[keep])
        gpu, use, val = gpu[keep], use[keep], val[keep]
        history.append((parent[keep], copies[keep]))
    order = np.argsort(-val, kind="stable")[:count]
    patterns = np.zeros((order.size, prices.size), dtype=np.int64)
    for row, state in enumerate(order):
        i = int(state)
        for k in range(types.size - 1, -1, -1):
            parent, copies = history[k]
            patterns[row, types[k]] = copies[i]
            i = int(parent[i])
    return Priced(float(val[order[0]]), patterns, val[order])


def _best_by_levels(items: ItemTypes, prices: np.ndarray, types: np.ndarray, count: int) -> Priced:
    """:func:`best_patterns` without caps: levels ``g = 0..G`` hold loads of exactly ``g`` GPUs, a load reaches
    level ``g + size`` by one more item, and each level keeps its undominated (CPU, memory, value) states."""
    size, need, value = items.size[types], items.need[types], prices[types]
    capacity = items.capacity
    gpus = int(items.cluster.gpus_per_server)
    to_go = _best_per_gpus(size, value, gpus)[0]
    # Per level: resources used, value, and the (state of the level below, type) it came from.
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = [
        (np.zeros((1, 2)), np.zeros(1), np.full(1, -1), np.full(1, -1))
    ]
    pending: list[list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(gpus + 1)]
    best = 0.0
    for g in range(gpus + 1):
        if g:
            parts = pending[g]
            use = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, 2))
            val = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
            parent = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
            kind = np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64)
            keep = val + to_go[gpus - g] >= best - _VALUE_TOLERANCE
            keep[keep] = undominated(use[keep], val[keep])
            levels.append((use[keep], val[keep], parent[keep], kind[keep]))
            best = max(best, float(val[keep].max(initial=0.0)))
        use, val, _, _ = levels[g]
        for s in np.unique(size):
            if g + s > gpus or not val.size:
                continue
            of_size = np.flatnonzero(size == s)
            new_use = use[:, None, :] + need[of_size][None, :, 1:]
            new_val = val[:, None] + value[of_size][None, :]
            ok = np.all(new_use <= capacity[1:], axis=2) & (new_val + to_go[gpus - g - s] >= best - _VALUE_TOLERANCE)
            state, which = np.nonzero(ok)
            if state.size:
                pending[g + s].append((new_use[state, which], new_val[state, which], state, of_size[which]))
    # The best states over all levels (a few more than asked: equal loads reached in another order repeat).
    level = np.concatenate([np.full(lv[1].size, g) for g, lv in enumerate(levels)])
    index = np.concatenate([np.arange(lv[1].size) for lv in levels])
    values = np.concatenate([lv[1] for lv in levels])
    chosen: dict[bytes, tuple[float, np.ndarray]] = {}
    for k in np.argsort(-values, kind="stable")[:4 * count]:
        pattern = np.zeros(prices.size, dtype=np.int64)
        g, i = int(level[k]), int(index[k])
        while g > 0:
            _, _, parent, kind = levels[g]
            t = int(kind[i])
            pattern[types[t]] += 1
            g, i = g - int(size[t]), int(parent[i])
        chosen.setdefault(pattern.tobytes(), (float(values[k]), pattern))
        if len(chosen) >= count:
            break
    picked = list(chosen.values())
    return Priced(picked[0][0], np.array([p for _, p in picked]), np.array([v for v, _ in picked]))


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


def undominated(use: np.ndarray, value: np.ndarray, gpu: np.ndarray | None = None) -> np.ndarray:
    """Mask of the states no other state dominates (no more GPUs, CPU or memory, no less value).

    Of states with equal resources one is kept. On a grid of the distinct values of each resource, the best
    value with no more of any is a running maximum; a state is dominated when the best value strictly below it
    in one resource (and no more in the others) is at least its own. Grids too large for memory fall back to
    comparing states of equal GPUs and CPU only (still exact, less pruning).
    """
    n = value.size
    if n <= 1:
        return np.ones(n, dtype=bool)
    gpu = np.zeros(n, dtype=np.int64) if gpu is None else gpu
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
        room = np.floor(np.min((capacity - used) / need[k], axis=1) + 1e-9).astype(np.int64)
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
    free = capacity - used
    addable = np.all(free[:, None, :] >= need[None, :, :] - 1e-9, axis=2) & (loads < cap[None, :])
    maximal = ~addable.any(axis=1)
    if maximal.sum() > limit:
        return None
    out = np.zeros((int(maximal.sum()), num), dtype=np.int64)
    out[:, types] = loads[maximal]
    return out
