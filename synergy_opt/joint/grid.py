"""The pricing problem on an integer grid: a dense dynamic programme over (GPUs, CPU units, memory units).

Every server load of the toolkit's rounds has whole GPUs, CPUs that are multiples of a small unit and memory
that is (to within a few parts in 10^4) a multiple of one too, so the loads' resource sums lie on a small grid
(17 x 49 x 49 cells for a server of 16 GPUs, 48 CPUs and 1000 GB). :func:`integer_grid` finds units in which
"fits a server" is *exactly* the integer test: each item's need is rounded up to whole units (a load that fits
on the grid fits the server) and the capacity is taken down to whole units, checked so that no load that fits
the server is lost (the rounding errors of a full server's items stay below the capacity's last unit). On such a
grid the best load is a bounded knapsack by dense arrays (:func:`grid_patterns`): item types one after another,
each cell the best value of a load with exactly those sums, so it is exact whatever the prices, and costs a
few array passes per item type instead of the state lists of :func:`~synergy_opt.joint.pricing.best_patterns`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

# Most cells of a grid (beyond it the list DP is used).
GRID_CELLS = 300_000
# Units tried per resource: each distinct need divided by 1..UNIT_DIVISORS.
UNIT_DIVISORS = 12
# Needs this close above a whole number of units count as that number (sums taken in another order).
_SNAP = 1e-9


@dataclass(frozen=True, eq=False)
class Grid:
    """Item types' needs in whole units (``(types, 3)``: GPUs, CPU units, memory units) and the grid's shape
    (capacity in units plus one, per resource)."""

    need: np.ndarray
    shape: tuple[int, int, int]


def integer_grid(need: np.ndarray, capacity: np.ndarray, limit: int = GRID_CELLS) -> Grid | None:
    """The coarsest integer grid on which "a load fits" is exact (module docstring), or None (no such unit among
    those tried, or more than ``limit`` cells). ``need``: ``(types, 3)`` per item (GPUs, CPUs, GB);
    ``capacity``: per server (the GPUs a whole number)."""
    gpus = round(float(capacity[0]))
    if gpus < 1 or np.any(np.abs(need[:, 0] - np.rint(need[:, 0])) > 1e-9) or np.any(need[:, 0] < 1):
        return None
    most = gpus  # every item takes a GPU: no load holds more items
    units = [np.rint(need[:, 0]).astype(np.int64)]
    sizes = [gpus + 1]
    for r in (1, 2):
        found = _units(need[:, r], float(capacity[r]), most)
        if found is None:
            return None
        units.append(found[0])
        sizes.append(found[1] + 1)
    if int(np.prod(sizes)) > limit:
        return None
    return Grid(np.stack(units, axis=1), (sizes[0], sizes[1], sizes[2]))


def _units(need: np.ndarray, capacity: float, most: int) -> tuple[np.ndarray, int] | None:
    """Needs in whole units (rounded up) and the capacity in units (rounded down) for the coarsest unit that keeps
    the test exact for every load of at most ``most`` items, or None.

    With ``x = need / u`` rounded up to ``n`` (``n >= x - snap``) and ``K = floor(cap / u - most snap)``: a load
    with ``sum n <= K`` has ``sum x <= cap / u`` (it fits); a load that fits has ``sum n <= cap / u + E`` with
    ``E`` the most the roundings can add over ``most`` items, so ``sum n <= K`` as soon as ``cap / u + E < K + 1``.
    """
    positive = np.unique(need[need > 0])
    if not positive.size:
        return np.zeros(need.size, dtype=np.int64), 0
    best: tuple[np.ndarray, int] | None = None
    for value in positive:
        for divisor in range(1, UNIT_DIVISORS + 1):
            unit = float(value) / divisor
            x = need / unit
            rounded = np.ceil(x - _SNAP)
            levels = capacity / unit
            top = float(np.floor(levels - most * _SNAP))
            excess = most * float(np.max(rounded - x))
            if top < 0 or levels + excess >= top + 1:
                continue
            if best is None or top < best[1]:
                best = (rounded.astype(np.int64), int(top))
            break  # finer units of this value only grow the grid
    return best


def grid_patterns(grid: Grid, value: np.ndarray, caps: np.ndarray, pay: np.ndarray | None, count: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` best loads (``(k, types)``) and their values: ``max sum_t value_t a_t + pay[t, a_t]`` over
    loads on the grid with ``a <= caps`` (``pay[t, n]``: what the ``n``-th item of type ``t`` adds beyond its
    value, the branch rows' bonus; None: nothing). Types of zero cap or none worth adding are the caller's to
    leave out (their cap 0). Exact: each cell keeps the best value of the loads with exactly its sums. The
    programme is one compiled loop (:func:`_dp`); each cell takes ``n`` items of a type only when that is strictly
    better than fewer, so ties go to the fewest, as the array passes it replaced."""
    shape = grid.shape
    order = np.flatnonzero(caps > 0)
    extra = np.zeros((caps.size, 1)) if pay is None else np.asarray(pay, dtype=float)
    need = grid.need.astype(np.int64)
    table, choices = _dp(shape[0], shape[1], shape[2], need, order, caps.astype(np.int64), value.astype(float),
                         extra, pay is not None)
    top_cells = _best_cells(table.ravel(), count)
    loads = _back(top_cells, shape[1], shape[2], need[order], order, choices, caps.size)
    return loads, table.ravel()[top_cells]


@njit(cache=True)
def _best_cells(flat: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` finite cells of most value, best first, ties in cell order (a stable sort's)."""
    if count <= 0:  # nothing wanted (the loop below would write before the start)
        return np.empty(0, dtype=np.int64)
    cells = np.empty(count, dtype=np.int64)
    worth = np.empty(count)
    size = 0
    for cell in range(flat.size):
        v = flat[cell]
        if not np.isfinite(v) or (size == count and not v > worth[size - 1]):
            continue
        at = size if size < count else count - 1
        while at > 0 and v > worth[at - 1]:
            if at < count:
                cells[at], worth[at] = cells[at - 1], worth[at - 1]
            at -= 1
        cells[at], worth[at] = cell, v
        size = min(size + 1, count)
    return cells[:size]


@njit(cache=True)
def _dp(g_size: int, c_size: int, m_size: int, need_all: np.ndarray, order: np.ndarray, caps: np.ndarray,
        value: np.ndarray, pay: np.ndarray, paid: bool) -> tuple[np.ndarray, np.ndarray]:
    """The dense bounded knapsack: item types one after another; ``table`` the best value of each cell's sums,
    ``choices[k]`` how many of the k-th type the best load of each cell takes. ``worth[k, n]``: the value of ``n``
    items of the k-th type, summed item by item (``pay`` added when ``paid``)."""
    sizes = (g_size, c_size, m_size)
    need = need_all[order]
    most = np.zeros(order.size, dtype=np.int64)
    for k in range(order.size):
        top = caps[order[k]]
        for r in range(3):
            if need[k, r]:
                top = min(top, (sizes[r] - 1) // need[k, r])
        most[k] = top
    worth = np.zeros((order.size, (most.max() if order.size else 0) + 1))
    for k in range(order.size):
        total = 0.0
        for n in range(1, most[k] + 1):
            total += value[order[k]] + (pay[order[k], n] if paid else 0.0)
            worth[k, n] = total
    table = np.full((g_size, c_size, m_size), -np.inf)
    table[0, 0, 0] = 0.0
    choices = np.zeros((need.shape[0], g_size, c_size, m_size), dtype=np.uint16)
    for k in range(need.shape[0]):
        g, c, m = need[k, 0], need[k, 1], need[k, 2]
        grown = table.copy()
        choice = choices[k]
        # Pushed from the cells reached so far (a third to a half of the grid): each target keeps the best value
        # and, among equal values, the fewest items (none when the cell's own value is as good), as pulling the
        # counts in increasing order with strict improvements does.
        for i in range(g_size):
            for j in range(c_size):
                for h in range(m_size):
                    base = table[i, j, h]
                    if base == -np.inf:
                        continue
                    for n in range(1, most[k] + 1):
                        a, b, e = i + n * g, j + n * c, h + n * m
                        if a >= g_size or b >= c_size or e >= m_size:
                            break
                        source = base + worth[k, n]
                        held = grown[a, b, e]
                        if source > held or (source == held and choice[a, b, e] != 0 and n < choice[a, b, e]):
                            grown[a, b, e] = source
                            choice[a, b, e] = n
        table = grown
    return table, choices


@njit(cache=True)
def _back(cells: np.ndarray, c_size: int, m_size: int, need: np.ndarray, order: np.ndarray, choices: np.ndarray,
          types: int) -> np.ndarray:
    """The loads of the given cells, read back through the choices from the last type to the first."""
    loads = np.zeros((cells.size, types), dtype=np.int64)
    for row in range(cells.size):
        cell = cells[row]
        i, rest = cell // (c_size * m_size), cell % (c_size * m_size)
        j, h = rest // m_size, rest % m_size
        for k in range(order.size - 1, -1, -1):
            n = np.int64(choices[k, i, j, h])
            if n:
                loads[row, order[k]] = n
                i, j, h = i - n * need[k, 0], j - n * need[k, 1], h - n * need[k, 2]
    return loads
