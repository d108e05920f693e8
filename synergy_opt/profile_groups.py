"""Jobs grouped by the axes of their profiles, each distinct profile's matrix stacked once.

The ideal and joint builders and the best-case demands all work on stacks of matrices that share axes;
built-in and generated profiles share one pair of axes, so a round is usually one group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from synergy_opt.profile import Profile, grid_index


@dataclass(frozen=True)
class ProfileGroup:
    """Distinct profiles sharing both axes: ``tput[r]`` is profile ``r``; job ``jobs[k]`` uses ``row[k]``."""

    cpu_axis: np.ndarray
    mem_axis: np.ndarray
    tput: np.ndarray  # (profiles, cpu, mem)
    jobs: np.ndarray
    row: np.ndarray

    def read(self, rows: np.ndarray, cpu_per_gpu: ArrayLike, mem_gb_per_gpu: ArrayLike) -> np.ndarray:
        """Throughput of profiles ``rows`` at their per-GPU points, read as the evaluator reads a grid
        (the largest grid point ``<=`` in each axis, 0 below the grid)."""
        a = grid_index(self.cpu_axis, cpu_per_gpu)
        b = grid_index(self.mem_axis, mem_gb_per_gpu)
        inside = (a >= 0) & (b >= 0)
        return np.where(inside, self.tput[rows, np.maximum(a, 0), np.maximum(b, 0)], 0.0)


def group_profiles(job_profiles: Sequence[Profile]) -> list[ProfileGroup]:
    """Items (jobs) grouped by the axes of their profiles; a profile object shared by many is stacked once."""
    if not job_profiles:
        return []
    keys = np.fromiter(map(id, job_profiles), dtype=np.int64, count=len(job_profiles))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    # Distinct profiles in the order their first jobs come, not in memory order (which differs from run to run
    # and would reorder groups, hence the ideal ILP's classes, of rounds whose profiles have different axes).
    by_first = np.argsort(first, kind="stable")
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(by_first.size)
    first, inverse = first[by_first], rank[inverse.ravel()]
    profiles = [job_profiles[j] for j in first.tolist()]
    # Exact grouping by axes, vectorised: per pair of axis lengths, peel off the rows equal to the first one
    # (rounds hold one or a few distinct axis pairs, however many profiles).
    cpu_len = np.fromiter((p.cpu_per_gpu.size for p in profiles), dtype=np.int64, count=len(profiles))
    mem_len = np.fromiter((p.mem_gb_per_gpu.size for p in profiles), dtype=np.int64, count=len(profiles))
    length_key = cpu_len * (mem_len.max() + 1) + mem_len
    members_of: list[np.ndarray] = []
    for key in np.unique(length_key):
        left = np.flatnonzero(length_key == key)
        axes = np.hstack([_stacked([profiles[u].cpu_per_gpu for u in left.tolist()]),
                          _stacked([profiles[u].mem_gb_per_gpu for u in left.tolist()])])
        while left.size:
            same = (axes == axes[0]).all(axis=1)
            members_of.append(left[same])
            left, axes = left[~same], axes[~same]
    row_of = np.empty(len(profiles), dtype=np.int64)
    group_of = np.empty(len(profiles), dtype=np.int64)
    for g, members in enumerate(members_of):
        row_of[members] = np.arange(members.size)
        group_of[members] = g
    job_group = group_of[inverse]
    groups = []
    for g, members in enumerate(members_of):
        in_group = np.flatnonzero(job_group == g)
        head = profiles[int(members[0])]
        tput = _stacked([profiles[u].tput for u in members.tolist()])
        rows = row_of[inverse[in_group]]
        for array in (tput, in_group, rows):  # shared by every reader of the round
            array.flags.writeable = False
        groups.append(ProfileGroup(head.cpu_per_gpu, head.mem_gb_per_gpu, tput, in_group, rows))
    return groups


def _stacked(arrays: list[np.ndarray]) -> np.ndarray:
    """``np.stack`` of arrays of one shape, as one concatenation (np.stack expands every array first: 1.5 ms for
    3072 matrices, 0.5 ms this; the same array)."""
    return np.concatenate(arrays).reshape(len(arrays), *arrays[0].shape)


def subset_groups(groups: Sequence[ProfileGroup], items: np.ndarray) -> list[ProfileGroup]:
    """``group_profiles`` of the items ``items`` (ascending positions in the list ``groups`` were made from),
    read from ``groups`` without touching the profiles: the same groups, rows and order (a type's round of a
    heterogeneous round takes its jobs' groups from the round's; grouping them again took 3.5 ms per type at
    3 x 1024 GPUs)."""
    total = sum(group.jobs.size for group in groups)
    group_of = np.empty(total, dtype=np.int64)
    row_of = np.empty(total, dtype=np.int64)
    for g, group in enumerate(groups):
        group_of[group.jobs], row_of[group.jobs] = g, group.row
    item_group, item_row = group_of[items], row_of[items]
    present, first = np.unique(item_group, return_index=True)
    # group_profiles orders groups by axis lengths (CPU, then memory), then by their first item.
    order = sorted(range(present.size), key=lambda p: (groups[int(present[p])].cpu_axis.size,
                                                       groups[int(present[p])].mem_axis.size, int(first[p])))
    subsets = []
    for p in order:
        parent = groups[int(present[p])]
        in_group = np.flatnonzero(item_group == present[p])
        rows = item_row[in_group]
        # Distinct profiles in the order their first items come (a parent row is one distinct profile).
        distinct, at, inverse = np.unique(rows, return_index=True, return_inverse=True)
        by_first = np.argsort(at, kind="stable")
        rank = np.empty_like(by_first)
        rank[by_first] = np.arange(by_first.size)
        tput, sub_rows = parent.tput[distinct[by_first]], rank[inverse.ravel()]
        for array in (tput, in_group, sub_rows):  # shared by every reader of the round, as group_profiles's
            array.flags.writeable = False
        subsets.append(ProfileGroup(parent.cpu_axis, parent.mem_axis, tput, in_group, sub_rows))
    return subsets
