"""The mechanisms give exactly the allocations they gave before they were made faster.

``tests/data/mechanism_digests.json`` holds, per round and mechanism, a SHA-256 digest of the allocation
(every job's placements: server, GPUs, CPUs and GB rounded to 1e-9) and its objective, recorded from the
code before the speed-ups of the TUNE path (packing, demotion, state, best-case demands). Any change to
what proportional, greedy, tune, drf or tetris return on these rounds fails here. The rounds: generated
rounds of every kind (single/multi-GPU, noise 0 and 0.05, splits (20, 70, 10) and (50, 0, 50), CPU:GPU 3
and 5) at 128 and 1024 GPUs, a reversed policy order and two tolerances, and 200 small random rounds
(odd grids, mixed jobs, jobs larger than a server).

``tune-paper`` is TUNE with ``sort="demand", fit="best"``, the paper's section 4.2: recorded while it was tune's
default and equal to the ``tune`` digests of that time on every round, it proves that the paper's TUNE is still
one option away after issue 19 made spread (worst fit) the default (which re-recorded ``tune``,
``tune-reversed`` and ``tune-tolerance-*``).

near-opt's allocations on the generated rounds (``near-opt`` in each generated round's digests) were recorded
from the code before its speed-ups (commit 1e374c1, issue 11's near-opt as merged); on rounds whose profiles
have different grids that code ordered the ideal ILP's classes by memory address, so no small rounds there.

The rounds are drawn through :mod:`synergy_opt.portable` (the C library's ``exp`` and ``pow``), so a seed gives
the same bits with or without AVX-512; before, NumPy's AVX-512 ``exp`` moved near-opt on two rounds. near-opt's
ties still follow NumPy's summation order, which is the same on every x86-64 with AVX2 (recorded there; on a CPU
without AVX2 seven of its digests differ, by ties of equal objective or by at most 0.3%).

Re-record (only when a change of behaviour is intended, and say so), from the repository root:
``PYTHONPATH=. python tests/test_mechanism_digests.py`` (near-opt's too, then from the current code).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from synergy_opt import RoundInstance, generate_round, run_mechanism
from synergy_opt.evaluation import evaluate
from synergy_opt.instance import Allocation
from tests.random_instances import random_instance

DIGESTS = Path(__file__).resolve().parent / "data" / "mechanism_digests.json"
NAMES = ("proportional", "greedy", "tune", "drf", "tetris")
SMALL_ROUNDS = 200


def generated_cases() -> list[dict[str, Any]]:
    cases = []
    for gpus in (128, 1024):
        for split in ((20, 70, 10), (50, 0, 50)):
            for multi in (False, True):
                for noise in (0.0, 0.05):
                    for seed in ((0, 1) if gpus == 128 else (0,)):
                        cases.append({"gpus": gpus, "split": split, "multi": multi, "noise": noise, "seed": seed,
                                      "ratio": 3})
    cases += [{"gpus": 128, "split": (20, 70, 10), "multi": multi, "noise": noise, "seed": 2, "ratio": 5}
              for multi in (False, True) for noise in (0.0, 0.05)]
    return cases


def make(case: dict[str, Any]) -> RoundInstance:
    return generate_round(case["gpus"], case["split"], multi_gpu=case["multi"], seed=case["seed"],
                          profile_noise=case["noise"], cpu_per_gpu=case["ratio"])


def digest(instance: RoundInstance, allocation: Allocation) -> dict[str, Any]:
    parts = sorted((job_id, tuple(sorted((p.server, p.gpus, round(p.cpus, 9), round(p.mem_gb, 9)) for p in placed)))
                   for job_id, placed in allocation.jobs.items())
    return {"sha256": hashlib.sha256(repr(parts).encode()).hexdigest()[:20],
            "objective": round(evaluate(instance, allocation).objective, 9)}


def runs(instance: RoundInstance, near_opt: bool = False) -> dict[str, dict[str, Any]]:
    out = {name: digest(instance, run_mechanism(instance, name)) for name in NAMES}
    if near_opt:
        out["near-opt"] = digest(instance, run_mechanism(instance, "near-opt"))
    # The paper's TUNE (its demand order, best fit): tune's default until issue 19 made spread the default;
    # these are the digests "tune" had before, unchanged.
    out["tune-paper"] = digest(instance, run_mechanism(instance, "tune", sort="demand", fit="best"))
    ids = [job.id for job in instance.jobs][::-1]
    out["tune-reversed"] = digest(instance, run_mechanism(instance, "tune", order=ids))
    for tolerance in (0.0, 0.1):
        out[f"tune-tolerance-{tolerance}"] = digest(instance, run_mechanism(instance, "tune",
                                                                         best_case_tolerance=tolerance))
    return out


def small_rounds() -> list[RoundInstance]:
    rng = np.random.default_rng(20240611)
    return [random_instance(rng, max_jobs=8, max_axis=4) for _ in range(SMALL_ROUNDS)]


def record() -> dict[str, Any]:
    return {"generated": [{"case": {**case, "split": list(case["split"])}, "digests": runs(make(case), True)}
                          for case in generated_cases()],
            "small": [runs(instance) for instance in small_rounds()]}


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("index", range(len(generated_cases())))
def test_generated_rounds_give_the_recorded_allocations(recorded: dict[str, Any], index: int) -> None:
    case = generated_cases()[index]
    entry = recorded["generated"][index]
    assert entry["case"] == {**case, "split": list(case["split"])}
    assert runs(make(case), near_opt=True) == entry["digests"]


def test_small_random_rounds_give_the_recorded_allocations(recorded: dict[str, Any]) -> None:
    rounds = small_rounds()
    assert len(recorded["small"]) == len(rounds)
    for index, (instance, expected) in enumerate(zip(rounds, recorded["small"], strict=True)):
        assert runs(instance) == expected, index


if __name__ == "__main__":
    DIGESTS.parent.mkdir(parents=True, exist_ok=True)
    DIGESTS.write_text(json.dumps(record(), separators=(",", ":")) + "\n")
    print(f"wrote {DIGESTS}")
