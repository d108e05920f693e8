"""Heterogeneous clusters, stage 1 (issue 20): the data model, round files of format 2, and the evaluator.

Checked: server types and their numbering, jobs with matrices per GPU type and a baseline, the round's rules
(types known, GPUs of one type, baseline demand within each type), floors at the baseline type's share,
the split of a type-fixed round into per-type homogeneous rounds and back, files of both formats, and the
evaluator (per-server capacity by type, one type per job, usable types only, per-type totals). A one-type
round scores every mechanism's allocation exactly as its homogeneous round does.
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synergy_opt as so
from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.evaluation import InvalidAllocationWarning
from synergy_opt.hetero import (
    HeteroCluster,
    HeteroJob,
    HeteroRound,
    ServerType,
    join_allocations,
    normalise,
    parse_type_counts,
    split_allocation,
)
from synergy_opt.io import round_instance
from synergy_opt.profiles import builtin_type_profile

SLOW = so.Profile([1, 3, 6], [25, 50], [[0.2, 0.4], [0.4, 0.6], [0.5, 0.6]])
FAST = so.Profile([1, 3, 6], [25, 50], [[0.2, 0.4], [0.5, 1.0], [0.8, 2.0]])
# k80: 1 server of 4 GPUs (3 CPUs, 50 GB per GPU); v100: 2 servers of 4 GPUs (6 CPUs, 50 GB per GPU).
CLUSTER = HeteroCluster((ServerType("k80", 1, 4, 12, 200), ServerType("v100", 2, 4, 24, 200)))


def job(job_id: str, gpus: int, baseline: str = "v100", types: tuple[str, ...] = ("k80", "v100")) -> HeteroJob:
    profiles = {"k80": SLOW, "v100": FAST}
    return HeteroJob(job_id, gpus, {kind: profiles[kind] for kind in types}, baseline)


ROUND = HeteroRound(CLUSTER, (job("a", 2, "k80"), job("b", 4), job("c", 1, types=("v100",))))


def allocation(**jobs: list[tuple[int, int, float, float]]) -> so.Allocation:
    return so.Allocation({name: tuple(so.Placement(*part) for part in parts) for name, parts in jobs.items()})


def quiet(instance: Any, alloc: so.Allocation) -> so.Evaluation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidAllocationWarning)
        return so.evaluate(instance, alloc)


def test_servers_are_numbered_type_after_type() -> None:
    assert CLUSTER.names == ("k80", "v100") and CLUSTER.reference == "v100"
    assert CLUSTER.servers == 3 and CLUSTER.total_gpus == 12
    assert CLUSTER.offsets.tolist() == [0, 1, 3]
    assert CLUSTER.server_range("v100") == range(1, 3) and CLUSTER.type_of_server(2) == "v100"
    assert CLUSTER.capacity.tolist() == [[4, 12, 200], [4, 24, 200], [4, 24, 200]]
    assert CLUSTER["k80"].cpu_per_gpu == 3 and CLUSTER["v100"].cpu_per_gpu == 6
    assert CLUSTER["k80"].cluster == so.Cluster(1, 4, 12, 200)


def test_cluster_from_counts_and_its_reference() -> None:
    cluster = HeteroCluster.of("k80:4,p100:2,v100:1")
    assert [(t.name, t.servers) for t in cluster.types] == [("k80", 4), ("p100", 2), ("v100", 1)]
    assert cluster.reference == "v100" and cluster.total_gpus == 56
    assert HeteroCluster.of({"k80": 1, "p100": 1}).reference == "k80"  # no v100: the first type
    assert HeteroCluster.of({"k80": 1, "p100": 1}, reference="p100").reference == "p100"
    assert HeteroCluster.homogeneous(so.Cluster(3, 4, 12, 100)).types == (ServerType("v100", 3, 4, 12, 100),)
    assert parse_type_counts("types", "k80:4, v100:8") == {"k80": 4, "v100": 8}


@pytest.mark.parametrize(("make", "field"), [
    (lambda: HeteroCluster(()), "types"),
    (lambda: HeteroCluster((ServerType("k80", 1), ServerType("k80", 2))), "types[1].name"),
    (lambda: HeteroCluster((ServerType("k80", 1),), reference="v100"), "reference"),
    (lambda: HeteroCluster(("k80",)), "types[0]"),  # type: ignore[arg-type]
    (lambda: ServerType("k 80", 1), "name"),
    (lambda: ServerType("", 1), "name"),
    (lambda: ServerType("k80", 0), "servers"),
    (lambda: ServerType("k80", 1, 8, float("nan")), "cpus_per_server"),
    (lambda: HeteroCluster.of("k80=4"), "servers"),
    (lambda: HeteroCluster.of("k80:4,k80:2"), "servers"),
    (lambda: HeteroCluster.of({"k80": -1}), "servers['k80'].servers"),
])
def test_bad_clusters_are_named(make: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        make()
    assert error.value.field == field


def test_a_job_has_matrices_per_type_and_a_baseline() -> None:
    one = HeteroJob("x", 1, {"k80": SLOW})
    assert one.baseline == "k80" and one.types == ("k80",)
    two = job("y", 2, "k80")
    assert two.on("v100") == so.Job("y", 2, FAST)
    assert two.fixed_to("v100").profiles == {"v100": FAST} and two.fixed_to("v100").baseline == "v100"
    assert two.limited_to(["k80"]).baseline == "k80"
    assert len({two, job("y", 2, "k80"), two.fixed_to("v100")}) == 2  # hashable, by value, as a Job is
    with pytest.raises(InvalidInputError, match="needs a baseline"):
        HeteroJob("z", 1, {"k80": SLOW, "v100": FAST})
    with pytest.raises(UnknownNameError) as error:
        HeteroJob("z", 1, {"k80": SLOW}, "v100")
    assert error.value.field == "baseline"
    with pytest.raises(InvalidInputError) as bad:
        HeteroJob("z", 0, {"k80": SLOW})
    assert bad.value.field == "gpus"
    with pytest.raises(InvalidInputError) as bad:
        HeteroJob("z", 1, {})
    assert bad.value.field == "profiles"
    with pytest.raises(InvalidInputError) as bad:
        HeteroJob("z", 1, {"k80": [[1.0]]})  # type: ignore[dict-item]
    assert bad.value.field == "profiles['k80']"


@pytest.mark.parametrize(("jobs", "field", "text"), [
    ((job("a", 1), job("a", 1)), "jobs[1].id", "duplicate"),
    ((HeteroJob("a", 1, {"p100": SLOW}),), "jobs[0].profiles", "p100"),
    ((job("a", 5),), "jobs[0].gpus", "type 'k80'"),  # a 5-GPU job cannot use the 4 k80 GPUs
    ((job("a", 3, "k80"), job("b", 2, "k80")), "jobs[*].baseline", "5 GPUs"),
])
def test_bad_rounds_are_named(jobs: tuple[HeteroJob, ...], field: str, text: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        HeteroRound(CLUSTER, jobs)
    assert error.value.field == field and text in str(error.value)


def test_floors_are_at_the_baseline_types_share() -> None:
    # a: baseline k80 (3 CPUs, 50 GB per GPU) on SLOW; b, c: baseline v100 (6 CPUs, 50 GB) on FAST.
    assert ROUND.floors.tolist() == [0.6, 2.0, 2.0]
    assert ROUND.floor("a") == SLOW.throughput(3, 50)
    assert ROUND.reference_throughputs.tolist() == [2.0, 2.0, 2.0]  # every job's FAST at v100's share
    assert not ROUND.type_fixed and ROUND.at_baseline().type_fixed
    k80_only = HeteroRound(CLUSTER, (HeteroJob("a", 1, {"k80": SLOW}),))
    assert k80_only.reference_throughputs.tolist() == [1.0]  # no v100 matrix: the unit itself


def test_normalise_divides_by_the_reference_share() -> None:
    raw = {"k80": so.Profile([1, 6], [50], [[2.0], [4.0]]), "v100": so.Profile([1, 6], [50], [[2.0], [8.0]])}
    unit = normalise(raw, CLUSTER["v100"])  # 6 CPUs, 50 GB per GPU: 8 samples/s
    assert unit["k80"].tput.tolist() == [[0.25], [0.5]] and unit["v100"].tput.tolist() == [[0.25], [1.0]]
    with pytest.raises(UnknownNameError):
        normalise({"k80": SLOW}, CLUSTER["v100"])


def test_a_type_fixed_round_splits_into_homogeneous_rounds() -> None:
    fixed = ROUND.with_types({"a": "k80", "b": "v100", "c": "v100"})
    assert fixed.floors.tolist() == [0.6, 2.0, 2.0]
    rounds = fixed.per_type()
    assert rounds["k80"] == so.RoundInstance(so.Cluster(1, 4, 12, 200), (so.Job("a", 2, SLOW),),
                                             {"gpu_type": "k80"})
    assert [j.id for j in rounds["v100"].jobs] == ["b", "c"] and rounds["v100"].cluster == so.Cluster(2, 4, 24, 200)
    # Each job's floor in its type's round is its floor in the heterogeneous round (its type is its baseline).
    assert rounds["v100"].floors.tolist() == [2.0, 2.0]
    with pytest.raises(InvalidInputError, match="type-fixed"):
        ROUND.per_type()
    with pytest.raises(InvalidInputError) as error:
        ROUND.with_types(["v100", "v100", "k80"])  # c cannot use k80
    assert error.value.field == "choice[2].types"
    # A move of b to k80 leaves no room: its 4 GPUs and a's 2 exceed the 4 k80 GPUs.
    with pytest.raises(InvalidInputError, match="baseline"):
        ROUND.with_types(["k80", "k80", "v100"])


def test_the_rounds_of_chosen_types_are_the_type_fixed_rounds() -> None:
    """per_type_of(types) without the type-fixed round between: the same rounds, checked the same."""
    choice = ["k80", "v100", "v100"]
    assert ROUND.per_type_of(choice) == ROUND.with_types(choice).per_type()
    assert ROUND.per_type_of(ROUND.baselines) == ROUND.at_baseline().per_type()
    with pytest.raises(InvalidInputError) as error:
        ROUND.per_type_of(["v100", "v100", "k80"])  # c cannot use k80
    assert error.value.field == "types[2].gpu_type"
    with pytest.raises(UnknownNameError):
        ROUND.per_type_of(["k80", "a100", "v100"])
    with pytest.raises(InvalidInputError, match="one type per job"):
        ROUND.per_type_of(["k80"])
    with pytest.raises(InvalidInputError, match="exceeds"):  # b's 4 GPUs and a's 2 exceed the 4 k80 GPUs
        ROUND.per_type_of(["k80", "k80", "v100"])


def test_per_type_allocations_join_and_split() -> None:
    local = {"k80": allocation(a=[(0, 2, 6, 100)]), "v100": allocation(b=[(1, 4, 24, 200)], c=[(0, 1, 6, 50)])}
    whole = join_allocations(CLUSTER, local)
    assert whole.servers_of("a") == (0,) and whole.servers_of("b") == (2,) and whole.servers_of("c") == (1,)
    assert split_allocation(CLUSTER, whole) == local
    with pytest.raises(InvalidInputError, match="one type"):
        split_allocation(CLUSTER, allocation(b=[(0, 2, 6, 100), (1, 2, 12, 100)]))


def test_the_evaluator_reads_each_jobs_matrix_of_its_servers_type() -> None:
    result = quiet(ROUND, allocation(
        a=[(1, 2, 12, 100)],  # a on v100 with 6 CPUs, 50 GB per GPU: FAST -> 2.0 (its floor, on k80, is 0.6)
        b=[(2, 4, 24, 200)],  # 6 CPUs, 50 GB per GPU: 2.0
        c=[(0, 1, 3, 50)],  # c on k80, a type it cannot use
    ))
    assert {j: s.throughput for j, s in result.jobs.items()} == {"a": 2.0, "b": 2.0, "c": 0.0}
    assert [s.gpu_type for s in result.jobs.values()] == ["v100", "v100", "k80"]
    assert result.problems == ("job 'c' runs on type k80, which it cannot use (v100)",)
    split = quiet(ROUND, allocation(b=[(0, 2, 6, 100), (1, 2, 12, 100)]))
    assert split.jobs["b"].throughput == 0.0 and "all GPUs of a job are of one type" in split.problems[0]


def test_capacity_is_per_server_type() -> None:
    # 12 CPUs fit a v100 server (24) but not the k80 server (12).
    ok = so.evaluate(ROUND, allocation(a=[(1, 2, 24, 100)]))
    assert ok.valid and ok.jobs["a"].throughput == 2.0
    over = quiet(ROUND, allocation(a=[(0, 2, 24, 100)]))
    assert over.problems == ("server 0 (k80) uses 24 cpus of 12",)


def test_totals_per_type_add_up() -> None:
    result = so.evaluate(ROUND, allocation(a=[(0, 2, 6, 100)], b=[(1, 4, 24, 200)], c=[(2, 1, 6, 50)]))
    rows = result.by_type()
    assert rows["k80"]["objective"] == SLOW.throughput(3, 50) and rows["k80"]["jobs_placed"] == 1
    assert rows["v100"]["objective"] == 4.0 and rows["v100"]["jobs_placed"] == 2
    assert sum(row["objective"] for row in rows.values()) == pytest.approx(result.objective)
    assert rows["k80"]["gpu_util"] == 0.5 and rows["v100"]["cpu_util"] == 30 / 48
    assert result.utilisation["gpus"] == 7 / 12 and result.floors_violated == ()
    with pytest.raises(InvalidInputError):
        so.evaluate(so.generate_round(16), so.Allocation({})).by_type()


def test_floors_violated_per_type() -> None:
    # b on v100 at 3 CPUs and 25 GB per GPU, under its floor; a on k80 at its share (its floor): one violation,
    # on v100 (a mutation counting none per type survived the suite).
    result = so.evaluate(ROUND, allocation(a=[(0, 2, 6, 100)], b=[(1, 4, 12, 100)]))
    assert result.floors_violated == ("b",)
    rows = result.by_type()
    assert rows["v100"]["floors_violated"] == 1 and rows["k80"]["floors_violated"] == 0


def test_a_job_below_the_share_of_the_type_it_runs_on_breaks_the_models_floor_rule() -> None:
    # a's floor is SLOW at the k80 share (3 CPUs, 50 GB): 0.6. On a v100 at 3 CPUs per GPU FAST gives 1.0, above
    # that floor, but below the v100 share's 2.0 (H6): every model rules it out, the evaluator says so.
    result = so.evaluate(ROUND, allocation(a=[(1, 2, 6, 100)], b=[(2, 4, 24, 200)]))
    a = result.jobs["a"]
    assert (a.throughput, a.floor, a.type_floor) == (1.0, 0.6, 2.0)
    assert a.meets_floor and not a.meets_type_floor
    assert result.floors_violated == () and result.type_floors_violated == ("a",)
    assert result.by_type()["v100"]["type_floors_violated"] == 1
    frame = result.to_frame()
    assert frame.loc["a", "type_floor"] == 2.0 and not frame.loc["a", "meets_type_floor"]
    # At the v100 share it keeps both.
    kept = so.evaluate(ROUND, allocation(a=[(1, 2, 12, 100)]))
    assert kept.jobs["a"].meets_type_floor and kept.type_floors_violated == ()
    # (H0): a type whose share is below the floor, though more CPUs lift the job above it.
    wide = so.Profile([1, 6, 12], [25, 50], [[0.1, 0.1], [0.5, 0.5], [1.5, 1.5]])
    d = HeteroJob("d", 1, {"k80": FAST, "v100": wide}, "k80")  # floor FAST(3, 50) = 1.0; v100 share 0.5
    moved = so.evaluate(HeteroRound(CLUSTER, (d,)), allocation(d=[(1, 1, 12, 50)]))
    score = moved.jobs["d"]
    assert (score.throughput, score.floor, score.type_floor) == (1.5, 1.0, 0.5)
    assert score.meets_floor and not score.meets_type_floor and moved.type_floors_violated == ("d",)
    # A job on a type it cannot use breaks the rule too, even of floor 0 (no model allows it).
    above_share = so.Profile([4, 6], [25, 50], [[1.0, 1.0], [2.0, 2.0]])  # k80's share of 3 CPUs is below it
    z = HeteroJob("z", 1, {"k80": above_share}, "k80")
    wrong = quiet(HeteroRound(CLUSTER, (z,)), allocation(z=[(1, 1, 6, 50)]))
    assert wrong.jobs["z"].floor == 0.0 and wrong.jobs["z"].meets_floor and wrong.floors_violated == ()
    assert np.isnan(wrong.jobs["z"].type_floor) and wrong.type_floors_violated == ("z",)
    # On a homogeneous round the rule is the floor.
    plain = so.generate_round(16, seed=1)
    starved = so.evaluate(plain, so.Allocation({plain.jobs[0].id: (so.Placement(0, plain.jobs[0].gpus, 0, 0),)}))
    assert starved.type_floors_violated == starved.floors_violated == (plain.jobs[0].id,)


@pytest.mark.parametrize("case", [dict(gpus=64, seed=1), dict(gpus=64, multi_gpu=True, profile_noise=0.05, seed=2)])
def test_a_one_type_round_scores_exactly_as_its_homogeneous_round(case: dict[str, Any]) -> None:
    instance = so.generate_round(**case)
    one_type = HeteroRound.homogeneous(instance)
    assert np.array_equal(one_type.floors, instance.floors)
    for name in ("proportional", "tune", "greedy"):
        alloc = so.run_mechanism(instance, name)
        plain, typed = so.evaluate(instance, alloc), so.evaluate(one_type, alloc)
        assert typed.objective == plain.objective and typed.problems == plain.problems
        assert [(s.throughput, s.floor) for s in typed.jobs.values()] == [
            (s.throughput, s.floor) for s in plain.jobs.values()]
        assert typed.utilisation == plain.utilisation


def test_round_files_of_format_two_round_trip(tmp_path: Path) -> None:
    model_job = HeteroJob("m", 2, {"v100": so.builtin_profile("res18"), "k80": SLOW}, "v100", model="res18")
    instance = HeteroRound(CLUSTER, (*ROUND.jobs, model_job), {"seed": 3})
    path = so.save_instance(instance, tmp_path / "hetero.json")
    saved = json.loads(path.read_text())
    assert saved["format"] == "synergy-round/2" and saved["cluster"]["reference"] == "v100"
    # The built-in matrix on v100 is saved by name, the other inline.
    assert saved["jobs"][3]["types"] == ["v100", "k80"] and list(saved["jobs"][3]["profiles"]) == ["k80"]
    again = so.load_instance(path)
    assert again == instance and isinstance(again, HeteroRound)
    assert so.load_instance(saved) == instance
    # A field the format does not have is refused by name (a misspelt optional one took its default).
    for path, field in (((), "jobs_"), (("cluster",), "cluster.referense"),
                        (("cluster", "types", 0), "cluster.types[0].gpus"), (("jobs", 3), "jobs[3].basline")):
        broken = copy.deepcopy(saved)
        where = broken
        for step in path:
            where = where[step]
        where[field.rsplit(".", 1)[-1]] = 1
        with pytest.raises(InvalidInputError, match=rf"{re.escape(field)}=1: unknown field"):
            so.load_instance(broken)

def test_a_round_file_puts_built_in_models_in_its_reference_types_unit(tmp_path: Path) -> None:
    # A named built-in model on a k80-reference cluster was read in the v100's unit (1 at 3 CPUs, 62.5 GB per GPU
    # on a v100), not the round's (1 at the k80's share), while generate_round divided its jobs: two units in one
    # round. It is divided now, as generate_round divides, and such a file round-trips by name.
    cluster = HeteroCluster((ServerType("k80", 1, 4, 16, 200), ServerType("v100", 1, 8, 24, 500)), "k80")
    data = {"format": "synergy-round/2", "cluster": cluster.to_dict(),
            "jobs": [{"id": "a", "gpus": 2, "model": "res18", "types": ["k80", "v100"], "baseline": "k80"},
                     {"id": "b", "gpus": 8, "model": "res18", "types": ["v100"]}]}
    instance = so.load_instance(data)
    assert isinstance(instance, HeteroRound)
    unit = builtin_type_profile("res18", "k80", 4).throughput(4, 50)  # the k80's share: 4 CPUs, 50 GB per GPU
    assert 0 < unit < 0.9  # res18 on a k80 is far below the v100's reference point: the two units differ
    assert instance.jobs[0].profiles["k80"].throughput(4, 50) == pytest.approx(1.0, rel=1e-12)
    v100 = so.builtin_profile("res18")  # a job too large for the reference type is divided by the same unit
    for job in instance.jobs:
        assert np.allclose(job.profiles["v100"].tput, v100.tput / unit, rtol=1e-15, atol=0)
    saved = json.loads(so.save_instance(instance, tmp_path / "k80.json").read_text())
    assert all("profiles" not in job for job in saved["jobs"])  # named, not written out
    assert so.load_instance(saved) == instance
    # generate_round's noise-free jobs on a k80 reference are the same matrices: its files name them too.
    generated = so.generate_round(types={"k80": 1, "p100": 1}, seed=0)
    assert isinstance(generated, HeteroRound) and generated.cluster.reference == "k80"
    saved = json.loads(so.save_instance(generated, tmp_path / "generated.json").read_text())
    assert all("profiles" not in job for job in saved["jobs"])
    assert so.load_instance(saved) == generated
    # A reference type with no built-in matrix has no unit to put a named model in: the field is named.
    custom = HeteroCluster((ServerType("a100", 1, 8, 48, 800), ServerType("v100", 1, 8, 24, 500)), "a100")
    with pytest.raises(InvalidInputError, match=r"jobs\[0\]\.model=.*'a100' has no built-in matrix"):
        so.load_instance({**data, "cluster": custom.to_dict(), "jobs": [data["jobs"][1]]})


HETERO: dict[str, Any] = {
    "format": "synergy-round/2",
    "cluster": {"types": [{"name": "k80", "servers": 1, "gpus_per_server": 4, "cpus_per_server": 12,
                           "mem_gb_per_server": 200},
                          {"name": "v100", "servers": 1, "gpus_per_server": 8, "cpus_per_server": 24,
                           "mem_gb_per_server": 500}]},
    "jobs": [{"id": "j1", "gpus": 4, "model": "res18", "types": ["v100"]},
             {"id": "j2", "gpus": 1, "baseline": "k80", "types": ["k80", "v100"],
              "profiles": {"k80": SLOW.to_dict(), "v100": FAST.to_dict()}}],
}


def edited(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(HETERO)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


def test_format_two_reads_built_in_matrices_by_name() -> None:
    instance = so.load_instance(HETERO)
    assert isinstance(instance, HeteroRound) and instance.cluster.reference == "v100"
    assert instance.jobs[0].profiles["v100"] == so.builtin_profile("res18") and instance.jobs[0].baseline == "v100"
    assert instance.floors.tolist() == [1.0, SLOW.throughput(3, 50)]


@pytest.mark.parametrize(("path", "value", "field"), [
    (("cluster", "types"), None, "cluster.types"),
    (("cluster", "types", 0, "servers"), KeyError, "cluster.types[0].servers"),
    (("cluster", "types", 1, "name"), "k80", "cluster.types[1].name"),
    (("cluster", "reference"), "a100", "cluster.reference"),
    (("jobs", 0, "types"), KeyError, "jobs[0].types"),
    (("jobs", 0, "types"), [], "jobs[0].types"),
    (("jobs", 0, "types"), ["a100"], "jobs[0].types"),
    (("jobs", 0, "types"), ["v100", "v100"], "jobs[0].types"),
    (("jobs", 1, "baseline"), KeyError, "jobs[1].baseline"),
    (("jobs", 1, "profiles", "k80", "tput", 1, 0), float("nan"), "jobs[1].profiles.k80.tput[1][0]"),
    (("jobs", 1, "profiles", "k80", "tput"), KeyError, "jobs[1].profiles.k80.tput"),
    (("jobs", 1, "types"), ["k80"], "jobs[1].profiles"),  # a matrix for a type the job does not list
    (("jobs", 1, "profiles"), {}, "jobs[1].model"),  # no matrix and no model for its types
    (("jobs", 0, "gpus"), 9, "jobs[0].gpus"),  # 9 GPUs: more than any type has
    (("format",), "synergy-round/3", "format"),
])
def test_bad_format_two_fields_are_named(path: tuple[Any, ...], value: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(edited(path, value))
    assert error.value.field == field


def test_a_built_in_model_on_a_type_without_built_in_matrices_names_the_type() -> None:
    data = edited(("cluster", "types", 0, "name"), "a100")
    data["jobs"][0]["types"] = ["v100", "a100"]
    with pytest.raises(InvalidInputError) as error:
        so.load_instance(data)
    assert error.value.field == "jobs[0].types[1]" and error.value.value == "a100"
    assert "res18" in str(error.value) and "profiles.a100" in str(error.value)


def test_format_one_still_loads_and_homogeneous_code_refuses_a_hetero_round() -> None:
    old = so.load_instance("instances/paper_example.json")
    assert isinstance(old, so.RoundInstance)
    with pytest.raises(InvalidInputError, match="homogeneous round") as error:
        round_instance("instance", ROUND)
    assert error.value.field == "instance"
    with pytest.raises(InvalidInputError, match="homogeneous round"):
        so.build_ideal(ROUND)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["k80:²", "k80:٣", "k80:１"])
def test_type_counts_take_ascii_digits_only(value: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_type_counts("types", value)
    assert caught.value.field == "types"
