"""near-opt never returns less than Synergy-TUNE on the same round; this bound often proves it without TUNE.

TUNE gives each job its best-case demand ``d_j`` (:mod:`~synergy_opt.mechanisms.demand`), the proportional
point, or a grid config lowered from one of those (demotion lowers CPU and memory only). So each job's
config is at most ``d_j`` or at most ``(c_p, m_p)`` in both resources, and its throughput is at most
``W_j(d_j)`` or its floor. Any such config is one of the ideal ILP's columns, or is dominated by one with no
more of either resource and no less throughput; that column is at most ``d_j`` or at most ``(c_p, m_p)`` too.
So TUNE's total is at most the ideal LP restricted, per job, to the columns at most ``d_j`` or at most
``(c_p, m_p)`` (componentwise), and the Lagrangian dual function of that LP at *any* prices bounds it (weak
duality). :func:`tune_bound` evaluates it at given prices (near-opt first tries the unrestricted LP's, which
it already has), or minimises it over the prices (the restricted LP's optimum, a few milliseconds). When
near-opt's own total reaches either, TUNE need not run.

Public API
----------
``TuneBound.of(table, cpu, mem)``: the restricted LP for best-case demands ``cpu``, ``mem`` per GPU (per job);
``.at(prices)`` and ``.minimum()`` its dual function at prices and its minimum.
``tune_bound(table, best_case_tolerance, prices=None) -> float``: the same from the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from synergy_opt.lagrangian import Knapsack, dual_value, solve_dual
from synergy_opt.mechanisms.configs import ConfigTable
from synergy_opt.mechanisms.demand import best_case_demands

_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class TuneBound:
    """The ideal LP restricted, per job, to the columns TUNE can reach (see the module docstring)."""

    restricted: Knapsack

    @classmethod
    def of(cls, table: ConfigTable, cpu: np.ndarray, mem: np.ndarray) -> TuneBound:
        """For best-case demands ``cpu``, ``mem`` per GPU, in job order."""
        cluster = table.instance.cluster
        # Per class, the demand of its first job (jobs of a class share their profile and GPU count).
        first = np.full(table.start.size - 1, -1)
        first[table.klass[::-1]] = np.arange(table.klass.size)[::-1]
        cap_cpu = cpu[first][table.col_class] * (1 + _TOLERANCE)
        cap_mem = mem[first][table.col_class] * (1 + _TOLERANCE)
        c_p, m_p = cluster.cpu_per_gpu * (1 + _TOLERANCE), cluster.mem_gb_per_gpu * (1 + _TOLERANCE)
        allowed = ((table.cpu <= cap_cpu) & (table.mem <= cap_mem)) | ((table.cpu <= c_p) & (table.mem <= m_p))
        knapsack = Knapsack.of(table.ideal)
        return cls(replace(knapsack, value=knapsack.value[allowed], cpu=knapsack.cpu[allowed],
                           mem=knapsack.mem[allowed], col_class=knapsack.col_class[allowed]))

    def at(self, prices: np.ndarray) -> float:
        """The restricted dual function at ``prices`` (per CPU, per GB): a bound on TUNE's total."""
        return dual_value(self.restricted, np.asarray(prices, dtype=float))[0]

    def minimum(self) -> float:
        """The restricted dual function's minimum (the restricted LP's optimum)."""
        return float(solve_dual(self.restricted).bound)


def tune_bound(table: ConfigTable, best_case_tolerance: float, prices: np.ndarray | None = None) -> float:
    """An upper bound on Synergy-TUNE's total on the round of ``table``: the restricted dual function at
    ``prices``, or its minimum when ``prices`` is None (see the module docstring)."""
    bound = TuneBound.of(table, *best_case_demands(table.instance, best_case_tolerance))
    return bound.minimum() if prices is None else bound.at(prices)
