"""Throughputs of unusual size brought to ordinary size before a mechanism runs.

The mechanisms compare throughputs with absolute tolerances (gains of ``1e-9``, values of ``1e-5``): matrices in
units that make throughputs of ``1e-9`` (or ``1e9``) would read every gain as a tie. A power of two changes no
comparison between throughputs and no allocation at ordinary sizes, so a round whose largest throughput lies
outside the solvers' band (:func:`synergy_opt.solvers.registry.band_scale`, which ``solve_model`` applies to
objectives) is run with every matrix times the power of two that brings that throughput to ``[1, 2)``; the
allocation is the round's own (the same cluster, jobs and GPUs). Heterogeneous rounds alike
(:meth:`HeteroRound.scaled`).
"""

from __future__ import annotations

from typing import overload

import numpy as np

from synergy_opt.hetero import HeteroRound
from synergy_opt.instance import Job, RoundInstance, trusted_round
from synergy_opt.profile import Profile
from synergy_opt.solvers.registry import band_scale


def throughput_scale(instance: RoundInstance | HeteroRound) -> float:
    """1.0 for a round of ordinary throughputs (or none above 0), else the power of two that brings its largest
    throughput to ``[1, 2)``."""
    if isinstance(instance, HeteroRound):
        return band_scale(instance.largest_throughput())
    # Over the round's stacked matrices (cached on the round, which the mechanisms read anyway): a read per job
    # took 2.3 ms at 1024 jobs.
    return band_scale(max((float(np.max(group.tput, initial=0.0)) for group in instance.profile_groups), default=0.0))


@overload
def scaled(instance: RoundInstance, factor: float) -> RoundInstance: ...


@overload
def scaled(instance: HeteroRound, factor: float) -> HeteroRound: ...


def scaled(instance: RoundInstance | HeteroRound, factor: float) -> RoundInstance | HeteroRound:
    """``instance`` with every matrix times ``factor`` (a profile shared by several jobs stays shared)."""
    if isinstance(instance, HeteroRound):
        return instance.scaled(factor)
    profiles: dict[int, Profile] = {}
    jobs = []
    for job in instance.jobs:
        profile = job.profile
        if id(profile) not in profiles:
            profiles[id(profile)] = Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput * factor,
                                            profile.name)
        jobs.append(Job(job.id, job.gpus, profiles[id(profile)], job.model, job.arrival, job.work))
    # Trusted: the same jobs, only their matrices scaled (the simulator's whole-queue rounds may ask for more
    # GPUs than the cluster has, which a checked round refuses).
    return trusted_round(instance.cluster, tuple(jobs), instance.metadata)
