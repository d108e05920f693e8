"""Synergy-TUNE (paper section 4.2, SPEC 3): near-optimal packing that never goes below GPU-proportional.

1. Each job's demand vector is its best-case demand (:mod:`~synergy_opt.mechanisms.demand`).
2. Jobs are sorted by GPU, then CPU, then memory demand, largest first (ties: policy order) (``sort="demand"``,
   the paper's; ``sort="policy"`` keeps the policy's order, as the artifact's TUNE does).
3. Each job goes to one server that fits it, chosen by ``fit``: the least free resources (``"best"``, the
   paper's), the lowest index (``"first"``, the artifact's) or the most free resources (``"spread"``: worst
   fit); a multi-GPU job that fits on no single server goes to the fewest servers that hold it, CPU and
   memory in proportion to its GPUs there.
4. If it does not fit and its demand is above proportional, it is switched to proportional and retried.
5. If it still does not fit (or was at or below proportional already), servers with enough free GPUs are
   chosen and above-proportional jobs there are demoted towards proportional, releasing just what is needed
   (:mod:`~synergy_opt.packing.demotion`); then it is placed.

The order and the server choice are options so that each can be switched alone (issue 19,
``benchmarks/bench_tune_order.py``, ``docs/fidelity.md``). ``DEFAULT_SORT`` and ``DEFAULT_FIT`` say which
rule runs by default; ``sort="demand", fit="best"`` is the paper's.

Steps 3-5 are :func:`~synergy_opt.packing.place.place_with_fallback`. Every job whose GPUs exist is
placed, no job falls below its floor and no capacity is exceeded, whatever the order and server choice: it
never raises on a valid round (the artifact's TUNE calls ``sys.exit(1)`` when it fails). Runs of jobs with
equal demand, adjacent after the sort, are placed in one pass (:func:`~synergy_opt.packing.place.fill_servers`);
the rest of a run goes through :func:`~synergy_opt.packing.place.place_run_with_fallback`, which makes room
once per server for as many single-GPU jobs of the run as the server has free GPUs.

Two choices the paper leaves open: a demoted job is lowered only as far as the shortfall needs (to the grid
config losing the least throughput), and switched all the way to proportional only when no single lowering
suffices; best-case demands are capped at one server's CPUs and memory (paper section 6). The artifact's own
TUNE, which differs in more than its order, is :mod:`~synergy_opt.mechanisms.tune_artifact`.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.demand import DEFAULT_TOLERANCE, best_case_demands
from synergy_opt.packing.order import Sort, runs, tune_order
from synergy_opt.packing.place import Fit, fill_servers, place_run_with_fallback
from synergy_opt.packing.state import ServerState

#: TUNE's packing order and server choice by default: the paper's demand order, each job on the server with the
#: most free resources (spread). Measured against the paper's best fit (issue 19, benchmarks/README.md): on
#: Figure 9's setting at 9 jobs/h, seeds 0-9, 0.77x its average JCT, shorter on every seed; per full-load
#: round +5-8% throughput without profile noise, within 1% of it with noise. ``fit="best"`` is the paper's.
DEFAULT_SORT: Sort = "demand"
DEFAULT_FIT: Fit = "spread"


def pack_tune(
    instance: RoundInstance, order: np.ndarray, best_case_tolerance: float = DEFAULT_TOLERANCE,
    sort: Sort = DEFAULT_SORT, fit: Fit = DEFAULT_FIT,
) -> ServerState:
    """Synergy-TUNE on ``instance``, ``order`` (job indices) being the policy's priority order.

    ``sort`` is the packing order (``"demand"``, the paper's, or ``"policy"``) and ``fit`` the server choice
    (``"best"``, the paper's, ``"first"`` or ``"spread"``); see the module's docstring.
    """
    cpu, mem = best_case_demands(instance, best_case_tolerance)
    return pack_tune_demands(instance, order, cpu, mem, sort, fit)


def pack_tune_demands(
    instance: RoundInstance, order: np.ndarray, cpu: np.ndarray, mem: np.ndarray,
    sort: Sort = DEFAULT_SORT, fit: Fit = DEFAULT_FIT,
) -> ServerState:
    """:func:`pack_tune` with the best-case demands per GPU given (near-opt computes them once for its bound
    on TUNE and for TUNE)."""
    state = ServerState(instance)
    ranked = tune_order(instance, order, cpu, mem, sort)
    demand = np.column_stack((instance.gpus[ranked], cpu[ranked], mem[ranked]))
    for start, stop in runs(demand):
        jobs = ranked[start:stop]
        g, c, m = int(demand[start, 0]), float(demand[start, 1]), float(demand[start, 2])
        done = fill_servers(state, jobs, g, c, m, fit)
        place_run_with_fallback(state, jobs[done:], g, c, m, fit)
    return state
