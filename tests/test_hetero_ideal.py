"""The ideal ILP of heterogeneous rounds (issue 20, formulations/heterogeneous.md H1-H8): type-free against brute
force on tiny noisy rounds of 2-3 types, on every backend and by the core method; type-fixed = today's ILP per
type, summed; one type = today's ILP exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal import hetero_types
from synergy_opt.ideal.hetero_knapsack import TypedKnapsack
from synergy_opt.ideal.hetero_model import admissible, build_hetero_ideal
from synergy_opt.ideal.hetero_types import lp_types, solve_lp
from synergy_opt.ideal.model import Reductions
from synergy_opt.solvers import Status, solve_model
from tests.hetero_instances import brute_force_hetero_ideal, in_cpu_unit, random_hetero_round

ROUNDS = [random_hetero_round(np.random.default_rng(seed)) for seed in range(120)]
BACKENDS = [name for name in ("highs", "pyomo-highs", "ortools-scip", "ortools-cpsat")
            if name in so.available_solvers()]


@pytest.mark.parametrize("method", ["core", "direct"])
def test_type_free_ilp_equals_brute_force(method: str) -> None:
    for instance in ROUNDS:
        result = so.solve_ideal(instance, method=method)
        assert result.status is Status.OPTIMAL
        assert result.objective == pytest.approx(brute_force_hetero_ideal(instance), abs=1e-6), instance


@pytest.mark.parametrize("solver", BACKENDS[1:])
def test_every_backend_reaches_the_same_optimum(solver: str) -> None:
    for instance in ROUNDS[:40]:
        result = so.solve_ideal(instance, solver, method="direct")
        assert result.objective == pytest.approx(brute_force_hetero_ideal(instance), abs=1e-6), solver


def test_gpu_weighted_and_unreduced_models() -> None:
    for instance in ROUNDS[:60]:
        weighted = so.solve_ideal(instance, objective="gpu")
        assert weighted.objective == pytest.approx(brute_force_hetero_ideal(instance, gpu_weighted=True), abs=1e-6)
        plain = so.solve_ideal(instance, method="direct", reductions=Reductions.none())
        assert "floor" in plain.model.model.con_blocks  # type: ignore[union-attr]
        assert plain.objective == pytest.approx(brute_force_hetero_ideal(instance), abs=1e-6)


def test_the_lp_bounds_the_ilp_and_the_solution_is_an_allocation_of_the_types() -> None:
    for instance in ROUNDS[:60]:
        ilp = so.solve_ideal(instance)
        lp = so.solve_ideal(instance, relax=True)
        assert lp.objective is not None and ilp.objective is not None
        assert lp.objective >= ilp.objective - 1e-7 and ilp.bound >= ilp.objective - 1e-9  # type: ignore[operator]
        allowed = admissible(instance)
        use = np.zeros((len(instance.cluster.types), 3))
        for index, (job, config) in enumerate(zip(instance.jobs, ilp.configs.values(), strict=True)):
            k = instance.cluster.index(str(config.gpu_type))
            assert allowed[index, k] and config.throughput >= instance.floors[index] - 1e-12
            # (H6): at least the proportional share's throughput on the type it takes.
            server_type = instance.cluster.types[k]
            share = job.profiles[server_type.name].throughput(server_type.cpu_per_gpu, server_type.mem_gb_per_gpu)
            assert config.throughput >= share
            # The config's throughput is the matrix read at it (the evaluator's rule).
            assert config.throughput == job.profiles[str(config.gpu_type)].throughput(config.cpu_per_gpu,
                                                                                     config.mem_gb_per_gpu)
            use[k] += (job.gpus, config.cpus, config.mem_gb)
        caps = np.array([[t.total_gpus, t.servers * t.cpus_per_server, t.servers * t.mem_gb_per_server]
                         for t in instance.cluster.types])
        assert np.all(use <= caps + 1e-9)


def test_a_type_fixed_round_is_todays_ilp_per_type_summed() -> None:
    for instance in ROUNDS[:60]:
        fixed = instance.at_baseline()
        per_type = so.solve_ideal(fixed)
        assert per_type.method == "per-type" and per_type.per_type is not None
        summed = sum(so.solve_ideal(sub).objective or 0.0 for sub in fixed.per_type().values())
        assert per_type.objective == summed
        # The type-free model of the same (type-fixed) round agrees, and brute force too.
        assert so.solve_ideal(fixed, method="direct").objective == pytest.approx(summed, abs=1e-6)
        assert summed == pytest.approx(brute_force_hetero_ideal(fixed), abs=1e-6)
        assert [c.gpu_type for c in per_type.configs.values()] == list(fixed.baselines)
        # Choosing types never loses: the type-free optimum is at least the baseline types'.
        assert so.solve_ideal(instance).objective >= summed - 1e-7


@pytest.mark.parametrize("case", [dict(gpus=64, seed=1), dict(gpus=64, multi_gpu=True, profile_noise=0.05, seed=2)])
def test_one_type_is_todays_ilp_exactly(case: dict[str, object]) -> None:
    instance = so.generate_round(**case)  # type: ignore[arg-type]
    one = so.solve_ideal(HeteroRound.homogeneous(instance))
    plain = so.solve_ideal(instance)
    assert one.objective == plain.objective and one.bound == plain.bound
    assert [(c.cpu_per_gpu, c.mem_gb_per_gpu) for c in one.configs.values()] == [
        (c.cpu_per_gpu, c.mem_gb_per_gpu) for c in plain.configs.values()]


@pytest.mark.parametrize("seed", [0, 1])
def test_core_and_direct_agree_on_small_generated_noisy_rounds(seed: int) -> None:
    instance = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, multi_gpu=True, seed=seed,
                                 profile_noise=0.05)
    core = so.solve_ideal(instance)
    direct = so.solve_ideal(instance, method="direct")
    assert core.method == "core" and core.status is Status.OPTIMAL and direct.status is Status.OPTIMAL
    assert core.objective == pytest.approx(direct.objective, rel=1e-6)
    assert core.bound >= direct.objective - 1e-6  # type: ignore[operator]
    fixed = so.solve_ideal(instance.at_baseline())
    assert core.objective >= fixed.objective - 1e-9  # type: ignore[operator]  # sums in another order


def test_a_core_search_that_gives_up_says_so_and_auto_hands_the_round_to_highs(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    # Limits of 0 make the core search give up at once: first when looking for an incumbent (no exact search
    # completes, no beam threshold is tried), then, with an incumbent found, in its last proof. Before these
    # limits its last searches had none: on a 3 x 128-GPU round, under a 60 s limit, they filled 24 GB.
    from synergy_opt.ideal import hetero_core

    instance = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, multi_gpu=True, seed=0, profile_noise=0.05)
    direct = so.solve_ideal(instance, method="direct")
    monkeypatch.setattr(hetero_core, "INCUMBENT_STATE_LIMIT", 0)
    monkeypatch.setattr(hetero_core, "INCUMBENT_STEPS", 0)
    core = so.solve_ideal(instance, method="core")
    assert core.status is Status.NO_SOLUTION and "no solution within its limits" in core.message
    assert core.bound is not None and core.bound >= direct.objective - 1e-6  # type: ignore[operator]
    auto = so.solve_ideal(instance)
    assert auto.method == "direct" and auto.status is Status.OPTIMAL
    assert auto.objective == pytest.approx(direct.objective, rel=1e-9)
    # The beams find an incumbent (any number of thresholds allowed); no proof search may keep a state.
    monkeypatch.setattr(hetero_core, "INCUMBENT_STEPS", 10)
    monkeypatch.setattr(hetero_core, "EXACT_STATE_LIMIT", 0)
    monkeypatch.setattr(hetero_core, "PROOF_STATE_LIMIT", 0)
    unproven = so.solve_ideal(instance, method="core", mip_gap=0.0)
    assert unproven.status is Status.FEASIBLE and "passed its state limit" in unproven.message
    assert unproven.objective <= direct.objective + 1e-6  # type: ignore[operator]
    auto = so.solve_ideal(instance, mip_gap=0.0)
    assert auto.status is Status.OPTIMAL and auto.objective == pytest.approx(direct.objective, rel=1e-9)


def test_the_core_proof_runs_each_search_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # With no state allowed, every proof attempt at the unchanged incumbent asks for the same search again; a
    # search is deterministic in its threshold, beam and state limit, so it is run once and its outcome reused
    # (a noisy 96-job round ran one 0.35 s search three times).
    from synergy_opt.ideal import hetero_core

    instance = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, multi_gpu=True, seed=0, profile_noise=0.05)
    for name, limit in (("INCUMBENT_STATE_LIMIT", 0), ("INCUMBENT_STEPS", 10), ("EXACT_STATE_LIMIT", 0),
                        ("PROOF_STATE_LIMIT", 0)):
        monkeypatch.setattr(hetero_core, name, limit)
    searches: list[tuple[float, int | None, int | None]] = []
    run = hetero_core.search

    def counted(plan, *, beam=None, deadline=None, state_limit=None):  # type: ignore[no-untyped-def]
        searches.append((plan.threshold, beam, state_limit))
        return run(plan, beam=beam, deadline=deadline, state_limit=state_limit)

    monkeypatch.setattr(hetero_core, "search", counted)
    result = so.solve_ideal(instance, method="core", mip_gap=0.0)
    assert result.status is Status.FEASIBLE and "passed its state limit" in result.message
    proof = [key for key in searches if key[2] == 0]
    assert len(proof) >= 2 and len(searches) == len(set(searches))


@pytest.mark.parametrize(("seed", "multi", "fix_below_floor"),
                         [(0, False, True), (1, True, True), (2, True, False), (3, False, False)])
def test_the_lp_by_prices_is_the_whole_lps_optimum(seed: int, multi: bool, fix_below_floor: bool) -> None:
    """solve_lp (Lagrangian prices, then columns generated) against HiGHS on the whole LP: the same optimum,
    a feasible primal and a dual that prices no column positively. Floor rows (not fixed) are outside the
    Lagrangian's knapsack, so those rounds take the column-generation path."""
    instance = so.generate_round(types={"k80": 3, "p100": 3, "v100": 3}, multi_gpu=multi, seed=seed,
                                 profile_noise=0.05)
    ideal = build_hetero_ideal(instance, reductions=Reductions(merge_identical=fix_below_floor,
                                                               fix_below_floor=fix_below_floor))
    model = ideal.model
    solved = solve_lp(ideal)
    assert solved is not None
    y, row_dual = solved
    whole = solve_model(model.relaxed(), "highs")
    assert float(model.objective @ y) == pytest.approx(whole.objective, rel=1e-9)
    use = model.matrix @ y
    assert np.all(use <= model.row_upper + 1e-7) and np.all(use >= model.row_lower - 1e-7)
    assert np.all(y >= -1e-9) and np.all(y <= model.col_upper + 1e-9)
    # No column below its bound would enter; one at its bound (1 for a job) may have a positive reduced cost.
    reduced = model.objective - model.matrix.T @ row_dual
    assert np.all(reduced[y < model.col_upper - 1e-9] <= 1e-7)
    # The dual is feasible in sign (<= rows priced >= 0, >= rows <= 0) and its value bounds the optimum.
    upper, lower = np.isfinite(model.row_upper), np.isfinite(model.row_lower)
    assert np.all(row_dual[upper & ~lower] >= -1e-9) and np.all(row_dual[lower & ~upper] <= 1e-9)
    side = np.where(row_dual > 0, model.row_upper, np.where(row_dual < 0, model.row_lower, 0.0))
    bound = float(side @ row_dual + np.maximum(reduced, 0.0) @ model.col_upper)
    assert bound == pytest.approx(whole.objective, rel=1e-8)


def test_the_lp_by_prices_widens_when_the_prices_columns_admit_no_solution(monkeypatch: pytest.MonkeyPatch
                                                                         ) -> None:
    """With no gap, the prices leave one column per class, which overfill some type: the LP over them is
    infeasible and every column left is added (a wider gap adds none), reaching the whole LP's optimum."""
    monkeypatch.setattr(hetero_types, "CANDIDATE_GAP", 0.0)
    instance = so.generate_round(types={"k80": 3, "p100": 3, "v100": 3}, multi_gpu=True, seed=0, profile_noise=0.05)
    ideal = build_hetero_ideal(instance)
    solved = solve_lp(ideal)
    assert solved is not None
    whole = solve_model(ideal.model.relaxed(), "highs")
    assert float(ideal.model.objective @ solved[0]) == pytest.approx(whole.objective, rel=1e-9)


def test_the_lp_of_a_round_without_jobs() -> None:
    empty = HeteroRound(so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, seed=0).cluster, ())
    ideal = build_hetero_ideal(empty)
    solved = solve_lp(ideal)
    assert solved is not None and solved[0].size == 0 and not solved[1].any()
    assert lp_types(empty, ideal) == []


def test_merging_alike_jobs_is_exact() -> None:
    instance = so.generate_round(types={"k80": 1, "p100": 1, "v100": 1}, seed=3)  # noise-free: many alike jobs
    merged = build_hetero_ideal(instance)
    assert merged.num_classes < len(instance.jobs)
    result = so.solve_ideal(instance, method="direct")
    unmerged = so.solve_ideal(instance, method="direct", reductions=Reductions(merge_identical=False))
    assert result.objective == pytest.approx(unmerged.objective, abs=1e-6)


def test_bad_methods() -> None:
    with pytest.raises(InvalidInputError, match="type-free"):
        so.solve_ideal(ROUNDS[0], method="per-type")
    with pytest.raises(InvalidInputError):
        so.solve_ideal(ROUNDS[0], method="core", relax=True)
    with pytest.raises(InvalidInputError, match="homogeneous"):
        so.solve_ideal(so.generate_round(16), method="per-type")
    with pytest.raises(InvalidInputError) as error:  # each method listed once
        so.solve_ideal(ROUNDS[0], method="bogus")
    assert str(error.value).endswith("choose one of auto, core, direct, per-type")


def test_a_job_may_take_a_type_whose_share_keeps_its_floor() -> None:
    """(H0), checked against its definition read off each matrix."""
    for instance in ROUNDS[:60]:
        allowed = admissible(instance)
        for j, job in enumerate(instance.jobs):
            for k, server_type in enumerate(instance.cluster.types):
                share = (job.profiles[server_type.name].throughput(server_type.cpu_per_gpu,
                                                                   server_type.mem_gb_per_gpu)
                         if server_type.name in job.profiles else -1.0)
                assert allowed[j, k] == (share >= instance.floors[j])
            assert allowed[j, instance.cluster.index(job.baseline_type)]


@pytest.mark.parametrize(("multi", "doubled"), [(False, False), (True, True)])
def test_the_compiled_dual_value_is_numpys(multi: bool, doubled: bool) -> None:
    """TypedKnapsack.dual_value (compiled) against the numpy formula written out: L, the even mix of each class's
    best columns and its value; ``doubled``: every column twice, so every class's best ties."""
    instance = so.generate_round(types={"k80": 3, "p100": 3, "v100": 3}, multi_gpu=multi, seed=4, profile_noise=0.05)
    knapsack = TypedKnapsack.of(build_hetero_ideal(instance))
    if doubled:
        twice = np.repeat(np.arange(knapsack.value.size), 2)
        knapsack = dataclasses.replace(knapsack, **{name: getattr(knapsack, name)[twice] for name in (
            "value", "col_type", "gpu", "cpu", "mem", "col_class")})
    rng = np.random.default_rng(0)
    for lam in (np.zeros(9), np.full(9, 1e-3), rng.random(9) * 1e-2, np.r_[np.zeros(3), rng.random(6) * 1e-3]):
        priced, best = knapsack.priced(lam)
        is_best = priced >= best[knapsack.col_class]
        assert (int(is_best.sum()) >= 2 * best.size) == doubled
        share = (knapsack.class_count / np.add.reduceat(is_best.astype(float), knapsack.starts))[
            knapsack.col_class] * is_best
        bound, use, value = knapsack.dual_value(lam)
        assert bound == pytest.approx(float(lam @ knapsack.capacity + knapsack.class_count @ best), rel=1e-12)
        assert use == pytest.approx(knapsack.use(share), rel=1e-12)
        assert value == pytest.approx(float(share @ knapsack.value), rel=1e-12)


def _gpu_slack_rounds() -> dict[str, HeteroRound]:
    """Three tiny rounds (found by a fuzzer of hand-shaped clusters: 1-, 2- and 4-GPU servers) on which the core
    search counted the GPU slack twice after its last moving step and cut off the optimum: a wrong INFEASIBLE, and
    a wrong OPTIMAL below the optimum (per job and GPU-weighted)."""
    from synergy_opt import Profile
    from synergy_opt.hetero import HeteroCluster, HeteroJob, ServerType

    infeasible = HeteroRound(HeteroCluster((ServerType("p100", 2, 4, 33.0, 250.0),
                                            ServerType("v100", 2, 2, 30.0, 128.0),
                                            ServerType("k80", 1, 1, 24.0, 100.5))), (
        HeteroJob("j0", 4, {"v100": Profile([1.5, 7.0], [40.0, 50.0, 125.0], [[0.42, 0.57, 2.47], [1.74, 2.8, 2.8]]),
                            "p100": Profile([2.0, 3.0, 3.5], [31.25], [[0.23], [2.41], [0.84]])}, "p100"),
        HeteroJob("j1", 1, {"v100": Profile([10.0], [5.0, 250.0], [[1.832, 1.4]]),
                            "k80": Profile([10.0], [5.0, 250.0], [[0.458, 0.458]]),
                            "p100": Profile([10.0], [5.0, 250.0], [[2.29, 1.4]])}, "v100"),
        HeteroJob("j2", 1, {kind: Profile([2.0, 8.0], [20.83, 50.0, 125.0], [[1.58, top, top], [1.58, top, top]])
                            for kind, top in (("v100", 2.184), ("k80", 2.73), ("p100", 2.184))}, "k80")))
    below = HeteroRound(HeteroCluster((ServerType("p100", 2, 4, 7.5, 50.0), ServerType("v100", 1, 8, 33.0, 128.0),
                                       ServerType("k80", 1, 4, 24.0, 250.0))), (
        HeteroJob("j0", 4, {kind: Profile([2.5, 5.0, 12.0], [40.0], [[0.4], [mid], [0.17]])
                            for kind, mid in (("v100", 1.19), ("p100", 0.476), ("k80", 2.38))}, "k80"),
        HeteroJob("j1", 8, {"p100": Profile([2.5, 3.5], [75.0], [[0.57], [1.41]]),
                            "v100": Profile([2.5, 3.5], [75.0], [[0.57], [1.128]])}, "p100"),
        HeteroJob("j2", 2, {kind: Profile([6.0], [10.0, 62.5, 100.0], [[0.12, top, top]])
                            for kind, top in (("v100", 0.408), ("k80", 1.632), ("p100", 2.04))}, "v100")))
    weighted = HeteroRound(HeteroCluster((ServerType("p100", 1, 1, 9.0, 99.0), ServerType("v100", 2, 4, 33.0, 37.0),
                                          ServerType("k80", 2, 2, 16.0, 37.0))), (
        HeteroJob("j0", 1, {
            "k80": Profile([3.5, 10.0], [10.0, 20.83, 50.0], [[2.953, 3.037, 2.494], [3.129, 2.748, 2.45]]),
            "v100": Profile([3.5, 10.0], [10.0, 20.83, 50.0], [[2.55, 3.151, 3.193], [2.799, 3.001, 3.283]]),
            "p100": Profile([3.5, 10.0], [10.0, 20.83, 50.0], [[2.247, 2.734, 2.716], [2.759, 3.238, 3.089]])}, "v100"),
        HeteroJob("j1", 1, {"p100": Profile([2.5], [75.0], [[2.3]]),
                            "k80": Profile([3.5, 10.0], [50.0, 75.0, 250.0], [[2.54, 2.74, 0.73], [1.62, 0.37, 0.56]]),
                            "v100": Profile([6.0], [62.5], [[0.64]])}, "k80"),
        HeteroJob("j2", 4, {"k80": Profile([3.5], [50.0, 62.5, 125.0], [[1.06, 1.059, 2.583]]),
                            "v100": Profile([3.5], [50.0, 62.5, 125.0], [[1.339, 1.07, 2.04]])}, "v100")))
    return {"infeasible": infeasible, "below": below, "weighted": weighted}


@pytest.mark.parametrize("name", ["infeasible", "below", "weighted"])
def test_the_core_search_counts_the_gpu_slack_once(name: str) -> None:
    instance = _gpu_slack_rounds()[name]
    objective = "gpu" if name == "weighted" else "job"
    best = brute_force_hetero_ideal(instance, gpu_weighted=objective == "gpu")
    for method in ("core", "auto", "direct"):
        result = so.solve_ideal(instance, method=method, objective=objective, mip_gap=0.0)
        assert result.status is Status.OPTIMAL, method
        assert result.objective == pytest.approx(best, rel=1e-9, abs=1e-9), method
    if name == "below":  # the joint's decomposition stopped at the wrong bound too
        joint = so.solve_joint(instance, mip_gap=0.0)
        assert joint.status is Status.OPTIMAL and joint.objective == pytest.approx(2.788, rel=1e-9)


def test_heterogeneous_results_read_as_frames_as_homogeneous_ones_do() -> None:
    # HeteroIdealResult had no to_frame, Evaluation.to_frame no gpu_type column, HeteroJointResult no consolidate
    # (a usability review; the README and joint.md promise them).
    instance = so.generate_round(types={"k80": 1, "v100": 1}, seed=2)
    ideal = so.solve_ideal(instance)
    frame = ideal.to_frame()
    assert list(frame.index) == [job.id for job in instance.jobs]
    assert frame["gpu_type"].tolist() == [ideal.configs[job.id].gpu_type for job in instance.jobs]
    assert frame["throughput"].sum() == pytest.approx(ideal.objective)
    assert "gpu_type" not in so.solve_ideal(so.generate_round(gpus=16)).to_frame()  # one type: as it was
    unsolved = so.solve_ideal(instance, time_limit=1e-9, method="direct")
    assert not unsolved.has_solution and "gpu_type" in unsolved.to_frame()  # its columns without rows too
    allocation = so.run_mechanism(instance, "tune")
    scored = so.evaluate(instance, allocation).to_frame()
    assert scored["gpu_type"].tolist() == [allocation_type(instance, allocation, job.id) for job in instance.jobs]
    for consolidate in (False, True):
        assert so.solve_joint(instance, consolidate=consolidate).consolidate is consolidate


def allocation_type(instance: HeteroRound, allocation: so.Allocation, job_id: str) -> str:
    """The GPU type of the servers a job runs on (its first placement's)."""
    server = allocation.jobs[job_id][0].server
    return instance.cluster.names[int(instance.cluster.server_types[server])]


@pytest.mark.parametrize("unit", [2.0**-24, 2.0**-40])
def test_the_core_method_is_exact_with_cpus_in_any_unit(unit: float) -> None:
    """A round's CPUs counted in a unit a power of two apart is the same round. The core searches' row slacks
    (1e-9, relative from a capacity of 1 up) read 2^-24 CPUs as ties: a helper's round was called INFEASIBLE,
    another OPTIMAL 0.8% below the optimum, before rows below 1 were lifted (``row_lift``)."""
    for instance in ROUNDS[:60]:
        result = so.solve_ideal(in_cpu_unit(instance, unit), method="core")
        assert result.status is Status.OPTIMAL
        assert result.objective == pytest.approx(brute_force_hetero_ideal(instance), abs=1e-6), instance


def test_a_core_search_that_misses_every_allocation_says_no_solution_and_auto_solves_it() -> None:
    """Grid points 1e-8 of a share off it (a helper's round): the core search found no allocation within its row
    slack and called the round INFEASIBLE, where every job at its baseline share is one."""
    P = so.Profile
    cluster = so.HeteroCluster((so.ServerType("a100", 2, 2, 6.0, 152.16), so.ServerType("k80", 1, 3, 8.981, 187.5)))
    jobs = (
        so.HeteroJob("h0", 2, {"k80": P([0.744179620389218, 1.282220199260811, 2.7254690137547377],
                                        [58.20143940618771, 62.49999998125, 82.7684283485774, 104.0496539218224],
                                        [[5e-07] * 4, [5e-07] * 4, [1.5e-06] * 4])}, "k80"),
        so.HeteroJob("h1", 2, {"a100": P([2.999999994, 4.0, 8.0],
                                         [28.711641628160063, 76.08000015216, 82.8799975491195, 117.50771819585461,
                                          168.9182333094896],
                                         [[3.9042472860805146e-07] + [4.036120896754947e-07] * 4,
                                          [3.9042472860805146e-07] + [4.036120896754947e-07] * 4,
                                          [4.781281807190573e-07] * 5])}, "a100"),
        so.HeteroJob("h2", 2, {"k80": P([2.993666696603333, 4.757805941326097, 6.856539903919268, 10.23791396266155],
                                        [62.500000625, 165.34068547025703],
                                        [[1.1910617007393072e-06, 1.3033243294721139e-06],
                                         [1.18145776248189e-06, 6.249837378111847e-07],
                                         [1.4241685795653035e-06, 1.3486790460570774e-06],
                                         [1.4501817097297756e-06, 5.075397600340882e-07]]),
                               "a100": P([3.00000003], [21.195246222401796, 77.12563049886845],
                                         [[7.44923137848168e-07, 2.5462441340522893e-07]])}, "a100"),
    )
    instance = so.HeteroRound(cluster, jobs)
    optimum = brute_force_hetero_ideal(instance)
    core = so.solve_ideal(instance, method="core")
    assert core.status is not Status.INFEASIBLE
    assert not core.has_solution or core.objective == pytest.approx(optimum, rel=1e-9)
    auto = so.solve_ideal(instance)
    assert auto.status is Status.OPTIMAL and auto.objective == pytest.approx(optimum, rel=1e-9)


def _cpu_unit_round(which: str, k: float) -> HeteroRound:
    """A helper's two rounds (its own generator), every CPU figure times ``k``."""
    P = so.Profile
    if which == "A":
        cluster = so.HeteroCluster((so.ServerType("k80", 1, 3, 9.0 * k, 122.49),
                                    so.ServerType("a100", 2, 1, 1.5 * k, 62.5)))
        jobs = (
            so.HeteroJob("h0", 2, {"k80": P([1.6870227302183407 * k], [103.97419418776157], [[3.502667954731524]])},
                         "k80"),
            so.HeteroJob("h1", 2, {"a100": P([x * k for x in (3.3712345944627753, 4.058185815776857,
                                                              4.173595060335433, 5.103454386111295)],
                                             [21.0, 48.0, 133.0], [[0.25, 0.25, 0.75]] * 4)}, "a100"),
            so.HeteroJob("h2", 1, {"a100": P([1.5 * k], [40.18527289080047], [[0.026377889951373135]]),
                                   "k80": P([6.432581922561579 * k, 6.502496876556042 * k],
                                            [27.488179312679822, 60.31872061779084, 76.04574412161362],
                                            [[4.111458899022284, 4.1961146507587985, 5.716299825020682],
                                             [5.60381591369217, 2.947882993386806, 5.115213888068631]])}, "k80"),
        )
        return so.HeteroRound(cluster, jobs)
    cluster = so.HeteroCluster((so.ServerType("p100", 2, 1, 1.5 * k, 62.5), so.ServerType("k80", 1, 3, 4.5 * k, 30.3),
                                so.ServerType("a100", 2, 3, 9.0 * k, 187.5)), reference="p100")
    jobs = (
        so.HeteroJob("h0", 1, {"a100": P([x * k for x in (0.7729244488776343, 3.047443978087032, 8.104518699682371,
                                                          8.648299446509112)], [20.625, 62.5, 93.75],
                                         [[1.0516075493301005, 1.343373653685294, 1.8884501556459792]] * 4)}, "a100"),
        so.HeteroJob("h1", 2, {"a100": P([2.6784617914796103 * k, 2.8379691332697146 * k], [184.08148933397442],
                                         [[0.6119629961966608], [0.8374871521853968]]),
                               "k80": P([1.5 * k, 2.25 * k, 3.0 * k], [5.05, 10.1, 20.2, 30.3],
                                        [[0.1535035301219888] * 4, [0.20048033064691728] * 4,
                                         [0.8938576933730674] * 4])}, "a100"),
        so.HeteroJob("h2", 1, {"p100": P([x * k for x in (0.12238236829303618, 0.5957037772579185, 0.7666581500342378,
                                                          0.8856093335884174)], [62.5],
                                         [[2.2817495098389777], [2.2817495098389777], [2.2871349431491486],
                                          [2.2871349431491486]])}, "p100"),
        so.HeteroJob("h3", 2, {"a100": P([x * k for x in (0.4655420445498254, 2.0546105900750313, 2.189407085645513,
                                                          2.256387791250233)], [1.0, 39.0, 120.0, 168.0],
                                         [[0.5949827629208504, 0.6424817458620327, 1.4113512865198747,
                                           1.6474109627001596]] * 4),
                               "k80": P([0.22742263343761437 * k, 0.40667430259892456 * k],
                                        [24.850157993667306, 33.307609602593374],
                                        [[0.3066322229094305, 0.8684230960998353]] * 2)}, "k80"),
    )
    return so.HeteroRound(cluster, jobs)


@pytest.mark.parametrize("which", ["A", "B"])
def test_the_helpers_rounds_in_cpus_of_two_to_the_minus_24(which: str) -> None:
    # Before the lift: A called INFEASIBLE (optimum 0.0), B OPTIMAL at 5.74044 (optimum 5.78742).
    optimum = brute_force_hetero_ideal(_cpu_unit_round(which, 1.0))
    result = so.solve_ideal(_cpu_unit_round(which, 2.0**-24), method="core")
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(optimum, abs=1e-9)
