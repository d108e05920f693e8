"""Local search on a placement: move jobs between servers until their target configs fit wherever possible.

A placement's *overflow* is, summed over servers, how far the target CPUs and memory of the jobs on a server
exceed its capacity (each resource as a fraction of a server), plus ``HARD`` times how far what they cannot
do without exceeds it (a split job's target, which must fit on each of its servers; no more than the safe
config of any other job), which choosing smaller configs later cannot take back.

- :func:`reassign_slots`: one single-GPU chunk off every server, all put back by an optimal assignment (in
  interleaved blocks of at most ``BLOCK`` servers on large clusters).
- :func:`rebalance`: each round finds, for every overflowing server, the swap of one of its chunks with a chunk
  of as many GPUs on one of the ``PARTNERS`` servers with the most room where it is over, that lowers the
  overflow of the two servers the most, and makes the best such swaps that touch distinct servers.

GPU counts per server never change. Overflow left over is not lost throughput yet: the per-server programme
(:mod:`~synergy_opt.mechanisms.near_opt.server_dp`) then chooses the best configs that fit.

Public API
----------
``server_needs(instance, entries, demand) -> ndarray``
``reassign_slots(instance, entries, demand, picks=PICKS) -> Entries``
``rebalance(instance, entries, demand, rounds=ROUNDS) -> Entries``
"""

from __future__ import annotations

import numpy as np
from numba import njit, vectorize
from scipy.optimize import linear_sum_assignment

from synergy_opt.instance import RoundInstance
from synergy_opt.mechanisms.near_opt.assign import Entries, blocks

# Servers each overflowing server may swap with in one round: those with the most room where it is over.
PARTNERS = 8
# At most this many rounds of pairwise swaps (each makes at least one swap, or the search ends).
ROUNDS = 8
# Single-GPU entries taken off every server and put back optimally, one pick after another.
PICKS = 6
# What keeping one more GPU of a job beside its others is worth against overflow (a fraction of a server).
AFFINITY = 0.01
# Largest optimal assignment of a pick (servers): a quarter of the time of 128 at 1024 GPUs, as good a result
# on the issue-22 family's 1024-GPU rounds (seeds 0-4: 99.47% of the LP bound both ways).
PICK_BLOCK = 64


# Overflow of what the jobs cannot do without (see server_needs) cannot be taken back by choosing smaller
# configs later, so it weighs this much more than overflow of their targets.
HARD = 10.0
_WEIGHTS = np.array([1.0, 1.0, HARD, HARD])


def _overflow(use: np.ndarray) -> np.ndarray:
    """Per server (last axis: target CPUs, target memory, least CPUs, least memory, each as a fraction of a
    server), the weighted use beyond 1."""
    return _overflow_of(use[..., 0], use[..., 1], use[..., 2], use[..., 3])


@vectorize(["float64(float64, float64, float64, float64)"], cache=True)
def _overflow_of(cpu: float, mem: float, least_cpu: float, least_mem: float) -> float:  # pragma: no cover
    """:func:`_overflow` from the four uses as separate arrays (a compiled ufunc: no temporaries, and callable
    in compiled loops). Summed as the pairs (CPUs) + (memory), as einsum sums four terms, so the values are
    those the search was tuned with."""
    return ((max(cpu - 1.0, 0.0) + HARD * max(least_cpu - 1.0, 0.0))
            + (max(mem - 1.0, 0.0) + HARD * max(least_mem - 1.0, 0.0)))


def _per_server(server: np.ndarray, need: np.ndarray, servers: int) -> np.ndarray:
    """``need`` (entries, 4) summed per server (as ``np.add.at`` would, in entry order; bincount is faster)."""
    return np.column_stack([np.bincount(server, need[:, d], minlength=servers) for d in range(need.shape[1])])


def server_needs(instance: RoundInstance, entries: Entries, demand: np.ndarray) -> np.ndarray:
    """Per entry, what it needs of its server as fractions of one: ``demand`` (jobs, 4) holds per GPU the
    target CPUs and memory, and the CPUs and memory the job cannot do without (the caller's choice)."""
    cluster = instance.cluster
    scale = np.array([cluster.cpus_per_server, cluster.mem_gb_per_server] * 2)
    return entries.gpus[:, None] * demand[entries.job] / scale


def rebalance(instance: RoundInstance, entries: Entries, demand: np.ndarray, rounds: int = ROUNDS) -> Entries:
    """Swap entries between servers (see the module docstring); ``demand`` as for :func:`server_needs`."""
    servers = instance.cluster.servers
    server = entries.server.copy()
    need = server_needs(instance, entries, demand)
    # Slots: entry k is slot slot[k] of its server; padded (servers, width) tables of entries.
    order = np.argsort(server, kind="stable")
    first = np.searchsorted(server[order], np.arange(servers))
    slot = np.empty(server.size, dtype=np.int64)
    slot[order] = np.arange(server.size) - first[server[order]]
    width = int(slot.max(initial=-1)) + 1
    table = np.full((servers, width), -1, dtype=np.int64)
    table[server, slot] = np.arange(server.size)
    for _ in range(rounds):
        present = table >= 0
        size = np.where(present, entries.gpus[np.maximum(table, 0)], -1)
        use = _per_server(server, need, servers)
        over = _overflow(use)
        hot = np.flatnonzero(over > 1e-9)
        if hot.size == 0:
            break
        load = np.where(present[..., None], need[np.maximum(table, 0)], 0.0)  # (servers, width, 4)
        # Partners: the servers with the most room in the resources the hot server is over.
        excess = np.maximum(use[hot] - 1.0, 0.0) * _WEIGHTS  # (hot, 4)
        room = np.einsum("hd,sd->hs", excess, 1.0 - use)  # (hot, servers)
        room[np.arange(hot.size), hot] = -np.inf
        count = min(PARTNERS, servers - 1)
        partner = np.argpartition(-room, count - 1, axis=1)[:, :count] if count > 0 else np.zeros((hot.size, 0), int)
        best_gain, p, t, q = _best_swap_per_hot(hot, partner, load, use, over, size)
        done = np.zeros(servers, dtype=bool)
        moved = False
        for h in np.argsort(-best_gain, kind="stable"):
            if best_gain[h] <= 1e-9:
                break
            s, other = int(hot[h]), int(partner[h, t[h]])
            if done[s] or done[other]:
                continue
            a, b = table[s, p[h]], table[other, q[h]]
            table[s, p[h]], table[other, q[h]] = b, a
            server[a], server[b] = other, s
            done[s] = done[other] = True
            moved = True
        if not moved:
            break
    return Entries(entries.job, server, entries.gpus)


def reassign_slots(instance: RoundInstance, entries: Entries, demand: np.ndarray, picks: int = PICKS) -> Entries:
    """Large-neighbourhood moves: take one single-GPU entry off every server and put them back optimally.

    For each pick (the k-th single-GPU entry of every server that has one), an optimal assignment
    (``scipy.optimize.linear_sum_assignment``) puts the picked entries back, one per server, minimising the
    total overflow of the targets, then (``AFFINITY``) keeping a job's GPUs together, then the sum of squared
    loads (balance).
    """
    servers = instance.cluster.servers
    server = entries.server.copy()
    need = server_needs(instance, entries, demand)
    single = np.flatnonzero(entries.gpus == 1)
    if single.size < 2:
        return entries
    width = int(np.bincount(server[single], minlength=servers).max())
    jobs = int(entries.job.max()) + 1
    # on[j, s]: entries of job j on server s.
    on = np.bincount(entries.job * servers + server, minlength=jobs * servers).reshape(jobs, servers)
    for step in range(picks):
        k = step % width
        # The k-th single-GPU entry of each server (in entry order) that has one.
        order = single[np.argsort(server[single], kind="stable")]
        first = np.searchsorted(server[order], np.arange(servers))
        count = np.bincount(server[order], minlength=servers)
        has = np.flatnonzero(count > k)
        if has.size < 2:
            continue
        picked = order[first[has] + k]
        use = _per_server(server, need, servers)
        for block in blocks(has.size, max(1, -(-has.size // PICK_BLOCK))):
            here, taken = has[block], picked[block]
            moving = need[taken]
            base = use[here] - moving  # (servers, 4): each server without its picked entry
            rows, cols = linear_sum_assignment(_pick_costs(base, moving, on, entries.job[taken], server[taken],
                                                           here))
            moved = taken[rows]
            np.subtract.at(on, (entries.job[moved], server[moved]), 1)
            server[moved] = here[cols]
            np.add.at(on, (entries.job[moved], server[moved]), 1)
    return Entries(entries.job, server, entries.gpus)


@njit(cache=True)
def _pick_costs(base: np.ndarray, moving: np.ndarray, on: np.ndarray, job: np.ndarray, server: np.ndarray,
                here: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The assignment's costs of a pick: per picked entry (rows: of ``job``, leaving ``server``) and server
    ``here[c]`` (columns; ``base[c]`` its use without its own pick), the overflow with the entry there, less
    ``AFFINITY`` where its job has other GPUs there, plus a thousandth of the squared loads (balance)."""
    cost = np.empty((moving.shape[0], here.size))
    for r in range(moving.shape[0]):
        for c in range(here.size):
            cpu, mem = base[c, 0] + moving[r, 0], base[c, 1] + moving[r, 1]
            over = _overflow_of(cpu, mem, base[c, 2] + moving[r, 2], base[c, 3] + moving[r, 3])
            # Other GPUs of the entry's job on that server (its own entry is leaving its server).
            others = on[job[r], here[c]] - (1 if server[r] == here[c] else 0)
            cost[r, c] = over - (AFFINITY if others > 0 else 0.0) + 1e-3 * (cpu * cpu + mem * mem)
    return cost


@njit(cache=True)
def _best_swap_per_hot(hot: np.ndarray, partner: np.ndarray, load: np.ndarray, use: np.ndarray,
                       over: np.ndarray, size: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Per hot server ``hot[h]``, its best swap: of its slot ``p`` with slot ``q`` of its partner ``partner[h, t]``
    (slots of equal GPUs), by how much the two servers' overflow falls (the first best in ``(p, t, q)`` order;
    ``-inf`` where no slots match). ``load`` (servers, slots, 4) is each slot's use, ``size`` its GPUs (-1:
    empty)."""
    width = load.shape[1]
    best_gain = np.full(hot.size, -np.inf)
    best_p = np.zeros(hot.size, dtype=np.int64)
    best_t = np.zeros(hot.size, dtype=np.int64)
    best_q = np.zeros(hot.size, dtype=np.int64)
    after = np.empty(4)
    other = np.empty(4)
    for h in range(hot.size):
        s = hot[h]
        for p in range(width):
            for t in range(partner.shape[1]):
                o = partner[h, t]
                for q in range(width):
                    if size[s, p] != size[o, q]:
                        continue
                    for d in range(4):
                        delta = load[o, q, d] - load[s, p, d]  # what s gains of resource d when p and q swap
                        after[d] = use[s, d] + delta
                        other[d] = use[o, d] - delta
                    gain = (over[s] + over[o] - _overflow_of(after[0], after[1], after[2], after[3])
                            - _overflow_of(other[0], other[1], other[2], other[3]))
                    if gain > best_gain[h]:
                        best_gain[h], best_p[h], best_t[h], best_q[h] = gain, p, t, q
    return best_gain, best_p, best_t, best_q
