"""Round-instance files, built-in profiles, the generator, and one test per kind of bad input."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.files import atomic_open
from synergy_opt.policies import PolicyProblem
from synergy_opt.profiles import cpu_gpu_ratios, model_info, models_by_task, source
from synergy_opt.validation import NON_NEGATIVE, POSITIVE, Number

EXAMPLE: dict[str, Any] = {
    "format": "synergy-round/1",
    "cluster": {"servers": 2, "gpus_per_server": 8, "cpus_per_server": 24, "mem_gb_per_server": 500},
    "jobs": [
        {"id": "j1", "gpus": 4, "model": "res18"},
        {"id": "j2", "gpus": 1, "profile": {"cpu_per_gpu": [1, 3, 6], "mem_gb_per_gpu": [62.5, 125],
                                            "tput": [[0.5, 0.5], [1, 1], [1.5, 2]]}},
    ],
}


def edited(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(EXAMPLE)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def assert_names(error: pytest.ExceptionInfo[InvalidInputError], field: str, value: str) -> None:
    assert error.value.field == field
    assert field in str(error.value) and value in str(error.value)


def test_example_loads_and_round_trips(tmp_path: Path) -> None:
    instance = so.load_instance(EXAMPLE)
    assert instance.cluster.total_gpus == 16 and instance.floors.tolist() == [1.0, 1.0]
    assert instance.jobs[0].profile == so.builtin_profile("res18")
    path = so.save_instance(instance, tmp_path / "round.json")
    again = so.load_instance(path)
    assert again == instance
    saved = json.loads(path.read_text())
    assert saved["jobs"][0] == {"id": "j1", "gpus": 4, "model": "res18"}  # built-in profiles saved by name


def test_generated_noisy_instance_round_trips(tmp_path: Path) -> None:
    instance = so.generate_round(32, multi_gpu=True, seed=5, profile_noise=0.05)
    again = so.load_instance(so.save_instance(instance, tmp_path / "noisy.json"))
    assert again == instance
    assert so.solve_ideal(again).objective == pytest.approx(so.solve_ideal(instance).objective)


@pytest.mark.parametrize("mem_gb", [1e99, 1e100, 1e308])
def test_rounds_of_huge_whole_capacities_load_back(tmp_path: Path, mem_gb: float) -> None:
    # Whole floats were written as ints: 1e100 became a 101-digit literal, which the reader refuses.
    single = so.RoundInstance(so.Cluster(1, 8, 24, mem_gb), (so.Job("a", 1, so.builtin_profile("res18")),))
    hetero = so.generate_round(types={"k80": 1, "v100": 1}, seed=0)
    shaped = so.HeteroCluster(tuple(so.ServerType(t.name, t.servers, 8, 1e300, mem_gb) for t in hetero.cluster.types))
    for instance in (single, so.HeteroRound(shaped, hetero.jobs)):
        assert so.load_instance(so.save_instance(instance, tmp_path / "huge.json")) == instance
    allocation = so.Allocation.from_dict({"jobs": {"a": [{"server": 0, "gpus": 1, "cpus": 1e120, "mem_gb": 3.0}]}})
    assert so.Allocation.from_dict(json.loads(json.dumps(allocation.to_dict()))) == allocation
    saved = json.loads(so.save_instance(single, tmp_path / "plain.json").read_text())["cluster"]
    assert saved["cpus_per_server"] == 24 and isinstance(saved["cpus_per_server"], int)  # still 24, not 24.0


def test_allocation_dict_round_trip() -> None:
    data = {"jobs": {"j1": [{"server": 0, "gpus": 4, "cpus": 20, "mem_gb": 250}],
                     "j2": [{"server": 0, "gpus": 1, "cpus": 2, "mem_gb": 50},
                            {"server": 1, "gpus": 1, "cpus": 2, "mem_gb": 50}]}}
    allocation = so.Allocation.from_dict(data)
    assert allocation.to_dict() == data
    assert allocation.servers_of("j2") == (0, 1) and allocation.gpus_of("j2") == 2
    with pytest.raises(InvalidInputError, match=r"jobs\['j1'\]\[0\].gpus"):
        so.Allocation.from_dict({"jobs": {"j1": [{"server": 0, "gpus": 0, "cpus": 1, "mem_gb": 1}]}})


def test_builtin_profiles_and_their_source() -> None:
    assert len(so.model_names()) == 10
    assert "msr-fiddle/synergy" in source()
    assert sum(len(names) for names in models_by_task().values()) == 10
    assert cpu_gpu_ratios() == (3, 4, 5, 6)
    res18 = so.builtin_profile("res18")
    assert res18.throughput(3, 62.5) == 1.0 and res18.throughput(9, 62.5) == 2.4
    assert res18.throughput(3, 20) == 0.0  # below the memory grid: never over-claim
    assert model_info("res18", 4).speedup_at_best == pytest.approx(2.4 / 1.3, rel=1e-2)


def test_generator_is_deterministic_and_fills_the_cluster() -> None:
    first = so.generate_round(256, multi_gpu=True, seed=9, profile_noise=0.05)
    again = so.generate_round(256, multi_gpu=True, seed=9, profile_noise=0.05)
    assert first == again
    assert first != so.generate_round(256, multi_gpu=True, seed=10, profile_noise=0.05)
    assert int(first.gpus.sum()) == 256 and int(first.gpus.max()) <= 16
    single = so.generate_round(128, split=(0, 100, 0))
    assert len(single.jobs) == 128 and {job.model for job in single.jobs} <= set(models_by_task()["language"])
    ratio = so.generate_round(64, cpu_per_gpu=5)
    assert ratio.cluster.cpus_per_server == 40
    noisy = so.generate_round(64, profile_noise=0.1, seed=1)
    for job in noisy.jobs:  # noise keeps profiles monotone: more resources never slow a job
        assert np.all(np.diff(job.profile.tput, axis=0) >= 0) and np.all(np.diff(job.profile.tput, axis=1) >= 0)


# One test per kind of bad input: each raises the project's error naming the field and the value.


def test_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"format": "synergy-round/1", "cluster": {')
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(path)
    assert_names(error, "path", "broken.json")
    assert "malformed JSON at line 1" in str(error.value)


def test_a_lowercase_nan_is_named_where_the_parser_stopped(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"format": "synergy-round/1",\n "cluster": {"servers": nan}}')
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(path)
    assert error.value.field == "path"  # the value, a long temporary path, may be shortened in the message
    assert "line 2" in str(error.value) and "near 'nan}}'" in str(error.value)
    assert "every number must be finite" in str(error.value)


def test_nan_throughput() -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 1, "profile", "tput", 1, 0), float("nan")))
    assert_names(error, "jobs[1].profile.tput[1][0]", "nan")


def test_negative_throughput() -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 1, "profile", "tput", 2, 1), -2))
    assert_names(error, "jobs[1].profile.tput[2][1]", "-2")


def test_a_subnormal_throughput_is_refused_where_it_is_given() -> None:
    # Throughputs of 1e-310 (subnormal floats) were taken, then every solve raised a bare OverflowError in the
    # solvers' scaling and the Gavel policies' LPs ended ERROR (a tester's finding); 1e-300 solves.
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 1, "profile", "tput", 2, 1), 1e-310))
    assert_names(error, "jobs[1].profile.tput[2][1]", "1e-310")
    tiny = so.Profile(np.array([1.0, 3.0]), np.array([50.0]), np.array([[1e-300], [2e-300]]))
    instance = so.RoundInstance(so.Cluster(1, 2, 6, 100), (so.Job("a", 1, tiny), so.Job("b", 1, tiny)))
    assert so.solve_ideal(instance).objective == pytest.approx(4e-300, rel=1e-9)
    with pytest.raises(InvalidInputError, match=r"throughputs\[0\]\[1\]=1e-310"):
        PolicyProblem(np.array([[1.0, 1e-310]]), np.array([1]), np.array([1, 1]))


def test_non_increasing_axis() -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 1, "profile", "cpu_per_gpu"), [1, 6, 3]))
    assert_names(error, "jobs[1].profile.cpu_per_gpu", "[1, 6, 3]")
    assert "strictly increasing" in str(error.value)


def test_matrix_shape_not_matching_its_axes() -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 1, "profile", "tput"), [[1, 1], [1, 1]]))
    assert_names(error, "jobs[1].profile.tput", "[[1, 1], [1, 1]]")
    assert "(3 CPU x 2 memory values)" in str(error.value)


@pytest.mark.parametrize("gpus", [0, -3, 1.5, True])
def test_zero_or_negative_gpus(gpus: Any) -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 0, "gpus"), gpus))
    assert_names(error, "jobs[0].gpus", repr(gpus))


def test_unknown_model() -> None:
    with pytest.raises(UnknownNameError) as error:
        so.load_instance(edited(("jobs", 0, "model"), "resnet9000"))
    assert_names(error, "jobs[0].model", "resnet9000")
    assert "res18" in str(error.value)


def test_unknown_model_of_a_heterogeneous_round_is_named_by_its_field() -> None:
    # It was named "jobs[0].name" (the built-in profile's argument), a field the file does not have.
    data = {"format": "synergy-round/2", "cluster": {"types": [{"name": "v100", "servers": 1, "gpus_per_server": 8,
                                                        "cpus_per_server": 24, "mem_gb_per_server": 500}]},
            "jobs": [{"id": "a", "gpus": 2, "model": "resnet9000", "types": ["v100"]}]}
    with pytest.raises(UnknownNameError) as error:
        so.load_instance(data)
    assert_names(error, "jobs[0].model", "resnet9000")


def test_unknown_solver() -> None:
    with pytest.raises(UnknownNameError) as error:
        so.solve_ideal(so.load_instance(EXAMPLE), solver="gurobi")
    assert_names(error, "solver", "gurobi")
    assert "highs" in str(error.value) and "pyomo-glpk" in str(error.value)


def test_total_gpu_demand_above_the_cluster() -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 0, "gpus"), 16))
    assert_names(error, "jobs[*].gpus", "17")
    assert "16 GPUs" in str(error.value)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("cluster", "servers"), 0, "cluster.servers"),
        (("cluster", "mem_gb_per_server"), float("inf"), "cluster.mem_gb_per_server"),
        (("format",), "synergy-round/0", "format"),
        (("jobs",), {"j1": 1}, "jobs"),
    ],
)
def test_other_bad_fields(path: tuple[Any, ...], value: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(path, value))
    assert error.value.field == field


def test_missing_fields() -> None:
    data = copy.deepcopy(EXAMPLE)
    del data["cluster"]["cpus_per_server"]
    with pytest.raises(InvalidInputError, match=r"cluster\.cpus_per_server"):
        so.load_instance(data)
    data = copy.deepcopy(EXAMPLE)
    del data["jobs"][1]["profile"]["tput"]
    with pytest.raises(InvalidInputError, match=r"jobs\[1\].profile.tput"):
        so.load_instance(data)
    data = copy.deepcopy(EXAMPLE)
    del data["jobs"][0]["model"]
    with pytest.raises(InvalidInputError, match=r"jobs\[0\].model"):
        so.load_instance(data)


@pytest.mark.parametrize(
    ("field", "value"), [("arrival", "abc"), ("arrival", None), ("work", "x"), ("work", -1), ("model", ["a"])]
)
def test_bad_job_fields(field: str, value: Any) -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(("jobs", 0, field), value))
    assert error.value.field == f"jobs[0].{field}"


@pytest.mark.parametrize("source", [[1], 5, None])
def test_load_instance_needs_a_path_or_a_dictionary(source: Any) -> None:
    with pytest.raises(InvalidInputError, match="source"):
        so.load_instance(source)


def test_solver_parameters_are_checked() -> None:
    instance = so.load_instance(EXAMPLE)
    for name, value in (("time_limit", "5"), ("time_limit", -1.0), ("mip_gap", float("nan")), ("threads", 0)):
        with pytest.raises(InvalidInputError, match=name):
            so.solve_ideal(instance, **{name: value})


def test_bad_generator_arguments() -> None:
    with pytest.raises(InvalidInputError, match="gpus=100"):
        so.generate_round(100)
    with pytest.raises(InvalidInputError, match="split"):
        so.generate_round(16, split=(1, -1, 0))
    for generate in (so.generate_round, so.generate_trace):  # their sum inf: numpy's "do not sum to 1" before
        with pytest.raises(InvalidInputError, match=r"split=\(1e\+308.*finite sum"):
            generate(16, split=(1e308, 1e308, 1e308))
    with pytest.raises(InvalidInputError, match="cpu_per_gpu=7"):
        so.generate_round(16, cpu_per_gpu=7)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    with atomic_open(target) as handle:
        handle.write("new\n")
    assert target.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()  # the usual mode, not the temporary's 0600


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    ("rule", "value", "text"),
    [
        (Number(0, 1), 2, "must be a number in [0, 1]"),
        (Number(0, 1, low_open=True), 0, "must be a number in (0, 1]"),
        (Number(0, 1, high_open=True), 1, "must be a number in [0, 1)"),
        (Number(0, 1, low_open=True, high_open=True), 1.0, "must be a number in (0, 1)"),
        (Number(0, 1e9, low_open=True), 0.0, "must be a number in (0, 1e+09]"),
        (Number(high=1, high_open=True), 1, "must be a number < 1"),
        (POSITIVE, 0, "must be a number > 0"),
        (NON_NEGATIVE, -1, "must be a number >= 0"),
    ],
)
def test_a_range_is_stated_with_its_open_and_closed_ends(rule: Number, value: Any, text: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(text)):
        rule("x", value)


def test_open_ends_accept_what_is_inside() -> None:
    assert Number(0, 1, high_open=True)("x", np.float32(0.5)) == 0.5
    assert Number(0, 1, low_open=True, high_open=True)("x", 1 - 1e-12) == 1 - 1e-12
    assert NON_NEGATIVE("x", np.int64(0)) == 0.0 and POSITIVE("x", 1e-300) == 1e-300


@pytest.mark.parametrize("types", [None, {"k80": 1, "v100": 1}])
@pytest.mark.parametrize("name", sorted(so.MECHANISMS))
def test_a_misspelt_mechanism_option_lists_spend_spare_and_the_closest(name: str, types: dict[str, int] | None
                                                                       ) -> None:
    # spend_spare, every mechanism's option, was missing from the list ("options: none" for proportional).
    instance = so.generate_round(gpus=16, types=types)
    with pytest.raises(InvalidInputError, match=r"options\.spendspare.*spend_spare.*did you mean 'spend_spare'"):
        so.run_mechanism(instance, name, spendspare=True)


def test_the_documented_heterogeneous_round_file_loads() -> None:
    # docs/inputs.md shows a synergy-round/2 file in full (a usability review found none to copy).
    text = (Path(__file__).parents[1] / "docs" / "inputs.md").read_text()
    example = text.split("<!-- synergy-round/2 example -->", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    instance = so.load_instance(json.loads(example))
    assert [job.id for job in instance.jobs] == ["a", "b"] and instance.cluster.names == ("k80", "v100")
    assert instance.floor("b") == pytest.approx(1.0)  # 3 CPUs and 62.5 GB per GPU on the v100
    assert so.evaluate(instance, so.run_mechanism(instance, "tune")).valid
