"""synergy_opt: optimization toolkit for resource-sensitive scheduling of GPU clusters (Synergy, OSDI '22)."""

from typing import Any

from synergy_opt import moved
from synergy_opt.errors import (
    InvalidInputError,
    NoSolutionError,
    SolverUnavailableError,
    SynergyError,
    UnknownNameError,
)
from synergy_opt.evaluation import Evaluation, InvalidAllocationError, evaluate
from synergy_opt.generate import generate_round
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, ServerType
from synergy_opt.ideal import IdealResult, JobConfig, solve_ideal
from synergy_opt.ideal.model import Reductions, build_ideal
from synergy_opt.instance import Allocation, Cluster, Job, Placement, Profile, RoundInstance
from synergy_opt.io import load_instance, save_instance
from synergy_opt.joint import JointResult, solve_joint
from synergy_opt.mechanisms import MECHANISMS, run_mechanism
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.placement.solve import OptResult, solve_opt
from synergy_opt.profiles import builtin_profile, model_names
from synergy_opt.round_family import FAMILY, family_round, member_round
from synergy_opt.solvers import SolveResult, SolverParams, Status, available_solvers, solver_names

__version__ = "0.1.0"

moved.install()  # an old module path (synergy_opt.opt, ...) fails naming its new one

# The simulator (and pandas with it) loads on first use, for speed only: `import synergy_opt` stays light for
# solving rounds. Its names are listed by dir() all the same.
_SIMULATOR_NAMES = ("SimResult", "Trace", "TraceJob", "generate_trace", "load_trace", "save_trace", "simulate")


def __getattr__(name: str) -> Any:
    if name in _SIMULATOR_NAMES:
        from synergy_opt import sim

        return getattr(sim, name)
    raise AttributeError(f"module 'synergy_opt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "FAMILY",
    "MECHANISMS",
    "Allocation",
    "Cluster",
    "Evaluation",
    "HeteroCluster",
    "HeteroJob",
    "HeteroRound",
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
    "ServerType",
    "SimResult",
    "SolveResult",
    "SolverParams",
    "SolverUnavailableError",
    "Status",
    "SynergyError",
    "Trace",
    "TraceJob",
    "UnknownNameError",
    "__version__",
    "available_solvers",
    "best_case_demands",
    "build_ideal",
    "builtin_profile",
    "evaluate",
    "family_round",
    "generate_round",
    "generate_trace",
    "load_instance",
    "load_trace",
    "member_round",
    "model_names",
    "run_mechanism",
    "save_instance",
    "save_trace",
    "simulate",
    "solve_ideal",
    "solve_joint",
    "solve_opt",
    "solver_names",
]
