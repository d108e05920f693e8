"""Synergy-TUNE as the paper's artifact runs it (msr-fiddle/synergy ``simulator/resources/cluster.py``,
``Cluster.allocate_synergy_tune``): the mechanism behind the paper's Figure 9 numbers (SPEC 8).

It differs from the paper's section 4.2 (:mod:`~synergy_opt.mechanisms.tune`) in three ways: jobs are taken
in the policy's order, not sorted by demand; GPUs are taken first-fit in server order, not best-fit; and a
job not given its whole best-case demand is given the GPU-proportional share (never a point in between).

1. Each job's demand per GPU is its best-case demand (:mod:`~synergy_opt.mechanisms.demand`).
2. Jobs are taken in the policy's order. Placement takes GPUs server by server in index order, on each as
   many as still fit the demand per GPU (GPUs, CPUs and memory all free), until the job has its GPUs
   (:func:`~synergy_opt.packing.place.first_fit_spread`).
3. If that fails, a job above the proportional share in CPU or memory is retried at the share; a job at or
   below it keeps its own demand.
4. If that fails too, peers are reverted. Servers with free GPUs are chosen (a multi-GPU job first looks
   for the lowest-numbered server with all its GPUs free; otherwise fewest free GPUs first, ties to the lower
   index, until the job's GPUs are covered). On each, what is missing for the job's share there (CPUs,
   memory) is computed; the jobs placed on that server this round are sorted (stably, in place, as the
   artifact does) by the number of servers they span, then most CPUs per GPU, then most memory per GPU. Each
   in turn is reverted (re-booked on the same GPUs at the share, or at its own demand if that is not above
   the share) and what is missing shrinks by its excess above the share there, until one covers all of it.
   Then one more first-fit try.
5. A job's speedup is what the evaluator reads at its config, which here is its best-case point (its
   model's best speedup) or the share (1): the artifact's all-or-nothing speedup.

Where the artifact would fail this toolkit's invariants, it is completed instead, and the built-in profiles
never get there (the Figure 9 replay is exact): the artifact calls ``sys.exit(1)`` when the last try fails
(here :func:`~synergy_opt.packing.place.place_with_fallback` places the job, demoting peers just enough),
and a "mixed" peer (above the share in one resource, below in the other) that reverting would grow beyond
its server's capacity is passed over. The artifact's linear speedup for a multi-GPU job whose best case is
capped at one server is in the job's matrix when its trace is the artifact's record
(:func:`~synergy_opt.sim.artifact_profiles.artifact_profile`); its per-model placement penalty is 1 for every
model.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands
from synergy_opt.packing.demotion import is_above_proportional
from synergy_opt.packing.order import runs
from synergy_opt.packing.place import fill_servers, first_fit_spread, place_with_fallback
from synergy_opt.packing.state import ServerState


def pack_tune_artifact(
    instance: RoundInstance, order: np.ndarray, best_case_tolerance: float = DEFAULT_TOLERANCE,
    sort: Literal["policy", "gpus"] = "policy",
) -> ServerState:
    """The artifact's Synergy-TUNE on ``instance``, jobs taken in ``order`` (job indices, policy order), or with
    ``sort="gpus"`` in that order stably sorted by GPU demand, largest first: what the artifact's LAS does before
    its TUNE places (``schedulers/las_synergy_new.py``, ``if self.tune``; docs/fidelity.md, "Beyond Figure 9")."""
    if sort == "gpus":
        order = order[np.argsort(-instance.gpus[order], kind="stable")]
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    packer = _ArtifactTune(instance, cpu, mem)
    demand = np.column_stack((instance.gpus[order], cpu[order], mem[order]))
    for start, stop in runs(demand):
        jobs = order[start:stop]
        done = 0
        if demand[start, 0] == 1:
            # Consecutive single-GPU jobs of one demand, first fit one by one, in one pass.
            done = fill_servers(packer.state, jobs, 1, float(demand[start, 1]), float(demand[start, 2]),
                                fit="first")
            for job in jobs[:done].tolist():
                packer.record(job, packer.state.placement(job).servers)
        for job in jobs[done:].tolist():
            packer.place(job)
    return packer.state


class _ArtifactTune:
    """One round of the artifact's TUNE: the server state plus its per-server lists of the jobs placed."""

    def __init__(self, instance: RoundInstance, cpu: np.ndarray, mem: np.ndarray) -> None:
        self.state = ServerState(instance)
        self.cpu = cpu.tolist()
        self.mem = mem.tolist()
        self.gpus = instance.gpus.tolist()
        # The artifact's cluster.server_job_schedule: per server, the jobs placed there, in placement order.
        self.placed_on: list[list[int]] = [[] for _ in range(instance.cluster.servers)]

    def place(self, job: int) -> None:
        state = self.state
        gpus, cpu, mem = self.gpus[job], self.cpu[job], self.mem[job]
        if int(state.free_gpus.sum()) < gpus:
            return  # the engine never hands over a job whose GPUs are not free; a round may
        if self._first_fit(job, gpus, cpu, mem):
            return
        if is_above_proportional(state, cpu, mem):
            cpu, mem = state.proportional
            if self._first_fit(job, gpus, cpu, mem):
                return
        for server, count in self._servers_to_free(gpus):
            self._revert_peers(server, count * cpu, count * mem)
        if self._first_fit(job, gpus, cpu, mem):
            return
        # The artifact exits here (never on its Figure 9 trace); TUNE's demotion places the job instead.
        result = place_with_fallback(state, job, gpus, cpu, mem)
        assert result is not None  # its GPUs are free
        self.record(job, result.placement.servers)

    def _first_fit(self, job: int, gpus: int, cpu: float, mem: float) -> bool:
        state = self.state
        if gpus == 1:
            fits = np.flatnonzero(state.fits(1, cpu, mem))
            spread = (fits[:1], np.ones(1, dtype=np.int64)) if fits.size else None
        else:
            spread = first_fit_spread(state, gpus, cpu, mem)
        if spread is None:
            return False
        placed = state.place(job, spread[0], spread[1], cpu, mem)
        self.record(job, placed.servers)
        return True

    def record(self, job: int, servers: tuple[int, ...]) -> None:
        for server in servers:
            self.placed_on[server].append(job)

    def _servers_to_free(self, gpus: int) -> list[tuple[int, int]]:
        """The artifact's ``_get_underutilized_servers``: ``(server, GPUs of the job there)`` in its order."""
        free = self.state.free_gpus.tolist()
        if gpus > 1:
            for server, count in enumerate(free):
                if count >= gpus:
                    return [(server, gpus)]
        chosen = []
        for server in sorted((s for s, count in enumerate(free) if count > 0), key=lambda s: (free[s], s)):
            take = min(free[server], gpus)
            chosen.append((server, take))
            gpus -= take
            if gpus == 0:
                break
        return chosen

    def _revert_peers(self, server: int, need_cpu: float, need_mem: float) -> None:
        """The artifact's ``_reallocate_peer`` and the re-booking after it, on one server."""
        state = self.state
        c_p, m_p = state.proportional
        short = [need_cpu - float(state.free_cpus[server]), need_mem - float(state.free_mem[server])]
        tolerance = (state.cpu_tol, state.mem_tol)
        if all(s <= tol for s, tol in zip(short, tolerance, strict=True)):
            return
        short = [max(s, 0.0) for s in short]
        peers = self.placed_on[server]
        # Sorted in place, as the artifact sorts its list: later sorts start from this order.
        peers.sort(key=lambda j: (len(state.placement(j).servers), -state.placement(j).cpu_per_gpu,
                                  -state.placement(j).mem_per_gpu))
        for peer in peers:
            placed = state.placement(peer)
            here = state.jobs_on[server][peer]
            excess = (max(here * (placed.cpu_per_gpu - c_p), 0.0), max(here * (placed.mem_per_gpu - m_p), 0.0))
            short = [max(s - e, 0.0) for s, e in zip(short, excess, strict=True)]
            self._revert(peer)
            # The artifact's GPU entry of what is missing is always 0, so no peer is ever passed over.
            if all(s <= tol for s, tol in zip(short, tolerance, strict=True)):
                return

    def _revert(self, job: int) -> None:
        """Re-book ``job`` on its GPUs at the share, or at its own demand when that is not above the share."""
        state = self.state
        cpu, mem = self.cpu[job], self.mem[job]
        if is_above_proportional(state, cpu, mem):
            cpu, mem = state.proportional
        before = state.placement(job)
        if (cpu, mem) == (before.cpu_per_gpu, before.mem_per_gpu):
            return
        after = state.set_demand(job, cpu, mem)
        if state.overcommitted(list(after.servers)).size:
            state.set_demand(job, before.cpu_per_gpu, before.mem_per_gpu)  # a mixed job: passed over
