"""Malformed (and well-formed) input at every public entry point, as one table (issue 13).

Each row calls one public function or constructor. A rejected row must raise an ``InvalidInputError`` (a
``SynergyError``) whose ``field`` is the argument or the JSON path named in the row; a file-system row may
raise ``OSError`` instead; an accepted row (numpy scalars, JSON forms) must not raise. Anything else, a raw
``TypeError`` from deep inside or a silently accepted bad value, fails the row.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt import files
from synergy_opt.bench import main as bench_main
from synergy_opt.cli.errors import run_cli
from synergy_opt.errors import InvalidInputError, SynergyError
from synergy_opt.instance import Placement
from synergy_opt.io import instance_to_dict
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.mechanisms.spare import spend_spare
from synergy_opt.profiling import builtin_job_model, draw_job_model, modelled_profile
from synergy_opt.sim.cli import main as sim_main
from synergy_opt.sim.trace import Trace, TraceJob
from synergy_opt.solvers import solve_model
from synergy_opt.solvers.model import ModelBuilder
from tests.test_inputs import EXAMPLE as BASE_EXAMPLE

# test_inputs' two-job round, with every optional field of a job and metadata set.
EXAMPLE: dict[str, Any] = copy.deepcopy(BASE_EXAMPLE)
EXAMPLE["jobs"][1].update(arrival=1.5, work=10)
EXAMPLE["metadata"] = {"note": "table"}
INSTANCE = so.load_instance(EXAMPLE)
ALLOCATION = {"jobs": {"j1": [{"server": 0, "gpus": 4, "cpus": 12, "mem_gb": 250}],
                       "j2": [{"server": 1, "gpus": 1, "cpus": 3, "mem_gb": 62.5}]}}
OTHER_ROUND = so.generate_round(32, multi_gpu=True, seed=2)


@dataclass(frozen=True)
class Case:
    label: str
    call: Callable[[], Any]
    field: str | None  # the field a rejection names; None: the call must succeed
    os_error: bool = False  # a file-system case: OSError is also a clear answer


def rejects(label: str, call: Callable[[], Any], field: str, *, os_error: bool = False) -> Case:
    return Case(label, call, field, os_error)


def accepts(label: str, call: Callable[[], Any]) -> Case:
    return Case(label, call, None)


def edited(path: tuple[Any, ...], value: Any, delete: bool = False) -> dict[str, Any]:
    data = copy.deepcopy(EXAMPLE)
    target = data
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


def json_path(path: tuple[Any, ...]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


# Values that are not what any field wants, each with what it stands for.
NOT_NUMBERS = [("str", "0.6"), ("bool", True), ("None", None), ("list", [1]), ("dict", {"a": 1})]
NOT_FINITE = [("nan", math.nan), ("inf", math.inf), ("huge", 10**400)]


# ------------------------------------------------------------------------------------ instance JSON paths


def instance_cases() -> Iterator[Case]:
    counts = [("cluster", "servers"), ("cluster", "gpus_per_server"), ("jobs", 0, "gpus"), ("jobs", 1, "gpus")]
    reals = [("cluster", "cpus_per_server"), ("cluster", "mem_gb_per_server"), ("jobs", 1, "work")]
    for path in counts:
        for kind, value in [*NOT_NUMBERS, ("float", 1.5), ("zero", 0), ("negative", -3), ("1e30", 10**30),
                            ("5000 digits", 10**5000)]:
            yield rejects(f"load {json_path(path)} {kind}", lambda p=path, v=value: so.load_instance(edited(p, v)),
                          json_path(path))
    for path in reals:
        for kind, value in [*NOT_NUMBERS[:2], *NOT_NUMBERS[3:], *NOT_FINITE, ("zero", 0), ("negative", -1)]:
            yield rejects(f"load {json_path(path)} {kind}", lambda p=path, v=value: so.load_instance(edited(p, v)),
                          json_path(path))
    for kind, value in [*NOT_NUMBERS, *NOT_FINITE, ("negative", -1)]:
        yield rejects(f"load arrival {kind}", lambda v=value: so.load_instance(edited(("jobs", 1, "arrival"), v)),
                      "jobs[1].arrival")
    for kind, value in [("int", 5), ("bool", True), ("None", None), ("empty", ""), ("list", ["j"])]:
        yield rejects(f"load job id {kind}", lambda v=value: so.load_instance(edited(("jobs", 0, "id"), v)),
                      "jobs[0].id")
    for kind, value in [("int", 5), ("bool", True), ("list", ["a"]), ("unknown", "resnet9000")]:
        yield rejects(f"load model {kind}", lambda v=value: so.load_instance(edited(("jobs", 0, "model"), v)),
                      "jobs[0].model")
    yield rejects("load model int with profile", lambda: so.load_instance(edited(("jobs", 1, "model"), 7)),
                  "jobs[1].model")
    for axis in ("cpu_per_gpu", "mem_gb_per_gpu"):
        base = ("jobs", 1, "profile", axis)
        for kind, value, where in [("str entry", [1, "3", 6], "[1]"), ("bool entry", [True, 3, 6], "[0]"),
                                   ("None entry", [1, None, 6], "[1]"), ("nan", [1, math.nan, 6], ""),
                                   ("decreasing", [6, 3, 1], ""), ("empty", [], ""), ("scalar", 3, ""),
                                   ("str", "1,3,6", ""), ("nested", [[1, 3, 6]], ""), ("zero", [0, 3, 6], "")]:
            if axis == "mem_gb_per_gpu" and kind in ("str entry", "None entry", "nan", "decreasing", "zero"):
                value = value[:2]
            yield rejects(f"load {axis} {kind}", lambda p=base, v=value: so.load_instance(edited(p, v)),
                          json_path(base) + where)
    tput = ("jobs", 1, "profile", "tput")
    for kind, value, where in [("str entry", [[0.5, "0.6"], [1, 1], [1.5, 2]], "[0][1]"),
                               ("bool entry", [[0.5, 0.5], [True, 1], [1.5, 2]], "[1][0]"),
                               ("None entry", [[0.5, 0.5], [1, None], [1.5, 2]], "[1][1]"),
                               ("nan", [[0.5, 0.5], [1, math.nan], [1.5, 2]], "[1][1]"),
                               ("inf", [[0.5, 0.5], [1, 1], [math.inf, 2]], "[2][0]"),
                               ("negative", [[0.5, -0.5], [1, 1], [1.5, 2]], "[0][1]"),
                               ("shape", [[1, 1], [1, 1]], ""), ("ragged", [[1], [1, 1], [1, 1]], ""),
                               ("flat", [1, 1, 1, 1, 1, 1], ""), ("str", "1", "")]:
        yield rejects(f"load tput {kind}", lambda v=value: so.load_instance(edited(tput, v)), json_path(tput) + where)
    required = [("cluster", "servers"), ("cluster", "cpus_per_server"), ("jobs", 0, "id"),
                ("jobs", 1, "profile", "tput"), ("jobs", 0, "gpus")]
    for path in required:
        yield rejects(f"load missing {json_path(path)}",
                      lambda p=path: so.load_instance(edited(p, None, delete=True)), json_path(path))
    structure = [(("format",), "synergy-round/0", "format"), (("format",), 1, "format"), (("cluster",), [2], "cluster"),
                 (("cluster",), None, "cluster"), (("jobs",), {"j1": 1}, "jobs"), (("jobs",), None, "jobs"),
                 (("jobs", 0), "j1", "jobs[0]"), (("jobs", 1, "profile"), [1], "jobs[1].profile"),
                 (("metadata",), [1], "metadata"), (("metadata",), {"x": math.nan}, "metadata.x"),
                 (("metadata",), {"x": {1, 2}}, "metadata.x"), (("metadata",), {"x": object()}, "metadata.x"),
                 (("metadata",), {"x": {"y": math.inf}}, "metadata.x.y")]
    for path, value, field in structure:
        yield rejects(f"load {json_path(path)}={value!r:.20}",
                      lambda p=path, v=value: so.load_instance(edited(p, v)), field)
    # A field the format does not have: a misspelt optional one once took its default without a word.
    for path in [("arival",), ("cluster", "gpus"), ("jobs", 1, "arival"), ("jobs", 1, "profile", "name")]:
        yield rejects(f"load unknown field {json_path(path)}", lambda p=path: so.load_instance(edited(p, 1.0)),
                      json_path(path))
    yield rejects("load duplicate ids", lambda: so.load_instance(edited(("jobs", 1, "id"), "j1")), "jobs[1].id")
    yield rejects("load demand above cluster", lambda: so.load_instance(edited(("jobs", 0, "gpus"), 16)),
                  "jobs[*].gpus")
    yield rejects("load metadata nested 70", lambda: so.load_instance(edited(("metadata",), {"a": nested(70)})),
                  "metadata.a" + "[0]" * 64)
    for kind, value in [("None", None), ("int", 5), ("list", [EXAMPLE]), ("bytes", b"{}"), ("empty path", "")]:
        yield rejects(f"load source {kind}", lambda v=value: so.load_instance(v), "source" if kind != "empty path"
                      else "path", os_error=True)
    # A NUL in a path: the operating system's calls raised a bare ValueError (a tester's finding).
    yield rejects("load path with a NUL", lambda: so.load_instance("round\0.json"), "path")
    yield rejects("save path with a NUL", lambda: so.save_instance(so.load_instance(EXAMPLE), "round\0.json"), "path")
    # numpy scalars and numpy arrays in the JSON form are numbers like any other
    yield accepts("load numpy values", lambda: so.load_instance(edited(("cluster", "servers"), np.int64(2))))
    yield accepts("load numpy tput", lambda: so.load_instance(edited(tput, np.array([[0.5, 0.5], [1, 1], [1.5, 2]]))))
    yield accepts("load float32 memory", lambda: so.load_instance(edited(("cluster", "mem_gb_per_server"),
                                                                           np.float32(500))))


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


# -------------------------------------------------------------------------------------------- instance files


def file_cases(folder: Path) -> Iterator[Case]:
    text = json.dumps(EXAMPLE)

    def written(name: str, content: str | bytes) -> Path:
        path = folder / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    files_ = [
        ("binary", os.urandom(64) + b"\x80", "path"),
        ("utf-16", text.encode("utf-16"), "path"),
        ("utf-16 without BOM", text.encode("utf-16-le"), "path"),
        ("latin-1", text.replace("table", "t\u00e9").encode("latin-1"), "path"),
        ("deep nesting", text[:-1] + ', "extra": ' + "[" * 5000 + "]" * 5000 + "}", "path"),
        ("nesting 70", text.replace('"note": "table"', '"a": ' + "[" * 70 + "]" * 70), "metadata.a" + "[0]" * 64),
        ("1e400 memory", text.replace('"mem_gb_per_server": 500', '"mem_gb_per_server": 1e400'),
         "cluster.mem_gb_per_server"),
        ("1e400 in tput", text.replace("[1.5, 2]", "[1.5, 1e400]"), "jobs[1].profile.tput[2][1]"),
        ("5000 digits", text.replace('"gpus": 4', '"gpus": ' + "9" * 5000), "jobs[0].gpus"),
        ("5000 digits metadata", text.replace('"table"', "1" + "0" * 5000), "metadata.note"),
        ("NaN literal", text.replace('"gpus": 4', '"gpus": NaN'), "jobs[0].gpus"),
        ("Infinity literal", text.replace('"work": 10', '"work": Infinity'), "jobs[1].work"),
        ("key given twice", text.replace('"gpus": 4', '"gpus": 4, "gpus": 2'), "jobs[0].gpus"),
        ("cluster given twice", text.replace('"jobs":', '"cluster": {}, "jobs":'), "cluster"),
        ("truncated", text[:40], "path"),
        ("empty", "", "path"),
        ("not an object", "[1, 2]", "instance"),
        ("trailing garbage", text + "x", "path"),
    ]
    for label, content, field in files_:
        yield rejects(f"file {label}", lambda n=label, c=content: so.load_instance(written(n.replace(" ", "_"), c)),
                      field)
    yield rejects("file missing", lambda: so.load_instance(folder / "missing.json"), "path", os_error=True)
    yield rejects("file is a folder", lambda: so.load_instance(folder), "path", os_error=True)
    yield accepts("file with UTF-8 BOM", lambda: so.load_instance(written("bom.json", b"\xef\xbb\xbf" + text.encode())))
    yield accepts("file as str path", lambda: so.load_instance(str(written("plain.json", text))))

    def too_large() -> Any:
        path = written("large.json", text)
        saved = files.MAX_TEXT_BYTES
        files.MAX_TEXT_BYTES = 100
        try:
            return so.load_instance(path)
        finally:
            files.MAX_TEXT_BYTES = saved

    yield rejects("file over the size limit", too_large, "path")


# ------------------------------------------------------------------------------------------- save_instance


def save_cases(folder: Path) -> Iterator[Case]:
    def with_metadata(metadata: Any) -> so.RoundInstance:
        return so.RoundInstance(INSTANCE.cluster, INSTANCE.jobs, metadata)

    def save_untouched(metadata: Any, name: str) -> Any:
        target = folder / name
        target.write_text("old\n")
        try:
            return so.save_instance(with_metadata(metadata), target)
        finally:  # rejected before any file is opened: the old content stays, and no temporary is left
            assert target.read_text() == "old\n" and sorted(folder.glob(f".{name}*")) == []

    for label, metadata, field in [("set", {"a": {1, 2}}, "metadata.a"), ("nan", {"a": math.nan}, "metadata.a"),
                                   ("inf", {"a": [1, math.inf]}, "metadata.a[1]"),
                                   ("object", {"a": object()}, "metadata.a"), ("int key", {1: "a"}, "metadata"),
                                   ("bytes", {"a": b"x"}, "metadata.a"), ("deep", {"a": nested(70)},
                                                                          "metadata.a" + "[0]" * 64)]:
        yield rejects(f"save metadata {label}", lambda m=metadata, n=label: save_untouched(m, f"{n}.json"), field)
    yield rejects("save None", lambda: so.save_instance(None, folder / "x.json"), "instance")
    yield rejects("save list", lambda: so.save_instance([INSTANCE], folder / "x.json"), "instance")
    yield rejects("save path None", lambda: so.save_instance(INSTANCE, None), "path")
    yield rejects("save path int", lambda: so.save_instance(INSTANCE, 5), "path")
    yield rejects("save into a folder", lambda: so.save_instance(INSTANCE, folder), "path", os_error=True)
    yield accepts("save the JSON form", lambda: so.save_instance(EXAMPLE, folder / "dict.json"))
    numpy_metadata = {"seed": np.int64(3), "x": np.float64(1), "ok": np.bool_(True)}
    yield accepts("save numpy metadata",
                  lambda: so.save_instance(with_metadata(numpy_metadata), folder / "np.json"))
    yield accepts("save into a new folder", lambda: so.save_instance(INSTANCE, folder / "new" / "x.json"))


# ----------------------------------------------------------------------------------------- generate_round


def _assert_equal(value: object, expected: object) -> None:
    assert value == expected, f"{value!r} != {expected!r}"


def generator_cases() -> Iterator[Case]:
    bad = {
        "gpus": [*(case for case in NOT_NUMBERS if case[1] is not None), ("100", 100), ("0", 0), ("-8", -8),
                 ("8.0", 8.0), ("1e30", 10**30 * 8)],
        "split": [("abc", "abc"), ("two", (50, 50)), ("negative", (1, -1, 0)), ("zeros", (0, 0, 0)),
                  ("str entry", (20, "70", 10)), ("bool entry", (True, 70, 10)), ("nan", (math.nan, 1, 1)),
                  ("None", None), ("dict", {"a": 1})],
        "multi_gpu": [("no", "no"), ("yes", "yes"), ("1", 1), ("None", None)],
        "seed": [("-1", -1), ("x", "x"), ("1.5", 1.5), ("True", True), ("2**40", 2**40), ("None", None)],
        "profile_noise": [("x", "x"), ("1000", 1000), ("-0.1", -0.1), ("nan", math.nan), ("inf", math.inf),
                          ("True", True), ("None", None)],
        "cpu_per_gpu": [("7", 7), ("3.0", 3.0), ("str", "3"), ("True", True), ("None", None)],
    }
    for name, values in bad.items():
        for kind, value in values:
            field = f"{name}[1]" if name == "split" and kind in ("str entry", "negative") else name
            field = f"{name}[0]" if name == "split" and kind in ("bool entry", "nan") else field
            yield rejects(f"generate {name}={kind}", lambda n=name, v=value: so.generate_round(16, **{n: v})
                          if n != "gpus" else so.generate_round(v), field)
    # gpus=None is the documented default: 128 GPUs, or with types their servers' GPUs.
    yield accepts("generate gpus=None", lambda: _assert_equal(so.generate_round(None).cluster.total_gpus, 128))
    yield accepts("generate np.int64 gpus", lambda: so.generate_round(gpus=np.int64(128)))
    yield accepts("generate numpy arguments", lambda: so.generate_round(
        np.int32(16), split=np.array([20, 70, 10]), multi_gpu=np.bool_(True), seed=np.int64(3),
        profile_noise=np.float32(0.05), cpu_per_gpu=np.int64(4)))


# ------------------------------------------------------------------------------------- solve_* and options


def solver_cases() -> Iterator[Case]:
    functions = {"solve_ideal": so.solve_ideal, "solve_joint": so.solve_joint, "solve_opt": so.solve_opt}
    bad = {
        "time_limit": [*NOT_NUMBERS[:2], ("0", 0), ("-1", -1.0), ("nan", math.nan), ("inf", math.inf),
                       ("1e400", 10**400)],
        "mip_gap": [*NOT_NUMBERS[:3], ("5.0", 5.0), ("-0.1", -0.1), ("nan", math.nan)],
        "threads": [("0", 0), ("1.5", 1.5), ("str", "2"), ("True", True)],
        "seed": [("x", "x"), ("-1", -1), ("1.5", 1.5), ("2**40", 2**40)],
        "verbose": [("yes", "yes"), ("1", 1), ("None", None)],
        "options": [("list", [("presolve", "off")]), ("str", "presolve=off"), ("int key", {1: 2}),
                    ("object value", {"presolve": object()})],
        "solver": [("unknown", "gurobi"), ("int", 5), ("None", None), ("list", ["highs"])],
        "instance": [("None", None), ("list", [1]), ("str", "round.json")],
    }
    for function_name, function in functions.items():
        for name, values in bad.items():
            for kind, value in values:
                field = f"options.{'presolve'}" if kind == "object value" else "options" if name == "options" else name
                call = (lambda f=function, v=value: f(v)) if name == "instance" else (
                    lambda f=function, n=name, v=value: f(INSTANCE, **{n: v}))
                yield rejects(f"{function_name} {name}={kind}", call, field)
    yield rejects("solve_ideal relax=yes", lambda: so.solve_ideal(INSTANCE, relax="yes"), "relax")
    yield rejects("solve_ideal objective", lambda: so.solve_ideal(INSTANCE, objective="jobs"), "objective")
    yield rejects("solve_ideal method", lambda: so.solve_ideal(INSTANCE, method=5), "method")
    yield rejects("solve_ideal reductions", lambda: so.solve_ideal(INSTANCE, reductions="none"), "reductions")
    yield rejects("solve_ideal core with options", lambda: so.solve_ideal(INSTANCE, method="core",
                                                                          options={"presolve": "off"}), "options")
    # It ran HiGHS whatever was asked (a usability review).
    yield rejects("solve_ideal core on another solver", lambda: so.solve_ideal(INSTANCE, method="core",
                                                                               solver="ortools-scip"), "solver")
    yield rejects("solve_ideal core on another solver, heterogeneous", lambda: so.solve_ideal(
        so.generate_round(types={"k80": 1, "v100": 1}), method="core", solver="ortools-scip"), "solver")
    yield rejects("solve_ideal unknown keyword", lambda: so.solve_ideal(INSTANCE, bogus=1), "solve_ideal()")
    yield rejects("solve_joint consolidate=no", lambda: so.solve_joint(INSTANCE, consolidate="no"), "consolidate")
    for kind, value in [("2", 2), ("str", "0.5"), ("-0.1", -0.1), ("nan", math.nan)]:
        yield rejects(f"solve_joint split_penalty={kind}", lambda v=value: so.solve_joint(INSTANCE, split_penalty=v),
                      "split_penalty")
    for kind, value in [("x", "x"), ("nan", math.nan), ("bool", True)]:
        yield rejects(f"solve_joint upper_bound={kind}", lambda v=value: so.solve_joint(INSTANCE, upper_bound=v),
                      "upper_bound")
    yield rejects("solve_joint formulation", lambda: so.solve_joint(INSTANCE, formulation=5), "formulation")
    yield rejects("solve_joint reductions", lambda: so.solve_joint(INSTANCE, reductions=so.Reductions()), "reductions")
    yield rejects("solve_opt placement", lambda: so.solve_opt(INSTANCE, placement="ilp"), "placement")
    yield rejects("solve_opt ideal_solver", lambda: so.solve_opt(INSTANCE, ideal_solver=5), "ideal_solver")
    yield rejects("solve_opt placement_options bogus", lambda: so.solve_opt(INSTANCE, placement_options={"bogus": 1}),
                  "placement_options.bogus")
    yield rejects("solve_opt placement_options value", lambda: so.solve_opt(
        INSTANCE, placement_options={"objective": "max"}), "placement_options.objective")
    yield rejects("solve_opt placement_options aggregate=no", lambda: so.solve_opt(
        INSTANCE, placement_options={"aggregate": "no"}), "placement_options.aggregate")
    yield rejects("solve_opt placement_options list", lambda: so.solve_opt(INSTANCE, placement_options=[1]),
                  "placement_options")
    yield rejects("build_ideal None", lambda: so.build_ideal(None), "instance")
    yield rejects("build_ideal objective", lambda: so.build_ideal(INSTANCE, objective=None), "objective")
    yield accepts("solve_ideal numpy time limit", lambda: so.solve_ideal(INSTANCE, time_limit=np.int64(5)))
    yield accepts("solve_ideal numpy everything", lambda: so.solve_ideal(
        INSTANCE, relax=np.bool_(False), time_limit=np.float32(5), mip_gap=np.float64(1e-6), threads=np.int64(1),
        seed=np.int32(3), verbose=np.bool_(False)))
    yield accepts("solve_ideal the JSON form", lambda: so.solve_ideal(EXAMPLE))
    yield accepts("solve_joint numpy penalty", lambda: so.solve_joint(INSTANCE, split_penalty=np.float64(0.5),
                                                                      upper_bound=np.float64(100.0)))
    yield accepts("solve_opt the JSON form", lambda: so.solve_opt(EXAMPLE, placement_options={"aggregate": False}))
    yield accepts("build_ideal the JSON form", lambda: so.build_ideal(EXAMPLE))

    # Backend options: unknown names and values the backend does not take, for every installed backend.
    known = {"highs": {"presolve": "off"}, "pyomo-highs": {"presolve": "off"}, "pyomo-glpk": {"nopresol": ""},
             "pyomo-cbc": {"maxNodes": 100000}, "ortools-cpsat": {"max_number_of_conflicts": 10**6},
             "ortools-scip": {"limits/nodes": 100000}}
    wrong_type = {"highs": {"presolve": True}, "pyomo-highs": {"time_limit": "x"},
                  "ortools-cpsat": {"max_number_of_conflicts": "x"}, "ortools-scip": {"limits/nodes": "x"}}
    for solver in so.available_solvers():
        yield rejects(f"{solver} options bogus", lambda s=solver: so.solve_ideal(INSTANCE, solver=s,
                                                                                  options={"bogus_opt": 1}),
                      "options.bogus_opt")
        if solver in wrong_type:
            key = next(iter(wrong_type[solver]))
            yield rejects(f"{solver} option of the wrong type", lambda s=solver: so.solve_ideal(
                INSTANCE, solver=s, options=wrong_type[s]), f"options.{key}")
        yield accepts(f"{solver} known option", lambda s=solver: ok_status(so.solve_ideal(INSTANCE, solver=s,
                                                                                           options=known[s])))


def ok_status(result: so.IdealResult) -> None:
    assert result.status is so.Status.OPTIMAL, result.message


# ----------------------------------------------------------------------------- mechanisms and the evaluator


def mechanism_cases() -> Iterator[Case]:
    for kind, value in [("None", None), ("list", [1]), ("str", "round.json"), ("int", 5)]:
        yield rejects(f"run_mechanism instance {kind}", lambda v=value: so.run_mechanism(v, "tune"), "instance")
    for kind, value in [("unknown", "tunee"), ("int", 5), ("None", None), ("list", ["tune"])]:
        yield rejects(f"run_mechanism name {kind}", lambda v=value: so.run_mechanism(INSTANCE, v), "name")
    for kind, value, field in [("int", 5, "order"), ("str", "j1", "order"), ("int ids", [1, 2], "order[0]"),
                               ("unknown id", ["j1", "j9"], "order"), ("missing id", ["j1"], "order"),
                               ("repeated", ["j1", "j1", "j2"], "order"), ("dict", {"j1": 1}, "order"),
                               ("None id", ["j1", None], "order[1]")]:
        yield rejects(f"run_mechanism order {kind}", lambda v=value: so.run_mechanism(INSTANCE, "tune", order=v), field)
    # threshold is best_case_tolerance's earlier name, for every mechanism that takes it (near-opt refused it).
    for name in ("greedy", "tune", "tune-artifact", "drf", "tetris", "near-opt"):
        for kind, value in [("str", "0.1"), ("bool", True), ("1", 1.0), ("nan", math.nan), ("negative", -0.1)]:
            yield rejects(f"{name} threshold {kind}",
                          lambda n=name, v=value: so.run_mechanism(INSTANCE, n, threshold=v), "threshold")
        yield rejects(f"{name} bogus option", lambda n=name: so.run_mechanism(INSTANCE, n, bogus=1), "options.bogus")
        yield accepts(f"{name} numpy threshold",
                      lambda n=name: so.run_mechanism(INSTANCE, n, threshold=np.float64(0.1)))
    two_types = so.generate_round(types={"k80": 1, "v100": 1}, seed=1)
    yield rejects("near-opt negative threshold on types",
                  lambda: so.run_mechanism(two_types, "near-opt", threshold=-0.1), "threshold")
    yield accepts("near-opt threshold on types", lambda: so.run_mechanism(two_types, "near-opt", threshold=0.1))
    for name in ("drf", "tetris"):
        yield rejects(f"{name} skip=no", lambda n=name: so.run_mechanism(INSTANCE, n, skip="no"), "options.skip")
        yield accepts(f"{name} skip=np.bool_", lambda n=name: so.run_mechanism(INSTANCE, n, skip=np.bool_(True)))
    for kind, value in [("1", 1.0), ("str", "0.1"), ("bool", False), ("negative", -0.5)]:
        yield rejects(f"best_case_demands tolerance {kind}",
                      lambda v=value: best_case_demands(INSTANCE, v), "best_case_tolerance")
    yield accepts("best_case_demands numpy float32 tolerance",
                  lambda: best_case_demands(INSTANCE, np.float32(0.1)))
    yield rejects("proportional takes no options", lambda: so.run_mechanism(INSTANCE, "proportional", threshold=0.1),
                  "options.threshold")
    yield rejects("opt mechanism bad option", lambda: so.run_mechanism(INSTANCE, "opt", mip_gap=5.0), "mip_gap")
    yield rejects("opt mechanism unknown option", lambda: so.run_mechanism(INSTANCE, "opt", bogus=1), "options.bogus")
    yield accepts("run_mechanism the JSON form", lambda: so.run_mechanism(EXAMPLE, "tune", order=("j2", "j1")))

    mine = so.run_mechanism(OTHER_ROUND, "proportional")
    foreign = {"jobs": {"j1": [{"server": 5, "gpus": 4, "cpus": 12, "mem_gb": 250}]}}
    stranger = {"jobs": {"x9": [{"server": 0, "gpus": 1, "cpus": 3, "mem_gb": 62.5}]}}
    for label, call, field in [
        ("evaluate None allocation", lambda: so.evaluate(INSTANCE, None), "allocation"),
        ("evaluate None instance", lambda: so.evaluate(None, ALLOCATION), "instance"),
        ("evaluate list allocation", lambda: so.evaluate(INSTANCE, [1]), "allocation"),
        ("evaluate another round's allocation", lambda: so.evaluate(INSTANCE, mine), "allocation.jobs['j0']"),
        ("evaluate server out of range", lambda: so.evaluate(INSTANCE, foreign), "allocation.jobs['j1'][0].server"),
        ("evaluate unknown job", lambda: so.evaluate(INSTANCE, stranger), "allocation.jobs['x9']"),
        ("evaluate strict=yes", lambda: so.evaluate(INSTANCE, ALLOCATION, strict="yes"), "strict"),
        ("evaluate server 1e30", lambda: so.evaluate(INSTANCE, placement_edit("server", 10**30)),
         "allocation.jobs['j1'][0].server"),
        ("evaluate gpus 1e30", lambda: so.evaluate(INSTANCE, placement_edit("gpus", 10**30)),
         "allocation.jobs['j1'][0].gpus"),
        ("evaluate cpus 1e400", lambda: so.evaluate(INSTANCE, placement_edit("cpus", 10**400)),
         "allocation.jobs['j1'][0].cpus"),
        ("evaluate instance with a bad field", lambda: so.evaluate(edited(("jobs", 0, "gpus"), "4"), ALLOCATION),
         "instance.jobs[0].gpus"),
    ]:
        yield rejects(label, call, field)
    yield accepts("evaluate the JSON forms", lambda: assert_valid(so.evaluate(EXAMPLE, ALLOCATION)))
    yield accepts("evaluate an overload is a result", lambda: assert_invalid(so.evaluate(
        INSTANCE, {"jobs": {"j1": [{"server": 0, "gpus": 4, "cpus": 30, "mem_gb": 250}]}})))


def placement_edit(field: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(ALLOCATION)
    data["jobs"]["j1"][0][field] = value
    return data


def assert_valid(evaluation: so.Evaluation) -> None:
    assert evaluation.valid, evaluation.problems


def assert_invalid(evaluation: so.Evaluation) -> None:
    assert not evaluation.valid and "server 0 uses 30 cpus" in evaluation.problems[0]


# ------------------------------------------------------------------------------- Allocation.from_dict


def allocation_cases() -> Iterator[Case]:
    place = {"server": 0, "gpus": 1, "cpus": 3, "mem_gb": 62.5}
    keyed = [("int key", {5: [place]}), ("None key", {None: [place]}), ("bool key", {True: [place]}),
             ("empty key", {"": [place]}), ("int and str keys", {5: [place], "5": [place]})]
    for label, jobs in keyed:
        yield rejects(f"from_dict {label}", lambda j=jobs: so.Allocation.from_dict({"jobs": j}), "jobs")
    for label, data, field in [("None", None, "jobs"), ("list", [1], "jobs"), ("no jobs", {}, "jobs"),
                               ("jobs list", {"jobs": [place]}, "jobs"),
                               ("parts dict", {"jobs": {"j1": place}}, "jobs['j1']"),
                               ("part list", {"jobs": {"j1": [[0, 1, 3, 62.5]]}}, "jobs['j1'][0]"),
                               ("repeated server", {"jobs": {"j2": [place, place]}}, "jobs['j2']")]:
        yield rejects(f"from_dict {label}", lambda d=data: so.Allocation.from_dict(d), field)
    for key in ("server", "gpus", "cpus", "mem_gb"):
        yield rejects(f"from_dict missing {key}", lambda k=key: so.Allocation.from_dict(
            {"jobs": {"j1": [{f: v for f, v in place.items() if f != k}]}}), f"jobs['j1'][0].{key}")
        values = [*NOT_NUMBERS[:3], ("negative", -1), ("nan", math.nan), ("huge", 10**400)]
        if key in ("server", "gpus"):
            values += [("float", 1.5), ("1e30", 10**30)]
        for kind, value in values:
            yield rejects(f"from_dict {key} {kind}", lambda k=key, v=value: so.Allocation.from_dict(
                {"jobs": {"j1": [{**place, k: v}]}}), f"jobs['j1'][0].{key}")
    numpy_place = {"server": np.int64(0), "gpus": np.int32(4), "cpus": np.float32(12), "mem_gb": np.int64(250)}
    yield accepts("from_dict numpy numbers", lambda: so.Allocation.from_dict({"jobs": {"j1": [numpy_place]}}))


# --------------------------------------------------------------------------------- constructors, profiles


def constructor_cases() -> Iterator[Case]:
    profile = INSTANCE.jobs[1].profile
    cluster = INSTANCE.cluster
    for label, call, field in [
        ("Cluster servers str", lambda: so.Cluster("2"), "servers"),
        ("Cluster servers bool", lambda: so.Cluster(True), "servers"),
        ("Cluster servers 1e30", lambda: so.Cluster(10**30), "servers"),
        ("Cluster gpus_per_server float", lambda: so.Cluster(2, 8.0), "gpus_per_server"),
        ("Cluster cpus str", lambda: so.Cluster(2, 8, "24"), "cpus_per_server"),
        ("Cluster memory bool", lambda: so.Cluster(2, 8, 24, True), "mem_gb_per_server"),
        ("Cluster memory 1e400", lambda: so.Cluster(2, 8, 24, 10**400), "mem_gb_per_server"),
        ("Job id bool", lambda: so.Job(True, 1, profile), "id"),
        ("Job id int", lambda: so.Job(5, 1, profile), "id"),
        ("Job gpus str", lambda: so.Job("a", "1", profile), "gpus"),
        ("Job profile dict", lambda: so.Job("a", 1, profile.to_dict()), "profile"),
        ("Job model int", lambda: so.Job("a", 1, profile, model=5), "model"),
        ("Job arrival str", lambda: so.Job("a", 1, profile, arrival="0"), "arrival"),
        ("Job work bool", lambda: so.Job("a", 1, profile, work=True), "work"),
        ("Profile name int", lambda: so.Profile([1], [1], [[1]], name=5), "name"),
        ("Profile tput str", lambda: so.Profile([1, 2], [1], [["0.6"], [1]]), "tput[0][0]"),
        ("Profile axis bool", lambda: so.Profile([True, 2], [1], [[1], [1]]), "cpu_per_gpu[0]"),
        ("Profile axis str", lambda: so.Profile("12", [1], [[1], [1]]), "cpu_per_gpu"),
        ("RoundInstance cluster None", lambda: so.RoundInstance(None, ()), "cluster"),
        ("RoundInstance jobs dict", lambda: so.RoundInstance(cluster, {"a": 1}), "jobs"),
        ("RoundInstance job not a Job", lambda: so.RoundInstance(cluster, (1,)), "jobs[0]"),
        ("RoundInstance metadata list", lambda: so.RoundInstance(cluster, (), [1]), "metadata"),
        ("Placement server bool", lambda: Placement(True, 1, 1, 1), "server"),
        ("Placement cpus str", lambda: Placement(0, 1, "1", 1), "cpus"),
        ("Allocation int key", lambda: so.Allocation({5: ()}), "jobs"),
        ("Allocation parts not placements", lambda: so.Allocation({"a": [1]}), "jobs['a'][0]"),
        ("Allocation not a dict", lambda: so.Allocation([1]), "jobs"),
        ("SolverParams mip_gap 5", lambda: so.SolverParams(mip_gap=5.0), "mip_gap"),
        ("SolverParams seed str", lambda: so.SolverParams(seed="x"), "seed"),
        ("SolverParams verbose str", lambda: so.SolverParams(verbose="no"), "verbose"),
        ("SolverParams options list", lambda: so.SolverParams(options=[1]), "options"),
        ("Reductions yes", lambda: so.Reductions(fix_below_floor="yes"), "reductions.fix_below_floor"),
        ("builtin_profile list", lambda: so.builtin_profile(["res18"]), "name"),
        ("builtin_profile int", lambda: so.builtin_profile(5), "name"),
        ("builtin_profile unknown", lambda: so.builtin_profile("resnet9000"), "name"),
        ("builtin_profile ratio str", lambda: so.builtin_profile("res18", "3"), "cpu_gpu_ratio"),
        ("builtin_profile ratio 7", lambda: so.builtin_profile("res18", 7), "cpu_gpu_ratio"),
    ]:
        yield rejects(label, call, field)
    yield accepts("Cluster numpy", lambda: so.Cluster(np.int64(2), np.int32(8), np.float32(24), np.int64(500)))
    yield accepts("builtin_profile numpy ratio", lambda: so.builtin_profile("res18", np.int64(4)))
    yield accepts("SolverParams numpy", lambda: so.SolverParams(time_limit=np.int64(5), seed=np.int64(1)))


# ------------------------------------------------------------------------------ profiling, spare capacity


def profiling_cases() -> Iterator[Case]:
    model = builtin_job_model("res18")
    rng = np.random.default_rng(0)
    for label, call, field in [
        ("JobModel.throughput cpus str", lambda: model.throughput("3", 62.5), "cpus_per_gpu"),
        ("JobModel.throughput cpus bool", lambda: model.throughput(True, 62.5), "cpus_per_gpu"),
        ("JobModel.throughput cpus list with str", lambda: model.throughput([3, "4"], 62.5), "cpus_per_gpu[1]"),
        ("JobModel.throughput mem list with bool", lambda: model.throughput(3, [62.5, True]), "mem_gb_per_gpu[1]"),
        ("JobModel.throughput mem ragged", lambda: model.throughput(3, [[62.5], [1, 2]]), "mem_gb_per_gpu"),
        ("JobModel.samples_per_s mem str", lambda: model.samples_per_s(3, "62.5"), "mem_gb_per_gpu"),
        ("MinIOCache.throughput at full memory str",
         lambda: model.memory_model.throughput("1.0", 62.5), "at_full_memory"),
        ("MinIOCache.runs mem str", lambda: model.memory_model.runs("62.5"), "mem_gb_per_gpu"),
        ("draw_job_model rng int", lambda: draw_job_model(5, "res18"), "rng"),
        ("draw_job_model rng None", lambda: draw_job_model(None, "res18"), "rng"),
        ("draw_job_model spread str", lambda: draw_job_model(rng, "res18", "gpu_s"), "spread"),
        ("draw_job_model spread not pairs", lambda: draw_job_model(rng, "res18", [("gpu_s",)]), "spread[0]"),
        ("draw_job_model spread unknown parameter",
         lambda: draw_job_model(rng, "res18", [("nope", 0.1)]), "spread[0][0]"),
        ("draw_job_model spread batch", lambda: draw_job_model(rng, "res18", [("batch", 0.1)]), "spread[0][0]"),
        ("draw_job_model sigma str", lambda: draw_job_model(rng, "res18", [("gpu_s", "0.1")]), "spread[0][1]"),
        ("draw_job_model spread parameter twice",  # the second factor replaced the first, silently
         lambda: draw_job_model(rng, "res18", [("gpu_s", 0.2), ("gpu_s", 0.2)]), "spread[1][0]"),
        ("draw_job_model sigma negative", lambda: draw_job_model(rng, "res18", [("gpu_s", -1)]), "spread[0][1]"),
        ("modelled_profile rng int", lambda: modelled_profile(5, "res18"), "rng"),
    ]:
        yield rejects(label, call, field)
    yield accepts("JobModel.throughput numpy", lambda: model.throughput(np.int64(3), np.array([[50.0], [62.5]])))
    yield accepts("draw_job_model numpy sigma",
                  lambda: draw_job_model(rng, "res18", [("dataset_gb", np.float32(0.3))]))


def spare_cases() -> Iterator[Case]:
    for label, call, field in [
        ("spend_spare allocation None", lambda: spend_spare(INSTANCE, None), "allocation"),
        ("spend_spare allocation list", lambda: spend_spare(INSTANCE, [1]), "allocation"),
        ("spend_spare instance None", lambda: spend_spare(None, ALLOCATION), "instance"),
        ("spend_spare unknown job", lambda: spend_spare(INSTANCE, {"jobs": {"j9": ALLOCATION["jobs"]["j1"]}}),
         "allocation.jobs['j9']"),
        ("spend_spare server 99", lambda: spend_spare(INSTANCE, {"jobs": {"j2": [
            {"server": 99, "gpus": 1, "cpus": 3, "mem_gb": 62.5}]}}), "allocation.jobs['j2'][0].server"),
        ("spend_spare table str", lambda: spend_spare(INSTANCE, ALLOCATION, "table"), "table"),
    ]:
        yield rejects(label, call, field)
    yield accepts("spend_spare the JSON forms", lambda: spend_spare(EXAMPLE, ALLOCATION))


def all_cases(folder: Path) -> list[Case]:
    return [*instance_cases(), *file_cases(folder), *save_cases(folder), *generator_cases(), *solver_cases(),
            *mechanism_cases(), *allocation_cases(), *constructor_cases(), *profiling_cases(), *spare_cases()]


FOLDER = Path(tempfile.mkdtemp(prefix="synergy_inputs_table_"))  # the file cases' files, made when they run
CASES = all_cases(FOLDER)


@pytest.fixture(scope="module", autouse=True)
def table_folder() -> Iterator[None]:
    yield
    shutil.rmtree(FOLDER, ignore_errors=True)


def test_the_table_is_broad() -> None:
    assert len(CASES) >= 290 and len({case.label for case in CASES}) == len(CASES)
    assert sum(case.field is None for case in CASES) >= 30  # numpy scalars, JSON forms, known options


@pytest.mark.parametrize("case", CASES, ids=[case.label for case in CASES])
def test_input(case: Case) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an invalid allocation warns; that is its result, checked per case
        if case.field is None:
            case.call()
            return
        try:
            result = case.call()
        except InvalidInputError as error:
            assert error.field == case.field, f"names {error.field!r}, expected {case.field!r}: {error}"
            assert case.field in str(error)
            return
        except OSError:
            assert case.os_error, "an OSError for a case that is not about the file system"
            return
        except SynergyError as error:  # another of the project's errors: clear, but not bad-input's
            pytest.fail(f"{type(error).__name__} instead of InvalidInputError: {error}")
    pytest.fail(f"accepted: returned {str(result)[:120]}")


# ------------------------------------------------------------------------------------------ the bench CLI


@pytest.mark.parametrize(
    "argv",
    [
        ["--gpus", "100"], ["--gpus", "99999999992"], ["--profile-noise", "1000"], ["--profile-noise", "nan"],
        ["--split", "abc"], ["--split", "1e400,1,1"], ["--seeds", "-1"], ["--mechanisms", "bogus"],
        ["--solvers", "gurobi"], ["--time-limit", "x"], ["--workers", "0"], ["--instances", "{bad}"],
        ["--instances", "{missing}"], ["--out", "{file}"],
    ],
)
def test_bench_bad_input_is_one_line_and_exit_code_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "round.json").write_bytes(json.dumps(EXAMPLE).encode("utf-16"))
    (tmp_path / "file").write_text("")  # --out is a folder: a file there cannot be one
    given = [arg.format(bad=bad, missing=tmp_path / "missing", file=tmp_path / "file") for arg in argv]
    code = bench_main([*given, "--mechanisms", "proportional", "--no-progress", "--out", str(tmp_path / "o")]
                      if "--mechanisms" not in given and "--out" not in given else [*given, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "error:" in err, err


# --------------------------------------------------------------------------------------- the simulator CLI


@pytest.mark.parametrize(
    "argv",
    [
        ["--gpus", "100"], ["--cpu-per-gpu", "7"], ["--policy", "bogus"], ["--load", "-1"], ["--load", "x"],
        ["--load", "nan"], ["--load", ","], ["--split", "1,2"], ["--split", "20,70,10/abc"],
        ["--multi-gpu", "maybe"], ["--profile-noise", "1000"], ["--job-kind", "random"], ["--jobs", "0"],
        ["--seeds", "-1"], ["--mechanisms", "bogus"], ["--round-s", "0"], ["--round-s", "inf"],
        ["--monitor", "5,2"], ["--monitor", "5"], ["--preemption-overhead", "300"], ["--time-limit", "5"],
        ["--workers", "0"], ["--workers", "2", "--dask", "tcp://127.0.0.1:1"], ["--trace", "{missing}"],
        ["--trace", "{utf16}"], ["--trace", "{trace}", "--load", "3"], ["--trace", "{trace}", "--monitor", "0,9"],
        ["--trace", "{trace}", "--gpus", "8"], ["--trace", "{trace}", "--split", "50,0,50"],
        ["--experiment", "nosuch"], ["--experiment", "{bad_key}"], ["--experiment", "{bad_value}"],
        ["--experiment", "{bad_toml}"], ["--experiment", "{bad_type}"], ["--out", "{file}"],
        ["--policy", "fifo,max_min_fairness", "--backfill", "no"],
    ],
)
def test_sim_bad_input_is_one_line_and_exit_code_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = {"missing": tmp_path / "missing.json", "utf16": tmp_path / "utf16.json", "trace": tmp_path / "t.json",
             "bad_key": tmp_path / "key.toml", "bad_value": tmp_path / "value.toml",
             "bad_toml": tmp_path / "broken.toml", "bad_type": tmp_path / "type.toml", "file": tmp_path / "file"}
    paths["utf16"].write_bytes(json.dumps({"format": "synergy-trace/1", "jobs": []}).encode("utf-16"))
    big = TraceJob("big", 0.0, 16, 3600.0, so.builtin_profile("res18"), model="res18")
    so.save_trace(Trace((big, TraceJob("small", 60.0, 1, 60.0, big.profile, model="res18"))), paths["trace"])
    paths["bad_key"].write_text('bogus_setting = 3\n')
    paths["bad_value"].write_text('load = [-2]\n')
    paths["bad_toml"].write_text('load = [2,\n')
    paths["bad_type"].write_text('load = {a = 1}\n')
    paths["file"].write_text("")
    given = [arg.format(**paths) for arg in argv]
    code = sim_main([*given, *_sim_defaults(given, tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "error:" in err, err


def _sim_defaults(given: list[str], tmp_path: Path) -> list[str]:
    """Flags that keep a run that was wrongly accepted short, unless the row gives them itself."""
    extra = {"--mechanisms": "proportional", "--gpus": "16", "--out": str(tmp_path / "out")}
    if "--trace" not in given:
        extra["--jobs"] = "5"
    return [*(item for flag, value in extra.items() if flag not in given for item in (flag, value)), "--no-progress"]


def test_saved_instance_round_trips_through_the_json_form(tmp_path: Path) -> None:
    # The JSON form accepted by the public functions is exactly what save_instance writes.
    path = so.save_instance(INSTANCE, tmp_path / "round.json")
    assert so.load_instance(path) == INSTANCE == so.load_instance(instance_to_dict(INSTANCE))


# ------------------------------------------------------------------------ run_cli: bad input against failure


def _infeasible_solution(argv: Any) -> int:
    """A real solve whose answer is asked for although there is none (x + y >= 5 with x, y in [0, 1])."""
    builder = ModelBuilder("infeasible", "max")
    builder.add_vars("x", 2, upper=1, objective=1.0)
    builder.add_rows("r", np.zeros(2), np.arange(2), np.ones(2), lower=5)
    solve_model(builder.build(), "highs").solution()
    return 0


def _strict_overload(argv: Any) -> int:
    """A strict evaluation of an allocation that overloads server 0 (input accepted, the check fails)."""
    overload = {"jobs": {"j1": [{"server": 0, "gpus": 4, "cpus": 999, "mem_gb": 250}]}}
    so.evaluate(INSTANCE, overload, strict=True)
    return 0


def _bad_argument(argv: Any) -> int:
    so.generate_round(100)
    return 0


@pytest.mark.parametrize(
    ("main", "code", "words"),
    [
        (_infeasible_solution, 1, "prog: failed: NoSolutionError: "),
        (_strict_overload, 1, "prog: failed: InvalidAllocationError: "),
        (_bad_argument, 2, "prog: error: gpus=100: "),
    ],
)
def test_run_cli_tells_bad_input_from_a_failed_run(
    main: Callable[[Any], int], code: int, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input exits 2 as argparse does; any other SynergyError is a failure (exit 1), one line each."""
    assert run_cli("prog", main, []) == code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(words), err
    assert ("bad input" not in err) and (("error:" in err) == (code == 2)), err
