"""Scheduling mechanisms: where each runnable job of a round runs and with how much CPU and memory.

``run_mechanism(instance, name, order=None, **options) -> Allocation`` for the names in ``MECHANISMS``:

- ``proportional``: GPU-proportional shares, GPUs best-fit on one server when possible.
- ``greedy``: Synergy-GREEDY, first fit of best-case demands; may skip jobs.
- ``tune``: Synergy-TUNE, best-fit with fallbacks to proportional and demotion; never below a floor.
- ``tune-artifact``: Synergy-TUNE as the paper's artifact runs it (policy order, first fit, the best case or
  the share; :mod:`~synergy_opt.mechanisms.tune_artifact`).
- ``drf``, ``tetris``: the big-data baselines with best-case demands as static demands.
- ``opt``: Synergy-OPT, ``synergy_opt.placement.solve.solve_opt(instance).allocation`` (imported when first used).
- ``near-opt``: close to the joint optimum at scheduler speed, never below TUNE
  (:mod:`~synergy_opt.mechanisms.near_opt`).

Every mechanism takes ``spend_spare`` (:mod:`~synergy_opt.mechanisms.spare`): end by giving the CPU and memory
left idle on each server to the jobs there that gain most. Off by default for the paper's mechanisms (the
paper's TUNE does not do it), on for ``near-opt``. greedy, tune, tune-artifact, drf, tetris and near-opt take
``best_case_tolerance`` (:data:`~synergy_opt.mechanisms.demand.DEFAULT_TOLERANCE`; ``threshold`` is its earlier
name). For the paper's
artifact (docs/fidelity.md): greedy takes ``fit="gpu"`` (GPUs one at a time wherever they fit), tune-artifact
``sort="gpus"`` (largest GPU demands first, as the artifact's LAS orders them).

``order`` is the policy's priority order of job ids (default: as listed). Every mechanism packs into one
shared :class:`~synergy_opt.packing.state.ServerState`; every allocation is scored by
:func:`synergy_opt.evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from synergy_opt.gc_pause import paused_gc
from synergy_opt.hetero import HeteroRound
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.io import any_round
from synergy_opt.mechanisms.demand import renamed_threshold
from synergy_opt.mechanisms.drf import pack_drf
from synergy_opt.mechanisms.greedy import pack_greedy
from synergy_opt.mechanisms.hetero import run_hetero_mechanism
from synergy_opt.mechanisms.near_opt import solve_near_opt
from synergy_opt.mechanisms.proportional import pack_proportional
from synergy_opt.mechanisms.scale import scaled, throughput_scale
from synergy_opt.mechanisms.spare import spend_spare, split_spare_option
from synergy_opt.mechanisms.tetris import pack_tetris
from synergy_opt.mechanisms.tune import pack_tune
from synergy_opt.mechanisms.tune_artifact import pack_tune_artifact
from synergy_opt.packing.order import policy_order
from synergy_opt.packing.state import ServerState
from synergy_opt.placement.solve import solve_opt
from synergy_opt.validation import OneOf, Optional, check_keyword_options, checked, ids


@dataclass(frozen=True)
class Mechanism:
    """A registered mechanism: ``run(instance, order, **options)`` with ``order`` as job indices."""

    name: str
    run: Callable[..., Allocation]
    places_every_job: bool
    description: str


def _packed(pack: Callable[..., ServerState]) -> Callable[..., Allocation]:
    def run(instance: RoundInstance, order: np.ndarray, **options: Any) -> Allocation:
        own, spare = split_spare_option(options)
        own = renamed_threshold(pack, own)
        checked_options = check_keyword_options(pack, own, skip=("instance", "order"), also=("spend_spare",))
        allocation = pack(instance, order, **checked_options).to_allocation()
        return spend_spare(instance, allocation) if spare else allocation

    run.__doc__ = pack.__doc__
    return run


def _opt(instance: RoundInstance, order: np.ndarray, **options: Any) -> Allocation:
    # Imported here: Synergy-OPT pulls in the model builders and solvers, which the heuristics do not need.

    own, spare = split_spare_option(options)
    allocation = solve_opt(instance, **check_keyword_options(solve_opt, own, skip=("instance",),
                                                             also=("spend_spare",))).allocation
    return spend_spare(instance, allocation) if spare else allocation


def _near_opt(instance: RoundInstance, order: np.ndarray, **options: Any) -> Allocation:
    checked_options = check_keyword_options(solve_near_opt, renamed_threshold(solve_near_opt, options),
                                            skip=("instance", "order"))
    return solve_near_opt(instance, order, **checked_options).allocation


MECHANISMS: dict[str, Mechanism] = {
    m.name: m
    for m in (
        Mechanism("proportional", _packed(pack_proportional), True, "GPU-proportional shares, GPUs best-fit"),
        Mechanism("greedy", _packed(pack_greedy), False, "Synergy-GREEDY: first fit of best-case demands"),
        Mechanism("tune", _packed(pack_tune), True,
                  "Synergy-TUNE: spread fit (most free resources), proportional fallback, demotion"),
        Mechanism("tune-artifact", _packed(pack_tune_artifact), True,
                  "Synergy-TUNE as the paper's artifact: policy order, first fit, best case or share"),
        Mechanism("drf", _packed(pack_drf), True, "DRF: dominant-share order, static best-case demands"),
        Mechanism("tetris", _packed(pack_tetris), True, "Tetris: alignment-score packing of static demands"),
        Mechanism("opt", _opt, True, "Synergy-OPT: ideal ILP, placement LP, rounding"),
        Mechanism("near-opt", _near_opt, True, "priced ideal targets, balanced placement, per-server optimum"),
    )
}


@checked(instance=any_round, name=OneOf(tuple(MECHANISMS)), order=Optional(ids))
@paused_gc()  # a round's many small objects would trigger full collections (gc_pause.py)
def run_mechanism(
    instance: RoundInstance | HeteroRound, name: str, order: Iterable[str] | None = None, **options: Any
) -> Allocation:
    """Allocate one round with the mechanism ``name``.

    On a heterogeneous round (:class:`~synergy_opt.hetero.HeteroRound`) each mechanism runs type by type by
    its type rule (:mod:`synergy_opt.mechanisms.hetero`: the baseline types for the paper's mechanisms, the
    type-free ideal ILP's for opt, chosen by near-opt), the allocation naming the cluster's servers.

    Parameters
    ----------
    instance
        The round: a cluster and its runnable jobs.
    name
        One of ``MECHANISMS``: proportional, greedy, tune, drf, tetris, opt, near-opt.
    order
        The policy's priority order: every job id once, highest priority first (default: as listed).
    **options
        Passed to the mechanism: ``spend_spare=True`` for any (idle CPU and memory to the jobs that gain most;
        near-opt's default), ``best_case_tolerance`` for greedy, tune, tune-artifact, drf, tetris and near-opt
        (how close to the maximum a best-case demand must come; default ``DEFAULT_TOLERANCE``, 0.035),
        ``skip=True`` for drf and tetris (jobs that do not fit wait).

    Returns
    -------
    Allocation
        Score it with :func:`synergy_opt.evaluate`.

    Raises
    ------
    UnknownNameError
        For an unknown mechanism name.
    InvalidInputError
        For an ``order`` with unknown, repeated or missing job ids.
    """
    mechanism = MECHANISMS[name]
    ranked = policy_order(instance, order)
    if not instance.jobs:
        return Allocation({})  # nothing to place; every mechanism agrees
    factor = throughput_scale(instance)  # unusual units: the mechanisms' absolute tolerances hold (scale.py)
    if factor != 1.0:
        instance = scaled(instance, factor)
    if isinstance(instance, HeteroRound):
        return run_hetero_mechanism(instance, name, ranked, run_mechanism, **options)
    return mechanism.run(instance, ranked, **options)


__all__ = ["MECHANISMS", "Mechanism", "ServerState", "run_mechanism"]
