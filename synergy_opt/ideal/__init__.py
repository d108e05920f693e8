"""The ideal-allocation ILP (paper section 4.1.1, eqs. 1-7; SPEC 2.1): one super-machine, one config per job.

- :mod:`~synergy_opt.ideal.model`: the vectorised builder (:func:`build_ideal`) with its exact reductions;
- :mod:`~synergy_opt.ideal.solve`: :func:`solve_ideal` on any backend, or by the core method;
- :mod:`~synergy_opt.ideal.lagrangian`: prices of the two coupling rows (the LP relaxation's dual);
- :mod:`~synergy_opt.ideal.core_search`: the exact search over the jobs the prices leave open;
- :mod:`~synergy_opt.ideal.core`: the core method, an incumbent and its proof (``method="core"``).
"""

from synergy_opt.ideal.model import OBJECTIVES, IdealModel, Objective, Reductions, build_ideal
from synergy_opt.ideal.solve import METHODS, IdealResult, JobConfig, solve_ideal

__all__ = [
    "METHODS",
    "OBJECTIVES",
    "IdealModel",
    "IdealResult",
    "JobConfig",
    "Objective",
    "Reductions",
    "build_ideal",
    "solve_ideal",
]
