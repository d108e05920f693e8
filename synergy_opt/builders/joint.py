"""Moved to :mod:`synergy_opt.joint` (``model.py`` and ``literal.py``); this old import path keeps working."""

from synergy_opt.joint.literal import LiteralJointModel, build_joint_literal
from synergy_opt.joint.model import (
    FORMULATIONS,
    PATTERN_LIMIT,
    Formulation,
    JointModel,
    JointReductions,
    build_joint,
    item_capacity,
    order_weights,
    server_patterns,
)

__all__ = [
    "FORMULATIONS",
    "PATTERN_LIMIT",
    "Formulation",
    "JointModel",
    "JointReductions",
    "LiteralJointModel",
    "build_joint",
    "build_joint_literal",
    "item_capacity",
    "order_weights",
    "server_patterns",
]
