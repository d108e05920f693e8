"""Placement primitives shared by the mechanisms and by Synergy-OPT's rounding (paper section 4.2).

Every function takes a :class:`~synergy_opt.packing.state.ServerState` and a job's demand as ``gpus`` plus
per-GPU ``cpu_per_gpu`` / ``mem_per_gpu`` (CPU and memory follow the GPUs onto each server). Server choices
are vectorised over servers; ``candidates`` (a boolean mask or an index array) restricts them.

Server choice (nothing is booked)
---------------------------------
``fit_server(state, gpus, cpu_per_gpu, mem_per_gpu, candidates=None, fit="best") -> int | None``
    The one server that fits the whole job, chosen by ``fit`` (``FITS``): ``"best"`` the least free
    resources, ``"first"`` the lowest index, ``"spread"`` the most free resources (worst fit).
``best_fit_server(state, gpus, cpu_per_gpu, mem_per_gpu, candidates=None) -> int | None``
    ``fit_server`` with ``fit="best"``.
``fewest_servers(state, gpus, cpu_per_gpu, mem_per_gpu, candidates=None) -> (servers, gpus) | None``
    The fewest servers that together fit the job; the last one is chosen best-fit.
``first_fit_spread(...) -> (servers, gpus) | None``
    GPUs taken in server order wherever they fit (the naive multi-server first fit).

Placing (books the resources)
-----------------------------
``place_best_fit(state, job, gpus, cpu_per_gpu, mem_per_gpu, candidates=None, fit="best") -> ...``
    One server chosen by ``fit``, else (multi-GPU) the fewest servers; ``None`` if the demand fits nowhere.
``fill_servers(state, jobs, gpus, cpu_per_gpu, mem_per_gpu, fit="best") -> int``
    Identical jobs, each on one server chosen by ``fit``; returns how many of ``jobs`` (a prefix) were
    placed. The same result as placing them one by one, in one pass (``"spread"``: one heap pass).
``place_leftover(state, job, gpus, cpu_per_gpu, mem_per_gpu) -> JobPlacement | None``
    The static baselines' last resort: free GPUs with whatever CPU and memory is left there (up to the demand).
``place_with_fallback(state, job, gpus, cpu_per_gpu, mem_per_gpu, servers_hint=None, fit="best")``
    Synergy-TUNE's placement of one job: its demand on a server chosen by ``fit``; else GPU-proportional if
    the demand was above it; else servers with enough free GPUs are chosen and above-proportional jobs there
    are demoted just enough (:mod:`synergy_opt.packing.demotion`). Never fails while the cluster has ``gpus``
    free GPUs; the job's throughput is never below its floor and neither is any demoted job's.
    ``servers_hint`` (e.g. the servers an LP put a split job on) is tried first at every stage.
``place_run_with_fallback(state, jobs, gpus, cpu_per_gpu, mem_per_gpu) -> list[FallbackResult | None]``
    The same for identical jobs in order, re-searching only servers changed since a stage last failed.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from synergy_opt.packing.demotion import is_above_proportional, make_room
from synergy_opt.packing.state import JobPlacement, ServerState

Candidates = np.ndarray | list[int] | tuple[int, ...] | None
Stage = Literal["ideal", "proportional", "demoted"]
#: How one server is chosen among those that fit a job: the least free resources (best fit, the paper's),
#: the lowest index (first fit, the artifact's), or the most free resources (worst fit: spreads the jobs).
Fit = Literal["best", "first", "spread"]
FITS: tuple[str, ...] = get_args(Fit)


@dataclass(frozen=True)
class FallbackResult:
    """How :func:`place_with_fallback` placed a job.

    ``stage`` is ``"ideal"`` (the demand as given), ``"proportional"`` (switched to ``(c_p, m_p)``) or
    ``"demoted"`` (placed after lowering the jobs in ``demoted``, job indices, towards proportional).
    """

    placement: JobPlacement
    stage: Stage
    demoted: tuple[int, ...] = ()

    @property
    def cpu_per_gpu(self) -> float:
        return self.placement.cpu_per_gpu

    @property
    def mem_per_gpu(self) -> float:
        return self.placement.mem_per_gpu


# -- server choice ---------------------------------------------------------------------------------------------
def _mask(state: ServerState, candidates: Candidates) -> np.ndarray | None:
    """Candidate servers as a boolean mask over all servers (``None``: all servers)."""
    if candidates is None:
        return None
    candidates = np.asarray(candidates)
    if candidates.dtype == bool:
        return candidates
    mask = np.zeros(state.cluster.servers, dtype=bool)
    mask[candidates.astype(np.int64)] = True
    return mask


def _subset(candidates: Candidates) -> np.ndarray | None:
    """Candidate servers as indices, ascending for deterministic ties (``None``: all servers)."""
    if candidates is None:
        return None
    candidates = np.asarray(candidates)
    if candidates.dtype == bool:
        return np.flatnonzero(candidates)
    return candidates.astype(np.int64, copy=False)


def _fits_among(
    state: ServerState, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates
) -> tuple[np.ndarray | None, np.ndarray]:
    """``(servers, fits)``: the candidate indices (``None`` for all) and whether the whole job fits on each."""
    index = _subset(candidates)
    return index, state.fits(gpus, cpu_per_gpu, mem_per_gpu, index)


def fit_server(
    state: ServerState, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates = None,
    fit: Fit = "best",
) -> int | None:
    """The server that fits the whole job chosen by ``fit``: the least free resources (GPU + CPU + memory
    fractions; ``"best"``), the lowest index (``"first"``) or the most free resources (``"spread"``); ties
    to the lower index."""
    index, ok = _fits_among(state, gpus, cpu_per_gpu, mem_per_gpu, candidates)
    if not ok.any():
        return None
    if fit == "first":
        chosen = int(ok.argmax())
    else:
        score = state.free_score(index)
        chosen = int(np.where(ok, score, np.inf).argmin() if fit == "best" else np.where(ok, score, -np.inf).argmax())
    return chosen if index is None else int(index[chosen])


def best_fit_server(
    state: ServerState, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates = None
) -> int | None:
    """The server with the least free resources (GPU + CPU + memory fractions) that fits the whole job."""
    return fit_server(state, gpus, cpu_per_gpu, mem_per_gpu, candidates, "best")


def _capacity(state: ServerState, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates) -> np.ndarray:
    capacity = state.capacity_for(cpu_per_gpu, mem_per_gpu)
    mask = _mask(state, candidates)
    return capacity if mask is None else np.where(mask, capacity, 0)


def fewest_servers(
    state: ServerState, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The fewest servers that together hold the job at this per-GPU demand, and the GPUs on each.

    The servers with the most room are taken whole; the last, which takes the remainder, is the best fit
    among the rest. ``None`` when the servers together cannot hold the job.
    """
    capacity = _capacity(state, cpu_per_gpu, mem_per_gpu, candidates)
    if capacity.sum() < gpus:
        return None
    order = np.argsort(-capacity, kind="stable")
    reach = np.cumsum(capacity[order])
    count = int(np.searchsorted(reach, gpus)) + 1  # servers needed
    whole = order[: count - 1]
    remainder = gpus - (int(reach[count - 2]) if count > 1 else 0)
    rest = capacity >= remainder
    rest[whole] = False
    last = int(np.where(rest, state.free_score(), np.inf).argmin())
    servers = np.append(whole, last)
    counts = np.append(capacity[whole], remainder)
    return servers, counts


def _take(order: np.ndarray, capacity: np.ndarray, gpus: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Servers of ``order`` taken in turn, each with its ``capacity``, until ``gpus`` GPUs (the last trimmed)."""
    order = order[capacity[order] > 0]
    reach = np.cumsum(capacity[order])
    if reach.size == 0 or reach[-1] < gpus:
        return None
    count = int(np.searchsorted(reach, gpus)) + 1
    servers = order[:count]
    counts = capacity[servers].copy()
    counts[-1] -= int(reach[count - 1]) - gpus
    return servers, counts


def first_fit_spread(
    state: ServerState, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """GPUs taken in server order wherever they fit (naive multi-server first fit), or ``None``."""
    capacity = _capacity(state, cpu_per_gpu, mem_per_gpu, candidates)
    return _take(np.arange(capacity.size), capacity, gpus)


# -- placing ---------------------------------------------------------------------------------------------------
def place_best_fit(
    state: ServerState, job: int, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, candidates: Candidates = None,
    fit: Fit = "best",
) -> JobPlacement | None:
    """Place ``job`` on its best-fit server (or the one ``fit`` chooses), else (multi-GPU) on the fewest
    servers; ``None`` if it fits nowhere."""
    server = fit_server(state, gpus, cpu_per_gpu, mem_per_gpu, candidates, fit)
    if server is not None:
        return state.place(job, (server,), (gpus,), cpu_per_gpu, mem_per_gpu)
    if gpus == 1:
        return None
    spread = fewest_servers(state, gpus, cpu_per_gpu, mem_per_gpu, candidates)
    if spread is None:
        return None
    return state.place(job, spread[0], spread[1], cpu_per_gpu, mem_per_gpu)


def fill_servers(
    state: ServerState,
    jobs: np.ndarray | list[int],
    gpus: int,
    cpu_per_gpu: float,
    mem_per_gpu: float,
    fit: Fit = "best",
) -> int:
    """Place identical jobs one server each, as one-by-one placement by ``fit`` would; return how many.

    One by one, best fit keeps filling the tightest server that fits (placing there only makes it tighter)
    and moves to the next tightest when it is full; first fit fills servers in index order. So the jobs,
    in order, go to the servers sorted by free score (or index), each taking as many copies as fit. Spread
    (worst fit) takes the roomiest server each time, which placing there changes: a heap of the servers by
    their free score, recomputed as :meth:`ServerState.free_score` would after each placement.
    """
    copies = state.capacity_for(cpu_per_gpu, mem_per_gpu) // gpus
    usable = np.flatnonzero(copies > 0)
    if fit == "spread":
        slots = _spread_slots(state, usable, copies, len(jobs), gpus, cpu_per_gpu, mem_per_gpu)
    else:
        if fit == "best":
            usable = usable[np.argsort(state.free_score()[usable], kind="stable")]
        slots = np.repeat(usable, copies[usable])[: len(jobs)]
    state.place_many(jobs[: slots.size], slots, gpus, cpu_per_gpu, mem_per_gpu)
    return int(slots.size)


def _spread_slots(
    state: ServerState, usable: np.ndarray, copies: np.ndarray, count: int, gpus: int, cpu: float, mem: float
) -> np.ndarray:
    """The servers ``count`` identical jobs go to one by one under worst fit (most free score, lower index)."""
    cluster = state.cluster
    g_cap, c_cap, m_cap = cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server
    free = {int(s): [float(state.free_gpus[s]), float(state.free_cpus[s]), float(state.free_mem[s])] for s in usable}
    left = {int(s): int(copies[s]) for s in usable}
    heap = [(-(f[0] / g_cap + f[1] / c_cap + f[2] / m_cap), s) for s, f in free.items()]
    heapq.heapify(heap)
    slots: list[int] = []
    while heap and len(slots) < count:
        _, server = heapq.heappop(heap)
        slots.append(server)
        left[server] -= 1
        if left[server] == 0:
            continue
        # Booked as ServerState books it, then scored as free_score scores it: the same floats.
        f = free[server]
        f[0] -= gpus
        f[1] -= gpus * cpu
        f[2] -= gpus * mem
        heapq.heappush(heap, (-(f[0] / g_cap + f[1] / c_cap + f[2] / m_cap), server))
    return np.array(slots, dtype=np.int64)


def place_leftover(
    state: ServerState, job: int, gpus: int, cpu_per_gpu: float, mem_per_gpu: float
) -> JobPlacement | None:
    """Place ``job`` on free GPUs with whatever CPU and memory is left there, up to its demand per GPU.

    The static baselines' last resort, so that a job whose GPUs exist still runs: one server if one has the
    GPUs (the one leaving the job the most throughput), else the fewest servers; the per-GPU share is the
    same on each server, the smallest left. ``None`` when fewer than ``gpus`` GPUs are free.
    """
    free = state.free_gpus
    if free.sum() < gpus:
        return None
    cpu_left = np.maximum(state.free_cpus, 0.0)
    mem_left = np.maximum(state.free_mem, 0.0)
    single = np.flatnonzero(free >= gpus)
    if single.size:
        cpu = np.minimum(cpu_per_gpu, cpu_left[single] / gpus)
        mem = np.minimum(mem_per_gpu, mem_left[single] / gpus)
        tput = np.asarray(state.instance.jobs[job].profile.throughput(cpu, mem))
        # Most throughput, then the most CPU and memory, then the fewest free GPUs (best fit on GPUs).
        best = int(np.lexsort((free[single], -(cpu / cpu_per_gpu + mem / mem_per_gpu), -tput))[0])
        return state.place(job, (int(single[best]),), (gpus,), float(cpu[best]), float(mem[best]))
    taken = _take(np.argsort(-free, kind="stable"), free, gpus)
    if taken is None:
        return None
    servers, counts = taken
    cpu = min(cpu_per_gpu, float(np.min(cpu_left[servers] / counts)))
    mem = min(mem_per_gpu, float(np.min(mem_left[servers] / counts)))
    return state.place(job, servers, counts, cpu, mem)


def _gpu_servers(
    state: ServerState, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, hint: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Servers with enough free GPUs for the job, preferring one server, the hint and the least to release."""
    cluster = state.cluster
    free = state.free_gpus
    if free.sum() < gpus:
        return None

    def deficit(servers: np.ndarray | slice) -> np.ndarray:
        # What would have to be released to host all of the job there, as fractions of a server.
        return (
            np.maximum(gpus * cpu_per_gpu - state.free_cpus[servers], 0.0) / cluster.cpus_per_server
            + np.maximum(gpus * mem_per_gpu - state.free_mem[servers], 0.0) / cluster.mem_gb_per_server
        )

    enough = free >= gpus
    if enough.any():
        # Hinted servers first, then the least to release, then the fewest free GPUs (best fit on GPUs).
        if hint is not None and (enough & hint).any():
            enough &= hint
        least = np.where(enough, deficit(slice(None)), np.inf)
        ties = np.flatnonzero(least <= least.min() + 1e-12)
        return ties[np.argmin(free[ties])][None], np.array([gpus])
    # Fewest servers: the most free GPUs first (hinted servers before the others).
    off_hint = np.zeros(cluster.servers, dtype=bool) if hint is None else ~hint
    usable = np.flatnonzero(free > 0)
    return _take(usable[np.lexsort((deficit(usable), -free[usable], off_hint[usable]))], free, gpus)


def place_with_fallback(
    state: ServerState,
    job: int,
    gpus: int,
    cpu_per_gpu: float,
    mem_per_gpu: float,
    servers_hint: Candidates = None,
    fit: Fit = "best",
) -> FallbackResult | None:
    """Place ``job`` as Synergy-TUNE does (paper section 4.2); see the module docstring.

    Parameters
    ----------
    state
        The cluster being packed; ``job`` must not be placed yet.
    job, gpus
        The job's index in ``state.instance.jobs`` and its GPU demand.
    cpu_per_gpu, mem_per_gpu
        The demand to try first (e.g. its best-case or ideal-ILP config), per GPU. It must meet the job's
        floor for the floor guarantee to hold.
    servers_hint
        Servers to try first at every stage (mask or indices), e.g. where an LP placed the job.
    fit
        How the one server of the first two stages is chosen (``FITS``; default best fit, the paper's).

    Returns
    -------
    FallbackResult or None
        How it was placed; ``None`` only when fewer than ``gpus`` GPUs are free in the whole cluster.
    """
    hint = _mask(state, servers_hint)
    tries = (hint, None) if hint is not None else (None,)
    for candidates in tries:
        placed = place_best_fit(state, job, gpus, cpu_per_gpu, mem_per_gpu, candidates, fit)
        if placed is not None:
            return FallbackResult(placed, "ideal")
    c_p, m_p = state.proportional
    if is_above_proportional(state, cpu_per_gpu, mem_per_gpu):
        cpu_per_gpu, mem_per_gpu = c_p, m_p
        for candidates in tries:
            placed = place_best_fit(state, job, gpus, c_p, m_p, candidates, fit)
            if placed is not None:
                return FallbackResult(placed, "proportional")
    return _demote_and_place(state, job, gpus, cpu_per_gpu, mem_per_gpu, hint)


def _demote_and_place(
    state: ServerState, job: int, gpus: int, cpu_per_gpu: float, mem_per_gpu: float, hint: np.ndarray | None
) -> FallbackResult | None:
    """The last stage: servers with enough free GPUs, room made there by demotion, then the job placed."""
    chosen = _gpu_servers(state, gpus, cpu_per_gpu, mem_per_gpu, hint)
    if chosen is None:
        return None
    servers, counts = chosen
    demoted = make_room(state, {
        int(s): (int(n) * cpu_per_gpu, int(n) * mem_per_gpu) for s, n in zip(servers, counts, strict=True)
    })
    placed = state.place(job, servers, counts, cpu_per_gpu, mem_per_gpu)
    return FallbackResult(placed, "demoted", demoted)


def place_run_with_fallback(
    state: ServerState, jobs: np.ndarray | list[int], gpus: int, cpu_per_gpu: float, mem_per_gpu: float,
    fit: Fit = "best",
) -> list[FallbackResult | None]:
    """:func:`place_with_fallback` for identical jobs, in order, in fewer steps.

    Single-GPU jobs: when a stage's search finds no server, nothing unchanged since can fit the next
    identical job either, so that stage is searched again only on the servers changed since
    (``state.changed_since``), which gives the same placements as one call per job. When demotion is
    needed, room is made once on the chosen server for as many of the remaining jobs as it has free GPUs
    (they would all need room somewhere), and they are placed there together. Multi-GPU jobs, whose
    fewest-servers search spans servers, go one call each.
    """
    if gpus != 1:
        return [place_with_fallback(state, int(job), gpus, cpu_per_gpu, mem_per_gpu, fit=fit) for job in jobs]
    stages: list[tuple[float, float, Stage]] = [(cpu_per_gpu, mem_per_gpu, "ideal")]
    if is_above_proportional(state, cpu_per_gpu, mem_per_gpu):
        stages.append((*state.proportional, "proportional"))
    failed_at: list[int | None] = [None] * len(stages)  # state.clock when each stage last found nothing
    results: list[FallbackResult | None] = []
    queue = [int(job) for job in jobs]
    while len(results) < len(queue):
        job = queue[len(results)]
        result = None
        for stage, (c, m, name) in enumerate(stages):
            since = failed_at[stage]
            candidates = None if since is None else state.changed_since(since)
            clock = state.clock
            server = None
            if candidates is None or candidates.size:
                server = fit_server(state, 1, c, m, candidates, fit)
            if server is None:
                failed_at[stage] = clock
                continue
            result = FallbackResult(state.place(job, (server,), (1,), c, m), name)
            break
        if result is not None:
            results.append(result)
            continue
        c, m, _ = stages[-1]
        chosen = _gpu_servers(state, 1, c, m, None)
        if chosen is None:
            results.extend([None] * (len(queue) - len(results)))
            break
        server = int(chosen[0][0])
        batch = queue[len(results):len(results) + int(state.free_gpus[server])]
        demoted = make_room(state, {server: (len(batch) * c, len(batch) * m)})
        state.place_many(batch, [server] * len(batch), 1, c, m)
        results.extend(
            FallbackResult(state.placement(job), "demoted", demoted if k == 0 else ()) for k, job in enumerate(batch)
        )
    return results
