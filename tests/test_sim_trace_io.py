"""Trace files: lossless JSON and CSV round trips, the Philly job log, and bad files named precisely."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError
from synergy_opt.sim import Trace, TraceJob, generate_trace, load_trace, philly_trace, save_trace, simulate


@pytest.mark.parametrize("suffix", [".json", ".csv"])
@pytest.mark.parametrize("trace", [
    generate_trace(60, load=9.0, seed=1),
    generate_trace(40, load=None, multi_gpu=True, profile_noise=0.05, seed=2),
    generate_trace(30, load=4.0, job_kind="modelled", cpu_per_gpu=5, seed=3),
    Trace((TraceJob("a", 0.1 + 0.2, 3, 1 / 3, so.Profile([1.0, 2.5], [10.0], [[0.5], [1.0]]), profiling_s=7.25),
           TraceJob("b,\"quoted\"", 1e-300, 1, 1e300, so.builtin_profile("res18"), model="res18"),
           TraceJob(" c\nd \r\n", 2.0, 1, 5.0, so.builtin_profile("gnmt"), model="gnmt"))),
], ids=["generated", "static-noisy", "modelled-ratio5", "hand-made"])
def test_traces_read_back_exactly(tmp_path: Path, suffix: str, trace: Trace) -> None:
    path = save_trace(trace, tmp_path / f"trace{suffix}")
    back = load_trace(path)
    assert back == trace
    assert [j.profile for j in back.jobs] == [j.profile for j in trace.jobs]


def test_saved_traces_name_built_in_profiles_and_carry_the_rest(tmp_path: Path) -> None:
    trace = generate_trace(5, load=9.0, profile_noise=0.05)
    data = json.loads(save_trace(generate_trace(5, load=9.0), tmp_path / "t.json").read_text())
    assert data["format"] == "synergy-trace/1" and all("profile" not in job for job in data["jobs"])
    noisy = json.loads(save_trace(trace, tmp_path / "n.json").read_text())
    assert all("profile" in job for job in noisy["jobs"])


def test_a_loaded_generated_trace_extends_as_the_generator_would(tmp_path: Path) -> None:
    trace = generate_trace(20, load=30.0, seed=4)
    back = load_trace(save_trace(trace, tmp_path / "t.csv"))
    assert back.extend(60) == generate_trace(60, load=30.0, seed=4).extend(60)
    assert simulate(back, so.Cluster(1), mechanism="tune").jobs.equals(
        simulate(trace, so.Cluster(1), mechanism="tune").jobs)



def test_an_edited_generated_trace_goes_on_from_its_last_generated_job() -> None:
    # Extending once took the generator's jobs from position len(trace) on: with j3 dropped (19 jobs) it drew j19
    # again, and the run raised "duplicate job id" once every held job was admitted.
    trace = generate_trace(20, load=9.0, seed=1)
    dropped = Trace(trace.jobs[:3] + trace.jobs[4:], trace.metadata)
    longer = generate_trace(40, load=9.0, seed=1)
    assert dropped.extend(30).jobs == dropped.jobs + longer.jobs[20:31]
    assert dropped.extend(30).metadata["jobs"] == 31
    assert Trace(trace.jobs[10:], trace.metadata).extend(15).jobs == longer.jobs[10:25]  # a suffix
    assert Trace(trace.jobs[:10], trace.metadata).extend(12).jobs == longer.jobs[:12]  # a prefix
    assert trace.extend(40).jobs == longer.jobs  # untouched: as before
    result = simulate(dropped, so.Cluster(2))  # its monitored jobs need arrivals past its end
    assert result.summary["stopped"] == "done" and result.jobs.id.is_unique


def test_a_json_traces_unknown_fields_are_named(tmp_path: Path) -> None:
    data = json.loads(save_trace(generate_trace(3, load=9.0), tmp_path / "t.json").read_text())
    data["jobs"][1]["arival_s"] = 5.0
    with pytest.raises(InvalidInputError, match=r"jobs\[1\].arival_s=5.0: unknown field .*did you mean 'arrival_s'"):
        load_trace(json_file(tmp_path, data))
    del data["jobs"][1]["arival_s"]
    data["job"] = []
    with pytest.raises(InvalidInputError, match=r"job=\[\]: unknown field"):
        load_trace(json_file(tmp_path, data))


def json_file(folder: Path, data: dict) -> Path:
    path = folder / "edited.json"
    path.write_text(json.dumps(data))
    return path

def _philly_job(jobid: str, submitted: str, attempts: list, status: str = "Pass") -> dict:
    return {"jobid": jobid, "submitted_time": submitted, "status": status, "vc": "vc1", "user": "u",
            "attempts": attempts}


def _attempt(start: str, end: str, *gpus_per_server: int) -> dict:
    detail = [{"ip": f"m{i}", "gpus": [f"gpu{g}" for g in range(n)]} for i, n in enumerate(gpus_per_server)]
    return {"start_time": start, "end_time": end, "detail": detail}


PHILLY_LOG = [
    _philly_job("application_1", "2017-10-03 00:00:00", [_attempt("2017-10-03 00:01:00", "2017-10-03 02:01:00", 1)]),
    # A failed first attempt (no end), then a run over two servers: 8 GPUs for 30 minutes.
    _philly_job("application_2", "2017-10-03 00:10:00", [
        _attempt("2017-10-03 00:11:00", "None", 4),
        _attempt("2017-10-03 01:00:00", "2017-10-03 01:30:00", 4, 4),
    ], status="Killed"),
    _philly_job("application_3", "2017-10-03 00:05:00", []),  # never ran
    _philly_job("application_4", "None", [_attempt("2017-10-03 00:11:00", "2017-10-03 00:12:00", 1)]),
    _philly_job("application_5", "2017-10-03 00:20:00", [_attempt("2017-10-03 00:21:00", "2017-10-03 00:22:00")]),
    _philly_job("application_6", "2017-10-03 00:30:00",
                [_attempt("2017-10-03 00:31:00", "2017-10-03 03:31:00", 8, 8, 8)]),
    _philly_job("application_1", "2017-10-03 00:40:00", [_attempt("2017-10-03 00:41:00", "2017-10-03 00:42:00", 1)]),
    _philly_job("application_7", "2017-10-03 00:02:00", [_attempt("2017-10-03 00:03:00", "2017-10-03 00:03:30", 2)],
                status="Failed"),
]


def test_the_philly_job_log_becomes_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(PHILLY_LOG))
    trace = load_trace(path, split=(0, 100, 0), seed=3, max_gpus=16)
    frame = trace.to_frame().set_index("id")
    assert list(frame.index) == ["application_1", "application_7", "application_2"]  # by submission time
    assert frame["arrival_s"].tolist() == [0.0, 120.0, 600.0]
    assert frame["gpus"].tolist() == [1, 2, 8]
    assert frame["duration_s"].tolist() == [7200.0, 30.0, 1800.0]
    assert set(frame["model"]) <= set(so.profiles.models_by_task()["language"])
    assert trace.metadata["jobs_read"] == len(PHILLY_LOG)
    assert trace.metadata["skipped"] == {
        "more than 16 GPUs": 1, "never ran": 1, "no attempt with times and GPUs": 1, "no submitted_time": 1,
        "repeated jobid": 1,
    }
    assert load_trace(path, split=(0, 100, 0), seed=3, max_gpus=16) == trace  # seeded
    everything = load_trace(path)
    assert len(everything) == 4 and everything.to_frame()["gpus"].max() == 24
    # A job is the same whatever max_gpus drops: its model and arrival (drawn after dropping, they differed).
    unlimited = load_trace(path, split=(0, 100, 0), seed=3).to_frame().set_index("id")
    assert len(unlimited) == 4
    assert unlimited.loc[frame.index, ["model", "arrival_s"]].equals(frame[["model", "arrival_s"]])
    # Also when the job dropped is the first: arrivals keep their origin (the first job that ran).
    big_first = [_philly_job("big", "2017-10-02 23:00:00", [_attempt("2017-10-02 23:01:00", "2017-10-02 23:30:00",
                                                                     8, 8, 8)]), *PHILLY_LOG]
    path.write_text(json.dumps(big_first))
    small = load_trace(path, seed=3, max_gpus=16).to_frame().set_index("id")
    every = load_trace(path, seed=3).to_frame().set_index("id")
    assert "big" not in small.index and every.loc["big", "arrival_s"] == 0.0
    assert small["arrival_s"].tolist() == [3600.0, 3720.0, 4200.0]
    assert every.loc[small.index, ["model", "arrival_s"]].equals(small[["model", "arrival_s"]])
    result = simulate(trace, so.Cluster(2), mechanism="tune")
    assert result.summary["unfinished"] == 0 and result.summary["monitored"] == 3  # a fifth of 3 jobs is none


@pytest.mark.parametrize(("edit", "field"), [
    (lambda job: job.update(submitted_time="garbage"), "[0].submitted_time"),
    (lambda job: job.update(attempts="x"), "[0].attempts"),
    (lambda job: job["attempts"][0].update(end_time=17), "[0].attempts[0].end_time"),
])
def test_a_malformed_philly_value_is_not_read_as_a_missing_one(tmp_path: Path, edit: Any, field: str) -> None:
    # A time that is not one, or attempts that are not a list, were skipped as "no submitted_time" / "never ran".
    log = json.loads(json.dumps(PHILLY_LOG))
    edit(log[0])
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(log))
    with pytest.raises(InvalidInputError, match=re.escape(field) + "="):
        load_trace(path)


@pytest.mark.parametrize(("text", "suffix", "field"), [
    ("{", ".json", "path"),
    ('{"format": "synergy-round/1", "jobs": []}', ".json", "format"),
    ('{"format": "synergy-trace/1", "jobs": {}}', ".json", "jobs"),
    ('{"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": 0, "gpus": 1}]}', ".json",
     "jobs[0].duration_s"),
    ('{"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": -1, "gpus": 1, "duration_s": 5,'
     ' "model": "res18"}]}', ".json", "jobs[0].arrival_s"),
    ('{"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": 0, "gpus": 1, "duration_s": 5,'
     ' "model": "resnet9000"}]}', ".json", "jobs[0].model"),
    ('{"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": 0, "gpus": 1.5, "duration_s": 5,'
     ' "model": "res18"}]}', ".json", "jobs[0].gpus"),
    ('{"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": 0, "gpus": 1, "duration_s": 1e400,'
     ' "model": "res18"}]}', ".json", "jobs[0].duration_s"),
    ("id,arrival_s,gpus,duration_s,model\na,0,1,nan,res18\n", ".csv", "rows[0].duration_s"),
    ("id,arrival_s,gpus,duration_s,model\na,0,two,5,res18\n", ".csv", "rows[0].gpus"),
    ("id,arrival_s,gpus,model\na,0,1,res18\n", ".csv", "columns.duration_s"),
    ("id,arrival_s,gpus,duration_s,model\na,0,1,5,\n", ".csv", "rows[0].model"),
    # A row cut short was read with its missing cells empty (its profiling delay, iteration time, matrix lost).
    ("id,arrival_s,gpus,duration_s,model,profiling_s\na,0,1,5,res18\n", ".csv", "rows[0]"),
    ("id,arrival_s,gpus,duration_s,model,profile\na,0,1,5,,{bad\n", ".csv", "rows[0].profile"),
    ("# synergy-round/1 {}\nid,arrival_s,gpus,duration_s\n", ".csv", "format"),
    # A key or column given twice, or a column the reader does not know, was silently dropped.
    ('{"format": "synergy-trace/1", "jobs": [{"id": "a", "arrival_s": 0, "gpus": 1, "gpus": 2, "duration_s": 5,'
     ' "model": "res18"}]}', ".json", "jobs[0].gpus"),
    ('{"format": "synergy-trace/1", "jobs": [], "jobs": []}', ".json", "jobs"),
    ("id,arrival_s,gpus,duration_s,gpus\na,0,1,5,2\n", ".csv", "columns.gpus"),
    ("id,arrival_s,gpus,duration_s,iter_time\na,0,1,5,0.2\n", ".csv", "columns.iter_time"),
    ("id,arrival_s,gpus,duration_s,model\na,0,1,5,res18,extra\n", ".csv", "rows[0]"),
    ("id,arrival_s,gpus,duration_s,model\na,0,1,5,res18\na,5,1,5,res18\n", ".csv", "rows[1].id"),  # was jobs[1]
    ("id,arrival_s,gpus,duration_s,model\na,0,1,5e-324,res18\n", ".csv", "rows[0].duration_s"),
    ('# synergy-trace/1 {"cpu_per_gpu": 3, "cpu_per_gpu": 4}\nid,arrival_s,gpus,duration_s\n', ".csv",
     "metadata.cpu_per_gpu"),
    ('[{"jobid": 5}]', ".json", "[0].jobid"),
    ('[{"jobid": "a", "submitted_time": "2017-10-03 00:00:00", "attempts": [{"start_time": "2017-10-03 00:00:00",'
     ' "end_time": "2017-10-03 01:00:00", "detail": [{"ip": "m1", "gpus": 3}]}]}]', ".json",
     "[0].attempts[0].detail[0].gpus"),
    ("[3]", ".json", "[0]"),
])
def test_bad_trace_files_are_named(tmp_path: Path, text: str, suffix: str, field: str) -> None:
    path = tmp_path / f"trace{suffix}"
    path.write_text(text)
    with pytest.raises(InvalidInputError) as error:
        load_trace(path)
    assert error.value.field == field


@pytest.mark.parametrize(("text", "suffix"), [
    ('{"format": "synergy-trace/1", "jobs": [{"id": "", "arrival_s": 0, "gpus": 1, "duration_s": 5, "model": '
     '"res18"}]}', ".json"),
    ("id,arrival_s,gpus,duration_s,model\n,0,1,5,res18\n", ".csv"),
])
def test_an_empty_id_is_named_with_the_value_given(tmp_path: Path, text: str, suffix: str) -> None:
    # It was reported as missing, with the value None (a tester's finding).
    path = tmp_path / f"trace{suffix}"
    path.write_text(text)
    with pytest.raises(InvalidInputError) as error:
        load_trace(path)
    assert error.value.field.endswith(".id") and error.value.value == "" and "empty" in str(error.value)


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="path"):
        save_trace(generate_trace(3), tmp_path / "trace.txt")
    with pytest.raises(InvalidInputError, match="trace"):
        save_trace({"jobs": []}, tmp_path / "trace.json")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="path"):
        load_trace(tmp_path / "missing.json")
    (tmp_path / "log.json").write_text("[]")
    with pytest.raises(InvalidInputError, match="max_gpus"):
        load_trace(tmp_path / "log.json", max_gpus=0)
    with pytest.raises(InvalidInputError, match="split"):
        load_trace(tmp_path / "log.json", split=(1, 2))
    assert len(load_trace(tmp_path / "log.json")) == 0
    with pytest.raises(InvalidInputError, match="split"):
        philly_trace([], split="abc")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="seed"):
        philly_trace([], seed=-1)
    with pytest.raises(InvalidInputError, match="log"):
        philly_trace({"jobs": []})  # type: ignore[arg-type]


def test_the_simulator_is_reachable_from_the_top_level() -> None:
    assert so.simulate is simulate and so.load_trace is load_trace and so.Trace is Trace
    with pytest.raises(AttributeError):
        _ = so.no_such_name  # type: ignore[attr-defined]
