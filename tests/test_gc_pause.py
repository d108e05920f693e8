"""The cyclic collector paused inside a solve (synergy_opt/gc_pause.py): off inside, the caller's state after,
however the call ends, nested or not."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from synergy_opt import generate_round, run_mechanism
from synergy_opt.gc_pause import paused_gc


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_restored_after_nesting_and_errors(collector_enabled: None) -> None:
    seen: list[bool] = []

    @paused_gc()
    def nested(depth: int) -> None:
        seen.append(gc.isenabled())
        if depth:
            nested(depth - 1)
        seen.append(gc.isenabled())  # still off after an inner call returned
        if depth == 1:
            raise ValueError("inner")

    with pytest.raises(ValueError, match="inner"):
        nested(2)
    assert seen == [False] * 5  # entered three times, the innermost two exits seen before the error
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled(collector_enabled: None) -> None:
    gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_mechanisms_leave_the_collector_as_they_found_it(collector_enabled: None) -> None:
    instance = generate_round(16, seed=3, profile_noise=0.05)
    hetero = generate_round(types={"k80": 1, "v100": 1}, seed=3, profile_noise=0.05)
    for name in ("tune", "near-opt"):
        run_mechanism(instance, name)
        run_mechanism(hetero, name)
        assert gc.isenabled(), name
