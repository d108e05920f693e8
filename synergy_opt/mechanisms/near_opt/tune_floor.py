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
``tune_bound(table, best_case_tolerance, prices=None) -> float``
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from synergy_opt.lagrangian import Knapsack, dual_value, solve_dual
from synergy_opt.mechanisms.configs import ConfigTable
from synergy_opt.mechanisms.demand import best_case_demands

_TOLERANCE = 1e-9


def tune_bound(table: ConfigTable, best_case_tolerance: float, prices: np.ndarray | None = None) -> float:
    """An upper bound on Synergy-TUNE's total on the round of ``table``: the restricted dual function at
    ``prices``, or its minimum when ``prices`` is None (see the module docstring)."""
    instance = table.instance
    cluster = instance.cluster
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    # Per class, the demand of its first job (jobs of a class share their profile and GPU count).
    first = np.full(table.start.size - 1, -1)
    first[table.klass[::-1]] = np.arange(table.klass.size)[::-1]
    cap_cpu = cpu[first][table.col_class] * (1 + _TOLERANCE)
    cap_mem = mem[first][table.col_class] * (1 + _TOLERANCE)
    c_p, m_p = cluster.cpu_per_gpu * (1 + _TOLERANCE), cluster.mem_gb_per_gpu * (1 + _TOLERANCE)
    allowed = ((table.cpu <= cap_cpu) & (table.mem <= cap_mem)) | ((table.cpu <= c_p) & (table.mem <= m_p))
    knapsack = Knapsack.of(table.ideal)
    restricted = replace(knapsack, value=knapsack.value[allowed], cpu=knapsack.cpu[allowed],
                         mem=knapsack.mem[allowed], col_class=knapsack.col_class[allowed])
    if prices is None:
        return float(solve_dual(restricted).bound)
    return dual_value(restricted, np.asarray(prices, dtype=float))[0]
