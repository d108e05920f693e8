"""The moving classes of the type-free core search: the dynamic programme over the jobs that may change type.

At prices ``lam`` every class starts at its base column (of reduced cost 0). A *move* is a column of reduced cost
``<= threshold`` other than the base; a class is *moving* when its moves reach another type. This module takes
the moving classes' options step by step; each state is the change of all ``3T`` rows' use against the base
columns and its cost (reduced costs summed). Steps:

- a moving class with one move (of any count of alike jobs) joins the other such classes of the same change of
  use: one step takes the cheapest ``n`` of them (jobs of the same change are interchangeable, so that is exact
  and turns hundreds of classes into a few dozen steps at 16384 GPUs);
- a moving class with several moves is a step per job, its options the base and each move.

States with the same change keep the cheapest (every completion is the same for both). A state is dropped when
its GPUs cannot come back within capacity or its cost plus a lower bound on the cost still to come exceeds the
threshold. The bound splits each move's cost between the types it touches (half each; any split is valid, as the
parts add up to the cost) and sums, over types, the largest of three one-row bounds on that type's share: an exact
table of the cheapest way to bring its CPU use within capacity (the moving steps left and the staying classes of
that type), the same for its GPU use (the moving steps left), and the cheapest share per GB of memory (as the
homogeneous search's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from synergy_opt.ideal.core_search import CPU_WINDOW, cost_to_go, mem_bound, row_tolerance, table_bound
from synergy_opt.ideal.hetero_knapsack import TypedKnapsack
from synergy_opt.ideal.lagrangian import Dual

# Half-width of the GPU flow table per number of types (its size is the width to the power types - 1); more
# types than listed go without it.
FLOW_WINDOWS = {2: 128, 3: 24, 4: 8}


@dataclass(frozen=True)
class MoveStep:
    """Options of one step: the change of use of every row (option 0 changes nothing) and the cost."""

    delta: np.ndarray  # (options, 3T)
    cost: np.ndarray  # (options,)
    moves: np.ndarray  # the columns moved to
    cumulative: bool  # option o takes moves[:o] (alike moves, cheapest first); else moves[o - 1] alone

    def taken(self, option: int) -> np.ndarray:
        return self.moves[:option] if self.cumulative else self.moves[option - 1:option]


@dataclass(frozen=True)
class StayingOptions:
    """One type's staying classes, for the bounds: every move's CPU and memory change and cost, and the steps of
    the CPU table (a class with several moves is a step per job; classes of one move with the same CPU change are
    one step taking the cheapest ``n``, as :func:`move_steps` does)."""

    cpu: np.ndarray
    mem: np.ndarray
    cost: np.ndarray
    cpu_steps: list[tuple[np.ndarray, np.ndarray]]  # (CPU change, cost) per option, option 0 the base

    @classmethod
    def of(cls, knapsack: TypedKnapsack, dual: Dual, classes: np.ndarray, within: np.ndarray, threshold: float
           ) -> StayingOptions:
        base = dual.base_columns
        columns = np.flatnonzero(within & np.isin(knapsack.col_class, classes))
        columns = columns[columns != base[knapsack.col_class[columns]]]
        klass = knapsack.col_class[columns]
        home = base[klass]
        cpu, mem = knapsack.cpu[columns] - knapsack.cpu[home], knapsack.mem[columns] - knapsack.mem[home]
        cost = dual.reduced_cost[columns]
        moves = np.bincount(klass, minlength=knapsack.class_count.size)[klass]
        steps = []
        several = np.flatnonzero(moves > 1)  # columns are in class order
        cuts = np.flatnonzero(np.diff(klass[several])) + 1
        for mine in np.split(several, cuts) if several.size else []:
            option = (np.concatenate([[0.0], cpu[mine]]), np.concatenate([[0.0], cost[mine]]))
            steps += [option] * int(knapsack.class_count[klass[mine[0]]])
        single = np.flatnonzero(moves == 1)
        shifts, label = np.unique(np.round(cpu[single], 6), return_inverse=True)
        for index, shift in enumerate(shifts):
            members = single[label.ravel() == index]
            copies = np.sort(np.repeat(cost[members], knapsack.class_count[klass[members]].astype(np.int64)))
            total = np.r_[0.0, np.cumsum(copies)]
            total = total[:max(int(np.searchsorted(total, threshold, side="right")), 1)]
            steps.append((np.arange(total.size) * shift, total))
        return cls(cpu, mem, cost, steps)


@dataclass(frozen=True)
class MoveStates:
    """The states after every moving step: the change of use, the cost, and how to read each one back."""

    delta: np.ndarray  # (states, 3T)
    cost: np.ndarray
    trail: list[tuple[np.ndarray, np.ndarray]]  # per step: (parent state, option)
    complete: bool
    max_states: int

    def columns(self, steps: list[MoveStep], state: int) -> list[np.ndarray]:
        """The columns moved to by ``state``."""
        taken = []
        for step, (parent, option) in zip(reversed(steps), reversed(self.trail), strict=True):
            if option[state]:
                taken.append(step.taken(int(option[state])))
            state = int(parent[state])
        return taken


def move_steps(knapsack: TypedKnapsack, dual: Dual, moving: np.ndarray, threshold: float) -> list[MoveStep]:
    """The steps of the moving classes (``moving``: a mask over classes), the cheapest first move first."""
    rc = dual.reduced_cost
    base = dual.base_columns
    columns = np.flatnonzero((rc <= threshold) & moving[knapsack.col_class])
    columns = columns[columns != base[knapsack.col_class[columns]]]
    if not columns.size:
        return []
    klass = knapsack.col_class[columns]
    delta = knapsack.uses(columns) - knapsack.uses(base[klass])
    moves_of_class = np.bincount(klass, minlength=knapsack.class_count.size)
    steps = []
    alone = moves_of_class[klass] == 1
    # One move per class: alike changes of use together, each class as many copies as it has jobs.
    single = np.flatnonzero(alone)
    if single.size:
        _, signature = np.unique(np.round(delta[single], 6), axis=0, return_inverse=True)
        for label in range(int(signature.max()) + 1):
            members = single[signature.ravel() == label]
            copies = np.repeat(members, knapsack.class_count[klass[members]].astype(np.int64))
            copies = copies[np.argsort(rc[columns[copies]], kind="stable")]
            cost = np.r_[0.0, np.cumsum(rc[columns[copies]])]
            count = int(np.searchsorted(cost, threshold, side="right"))  # no more copies than fit the threshold
            steps.append(MoveStep(np.arange(count)[:, None] * delta[members[0]][None, :], cost[:count],
                                  columns[copies[:count - 1]], cumulative=True))
    for q in np.unique(klass[~alone]):
        mine = np.flatnonzero(klass == q)
        step = MoveStep(np.vstack([np.zeros(delta.shape[1]), delta[mine]]), np.r_[0.0, rc[columns[mine]]],
                        columns[mine], cumulative=False)
        steps.extend([step] * int(knapsack.class_count[q]))
    return sorted(steps, key=lambda step: step.cost[1] if step.cost.size > 1 else np.inf)


class MoveBounds:
    """Per step, a lower bound on the cost still to come (the module docstring)."""

    def __init__(self, knapsack: TypedKnapsack, lam: np.ndarray, steps: list[MoveStep],
                 staying: list[StayingOptions], room: np.ndarray) -> None:
        types = knapsack.types
        self.types, self.room, self.lam = types, room, lam
        self.tolerance = row_tolerance(knapsack.capacity)
        # GPUs: the least change of each type's GPU use still possible (feasibility only).
        least = np.zeros((len(steps) + 1, types))
        for index in range(len(steps) - 1, -1, -1):
            least[index] = least[index + 1] + steps[index].delta[:, :types].min(axis=0)
        self.gpu_low = least
        # The CPU tables need whole CPU changes (as profiled CPU axes give); else the CPU bound is 0.
        integral = all(np.array_equal(s.cpu, np.round(s.cpu)) for s in staying) and all(
            np.array_equal(step.delta[:, types:2 * types], np.round(step.delta[:, types:2 * types])) for step in steps)
        need = np.arange(-CPU_WINDOW, CPU_WINDOW + 1)
        self.cpu: list[np.ndarray | None] = []
        self.gpu: list[np.ndarray] = []
        self.mem_up, self.mem_down = [], []
        for kind, mine in enumerate(staying):
            share = [self._share(step, kind) for step in steps]
            # GPU changes are whole GPUs; only the moving steps change them.
            self.gpu.append(cost_to_go([step.delta[:, kind] for step in steps], share,
                                       np.where(need >= 0, lam[kind] * need, np.inf)))
            if integral:
                last = cost_to_go([change for change, _ in mine.cpu_steps], [cost for _, cost in mine.cpu_steps],
                                  np.where(need >= 0, lam[types + kind] * need, np.inf))[0]
                self.cpu.append(cost_to_go([step.delta[:, types + kind] for step in steps], share, last))
            else:
                self.cpu.append(None)
            up, down = _per_gb([mine.mem], [mine.cost])
            ups, downs = [up], [down]
            for step, cost in zip(reversed(steps), reversed(share), strict=True):
                up, down = _per_gb([step.delta[:, 2 * types + kind]], [cost])
                ups.append(min(ups[-1], up))
                downs.append(min(downs[-1], down))
            self.mem_up.append(np.array(ups[::-1]))
            self.mem_down.append(np.array(downs[::-1]))
        self.flow = GpuFlow(steps, lam[:types], room[:types]) if 1 < types <= max(FLOW_WINDOWS) else None

    def _share(self, step: MoveStep, kind: int) -> np.ndarray:
        """Each option's cost share of type ``kind``: half for each of the two types of a type change, all of it
        for a change within a type."""
        types = self.types
        touched = np.zeros((step.delta.shape[0], types), dtype=bool)
        for r in range(3):
            touched |= np.abs(step.delta[:, r * types:(r + 1) * types]) > 1e-9
        parts = np.maximum(touched.sum(axis=1), 1)
        return np.where(touched[:, kind], step.cost / parts, 0.0)

    def feasible(self, index: int, delta: np.ndarray) -> np.ndarray:
        """States whose GPU use can still come back within every type's capacity."""
        types = self.types
        return np.all(delta[:, :types] + self.gpu_low[index] <= self.room[:types] + self.tolerance[:types], axis=1)

    def lower(self, index: int, delta: np.ndarray) -> np.ndarray:
        """A lower bound on the cost still to come of states ``delta`` before step ``index``."""
        split = self.per_type(index, delta).sum(axis=1)
        return split if self.flow is None else np.maximum(split, self.flow.lower(index, delta))

    def per_type(self, index: int, delta: np.ndarray, gpu: bool = True) -> np.ndarray:
        """``(states, T)``: each type's part of :meth:`lower` (after the last step: of its staying classes).
        Without ``gpu``, the one-row bound of the GPU row is left out: after the last step it is the GPU slack
        itself, which a caller that has already counted that slack must not count again."""
        types, room, tol = self.types, self.room, self.tolerance
        parts = np.empty((delta.shape[0], types))
        for kind in range(types):
            cpu, mem = types + kind, 2 * types + kind
            by_cpu = table_bound(self.cpu[kind], index, room[cpu] - delta[:, cpu], tol[cpu])
            by_mem = mem_bound(room[mem] - delta[:, mem], self.mem_up[kind][index], self.mem_down[kind][index],
                               self.lam[mem], tol[mem])
            parts[:, kind] = np.maximum(by_cpu, by_mem)
            if gpu:
                parts[:, kind] = np.maximum(parts[:, kind],
                                            table_bound(self.gpu[kind], index, room[kind] - delta[:, kind], tol[kind]))
        return parts


class GpuFlow:
    """The cheapest way to bring every type's GPU use within capacity by the moving steps left, each move at its
    whole cost (no split), GPU slack priced: an exact table over the GPU needs of all types but the last (a
    move takes GPUs from one type to another, so the last type's need follows), within a window (0 outside)."""

    def __init__(self, steps: list[MoveStep], lam: np.ndarray, room: np.ndarray) -> None:
        types = lam.size
        self.window = FLOW_WINDOWS[types]
        self.room = np.rint(room).astype(np.int64)
        width = 2 * self.window + 1
        axes = np.meshgrid(*[np.arange(-self.window, self.window + 1)] * (types - 1), indexing="ij")
        need = np.stack(axes, axis=-1)  # the need of each type but the last, at each grid point
        last = self.room.sum() - need.sum(axis=-1)  # moves keep the total: the last type's need
        feasible = np.all(need >= 0, axis=-1) & (last >= 0)
        table = np.empty((len(steps) + 1,) + (width,) * (types - 1))
        table[-1] = np.where(feasible, need @ lam[:-1] + lam[-1] * last, np.inf)
        for index in range(len(steps) - 1, -1, -1):
            shifts = np.rint(steps[index].delta[:, :types - 1]).astype(np.int64)
            pad = int(min(np.abs(shifts).max(initial=0), width))
            padded = np.pad(table[index + 1], pad)  # 0 outside the window
            best = np.full(table.shape[1:], np.inf)
            for shift, cost in zip(np.clip(shifts, -pad, pad), steps[index].cost, strict=True):
                # table[index][x] = min over options of cost + table[index + 1][x - shift]
                view = padded[tuple(slice(pad - k, pad - k + width) for k in shift)]
                np.minimum(best, view + cost, out=best)
            table[index] = best
        self.table = table

    def lower(self, index: int, delta: np.ndarray) -> np.ndarray:
        types = self.room.size
        position = self.room[:-1] - np.rint(delta[:, :types - 1]).astype(np.int64) + self.window
        inside = np.all((position >= 0) & (position <= 2 * self.window), axis=1)
        clipped = np.clip(position, 0, 2 * self.window)
        return np.where(inside, self.table[index][tuple(clipped.T)], 0.0)


def _per_gb(mems: list[np.ndarray], costs: list[np.ndarray]) -> tuple[float, float]:
    """The least cost per GB of adding memory and of giving it back, over options."""
    if not mems:
        return np.inf, np.inf
    mem, cost = np.concatenate(mems), np.concatenate(costs)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (float(np.min(np.where(mem > 1e-9, cost / mem, np.inf), initial=np.inf)),
                float(np.min(np.where(mem < -1e-9, cost / -mem, np.inf), initial=np.inf)))


def move_states(steps: list[MoveStep], bounds: MoveBounds, threshold: float, *, beam: int | None = None,
                deadline: float | None = None, state_limit: int | None = None) -> MoveStates:
    """Every change of use the moving steps reach at cost within ``threshold`` (the module docstring); with
    ``beam``, only that many of the most promising states per step (a heuristic)."""
    width = bounds.room.size
    delta, cost = np.zeros((1, width)), np.zeros(1)
    trail: list[tuple[np.ndarray, np.ndarray]] = []
    max_states = 1

    def stopped() -> MoveStates:
        return MoveStates(np.zeros((0, width)), np.zeros(0), trail, False, max_states)

    for index, step in enumerate(steps):
        if deadline is not None and time.perf_counter() > deadline:
            return stopped()
        # Children within the threshold by cost alone first (the cheap test), then their change of use.
        within = np.flatnonzero((cost[:, None] + step.cost[None, :]).ravel() <= threshold)
        parent, option = np.divmod(within, step.cost.size)
        delta = delta[parent] + step.delta[option]
        cost = cost[parent] + step.cost[option]
        keep = np.flatnonzero(bounds.feasible(index + 1, delta))
        estimate = cost[keep] + bounds.lower(index + 1, delta[keep])
        keep = keep[estimate <= threshold]
        estimate = estimate[estimate <= threshold]
        keep, estimate = _cheapest_per_change(delta, cost, keep, estimate)
        if beam is not None and keep.size > beam:
            keep = keep[np.argpartition(estimate, beam)[:beam]]
        delta, cost = delta[keep], cost[keep]
        trail.append((parent[keep], option[keep]))
        max_states = max(max_states, cost.size)
        if state_limit is not None and cost.size > state_limit:
            return stopped()
        if not cost.size:
            break
    if len(trail) < len(steps):  # every state was dropped
        trail.extend((np.zeros(0, np.int64), np.zeros(0, np.int64)) for _ in range(len(steps) - len(trail)))
    return MoveStates(delta, cost, trail, True, max_states)


def _cheapest_per_change(delta: np.ndarray, cost: np.ndarray, keep: np.ndarray, estimate: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Of the states ``keep`` with the same change of use (to a micro-unit, so that sums taken in another order
    count as equal), the cheapest: its every completion is the same as theirs."""
    if keep.size < 2:
        return keep, estimate
    key = np.rint(delta[keep] * 1e6).astype(np.int64)
    # Sorted by a hash of the change, then by cost; a state is dropped when the one before has the same change
    # (compared in full, so a hash collision only keeps a state more). One int64 sort instead of one per row.
    with np.errstate(over="ignore"):
        hashed = (key * _mixers(key.shape[1])).sum(axis=1)
    order = np.lexsort((cost[keep], hashed))
    key = key[order]
    repeat = np.r_[False, np.all(key[1:] == key[:-1], axis=1)]
    chosen = order[~repeat]
    return keep[chosen], estimate[chosen]


def _mixers(width: int) -> np.ndarray:
    """Odd 64-bit multipliers, the same on every call (the search must not depend on a seed)."""
    return np.random.default_rng(0x5EED).integers(0, 2**62, size=width, dtype=np.int64) * 2 + 1
