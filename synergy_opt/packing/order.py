"""The order jobs are packed in: the policy's priority order (validated job indices) and TUNE's demand order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Literal, get_args

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroRound
from synergy_opt.instance import RoundInstance

#: The order TUNE packs jobs in: ``"demand"`` (the paper's section 4.2: GPU, then CPU, then memory demand,
#: largest first, ties in policy order) or ``"policy"`` (the policy's order, as the artifact's TUNE).
Sort = Literal["demand", "policy"]
SORTS: tuple[str, ...] = get_args(Sort)


def policy_order(instance: RoundInstance | HeteroRound, order: Iterable[str] | None = None) -> np.ndarray:
    """Job indices (into ``instance.jobs``) in priority order; ``None`` keeps the instance's order.

    Parameters
    ----------
    order
        Every job id of the round exactly once, highest priority first (e.g. FIFO: by arrival).

    Raises
    ------
    InvalidInputError
        Naming the unknown, repeated or missing job ids.
    """
    if order is None:
        return np.arange(len(instance.jobs))
    if isinstance(order, str):
        raise InvalidInputError("order", order, "must be a sequence of job ids, not one string")
    ids = list(order)
    index = instance.job_index
    unknown = [job_id for job_id in ids if not isinstance(job_id, str) or job_id not in index]
    if unknown:
        raise InvalidInputError("order", unknown, "unknown job ids")
    repeated = [job_id for job_id, count in Counter(ids).items() if count > 1]
    if repeated:
        raise InvalidInputError("order", repeated, "job ids listed more than once")
    listed = set(ids)  # once: a set built per job made this quadratic (13 ms per 1024-GPU type's round)
    missing = [job.id for job in instance.jobs if job.id not in listed]
    if missing:
        raise InvalidInputError("order", missing, "job ids missing from the order (list every job once)")
    return np.array([index[job_id] for job_id in ids], dtype=np.int64)


def runs(values: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of equal consecutive rows of ``values`` (1-D or 2-D)."""
    rows = values.reshape(len(values), -1)
    if len(rows) == 0:
        return []
    change = np.flatnonzero((rows[1:] != rows[:-1]).any(axis=1)) + 1
    bounds = np.concatenate(([0], change, [len(rows)]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


def tune_order(
    instance: RoundInstance, order: np.ndarray, cpu: np.ndarray, mem: np.ndarray, sort: Sort = "demand"
) -> np.ndarray:
    """Job indices sorted by GPU, CPU and memory demand, largest first; ``order`` breaks ties (stable).

    ``sort="policy"`` returns ``order`` itself.
    """
    if sort == "policy":
        return order
    gpus = instance.gpus[order]
    # lexsort is stable and takes its last key as the primary one.
    return order[np.lexsort((-(gpus * mem[order]), -(gpus * cpu[order]), -gpus))]
