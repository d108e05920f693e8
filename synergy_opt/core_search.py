"""Exact search over the *core* of the two-row knapsack: the jobs whose choice the prices leave open.

With multipliers ``lam`` (:mod:`synergy_opt.lagrangian`), a solution's penalty is its reduced costs plus its
priced slack, and both are >= 0. So a solution of penalty <= ``threshold`` uses only columns of reduced cost
<= ``threshold``: every job with one such column is fixed at it, and the rest (the core, a few dozen jobs
per thousand) are searched. The search is a dynamic programme over the core jobs whose states are the
change in CPU and memory use against the jobs' best-priced columns; states with the same change keep the
cheaper, and a state is dropped when its cost plus a lower bound on the cost still to come exceeds the
threshold. The bounds: an exact table of the cheapest way to bring CPU use to capacity (CPU counts are
integral), and the cheapest reduced cost per GB of memory. With ``beam`` set, only that many of the most
promising states survive each step: a quick heuristic for a first incumbent, not a proof.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from synergy_opt.lagrangian import Dual, Knapsack

# Half-width of the exact CPU cost-to-go table; outside it the bound is 0 (still a valid bound).
CPU_WINDOW = 1024


@dataclass(frozen=True)
class CoreSolution:
    """Counts per column (the ILP's ``y``) and the penalty ``L(lam) - objective``."""

    y: np.ndarray
    penalty: float


@dataclass(frozen=True)
class SearchOutcome:
    solution: CoreSolution | None  # the best solution of penalty <= threshold (any one found, with a beam)
    complete: bool  # False when the deadline cut the search short
    core_jobs: int
    max_states: int


@dataclass(frozen=True)
class _Step:
    """One core job: its base column first, then its alternatives, as changes against the base."""

    columns: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    cost: np.ndarray


def search(
    knapsack: Knapsack,
    dual: Dual,
    threshold: float,
    *,
    beam: int | None = None,
    deadline: float | None = None,
) -> SearchOutcome:
    """The best solution of penalty <= ``threshold`` (exact unless ``beam``), or None when there is none."""
    base = dual.base_columns(knapsack)
    steps = _core_steps(knapsack, dual, base, threshold)
    counts = knapsack.class_count
    room = knapsack.capacity - np.array([counts @ knapsack.cpu[base], counts @ knapsack.mem[base]])
    lam = dual.multipliers
    tolerance = 1e-9 * np.maximum(1.0, np.abs(knapsack.capacity))
    cpu_to_go = _cpu_cost_to_go(steps, lam[0])
    mem_up, mem_down = _mem_price_bounds(steps)

    cpu, mem, cost = np.zeros(1), np.zeros(1), np.zeros(1)
    trail: list[tuple[np.ndarray, np.ndarray]] = []
    max_states = 1
    for index, step in enumerate(steps):
        if deadline is not None and time.perf_counter() > deadline:
            return SearchOutcome(None, False, len(steps), max_states)
        options = step.cpu.size
        cpu = (cpu[:, None] + step.cpu).ravel()
        mem = (mem[:, None] + step.mem).ravel()
        cost = (cost[:, None] + step.cost).ravel()
        parent = np.repeat(np.arange(cost.size // options), options)
        choice = np.tile(np.arange(options), cost.size // options)
        estimate = cost + np.maximum(
            _table_bound(cpu_to_go, index + 1, room[0] - cpu),
            _mem_bound(room[1] - mem, mem_up[index + 1], mem_down[index + 1], lam[1], tolerance[1]),
        )
        keep = estimate <= threshold
        cpu, mem, cost, parent, choice, estimate = (a[keep] for a in (cpu, mem, cost, parent, choice, estimate))
        # One state per change of use: the cheapest (memory compared at a micro-GB to absorb rounding).
        mem_key = np.round(mem, 6)
        order = np.lexsort((cost, mem_key, cpu))
        cpu, mem, mem_key, cost, parent, choice, estimate = (
            a[order] for a in (cpu, mem, mem_key, cost, parent, choice, estimate)
        )
        first = np.ones(cost.size, dtype=bool)
        first[1:] = (cpu[1:] != cpu[:-1]) | (mem_key[1:] != mem_key[:-1])
        cpu, mem, cost, parent, choice, estimate = (a[first] for a in (cpu, mem, cost, parent, choice, estimate))
        if beam is not None and cost.size > beam:
            best = np.argpartition(estimate, beam)[:beam]
            cpu, mem, cost, parent, choice = (a[best] for a in (cpu, mem, cost, parent, choice))
        trail.append((parent, choice))
        max_states = max(max_states, cost.size)
        if cost.size == 0:
            return SearchOutcome(None, True, len(steps), max_states)

    feasible = (cpu <= room[0] + tolerance[0]) & (mem <= room[1] + tolerance[1])
    penalty = np.where(feasible, cost + lam[0] * (room[0] - cpu) + lam[1] * (room[1] - mem), np.inf)
    state = int(np.argmin(penalty))
    if not np.isfinite(penalty[state]) or penalty[state] > threshold:
        return SearchOutcome(None, True, len(steps), max_states)
    y = np.zeros(knapsack.value.size)
    np.add.at(y, base, counts)
    for step, (parent, choice) in zip(reversed(steps), reversed(trail), strict=True):
        option = int(choice[state])
        if option:
            y[step.columns[0]] -= 1
            y[step.columns[option]] += 1
        state = int(parent[state])
    return SearchOutcome(CoreSolution(y, float(penalty.min())), True, len(steps), max_states)


def _core_steps(knapsack: Knapsack, dual: Dual, base: np.ndarray, threshold: float) -> list[_Step]:
    """The core jobs (a class of ``n`` jobs gives ``n`` steps), those with a near-tie first.

    Near-tied jobs come first so that the per-GB price bound of the later steps does not see their ~0 cost.
    """
    rc = dual.reduced_cost
    within = rc <= threshold
    open_classes = np.flatnonzero(np.add.reduceat(within.astype(np.int64), knapsack.starts) >= 2)
    steps: list[tuple[float, _Step]] = []
    for klass in open_classes:
        home = base[klass]
        columns = np.arange(knapsack.starts[klass], knapsack.ends[klass])
        columns = np.concatenate([[home], columns[within[columns] & (columns != home)]])
        step = _Step(
            columns=columns,
            cpu=knapsack.cpu[columns] - knapsack.cpu[home],
            mem=knapsack.mem[columns] - knapsack.mem[home],
            cost=rc[columns] - rc[home],
        )
        steps.extend((float(step.cost[1:].min()), step) for _ in range(int(knapsack.class_count[klass])))
    steps.sort(key=lambda pair: pair[0])
    return [step for _, step in steps]


def _cpu_cost_to_go(steps: list[_Step], lam_cpu: float) -> np.ndarray | None:
    """``table[i, need + W]``: least cost of steps ``i..`` to add ``need`` CPUs or less, CPU slack priced.

    Exact when every CPU change is integral (as for profiled CPU axes); otherwise there is no table.
    """
    if not all(np.array_equal(step.cpu, np.round(step.cpu)) for step in steps):
        return None
    width = 2 * CPU_WINDOW + 1
    need = np.arange(-CPU_WINDOW, CPU_WINDOW + 1)
    table = np.empty((len(steps) + 1, width))
    table[-1] = np.where(need >= 0, lam_cpu * need, np.inf)
    for index in range(len(steps) - 1, -1, -1):
        after, row = table[index + 1], np.full(width, np.inf)
        step = steps[index]
        for change, cost in zip(np.round(step.cpu).astype(np.int64), step.cost, strict=True):
            shifted = np.zeros(width)  # after[need - change]; 0 where that falls outside the window
            if change >= 0:
                shifted[change:] = after[: width - change]
            else:
                shifted[:change] = after[-change:]
            np.minimum(row, shifted + cost, out=row)
        table[index] = row
    return table


def _table_bound(table: np.ndarray | None, index: int, need: np.ndarray) -> np.ndarray:
    if table is None:
        return np.zeros(need.size)
    position = np.round(need).astype(np.int64) + CPU_WINDOW
    inside = (position >= 0) & (position < table.shape[1])
    return np.where(inside, table[index, np.clip(position, 0, table.shape[1] - 1)], 0.0)


def _mem_price_bounds(steps: list[_Step]) -> tuple[np.ndarray, np.ndarray]:
    """Per suffix of steps, the least cost per GB of adding memory, and of giving memory back."""
    up = np.full(len(steps) + 1, np.inf)
    down = np.full(len(steps) + 1, np.inf)
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        more, less = step.mem > 0, step.mem < 0
        up[index] = min(up[index + 1], (step.cost[more] / step.mem[more]).min(initial=np.inf))
        down[index] = min(down[index + 1], (step.cost[less] / -step.mem[less]).min(initial=np.inf))
    return up, down


def _mem_bound(need: np.ndarray, up: float, down: float, lam_mem: float, tolerance: float) -> np.ndarray:
    """Least cost still to come for memory: fill ``need`` GB (or price it as slack), or give back ``-need``."""
    fill = np.maximum(need, 0.0) * min(up, lam_mem)
    with np.errstate(invalid="ignore"):
        give_back = np.where(np.isfinite(down), -need * down, np.inf)
    return np.where(need >= -tolerance, fill, give_back)
