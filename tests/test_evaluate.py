"""The one evaluator: throughput by grid lookup, split jobs, floors, totals, and loud invalidity."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import InvalidAllocationError, InvalidAllocationWarning, evaluate

CLUSTER = so.Cluster(2, 4, 12, 200)  # proportional share: 3 CPUs and 50 GB per GPU
PROFILE = so.Profile([1, 3, 6], [25, 50], [[0.2, 0.4], [0.5, 1.0], [0.8, 2.0]])
INSTANCE = so.RoundInstance(CLUSTER, (so.Job("a", 2, PROFILE), so.Job("b", 4, PROFILE), so.Job("c", 1, PROFILE)))


def allocation(**jobs: list[tuple[int, int, float, float]]) -> so.Allocation:
    return so.Allocation({job: tuple(so.Placement(*part) for part in parts) for job, parts in jobs.items()})


def quiet(alloc: so.Allocation) -> so.Evaluation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidAllocationWarning)
        return evaluate(INSTANCE, alloc)


def test_throughput_totals_and_utilisation() -> None:
    result = evaluate(INSTANCE, allocation(
        a=[(0, 2, 12, 100)],  # 6 CPUs, 50 GB per GPU: W = 2.0
        b=[(1, 4, 12, 100)],  # 3 CPUs, 25 GB per GPU: W = 0.5
        c=[(0, 1, 0, 0)],  # below the grid in both axes: 0
    ))
    assert result.valid and result.problems == ()
    assert {j: s.throughput for j, s in result.jobs.items()} == {"a": 2.0, "b": 0.5, "c": 0.0}
    assert result.objective == pytest.approx(2.5)
    assert result.objective_gpu == pytest.approx(2 * 2.0 + 4 * 0.5)
    assert result.floors_violated == ("b", "c")  # the floor is W(3, 50) = 1.0
    assert result.unplaced == () and result.split_jobs == ()
    assert result.utilisation == pytest.approx({"gpus": 7 / 8, "cpus": 24 / 24, "mem_gb": 200 / 400})
    summary = result.summary()
    assert summary["floors_violated"] == 2 and summary["jobs_unplaced"] == 0 and summary["valid"] is True


def test_grid_lookup_never_over_claims() -> None:
    """Off the grid, the largest grid point <= in each axis counts: 5.9 CPUs read as 3, 49.9 GB as 25."""
    result = evaluate(INSTANCE, allocation(a=[(0, 2, 11.8, 99.8)]))
    assert result.jobs["a"].throughput == 0.5
    # A float hair below a grid value (20.83 x 3 / 3) still reads that value.
    assert PROFILE.throughput(3 * (1 - 1e-12), 50) == 1.0
    # But not 1e-4 below it, nor 1e-6: that is a config under the grid point (a tolerance of 1e-3 passed the suite).
    assert PROFILE.throughput(3 * (1 - 1e-4), 50) == 0.4
    assert PROFILE.throughput(3 * (1 - 1e-6), 50) == 0.4
    assert PROFILE.throughput(3, 50 * (1 - 1e-6)) == 0.5


def test_a_split_job_runs_at_its_poorest_server() -> None:
    result = evaluate(INSTANCE, allocation(b=[(0, 2, 12, 100), (1, 2, 6, 100)]))
    score = result.jobs["b"]
    assert score.split and score.servers == (0, 1)
    assert score.throughput == 1.0  # server 1 gives 3 CPUs per GPU (1.0), server 0 six (2.0)
    assert result.split_jobs == ("b",) and result.disproportionate_splits == ("b",)
    even = evaluate(INSTANCE, allocation(b=[(0, 2, 12, 100), (1, 2, 12, 100)]))
    assert even.jobs["b"].throughput == 2.0 and even.disproportionate_splits == ()


def test_unplaced_jobs_count_zero_and_are_listed() -> None:
    result = evaluate(INSTANCE, allocation(a=[(0, 2, 6, 100)]))
    assert result.valid and set(result.unplaced) == {"b", "c"}
    assert result.jobs["b"].throughput == 0.0 and not result.jobs["b"].placed
    assert result.floors_violated == ()  # only placed jobs are judged against their floor


@pytest.mark.parametrize(
    ("alloc", "problem"),
    [
        (allocation(a=[(0, 2, 13, 100)]), "server 0 uses 13 cpus of 12"),
        (allocation(a=[(0, 2, 6, 150)], c=[(0, 1, 3, 60)]), "server 0 uses 210 mem_gb of 200"),
        (allocation(b=[(0, 4, 6, 100)], c=[(0, 1, 3, 50)]), "server 0 uses 5 gpus of 4"),
        (allocation(b=[(0, 3, 9, 150)]), "job 'b' placed with 3 GPUs but needs 4"),
    ],
)
def test_invalid_allocations_are_reported_loudly(alloc: so.Allocation, problem: str) -> None:
    with pytest.warns(InvalidAllocationWarning, match="invalid allocation") as caught:
        result = evaluate(INSTANCE, alloc)
    assert caught[0].filename == __file__  # the caller's line, not the library's validation wrapper
    assert not result.valid and any(problem in p for p in result.problems), result.problems
    with pytest.raises(InvalidAllocationError, match="invalid allocation"):
        evaluate(INSTANCE, alloc, strict=True)
    with pytest.raises(InvalidAllocationError):
        result.check()


@pytest.mark.parametrize(
    ("alloc", "field"),
    [
        (allocation(a=[(2, 2, 6, 100)]), "allocation.jobs['a'][0].server"),
        (allocation(z=[(0, 1, 3, 50)]), "allocation.jobs['z']"),
    ],
)
def test_an_allocation_of_another_round_is_bad_input(alloc: so.Allocation, field: str) -> None:
    # A job or server the round does not have is not an allocation of this round: an error naming it.
    with pytest.raises(InvalidInputError) as error:
        evaluate(INSTANCE, alloc)
    assert error.value.field == field


@pytest.mark.parametrize(
    ("placement", "field", "closest"),
    [
        ({"server": 0, "gpus": 2, "cpus": 6, "mem_gb": 100, "memgb": 999}, "memgb", "mem_gb"),  # was ignored
        ({"server": 0, "gpu": 2, "cpus": 6, "mem_gb": 100}, "gpu", "gpus"),  # was "gpus=None: missing field"
    ],
)
def test_an_allocation_dicts_unknown_field_is_named_with_the_closest(placement: dict[str, Any], field: str,
                                                                     closest: str) -> None:
    with pytest.raises(InvalidInputError, match=f"did you mean '{closest}'") as error:
        evaluate(INSTANCE, {"jobs": {"a": [placement]}})
    assert error.value.field == f"allocation.jobs['a'][0].{field}"


def test_a_job_with_the_wrong_gpu_count_does_not_run() -> None:
    result = quiet(allocation(b=[(0, 3, 9, 150)]))
    assert result.jobs["b"].throughput == 0.0 and result.jobs["b"].gpus_placed == 3
    # More GPUs than it needs is as wrong as fewer (a mutation judging only fewer survived the suite).
    more = quiet(allocation(c=[(0, 2, 6, 100)]))
    assert not more.valid and more.problems == ("job 'c' placed with 2 GPUs but needs 1",)
    assert more.jobs["c"].throughput == 0.0


def test_capacity_tolerance_admits_float_noise_only() -> None:
    third = 12 / 3
    assert evaluate(INSTANCE, allocation(a=[(0, 2, third * 2, 100)], c=[(0, 1, third + 1e-12, 50)])).valid
    assert not quiet(allocation(a=[(0, 2, 8.01, 100)], c=[(0, 1, 4, 50)])).valid
    # 1e-6 over (relative) is over: only float rounding, 1e-7, is admitted.
    assert not quiet(allocation(a=[(0, 2, 8 + 12e-6, 100)], c=[(0, 1, 4, 50)])).valid


def test_a_slightly_uneven_split_is_disproportionate() -> None:
    # 6 CPUs per GPU on one server, 5.99 on the other: not the same per-GPU config (a tolerance of 1e-1 passed it).
    result = evaluate(INSTANCE, allocation(b=[(0, 2, 12, 100), (1, 2, 11.98, 100)]))
    assert result.disproportionate_splits == ("b",)
    assert result.jobs["b"].throughput == 1.0  # 5.99 CPUs read the 3-CPU row


def test_a_misspelt_jobs_key_is_named_with_the_closest() -> None:
    # {"job": {...}} was told what an allocation is, not which key it misspelt (a review).
    with pytest.raises(InvalidInputError, match="did you mean 'jobs'") as error:
        evaluate(INSTANCE, {"job": {}})
    assert error.value.field == "allocation.job"


@pytest.mark.parametrize("mem_gb", [500.0, 1e308])
def test_utilisation_of_servers_near_the_float_limit_is_a_fraction(mem_gb: float) -> None:
    # Two servers of 1e308 GB summed to inf: their memory use read NaN (an empty cell in the bench's rows.csv).
    instance = so.RoundInstance(so.Cluster(2, 8, 24, mem_gb), tuple(so.Job(f"j{k}", 2, so.builtin_profile("res18"))
                                                                   for k in range(3)))
    use = so.evaluate(instance, so.run_mechanism(instance, "proportional")).utilisation
    assert use == pytest.approx({"gpus": 0.375, "cpus": 0.375, "mem_gb": 0.375}, rel=1e-12)


def test_a_floor_is_kept_exactly_as_every_model_keeps_it() -> None:
    # An independent tester's round: job a (baseline X, floor 1.0) is worth 1 - 5e-13 at type Y's share. The
    # type-free ideal ILP rules Y out for it (H0, exact) and proves 6.0; a relative 1e-12 slack in the evaluator
    # called a on Y floor-keeping, and the allocation below 21.0 of a valid, floor-keeping round.
    eps = 5e-13
    round_ = so.load_instance({"format": "synergy-round/2", "cluster": {"types": [
        {"name": "X", "servers": 1, "gpus_per_server": 4, "cpus_per_server": 12, "mem_gb_per_server": 200},
        {"name": "Y", "servers": 1, "gpus_per_server": 2, "cpus_per_server": 6, "mem_gb_per_server": 100}]},
        "jobs": [{"id": "a", "gpus": 2, "types": ["X", "Y"], "baseline": "X", "profiles": {
            "X": {"cpu_per_gpu": [3.0, 6.0], "mem_gb_per_gpu": [50.0], "tput": [[1.0], [2.0]]},
            "Y": {"cpu_per_gpu": [3.0], "mem_gb_per_gpu": [50.0], "tput": [[1.0 - eps]]}}},
                 {"id": "b", "gpus": 2, "types": ["X"], "profiles": {
                     "X": {"cpu_per_gpu": [3.0, 6.0], "mem_gb_per_gpu": [50.0], "tput": [[5.0], [20.0]]}}}]})
    assert so.solve_ideal(round_).objective == pytest.approx(6.0)
    result = evaluate(round_, {"jobs": {"a": [{"server": 1, "gpus": 2, "cpus": 6.0, "mem_gb": 100.0}],
                                        "b": [{"server": 0, "gpus": 2, "cpus": 12.0, "mem_gb": 100.0}]}})
    assert result.valid and result.floors_violated == ("a",)
    assert not result.jobs["a"].meets_floor and result.jobs["b"].meets_floor
