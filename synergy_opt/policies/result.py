"""What a policy formulation returns: time fractions per (job, GPU type), its objective, how the solve went."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.policies.problem import PolicyProblem
from synergy_opt.solvers import SolveResult, Status


@dataclass(frozen=True, eq=False)
class PolicyResult:
    """One policy's allocation.

    Attributes
    ----------
    policy
        Its name (``max_min_fairness``, ...).
    problem
        What it was solved for.
    allocation
        ``(jobs, types)`` time fractions (rows B1-B3 of formulations/policies.md hold), None without a solution.
    objective
        The policy's own measure at ``allocation`` (max-min: the least normalised throughput; makespan: seconds;
        max-sum-throughput: the sum; finish-time fairness: the largest ratio rho).
    solve
        The last LP solve (finish-time fairness solves one per iteration).
    iterations
        LPs solved.
    build_seconds, solve_seconds
        Building the neutral models, and the backends' time (summed over iterations).
    """

    policy: str
    problem: PolicyProblem
    allocation: np.ndarray | None
    objective: float | None
    solve: SolveResult
    iterations: int = 1
    build_seconds: float = 0.0
    solve_seconds: float = 0.0

    @property
    def status(self) -> Status:
        return self.solve.status

    @property
    def has_solution(self) -> bool:
        return self.allocation is not None

    @property
    def effective_throughputs(self) -> np.ndarray:
        """Each job's throughput under the allocation: ``sum_t throughputs[i, t] * x[i, t]``."""
        if self.allocation is None:
            raise ValueError(f"{self.policy} ended {self.status.value} with no allocation")
        return np.asarray((self.problem.throughputs * self.allocation).sum(axis=1))

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{job_id: {type: fraction}}``, as Gavel's policies return it."""
        if self.allocation is None:
            return {}
        return {job: dict(zip(self.problem.types, map(float, row), strict=True))
                for job, row in zip(self.problem.job_ids, self.allocation, strict=True)}
