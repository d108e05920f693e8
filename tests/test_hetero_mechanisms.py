"""The mechanisms and Synergy-OPT on heterogeneous rounds (issue 20, formulations/heterogeneous.md sections 4-5):
type rules, per-type runs, and SPEC 4's invariants per type."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.hetero import HeteroRound, join_allocations
from synergy_opt.ideal.hetero_model import build_hetero_ideal
from synergy_opt.ideal.hetero_types import baseline_bound, lp_types, solve_lp
from synergy_opt.mechanisms.hetero import TYPE_RULES
from synergy_opt.mechanisms.near_opt import solve_near_opt
from synergy_opt.mechanisms.near_opt.hetero import solve_hetero_near_opt
from tests.hetero_instances import random_hetero_round

NAMES = tuple(so.MECHANISMS)
PAPER = ("proportional", "greedy", "tune", "drf", "tetris")
TINY = [random_hetero_round(np.random.default_rng(seed), max_jobs=5) for seed in range(40)]
GENERATED = [so.generate_round(types={"k80": 1, "p100": 1, "v100": 2}, multi_gpu=multi, seed=seed,
                               profile_noise=noise) for multi, noise, seed in ((False, 0.0, 0), (True, 0.05, 1),
                                                                              (False, 0.05, 2), (True, 0.0, 3))]


def per_type(fixed: HeteroRound, name: str, order: list[str] | None = None) -> so.Allocation:
    """Today's mechanism on each type's round, joined: what a type-fixed round must give."""
    ranked = order or [job.id for job in fixed.jobs]
    allocations = {}
    for kind, sub in fixed.per_type().items():
        if sub.jobs:
            allocations[kind] = so.run_mechanism(sub, name, [j for j in ranked if j in sub.job_index])
    return join_allocations(fixed.cluster, allocations)


def test_every_mechanism_has_a_type_rule() -> None:
    assert set(TYPE_RULES) == set(NAMES)
    assert all(TYPE_RULES[name] == "baseline" for name in PAPER)


@pytest.mark.parametrize("name", NAMES)
def test_a_type_fixed_round_runs_each_type_as_today(name: str) -> None:
    for instance in GENERATED[:2]:
        fixed = instance.at_baseline()
        assert so.run_mechanism(fixed, name) == per_type(fixed, name)
    order = [job.id for job in GENERATED[0].jobs][::-1]
    fixed = GENERATED[0].at_baseline()
    assert so.run_mechanism(fixed, name, order) == per_type(fixed, name, order)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("options", "field"), [({"bogus": 1}, "options.bogus"),
                                                ({"spend_spare": "no"}, "options.spend_spare")])
def test_options_are_checked_on_type_free_rounds_as_on_one_type(name: str, options: dict, field: str) -> None:
    # near-opt and opt take their own path on a type-free round; it raised a raw TypeError and read "no" as True.
    for instance in (GENERATED[0], GENERATED[0].at_baseline()):
        with pytest.raises(so.InvalidInputError) as error:
            so.run_mechanism(instance, name, **options)
        assert error.value.field == field, (name, instance.type_fixed)


@pytest.mark.parametrize("name", PAPER)
def test_the_paper_mechanisms_take_the_baseline_types(name: str) -> None:
    for instance in GENERATED:
        assert so.run_mechanism(instance, name) == so.run_mechanism(instance.at_baseline(), name)


@pytest.mark.parametrize("name", NAMES)
def test_one_type_gives_todays_allocation(name: str) -> None:
    instance = so.generate_round(32, multi_gpu=True, seed=4, profile_noise=0.05)
    assert so.run_mechanism(HeteroRound.homogeneous(instance), name) == so.run_mechanism(instance, name)


# Mechanisms that place every job at or above its floor, so the ideal ILP (every job, floors) bounds them on any
# round; GREEDY may skip jobs, DRF and Tetris may break floors, which on odd tiny rounds can beat it.
KEEP_FLOORS = ("proportional", "tune", "opt", "near-opt")


def invariants(instance: HeteroRound, bounded: tuple[str, ...] = NAMES) -> None:
    """SPEC 4 per type on one round: valid allocations; TUNE, OPT and near-opt place every job at or above its
    floor; proportional too, and all four keep the models' floor rule on their jobs' types; ideal LP >= ideal ILP
    >= the ``bounded`` mechanisms and every one that keeps that rule; TUNE >= proportional (per type too);
    near-opt >= TUNE."""
    lp = so.solve_ideal(instance, relax=True).objective
    ilp = so.solve_ideal(instance).objective
    assert lp is not None and ilp is not None and lp >= ilp - 1e-7
    totals = {}
    for name in NAMES:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an invalid allocation warns: fail on it
            evaluation = so.evaluate(instance, so.run_mechanism(instance, name), strict=True)
        totals[name] = evaluation
        # The models' floor rule, as the evaluator reads it: every job placed, (D7), (H0) and (H6) kept.
        keeps_rule = not (evaluation.unplaced or evaluation.floors_violated or evaluation.type_floors_violated)
        if name in bounded or keeps_rule:
            assert evaluation.objective <= ilp + 1e-7, name
        if name in KEEP_FLOORS:
            assert keeps_rule, name
        for score in evaluation.jobs.values():
            if score.placed:
                assert score.gpu_type in instance.jobs[instance.job_index[score.job_id]].profiles
        if so.MECHANISMS[name].places_every_job:
            assert evaluation.unplaced == (), name
        if name in ("tune", "opt", "near-opt"):
            assert evaluation.floors_violated == (), name
    assert totals["tune"].objective >= totals["proportional"].objective - 1e-9
    tune_types, prop_types = totals["tune"].by_type(), totals["proportional"].by_type()
    for kind in instance.cluster.names:
        assert tune_types[kind]["objective"] >= prop_types[kind]["objective"] - 1e-9
        assert tune_types[kind]["floors_violated"] == 0
    assert totals["near-opt"].objective >= totals["tune"].objective - 1e-9


def test_invariants_on_tiny_noisy_rounds_of_two_and_three_types() -> None:
    for instance in TINY:
        invariants(instance, KEEP_FLOORS)


def test_invariants_on_generated_rounds() -> None:
    for instance in GENERATED:
        invariants(instance)
        invariants(instance.at_baseline())


def test_opt_places_the_ideal_types_and_keeps_floors() -> None:
    for instance in GENERATED[1:3]:
        result = so.solve_opt(instance)
        assert result.evaluation.valid and result.evaluation.unplaced == ()
        assert result.evaluation.floors_violated == ()
        assert result.objective <= (result.bound or 0) + 1e-7
        chosen = dict(zip((j.id for j in instance.jobs), result.ideal.gpu_types, strict=True))
        placed = {s.job_id: s.gpu_type for s in result.evaluation.jobs.values()}
        assert placed == chosen  # every job runs on the type the ideal ILP chose for it
        fixed = so.solve_opt(instance.at_baseline())
        assert fixed.allocation == join_allocations(
            instance.cluster, {kind: so.solve_opt(sub).allocation
                               for kind, sub in instance.at_baseline().per_type().items() if sub.jobs})


def test_near_opt_chooses_types_and_never_falls_below_tune() -> None:
    for instance in GENERATED:
        result = solve_hetero_near_opt(instance)
        assert len(result.types) == len(instance.jobs) and result.source in ("near-opt", "tune")
        tune = so.evaluate(instance, so.run_mechanism(instance, "tune", spend_spare=True)).objective
        assert result.objective >= tune - 1e-9
        if result.tune_objective is None:  # TUNE skipped: near-opt reached the bound on it
            assert result.objective >= baseline_bound(build_hetero_ideal(instance)) - 1e-9
        assert result.objective == pytest.approx(so.evaluate(instance, result.allocation).objective)


def test_near_opt_per_type_from_the_type_free_prices_is_as_from_cutting_planes() -> None:
    """Each type's near-opt from the type-free LP's prices of that type (its LP's prices proven by a small LP
    when they can be) gives the same total as from the cutting planes alone, and the same LP bound."""
    for instance in GENERATED:
        ideal = build_hetero_ideal(instance)
        solved = solve_lp(ideal)
        assert solved is not None
        prices = solved[1][ideal.coupling_rows].reshape(3, -1)
        rounds = instance.per_type_of(lp_types(instance, ideal, solved))
        for k, sub in enumerate(rounds.values()):
            if sub.jobs:
                near = solve_near_opt(sub, prices=prices[1:, k])
                alone = solve_near_opt(sub)
                assert near.objective == pytest.approx(alone.objective, rel=1e-9)
                assert near.bound == pytest.approx(alone.bound, rel=1e-9)


def test_the_bound_on_tune_at_the_baseline_types_is_their_ideal_lp() -> None:
    """near-opt skips TUNE when its total reaches this bound: it must bound TUNE (it is the baseline LP)."""
    for instance in GENERATED:
        bound = baseline_bound(build_hetero_ideal(instance))
        assert bound == pytest.approx(so.solve_ideal(instance.at_baseline(), relax=True).objective, rel=1e-9)
        assert bound >= so.evaluate(instance, so.run_mechanism(instance, "tune")).objective - 1e-9


def test_the_bound_at_given_prices_bounds_the_baseline_lp_and_decides_only_below_its_threshold() -> None:
    """baseline_bound at the type-free LP's prices: a Lagrangian bound (at least the baseline types' LP, by
    HiGHS), returned only when at most ``decide``; otherwise the minimum (the LP itself)."""
    for instance in GENERATED:
        ideal = build_hetero_ideal(instance)
        solved = solve_lp(ideal)
        assert solved is not None
        prices = solved[1][ideal.coupling_rows]
        lp = so.solve_ideal(instance.at_baseline(), relax=True).objective
        at_prices = baseline_bound(ideal, prices, np.inf)
        assert at_prices >= lp - 1e-9 * max(1.0, lp)
        assert baseline_bound(ideal, prices, at_prices) == at_prices
        below = at_prices - 1e-6 * max(1.0, at_prices)
        assert baseline_bound(ideal, prices, below) == pytest.approx(lp, rel=1e-9)
        # Prices that bound badly (far too high) do not decide a threshold near the LP.
        assert baseline_bound(ideal, prices + 10.0, lp * 1.001) == pytest.approx(lp, rel=1e-9)
