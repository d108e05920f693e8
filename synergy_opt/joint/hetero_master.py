"""The master LP of a type-free joint model over server patterns of every type, by column generation (HJ7).

Columns: every (class, type, config, mode) of :func:`~synergy_opt.joint.hetero_model.type_shares`, and the
server loads of each type as pricing finds them. Rows: ``assign`` (each class's jobs once, across types),
``cover`` (per item type of each type: the loads hold what the columns ask for) and ``servers`` (per type,
``sum_p x_t[p] <= s_t``). Each type's loads are priced exactly by today's dynamic programme
(:func:`~synergy_opt.joint.pricing.best_patterns`) on that type's server.

Bound. For any prices ``pi >= 0`` of the cover rows every solution has value at most

    L(pi) = sum_q n_q max_{col of q, any type} (w_col - u_col pi_item(col)) + sum_t s_t max(0, max_a pi_t . a)

(price the cover rows into the objective: the columns decouple per class and the loads per server of each
type). The pricing gives the second term exactly, so ``L`` is valid at every round; at the LP's optimum it is
the LP's value, at most the type-free ideal ILP's bound (a load of a type fits its super-machine).
"""

from __future__ import annotations

import time

import numpy as np

from synergy_opt.hetero import HeteroRound
from synergy_opt.joint.model import ItemColumns
from synergy_opt.joint.pricing import ItemTypes, best_patterns

PATTERNS_PER_ROUND = 16
MAX_ROUNDS = 500
# Cost of an artificial job column (units of the largest weight): the first LP is feasible before any load is
# known; the bound L never counts these columns.
_ARTIFICIAL = 4.0
_TOLERANCE = 1e-9


class TypedMaster:
    """Column generation over the loads of every type of a type-free round (module docstring)."""

    def __init__(self, instance: HeteroRound, shares: list[tuple[int, ItemColumns, np.ndarray]],
                 class_count: np.ndarray) -> None:
        import highspy  # imported on use, as the backends are: importing the package loads no solver

        from synergy_opt.solvers.highs import quiet_highs  # highspy on first solve

        self.instance = instance
        self.class_count = class_count.astype(float)
        self.kinds = [k for k, _, _ in shares]
        self.items = [items for _, items, _ in shares]
        self.types = [ItemTypes(items.item_size, items.item_cpu, items.item_mem, instance.cluster.types[k].cluster)
                      for k, items, _ in shares]
        offsets = np.concatenate([[0], np.cumsum([items.item_size.size for items in self.items])]).astype(np.int64)
        self.item_offset = offsets
        col_class, col_item, weight, units, col_type = [], [], [], [], []
        for position, (k, items, owner) in enumerate(shares):
            cols = items.columns
            col_class.append(owner[cols.cls])
            col_item.append(items.col_item + offsets[position])
            weight.append(items.weight)
            units.append(items.units.astype(float))
            col_type.append(np.full(cols.cls.size, k))
        self.col_class = np.concatenate(col_class).astype(np.int64)
        self.col_item = np.concatenate(col_item).astype(np.int64)
        self.weight = np.concatenate(weight)
        self.units = np.concatenate(units)
        self.col_type = np.concatenate(col_type).astype(np.int64)
        self.servers = np.array([instance.cluster.types[k].servers for k in self.kinds], dtype=float)
        classes, items_total, kinds = class_count.size, int(offsets[-1]), len(self.kinds)
        self.rows = {"assign": np.arange(classes), "cover": classes + np.arange(items_total),
                     "servers": classes + items_total + np.arange(kinds)}
        inf = highspy.kHighsInf
        lp = quiet_highs()
        lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
        for option, setting in (("presolve", "off"), ("solver", "simplex")):
            lp.setOptionValue(option, setting)
        lower = np.concatenate([self.class_count, np.zeros(items_total), np.full(kinds, -inf)])
        upper = np.concatenate([self.class_count, np.full(items_total, inf), self.servers])
        lp.addRows(lower.size, lower, upper, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
        n = self.col_class.size
        starts = np.arange(0, 2 * n, 2, dtype=np.int32)
        index = np.column_stack([self.col_class, self.rows["cover"][self.col_item]]).ravel().astype(np.int32)
        value = np.column_stack([np.ones(n), -self.units]).ravel()
        lp.addCols(n, self.weight, np.zeros(n), self.class_count[self.col_class], 2 * n, starts, index, value)
        penalty = -_ARTIFICIAL * max(1.0, float(np.abs(self.weight).max(initial=1.0)))
        lp.addCols(classes, np.full(classes, penalty), np.zeros(classes), self.class_count, classes,
                   np.arange(classes, dtype=np.int32), np.arange(classes, dtype=np.int32), np.ones(classes))
        self.lp = lp
        self.patterns = 0
        self.bound = np.inf
        self.rounds = 0

    def add(self, position: int, loads: np.ndarray) -> None:
        """Load columns of the type at ``position`` (rows: loads over its item types)."""
        loads = np.atleast_2d(loads)
        p, t = np.nonzero(loads)
        count = loads.shape[0]
        server_row = self.rows["servers"][position]
        index, value, begin = [], [], []
        offset = 0
        for row in range(count):
            mine = p == row
            cover = self.rows["cover"][self.item_offset[position] + t[mine]]
            index.append(np.concatenate([cover, [server_row]]))
            value.append(np.concatenate([loads[row, t[mine]].astype(float), [1.0]]))
            begin.append(offset)
            offset += cover.size + 1
        self.lp.addCols(count, np.zeros(count), np.zeros(count), np.full(count, self.servers[position]), offset,
                        np.array(begin, dtype=np.int32), np.concatenate(index).astype(np.int32),
                        np.concatenate(value))
        self.patterns += count

    def bound_at(self, pi: np.ndarray) -> tuple[float, list[np.ndarray], list[float]]:
        """``L(pi)``, and per type the best loads and their value (the pricing problem's answer)."""
        pi = np.maximum(pi, 0.0)
        net = self.weight - self.units * pi[self.col_item]
        best = np.full(self.class_count.size, -np.inf)
        np.maximum.at(best, self.col_class, net)
        total = float(self.class_count @ best)
        loads, values = [], []
        for position, types in enumerate(self.types):
            local = pi[self.item_offset[position]:self.item_offset[position + 1]]
            priced = best_patterns(types, local, self.items[position].per_server, count=PATTERNS_PER_ROUND)
            loads.append(priced.patterns[priced.values > _TOLERANCE] if priced.values.size else priced.patterns[:0])
            values.append(priced.value)
            total += self.servers[position] * max(0.0, priced.value)
        return total, loads, values

    def run(self, deadline: float | None = None) -> float:
        """Column generation until no load prices out (the LP's optimum) or ``deadline``; returns the best
        bound seen."""
        from synergy_opt.solvers.highs import run  # highspy on first solve

        for _ in range(MAX_ROUNDS):
            self.rounds += 1
            run(self.lp, 1)
            solution = self.lp.getSolution()
            duals = np.array(solution.row_dual)
            pi = np.maximum(-duals[self.rows["cover"]], 0.0)
            sigma = np.maximum(duals[self.rows["servers"]], 0.0)
            bound, loads, values = self.bound_at(pi)
            self.bound = min(self.bound, bound)
            added = 0
            for position, (found, value) in enumerate(zip(loads, values, strict=True)):
                if value > sigma[position] * (1 + _TOLERANCE) + _TOLERANCE and found.size:
                    self.add(position, found)
                    added += 1
            if not added or (deadline is not None and time.perf_counter() > deadline):
                break
        return self.bound

    def type_mass(self) -> np.ndarray:
        """``(classes, cluster types)``: how much of each class the LP puts on each type."""
        x = np.array(self.lp.getSolution().col_value)[: self.col_class.size]
        mass = np.zeros((self.class_count.size, len(self.instance.cluster.types)))
        np.add.at(mass, (self.col_class, self.col_type), x)
        return mass
