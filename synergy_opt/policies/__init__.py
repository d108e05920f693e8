"""Heterogeneity-aware scheduling policies (Gavel, OSDI '20) as formulations with interchangeable solvers.

Each policy gives every job a time fraction on each GPU type, by an LP on the toolkit's neutral model (any LP
backend of :mod:`synergy_opt.solvers`); :mod:`synergy_opt.policies.rounds` turns the fractions into whole-GPU
allocations round by round, as Gavel's scheduler does. The exact forms: formulations/policies.md.
"""

from synergy_opt.policies.finish_time import solve_finish_time_fairness
from synergy_opt.policies.hierarchy import Entities
from synergy_opt.policies.linear import solve_makespan, solve_max_sum_throughput
from synergy_opt.policies.max_min import build_max_min_fairness, solve_max_min_fairness
from synergy_opt.policies.problem import PolicyProblem
from synergy_opt.policies.result import PolicyResult
from synergy_opt.policies.water_filling import solve_water_filling

__all__ = [
    "Entities",
    "PolicyProblem",
    "PolicyResult",
    "build_max_min_fairness",
    "solve_finish_time_fairness",
    "solve_makespan",
    "solve_max_min_fairness",
    "solve_max_sum_throughput",
    "solve_water_filling",
]
