"""Server patterns priced exactly: the decomposition's pricing problem and its near-optimal patterns.

A *pattern* ``a`` is a load of one server: ``a[t]`` items of type ``t = (size, c, m)`` with
``sum size a <= G``, ``sum size c a <= C`` and ``sum size m a <= M``. Given item prices ``pi >= 0`` the pricing
problem is ``max pi . a`` over patterns, an integer knapsack with three rows. Every item takes at least one GPU,
so a pattern holds at most ``G`` items: :func:`best_patterns` is a dynamic programme over the GPUs used (at most
``G`` levels), each level keeping the undominated (CPU, memory, value) states, which makes it exact.
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

    def fits(self, patterns: np.ndarray) -> np.ndarray:
        """Whether each pattern (rows) fits one server."""
        return np.all(patterns @ self.need <= self.capacity + 1e-9, axis=1)


@dataclass(frozen=True)
class Priced:
    """The pricing problem's answer: the best value and a few of the best patterns (best first)."""

    value: float
    patterns: np.ndarray  # (k, types)
    values: np.ndarray


def best_patterns(items: ItemTypes, prices: np.ndarray, count: int = 1) -> Priced:
    """``max prices . a`` over the patterns of one server, exactly; up to ``count`` of the best patterns found.

    Levels ``g = 0..G`` hold loads of exactly ``g`` GPUs; a load reaches level ``g + size`` by one more item.
    Within a level a state another one dominates (no more CPU, no more memory, no less value) is dropped:
    whatever can complete it can complete the other. States that cannot beat the best value seen, even with
    every GPU left at the best value per GPU, are dropped too.
    """
    types = np.flatnonzero(prices > _VALUE_TOLERANCE)
    empty = Priced(0.0, np.zeros((1, prices.size), dtype=np.int64), np.zeros(1))
    if not types.size:
        return empty
    size, need, value = items.size[types], items.need[types], prices[types]
    capacity = items.capacity
    gpus = int(items.cluster.gpus_per_server)
    to_go = _best_per_gpus(size, value, gpus)
    # Per level: resources used, value, and the (level, state, type) it came from.
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = [
        (np.zeros((1, 2)), np.zeros(1), np.full(1, -1), np.full(1, -1))
    ]
    pending: list[list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(gpus + 1)]
    best = 0.0
    for g in range(gpus + 1):
        if g:
            parts = pending[g]
            if parts:
                use = np.concatenate([p[0] for p in parts])
                val = np.concatenate([p[1] for p in parts])
                parent = np.concatenate([p[2] for p in parts])
                kind = np.concatenate([p[3] for p in parts])
                keep = val + to_go[gpus - g] >= best - _VALUE_TOLERANCE
                keep[keep] = _undominated(use[keep], val[keep])
                levels.append((use[keep], val[keep], parent[keep], kind[keep]))
                best = max(best, float(val[keep].max(initial=0.0)))
            else:
                levels.append((np.zeros((0, 2)), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)))
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
    # The best states over all levels, read back along their parents.
    candidates = [(float(v), g, i) for g, (_, val, _, _) in enumerate(levels) for i, v in enumerate(val)]
    candidates.sort(key=lambda c: -c[0])
    chosen, seen = [], set()
    for v, g, i in candidates:
        pattern = _read_back(levels, g, i, types, size, prices.size)
        key = pattern.tobytes()
        if key not in seen:
            seen.add(key)
            chosen.append((v, pattern))
        if len(chosen) >= count:
            break
    if not chosen:
        return empty
    return Priced(chosen[0][0], np.array([p for _, p in chosen]), np.array([v for v, _ in chosen]))


def _read_back(levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], g: int, i: int,
               types: np.ndarray, size: np.ndarray, num_types: int) -> np.ndarray:
    pattern = np.zeros(num_types, dtype=np.int64)
    while g > 0:
        _, _, parent, kind = levels[g]
        t = int(kind[i])
        pattern[types[t]] += 1
        g, i = g - int(size[t]), int(parent[i])
    return pattern


def _best_per_gpus(size: np.ndarray, value: np.ndarray, gpus: int) -> np.ndarray:
    """``to_go[k]``: the most value ``k`` GPUs can hold, CPU and memory ignored (an unbounded knapsack)."""
    to_go = np.zeros(gpus + 1)
    for k in range(1, gpus + 1):
        fits = size <= k
        if fits.any():
            to_go[k] = max(to_go[k - 1], float(np.max(value[fits] + to_go[k - size[fits]])))
        else:
            to_go[k] = to_go[k - 1]
    return to_go


def _undominated(use: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Mask of the states no other state dominates (no more CPU, no more memory, no less value).

    Of states with equal resources one is kept. On a grid of the distinct CPU and memory values, the best value
    with no more of either is a running maximum; a state is dominated when the best value strictly below it in
    CPU or in memory is at least its own.
    """
    n = value.size
    if n <= 1:
        return np.ones(n, dtype=bool)
    cpu_key, cpu_rank = np.unique(np.round(use[:, 0], 9), return_inverse=True)
    mem_key, mem_rank = np.unique(np.round(use[:, 1], 6), return_inverse=True)
    cpu_rank, mem_rank = cpu_rank.ravel(), mem_rank.ravel()
    # One state per cell: the one of largest value.
    order = np.lexsort((-value, mem_rank, cpu_rank))
    cell = cpu_rank[order] * mem_key.size + mem_rank[order]
    first = np.r_[True, cell[1:] != cell[:-1]]
    keep = np.zeros(n, dtype=bool)
    kept = order[first]
    if cpu_key.size * mem_key.size <= _GRID_CELLS:
        grid = np.full((cpu_key.size, mem_key.size), -np.inf)
        grid[cpu_rank[kept], mem_rank[kept]] = value[kept]
        running = np.maximum.accumulate(np.maximum.accumulate(grid, axis=0), axis=1)
        below = np.full(grid.shape, -np.inf)
        below[1:, :] = running[:-1, :]
        below[:, 1:] = np.maximum(below[:, 1:], running[:, :-1])
        dominated = below[cpu_rank[kept], mem_rank[kept]] >= value[kept] - _VALUE_TOLERANCE
    else:
        # Equal CPU only: within a CPU group (memory ascending), dominated by a running maximum before it.
        c, v = cpu_rank[kept], value[kept]
        starts = np.r_[True, c[1:] != c[:-1]]
        group = np.cumsum(starts)
        lift = 2.0 * (np.ptp(v) + 1.0)
        running = np.maximum.accumulate(v + lift * group) - lift * group
        before = np.r_[-np.inf, running[:-1]]
        before[starts] = -np.inf
        dominated = before >= v - _VALUE_TOLERANCE
    keep[kept[~dominated]] = True
    return keep


def near_patterns(items: ItemTypes, prices: np.ndarray, floor_value: float, caps: np.ndarray,
                  limit: int) -> np.ndarray | None:
    """Every maximal pattern with ``a <= caps`` and ``prices . a >= floor_value``; None past ``limit`` of them.

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
        if reps.sum() > 20 * limit:
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
