"""near-opt's type choice on a type-free heterogeneous round: which GPU type each job runs on.

:func:`choose_types` takes the types of the type-free ideal ILP's optimum (:func:`synergy_opt.solve_ideal`):
the types the best super-machine allocation gives every job, within each type's GPUs, CPUs and memory.
"""

from __future__ import annotations

from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal import solve_ideal


def choose_types(instance: HeteroRound) -> list[str]:
    """A type per job (job order) that near-opt then allocates type by type; the baseline types when the ideal
    ILP ends without a solution."""
    ideal = solve_ideal(instance)
    return list(ideal.gpu_types) if ideal.has_solution else list(instance.baselines)
