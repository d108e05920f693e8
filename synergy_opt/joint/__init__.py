"""The joint exact MILP (SPEC 2.4): per-GPU configs and integral placement chosen together.

- :mod:`~synergy_opt.joint.model`: the reduced model (patterns or servers formulation) and its decoding;
- :mod:`~synergy_opt.joint.literal`: SPEC 2.4 as written, the reference for the reductions;
- :mod:`~synergy_opt.joint.solve`: :func:`solve_joint` and :class:`JointResult`.
"""

from synergy_opt.joint.literal import LiteralJointModel, build_joint_literal
from synergy_opt.joint.model import FORMULATIONS, PATTERN_LIMIT, JointModel, JointReductions, build_joint
from synergy_opt.joint.solve import JointFormulation, JointResult, solve_joint

__all__ = [
    "FORMULATIONS",
    "PATTERN_LIMIT",
    "JointFormulation",
    "JointModel",
    "JointReductions",
    "JointResult",
    "LiteralJointModel",
    "build_joint",
    "build_joint_literal",
    "solve_joint",
]
