"""The joint model by decomposition: exact pricing, every path against brute force, agreement with the direct
model on generated rounds, and the bound and status contract under limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synergy_opt as so
from synergy_opt.instance import Cluster, Job, Profile, RoundInstance
from synergy_opt.joint.branching import pattern_condition
from synergy_opt.joint.decomposition import _pack, solve_decomposition
from synergy_opt.joint.model import JointReductions, item_columns, server_patterns
from synergy_opt.joint.placing import within_slack
from synergy_opt.joint.pricing import Bonus, ItemTypes, best_patterns, near_patterns
from synergy_opt.joint.solve import JointResult
from synergy_opt.solvers import SolverParams, Status
from tests.test_joint import brute_force_joint, check_allocation, tiny_instances

FUZZ = settings(derandomize=True, deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-6


# ---------------------------------------------------------------------------------------------- pricing
@st.composite
def item_types(draw: st.DrawFn) -> tuple[ItemTypes, np.ndarray]:
    """A small server and up to 6 item types (sizes up to the server's GPUs), with prices, some zero."""
    gpus = draw(st.integers(1, 6))
    cluster = Cluster(1, gpus, float(draw(st.sampled_from([2, 4, 6, 9]))), float(draw(st.sampled_from([3, 5, 8]))))
    count = draw(st.integers(1, 6))
    size = np.array([draw(st.integers(1, gpus)) for _ in range(count)])
    cpu = np.array([draw(st.sampled_from([0.5, 1.0, 1.5, 2.0])) for _ in range(count)])
    mem = np.array([draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in range(count)])
    prices = np.array([draw(st.sampled_from([0.0, 0.3, 1.0, 1.7, 2.5])) for _ in range(count)])
    return ItemTypes(size, cpu, mem, cluster), prices


def all_loads(items: ItemTypes, caps: np.ndarray) -> np.ndarray:
    """Every load with ``a <= caps`` that fits the server (not only the maximal ones), by enumeration."""
    grids = np.meshgrid(*[np.arange(c + 1) for c in caps], indexing="ij")
    loads = np.stack([g.ravel() for g in grids], axis=1)
    return loads[items.fits(loads)]


@FUZZ
@given(item_types())
def test_pricing_is_the_best_load_of_a_server(case: tuple[ItemTypes, np.ndarray]) -> None:
    items, prices = case
    loose = np.full(prices.size, items.cluster.gpus_per_server)  # a server never holds more items than GPUs
    tight = loose.copy()
    tight[::2] = 1
    for caps in (loose, tight):  # caps implied by the capacity (the levels' pass) and caps that bind
        loads = all_loads(items, caps)
        priced = best_patterns(items, prices, caps, count=3)
        assert priced.value == pytest.approx(float((loads @ prices).max()), abs=1e-9)
        # Every pattern returned fits, is worth what it says, and the first is the best.
        assert items.fits(priced.patterns).all() and np.all(priced.patterns <= caps)
        assert np.allclose(priced.patterns @ prices, priced.values)
        assert priced.values[0] == pytest.approx(priced.value)


@st.composite
def bonuses(draw: st.DrawFn, types: int, most: int) -> Bonus:
    """Up to 4 conditions of 1-3 components ``a[t] >= k``, each paying or costing a value (the branch rows')."""
    conditions = []
    for _ in range(draw(st.integers(0, 4))):
        parts = draw(st.lists(st.tuples(st.integers(0, types - 1), st.integers(1, most)), min_size=1, max_size=3,
                              unique_by=lambda c: c[0]))
        conditions.append(tuple(parts))
    value = [draw(st.sampled_from([-2.0, -0.4, 0.3, 1.1])) for _ in conditions]
    return Bonus.of_conditions(conditions, np.array(value))


@settings(FUZZ, max_examples=200)
@given(item_types(), st.data(), st.sampled_from([0.0, 0.5, 1.0]))
def test_pricing_with_a_bonus_and_a_value_to_beat(case: tuple[ItemTypes, np.ndarray], data: st.DataObject,
                                                  beat_share: float) -> None:
    """The branch-and-price's pricing: rows on the patterns add a bonus; only values above ``beat`` are sought
    (below it, ``beat`` stands for the best value)."""
    items, prices = case
    caps = np.full(prices.size, items.cluster.gpus_per_server)
    caps[1::2] = 2
    bonus = data.draw(bonuses(prices.size, items.cluster.gpus_per_server))
    loads = all_loads(items, caps)
    worth = loads @ prices + (bonus.of(loads) if bonus.value.size else 0.0)
    best = float(worth.max())
    beat = beat_share * max(best, 0.0)
    priced = best_patterns(items, prices, caps, count=3, bonus=bonus, beat=beat)
    assert priced.value == pytest.approx(max(best, beat), abs=1e-9)
    if best > beat + 1e-9:  # the patterns found are worth what they say, the best first
        assert items.fits(priced.patterns).all() and np.all(priced.patterns <= caps)
        found = priced.patterns @ prices + (bonus.of(priced.patterns) if bonus.value.size else 0.0)
        assert np.allclose(found, priced.values) and priced.values[0] == pytest.approx(best)


@FUZZ
@given(item_types(), st.floats(0.0, 1.0), st.integers(0, 3))
def test_near_patterns_are_every_maximal_load_worth_enough(case: tuple[ItemTypes, np.ndarray], share: float,
                                                            cap: int) -> None:
    items, prices = case
    caps = np.minimum(np.full(prices.size, cap + 1), items.cluster.gpus_per_server)
    best = float((all_loads(items, caps) @ prices).max())
    floor = share * best
    found = near_patterns(items, prices, floor, caps, limit=10_000)
    assert found is not None
    maximal = server_patterns(items.cluster, items.size, items.cpu, items.mem, caps, limit=10_000)
    assert maximal is not None
    expected = {tuple(p) for p in maximal if p @ prices >= floor - 1e-9}
    assert {tuple(p) for p in found} == expected


def fewest_servers(loads: np.ndarray, demand: np.ndarray) -> float:
    """The fewest servers whose loads (any of ``loads``, each as often as wanted) hold ``demand``: a MILP over
    every load listed."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    count = len(loads)
    h.addVars(count, np.zeros(count), np.full(count, highspy.kHighsInf))
    h.changeColsCost(count, np.arange(count, dtype=np.int32), np.ones(count))
    h.changeColsIntegrality(count, np.arange(count, dtype=np.int32), np.full(count, highspy.HighsVarType.kInteger))
    for t in np.flatnonzero(demand):
        at = np.flatnonzero(loads[:, t])
        h.addRow(float(demand[t]), highspy.kHighsInf, at.size, at.astype(np.int32), loads[at, t].astype(float))
    h.run()
    return float(h.getInfo().objective_function_value)


@settings(FUZZ, max_examples=400)
@given(tiny_instances(max_servers=3), st.booleans(), st.data())
def test_configs_are_placed_exactly_when_some_placement_holds_them(instance: RoundInstance, consolidate: bool,
                                                                   data: st.DataObject) -> None:
    """The tree's heuristic (:func:`_pack`): given each job's config, a valid placement on the servers or None;
    None whenever no placement exists (against a MILP over every load); and with the maximal loads listed (few
    here), or with CP-SAT on the round's integer grid, a placement whenever one exists."""
    items = item_columns(instance, consolidate, 0.0, "job", JointReductions())
    types = ItemTypes(items.item_size, items.item_cpu, items.item_mem, instance.cluster)
    cols = items.columns
    y = np.zeros(cols.cls.size)
    for q in range(cols.count.size):
        mine = np.flatnonzero(cols.cls == q)
        if not mine.size:
            return  # a job that fits no server: nothing to place
        for _ in range(int(cols.count[q])):
            y[data.draw(st.sampled_from(mine.tolist()))] += 1
    demand = np.bincount(items.col_item, weights=items.units * y, minlength=items.item_size.size).astype(np.int64)
    loads = all_loads(types, np.minimum(demand, items.per_server))
    fits = fewest_servers(loads[loads.any(axis=1)], demand) <= instance.cluster.servers + 1e-9
    servers = instance.cluster.servers
    # Priced loads only; then every maximal load listed too; then CP-SAT when the loads lie on a grid.
    for listed, grid in ((0, None), (10_000, None), (0, types.grid)):
        packed = _pack(items, types, y, np.diag(items.per_server), servers, seconds=30.0, listed=listed, grid=grid)
        assert packed is None or fits
        if listed or grid is not None:
            assert (packed is not None) == fits
        if packed is not None:
            x, patterns = packed
            assert types.fits(patterns).all() and np.all(patterns <= items.per_server)
            assert np.all(x >= 0) and np.allclose(x, np.rint(x)) and x.sum() <= servers
            assert np.all(patterns.T @ x >= demand)


@settings(FUZZ, max_examples=150)
@given(st.integers(2, 4).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3).filter(any), min_size=n, max_size=n),
    st.lists(st.integers(0, 5), min_size=3, max_size=3), st.integers(1, 3))))
def test_loads_beyond_the_slack_are_on_no_placement(case: tuple[list[list[int]], list[int], int]) -> None:
    """:func:`within_slack` with the duals of the LP of the fewest servers keeps every load some placement of the
    demand on at most ``servers`` servers uses (every placement enumerated)."""
    import itertools

    from scipy.optimize import linprog

    loads, demand, servers = np.array(case[0]), np.array(case[1], dtype=float), case[2]
    lp = linprog(np.ones(len(loads)), A_ub=-loads.T, b_ub=-demand, bounds=(0, None), method="highs")
    if lp.status != 0:
        return
    kept = {tuple(p) for p in within_slack(loads, -lp.ineqlin.marginals, demand, servers)}
    for x in itertools.product(range(servers + 1), repeat=len(loads)):
        x = np.array(x)
        if x.sum() <= servers and np.all(loads.T @ x >= demand):
            assert all(tuple(p) in kept for p in loads[x > 0])


# ---------------------------------------------------------------------------------------------- every path
PATHS = {
    "whole method": {},
    "heuristic incumbent only": {"prove": False},
    # No heuristics and no early stop: the branch-and-price finds every incumbent in its own leaves, splitting on
    # job columns first, or on counts of servers first, or on patterns first (conditions of several components).
    "forced branching": {"heuristics": False, "stop_early": False},
    "forced branching on counts": {"heuristics": False, "stop_early": False, "rules": ("count", "pattern", "column")},
    "forced branching on patterns": {"heuristics": False, "stop_early": False, "rules": ("pattern", "column")},
}


def decompose(instance: RoundInstance, path: str, **options: object) -> JointResult:
    params = SolverParams(mip_gap=0.0)
    kwargs = {"consolidate": True, "split_penalty": 0.0, "objective": "job", "reductions": JointReductions()}
    kwargs.update(options)
    joint, result, report = solve_decomposition(instance, params, **kwargs, **PATHS[path])  # type: ignore[arg-type]
    return JointResult(status=result.status, objective=result.objective, bound=result.bound, joint=joint,
                       solve=result, method="decomposition", report=report)


@settings(FUZZ, max_examples=120)
@given(tiny_instances(), st.booleans(), st.sampled_from([0.0, 0.25]), st.sampled_from(["job", "gpu"]),
       st.sampled_from(list(PATHS)))
def test_every_path_equals_brute_force(instance: RoundInstance, consolidate: bool, split_penalty: float, kind: str,
                                       path: str) -> None:
    expected = brute_force_joint(instance, consolidate, split_penalty)
    if kind == "gpu" and expected is not None:
        expected = so.solve_joint(instance, consolidate=consolidate, split_penalty=split_penalty, objective="gpu",
                                  mip_gap=0.0, method="direct").objective
    result = decompose(instance, path, consolidate=consolidate, split_penalty=split_penalty, objective=kind)
    if expected is None:
        assert result.status in (Status.INFEASIBLE, Status.NO_SOLUTION) if path != "whole method" \
            else result.status is Status.INFEASIBLE
        return
    if result.status is Status.OPTIMAL or path != "heuristic incumbent only":
        assert result.status is Status.OPTIMAL, (path, result.solve.message)
        assert result.objective == pytest.approx(expected, abs=TOL)
    if result.has_solution:
        assert result.objective is not None and result.bound is not None
        assert result.objective <= expected + TOL <= result.bound + 2 * TOL
        check_allocation(instance, result)
    else:
        assert result.bound is None or result.bound >= expected - TOL


def test_a_pattern_split_counts_a_fractional_number_of_servers() -> None:
    """Every single count is whole (servers with type 0: 1, with type 1: 1), yet the pattern (1, 1) is used
    half: the condition "a >= (1, 1)" counts it alone, and dropping either component makes the count whole.
    With a whole server of (2, 1) on top, the same condition counts 1.5 servers."""
    patterns = np.array([[1, 1], [1, 0], [0, 1]])
    x = np.array([0.5, 0.5, 0.5])
    condition, value = pattern_condition(patterns, x)
    assert condition == ((0, 1), (1, 1)) and value == pytest.approx(0.5)
    condition, value = pattern_condition(np.vstack([patterns, [[2, 1]]]), np.r_[x, 1.0])
    assert condition == ((0, 1), (1, 1)) and value == pytest.approx(1.5)


@pytest.mark.parametrize("multi_gpu", [False, True])
def test_splits_on_patterns_reach_the_direct_optimum(multi_gpu: bool) -> None:
    """A forced branching on patterns first (rows over conditions of several components, a flag per component
    in the pricing) on rounds where it splits several times."""
    instance = so.generate_round(16, multi_gpu=multi_gpu, seed=3, profile_noise=0.05)
    direct = so.solve_joint(instance, consolidate=True, method="direct", mip_gap=1e-9)
    result = decompose(instance, "forced branching on patterns")
    assert result.status is Status.OPTIMAL and "on patterns" in result.solve.message
    assert result.objective == pytest.approx(direct.objective, rel=1e-9)
    check_allocation(instance, result)


# ---------------------------------------------------------------------------------------------- generated rounds
@pytest.mark.parametrize(("gpus", "multi_gpu", "noise", "seed"), [
    (32, True, 0.0, 0), (64, False, 0.0, 1), (128, True, 0.0, 2),
    (16, True, 0.05, 2), (16, False, 0.05, 0), (24, True, 0.05, 0), (32, False, 0.05, 1),
])
def test_same_optimum_as_the_direct_model(gpus: int, multi_gpu: bool, noise: float, seed: int) -> None:
    instance = so.generate_round(gpus, multi_gpu=multi_gpu, seed=seed, profile_noise=noise)
    for consolidate in (True, False):
        direct = so.solve_joint(instance, consolidate=consolidate, method="direct", mip_gap=1e-9, time_limit=600)
        assert direct.status is Status.OPTIMAL and direct.objective is not None
        ours = so.solve_joint(instance, consolidate=consolidate, method="decomposition", mip_gap=1e-9)
        assert ours.bound is not None and ours.objective is not None
        assert ours.bound >= direct.objective - 1e-6 >= ours.objective - 2e-6
        if ours.status is Status.OPTIMAL:
            assert ours.objective == pytest.approx(direct.objective, rel=1e-6)
        else:  # the proof may stop at its pattern limit: then say so, with the gap it has
            assert ours.status is Status.FEASIBLE and "gap open" in ours.solve.message
        check_allocation(instance, ours)


@pytest.mark.parametrize(("gpus", "multi_gpu", "seed"), [(16, True, 2), (16, False, 0), (32, False, 1)])
@pytest.mark.parametrize("path", ["whole method", "forced branching"])
def test_a_loose_gap_still_reports_a_bound_on_every_solution(gpus: int, multi_gpu: bool, seed: int, path: str
                                                              ) -> None:
    """With ``mip_gap`` 2% the tree closes nodes and fixes columns early; the bound it reports must still be at
    least the true optimum (not merely within the gap of it), and the objective within the gap."""
    instance = so.generate_round(gpus, multi_gpu=multi_gpu, seed=seed, profile_noise=0.05)
    direct = so.solve_joint(instance, consolidate=True, method="direct", mip_gap=1e-9, time_limit=600)
    assert direct.status is Status.OPTIMAL and direct.objective is not None
    params = SolverParams(mip_gap=0.02)
    _, result, _ = solve_decomposition(instance, params, consolidate=True, split_penalty=0.0, objective="job",
                                       reductions=JointReductions(), **PATHS[path])  # type: ignore[arg-type]
    assert result.status is Status.OPTIMAL and result.objective is not None and result.bound is not None
    assert result.bound >= direct.objective - 1e-6
    assert result.objective >= direct.objective * (1 - 0.02) - 1e-6


@pytest.mark.parametrize("multi_gpu", [False, True])
def test_bound_contract_under_a_time_limit(multi_gpu: bool) -> None:
    instance = so.generate_round(256, multi_gpu=multi_gpu, seed=1, profile_noise=0.05)
    ideal = so.solve_ideal(instance)
    lp = so.solve_ideal(instance, relax=True).objective
    assert ideal.bound is not None and lp is not None
    # The longer limit first: its run compiles the numba kernels, which in a fresh environment's worker (nothing
    # cached yet) took the whole of the 0.3 s before any incumbent (CI: NO_SOLUTION once).
    for limit in (3.0, 0.3):
        result = so.solve_joint(instance, time_limit=limit)
        assert result.method == "decomposition"
        assert result.status in (Status.OPTIMAL, Status.FEASIBLE), result.solve.message
        assert result.objective is not None and result.bound is not None
        assert result.objective <= result.bound + TOL
        # The ideal ILP's bound as far as the run's own ideal solve got: the ideal's proven one when it finished
        # (a loaded machine cut it short at 0.3 s once: 176.579, between the ILP's 176.559 and the LP's 176.625).
        assert result.bound <= lp + TOL
        if result.status is Status.OPTIMAL:
            assert result.bound <= ideal.bound + TOL
        assert result.gap is not None and result.gap >= 0
        check_allocation(instance, result)


def test_bound_is_tighter_than_the_ideal_on_multi_gpu_rounds() -> None:
    """Packing jobs whole on servers costs multi-GPU rounds; the pattern bound sees it, the ideal ILP cannot."""
    instance = so.generate_round(128, multi_gpu=True, seed=0, profile_noise=0.05)
    result = decompose(instance, "heuristic incumbent only")  # the column generation runs to its end
    assert result.report is not None and result.report.lp_bound is not None
    assert result.bound is not None and result.report.ideal_bound is not None
    assert result.bound <= result.report.lp_bound + TOL
    assert result.report.lp_bound < result.report.ideal_bound * (1 - 1e-3)


def test_no_solution_only_when_no_incumbent_exists() -> None:
    """Three 5-GPU jobs cannot be consolidated on two 8-GPU servers: the decomposition proves it."""
    profile = so.builtin_profile("gnmt")
    instance = RoundInstance(Cluster(2, 8, 24, 500), tuple(so.Job(f"j{i}", 5, profile) for i in range(3)))
    result = so.solve_joint(instance, consolidate=True, method="decomposition")
    assert result.status is Status.INFEASIBLE and result.allocation is None
    assert so.solve_joint(instance, consolidate=False, method="decomposition").objective == pytest.approx(3.0)


# ---------------------------------------------------------------------------------------------- the method switch
def test_auto_chooses_direct_when_patterns_can_be_listed_and_decomposition_otherwise() -> None:
    plain = so.generate_round(64, multi_gpu=True, seed=0)
    noisy = so.generate_round(64, multi_gpu=True, seed=0, profile_noise=0.05)
    assert so.solve_joint(plain).method == "direct"
    assert so.solve_joint(noisy, time_limit=2).method == "decomposition"
    # Noisy jobs whose loads could be listed (few item types: memory-bound models) still take the decomposition.
    memory = so.member_round("single-memory", 64, seed=0, profile_noise=0.1)
    assert so.solve_joint(memory, time_limit=2).method == "decomposition"
    # What the decomposition cannot take goes direct under auto, and is refused when asked for by name.
    no_floor = JointReductions(merge_identical=False, fix_below_floor=False)
    assert so.solve_joint(noisy, reductions=no_floor, time_limit=1).method == "direct"
    with pytest.raises(so.InvalidInputError, match="method"):
        so.solve_joint(noisy, reductions=no_floor, method="decomposition")
    with pytest.raises(so.InvalidInputError, match="method"):
        so.solve_joint(noisy, formulation="servers", method="decomposition")
    with pytest.raises(so.InvalidInputError, match="method"):
        so.solve_joint(noisy, method="branch")  # type: ignore[arg-type]


def test_auto_leaves_a_round_of_many_server_loads_to_the_decomposition() -> None:
    # Alike jobs (four classes) whose 16-GPU servers have more than AUTO_DIRECT_PATTERNS maximal loads (4,534):
    # the direct patterns model took 21 s of HiGHS, the decomposition proves the optimum in about 0.05 s.
    def job(name: str, gpus: int, cpu: list[float], mem: list[float], tput: list[list[float]]) -> Job:
        return Job(name, gpus, Profile(np.array(cpu), np.array(mem), np.array(tput)))

    instance = RoundInstance(Cluster(2, 16, 37, 500), (
        job("j0", 2, [4.0], [10.0, 20.83, 40.0], [[0.8, 0.8, 0.9]]),
        job("j1", 13, [3.0], [10.0], [[1.2]]),
        job("j2", 4, [12.0], [62.5, 250.0], [[0.8, 0.8]]),
        job("j3", 8, [3.0, 4.0], [62.5, 250.0], [[2.6, 2.6], [2.6, 2.7]])))
    result = so.solve_joint(instance)
    assert result.method == "decomposition" and result.status is Status.OPTIMAL
    servers = so.solve_joint(instance, method="direct", formulation="servers")  # the other formulation, 0.01 s
    assert servers.status is Status.OPTIMAL and result.objective == pytest.approx(servers.objective, rel=1e-9)
    # Every grid starts above the share (2.3 CPUs a GPU): every floor is 0, so j2 (48 CPUs for 0.8) may be given
    # no CPUs or memory (with_zero_config) and the others theirs: j3 2.6 + j1 1.2 + j0 0.9 (it was 3.5: j3 and j0,
    # j1 and j2 at their shares, worth 0).
    assert result.objective == pytest.approx(4.7)


def test_report_and_timings() -> None:
    instance = so.generate_round(32, seed=2, profile_noise=0.05)
    result = so.solve_joint(instance, method="decomposition", time_limit=5)
    assert result.report is not None and result.report.first_incumbent_seconds is not None
    assert result.solve_seconds >= 0 and result.build_seconds >= 0
    assert result.formulation == "decomposition" and result.solver == "highs-decomposition"
    assert math.isfinite(result.report.phases["ideal"])


def test_empty_round() -> None:
    result = so.solve_joint(RoundInstance(Cluster(2), ()), method="decomposition")
    assert result.status is Status.OPTIMAL and result.objective == 0


def test_items_of_the_decomposition_are_the_models() -> None:
    instance = so.generate_round(32, multi_gpu=True, seed=1, profile_noise=0.05)
    items = item_columns(instance, True, 0.0, "job", JointReductions())
    joint = so.joint.build_joint(instance, consolidate=True, formulation="servers")
    assert np.array_equal(items.col_item, joint.col_item) and np.array_equal(items.weight, joint.col_weight)


# ---------------------------------------------------------------------------------------------- the bench's % joint
def test_bench_compares_with_the_bound_when_no_optimum_is_proven() -> None:
    from rich.console import Console

    from synergy_opt.bench import add_references, medians
    from synergy_opt.bench.table import render_table

    def row(instance: str, mechanism: str, status: str, objective: float, bound: float | None) -> dict[str, object]:
        return {"gpus": 8, "trace": "multi", "instance": instance, "mechanism": mechanism, "solver": "highs",
                "status": status, "valid": True, "objective": objective, "bound": bound, "round_ms": 1.0}

    rows = add_references([row("a", "joint", "feasible", 9.0, 10.0), row("a", "tune", "heuristic", 8.0, None),
                           row("b", "joint", "optimal", 9.5, 9.5), row("b", "tune", "heuristic", 9.5, None)])
    tune = {r["instance"]: r for r in rows if r["mechanism"] == "tune"}
    assert tune["a"]["joint_ref"] == "bound" and tune["a"]["pct_joint"] == pytest.approx(80.0)
    assert tune["b"]["joint_ref"] == "optimum" and tune["b"]["pct_joint"] == pytest.approx(100.0)
    summary = medians(rows)
    assert {s["mechanism"]: s["joint_ref"] for s in summary} == {"joint": "bound", "tune": "bound"}
    console = Console(width=300, record=True)
    console.print(render_table(summary))
    text = console.export_text()
    assert ">=90.0" in text and "proven bound" in text


@pytest.mark.parametrize("instance", [
    # Every config worth 0; a job whose grid needs more memory than the server has (only the proportional
    # point, worth 0, fits). The bound is 0 with no incumbent yet: the target trees once aimed at 0 forever.
    RoundInstance(Cluster(1, 2, 4.0, 4.0), tuple(so.Job(f"j{i}", 1, so.Profile(np.array([1.0]), np.array([1.0]),
                                                                                np.array([[0.0]]))) for i in range(2))),
    RoundInstance(Cluster(1, 1, 2.0, 1.0), (so.Job("j0", 1, so.Profile(np.array([0.5]), np.array([2.0, 4.0]),
                                                                        np.array([[1.5, 1.5]]))),)),
], ids=["all-zero", "grid-above-memory"])
def test_a_round_worth_nothing_ends_at_once_on_every_path(instance: RoundInstance) -> None:
    for path in PATHS:
        result = decompose(instance, path)
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(0.0), (path, result.solve.message)
        assert result.solve.solve_seconds < 5.0  # not a time limit: there is none


def test_an_upper_bound_below_a_placement_is_an_input_error() -> None:
    instance = so.generate_round(16, multi_gpu=True, seed=3, profile_noise=0.05)
    optimum = so.solve_joint(instance, method="decomposition").objective
    assert optimum is not None
    with pytest.raises(so.InvalidInputError, match="upper_bound"):
        so.solve_joint(instance, method="decomposition", upper_bound=0.9 * optimum)
    at_optimum = so.solve_joint(instance, method="decomposition", upper_bound=optimum)
    assert at_optimum.status is Status.OPTIMAL and at_optimum.objective == pytest.approx(optimum)


def test_a_node_beyond_the_pricing_flags_stays_open_with_a_valid_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Splits on patterns add pricing flags along a path; past the limit the node is left open (the tree ends
    incomplete, its bound still a bound) instead of the pricing failing."""
    import synergy_opt.joint.branching as branching

    monkeypatch.setattr(branching, "MAX_FLAGS", 2)
    instance = so.generate_round(16, multi_gpu=True, seed=3, profile_noise=0.05)
    direct = so.solve_joint(instance, consolidate=True, method="direct", mip_gap=1e-9, time_limit=600)
    assert direct.status is Status.OPTIMAL and direct.objective is not None
    result = decompose(instance, "forced branching on patterns")
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE), result.solve.message
    assert result.bound is not None and result.bound >= direct.objective - 1e-6
    if result.status is Status.FEASIBLE:
        assert "gap open" in result.solve.message
    if result.has_solution:
        assert result.objective is not None and result.objective <= direct.objective + 1e-6
        check_allocation(instance, result)


# -- issue 22: a start (near-opt's allocation) -------------------------------------------------------------------
def test_a_start_is_an_incumbent_and_never_changes_the_optimum() -> None:
    """With near-opt's allocation as the start the decomposition proves the same optimum (within the gap) and
    never returns less than the start; a start meeting the ideal bound needs no model at all (``auto``)."""
    instance = so.generate_round(64, multi_gpu=True, seed=1, profile_noise=0.05)
    near = so.run_mechanism(instance, "near-opt")
    value = so.evaluate(instance, near).objective
    plain = so.solve_joint(instance, consolidate=False, method="decomposition", time_limit=120)
    started = so.solve_joint(instance, consolidate=False, method="decomposition", start=near, time_limit=120)
    assert plain.status is Status.OPTIMAL and started.status is Status.OPTIMAL
    assert started.objective >= value - 1e-9 * (1 + value)
    assert started.objective == pytest.approx(plain.objective, rel=2e-4)
    assert started.evaluation is not None and started.evaluation.valid
    # The start as its own proof: it meets the bound when it is the ideal ILP's optimum's placement.
    single = so.generate_round(32, seed=2)
    optimum = so.solve_joint(single, consolidate=False)
    quick = so.solve_joint(single, consolidate=False, start=optimum.allocation)
    assert quick.status is Status.OPTIMAL and quick.objective == pytest.approx(optimum.objective, rel=1e-4)


def test_auto_keeps_the_start_when_the_direct_model_stops_without_better() -> None:
    """``auto`` on a round whose patterns it lists solves the direct model after checking the start; stopped by
    the time limit before it finds anything as good, it returns the start (FEASIBLE, the tighter bound), never
    NO_SOLUTION or less than the start."""
    instance = so.member_round("multi", 128, seed=2, profile_noise=0.0)  # alike jobs: auto goes direct
    near = so.run_mechanism(instance, "near-opt")
    value = so.evaluate(instance, near).objective
    # Without a start, the first incumbent is the start: the direct model stops without a solution.
    plain = so.solve_joint(instance, consolidate=False, time_limit=0.02)
    assert plain.status is Status.FEASIBLE and "the first incumbent kept" in plain.solve.message
    assert plain.evaluation is not None and plain.evaluation.valid
    started = so.solve_joint(instance, consolidate=False, time_limit=0.02, start=near)
    assert started.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert started.evaluation is not None and started.evaluation.valid
    assert started.objective is not None and started.objective >= value * (1 - 1e-9)
    assert started.bound is not None and started.bound >= started.objective and started.gap is not None


def test_a_start_that_is_not_a_valid_allocation_is_named() -> None:
    instance = so.generate_round(16, seed=0)
    greedy = so.Allocation({job.id: (so.Placement(0, job.gpus, 1000.0, 1.0),) for job in instance.jobs})
    with pytest.raises(so.InvalidInputError) as raised:
        so.solve_joint(instance, start=greedy)
    assert raised.value.field == "start"
    other = so.generate_round(16, seed=5, multi_gpu=True)
    with pytest.raises(so.InvalidInputError):
        so.solve_joint(instance, start=so.run_mechanism(other, "near-opt"))
    with pytest.raises(so.InvalidInputError) as raised:
        so.solve_joint(instance, start="near-opt")  # type: ignore[arg-type]
    assert raised.value.field == "start"


def test_a_gap_below_the_ideal_ilps_default_is_proven() -> None:
    """A tester's round: its optimum is placed at once, but the bound came from the ideal ILP at its own default gap
    (1e-6), so at mip_gap 1e-9 the decomposition ran to its time limit and said FEASIBLE. The ideal ILP is solved
    within the joint's gap when that is tighter."""
    instance = so.load_instance({
        "format": "synergy-round/1",
        "cluster": {"servers": 2, "gpus_per_server": 8, "cpus_per_server": 40, "mem_gb_per_server": 2884},
        "jobs": [
            {"id": "j0", "gpus": 5, "profile": {"cpu_per_gpu": [1.5, 6.75, 12.0], "mem_gb_per_gpu": [90.0, 650.0, 750.0, 910.0], "tput": [[0.160965, 0.0359918, 0.0541014, 0.274922], [0.0973588, 0.0439572, 0.0338927, 0.324619], [0.0459721, 0.0538189, 0.120941, 0.412017]]}},  # noqa: E501
            {"id": "j1", "gpus": 1, "profile": {"cpu_per_gpu": [4.5, 8.0], "mem_gb_per_gpu": [150.0, 300.0, 340.0, 940.0], "tput": [[0.401248, 0.357893, 0.273747, 0.0706495], [0.3545, 0.154929, 0.341961, 0.0639581]]}},  # noqa: E501
            {"id": "j2", "gpus": 2, "profile": {"cpu_per_gpu": [2.0, 6.0, 8.0], "mem_gb_per_gpu": [20.0, 90.0, 670.0], "tput": [[0.00137452, 0.00114688, 0.00193598], [0.00255072, 0.00437454, 0.000459994], [0.00146223, 0.0062371, 0.00249152]]}},  # noqa: E501
            {"id": "j3", "gpus": 8, "profile": {"cpu_per_gpu": [1.0, 6.0, 8.0, 9.0], "mem_gb_per_gpu": [192.5, 607.5, 630.0, 727.5], "tput": [[62.5781] * 4] * 4}},  # noqa: E501
        ],
    })
    exact = so.solve_ideal(instance, method="direct", mip_gap=0.0)
    assert exact.status is Status.OPTIMAL and exact.objective is not None
    for gap in (1e-7, 1e-9):
        result = so.solve_joint(instance, mip_gap=gap, method="decomposition", time_limit=60)
        assert result.status is Status.OPTIMAL, gap
        assert result.objective == pytest.approx(exact.objective, rel=1e-12)
        assert result.bound is not None and result.bound <= result.objective * (1 + gap) + 1e-12
