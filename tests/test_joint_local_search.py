"""The joint decomposition's local search (``joint/incumbent.py``) keeps the time budget it is given."""

from __future__ import annotations

import time
import types

import numpy as np
import pytest

from synergy_opt import solve_ideal
from synergy_opt.joint import incumbent
from synergy_opt.joint.model import JointReductions, item_columns
from synergy_opt.round_family import member_round


def test_the_local_search_stops_within_a_job_of_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that ticks once per per-server programme: after the deadline passes, the search may finish the
    moves of the job at hand (at most two programmes per partner job) but not the rest of its pair of servers
    (the round, single-modelled seed 105, once ran 2.5 s of a 0.05 s budget in one pair)."""
    instance = member_round("single-modelled", 128, seed=105, profile_noise=0.1)
    items = item_columns(instance, False, 0.0, "job", JointReductions())
    ideal = solve_ideal(instance)
    assert ideal.has_solution
    aim_values = np.asarray(ideal.throughput, dtype=float)
    # The greedy's own placement, its local search cut short (only a start is needed).
    placement = incumbent.place(items, instance.cluster, ideal.cpu_per_gpu, ideal.mem_gb_per_gpu, aim_values,
                                deadline=time.perf_counter())
    assert placement is not None

    calls = 0
    best = incumbent._Servers.best

    def counted(self: incumbent._Servers, server: int, members: list[int]) -> tuple[float, list[int]] | None:
        nonlocal calls
        calls += 1
        return best(self, server, members)

    monkeypatch.setattr(incumbent._Servers, "best", counted)
    monkeypatch.setattr(incumbent, "time", types.SimpleNamespace(perf_counter=lambda: float(calls)))
    servers = instance.cluster.servers
    deadline = servers + 10  # past the first pass over the servers, inside the moves and swaps
    improved = incumbent.improve(items, instance.cluster, placement, aim_values, deadline=deadline)

    per_job = 2 * (instance.cluster.gpus_per_server + 1)  # a move and every swap with one partner's residents
    assert calls <= deadline + per_job, f"{calls} programmes for a deadline after {deadline}"
    # What it returns is still a placement of every job.
    assert len(improved.on) == len(instance.jobs)
    assert all(sum(spread.values()) == job.gpus for spread, job in zip(improved.on, instance.jobs, strict=True))
