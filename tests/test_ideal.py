"""The ideal-allocation ILP (paper eqs. 1-7): brute force, reductions, relaxation, the paper's example."""

from __future__ import annotations

import itertools
from pathlib import Path
from random import Random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synergy_opt as so
from synergy_opt.ideal.model import Reductions, build_ideal, row_labels
from synergy_opt.profile_groups import group_profiles, subset_groups
from synergy_opt.solvers import Status, available_solvers, backend, solve_model, write_model
from tests.random_instances import brute_force_ideal, random_instance

ROOT = Path(__file__).resolve().parents[1]
INTEGER_SOLVERS = [name for name in available_solvers() if backend(name).capabilities.integer]
ALL_REDUCTIONS = [
    Reductions(),
    Reductions.none(),
    Reductions(merge_identical=False),
    Reductions(drop_dominated=False),
    Reductions(merge_identical=False, fix_below_floor=False),
]


def exact(instance: so.RoundInstance, solver: str = "highs", **kwargs: object) -> so.IdealResult:
    result = so.solve_ideal(instance, solver=solver, mip_gap=0.0, **kwargs)  # type: ignore[arg-type]
    assert result.status is Status.OPTIMAL, result.solve.message
    return result


def check_choices(instance: so.RoundInstance, result: so.IdealResult) -> None:
    """Every chosen config meets its floor, (2) and (3) hold, and the objective is the sum of W."""
    assert np.all(result.throughput >= instance.floors - 1e-9)
    assert result.cpu_demand.sum() <= instance.cluster.total_cpus + 1e-6
    assert result.mem_demand.sum() <= instance.cluster.total_mem_gb + 1e-6
    for job, w, c, m in zip(instance.jobs, result.throughput, result.cpu_per_gpu, result.mem_gb_per_gpu, strict=True):
        assert w == pytest.approx(job.profile.throughput(c, m))  # (6, 7): the config is on the job's grid
    assert result.throughput.sum() == pytest.approx(result.objective, abs=1e-6)


@pytest.mark.parametrize("solver", INTEGER_SOLVERS)
def test_ilp_equals_brute_force_on_200_random_instances(solver: str) -> None:
    rng = np.random.default_rng(2024)
    for _ in range(200):
        instance = random_instance(rng)
        result = exact(instance, solver)
        assert result.objective == pytest.approx(brute_force_ideal(instance), abs=1e-6), instance
        check_choices(instance, result)


def test_gpu_weighted_objective_equals_brute_force() -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        instance = random_instance(rng)
        result = exact(instance, objective="gpu")
        assert result.objective == pytest.approx(brute_force_ideal(instance, gpu_weighted=True), abs=1e-6)


def _reduction_instances() -> list[so.RoundInstance]:
    rng = np.random.default_rng(11)
    instances = [random_instance(rng, max_jobs=8, max_axis=4) for _ in range(70)]
    for seed in range(30):
        instances.append(so.generate_round(16 * (1 + seed % 3), multi_gpu=seed % 2 == 0, seed=seed,
                                           profile_noise=0.05 if seed % 3 else 0.0))
    return instances


def test_reduced_and_unreduced_models_reach_the_same_optimum() -> None:
    for instance in _reduction_instances():
        optima = [exact(instance, reductions=r).objective for r in ALL_REDUCTIONS]
        assert optima == pytest.approx([optima[0]] * len(optima), rel=1e-9, abs=1e-9)


def test_reductions_shrink_the_model() -> None:
    instance = so.generate_round(128, seed=0)
    full = build_ideal(instance, reductions=Reductions.none()).model
    reduced = build_ideal(instance).model
    assert reduced.num_vars < full.num_vars / 10
    assert build_ideal(instance).num_classes <= len(so.model_names())


def test_relaxation_bounds_the_ilp_and_its_vertex_has_at_most_two_fractional_jobs() -> None:
    for instance in _reduction_instances():
        ilp = exact(instance)
        unmerged = Reductions(merge_identical=False)
        lp = so.solve_ideal(instance, relax=True, reductions=unmerged)
        assert lp.status is Status.OPTIMAL
        assert lp.objective >= ilp.objective - 1e-7
        assert lp.solve.is_vertex
        assert len(lp.fractional_jobs) <= 2, lp.fractional_jobs
        check_choices(instance, ilp)


def test_fractional_jobs_appear_when_capacity_binds() -> None:
    """A vertex with a fractional job exists: the test above is not vacuous."""
    cluster = so.Cluster(1, 2, 6, 100)
    profile = so.Profile([1, 2, 4], [50], [[1.0], [1.0], [2.0]])
    instance = so.RoundInstance(cluster, (so.Job("a", 1, profile), so.Job("b", 1, profile)))
    # Proportional is 3 CPUs (on the grid W=1). The ILP: one job at 4 CPUs, the other at 1 or 2 (2 + 1). The LP
    # (the jobs kept apart) gives one job 4 CPUs and the other its 2 left as 1/3 of its 4-CPU config and 2/3 of its
    # 1-CPU one: 2 + 4/3.
    # (At 5 CPUs its vertex was integral, and this test, asserting "fractional or equal", could not fail.)
    lp = so.solve_ideal(instance, relax=True, reductions=Reductions(merge_identical=False))
    ilp = exact(instance)
    assert ilp.objective == pytest.approx(3.0)
    assert lp.objective == pytest.approx(10 / 3)
    assert len(lp.fractional_jobs) == 1


def test_paper_worked_example() -> None:
    """Hand-derived optimum of the paper's example (Table 1): 2 servers of 8 GPUs, 24 CPUs, 500 GB.

    The super-machine has C = 48 CPUs and M = 1000 GB; every job has 4 GPUs. transformer and gnmt have
    W = 1 everywhere and take the cheapest config (1 CPU, 20.83 GB per GPU): 8 CPUs and 166.64 GB together.
    That leaves res18 and m5 40 CPUs (c1 + c2 <= 10 per GPU) and 833.36 GB; res18 needs 62.5 GB per GPU to
    reach its floor, so m5 gets at most 145.8 GB per GPU, i.e. its 125 GB column. Over c1 + c2 <= 10:
    (4, 6) gives 1.3 + 2.0 = 3.3; (5, 5) 1.53 + 1.4; (6, 4) 1.75 + 1.2; (3, 6) 1.0 + 2.0 — so 3.3 is best
    and the optimum is 3.3 + 1 + 1 = 5.3 (GPU-weighted: 4 x 5.3 = 21.2).
    """
    instance = so.load_instance(ROOT / "instances" / "paper_example.json")
    assert [job.model for job in instance.jobs] == ["res18", "m5", "transformer", "gnmt"]
    for solver in INTEGER_SOLVERS:
        result = exact(instance, solver)
        assert result.objective == pytest.approx(5.3), solver
    result = exact(instance)
    configs = {job_id: (c.cpu_per_gpu, c.mem_gb_per_gpu) for job_id, c in result.configs.items()}
    assert configs["j1"] == (4.0, pytest.approx(62.5))
    assert configs["j2"] == (6.0, 125.0)
    assert result.configs["j1"].cpus == 16 and result.configs["j2"].mem_gb == 500
    assert exact(instance, objective="gpu").objective == pytest.approx(21.2)


def test_proportional_point_off_the_grid_is_inserted() -> None:
    """With 2.5 CPUs per GPU (off the grid) the floor reads the grid below it and stays feasible."""
    cluster = so.Cluster(1, 4, 10, 200)
    profile = so.Profile([1, 2, 4], [25, 75], [[0.2, 0.5], [0.4, 1.0], [0.8, 2.0]])
    instance = so.RoundInstance(cluster, tuple(so.Job(f"j{i}", 1, profile) for i in range(4)))
    assert instance.floors.tolist() == [0.4] * 4  # W at (2, 25): the grid point below (2.5, 50)
    result = exact(instance)
    assert result.objective == pytest.approx(brute_force_ideal(instance))


def test_tiny_time_limit_on_a_large_instance_returns_a_status() -> None:
    """A noisy 2048-GPU round takes HiGHS seconds to prove; 10 ms returns a limit status, never an exception."""
    instance = so.generate_round(2048, profile_noise=0.05, seed=1)
    result = so.solve_ideal(instance, time_limit=0.01)
    assert result.status in (Status.FEASIBLE, Status.NO_SOLUTION), result.solve.message
    assert result.solve_seconds < 30
    if result.status is Status.FEASIBLE:
        assert result.bound is not None and result.bound >= result.objective - 1e-9
        check_choices(instance, result)
    else:
        assert result.configs == {}
        with pytest.raises(so.NoSolutionError):
            _ = result.y


def test_models_export_to_mps_and_lp(tmp_path: Path) -> None:
    model = build_ideal(so.generate_round(32, seed=3, profile_noise=0.05)).model
    for suffix in (".mps", ".lp"):
        path = write_model(model, tmp_path / f"ideal{suffix}")
        assert path.stat().st_size > 0
    with pytest.raises(so.InvalidInputError, match="suffix"):
        write_model(model, tmp_path / "ideal.txt")


def test_a_built_model_exports_and_solves_as_its_linear_model(tmp_path: Path) -> None:
    # What build_ideal returns (an IdealModel) raised a raw AttributeError in write_model and solve_model.
    built = build_ideal(so.generate_round(32, seed=3, profile_noise=0.05))
    assert write_model(built, tmp_path / "ideal.lp").read_text() == write_model(built.model, tmp_path / "m.lp"
                                                                                 ).read_text()
    assert solve_model(built).objective == pytest.approx(solve_model(built.model).objective, rel=1e-9)
    for bad in ("round.json", None, built.instance):
        with pytest.raises(so.InvalidInputError, match="model"):
            solve_model(bad)
        with pytest.raises(so.InvalidInputError, match="model"):
            write_model(bad, tmp_path / "bad.mps")


@pytest.mark.parametrize("nudge", [-1, 0, 1])
def test_proportional_point_a_hair_off_a_grid_value(nudge: int) -> None:
    """10/3 CPUs per GPU against a grid value one float step below/at/above it reads that grid value."""
    c_p = 10 / 3
    grid_value = c_p if nudge == 0 else float(np.nextafter(c_p, c_p + nudge))
    cluster = so.Cluster(1, 3, 10, 150)
    profile = so.Profile([1, grid_value, 6], [50], [[0.2], [0.5], [1.0]])
    instance = so.RoundInstance(cluster, tuple(so.Job(f"j{i}", 1, profile) for i in range(3)))
    assert instance.floors.tolist() == [0.5] * 3
    for reductions in (Reductions(), Reductions.none()):
        result = exact(instance, reductions=reductions)
        assert result.objective == pytest.approx(1.5)


def test_round_without_jobs() -> None:
    empty = so.RoundInstance(so.Cluster(2), ())
    for relax, reductions in itertools.product((False, True), (Reductions(), Reductions.none())):
        result = so.solve_ideal(empty, relax=relax, reductions=reductions)
        assert result.status is Status.OPTIMAL and result.objective == 0.0 and result.configs == {}


def test_named_blocks() -> None:
    model = build_ideal(so.generate_round(16, seed=0), reductions=Reductions(merge_identical=False,
                                                                            fix_below_floor=False)).model
    assert set(model.var_blocks) == {"y"}
    assert set(model.con_blocks) == {"assign", "cpu", "mem", "floor"}


@settings(derandomize=True, deadline=None, max_examples=150)
@given(st.integers(1, 12), st.integers(1, 4), st.booleans(), st.randoms(use_true_random=False))
def test_row_labels_are_numpy_uniques_labels(rows: int, columns: int, distinct_first: bool, rng: Random) -> None:
    """The fast path (first column tells the rows apart) and the fallback give np.unique's labels exactly."""
    values = np.array([[rng.choice([0.0, -0.0, 0.5, 1.0, 2.5]) for _ in range(columns)] for _ in range(rows)])
    if distinct_first:
        values[:, 0] = rng.sample(range(100), rows)
    expected = np.unique(values, axis=0, return_inverse=True)[1].ravel()
    assert np.array_equal(row_labels(values), expected)


def test_profile_groups_follow_the_jobs_order() -> None:
    """Groups and their rows come in the order of their first jobs, never in memory order (the ideal ILP's
    classes, hence near-opt's choices, must not change from run to run)."""
    def grid(cpu: list[float], scale: float) -> so.Profile:
        return so.Profile(np.array(cpu), np.array([10.0, 62.5]), scale * np.ones((len(cpu), 2)))

    profiles = [grid([1.0, 3.0], 1.0), grid([2.0, 3.0], 1.0), grid([1.0, 3.0], 2.0), grid([2.0, 3.0], 3.0)]
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 3, 0, 1]):
        jobs = tuple(so.Job(f"j{k}", 1, profiles[p]) for k, p in enumerate(order))
        groups = so.RoundInstance(so.Cluster(1), jobs).profile_groups
        assert [int(g.jobs[0]) for g in groups] == [0, 1]
        for group in groups:
            assert group.row.tolist() == list(range(group.jobs.size))  # each job its own profile, in order


def test_subset_groups_are_the_groups_of_the_subset() -> None:
    """A subset's groups read from the whole list's (each type's round of a heterogeneous round) are exactly
    group_profiles of the subset: the same groups, order, rows and matrices."""
    rng = Random(3)
    axes = [[1.0, 3.0], [2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 4.0]]
    for _ in range(200):
        profiles = [so.Profile(np.array(cpu), np.array([10.0, 62.5]), rng.random() * np.ones((len(cpu), 2)))
                    for cpu in (rng.choice(axes) for _ in range(rng.randint(1, 6)))]
        items = [rng.choice(profiles) for _ in range(rng.randint(1, 20))]
        subset = sorted(rng.sample(range(len(items)), rng.randint(1, len(items))))
        got = subset_groups(group_profiles(items), np.array(subset, dtype=np.int64))
        expected = group_profiles([items[i] for i in subset])
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            for name in ("cpu_axis", "mem_axis", "tput", "jobs", "row"):
                assert np.array_equal(getattr(a, name), getattr(b, name))


def test_a_relaxations_fractional_job_hand_derived() -> None:
    # One server of 2 GPUs and 7.5 CPUs: both jobs' floor is their value at 3 CPUs (1.0). The ILP keeps both at 3
    # (2.0: 5 + 3 > 7.5). The LP gives a, whose 2 more CPUs gain 1.0 (b's only 0.8), the 1.5 CPUs left: 0.75 of
    # its 5-CPU config and 0.25 of its 3-CPU one, 2.75 in all. a is the fractional job; its config read off the
    # LP is the one of most weight (5 CPUs); the configs carry the floors, not the throughputs (three mutations
    # of these passed the suite).
    cluster = so.Cluster(1, 2, 7.5, 100)
    a = so.Profile([1, 3, 5], [50], [[0.5], [1.0], [2.0]])
    b = so.Profile([1, 3, 5], [50], [[0.5], [1.0], [1.8]])
    instance = so.RoundInstance(cluster, (so.Job("a", 1, a), so.Job("b", 1, b)))
    exact = so.solve_ideal(instance)
    assert exact.objective == pytest.approx(2.0) and exact.fractional_jobs == ()
    relaxed = so.solve_ideal(instance, relax=True)
    assert relaxed.objective == pytest.approx(2.75)
    assert relaxed.fractional_jobs == ("a",)
    assert list(relaxed.cpu_per_gpu) == [5.0, 3.0]
    assert {j: (c.throughput, c.floor) for j, c in relaxed.configs.items()} == {"a": (2.0, 1.0), "b": (1.0, 1.0)}


def test_only_a_job_of_floor_zero_is_offered_no_cpus_or_memory() -> None:
    # A reviewer's round: A (floor 0) shares its axes with B1 and B2 (floor 1 each). Every member of the group got
    # the config of no CPUs and no memory, and the LP without fix_below_floor mixed it into B's floor rows: 4.5
    # against the ILP's 4.0 (4.0 when A's axes differ). Only A is offered it now (ideal.model.offered).
    def job(name: str, tput: list[list[float]], cpu: list[float]) -> so.Job:
        return so.Job(name, 1, so.Profile(cpu, [50.0], tput))

    for a_cpu in ([2.0, 4.0], [2.5, 4.0]):
        instance = so.RoundInstance(so.Cluster(1, 3, 6.0, 150.0), (
            job("B1", [[1.0], [3.0]], [2.0, 4.0]), job("B2", [[1.0], [3.0]], [2.0, 4.0]),
            job("A", [[0.0], [0.0]], a_cpu)))
        assert instance.floors.tolist() == [1.0, 1.0, 0.0]
        for reductions in (Reductions(), Reductions(fix_below_floor=False, merge_identical=False)):
            assert so.solve_ideal(instance, reductions=reductions).objective == pytest.approx(4.0)
            assert so.solve_ideal(instance, relax=True, reductions=reductions).objective == pytest.approx(4.0)
        model = so.build_ideal(instance, reductions=Reductions(fix_below_floor=False, merge_identical=False))
        zero = (model.col_cpu == 0) & (model.col_mem == 0)
        assert model.class_jobs[model.col_class[zero]].tolist() == [2]  # A's column only
