"""Placement (fragmentation) and Synergy-OPT (paper section 4.1.2-4.1.3; SPEC 2.2-2.3).

- :mod:`~synergy_opt.placement.model`: the placement LP (a vertex splits at most ``3s`` jobs) and the exact
  min-split and integral-GPU MILPs;
- :mod:`~synergy_opt.placement.rounding`: the fractional placement turned into a deployable allocation;
- :mod:`~synergy_opt.placement.solve`: :func:`solve_placement` and :func:`solve_opt` (ideal ILP, then
  placement, then rounding).
"""

from synergy_opt.placement.model import PLACEMENT_KINDS, PlacementDemands, PlacementModel, build_placement
from synergy_opt.placement.rounding import RoundingReport, round_placement
from synergy_opt.placement.solve import OptResult, PlacementResult, placement_demands, solve_opt, solve_placement

__all__ = [
    "PLACEMENT_KINDS",
    "OptResult",
    "PlacementDemands",
    "PlacementModel",
    "PlacementResult",
    "RoundingReport",
    "build_placement",
    "placement_demands",
    "round_placement",
    "solve_opt",
    "solve_placement",
]
