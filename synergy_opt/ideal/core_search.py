"""Exact search over the *core* of the two-row knapsack: the jobs whose choice the prices leave open.

With multipliers ``lam`` (:mod:`synergy_opt.ideal.lagrangian`), a solution's penalty is its reduced costs plus its
priced slack, and both are >= 0. So a solution of penalty <= ``threshold`` uses only columns of reduced cost
<= ``threshold``: every job with one such column is fixed at it, and the rest (the core, a few dozen jobs
per thousand) are searched. The search is a dynamic programme over the core jobs whose states are the
change in CPU and memory use against the jobs' best-priced columns; a state is dropped when another with
the same CPU change, no more memory and no larger priced cost exists, or when its cost plus a lower bound
on the cost still to come exceeds the threshold. The bounds: an exact table of the cheapest way to bring
CPU use to capacity (CPU counts are integral), and the cheapest reduced cost per GB of memory. With
``beam`` set, only that many of the most promising states survive each step: a quick heuristic for a first
incumbent, not a proof.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from synergy_opt.ideal.lagrangian import Dual, Knapsack
from synergy_opt.solvers.base import SolveResult, Status

# Half-width of the exact CPU cost-to-go table; outside it the bound is 0 (still a valid bound).
CPU_WINDOW = 128
# Consecutive core jobs are searched together up to this many combinations of their options.
MAX_GROUP_OPTIONS = 32


@dataclass(frozen=True)
class CoreSolution:
    """Counts per column (the ILP's ``y``) and the penalty ``L(lam) - objective``."""

    y: np.ndarray
    penalty: float


class SearchDeadline(Exception):
    """A core method's time limit passed during a search (each core method catches it and returns its best)."""


def check_deadline(deadline: float | None) -> None:
    """Raise :class:`SearchDeadline` when ``deadline`` (a ``time.perf_counter`` time) has passed."""
    if deadline is not None and time.perf_counter() > deadline:
        raise SearchDeadline


def core_result(
    solver: str, value: np.ndarray, incumbent: CoreSolution | None, status: Status, bound: float | None,
    message: str, start: float, built: float,
) -> SolveResult:
    """A core method's outcome read like any backend's: the incumbent's objective ``value @ y`` (None without
    one), ``bound`` as given; ``start`` and ``built`` are the ``time.perf_counter()`` times the solve began and
    its knapsack was built."""
    return SolveResult(
        status=status, solver=solver, objective=None if incumbent is None else float(value @ incumbent.y),
        bound=bound, x=None if incumbent is None else incumbent.y, build_seconds=built - start,
        solve_seconds=time.perf_counter() - built, message=message, native_status=message,
    )


@dataclass(frozen=True)
class SearchOutcome:
    solution: CoreSolution | None  # the best solution of penalty <= threshold (any one found, with a beam)
    complete: bool  # False when the deadline or the state limit cut the search short
    core_jobs: int
    max_states: int


@dataclass(frozen=True)
class _Step:
    """One core job: its base column first, then its alternatives, as changes against the base."""

    columns: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True, eq=False)
class Core:
    """What every search at one threshold shares: the core's steps and the bounds on the cost still to come."""

    knapsack: Knapsack
    dual: Dual
    threshold: float
    steps: list[_Step]
    groups: list[_Group]
    ends: np.ndarray  # steps done after each group
    room: np.ndarray  # capacity left by the base columns
    cpu_to_go: np.ndarray | None
    mem_up: np.ndarray
    mem_down: np.ndarray

    @property
    def root_bound(self) -> float:
        """A lower bound on the penalty of every solution of penalty <= ``threshold``: CPU integrality alone."""
        return float(table_bound(self.cpu_to_go, 0, self.room[:1], row_tolerance(self.knapsack.capacity)[0])[0])


def prepare(knapsack: Knapsack, dual: Dual, threshold: float) -> Core:
    """The core of ``knapsack`` at ``threshold``, ready to search."""
    base = dual.base_columns
    steps = _core_steps(knapsack, dual, threshold)
    groups = _grouped(steps, MAX_GROUP_OPTIONS)
    counts = knapsack.class_count
    mem_up, mem_down = _mem_price_bounds(steps)
    return Core(
        knapsack=knapsack,
        dual=dual,
        threshold=threshold,
        steps=steps,
        groups=groups,
        ends=np.cumsum([len(group.steps) for group in groups], dtype=np.int64),
        room=knapsack.capacity - np.array([counts @ knapsack.cpu[base], counts @ knapsack.mem[base]]),
        cpu_to_go=_cpu_cost_to_go(groups, dual.multipliers[0]),
        mem_up=mem_up,
        mem_down=mem_down,
    )


def search(
    core: Core,
    *,
    beam: int | None = None,
    deadline: float | None = None,
    state_limit: int | None = None,
) -> SearchOutcome:
    """The best solution of penalty <= ``core.threshold`` (exact unless ``beam``), or None when there is none.

    The search stops incomplete when ``deadline`` (a ``time.perf_counter`` time) passes or a step keeps more
    than ``state_limit`` states."""
    found, complete, max_states = search_many(core, core.room[None, :], np.array([core.threshold]), beam=beam,
                                              deadline=deadline, state_limit=state_limit)
    return SearchOutcome(found[0] if complete else None, complete, len(core.steps), max_states)


def search_many(
    core: Core,
    rooms: np.ndarray,
    thresholds: np.ndarray,
    *,
    beam: int | None = None,
    deadline: float | None = None,
    state_limit: int | None = None,
) -> tuple[list[CoreSolution | None], bool, int]:
    """:func:`search` from several origins at once: origin ``o`` has ``rooms[o]`` (CPUs, GB) left by the base
    columns and its own threshold. One pass over the steps for all (each state remembers its origin, and states
    of different origins never dominate each other); ``beam`` keeps that many states per origin; ``state_limit``
    counts the states of all origins. Returns each origin's best solution (or None), whether the search
    completed, and the most states a step kept."""
    knapsack = core.knapsack
    lam = core.dual.multipliers
    tolerance = row_tolerance(knapsack.capacity)
    found: list[CoreSolution | None] = [None] * len(thresholds)
    origin = np.flatnonzero(table_bound(core.cpu_to_go, 0, rooms[:, 0], tolerance[0]) <= thresholds)
    if not origin.size:
        return found, True, 0
    room_cpu, room_mem, threshold = rooms[origin, 0], rooms[origin, 1], thresholds[origin]
    # A state's CPU change offset by its origin (more than twice any change apart): states of different origins
    # fall in different groups of the dominance test.
    offset = 4.0 * (np.abs(knapsack.cpu).max(initial=0.0) * knapsack.class_count.sum() + 1.0) if len(thresholds) > 1 \
        else 0.0

    cpu: np.ndarray = np.zeros(origin.size)
    mem: np.ndarray = np.zeros(origin.size)
    cost: np.ndarray = np.zeros(origin.size)
    start: np.ndarray = np.arange(origin.size)
    parent: np.ndarray
    choice: np.ndarray
    trail: list[tuple[np.ndarray, np.ndarray]] = []
    max_states = 1
    for index, (group, done) in enumerate(zip(core.groups, core.ends, strict=True)):
        if deadline is not None and time.perf_counter() > deadline:
            return found, False, max_states
        options = group.cpu.size
        cpu = (cpu[:, None] + group.cpu).ravel()
        mem = (mem[:, None] + group.mem).ravel()
        cost = (cost[:, None] + group.cost).ravel()
        parent = np.repeat(np.arange(cost.size // options), options)
        choice = np.tile(np.arange(options), cost.size // options)
        start = np.repeat(start, options)
        estimate = cost + np.maximum(
            table_bound(core.cpu_to_go, index + 1, room_cpu[start] - cpu, tolerance[0]),
            mem_bound(room_mem[start] - mem, core.mem_up[done], core.mem_down[done], lam[1], tolerance[1]),
        )
        keep = estimate <= threshold[start]
        cpu, mem, cost, parent, choice, estimate, start = (
            a[keep] for a in (cpu, mem, cost, parent, choice, estimate, start))
        _, mem, cost, parent, choice, estimate, cpu, start = _undominated(
            cpu + offset * start, mem, cost, parent, choice, estimate, cpu, start, lam=lam)
        if beam is not None:
            best = _best_per_origin(estimate, start, beam)
            cpu, mem, cost, parent, choice, start = (a[best] for a in (cpu, mem, cost, parent, choice, start))
        trail.append((parent, choice))
        max_states = max(max_states, cost.size)
        if state_limit is not None and cost.size > state_limit:
            return found, False, max_states
        if cost.size == 0:
            return found, True, max_states

    feasible = (cpu <= room_cpu[start] + tolerance[0]) & (mem <= room_mem[start] + tolerance[1])
    penalty = np.where(feasible, cost + lam[0] * (room_cpu[start] - cpu) + lam[1] * (room_mem[start] - mem), np.inf)
    order = np.lexsort((penalty, start))  # by origin, the least penalty first (ties: the first state)
    first = order[np.r_[True, start[order][1:] != start[order][:-1]]]
    for state in first:
        best_penalty = float(penalty[state])
        if not np.isfinite(best_penalty) or best_penalty > threshold[start[state]]:
            continue
        found[int(origin[start[state]])] = CoreSolution(_read_back(core, trail, int(state)), best_penalty)
    return found, True, max_states


def _best_per_origin(estimate: np.ndarray, start: np.ndarray, beam: int) -> np.ndarray:
    """The ``beam`` states of least estimate of each origin (all of them when there are fewer)."""
    if start.size <= beam:
        return np.arange(start.size)
    if not np.any(start != start[0]):  # one origin: as the single search always did
        return np.argpartition(estimate, beam)[:beam]
    order = np.lexsort((estimate, start))
    rank = np.arange(order.size) - np.searchsorted(start[order], start[order])
    return order[rank < beam]


def _read_back(core: Core, trail: list[tuple[np.ndarray, np.ndarray]], state: int) -> np.ndarray:
    """Counts per column of the solution ending in ``state``."""
    knapsack = core.knapsack
    y = np.zeros(knapsack.value.size)
    np.add.at(y, core.dual.base_columns, knapsack.class_count)
    for group, (parent, choice) in zip(reversed(core.groups), reversed(trail), strict=True):
        picks = [int(pick) for pick in np.unravel_index(int(choice[state]), group.shape)]
        for step, option in zip(group.steps, picks, strict=True):
            if option:
                y[step.columns[0]] -= 1
                y[step.columns[option]] += 1
        state = int(parent[state])
    return y


@dataclass(frozen=True)
class _Group:
    """Consecutive steps taken as one: every combination of their options (the last step varies fastest).

    Fewer, larger steps: the search's cost is mostly per step, not per state."""

    steps: tuple[_Step, ...]
    cpu: np.ndarray
    mem: np.ndarray
    cost: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(step.cpu.size for step in self.steps)


def _grouped(steps: list[_Step], max_options: int) -> list[_Group]:
    groups: list[_Group] = []
    members: list[_Step] = []
    combinations = 1
    for step in steps:
        if members and combinations * step.cpu.size > max_options:
            groups.append(_combined(members))
            members, combinations = [], 1
        members.append(step)
        combinations *= step.cpu.size
    if members:
        groups.append(_combined(members))
    return groups


def _combined(steps: list[_Step]) -> _Group:
    def outer(name: str) -> np.ndarray:
        total = getattr(steps[0], name)
        for step in steps[1:]:
            total = np.add.outer(total, getattr(step, name))
        return np.ravel(total)

    return _Group(tuple(steps), outer("cpu"), outer("mem"), outer("cost"))


def _undominated(cpu: np.ndarray, mem: np.ndarray, cost: np.ndarray, *rest: np.ndarray, lam: np.ndarray
                 ) -> tuple[np.ndarray, ...]:
    """Drop every state another one dominates: the same CPU change, no more memory, no larger priced cost.

    A state's penalty after any completion is ``cost - lam_m * mem`` plus terms the completion fixes, and
    less memory keeps every completion feasible; so among equal CPU changes, only states whose priced cost
    falls below that of every state with less memory can lead to a better solution.
    """
    if not cost.size:
        return (cpu, mem, cost, *rest)
    priced = cost - lam[1] * mem
    # Memory compared at a micro-GB, so that sums taken in another order count as equal.
    order = np.lexsort((priced, np.round(mem, 6), cpu))
    cpu, mem, cost, priced = cpu[order], mem[order], cost[order], priced[order]
    rest = tuple(a[order] for a in rest)
    starts_group = np.empty(cpu.size, dtype=bool)
    starts_group[0] = True
    np.not_equal(cpu[1:], cpu[:-1], out=starts_group[1:])
    group = np.cumsum(starts_group)
    # A running minimum restarted at each CPU group: lower each group far below the ones before it.
    drop = 2.0 * (np.ptp(priced) + 1.0)
    running = np.minimum.accumulate(priced - drop * group) + drop * group
    before = np.empty(cpu.size)
    before[1:] = running[:-1]
    before[starts_group] = np.inf
    keep = priced < before - 1e-12 * (1.0 + np.abs(priced))
    return (cpu[keep], mem[keep], cost[keep], *(a[keep] for a in rest))


def _core_steps(knapsack: Knapsack, dual: Dual, threshold: float) -> list[_Step]:
    """The core jobs (a class of ``n`` jobs gives ``n`` steps), those with a near-tie first.

    Near-tied jobs come first so that the per-GB price bound of the later steps does not see their ~0 cost.
    """
    rc = dual.reduced_cost
    within = rc <= threshold
    is_open = np.add.reduceat(within.astype(np.int64), knapsack.starts) >= 2
    columns = np.flatnonzero(within & is_open[knapsack.col_class])
    if not columns.size:
        return []
    klass = knapsack.col_class[columns]
    home = dual.base_columns[klass]
    # Within each class, its base column first.
    order = np.lexsort((columns != home, klass))
    columns, klass, home = columns[order], klass[order], home[order]
    cut = np.flatnonzero(klass[1:] != klass[:-1]) + 1
    parts = [
        np.split(values, cut)
        for values in (columns, knapsack.cpu[columns] - knapsack.cpu[home],
                       knapsack.mem[columns] - knapsack.mem[home], rc[columns])
    ]
    first_alternative = np.minimum.reduceat(np.where(columns == home, np.inf, rc[columns]), np.r_[0, cut])
    repeats = knapsack.class_count[klass[np.r_[0, cut]]].astype(np.int64)
    steps = [_Step(*fields) for fields in zip(*parts, strict=True)]
    ranked = np.argsort(first_alternative, kind="stable")
    return [steps[i] for i in ranked for _ in range(repeats[i])]


def _cpu_cost_to_go(groups: list[_Group], lam_cpu: float) -> np.ndarray | None:
    """``table[g, need + W]``: least cost of groups ``g..`` to add ``need`` CPUs or less, CPU slack priced.

    Exact within the window when every CPU change is integral (as for profiled CPU axes); otherwise there is
    no table. Outside the window the table reads 0, so it is a lower bound everywhere.
    """
    if not any(group.cpu.any() for group in groups):
        return None  # no CPU changes (or the CPU row relaxed away): the bound would be 0 everywhere
    if not all(np.array_equal(group.cpu, np.round(group.cpu)) for group in groups):
        return None
    need = np.arange(-CPU_WINDOW, CPU_WINDOW + 1)
    return cost_to_go([group.cpu for group in groups], [group.cost for group in groups],
                      np.where(need >= 0, lam_cpu * need, np.inf))


def cost_to_go(changes: list[np.ndarray], costs: list[np.ndarray], last: np.ndarray) -> np.ndarray:
    """``table[g, need + W]`` (``W = CPU_WINDOW``): least cost of steps ``g..``, each taking one of its options
    (integral ``changes`` of one row, ``costs``), to add ``need`` or less to that row, then ``last[need + W]``.
    A step whose change leaves the window reads 0 there (a lower bound)."""
    width = 2 * CPU_WINDOW + 1
    shifts = [np.round(change).astype(np.int64) for change in changes]
    pad = min(int(max((np.abs(shift).max(initial=0) for shift in shifts), default=0)), width)
    table = np.empty((len(shifts) + 1, width))
    table[-1] = last
    padded = np.zeros(width + 2 * pad)  # 0 outside the window
    positions = np.arange(width) + pad
    for index in range(len(shifts) - 1, -1, -1):
        padded[pad:pad + width] = table[index + 1]
        # table[index][need] = min over options of cost + table[index + 1][need - change]
        gathered = padded[positions[None, :] - np.clip(shifts[index], -pad, pad)[:, None]]
        table[index] = (gathered + costs[index][:, None]).min(axis=0)
    return table


def table_bound(table: np.ndarray | None, index: int, need: np.ndarray, tolerance: float) -> np.ndarray:
    """The table read at ``need`` rounded *down*: the changes are whole CPUs, so a fractional ``need`` (a
    capacity or base use off the integers) keeps its fraction to the end, where the slack it leaves costs at
    least the table's whole part (rounding to nearest would over-charge it and cut off real solutions). A need
short by at most ``tolerance`` counts as met, as the search's final feasibility test does."""
    if table is None:
        return np.zeros(need.size)
    position = np.floor(need + tolerance).astype(np.int64) + CPU_WINDOW
    inside = (position >= 0) & (position < table.shape[1])
    return np.where(inside, table[index, np.clip(position, 0, table.shape[1] - 1)], 0.0)


def row_tolerance(capacity: np.ndarray) -> np.ndarray:
    """Per row of ``capacity``, how far over it a use still counts as within it (float rounding, and the packing's
    FIT_TOLERANCE: the joint's patterns and TUNE place a config that far over, so the bound must allow it; 1e-12
    made a helper's round's joint 17% above the ideal ILP). The heterogeneous searches' rows alike."""
    return 1e-9 * np.maximum(1.0, np.abs(capacity))


def _mem_price_bounds(steps: list[_Step]) -> tuple[np.ndarray, np.ndarray]:
    """Per suffix of steps, the least cost per GB of adding memory, and of giving memory back."""
    if not steps:
        return np.full(1, np.inf), np.full(1, np.inf)
    mem = np.concatenate([step.mem for step in steps])
    cost = np.concatenate([step.cost for step in steps])
    starts = np.cumsum([0] + [step.mem.size for step in steps[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.minimum.reduceat(np.where(mem > 0, cost / mem, np.inf), starts)
        down = np.minimum.reduceat(np.where(mem < 0, cost / -mem, np.inf), starts)

    def suffix_min(values: np.ndarray) -> np.ndarray:
        return np.r_[np.minimum.accumulate(values[::-1])[::-1], np.inf]

    return suffix_min(up), suffix_min(down)


def mem_bound(need: np.ndarray, up: float, down: float, lam_mem: float, tolerance: float) -> np.ndarray:
    """Least cost still to come for memory: fill ``need`` GB (or price it as slack), or give back ``-need``."""
    fill = np.maximum(need, 0.0) * min(up, lam_mem)
    with np.errstate(invalid="ignore"):
        give_back = np.where(np.isfinite(down), -need * down, np.inf)
    return np.where(need >= -tolerance, fill, give_back)
