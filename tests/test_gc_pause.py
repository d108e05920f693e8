"""The cyclic collector paused inside a solve (synergy_opt/gc_pause.py): off inside, the caller's state after,
however the call ends, nested, concurrent or not."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from synergy_opt import generate_round, run_mechanism
from synergy_opt.gc_pause import paused_gc
from synergy_opt.mechanisms import MECHANISMS
from synergy_opt.mechanisms.near_opt import mechanism as near_opt_mechanism
from synergy_opt.mechanisms.near_opt.hetero import solve_hetero_near_opt


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
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


def test_threads_pausing_at_once_leave_the_collector_on(collector_enabled: None) -> None:
    # Without the shared count, a thread entering while another's pause ran read "disabled" and, leaving last,
    # left the collector off (a review: 1 trial in 200 at this switch interval; the uncounted pause failed this
    # test in 2 of 3 runs, a race cannot be caught every time).
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(300):
            def pause_often() -> None:
                for _ in range(200):
                    with paused_gc():
                        pass
            threads = [threading.Thread(target=pause_often) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert gc.isenabled()
    finally:
        sys.setswitchinterval(interval)


def test_the_mechanisms_run_paused_and_leave_the_collector_on(collector_enabled: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    instance = generate_round(16, seed=3, profile_noise=0.05)
    hetero = generate_round(types={"k80": 1, "v100": 1}, seed=3, profile_noise=0.05)
    inside: list[bool] = []
    tune = MECHANISMS["tune"]

    def recording(*args: object, **options: object) -> object:
        inside.append(gc.isenabled())
        return tune.run(*args, **options)

    monkeypatch.setitem(MECHANISMS, "tune", replace(tune, run=recording))
    run_mechanism(instance, "tune")
    run_mechanism(hetero, "tune")
    assert inside and not any(inside)  # run_mechanism pauses around every mechanism, per type too
    # near-opt's own entry points pause when called directly (the benchmarks and the simulator's hooks do).
    seen: list[bool] = []
    pack = near_opt_mechanism.pack_near_opt
    monkeypatch.setattr(near_opt_mechanism, "pack_near_opt",
                        lambda *args, **kwargs: (seen.append(gc.isenabled()), pack(*args, **kwargs))[1])
    near_opt_mechanism.solve_near_opt(instance)
    solve_hetero_near_opt(hetero)
    assert seen and not any(seen)
    assert gc.isenabled()
