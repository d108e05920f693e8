"""Best-case demand vectors from the profiles (paper section 3.2, SPEC 3), and the jobs' floors, vectorised.

A job's best-case demand is the smallest per-GPU config ``(c, m)`` of its grid that reaches its maximum
throughput. "Smallest" is the footprint in GPU-proportional shares, ``c / c_p + m / m_p``; ties go to fewer
CPUs, then less memory. Two options:

- ``tolerance`` (SPEC 3: measured profiles are noisy): reaching ``(1 - tolerance) * max W`` counts as reaching
  the maximum (never less than the job's floor), so a config that buys the last few percent, often only
  measurement noise, with many more CPUs is not demanded. The paper's profiler treats gains under 10% as
  flat. The default, ``DEFAULT_TOLERANCE = 0.035``, is the largest round value that leaves the built-in
  (noise-free) profiles' demands, hence every noise-free result, exactly as they are at 0: the closest any
  of them comes to its maximum without reaching it is 3.87% below (MobileNet, 1.49 against 1.55, at every
  CPU:GPU ratio). Larger tolerances help more under noise but change noise-free rounds, not always for the
  better; ``benchmarks/bench_near_opt.py --tolerance`` records both.
- ``server_cap`` (paper section 6: a job is never given more than a server's worth of CPU or memory): only
  configs with ``min(g, G) * c <= C`` and ``min(g, G) * m <= M`` are considered, so a 4-GPU ResNet18 asks for
  6 CPUs per GPU (a whole 24-CPU server), not an unplaceable 9.

If no grid config passes the cap (a grid starting above it), the demand is the GPU-proportional point.

Public API
----------
``best_case_demands(instance, best_case_tolerance=DEFAULT_TOLERANCE, server_cap=True) -> (cpu_per_gpu, mem_per_gpu)``
``DEFAULT_TOLERANCE``, ``TOLERANCE`` (its rule: a number in ``[0, 1)``)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.io import round_instance
from synergy_opt.profile import share_for_hairs
from synergy_opt.profile_groups import ProfileGroup
from synergy_opt.validation import Number, boolean, checked

#: Configs within this fraction of a job's maximum throughput count as reaching it (SPEC 3, see above).
DEFAULT_TOLERANCE = 0.035
#: The rule a best-case tolerance obeys: at 1 every config would reach the maximum.
TOLERANCE = Number(0, 1, high_open=True)
# Relative slack when comparing configs with caps and targets (grid values such as 20.83 are not exact).
_TOLERANCE = 1e-9


def tolerance_option(options: Mapping[str, Any]) -> float:
    """The best-case tolerance a mechanism's ``options`` give: ``best_case_tolerance``, else ``threshold`` (its
    earlier name), else :data:`DEFAULT_TOLERANCE`; each checked and named as given."""
    threshold = TOLERANCE("threshold", options["threshold"]) if "threshold" in options else DEFAULT_TOLERANCE
    if "best_case_tolerance" in options:
        return float(TOLERANCE("best_case_tolerance", options["best_case_tolerance"]))
    return float(threshold)


def renamed_threshold(function: Callable[..., Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``threshold=`` (the earlier name) as ``best_case_tolerance=``, checked and named as given,
    when ``function`` takes ``best_case_tolerance`` (another rejects ``threshold`` by its own name)."""
    if "threshold" not in options or "best_case_tolerance" not in inspect.signature(function).parameters:
        return dict(options)
    tolerance = tolerance_option(options)
    return {**{key: value for key, value in options.items() if key != "threshold"}, "best_case_tolerance": tolerance}


@checked(instance=round_instance, best_case_tolerance=TOLERANCE, server_cap=boolean)
def best_case_demands(
    instance: RoundInstance, best_case_tolerance: float = DEFAULT_TOLERANCE, server_cap: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Per-GPU best-case CPU and memory of every job of ``instance``, in job order (SPEC 3: what Synergy-GREEDY
    and TUNE ask for; ``synergy_opt.best_case_demands``).

    Parameters
    ----------
    instance
        The round; its cluster gives ``(c_p, m_p)`` and the per-server caps.
    best_case_tolerance
        In ``[0, 1)``: the demand is the smallest config reaching ``max((1 - tolerance) * max W, floor)`` (the
        mechanisms' option of that name).
    server_cap
        Only consider configs within one server's CPUs and memory for ``min(g, G)`` GPUs.

    Returns
    -------
    cpu_per_gpu, mem_per_gpu
        Two float arrays of length ``len(instance.jobs)``.
    """
    cluster = instance.cluster
    c_p, m_p = cluster.cpu_per_gpu, cluster.mem_gb_per_gpu
    n = len(instance.jobs)
    cpu = np.full(n, c_p)
    mem = np.full(n, m_p)
    groups = instance.profile_groups
    floors = instance.floors
    for group in groups:
        # One pass per distinct (profile, GPUs on a full server) pair: shared profiles cost one row.
        spread = np.minimum(instance.gpus[group.jobs], cluster.gpus_per_server)
        pairs, inverse = np.unique(group.row * (cluster.gpus_per_server + 1) + spread, return_inverse=True)
        pair_row, pair_spread = np.divmod(pairs, cluster.gpus_per_server + 1)
        # Every job of a pair has the same profile, hence the same floor.
        pair_floor = np.empty(pairs.size)
        pair_floor[inverse] = floors[group.jobs]
        c, m = _pair_demands(group, group.tput[pair_row], pair_spread, pair_floor, instance, best_case_tolerance,
                             server_cap)
        cpu[group.jobs] = c[inverse]
        mem[group.jobs] = m[inverse]
    return share_for_hairs(cpu, c_p), share_for_hairs(mem, m_p)


def _pair_demands(
    group: ProfileGroup,
    tput: np.ndarray,
    spread: np.ndarray,
    floor: np.ndarray,
    instance: RoundInstance,
    tolerance: float,
    server_cap: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Demands for profiles ``tput`` (k, cpu, mem), each on ``spread[k]`` GPUs of a server at most."""
    cluster = instance.cluster
    c_p, m_p = cluster.cpu_per_gpu, cluster.mem_gb_per_gpu
    grid_cpu, grid_mem = np.meshgrid(group.cpu_axis, group.mem_axis, indexing="ij")
    if server_cap:
        cpu_ok = group.cpu_axis[None, :] <= (cluster.cpus_per_server / spread)[:, None] * (1 + _TOLERANCE)
        mem_ok = group.mem_axis[None, :] <= (cluster.mem_gb_per_server / spread)[:, None] * (1 + _TOLERANCE)
        usable = np.where(cpu_ok[:, :, None] & mem_ok[:, None, :], tput, -np.inf)
    else:
        usable = tput
    best = usable.max(axis=(1, 2))
    target = np.maximum((1.0 - tolerance) * best, floor)
    reach = (usable >= target[:, None, None] * (1 - _TOLERANCE)).reshape(len(tput), -1)

    # Rank every grid point once by (footprint, CPUs, memory); each profile takes its lowest-ranked reaching point.
    footprint = np.round(grid_cpu / c_p + grid_mem / m_p, 9).ravel()
    rank = np.empty(footprint.size, dtype=np.int64)
    rank[np.lexsort((grid_mem.ravel(), grid_cpu.ravel(), footprint))] = np.arange(footprint.size)
    point = np.where(reach, rank[None, :], footprint.size).argmin(axis=1)
    cpu = grid_cpu.ravel()[point]
    mem = grid_mem.ravel()[point]
    # No config within the cap (a grid starting above it): the proportional point, which always meets the floor.
    empty = ~np.isfinite(best)
    cpu[empty] = c_p
    mem[empty] = m_p
    return cpu, mem
