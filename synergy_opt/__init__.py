"""synergy_opt: optimization toolkit for resource-sensitive scheduling of GPU clusters (Synergy, OSDI '22)."""

from synergy_opt.builders.ideal import Reductions, build_ideal
from synergy_opt.errors import (
    InvalidInputError,
    NoSolutionError,
    SolverUnavailableError,
    SynergyError,
    UnknownNameError,
)
from synergy_opt.evaluation import Evaluation, InvalidAllocationError, evaluate
from synergy_opt.generate import generate_round
from synergy_opt.ideal import IdealResult, JobConfig, solve_ideal
from synergy_opt.instance import Allocation, Cluster, Job, Placement, Profile, RoundInstance
from synergy_opt.io import load_instance, save_instance
from synergy_opt.joint import JointResult, solve_joint
from synergy_opt.mechanisms import MECHANISMS, run_mechanism
from synergy_opt.opt import OptResult, solve_opt
from synergy_opt.profiles import builtin_profile, model_names
from synergy_opt.solvers import SolveResult, SolverParams, Status, available_solvers, solver_names

__version__ = "0.1.0"

__all__ = [
    "MECHANISMS",
    "Allocation",
    "Cluster",
    "Evaluation",
    "IdealResult",
    "InvalidAllocationError",
    "InvalidInputError",
    "Job",
    "JobConfig",
    "JointResult",
    "NoSolutionError",
    "OptResult",
    "Placement",
    "Profile",
    "Reductions",
    "RoundInstance",
    "SolveResult",
    "SolverParams",
    "SolverUnavailableError",
    "Status",
    "SynergyError",
    "UnknownNameError",
    "__version__",
    "available_solvers",
    "build_ideal",
    "builtin_profile",
    "evaluate",
    "generate_round",
    "load_instance",
    "model_names",
    "run_mechanism",
    "save_instance",
    "solve_ideal",
    "solve_joint",
    "solve_opt",
    "solver_names",
]
