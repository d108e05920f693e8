"""The decomposition's master over servers of several kinds (a heterogeneous round's GPU types): its pricing per
kind with the branch rows' bonus, and its LP against the typed master of heterogeneous.md (HJ7)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from synergy_opt.ideal.hetero_model import job_classes
from synergy_opt.joint.hetero_bp import prove_across_types, typed_columns
from synergy_opt.joint.hetero_master import TypedMaster
from synergy_opt.joint.hetero_model import type_shares
from synergy_opt.joint.master import ColumnGeneration
from synergy_opt.joint.model import JointReductions
from synergy_opt.joint.pricing import Bonus, PricingDeadline
from tests.hetero_instances import random_hetero_round
from tests.test_joint_decomposition import FUZZ

TINY = [random_hetero_round(np.random.default_rng(seed), max_jobs=4) for seed in range(30)]


@FUZZ
@given(st.integers(1, 4), st.integers(1, 4), st.data())
def test_a_bonus_within_a_kind_is_its_conditions_there(before: int, size: int, data: st.DataObject) -> None:
    """``Bonus.within(first, stop)`` pays a load of the kind (its items numbered from 0) what the whole bonus pays
    the same load placed among every item, counting only the conditions all of whose components are the kind's."""
    total = before + size + 1
    conditions = data.draw(st.lists(st.lists(st.tuples(st.integers(0, total - 1), st.integers(1, 3)), min_size=1,
                                             max_size=3, unique_by=lambda c: c[0]).map(tuple), max_size=5))
    values = np.array([data.draw(st.sampled_from([-1.5, 0.4, 2.0])) for _ in conditions])
    bonus = Bonus.of_conditions(conditions, values)
    local = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=size, max_size=size), min_size=1,
                                        max_size=6)))
    placed = np.zeros((len(local), total), dtype=np.int64)
    placed[:, before:before + size] = local
    inside = [c for c, parts in enumerate(conditions) if all(before <= t < before + size for t, _ in parts)]
    expected = bonus.met(placed)[:, inside] @ values[inside] if conditions else np.zeros(len(local))
    within = bonus.within(before, before + size)
    got = within.of(local) if within.value.size else np.zeros(len(local))
    assert np.allclose(got, expected)


@pytest.mark.parametrize("consolidate", [True, False])
def test_the_master_over_kinds_is_the_typed_master(consolidate: bool) -> None:
    """Column generation over every type's loads in one master reaches the typed master's LP (HJ7), and its bound
    ``L`` (valid at every round) ends at that value."""
    reductions = JointReductions()
    for instance in TINY:
        class_of, representatives, count = job_classes(instance, True)
        shares = type_shares(instance, consolidate, 0.0, "job", reductions, class_of, representatives, count)
        if not shares:
            continue
        typed_lp = TypedMaster(instance, shares, count).run()
        typed = typed_columns(instance, consolidate, 0.0, "job", reductions)
        master = ColumnGeneration(typed.items, typed.kinds, np.diag(typed.items.per_server))
        if master.phase_one(None) is False:
            assert typed_lp < 0 or not np.isfinite(typed_lp)  # no loads hold every job: the typed LP needs slack
            continue
        prices = master.run(None)
        assert master.converged
        assert prices.bound == pytest.approx(typed_lp, abs=1e-6)
        assert master.lp_value == pytest.approx(typed_lp, abs=1e-6)
        kinds = master.pattern_kind
        for position, kind in enumerate(typed.kinds):  # every load is of one kind and fits its server
            mine = master.patterns[kinds == position]
            assert not np.delete(mine, np.s_[kind.first:kind.stop], axis=1).any()
            assert kind.types.fits(mine[:, kind.first:kind.stop]).all()


def test_the_first_pricing_may_run_to_its_own_deadline() -> None:
    """Without a bound nothing after the first pricing can run, so the decomposition gives it the whole time limit
    (``first_deadline``) while later rounds keep column generation's share: a share already spent raises
    :class:`PricingDeadline` on its own, and returns a bound with the first pricing's deadline later."""
    typed = typed_columns(TINY[28], False, 0.0, "job", JointReductions())  # list pricing: it looks at the clock
    spent = time.perf_counter() - 1.0

    def fresh() -> ColumnGeneration:
        master = ColumnGeneration(typed.items, typed.kinds, np.diag(typed.items.per_server))
        assert master.phase_one(None) is True
        return master

    with pytest.raises(PricingDeadline):
        fresh().run(spent)
    master = fresh()
    prices = master.run(spent, first_deadline=time.perf_counter() + 60.0)
    assert master.rounds == 1 and np.isfinite(prices.bound)  # one round: the spent share ends it after


def test_a_deadline_in_the_first_pricing_across_types_keeps_the_bound_given() -> None:
    """Stopped in its first pricing (no bound from the master), the branch-and-price across types searches no
    node and proves the bound it was given, with no allocation: a limit, not an error."""
    instance = TINY[28]  # list pricing: it looks at the clock
    typed = typed_columns(instance, False, 0.0, "job", JointReductions())
    bound = 1e3
    proof = prove_across_types(instance, typed, -np.inf, bound, 1e-9, time.perf_counter() - 1.0)
    assert proof.allocation is None and proof.bound == bound
    assert proof.outcome.nodes == 0 and not proof.outcome.complete
