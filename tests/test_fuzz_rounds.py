"""Rounds from outside the toolkit's generators (issue s28's fuzzing): edge cases every backend must take."""

from __future__ import annotations

import pytest

import synergy_opt as so
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, ServerType
from synergy_opt.solvers import Status, available_solvers


@pytest.mark.parametrize("solver", available_solvers())
def test_a_type_without_jobs_solves_under_every_backend(solver: str) -> None:
    """A type-fixed round whose second type has no job: that type's round is empty (no variables), an
    optimum of 0, not an error."""
    cluster = HeteroCluster((ServerType("x_1", 1, 2, 6.0, 100.0), ServerType("p100", 1, 1, 3.0, 50.0)))
    profile = so.Profile([1.0, 3.0], [50.0], [[0.5], [1.0]])
    instance = HeteroRound(cluster, (HeteroJob("j0", 2, {"x_1": profile}),))
    relaxations = (False,) if solver == "ortools-cpsat" else (False, True)
    for relax in relaxations:
        result = so.solve_ideal(instance, solver=solver, relax=relax)
        assert result.status is Status.OPTIMAL, (relax, result.message)
        assert result.objective == pytest.approx(1.0)
    assert so.solve_ideal(so.RoundInstance(so.Cluster(1), ()), solver=solver).objective == 0.0
