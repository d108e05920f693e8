"""Whatever a Trace holds, save_trace writes in both formats and load_trace reads back equal (issue 21, class 6).

A property over traces: ids (any Unicode text, commas, quotes, line breaks, NUL), times from subnormal to
1e300, GPU counts, profiles (a built-in model by name at the metadata's CPU:GPU ratio, a built-in name over
another matrix, a name of one's own, or none) and metadata (nested JSON).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synergy_opt as so
from synergy_opt.profile import GRID_TOLERANCE, MAX_THROUGHPUT, MIN_THROUGHPUT
from synergy_opt.profiles import cpu_gpu_ratios, model_info
from synergy_opt.sim import Trace, TraceJob
from synergy_opt.sim.trace import generate_trace
from synergy_opt.sim.trace_io import load_trace, save_trace

FUZZ = settings(derandomize=True, deadline=None, max_examples=150,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

times = st.floats(0, 1e300, allow_nan=False, allow_infinity=False)
durations = st.floats(1e-6, 1e300, allow_nan=False, allow_infinity=False)  # sim.trace.DURATION
ids = st.text(min_size=1, max_size=12)
json_scalars = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=6), inner, max_size=3), max_leaves=10)


@st.composite
def axes(draw: st.DrawFn) -> np.ndarray:
    values = np.array(sorted(draw(st.lists(st.floats(1e-6, 1e6, allow_nan=False), min_size=1, max_size=4,
                                           unique=True))))
    # Each more than the grid's reading tolerance above the one before (profile.profile_axis).
    return values[np.r_[True, values[1:] > values[:-1] * (1 + GRID_TOLERANCE)]]


@st.composite
def matrices(draw: st.DrawFn) -> so.Profile:
    cpu, mem = draw(axes()), draw(axes())
    entry = st.just(0.0) | st.floats(MIN_THROUGHPUT, MAX_THROUGHPUT, allow_nan=False)  # a matrix's range
    tput = draw(st.lists(entry, min_size=cpu.size * mem.size,
                         max_size=cpu.size * mem.size))
    return so.Profile(cpu, mem, np.array(tput).reshape(cpu.size, mem.size))


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    metadata: dict[str, Any] = draw(st.dictionaries(st.text(max_size=6).filter(lambda k: k not in (
        "generator", "cpu_per_gpu")), json_values, max_size=3))
    ratio = draw(st.none() | st.sampled_from(cpu_gpu_ratios()))
    if ratio is not None:
        metadata["cpu_per_gpu"] = ratio
    names = so.model_names()
    jobs = []
    for job_id in draw(st.lists(ids, min_size=0, max_size=5, unique=True)):
        kind = draw(st.sampled_from(["builtin", "builtin name, own matrix", "own name", "no name"]))
        model = draw(st.sampled_from(names)) if kind.startswith("builtin") else (
            draw(ids) if kind == "own name" else None)
        profile = model_info(model, ratio or 3).profile if kind == "builtin" else draw(matrices())
        # Its own matrices per GPU type, sometimes (any type names: a trace is not tied to a cluster).
        profiles = draw(st.none() | st.dictionaries(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,7}", fullmatch=True),
                                                    matrices(), min_size=1, max_size=3))
        jobs.append(TraceJob(job_id, draw(times), draw(st.integers(1, 1024)), draw(durations), profile,
                             model=model, profiling_s=draw(times), profiles=profiles))
    return Trace(tuple(jobs), metadata)


@FUZZ
@given(trace=traces())
def test_save_then_load_is_the_identity(trace: Trace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for suffix in (".json", ".csv"):
            back = load_trace(save_trace(trace, Path(folder) / f"trace{suffix}"))
            assert back == trace, suffix
            assert [job.model for job in back.jobs] == [job.model for job in trace.jobs]


@settings(FUZZ, max_examples=20)
@given(jobs=st.integers(0, 30), load=st.none() | st.floats(1e-6, 1e3), seed=st.integers(0, 2**31 - 1),
       multi_gpu=st.booleans(), noise=st.sampled_from([0.0, 0.3]),
       profiling=st.sampled_from(["none", "optimistic", "exhaustive"]))
def test_generated_traces_round_trip_and_extend_alike(
    jobs: int, load: float | None, seed: int, multi_gpu: bool, noise: float, profiling: str
) -> None:
    trace = generate_trace(jobs=jobs, load=load, seed=seed, multi_gpu=multi_gpu, profile_noise=noise,
                           profiling=profiling)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as folder:
        for suffix in (".json", ".csv"):
            back = load_trace(save_trace(trace, Path(folder) / f"trace{suffix}"))
            assert back == trace, suffix
            if back.extendable:
                assert back.extend(jobs + 3) == trace.extend(jobs + 3)
