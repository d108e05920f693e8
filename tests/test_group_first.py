"""group_first picks, per contiguous group, the element np.lexsort puts first (ties to the first element)."""

from __future__ import annotations

import numpy as np

from synergy_opt.mechanisms.group_first import group_first


def test_group_first_is_lexsorts_first_per_group() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        counts = rng.integers(1, 9, size=rng.integers(0, 30))
        size = int(counts.sum())
        group = np.repeat(np.arange(counts.size), counts)
        # Few distinct values, so that ties reach every key and the index; signed zeros and infinities too.
        keys = tuple(rng.choice(np.array([-np.inf, -1.0, -0.0, 0.0, 0.5, 2.0, np.inf]), size=size)
                     for _ in range(rng.integers(1, 4)))
        order = np.lexsort((*reversed(keys), group))
        expected = order[np.searchsorted(group[order], np.arange(counts.size))]
        assert np.array_equal(group_first(np.r_[0, np.cumsum(counts)], keys), expected)
