"""Dominant Resource Fairness (Ghodsi et al., NSDI '11) as the paper's big-data baseline (section 5.7).

Jobs are fed their best-case demands as static demands. DRF's progressive filling serves the job with the
smallest dominant share first; with one gang task per job that is the jobs sorted by dominant share
``max(g/G_total, g c/C_total, g m/M_total)`` (ties: policy order), each placed first fit. A job whose static
demand fits nowhere still gets its GPUs, with the CPU and memory left there (``skip=True``: it waits instead).
"""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands
from synergy_opt.mechanisms.greedy import pack_first_fit
from synergy_opt.packing.state import ServerState


def dominant_shares(instance: RoundInstance, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Each job's dominant share of the cluster under per-GPU demands ``cpu``, ``mem`` (job order)."""
    cluster = instance.cluster
    gpus = instance.gpus
    return np.maximum.reduce([
        gpus / cluster.total_gpus, gpus * cpu / cluster.total_cpus, gpus * mem / cluster.total_mem_gb
    ])


def pack_drf(
    instance: RoundInstance, order: np.ndarray, best_case_tolerance: float = DEFAULT_TOLERANCE, skip: bool = False
) -> ServerState:
    """DRF on ``instance``; ``order`` (job indices) breaks ties between equal dominant shares."""
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    share = dominant_shares(instance, cpu, mem)
    by_share = order[np.argsort(share[order], kind="stable")]
    return pack_first_fit(instance, by_share, cpu, mem, skip=skip)
