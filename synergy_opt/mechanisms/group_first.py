"""Per contiguous group, its first element in ``np.lexsort`` order, compiled (no sort of the whole array).

``group_first(starts, keys)`` is ``order[np.searchsorted(group[order], groups)]`` for ``order =
np.lexsort((*reversed(keys), group))``: per group, the element of least ``keys[0]``, ties to the least
``keys[1]``, and so on, then to the first. Floats compare as the sort compares them (no NaN is expected).

Public API
----------
``group_first(starts, keys) -> ndarray``
"""

from __future__ import annotations

import numpy as np
from numba import njit


def group_first(starts: np.ndarray, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per group (elements ``starts[g]:starts[g + 1]``, every group non-empty; ``starts[-1]`` the size), the
    index of its first element by ``keys`` (the first key most significant), ties to the first element."""
    return _group_first(np.asarray(starts, dtype=np.int64), np.stack([np.asarray(k, dtype=float) for k in keys]))


@njit(cache=True)
def _group_first(starts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    first = np.empty(starts.size - 1, dtype=np.int64)
    for g in range(starts.size - 1):
        best = starts[g]
        for i in range(starts[g] + 1, starts[g + 1]):
            for k in range(keys.shape[0]):
                if keys[k, i] != keys[k, best]:
                    if keys[k, i] < keys[k, best]:
                        best = i
                    break
        first[g] = best
    return first
