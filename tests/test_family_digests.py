"""near-opt gives exactly the allocations it gave before its compiled judgements (issue 22's last speed pass).

``tests/data/family_near_opt_digests.json`` holds the digest of near-opt's allocation (as
``tests/test_mechanism_digests.py`` makes it) on round-family members whose steps the generated rounds of that
file barely reach: 4-GPU servers at 1024 GPUs (the re-picks and their assignment costs), many split jobs (the
exchanges' piece swaps and their disjoint choice, the split jobs' ascent), mixed rounds, and small clusters of
split jobs (the pair moves and the pinned raises). Recorded from the code before those kernels (commit a03390f).

Re-record (only when a change of behaviour is intended, and say so), from the repository root:
``PYTHONPATH=. python tests/test_family_digests.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from synergy_opt import run_mechanism
from synergy_opt.round_family import member_round
from tests.test_mechanism_digests import digest

DIGESTS = Path(__file__).resolve().parent / "data" / "family_near_opt_digests.json"
CASES = [
    ("single-servers-4", 1024, 0, 0.1),
    ("multi-servers-4", 1024, 0, 0.1),
    ("multi-mixed", 1024, 0, None),
    ("multi-ratio-5", 1024, 1, 0.1),
    ("single-servers-16", 1024, 0, 0.1),
    ("multi-spanning", 128, 3, 0.0),
    ("multi-odd", 128, 1, 0.1),
    ("multi-servers-4", 128, 2, 0.1),
]


def near_opt_digest(member: str, gpus: int, seed: int, noise: float | None) -> dict[str, Any]:
    instance = member_round(member, gpus, seed, profile_noise=noise)
    return digest(instance, run_mechanism(instance, "near-opt"))


@pytest.mark.parametrize("case", CASES, ids=[f"{m}-{g}-{s}" for m, g, s, _ in CASES])
def test_family_rounds_give_the_recorded_allocations(case: tuple[str, int, int, float | None]) -> None:
    recorded = json.loads(DIGESTS.read_text())
    assert near_opt_digest(*case) == recorded["-".join(map(str, case))]


if __name__ == "__main__":
    DIGESTS.parent.mkdir(parents=True, exist_ok=True)
    DIGESTS.write_text(json.dumps({"-".join(map(str, case)): near_opt_digest(*case) for case in CASES}, indent=1)
                       + "\n")
    print(f"wrote {DIGESTS}")
