"""Rounding a placement into a deployable Allocation (paper section 4.1.3, SPEC 2.3).

Rules, in order:

1. A job wholly on one server keeps its place at its ideal demand (``c*_j``, ``m*_j``). A job split with
   integral GPUs per server (the integral-GPU MILP) keeps its place too: CPU and memory are already in
   proportion to its GPUs there.
2. Every other job (split with fractional GPUs, or a kept job that does not fit after all, which only solver
   tolerances can cause) is re-placed, largest first (GPU, then CPU, then memory demand, as TUNE sorts), by
   Synergy-TUNE's placement of one job, :func:`~synergy_opt.packing.place.place_with_fallback`, with the
   servers the placement had it on tried first: at its ideal demand best-fit (multi-GPU: fewest servers),
   else at the GPU-proportional share, else on servers with enough free GPUs after demoting the
   above-proportional jobs there just enough (:mod:`~synergy_opt.packing.demotion`).

Every job is placed while its GPUs exist (they do: the round's GPU demand fits the cluster), no capacity is
exceeded and no job falls below its floor: the fallback's guarantees. The report says which jobs were
re-placed (and at which stage), which were demoted, and the throughput lost against the ideal ILP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.evaluation import Evaluation, evaluate, keeps_floor
from synergy_opt.instance import Allocation, RoundInstance, job_throughputs
from synergy_opt.packing.order import tune_order
from synergy_opt.packing.place import place_with_fallback
from synergy_opt.packing.state import ServerState
from synergy_opt.validation import Number

# A share this close to 1 is a whole job; GPUs this close to an integer are integral.
_WHOLE = 1e-6


@dataclass(frozen=True)
class RoundingReport:
    """What rounding did. Job ids throughout; ``replaced`` maps each re-placed job to its fallback stage."""

    kept: tuple[str, ...]
    replaced: dict[str, str]
    demoted: tuple[str, ...]
    unplaced: tuple[str, ...]
    ideal_objective: float
    objective: float

    @property
    def throughput_lost(self) -> float:
        """Ideal ILP objective minus the rounded allocation's (per-job throughput, eq. 1)."""
        return self.ideal_objective - self.objective

    @property
    def relative_loss(self) -> float:
        return self.throughput_lost / self.ideal_objective if self.ideal_objective > 0 else 0.0

    def stage_counts(self) -> dict[str, int]:
        """How many re-placed jobs ended at each stage ("ideal", "proportional", "demoted")."""
        counts = {"ideal": 0, "proportional": 0, "demoted": 0}
        for stage in self.replaced.values():
            counts[stage] = counts.get(stage, 0) + 1
        return counts


@dataclass(frozen=True, eq=False)
class Rounded:
    """A rounded placement: the Allocation, its evaluation and the report."""

    allocation: Allocation
    evaluation: Evaluation
    report: RoundingReport
    state: ServerState


def round_placement(
    instance: RoundInstance,
    shares: np.ndarray,
    cpu_per_gpu: np.ndarray,
    mem_per_gpu: np.ndarray,
    ideal_objective: float,
) -> Rounded:
    """Round a placement of ``instance`` into a valid Allocation.

    Parameters
    ----------
    shares
        ``(servers, jobs)``: the fraction of each job on each server (columns sum to 1), from the placement
        LP or either MILP.
    cpu_per_gpu, mem_per_gpu
        Each job's ideal per-GPU demand (``c*_j / g_j``, ``m*_j / g_j``), in job order; each meets its floor.
    ideal_objective
        The ideal ILP's objective, against which the loss is reported.
    """
    servers, jobs = instance.cluster.servers, len(instance.jobs)
    shares = np.asarray(shares, dtype=float)
    if shares.shape != (servers, jobs):
        raise InvalidInputError("shares", shares.shape, f"must be (servers, jobs) = ({servers}, {jobs})")
    # A placement: shares in [0, 1], each job's summing to 1 (NaN or a column of 0.6 was rounded as it was).
    column = shares.sum(axis=0)
    bad = np.flatnonzero(~np.isfinite(column) | np.any((shares < -_WHOLE) | (shares > 1 + _WHOLE), axis=0)
                         | (np.abs(column - 1.0) > _WHOLE))
    if bad.size:
        raise InvalidInputError(f"shares[:, {bad[0]}]", shares[:, bad[0]].tolist(),
                                "a job's shares are in [0, 1] and sum to 1")
    ideal_objective = Number()("ideal_objective", ideal_objective)  # finite (None or "x" raised TypeError)
    cpu = np.asarray(cpu_per_gpu, dtype=float)
    mem = np.asarray(mem_per_gpu, dtype=float)
    if cpu.shape != (jobs,) or mem.shape != (jobs,):
        raise InvalidInputError("cpu_per_gpu", cpu.shape, f"one per-GPU demand per job ({jobs})")
    # Each config a real one meeting its job's floor, as the evaluator reads it (another round's configs, or
    # configs below the floors, left jobs below their floors without a word; NaN was named as 'demand').
    for name, values in (("cpu_per_gpu", cpu), ("mem_per_gpu", mem)):
        bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
        if bad.size:
            raise InvalidInputError(f"{name}[{bad[0]}]", float(values[bad[0]]), "must be finite and >= 0")
    below = np.flatnonzero(~keeps_floor(job_throughputs(instance, cpu, mem), instance.floors))
    if below.size:
        first = int(below[0])
        raise InvalidInputError(f"cpu_per_gpu[{first}]", (float(cpu[first]), float(mem[first])),
                                f"the config of job {instance.jobs[first].id!r} falls below its floor (so do "
                                f"{below.size} jobs' in all): configs of another round?")
    state = ServerState(instance)
    gpus_on = shares * instance.gpus
    integral = np.all(np.abs(gpus_on - np.rint(gpus_on)) <= _WHOLE * instance.gpus, axis=0)
    kept: list[str] = []
    pending: list[int] = []
    for job in np.flatnonzero(integral):
        hosts = np.flatnonzero(np.rint(gpus_on[:, job]) > 0)
        counts = np.rint(gpus_on[hosts, job]).astype(np.int64)
        if _fits(state, counts, hosts, cpu[job], mem[job]):
            state.place(int(job), hosts, counts, cpu[job], mem[job])
            kept.append(instance.jobs[job].id)
        else:
            pending.append(int(job))
    pending.extend(np.flatnonzero(~integral).tolist())

    replaced: dict[str, str] = {}
    demoted: dict[str, None] = {}
    unplaced: list[str] = []
    for job in tune_order(instance, np.array(sorted(pending), dtype=np.int64), cpu, mem):
        result = place_with_fallback(state, int(job), int(instance.gpus[job]), float(cpu[job]), float(mem[job]),
                                     servers_hint=shares[:, job] > 0)
        job_id = instance.jobs[job].id
        if result is None:
            unplaced.append(job_id)
            continue
        replaced[job_id] = result.stage
        demoted.update(dict.fromkeys(instance.jobs[d].id for d in result.demoted))

    allocation = state.to_allocation()
    evaluation = evaluate(instance, allocation)
    report = RoundingReport(tuple(kept), replaced, tuple(demoted), tuple(unplaced), float(ideal_objective),
                            evaluation.objective)
    return Rounded(allocation, evaluation, report, state)


def _fits(state: ServerState, counts: np.ndarray, hosts: np.ndarray, cpu: float, mem: float) -> bool:
    """Whether ``counts[k]`` GPUs at this per-GPU demand fit on each ``hosts[k]`` (with the state's slack)."""
    return bool(np.all(state.capacity_for(cpu, mem)[hosts] >= counts))
