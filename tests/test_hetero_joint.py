"""The joint model of heterogeneous rounds (issue 20, formulations/heterogeneous.md HJ1-HJ7): brute force on tiny
noisy rounds of 2-3 types, type-fixed = today's joint per type, one type = today's, the bound chain."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import InvalidAllocationWarning
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_model import job_classes
from synergy_opt.joint import hetero_bp
from synergy_opt.joint.hetero_bp import TypeIdeals, fit_types, prove_across_types, typed_columns
from synergy_opt.joint.hetero_master import TypedMaster
from synergy_opt.joint.hetero_model import build_hetero_joint, type_shares
from synergy_opt.joint.hetero_solve import HeteroJointResult
from synergy_opt.joint.master import ColumnGeneration
from synergy_opt.joint.model import JointReductions
from synergy_opt.solvers import SolverParams, Status, solve_model
from tests.hetero_instances import brute_force_hetero_joint, random_hetero_round

TINY = [random_hetero_round(np.random.default_rng(seed), max_jobs=4) for seed in range(60)]


def check(instance: HeteroRound, result: HeteroJointResult) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidAllocationWarning)
        evaluation = result.evaluation
    assert evaluation is not None and evaluation.valid and evaluation.unplaced == ()
    assert evaluation.floors_violated == ()
    assert evaluation.objective == pytest.approx(result.objective, abs=1e-6)


@pytest.mark.parametrize("consolidate", [True, False])
def test_type_free_joint_equals_brute_force(consolidate: bool) -> None:
    for instance in TINY:
        expected = brute_force_hetero_joint(instance, consolidate)
        result = so.solve_joint(instance, consolidate=consolidate, method="direct", mip_gap=0.0)
        if expected is None:
            assert result.status is Status.INFEASIBLE
            continue
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(expected, abs=1e-6), instance
        check(instance, result)


def test_the_servers_formulation_and_unreduced_model_agree() -> None:
    for instance in TINY[:30]:
        expected = brute_force_hetero_joint(instance)
        if expected is None:
            continue
        servers = build_hetero_joint(instance, pattern_limit=0)
        assert all(share.patterns is None for share in servers.shares)
        result = solve_model(servers.model, "highs", SolverParams(mip_gap=0.0))
        assert result.objective == pytest.approx(expected, abs=1e-6)
        plain = so.solve_joint(instance, method="direct", mip_gap=0.0,
                               reductions=JointReductions(merge_identical=False, fix_below_floor=False))
        assert plain.objective == pytest.approx(expected, abs=1e-6)


def test_ideal_bounds_joint_bounds_mechanisms() -> None:
    """ideal ILP >= joint >= every floor-keeping mechanism, per round (the joint without consolidation: OPT's
    rounding may split a job that fits one server)."""
    for instance in TINY[:40]:
        joint = so.solve_joint(instance, consolidate=False, method="direct", mip_gap=0.0)
        if joint.objective is None:
            continue
        ideal = so.solve_ideal(instance)
        assert ideal.objective is not None and ideal.objective >= joint.objective - 1e-7
        for name in ("proportional", "tune", "opt", "near-opt"):
            assert so.evaluate(instance, so.run_mechanism(instance, name)).objective <= joint.objective + 1e-7


def test_a_type_fixed_round_is_todays_joint_per_type_summed() -> None:
    for instance in TINY[:30]:
        fixed = instance.at_baseline()
        per_type = so.solve_joint(fixed, mip_gap=0.0)
        assert per_type.method == "per-type" and per_type.status is Status.OPTIMAL
        summed = sum(so.solve_joint(sub, mip_gap=0.0).objective or 0.0 for sub in fixed.per_type().values()
                     if sub.jobs)
        assert per_type.objective == pytest.approx(summed, abs=1e-9)
        assert summed == pytest.approx(brute_force_hetero_joint(fixed), abs=1e-6)
        assert so.solve_joint(fixed, method="direct", mip_gap=0.0).objective == pytest.approx(summed, abs=1e-6)
        check(fixed, per_type)


def test_one_type_is_todays_joint() -> None:
    instance = so.generate_round(16, multi_gpu=True, seed=3, profile_noise=0.05)
    one = so.solve_joint(HeteroRound.homogeneous(instance))
    plain = so.solve_joint(instance)
    assert one.objective == plain.objective and one.allocation == plain.allocation


@pytest.mark.parametrize("consolidate", [True, False])
def test_the_decomposition_proves_the_optimum_across_types(consolidate: bool) -> None:
    """The type choices, then the branch-and-price across types: the brute force's optimum, proven, on every tiny
    round (the type choices alone left 6 of 30 unproven, their fragmentation keeping every choice below the
    type-free ideal bound)."""
    across = 0
    for instance in TINY:
        expected = brute_force_hetero_joint(instance, consolidate)
        result = so.solve_joint(instance, consolidate=consolidate, method="decomposition", mip_gap=1e-9)
        if expected is None:
            assert result.status in (Status.INFEASIBLE, Status.NO_SOLUTION)
            continue
        assert result.status is Status.OPTIMAL, result.message
        assert result.objective == pytest.approx(expected, abs=1e-6)
        assert result.bound is not None and result.bound >= expected - 1e-7
        across += "across types" in result.message
        check(instance, result)
    assert across  # some rounds needed the branch-and-price across types


def test_the_branch_and_price_across_types_alone_finds_the_optimum() -> None:
    """With no incumbent given, its own nodes find the optimum: integral LP solutions and placed configs; jobs
    spread over types are split on their type."""
    splits = 0
    for instance in TINY[:30]:
        expected = brute_force_hetero_joint(instance, False)
        typed = typed_columns(instance, False, 0.0, "job", JointReductions())
        ideal = so.solve_ideal(instance, mip_gap=0.0)
        if expected is None or ideal.bound is None:
            continue
        proof = prove_across_types(instance, typed, -math.inf, ideal.bound, 1e-9, None)
        assert proof.outcome.complete and proof.allocation is not None
        assert proof.value == pytest.approx(expected, abs=1e-6) and proof.bound >= expected - 1e-7
        score = so.evaluate(instance, proof.allocation)
        assert score.valid and score.objective == pytest.approx(expected, abs=1e-6)
        splits += proof.outcome.splits.get("type", 0)
    assert splits


def test_a_types_ideal_configs_are_its_columns_worth_its_ideal_optimum() -> None:
    """``TypeIdeals``: each type's jobs (the ideal ILP's types) on that type's ideal configs, as job columns of the
    master across types, of that type and worth that type's ideal ILP optimum (None when a config is no column:
    no server holds it); solved once per type and jobs."""
    checked = 0
    for instance in TINY[:30]:
        ideal = so.solve_ideal(instance, mip_gap=0.0)
        if not ideal.has_solution:
            continue
        typed = typed_columns(instance, False, 0.0, "job", JointReductions())
        ideals = TypeIdeals(instance, typed, 1e-9)
        names = list(ideal.gpu_types)
        rounds = instance.per_type_of(names)
        for position, name in enumerate(typed.names):
            jobs = np.flatnonzero(np.array(names) == name)
            columns = ideals.of_type(position, jobs, names, None)
            assert ideals.of_type(position, jobs, names, None) is columns
            if columns is None:  # a config no server holds (the ideal ILP pools each type's servers)
                continue
            assert columns.size == jobs.size
            if not jobs.size:
                continue
            assert np.all(typed.col_type[columns] == position)
            expected = so.solve_ideal(rounds[name], mip_gap=0.0).objective
            assert typed.items.weight[columns].sum() == pytest.approx(expected, abs=1e-6)
            checked += 1
    assert checked


def test_fitted_types_keep_each_types_gpus_and_each_jobs_class() -> None:
    """``fit_types``: every job first on one type (its column there with the most LP value), the jobs moved off
    it are alone in their class and go to columns of their class; every type then holds its jobs' GPUs, or None
    when no move fits."""
    rng = np.random.default_rng(0)
    fitted = 0
    for instance in TINY[:30]:
        typed = typed_columns(instance, False, 0.0, "job", JointReductions())
        cols = typed.items.columns
        lp_y = rng.random(cols.cls.size)
        # Each job on the first type it may take (its columns of that type by LP value), overfilling it.
        first = np.full(cols.count.size, -1)
        for col in np.lexsort((-lp_y, typed.col_type)):
            if first[cols.cls[col]] < 0:
                first[cols.cls[col]] = col
        y = np.zeros(cols.cls.size)
        np.add.at(y, first, cols.count)
        chosen = typed.job_columns(y)
        out = fit_types(typed, chosen, lp_y, instance.gpus)
        capacity = np.array([kind.types.cluster.total_gpus for kind in typed.kinds])
        if out is None:
            continue
        load = np.bincount(typed.col_type[out], weights=instance.gpus, minlength=capacity.size)
        assert np.all(load <= capacity)
        moved = np.flatnonzero(out != chosen)
        assert np.array_equal(cols.cls[out], cols.cls[chosen])
        assert np.all(cols.count[cols.cls[out[moved]]] == 1)
        fitted += moved.size > 0
    assert fitted


def test_nodes_types_combine_the_types_rounds_solved_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Handed each type's round of the ideal ILP's types solved (as the type choices hand them), the branch-and-price
    across types with no incumbent still finds the brute force's optimum, and every allocation it returns, some
    joining those rounds' allocations with its own, is valid; some of the optima returned come from the nodes'
    types (joined per type, not decoded from an integral LP: a review found the test passed with them off)."""
    joined: list[object] = []
    decoded: list[object] = []
    join, decode = hetero_bp.join_allocations, hetero_bp.decode

    def join_spy(*args: object) -> object:
        joined.append(join(*args))  # type: ignore[arg-type]
        return joined[-1]

    def decode_spy(*args: object) -> object:
        decoded.append(decode(*args))  # type: ignore[arg-type]
        return decoded[-1]

    monkeypatch.setattr(hetero_bp, "join_allocations", join_spy)
    monkeypatch.setattr(hetero_bp, "decode", decode_spy)
    by_types = 0
    for instance in TINY[:30]:
        expected = brute_force_hetero_joint(instance, False)
        ideal = so.solve_ideal(instance, mip_gap=0.0)
        if expected is None or not ideal.has_solution or ideal.bound is None:
            continue
        typed = typed_columns(instance, False, 0.0, "job", JointReductions())
        known = {}
        for name, sub in instance.per_type_of(list(ideal.gpu_types)).items():
            result = so.solve_joint(sub, mip_gap=1e-9)
            if sub.jobs and result.allocation is not None:
                known[(name, tuple(job.id for job in sub.jobs))] = (result.objective, result.allocation)
        proof = prove_across_types(instance, typed, -math.inf, ideal.bound, 1e-9, None, known)
        assert proof.outcome.complete and proof.allocation is not None
        assert proof.value == pytest.approx(expected, abs=1e-6)
        score = so.evaluate(instance, proof.allocation)
        assert score.valid and score.objective == pytest.approx(expected, abs=1e-6)
        from_types = [a for a in joined if not any(a is d for d in decoded)]
        by_types += any(proof.allocation is a for a in from_types)
    assert by_types >= 3


def test_trees_keep_every_column_a_better_solution_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tree searches the master without what the root's reduced costs rule out against its incumbent
    (``ColumnGeneration.reduced``): handed an incumbent just below the optimum, the branch-and-price across types
    still finds the optimum (from masters that lost columns: counted); handed the optimum, it finds nothing better
    and proves it."""
    reduced = in_proofs = 0
    searched: list[tuple[int, int]] = []  # (the model's job columns, those of each tree's master)
    make = ColumnGeneration.reduced

    def spy(self: ColumnGeneration, incumbent: float) -> ColumnGeneration:
        tree = make(self, incumbent)
        searched.append((self.items.weight.size, tree.items.weight.size))
        return tree

    monkeypatch.setattr(ColumnGeneration, "reduced", spy)
    for instance in TINY[:30]:
        expected = brute_force_hetero_joint(instance, False)
        ideal = so.solve_ideal(instance, mip_gap=0.0)
        if expected is None or ideal.bound is None:
            continue
        typed = typed_columns(instance, False, 0.0, "job", JointReductions())
        below = expected - 1e-4 * max(1.0, abs(expected))
        proof = prove_across_types(instance, typed, below, ideal.bound, 1e-9, None)
        assert proof.outcome.complete and proof.allocation is not None
        assert proof.value == pytest.approx(expected, abs=1e-6)
        assert so.evaluate(instance, proof.allocation).objective == pytest.approx(expected, abs=1e-6)
        proof = prove_across_types(instance, typed, expected, ideal.bound, 1e-9, None)
        assert proof.outcome.complete and proof.allocation is None
        assert proof.bound == pytest.approx(expected, abs=1e-6)
        in_proofs += any(kept < total for total, kept in searched)
        searched.clear()
        master = ColumnGeneration(typed.items, typed.kinds, np.diag(typed.items.per_server))
        if master.phase_one(None) is not True:
            continue
        prices = master.run(None)
        assert master.reduced(-math.inf) is master and master.reduced(prices.bound) is master  # nothing better
        tree = master.reduced(below)
        kept = tree.model_columns
        assert tree.root is master and kept is not None and np.all(np.diff(kept) > 0)
        reduced += kept.size < typed.items.weight.size
        # The root LP's solution is within the kept columns and loads: the reduced root LP is the same LP value.
        tree.run(None)
        assert tree.lp_value == pytest.approx(master.lp_value, abs=1e-6)
        y = np.arange(kept.size, dtype=float) + 1.0
        lifted = tree.model_y(y)
        assert np.array_equal(lifted[kept], y) and not np.delete(lifted, kept).any()
        # Every class keeps a column (its best at the root's prices).
        assert np.array_equal(np.unique(tree.items.columns.cls), np.unique(typed.items.columns.cls))
        assert prices.bound >= expected - 1e-7  # the root's L bounds the optimum
    assert reduced  # some rounds lose columns
    assert in_proofs  # and the proofs searched such masters


def test_the_typed_master_bounds_the_joint() -> None:
    for instance in TINY[:30]:
        exact = so.solve_joint(instance, consolidate=True, method="direct", mip_gap=0.0)
        if exact.objective is None:
            continue
        classes, representatives, count = job_classes(instance)
        shares = type_shares(instance, True, 0.0, "job", JointReductions(), classes, representatives, count)
        master = TypedMaster(instance, shares, count)
        assert master.run() >= exact.objective - 1e-7
        assert master.type_mass().sum(axis=1) == pytest.approx(count, abs=1e-6)


def test_bad_joint_methods() -> None:
    with pytest.raises(InvalidInputError, match="type-free"):
        so.solve_joint(TINY[0], method="per-type")
    with pytest.raises(InvalidInputError):
        so.solve_joint(TINY[0], method="decomposition", solver="pyomo-highs")
    # The heterogeneous model is the patterns model: another formulation was once dropped without a word.
    for formulation in ("servers", "literal"):
        with pytest.raises(InvalidInputError, match=f"formulation='{formulation}'"):
            so.solve_joint(TINY[0], formulation=formulation)
    with pytest.raises(InvalidInputError, match="start='allocation'"):
        so.solve_joint(TINY[0], start=so.run_mechanism(TINY[0], "tune"))


@pytest.mark.parametrize("c_gpus, expected", [(2, Status.INFEASIBLE), (1, Status.OPTIMAL)])
def test_a_round_no_consolidated_placement_holds_is_infeasible_by_every_method(c_gpus: int, expected: Status
                                                                                ) -> None:
    # Jobs of 3, 3 and c_gpus GPUs limited to two 4-GPU k80 servers, one job free to take a v100: consolidated,
    # a 2-GPU job fits in neither 1-GPU remainder. The decomposition said NO_SOLUTION (as if out of time) at once,
    # with no limit, where the direct MILP said INFEASIBLE (a tester's finding); a 1-GPU job fits (the control).
    flat = so.Profile(np.array([3.0]), np.array([62.5]), np.array([[1.0]]))
    cluster = so.HeteroCluster((so.ServerType("k80", 2, 4, 24, 500), so.ServerType("v100", 1, 4, 24, 500)))
    jobs = (so.HeteroJob("a", 3, {"k80": flat}, "k80"), so.HeteroJob("b", 3, {"k80": flat}, "k80"),
            so.HeteroJob("c", c_gpus, {"k80": flat}, "k80"),
            so.HeteroJob("d", 1, {"k80": flat, "v100": flat}, "v100"))
    instance = HeteroRound(cluster, jobs)
    for method in ("auto", "decomposition", "direct"):
        result = so.solve_joint(instance, consolidate=True, method=method)
        assert result.status is expected, (method, result.message)
        assert (result.allocation is None) == (expected is Status.INFEASIBLE)
    # Type-fixed (d on v100 only): the k80 round is infeasible, so is the round (it said NO_SOLUTION too).
    fixed = HeteroRound(cluster, (*jobs[:3], so.HeteroJob("d", 1, {"v100": flat}, "v100")))
    for method in ("auto", "per-type", "decomposition", "direct"):
        result = so.solve_joint(fixed, consolidate=True, method=method)
        assert result.status is expected, (method, result.message)
        assert (result.allocation is None) == (expected is Status.INFEASIBLE)


def test_a_type_fixed_round_takes_each_types_formulation_and_start() -> None:
    # A one-type HeteroRound refused formulation="servers" and start= ("taken on rounds of one GPU type only").
    instance = so.generate_round(16, multi_gpu=True, seed=3, profile_noise=0.05)
    one_type = HeteroRound.homogeneous(instance)
    start = so.run_mechanism(instance, "tune")
    for options in ({"formulation": "servers"}, {"formulation": "literal"}, {"start": start}):
        expected = so.solve_joint(instance, mip_gap=0.0, **options)
        result = so.solve_joint(one_type, mip_gap=0.0, **options)
        assert result.status is expected.status is Status.OPTIMAL, options
        assert result.objective == pytest.approx(expected.objective, rel=1e-9), options
    fixed = TINY[0].at_baseline()  # several types, each solved by today's joint from its part of the start
    tune = so.run_mechanism(fixed, "tune")
    assert so.solve_joint(fixed, start=tune, mip_gap=0.0).objective == pytest.approx(
        so.solve_joint(fixed, mip_gap=0.0).objective, rel=1e-9)
    with pytest.raises(InvalidInputError, match="formulation='servers'"):
        so.solve_joint(fixed, formulation="servers", method="direct")
    # A start with a job on another type than the round fixes was refused as "an allocation of another round?".
    job_id, parts = next(iter(tune.jobs.items()))
    kind = fixed.cluster.type_of_server(parts[0].server)
    other = next(name for name in fixed.cluster.names if name != kind)
    first = fixed.cluster.server_range(other)[0]
    moved = so.Allocation({**tune.jobs, job_id: tuple(replace(p, server=first) for p in parts)})
    with pytest.raises(InvalidInputError, match=rf"start\.jobs\['{job_id}'\]='{other}': is on another GPU type"):
        so.solve_joint(fixed, start=moved)




def test_a_target_tree_goes_on_to_prove_a_solution_within_the_gap_of_its_target(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    # On this round (3 x 32 GPUs, multi-GPU jobs, seed 0) a type's target tree ends with no solution above its
    # target but one within the gap of it: the tree reopens the nodes it closed above that solution's cut-off and
    # proves it, instead of a plain tree from the root. The optimum is HiGHS's on the direct model at a gap of
    # 1e-9 (solve_joint(method="direct", mip_gap=1e-9): 30.495773941826926, 7 s); without the reopening the proof
    # stays open or its bound falls below it.
    from synergy_opt.joint import branching

    lowered: list[tuple[float, float]] = []
    lower = branching.Tree.lower

    def spy(tree: branching.Tree, value: float) -> None:
        lowered.append((tree.incumbent, value))
        lower(tree, value)

    monkeypatch.setattr(branching.Tree, "lower", spy)
    instance = so.generate_round(types={"k80": 4, "p100": 4, "v100": 4}, multi_gpu=True, seed=0, profile_noise=0.05)
    result = so.solve_joint(instance, consolidate=False, mip_gap=1e-4)
    assert lowered and all(value < target for target, value in lowered)
    assert result.status is Status.OPTIMAL
    assert result.bound >= 30.495773941826926 - 1e-9
    assert result.objective == pytest.approx(30.495773941826926, rel=1e-4)


def test_lowering_a_target_reopens_exactly_the_nodes_closed_above_the_new_cut_off() -> None:
    # A target of 100 at a gap of 1e-3 closed nodes at bounds up to its cut-off (100.1); a solution worth 99.95
    # (cut-off 99.95 * 1.001 = 100.04995) replaces it: the nodes closed above 100.04995 are open again with their
    # bounds, the others stay closed, and the tree's bound never falls below the target (its fixings left out
    # solutions worth up to it), nor below a solved node's.
    from typing import cast

    from synergy_opt.joint import branching

    def tree() -> branching.Tree:
        made = branching.Tree(cast(ColumnGeneration, None), 1e-3, lambda y, x, master: -math.inf, incumbent=100.0,
                              target=True)
        made._heap.clear()  # the root, taken
        return made

    root = branching._Node(math.inf, 0, {}, {}, {})
    first = tree()
    for bound in (99.95, 100.05, 100.09, 100.1):
        assert first._close(bound, root)
    assert not first._close(100.2, root)
    first._solved_bound = 99.9
    assert first.bound == pytest.approx(100.1)
    first.lower(99.95)
    assert (first.incumbent, first.target) == (99.95, False)
    assert sorted(node.bound for *_, node in first._heap) == pytest.approx([100.05, 100.09, 100.1])
    assert first.bound == pytest.approx(100.1)
    with pytest.raises(AssertionError):
        first.lower(99.0)  # no longer a target
    # Every node closed below the target: the target stays the bound, not the nodes' 99.97.
    second = tree()
    assert second._close(99.97, root)
    second.lower(99.95)
    assert not second._heap and second.bound == 100.0
