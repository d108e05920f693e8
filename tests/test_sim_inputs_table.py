"""Hostile input to the simulator, traces, trace files and profiling, as one table (issue 21, classes 1-8, 11).

Each row calls a public function, under a timeout. A rejected row must raise a ``SynergyError`` whose
``field`` is the one the row names (and, where the row says so, whose message gives the reason, or whose
cause is the user's callable's own exception). An accepted row must return, and what it returns must be
sound: no inf, NaN only where nothing happened, no negative time. A raw exception, a hang past the row's
timeout, an unsound result or an accepted bad input fails the row.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import synergy_opt as so
from synergy_opt import files
from synergy_opt.errors import CallableError, InvalidInputError, SynergyError
from synergy_opt.instance import Allocation, Placement
from synergy_opt.profiling import (
    FitResult,
    JobModel,
    MinIOCache,
    ProfilingResult,
    builtin_fit,
    builtin_job_model,
    draw_job_model,
    fit_builtin,
    fit_job_model,
    modelled_profile,
    normalised,
    profile_exhaustive,
    profile_job,
    profile_matrix,
)
from synergy_opt.sim import SimResult, Trace, TraceJob, simulate, with_profiling_delay
from synergy_opt.sim.bounds import MAX_READY_ROUNDS
from synergy_opt.sim.cli import main as sim_main
from synergy_opt.sim.policies import JobStates
from synergy_opt.sim.trace import GENERATOR, generate_trace
from synergy_opt.sim.trace_io import load_trace, save_trace, trace_from_dict, trace_to_dict

TIMEOUT_S = 20.0
RES18 = so.builtin_profile("res18")  # best speedup 2.4 over the proportional share
FLAT = so.builtin_profile("transformer")  # best speedup 1.0
ONE_GPU = so.Cluster(1)
GENERATED = generate_trace(jobs=12, load=0.2, seed=1)
MODEL = builtin_job_model("res18")
CPU_AXIS, MEM_AXIS = [1.0, 2.0, 3.0, 4.0], [20.0, 40.0, 62.5]


@dataclass(frozen=True)
class Case:
    label: str
    call: Callable[[Path], Any]
    field: str | None  # the field a rejection names; None: the call must be accepted
    words: str = ""  # what the message must say (the reason)
    cause: type[BaseException] | None = None  # a user callable's own exception, reported as its own
    check: Callable[[Any], None] | None = None  # more to hold of an accepted result


def rejects(label: str, call: Callable[[Path], Any], field: str, words: str = "",
            cause: type[BaseException] | None = None) -> Case:
    return Case(label, call, field, words, cause)


def accepts(label: str, call: Callable[[Path], Any], check: Callable[[Any], None] | None = None) -> Case:
    return Case(label, call, None, check=check)


def job(**fields: Any) -> TraceJob:
    given: dict[str, Any] = {"id": "a", "arrival_s": 0.0, "gpus": 1, "duration_s": 600.0, "profile": RES18,
                             "model": "res18"}
    return TraceJob(**(given | fields))


def alone(**fields: Any) -> Trace:
    return Trace((job(**fields),))


def sim(trace: Trace, cluster: so.Cluster = ONE_GPU, **arguments: Any) -> SimResult:
    return simulate(trace, cluster, **({"mechanism": "proportional"} | arguments))


# ------------------------------------------------------------------------------------- what sound means


def sound(value: Any) -> None:
    """No inf, no NaN where a value happened, no negative time, in whatever an accepted row returned."""
    if isinstance(value, SimResult):
        _sound_run(value)
    elif isinstance(value, Trace):
        for entry in value.jobs:
            times = (entry.arrival_s, entry.duration_s, entry.profiling_s)
            assert all(math.isfinite(t) and t >= 0 for t in times), entry
            sound(entry.profile)
    elif isinstance(value, so.Profile):
        assert np.all(np.isfinite(value.tput)) and np.all(value.tput >= 0)
    elif isinstance(value, ProfilingResult):
        sound(value.profile)
        assert math.isfinite(value.minutes) and value.minutes >= 0
    elif isinstance(value, FitResult):
        sound(value.fitted)
        assert math.isfinite(value.max_error)
    elif isinstance(value, (np.ndarray, float, int)):
        assert np.all(np.isfinite(value)) and np.all(np.asarray(value) >= 0), value


def _sound_run(result: SimResult) -> None:
    jobs, rounds = result.jobs, result.rounds
    for column in ("arrival_s", "duration_s", "run_s", "profiling_s", "gpus", "preemptions"):
        values = jobs[column].to_numpy(dtype=float)
        assert np.all(np.isfinite(values)) and np.all(values >= 0), column
    finished = jobs["finish_s"].notna()
    for column in ("jct_s", "queue_s"):  # NaN exactly where the job did not finish
        assert (jobs[column].notna() == finished).all(), column
        values = jobs.loc[finished, column].to_numpy(dtype=float)
        assert np.all(np.isfinite(values)) and np.all(values >= 0), column
    assert (jobs.loc[finished, "finish_s"] >= jobs.loc[finished, "arrival_s"]).all()
    assert (jobs.loc[jobs["first_start_s"].isna(), "run_s"] == 0).all()  # never started: never ran
    started = jobs["first_start_s"].notna()
    assert (jobs.loc[started, "first_start_s"] >= jobs.loc[started, "arrival_s"]).all()
    speedup = jobs["mean_speedup"].dropna().to_numpy(dtype=float)
    assert np.all(np.isfinite(speedup)) and np.all(speedup > 0)
    numbers = rounds.select_dtypes("number").to_numpy(dtype=float)
    assert np.all(np.isfinite(numbers)) and np.all(numbers >= 0)
    assert np.all(rounds[["gpu_util_pct", "cpu_util_pct", "mem_util_pct"]].to_numpy() <= 100 + 1e-9)
    summary = result.summary
    done = summary["monitored"] - summary["unfinished"]
    for key in ("avg_jct_h", "p50_jct_h", "p95_jct_h", "p99_jct_h"):
        assert (math.isfinite(summary[key]) and summary[key] >= 0) if done else math.isnan(summary[key]), key


def stopped(reason: str, unfinished: int | None = None) -> Callable[[Any], None]:
    def check(result: SimResult) -> None:
        assert result.summary["stopped"] == reason, result.summary["stopped"]
        if unfinished is not None:
            assert result.summary["unfinished"] == unfinished
    return check


# --------------------------------------------------------------------------- 1. a loaded trace's metadata


def edited_dict(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = copy.deepcopy(trace_to_dict(GENERATED))
    edit(data["metadata"])
    return data


def written(tmp: Path, name: str, content: str | bytes) -> Path:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def csv_with_metadata(tmp: Path, metadata_text: str, name: str = "m.csv") -> Path:
    """The CSV of ``GENERATED`` with its first line's metadata replaced."""
    body = save_trace(GENERATED, tmp / f"base-{name}").read_text().partition("\n")[2]
    return written(tmp, name, f"# synergy-trace/1 {metadata_text}\n{body}")


def metadata_cases() -> Iterator[Case]:
    edits: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
        ("split deleted", lambda m: m.pop("split"), "metadata.split"),
        ("split 5", lambda m: m.update(split=5), "metadata.split"),
        ("split of two", lambda m: m.update(split=[1, 2]), "metadata.split"),
        ("load deleted", lambda m: m.pop("load"), "metadata.load"),
        ("load a string", lambda m: m.update(load="0.2"), "metadata.load"),
        ("load negative", lambda m: m.update(load=-1), "metadata.load"),
        ("load 1e-300", lambda m: m.update(load=1e-300), "metadata.load"),
        ("multi_gpu a string", lambda m: m.update(multi_gpu="yes"), "metadata.multi_gpu"),
        ("seed negative", lambda m: m.update(seed=-1), "metadata.seed"),
        ("seed 2^40", lambda m: m.update(seed=2**40), "metadata.seed"),
        ("seed a float", lambda m: m.update(seed=1.0), "metadata.seed"),
        ("cpu_per_gpu 7", lambda m: m.update(cpu_per_gpu=7), "metadata.cpu_per_gpu"),
        # The jobs drawn so far: ignored when odd, and 1e12 refused mid-run naming generate_trace's jobs.
        ("jobs negative", lambda m: m.update(jobs=-1), "metadata.jobs"),
        ("jobs a string", lambda m: m.update(jobs="3"), "metadata.jobs"),
        ("jobs 1e12", lambda m: m.update(jobs=10**12), "metadata.jobs"),
        ("cpu_per_gpu true", lambda m: m.update(cpu_per_gpu=True), "metadata.cpu_per_gpu"),
        ("cpu_per_gpu a string", lambda m: m.update(cpu_per_gpu="3"), "metadata.cpu_per_gpu"),
        ("profile_noise 100", lambda m: m.update(profile_noise=100), "metadata.profile_noise"),
        ("job_kind unknown", lambda m: m.update(job_kind="random"), "metadata.job_kind"),
        ("profiling unknown", lambda m: m.update(profiling="guess"), "metadata.profiling"),
        ("profiling old label", lambda m: m.update(profiling="optimistic(minutes_per_point=2, threshold=0.1)"),
         "metadata.profiling"),
        ("profiling threshold 2", lambda m: m.update(profiling="optimistic", profiling_threshold=2),
         "metadata.profiling_threshold"),
        ("profiling minutes negative", lambda m: m.update(profiling="optimistic", profiling_minutes_per_point=-1),
         "metadata.profiling_minutes_per_point"),
    ]
    for label, edit, field in edits:
        yield rejects(f"json metadata {label}",
                      lambda t, e=edit: sim(trace_from_dict(edited_dict(e))), field)
        yield rejects(f"csv metadata {label}",
                      lambda t, e=edit, n=label: sim(load_trace(csv_with_metadata(
                          t, json.dumps(edited_dict(e)["metadata"]), n.replace(" ", "_") + ".csv"))), field)
    yield rejects("json metadata a list", lambda t: trace_from_dict(
        {**trace_to_dict(GENERATED), "metadata": [1]}), "metadata")
    yield rejects("csv metadata a list", lambda t: load_trace(csv_with_metadata(t, "[1]")), "metadata")
    yield rejects("csv metadata NaN", lambda t: load_trace(csv_with_metadata(t, '{"x": NaN}')), "metadata.x")
    yield rejects("csv metadata malformed", lambda t: load_trace(csv_with_metadata(t, '{"x": ')), "metadata")
    yield rejects("a Trace made with generator but no arguments",
                  lambda t: Trace(GENERATED.jobs, {"generator": GENERATOR}), "metadata.load")
    yield rejects("a Trace with metadata not a dict", lambda t: Trace(GENERATED.jobs, [1]), "metadata")  # type: ignore[arg-type]
    yield rejects("a Trace with a NaN in metadata", lambda t: Trace(GENERATED.jobs, {"x": math.nan}), "metadata.x")
    yield rejects("another trace's cpu_per_gpu 7", lambda t: Trace(GENERATED.jobs, {"cpu_per_gpu": 7}),
                  "metadata.cpu_per_gpu")
    # Traces saved before job_kind and profiling were recorded: those take their defaults, and it extends.
    older = edited_dict(lambda m: (m.pop("job_kind"), m.pop("profiling")))
    yield accepts("json metadata of an older file, extended",
                  lambda t: sim(trace_from_dict(older), so.Cluster(8), monitor=(0, 20)),
                  lambda r: _assert(r.summary["jobs"] >= 20))
    yield accepts("a Trace with other metadata", lambda t: Trace(GENERATED.jobs, {"note": {"a": [1, "b"]}}))
    # Delays at costs of one's own: the run extends the trace, profiling the new jobs alike (was a mid-run error).
    costly = with_profiling_delay(generate_trace(jobs=10, load=9.0), minutes_per_point=2.0)
    yield accepts("custom profiling costs, extended mid-run", lambda t: sim(costly, so.Cluster(8), monitor=(0, 10)))


def _assert(condition: bool) -> None:
    assert condition


# ---------------------------------------------------------------------- 2. derived quantities overflowing


def derived_cases() -> Iterator[Case]:
    horizon = MAX_READY_ROUNDS * 300.0
    yield rejects("arrival 1.5e308 + profiling 1.5e308", lambda t: sim(alone(arrival_s=1.5e308, profiling_s=1.5e308)),
                  "trace.jobs[0].arrival_s", "horizon")
    yield rejects("profiling 1.5e308", lambda t: sim(alone(profiling_s=1.5e308)), "trace.jobs[0].profiling_s")
    yield rejects("arrival + profiling past the horizon, each below",
                  lambda t: sim(alone(arrival_s=0.6 * horizon, profiling_s=0.6 * horizon)),
                  "trace.jobs[0].profiling_s")
    yield rejects("arrival 1e306 at 1-ms rounds", lambda t: sim(alone(arrival_s=1e306), round_s=1e-3),
                  "trace.jobs[0].arrival_s")
    yield rejects("arrival 1e19 (was jct 0, queue -600)", lambda t: sim(alone(arrival_s=1e19)),
                  "trace.jobs[0].arrival_s")
    yield rejects("arrival = duration = 1e308 (was finish inf)",
                  lambda t: sim(alone(arrival_s=1e308, duration_s=1e308)), "trace.jobs[0].arrival_s")
    yield rejects("the second job past the horizon",
                  lambda t: sim(Trace((job(), job(id="b", arrival_s=1e300)))), "trace.jobs[1].arrival_s")
    yield rejects("duration 1e308", lambda t: sim(alone(duration_s=1e308)), "trace.jobs[0].duration_s")
    for label, value in [("1e308", 1e308), ("inf", math.inf), ("nan", math.nan), ("0", 0.0), ("-1", -1.0),
                         ("a string", "300"), ("true", True), ("None", None)]:
        yield rejects(f"round_s {label}", lambda t, v=value: sim(alone(), round_s=v), "round_s")
    yield rejects("round_s 1e-300", lambda t: sim(alone(), round_s=1e-300), "trace.jobs[0].duration_s")
    yield rejects("arrival huge at tiny rounds", lambda t: sim(alone(arrival_s=1.0), round_s=1e-300),
                  "trace.jobs[0].arrival_s")
    for label, value in [("nan", math.nan), ("inf", math.inf), ("negative", -1.0), ("a string", "1")]:
        yield rejects(f"until_s {label}", lambda t, v=value: sim(alone(), until_s=v), "until_s")
        yield rejects(f"preemption_overhead_s {label}",
                      lambda t, v=value: sim(alone(), preemption_overhead_s=v), "preemption_overhead_s")
    yield accepts("a job just inside the horizon", lambda t: sim(alone(arrival_s=0.99 * horizon)),
                  lambda r: _assert(r.jobs["jct_s"].iloc[0] == pytest.approx(600.0, abs=300.0)))
    yield accepts("arrivals 30 years apart", lambda t: sim(Trace(tuple(
        job(id=f"j{i}", arrival_s=i * 1e9) for i in range(4)))), lambda r: _assert(r.summary["unfinished"] == 0))
    # 5e-324 s over its speedup rounded to 0 s: it "finished" at once with a NaN mean speedup.
    yield rejects("a subnormal duration", lambda t: sim(alone(duration_s=5e-324)), "duration_s", ">= 1e-06")
    yield accepts("a microsecond's duration", lambda t: sim(alone(duration_s=1e-6)))
    yield accepts("until_s 1e308", lambda t: sim(alone(), until_s=1e308))
    yield accepts("until_s mid-run", lambda t: sim(alone(duration_s=3000.0), until_s=300.0),
                  stopped("until_s", 1))
    yield accepts("overhead just under a round", lambda t: sim(
        Trace((job(duration_s=3000.0), job(id="b", arrival_s=300.0, duration_s=900.0))),
        policy="srtf", preemption_overhead_s=299.999999))
    yield accepts("the largest round", lambda t: sim(alone(), round_s=1e9))
    yield rejects("an empty trace (its figures were NaN)", lambda t: sim(Trace(())), "trace", "no job")
    yield accepts("an empty generated trace the window extends", lambda t: sim(
        generate_trace(jobs=0, seed=1), so.Cluster(2), monitor=(0, 5)))
    # 1 over 5e-324 is inf: the job "finished" at once with a NaN mean speedup. Such a matrix is refused where it
    # is given now (profile.MIN_THROUGHPUT); the run's own check stays for the speedups below.
    yield rejects("a floor a float cannot divide", lambda t: sim(alone(profile=so.Profile(
        [3.0, 6.0], [62.5], [[5e-324], [1.0]]), model=None), so.Cluster(1, 4, 12, 250)), "tput[0][0]",
        "0 or in")
    # Its matrix over its floor (what the mechanisms read) passed 1e100: the run failed at its first round.
    yield rejects("a speedup beyond a matrix's range", lambda t: sim(alone(profile=so.Profile(
        [3.0, 6.0], [62.5], [[1e-100], [10.0]]), model=None), so.Cluster(1, 4, 12, 250)), "trace.jobs[0]",
        "speedup is out of range")
    yield accepts("an instant profiling-only job", lambda t: sim(alone(profiling_s=1e6, duration_s=1e-6)))
    # Gavel's round timing (sim/timing.py): rounds start at arrivals after idle gaps and end at early finishes.
    for label, value in [("unknown", "arrival"), ("capitalised", "Gavel"), ("None", None), ("a number", 1)]:
        yield rejects(f"round_timing {label}", lambda t, v=value: sim(alone(), round_timing=v), "round_timing")
    yield accepts("Gavel's timing, a job just inside the horizon", lambda t: sim(
        alone(arrival_s=0.99 * horizon), round_timing="gavel"),
        lambda r: _assert(r.jobs["jct_s"].iloc[0] == pytest.approx(600.0, abs=1e-3)))
    yield accepts("Gavel's timing, arrivals 30 years apart", lambda t: sim(Trace(tuple(
        job(id=f"j{i}", arrival_s=i * 1e9) for i in range(4))), round_timing="gavel"),
        lambda r: _assert(r.summary["unfinished"] == 0))
    yield accepts("Gavel's timing, a microsecond's duration", lambda t: sim(alone(duration_s=1e-6),
                                                                          round_timing="gavel"))
    yield accepts("Gavel's timing, until_s mid-run", lambda t: sim(alone(duration_s=3000.0), until_s=300.0,
                                                                 round_timing="gavel"), stopped("until_s", 1))
    yield accepts("Gavel's timing, overhead just under a round", lambda t: sim(
        Trace((job(duration_s=3000.0), job(id="b", arrival_s=300.0, duration_s=900.0))),
        policy="srtf", preemption_overhead_s=299.999999, round_timing="gavel"))


# ------------------------------------------------------------------------------------ 3. loops that never end


def loop_cases() -> Iterator[Case]:
    yield rejects("generate_trace load 1e-300", lambda t: generate_trace(jobs=5, load=1e-300), "load")
    yield rejects("600-s job at 0.1-ms rounds", lambda t: sim(alone(), round_s=1e-4), "trace.jobs[0].duration_s",
                  "max_rounds")
    yield rejects("83-hour job at 1-s rounds", lambda t: sim(alone(duration_s=83 * 3600.0, profile=FLAT,
                                                                  model="transformer"), round_s=1.0),
                  "trace.jobs[0].duration_s", "max_rounds")
    yield rejects("83-hour job, a smaller bound",
                  lambda t: sim(alone(duration_s=83 * 3600.0), round_s=1.0, max_rounds=1000),
                  "trace.jobs[0].duration_s")
    many = Trace(tuple(job(id=f"j{i}", duration_s=3000.0, profile=FLAT, model="transformer") for i in range(40)))
    # Each needs 10 rounds; the 8 GPUs run 40 of them in 50 at best.
    yield rejects("the jobs together need more rounds", lambda t: sim(many, max_rounds=10), "max_rounds")
    for label, value in [("0", 0), ("negative", -1), ("2^40", 2**40), ("a float", 1.5), ("true", True),
                         ("a string", "100")]:
        yield rejects(f"max_rounds {label}", lambda t, v=value: sim(alone(), max_rounds=v), "max_rounds")
    # Up front the bound holds (at its best speedup 2.4 the job needs 42 rounds); at proportional's 1.0 it needs
    # 100: the run stops at the bound and says so.
    yield accepts("a run reaching max_rounds stops",
                  lambda t: sim(alone(duration_s=30000.0), max_rounds=50),
                  lambda r: (stopped("max_rounds", 1)(r), _assert(len(r.rounds) == 50)))
    # A mechanism that runs a job at 1e-300 of its proportional speed: no progress in floating point.
    crawl = so.Profile([1.0, 3.0], [62.5], [[1e-300], [1.0]])

    def at_one_cpu(instance: so.RoundInstance) -> Allocation:
        return Allocation({instance.jobs[0].id: (Placement(0, 1, 1.0, 62.5),)})

    # Whole iterations per round: an iteration longer than the round never completes (once blamed on rounding).
    yield rejects("an iteration longer than a round under the artifact's accounting",
                  lambda t: sim(alone(iter_time_s=400.0, duration_s=1000.0), accounting="artifact"),
                  "trace.jobs[0].iter_time_s", "credits whole iterations per round")
    yield rejects("a round that makes no progress in floating point",
                  lambda t: simulate(alone(profile=crawl, model=None), ONE_GPU, mechanism=at_one_cpu),
                  "mechanism", "never finish")

    def nothing(instance: so.RoundInstance) -> Allocation:
        return Allocation({})

    yield accepts("a mechanism that places nothing ends, the job unfinished",
                  lambda t: simulate(alone(), ONE_GPU, mechanism=nothing), stopped("stuck", 1))
    yield accepts("LAS on an overloaded cluster ends (arrivals capped)",
                  lambda t: sim(generate_trace(jobs=30, load=40.0, seed=3), ONE_GPU, policy="las", monitor=(0, 3)),
                  lambda r: _assert(r.summary["unfinished"] == 0))


# ------------------------------------------------------------------------------------------- 4. policy keys


def policy_cases() -> Iterator[Case]:
    two = Trace((job(), job(id="b", arrival_s=10.0)))
    bad_keys: list[tuple[str, Callable[[JobStates], Any]]] = [
        ("numeric strings", lambda s: [str(x) for x in s.arrival_s]),
        ("booleans", lambda s: [True] * s.position.size),
        ("a boolean array", lambda s: np.ones(s.position.size, dtype=bool)),
        ("Decimal", lambda s: [Decimal(1)] * s.position.size),
        ("a masked array", lambda s: np.ma.masked_array(s.arrival_s, mask=True)),
        ("None", lambda s: None),
        ("a dict", lambda s: {"a": 1}),
        ("a matrix", lambda s: np.zeros((s.position.size, 2))),
        ("too few", lambda s: np.zeros(s.position.size + 1)[:-2]),
        ("too many", lambda s: np.zeros(s.position.size + 1)),
        ("NaN", lambda s: np.full(s.position.size, math.nan)),
        ("inf", lambda s: np.full(s.position.size, math.inf)),
        ("complex", lambda s: np.zeros(s.position.size) + 1j),
        ("huge ints", lambda s: [10**400] * s.position.size),
        ("a generator", lambda s: (x for x in s.arrival_s)),
        ("a string", lambda s: "ab"),
        ("datetimes", lambda s: np.array(["2020-01-01"] * s.position.size, dtype="datetime64[D]")),
    ]
    for label, policy in bad_keys:
        yield rejects(f"policy keys {label}", lambda t, p=policy: sim(two, policy=p), "policy")

    def sorts_positions(s: JobStates) -> np.ndarray:
        s.position.sort()
        return s.arrival_s

    def zeroes_remaining(s: JobStates) -> np.ndarray:
        s.remaining_s[:] = 0
        return s.arrival_s

    yield rejects("policy sorting position in place", lambda t: sim(two, policy=sorts_positions), "policy",
                  "read-only", ValueError)
    yield rejects("policy writing remaining_s", lambda t: sim(two, policy=zeroes_remaining), "policy",
                  "read-only", ValueError)

    def sorts_a_copy(s: JobStates) -> np.ndarray:
        np.sort(s.position.copy())
        return -s.arrival_s

    fifo = sim(two, policy="fifo")
    good: list[tuple[str, Callable[[JobStates], Any]]] = [
        ("a pandas Series", lambda s: pd.Series(s.arrival_s)),
        ("a list of float32", lambda s: [np.float32(x) for x in s.arrival_s]),
        ("ints", lambda s: [int(x) for x in s.arrival_s]),
        ("a tuple", lambda s: tuple(s.arrival_s)),
        ("a sorted copy", sorts_a_copy),
    ]
    for label, policy in good:
        yield accepts(f"policy keys {label}", lambda t, p=policy: sim(two, policy=p))
    yield accepts("the run is fifo's whatever the policy saw",
                  lambda t: sim(two, policy=lambda s: np.asarray(s.arrival_s)),
                  lambda r: _assert(r.jobs.equals(fifo.jobs)))


# --------------------------------------------------------------------------- 5 and 11. user callables


class _Mechanism:
    def __call__(self, instance: so.RoundInstance) -> Allocation:
        return so.run_mechanism(instance, "tune")


class _Memory:
    def __init__(self, throughput: Callable[..., Any]) -> None:
        self.throughput = throughput


def _raise(error: BaseException) -> Any:
    raise error


def callable_cases() -> Iterator[Case]:
    trace = alone()
    yield rejects("mechanism of no argument", lambda t: sim(trace, mechanism=lambda: None), "mechanism",
                  "signature")
    yield rejects("mechanism of two arguments", lambda t: sim(trace, mechanism=lambda a, b: None), "mechanism")
    yield rejects("mechanism returning None", lambda t: sim(trace, mechanism=lambda i: None), "mechanism",
                  "Allocation")
    yield rejects("mechanism returning a dict", lambda t: sim(trace, mechanism=lambda i: {"jobs": {}}), "mechanism")
    yield rejects("mechanism raising KeyError", lambda t: sim(trace, mechanism=lambda i: _raise(KeyError("k"))),
                  "mechanism", "KeyError", KeyError)
    yield rejects("mechanism raising TypeError", lambda t: sim(trace, mechanism=lambda i: _raise(TypeError("mine"))),
                  "mechanism", "mine", TypeError)
    yield rejects("mechanism a number", lambda t: sim(trace, mechanism=5), "mechanism")
    yield rejects("mechanism with options", lambda t: simulate(trace, ONE_GPU, mechanism=_Mechanism(), bogus=1),
                  "options")
    yield rejects("mechanism overloading the server", lambda t: sim(trace, mechanism=lambda i: Allocation(
        {"a": (Placement(0, 1, 999.0, 62.5),)})), "mechanism", "invalid allocation")
    yield accepts("mechanism taking *args", lambda t: sim(trace, mechanism=lambda *a: so.run_mechanism(a[0], "tune")))
    yield accepts("mechanism an object with __call__", lambda t: sim(trace, mechanism=_Mechanism()))
    yield accepts("mechanism a partial", lambda t: sim(trace, mechanism=functools.partial(
        so.run_mechanism, name="proportional")))
    yield rejects("policy of no argument", lambda t: sim(trace, policy=lambda: 0), "policy", "signature")
    yield rejects("policy of two arguments", lambda t: sim(trace, policy=lambda a, b: 0), "policy")
    yield rejects("policy a number", lambda t: sim(trace, policy=5), "policy")
    yield rejects("policy raising its own TypeError", lambda t: sim(trace, policy=lambda s: _raise(TypeError("mine"))),
                  "policy", "TypeError: mine", TypeError)
    yield rejects("policy raising ZeroDivisionError", lambda t: sim(trace, policy=lambda s: 1 / 0), "policy",
                  "ZeroDivisionError", ZeroDivisionError)

    memory = MODEL.memory_model
    yield rejects("measure of no argument", lambda t: profile_job(lambda: 1.0, CPU_AXIS, MEM_AXIS, memory),
                  "measure", "signature")
    yield rejects("measure of one argument", lambda t: profile_job(lambda c: 1.0, CPU_AXIS, MEM_AXIS, memory),
                  "measure")
    yield rejects("measure a string", lambda t: profile_job("res18", CPU_AXIS, MEM_AXIS, memory), "measure")
    yield rejects("measure raising", lambda t: profile_job(lambda c, m: 1 / 0, CPU_AXIS, MEM_AXIS, memory),
                  "measure", "ZeroDivisionError", ZeroDivisionError)
    for label, value in [("a string", "1"), ("a boolean", True), ("NaN", math.nan), ("negative", -1.0),
                         ("a list", [1.0]), ("huge", 10**400)]:
        yield rejects(f"measure returning {label}",
                      lambda t, v=value: profile_job(lambda c, m: v, CPU_AXIS, MEM_AXIS, memory), "measure(4, 62.5)")
        yield rejects(f"exhaustive measure returning {label}",
                      lambda t, v=value: profile_exhaustive(lambda c, m: v, CPU_AXIS, MEM_AXIS), "measure(4, 62.5)")
    yield rejects("exhaustive measure of no argument", lambda t: profile_exhaustive(lambda: 1.0, CPU_AXIS, MEM_AXIS),
                  "measure")
    yield rejects("memory model without throughput", lambda t: profile_job(MODEL.samples_per_s, CPU_AXIS, MEM_AXIS,
                                                                           object()), "memory_model")
    yield rejects("memory model throughput of one argument", lambda t: profile_job(
        MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, _Memory(lambda a: a)), "memory_model.throughput", "signature")
    yield rejects("memory model raising its own TypeError (was 'every grid point')", lambda t: profile_job(
        MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, _Memory(lambda a, m: _raise(TypeError("mine")))),
        "memory_model", "TypeError: mine", TypeError)
    for label, value in [("'0.5'", "0.5"), ("booleans", np.ones((4, 3), dtype=bool)), ("None", None),
                         ("a masked array", np.ma.masked_array(np.ones((4, 3)), mask=True)),
                         ("the wrong shape", np.ones((2, 2))), ("NaN", np.full((4, 3), math.nan)),
                         ("negative", -np.ones((4, 3))), ("Decimal", Decimal("0.5"))]:
        yield rejects(f"memory model returning {label}", lambda t, v=value: profile_job(
            MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, _Memory(lambda a, m: v)), "memory_model")
    # A number was spread over the grid, the same throughput at every CPU count (float(np.min(...)) where
    # np.minimum was meant): refused now, as one row is; one column (memory changes nothing) is the grid's.
    yield rejects("memory model a scalar", lambda t: profile_job(MODEL.samples_per_s, CPU_AXIS, MEM_AXIS,
                                                                 _Memory(lambda a, m: 1.0)), "memory_model")
    yield accepts("memory model one column", lambda t: profile_job(MODEL.samples_per_s, CPU_AXIS, MEM_AXIS,
                                                                   _Memory(lambda a, m: a)))
    yield accepts("profile_job of a job model", lambda t: profile_job(MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, memory))


# ------------------------------------------------------------------------------ 6. files written and read back


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def big_profile_trace() -> Trace:
    axis = np.arange(1.0, 101.0)
    tput = np.add.outer(axis, axis) / 7.0
    return Trace((job(profile=so.Profile(axis, axis, tput), model=None),), {"note": "100x100"})


def csv_rows(tmp: Path, name: str, header: str, row: str) -> Path:
    return written(tmp, name, f"{header}\n{row}\n")


def file_cases() -> Iterator[Case]:
    def round_trip(trace: Trace, suffix: str) -> Callable[[Path], Any]:
        def call(tmp: Path) -> Any:
            back = load_trace(save_trace(trace, tmp / f"t{suffix}"))
            assert back == trace
            return back
        return call

    for suffix in (".csv", ".json"):
        yield accepts(f"{suffix} a 100x100 inline profile round-trips", round_trip(big_profile_trace(), suffix))
        yield accepts(f"{suffix} an id with a lone carriage return round-trips",
                      round_trip(alone(id="a\rb"), suffix))
        yield accepts(f"{suffix} odd ids round-trip", round_trip(Trace(tuple(
            job(id=name) for name in ("\x00", '"', ",", " a ", "#x", "\u2028", "e\u0301", "\n", "\ufeffz"))), suffix))
        yield accepts(f"{suffix} a generated trace round-trips", round_trip(GENERATED, suffix))
    header = "id,arrival_s,gpus,duration_s,model,profile"
    for label, cell, field in [
        ("nested 5000 deep", nested(5000), "rows[0].profile"),
        ("a 5000-digit integer", '{"cpu_per_gpu": [1], "mem_gb_per_gpu": [1], "tput": [[' + "9" * 5000 + "]]}",
         "rows[0].profile.tput[0][0]"),
        ("NaN", '{"cpu_per_gpu": [1], "mem_gb_per_gpu": [1], "tput": [[NaN]]}', "rows[0].profile.tput[0][0]"),
        ("malformed", "{bad", "rows[0].profile"),
    ]:
        quoted = '"' + cell.replace('"', '""') + '"'
        yield rejects(f"csv profile cell {label}", lambda t, q=quoted, n=label: load_trace(
            csv_rows(t, n.replace(" ", "_") + ".csv", header, f"a,0,1,600,,{q}")), field)
    yield rejects("csv metadata nested 5000 deep", lambda t: load_trace(csv_with_metadata(
        t, '{"x": ' + nested(5000) + "}")), "metadata")
    yield rejects("csv metadata a 5000-digit integer", lambda t: load_trace(csv_with_metadata(
        t, '{"x": ' + "1" * 5000 + "}")), "metadata.x")
    yield rejects("csv metadata nested 70 deep", lambda t: load_trace(csv_with_metadata(
        t, '{"x": ' + nested(70) + "}")), "metadata.x" + "[0]" * 64)
    for label, cell in [("full-width digits", "６００"), ("Arabic-Indic digits", "٦٠٠"), ("spaces", " 600"),
                        ("underscores", "1_000"), ("nan", "nan"), ("NaN", "NaN"), ("inf", "inf"),
                        ("Infinity", "Infinity"), ("hex", "0x10"), ("a plus sign", "+5"), ("1e400", "1e400"),
                        ("a 5000-digit integer", "9" * 5000), ("true", "true"), ("a JSON list", "[600]"),
                        ("a leading dot", ".5"), ("a trailing dot", "5.")]:
        yield rejects(f"csv duration {label}", lambda t, c=cell, n=label: load_trace(
            csv_rows(t, n.replace(" ", "_") + ".csv", "id,arrival_s,gpus,duration_s,model", f"a,0,1,{c},res18")),
            "rows[0].duration_s")
    yield rejects("csv gpus 1.0", lambda t: load_trace(csv_rows(t, "g.csv", "id,arrival_s,gpus,duration_s,model",
                                                                "a,0,1.0,600,res18")), "rows[0].gpus")
    yield rejects("csv gpus full-width", lambda t: load_trace(csv_rows(
        t, "g2.csv", "id,arrival_s,gpus,duration_s,model", "a,0,１,600,res18")), "rows[0].gpus")
    yield rejects("csv profiling_s Arabic-Indic", lambda t: load_trace(csv_rows(
        t, "p.csv", "id,arrival_s,gpus,duration_s,model,profiling_s", "a,0,1,600,res18,٥")), "rows[0].profiling_s")
    # A word in a number cell was "malformed JSON at line 1 column 1"; a header with spaces after its commas
    # named a missing column without saying why.
    yield rejects("csv gpus a word", lambda t: load_trace(csv_rows(
        t, "w.csv", "id,arrival_s,gpus,duration_s,model", "a,0,two,600,res18")), "rows[0].gpus",
        "must be a number, written as JSON writes one")
    yield rejects("csv duration a 5000-digit integer keeps its reason", lambda t: load_trace(csv_rows(
        t, "big.csv", "id,arrival_s,gpus,duration_s,model", f"a,0,1,{'9' * 5000},res18")), "rows[0].duration_s",
        "out of range")
    yield rejects("csv optional column with spaces", lambda t: load_trace(csv_rows(
        t, "sp2.csv", "id,arrival_s,gpus,duration_s, model", "a,0,1,600,res18")), "columns. model",
        "spaces around them")
    yield rejects("csv duration nested 100000 deep", lambda t: load_trace(csv_rows(
        t, "deep.csv", "id,arrival_s,gpus,duration_s,model", f"a,0,1,{'[' * 100000},res18")), "rows[0].duration_s",
        "nested deeper")  # a RecursionError's traceback, once (a review)
    yield rejects("csv header with spaces", lambda t: load_trace(csv_rows(
        t, "sp.csv", "id, arrival_s, gpus, duration_s, model", "a,0,1,600,res18")), "columns.arrival_s",
        "spaces around them")
    yield rejects("csv an unclosed quote", lambda t: load_trace(csv_rows(
        t, "q.csv", "id,arrival_s,gpus,duration_s,model", '"a,0,1,600,res18')), "path", "malformed CSV")
    yield accepts("csv numbers as JSON writes them", lambda t: load_trace(csv_rows(
        t, "ok.csv", "id,arrival_s,gpus,duration_s,model", "a,-0.0,1,6e2,res18")),
        lambda trace: _assert(trace.jobs[0].duration_s == 600.0))
    yield rejects("json duration a string", lambda t: load_trace(written(t, "s.json", json.dumps(
        {"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": 0, "gpus": 1, "duration_s": "600",
                                                 "model": "res18"}]}))), "jobs[0].duration_s")
    yield rejects("json an id with a lone surrogate", lambda t: load_trace(written(t, "u.json", json.dumps(
        {"format": "synergy-trace/1", "jobs": [{"id": "\ud800", "arrival_s": 0, "gpus": 1, "duration_s": 600,
                                                 "model": "res18"}]}))), "jobs[0].id")
    yield rejects("a TraceJob id with a lone surrogate", lambda t: job(id="a\udc80"), "id")


# ---------------------------------------------------------------------------- 7. files that are not regular


@contextlib.contextmanager
def endless_writer(fifo: Path) -> Iterator[None]:
    """A process writing to ``fifo`` for ever (until the row ends and it is stopped)."""
    writer = subprocess.Popen([sys.executable, "-c", f"f = open({str(fifo)!r}, 'w')\nwhile True: f.write('x' * 65536)"],
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)  # let it open the FIFO and block writing
        yield
    finally:
        writer.kill()
        writer.wait()


def special_cases() -> Iterator[Case]:
    def fifo(tmp: Path, name: str) -> Path:
        path = tmp / name
        os.mkfifo(path)
        return path

    def with_writer(tmp: Path) -> Any:
        path = fifo(tmp, "busy.csv")
        with endless_writer(path):
            return load_trace(path)

    def linked(tmp: Path, name: str, target: str | Path) -> Path:
        path = tmp / name
        path.symlink_to(target)
        return path

    def too_large(tmp: Path, name: str) -> Any:
        path = save_trace(GENERATED, tmp / name)
        saved = files.MAX_TEXT_BYTES
        files.MAX_TEXT_BYTES = 100
        try:
            return load_trace(path)
        finally:
            files.MAX_TEXT_BYTES = saved

    yield rejects("load_trace /dev/zero", lambda t: load_trace("/dev/zero"), "path", "character device")
    yield rejects("a .csv symlink to /dev/urandom", lambda t: load_trace(linked(t, "r.csv", "/dev/urandom")), "path",
                  "character device")
    yield rejects("a FIFO with an endless writer", with_writer, "path", "FIFO")
    yield rejects("a FIFO with no writer (no hang)", lambda t: load_trace(fifo(t, "idle.json")), "path", "FIFO")
    yield rejects("load_instance of a FIFO", lambda t: so.load_instance(fifo(t, "idle2.json")), "path", "FIFO")
    yield rejects("a directory", lambda t: load_trace(t), "path", "directory")
    yield rejects("a symlink loop", lambda t: load_trace(linked(t, "loop.json", t / "loop.json")), "path",
                  "symbolic links")
    yield rejects("a missing file", lambda t: load_trace(t / "missing.csv"), "path", "No such file")
    yield rejects("a .json over the size limit", lambda t: too_large(t, "big.json"), "path", "limit")
    yield rejects("a .csv over the size limit", lambda t: too_large(t, "big.csv"), "path", "limit")
    yield rejects("a /proc file (size 0, regular)", lambda t: load_trace("/proc/self/status"), "path", "JSON")


@pytest.mark.parametrize("kind", ["directory", "fifo", "loop", "device"])
def test_the_cli_names_what_the_trace_file_is(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not 'no such file': one line with the reason, exit 2, and no hang on a FIFO."""
    target = {"directory": tmp_path, "fifo": tmp_path / "t.json", "loop": tmp_path / "l.json",
              "device": Path("/dev/zero")}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    if kind == "loop":
        target.symlink_to(target)
    with time_limit(TIMEOUT_S):
        code = sim_main(["--trace", str(target), "--mechanisms", "proportional", "--out", str(tmp_path / "out"),
                         "--no-progress"])
    err = capsys.readouterr().err.strip()
    reason = {"directory": "directory", "fifo": "FIFO", "loop": "symbolic links", "device": "character device"}[kind]
    assert code == 2 and len(err.splitlines()) == 1 and reason in err and "no such file" not in err, err


# ------------------------------------------------------------------------------------- 8. profiling arguments


def profiling_cases() -> Iterator[Case]:
    fields = {"batch": 32, "gpu_s": 0.1, "cpu_s": 0.2, "serial_fraction": 0.1, "dataset_gb": 50.0, "item_mb": 0.1}
    bad: list[tuple[str, Any]] = [
        ("batch", 10**400), ("batch", 2**40), ("batch", 0), ("batch", 1.5), ("batch", True), ("batch", "32"),
        ("gpu_s", 0.0), ("gpu_s", 1e308), ("gpu_s", 1e-300), ("gpu_s", "0.1"), ("gpu_s", math.nan),
        ("cpu_s", -1.0), ("cpu_s", 1e308), ("serial_fraction", 2.0), ("dataset_gb", 0.0), ("dataset_gb", 1e300),
        ("item_mb", 1e300), ("item_mb", Decimal("0.1")), ("storage_mb_s", 1e-300), ("process_mem_gb", 62.5),
        ("name", 5),
    ]
    for key, value in bad:
        yield rejects(f"JobModel {key}={value!r:.20}", lambda t, k=key, v=value: JobModel(**(fields | {k: v})), key)
    cache = {"batch": 32, "dataset_gb": 50.0, "item_mb": 0.1}
    for key, value in [("batch", 10**400), ("dataset_gb", -1.0), ("item_mb", "0.1"), ("storage_mb_s", 0.0)]:
        yield rejects(f"MinIOCache {key}", lambda t, k=key, v=value: MinIOCache(**(cache | {k: v})), key)
    extreme = JobModel(**(fields | {"gpu_s": 1e-30, "cpu_s": 1e30, "item_mb": 1e30, "batch": 2**31 - 1,
                                    "storage_mb_s": 1e-30}))
    yield accepts("the model's extreme ranges stay finite", lambda t: np.array(
        [extreme.throughput(c, m) for c in (1e-300, 3.0, 1e300) for m in (0.0, 62.5, 1e300)]
        + [extreme.samples_per_s(c, 62.5) for c in (1e-320, 1e300)]))
    for label, call in [("cpus a string", lambda: MODEL.throughput("3", 62.5)),
                        ("cpus a boolean", lambda: MODEL.throughput(True, 62.5)),
                        ("cpus 0", lambda: MODEL.throughput(0, 62.5)),
                        ("cpus negative", lambda: MODEL.throughput(-1, 62.5)),
                        ("cpus NaN", lambda: MODEL.throughput(math.nan, 62.5))]:
        yield rejects(f"JobModel.throughput {label}", lambda t, c=call: c(), "cpus_per_gpu")
    yield rejects("JobModel.throughput memory a masked array", lambda t: MODEL.throughput(
        3, np.ma.masked_array([62.5], mask=True)), "mem_gb_per_gpu")
    yield accepts("JobModel.throughput with a vanishing CPU share", lambda t: MODEL.throughput(5e-324, 62.5))

    reference = so.builtin_profile("res18")
    yield rejects("fit_job_model of a name", lambda t: fit_job_model("res18", 0.1, 32), "profile")  # type: ignore[arg-type]
    yield rejects("fit_job_model iter_time_s -1 (was gpu_s)", lambda t: fit_job_model(reference, iter_time_s=-1,
                                                                                      batch=32), "iter_time_s")
    yield rejects("fit_job_model iter_time_s a string", lambda t: fit_job_model(reference, "0.1", 32), "iter_time_s")
    yield rejects("fit_job_model batch 0", lambda t: fit_job_model(reference, 0.1, 0), "batch")
    yield rejects("fit_job_model batch 10^400", lambda t: fit_job_model(reference, 0.1, 10**400), "batch")
    yield rejects("fit_job_model name 5", lambda t: fit_job_model(reference, 0.1, 32, name=5), "name")
    yield rejects("fit_job_model without the reference point", lambda t: fit_job_model(
        so.Profile([1, 2], [10, 20], [[0.1, 0.2], [0.3, 0.4]]), 0.1, 32), "profile", "reference point")
    yield rejects("fit_job_model with 0 at the reference point", lambda t: fit_job_model(
        so.Profile([3], [62.5], [[0.0]]), 0.1, 32), "profile", "reference point is 0")
    yield accepts("fit_job_model of a built-in matrix", lambda t: fit_job_model(reference, 0.1, 32))
    for name, call in [("builtin_job_model", builtin_job_model), ("builtin_fit", builtin_fit),
                       ("fit_builtin", fit_builtin)]:
        for label, value in [("unknown", "vgg"), ("a list", ["res18"]), ("a number", 5)]:
            yield rejects(f"{name} {label}", lambda t, c=call, v=value: c(v), "name")
    rng = np.random.default_rng(0)
    yield rejects("draw_job_model rng a seed", lambda t: draw_job_model(0, "res18"), "rng")  # type: ignore[arg-type]
    yield rejects("draw_job_model unknown model", lambda t: draw_job_model(rng, "vgg"), "name")
    yield rejects("draw_job_model sigma 1e9", lambda t: draw_job_model(rng, "res18", [("gpu_s", 1e9)]), "spread[0][1]")
    yield rejects("draw_job_model parameter batch", lambda t: draw_job_model(rng, "res18", [("batch", 0.1)]),
                  "spread[0][0]")
    yield rejects("draw_job_model memory pushed past the reference", lambda t: draw_job_model(
        np.random.default_rng(1), "res18", [("process_mem_gb", 5.0)]), "spread")  # this seed draws it 11x
    yield rejects("modelled_profile rng None", lambda t: modelled_profile(None, "res18"), "rng")  # type: ignore[arg-type]
    yield rejects("modelled_profile ratio 7", lambda t: modelled_profile(rng, "res18", 7), "cpu_per_gpu")
    yield rejects("modelled_profile model 5", lambda t: modelled_profile(rng, 5), "name")  # type: ignore[arg-type]
    yield rejects("normalised cpus a string", lambda t: normalised(reference, "3"), "cpus_per_gpu")  # type: ignore[arg-type]
    yield rejects("normalised of a dict", lambda t: normalised({"tput": 1}), "profile")  # type: ignore[arg-type]
    yield rejects("normalised memory 0", lambda t: normalised(reference, 3.0, 0.0), "mem_gb_per_gpu")
    axes_bad = [("cpu_axis strings", ["1", "2"], MEM_AXIS, "cpu_axis[0]"), ("cpu_axis empty", [], MEM_AXIS, "cpu_axis"),
                ("mem_axis decreasing", CPU_AXIS, [62.5, 20.0], "mem_axis"),
                ("mem_axis booleans", CPU_AXIS, [True, False], "mem_axis[0]")]
    for label, cpu, mem, field in axes_bad:
        yield rejects(f"profile_job {label}", lambda t, c=cpu, m=mem: profile_job(
            MODEL.samples_per_s, c, m, MODEL.memory_model), field)
        yield rejects(f"profile_exhaustive {label}", lambda t, c=cpu, m=mem: profile_exhaustive(
            MODEL.samples_per_s, c, m), field)
    for label, value in [("1e308", 1e308), ("negative", -1.0), ("a string", "1"), ("NaN", math.nan)]:
        yield rejects(f"profile_job minutes_per_point {label}", lambda t, v=value: profile_job(
            MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, MODEL.memory_model, minutes_per_point=v), "minutes_per_point")
        yield rejects(f"profile_exhaustive minutes_per_point {label}", lambda t, v=value: profile_exhaustive(
            MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, minutes_per_point=v), "minutes_per_point")
        yield rejects(f"profile_matrix minutes_per_point {label}", lambda t, v=value: profile_matrix(
            reference, "exhaustive", minutes_per_point=v), "minutes_per_point")
        yield rejects(f"with_profiling_delay minutes_per_point {label}", lambda t, v=value: with_profiling_delay(
            GENERATED, minutes_per_point=v), "minutes_per_point")
    for value in (0.0, 1.0, "0.1", True):
        yield rejects(f"profile_job threshold {value!r}", lambda t, v=value: profile_job(
            MODEL.samples_per_s, CPU_AXIS, MEM_AXIS, MODEL.memory_model, threshold=v), "threshold")
        yield rejects(f"profile_matrix threshold {value!r}", lambda t, v=value: profile_matrix(
            reference, threshold=v), "threshold")
        yield rejects(f"with_profiling_delay threshold {value!r}", lambda t, v=value: with_profiling_delay(
            GENERATED, threshold=v), "threshold")
    yield rejects("profile_matrix of a name", lambda t: profile_matrix("res18"), "profile")  # type: ignore[arg-type]
    yield rejects("profile_matrix method unknown", lambda t: profile_matrix(reference, "guess"), "method")
    yield accepts("profile_matrix at the largest cost", lambda t: profile_matrix(
        reference, "exhaustive", minutes_per_point=1e6))


# --------------------------------------------------------------------------- 11. messages naming the cause


def message_cases() -> Iterator[Case]:
    yield rejects("generate_trace load 1e-306 names load (was arrival_s=inf)", lambda t: generate_trace(
        jobs=3, load=1e-306), "load")
    yield rejects("generate_trace load 0", lambda t: generate_trace(jobs=3, load=0), "load")
    yield accepts("generate_trace at the lowest load", lambda t: generate_trace(jobs=1000, load=1e-6))
    yield rejects("a low-load trace at short rounds names the arrival", lambda t: sim(
        generate_trace(jobs=3, load=1e-6, seed=2), so.Cluster(8), round_s=0.01), "trace.jobs[1].arrival_s", "horizon")


# ------------------------------------------------------------------------------------------------ the table


def all_cases() -> list[Case]:
    return [*metadata_cases(), *derived_cases(), *loop_cases(), *policy_cases(), *callable_cases(),
            *file_cases(), *special_cases(), *profiling_cases(), *message_cases()]


CASES = all_cases()


class RowTimeout(BaseException):
    """A row that did not answer in time (a BaseException: no except Exception can swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise RowTimeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_table_is_broad() -> None:
    labels = [case.label for case in CASES]
    assert len(labels) == len(set(labels)), "row labels are unique"
    assert len(CASES) >= 300 and sum(case.field is None for case in CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[case.label for case in CASES])
def test_input(case: Case, tmp_path: Path) -> None:
    try:
        with time_limit(TIMEOUT_S):
            result = case.call(tmp_path)
    except RowTimeout:
        pytest.fail(f"{case.label}: no answer within {TIMEOUT_S} s (a hang)")
    except SynergyError as error:
        if case.field is None:
            pytest.fail(f"{case.label}: a good input was refused: {error}")
        assert isinstance(error, InvalidInputError), f"{case.label}: {type(error).__name__}: {error}"
        assert error.field == case.field, f"{case.label}: named {error.field!r}, not {case.field!r}: {error}"
        assert case.words in str(error), f"{case.label}: the message does not say {case.words!r}: {error}"
        if case.cause is not None:
            assert isinstance(error, CallableError) and isinstance(error.error, case.cause), repr(error)
            assert error.__cause__ is error.error
        return
    if case.field is not None:
        pytest.fail(f"{case.label}: a bad input was accepted (wanted an error naming {case.field!r})")
    sound(result)
    if case.check is not None:
        case.check(result)


def test_a_user_policy_cannot_change_the_run() -> None:
    """What the policy is handed is read-only, and it is not the engine's own array."""
    seen: list[JobStates] = []

    def keeps(s: JobStates) -> np.ndarray:
        seen.append(s)
        return s.arrival_s

    trace = Trace((job(), job(id="b", arrival_s=10.0), job(id="c", arrival_s=20.0)))
    result = sim(trace, policy=keeps)
    assert result.jobs.equals(sim(trace, policy="fifo").jobs)
    assert all(not getattr(s, name).flags.writeable for s in seen for name in ("position", "arrival_s", "gpus"))


def test_replace_keeps_metadata_rules() -> None:
    """A Trace rebuilt by ``dataclasses.replace`` is checked again."""
    with pytest.raises(InvalidInputError) as error:
        replace(GENERATED, metadata={**GENERATED.metadata, "split": 5})
    assert error.value.field == "metadata.split"


def test_arrivals_drawn_past_the_horizon_stop_there() -> None:
    """A generated trace extended mid-run: jobs ready past the horizon are cut off, and arrivals stop."""
    from synergy_opt.sim.engine import _Run
    from synergy_opt.sim.policies import fifo

    first = generate_trace(jobs=2, load=9.0)
    late = replace(first.jobs[1], id="late", arrival_s=2.0 * MAX_READY_ROUNDS * 300.0)
    longer = Trace((*first.jobs, late), first.metadata)
    run = _Run(first, so.Cluster(1), fifo, lambda instance: None, 300.0, 0.0, (0, 2), False)  # type: ignore[arg-type,return-value]
    run._grow(longer, extension=True)
    assert run.size == 2 and run.max_jobs == 2 and len(run.trace) == 2
    with pytest.raises(InvalidInputError) as error:  # given up front, the same job is refused
        _Run(longer, so.Cluster(1), fifo, lambda instance: None, 300.0, 0.0, (0, 3), False)  # type: ignore[arg-type,return-value]
    assert error.value.field == "trace.jobs[2].arrival_s"
