"""Interchangeable solver backends behind one registry and one result type."""

from synergy_opt.solvers.base import Capabilities, SolveResult, SolverParams, Status
from synergy_opt.solvers.export import write_model
from synergy_opt.solvers.registry import (
    DEFAULT_SOLVER,
    SOLVER,
    SOLVER_ARGUMENTS,
    BackendSpec,
    available_solvers,
    backend,
    register,
    solve_model,
    solver_names,
)

__all__ = [
    "DEFAULT_SOLVER",
    "SOLVER",
    "SOLVER_ARGUMENTS",
    "BackendSpec",
    "Capabilities",
    "SolveResult",
    "SolverParams",
    "Status",
    "available_solvers",
    "backend",
    "register",
    "solve_model",
    "solver_names",
    "write_model",
]
