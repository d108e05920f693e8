"""Rounds whose throughputs are far from 1 (issue s28's fuzzing): every result scales with them.

Matrices in samples per second, or normalised by a large unit, give throughputs of 1e-9 .. 1e7. A solver's
absolute tolerances (HiGHS: 1e-7 on reduced costs) must not decide the optimum: the same round with every matrix
times ``s`` has every objective times ``s``.
"""

from __future__ import annotations

import pytest

import synergy_opt as so


def _scaled(instance: so.RoundInstance, scale: float) -> so.RoundInstance:
    jobs = tuple(so.Job(job.id, job.gpus, so.Profile(job.profile.cpu_per_gpu, job.profile.mem_gb_per_gpu,
                                                      job.profile.tput * scale)) for job in instance.jobs)
    return so.RoundInstance(instance.cluster, jobs)


@pytest.mark.parametrize("scale", [1e-7, 1e-9])
def test_the_ideal_ilp_and_its_relaxation_scale_with_the_throughputs(scale: float) -> None:
    instance = so.generate_round(gpus=32, seed=0, profile_noise=0.05)
    tiny = _scaled(instance, scale)
    for kwargs in ({"method": "direct"}, {"relax": True}):
        reference = so.solve_ideal(instance, **kwargs).objective
        assert so.solve_ideal(tiny, **kwargs).objective / scale == pytest.approx(reference, rel=1e-6), kwargs


@pytest.mark.xfail(strict=True, reason="near-opt at throughputs of 1e-9 gives TUNE's total (35.33 against 40.10 "
                   "x 1e-9): absolute tolerances in mechanisms/near_opt (tune_floor.SMALLEST_VALUE = 1e-5, "
                   "exchange._GAIN = 1e-9, ...), not yet traced to one")
def test_near_opt_scales_with_the_throughputs() -> None:
    instance = so.generate_round(gpus=32, seed=0, profile_noise=0.05)
    scale = 1e-9
    reference = so.evaluate(instance, so.run_mechanism(instance, "near-opt")).objective
    tiny = _scaled(instance, scale)
    assert so.evaluate(tiny, so.run_mechanism(tiny, "near-opt")).objective / scale == pytest.approx(reference,
                                                                                                  rel=1e-6)
