"""Spending spare capacity: CPU and memory left idle on a server go to the jobs there that gain most.

Any mechanism can end with this step (``run_mechanism(..., spend_spare=True)``). A job may move to another of
its configs (the ideal ILP's columns, :mod:`~synergy_opt.mechanisms.configs`) when that config has a higher
throughput and the extra CPUs and memory it takes, in proportion to the job's GPUs on each of its servers
(SPEC 1: one per-GPU config on every server it spans), are free on every one of them. Each pass offers every
job its best move that fits (the largest gain, then the smallest footprint) and makes them in order of gain,
each checked again against what the earlier ones took; passes repeat until no move fits.

Why it is safe: a move raises one job's throughput and changes nothing else, and it is made only when the
room is free on each server the job spans, so no job's throughput falls and no capacity is exceeded. Jobs
keep their servers and GPUs. A job whose CPU or memory per GPU differs between its servers (no mechanism
here makes one) is left as it is.

Public API
----------
``spend_spare(instance, allocation, table=None) -> Allocation``
``Parts``, ``parts_of(instance, allocation)``, ``spend_parts(table, parts)``: the same on arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from synergy_opt.evaluation import CAPACITY_TOLERANCE, check_same_round
from synergy_opt.instance import Allocation, RoundInstance, job_throughputs, trusted_allocation, trusted_placement
from synergy_opt.instance import allocation as allocation_rule
from synergy_opt.io import round_instance
from synergy_opt.mechanisms.configs import ConfigTable, config_table
from synergy_opt.validation import InstanceOf, Optional, check_keyword_options, checked

# A gain must exceed this (relative to the throughput) to count: float noise is no reason to move a job.
_MIN_GAIN = 1e-9
# Room is compared with a slack well inside the evaluator's tolerance.
_SLACK = 1e-3 * CAPACITY_TOLERANCE


@dataclass
class Parts:
    """An allocation as arrays: part ``k`` is ``gpus[k]`` GPUs of job ``job[k]`` on ``server[k]`` (parts sorted
    by job); per job (all jobs of the round), its CPUs and GB per GPU and its throughput, and ``movable``:
    placed with one per-GPU config on all its servers."""

    job: np.ndarray
    server: np.ndarray
    gpus: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    tput: np.ndarray
    movable: np.ndarray

    def to_allocation(self, instance: RoundInstance, original: Allocation | None = None) -> Allocation:
        """The allocation these arrays hold (jobs that cannot move keep their ``original`` placements)."""
        order = np.lexsort((self.server, self.job))  # by job, then server (one pass, no per-job sort)
        job = self.job[order]
        gpus = self.gpus[order]
        columns = zip(job.tolist(), self.server[order].tolist(), gpus.tolist(), (gpus * self.cpu[job]).tolist(),
                      (gpus * self.mem[job]).tolist(), strict=True)
        ids = [item.id for item in instance.jobs]
        keep = (~self.movable).tolist() if original is not None else [False] * len(ids)
        by_job: dict[str, list] = {}
        for j, server, n, cpus, mem in columns:
            if keep[j]:
                continue
            by_job.setdefault(ids[j], []).append(trusted_placement(server, n, cpus, mem))
        parts: dict[str, tuple] = {}
        for j in dict.fromkeys(job.tolist()):  # job order, as the arrays hold them
            parts[ids[j]] = original.jobs[ids[j]] if keep[j] and original is not None else tuple(by_job[ids[j]])
        return trusted_allocation(parts)


def parts_of(instance: RoundInstance, allocation: Allocation) -> Parts:
    """``allocation`` as :class:`Parts`."""
    index = instance.job_index
    rows = [(index[job_id], p.server, p.gpus, p.cpus, p.mem_gb)
            for job_id, parts in allocation.jobs.items() for p in parts]
    table = np.array(rows, dtype=float).reshape(-1, 5)
    table = table[np.argsort(table[:, 0], kind="stable")]
    job, server, gpus = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2]
    n = len(instance.jobs)
    cpu, mem = np.zeros(n), np.zeros(n)
    movable = np.zeros(n, dtype=bool)
    if job.size:
        first = np.flatnonzero(np.r_[True, job[1:] != job[:-1]])
        per_cpu, per_mem = table[:, 3] / gpus, table[:, 4] / gpus
        low_cpu, low_mem = np.minimum.reduceat(per_cpu, first), np.minimum.reduceat(per_mem, first)
        high_cpu, high_mem = np.maximum.reduceat(per_cpu, first), np.maximum.reduceat(per_mem, first)
        jobs = job[first]
        cpu[jobs], mem[jobs] = low_cpu, low_mem
        movable[jobs] = (high_cpu - low_cpu <= CAPACITY_TOLERANCE * (1 + low_cpu)) & (
            high_mem - low_mem <= CAPACITY_TOLERANCE * (1 + low_mem))
    tput = job_throughputs(instance, cpu, mem)
    return Parts(job, server, gpus.astype(np.int64), cpu, mem, tput, movable)


def spend_parts(instance: RoundInstance, table: ConfigTable, parts: Parts) -> int:
    """The step on :class:`Parts`, in place; returns the number of moves."""
    cluster = instance.cluster
    if parts.job.size == 0:
        return 0
    free_cpu = cluster.cpus_per_server - np.bincount(parts.server, weights=parts.gpus * parts.cpu[parts.job],
                                                     minlength=cluster.servers)
    free_mem = cluster.mem_gb_per_server - np.bincount(parts.server, weights=parts.gpus * parts.mem[parts.job],
                                                       minlength=cluster.servers)
    first = np.flatnonzero(np.r_[True, parts.job[1:] != parts.job[:-1]])
    stops = np.r_[first[1:], parts.job.size]
    jobs = parts.job[first]
    movable = parts.movable[jobs]
    candidates = jobs[movable]
    klass = table.klass[candidates]
    counts = table.start[klass + 1] - table.start[klass]
    owner = np.repeat(np.arange(candidates.size), counts)  # per offer, its candidate
    column = table.start[klass][owner] + (np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts))
    who = candidates[owner]
    slack_cpu, slack_mem = _SLACK * cluster.cpus_per_server, _SLACK * cluster.mem_gb_per_server
    moves = 0
    while True:
        # Per job, the tightest per-GPU room over its servers.
        room_cpu = np.minimum.reduceat((free_cpu[parts.server] + slack_cpu) / parts.gpus, first)[movable]
        room_mem = np.minimum.reduceat((free_mem[parts.server] + slack_mem) / parts.gpus, first)[movable]
        gain = table.tput[column] - parts.tput[who]
        fits = ((table.cpu[column] - parts.cpu[who] <= room_cpu[owner])
                & (table.mem[column] - parts.mem[who] <= room_mem[owner])
                & (gain > _MIN_GAIN * (1 + parts.tput[who])))
        if not fits.any():
            return moves
        offers = np.flatnonzero(fits)
        offers = offers[np.lexsort((table.footprint[column[offers]], -gain[offers], owner[offers]))]
        best = offers[np.r_[True, owner[offers][1:] != owner[offers][:-1]]]
        made = 0
        for pick in best[np.argsort(-gain[best], kind="stable")].tolist():
            j = int(who[pick])
            at = int(np.searchsorted(jobs, j))
            mine = np.arange(first[at], stops[at])
            extra_cpu = parts.gpus[mine] * (table.cpu[column[pick]] - parts.cpu[j])
            extra_mem = parts.gpus[mine] * (table.mem[column[pick]] - parts.mem[j])
            # Earlier moves of this pass may have taken the room: check again.
            where = parts.server[mine]
            if np.all(extra_cpu <= free_cpu[where] + slack_cpu) and np.all(extra_mem <= free_mem[where] + slack_mem):
                free_cpu[where] -= extra_cpu
                free_mem[where] -= extra_mem
                parts.cpu[j], parts.mem[j] = table.cpu[column[pick]], table.mem[column[pick]]
                parts.tput[j] = table.tput[column[pick]]
                made += 1
        moves += made
        if made == 0:
            return moves


@checked(instance=round_instance, allocation=allocation_rule, table=Optional(InstanceOf(ConfigTable)))
def spend_spare(instance: RoundInstance, allocation: Allocation, table: ConfigTable | None = None) -> Allocation:
    """``allocation`` with idle CPUs and memory given to the jobs that gain most (see the module docstring).

    Parameters
    ----------
    instance
        The round ``allocation`` was made for (or its JSON form).
    allocation
        Any valid allocation of the round (unplaced jobs stay unplaced), or its JSON form.
    table
        The round's config table, if already built.

    Returns
    -------
    Allocation
        The same placements, with some jobs at higher-throughput configs.

    Raises
    ------
    InvalidInputError
        For anything but a round and an allocation, or an allocation naming a job or server the round lacks.
    """
    check_same_round(instance, allocation)
    table = table if table is not None else config_table(instance)
    parts = parts_of(instance, allocation)
    if spend_parts(instance, table, parts) == 0:
        return allocation
    return parts.to_allocation(instance, allocation)


def split_spare_option(options: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """Split off ``spend_spare`` (every mechanism's option, a bool) from the mechanism's own options."""
    own = dict(options)
    spare = check_keyword_options(spend_spare_option, {"spend_spare": own.pop("spend_spare", False)})
    return own, spare["spend_spare"]


def spend_spare_option(spend_spare: bool = False) -> None:
    """The signature ``spend_spare`` is checked against (a bool)."""
