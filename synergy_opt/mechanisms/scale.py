"""Throughputs of unusual size brought to ordinary size before a mechanism runs.

The mechanisms compare throughputs with absolute tolerances (gains of ``1e-9``, values of ``1e-5``): matrices in
units that make throughputs of ``1e-9`` (or ``1e9``) would read every gain as a tie. A power of two changes no
comparison between throughputs and no allocation at ordinary sizes, so a round whose largest throughput lies
outside the solvers' band (:func:`synergy_opt.solvers.registry.band_scale`, which ``solve_model`` applies to
objectives) is run with every matrix times the power of two that brings that throughput to ``[1, 2)`` (or to
``[2^18, 2^19)`` when the median throughput would otherwise fall below the band); the
allocation is the round's own (the same cluster, jobs and GPUs). Heterogeneous rounds alike
(:meth:`HeteroRound.scaled`).
"""

from __future__ import annotations

from typing import overload

from synergy_opt.hetero import HeteroRound
from synergy_opt.instance import RoundInstance
from synergy_opt.solvers.registry import band_scale


def throughput_scale(instance: RoundInstance | HeteroRound) -> float:
    """1.0 for a round of ordinary throughputs (or none above 0), else the power of two that brings its largest
    throughput to ``[1, 2)`` (:func:`~synergy_opt.solvers.registry.band_scale`)."""
    return band_scale(instance.largest_throughput(), instance.median_throughput)


@overload
def scaled(instance: RoundInstance, factor: float) -> RoundInstance: ...


@overload
def scaled(instance: HeteroRound, factor: float) -> HeteroRound: ...


def scaled(instance: RoundInstance | HeteroRound, factor: float) -> RoundInstance | HeteroRound:
    """``instance`` with every matrix times ``factor`` (a profile shared by several jobs stays shared)."""
    return instance.scaled(factor)
