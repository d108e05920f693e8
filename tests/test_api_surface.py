"""What a user at a prompt sees: every public name in ``dir(synergy_opt)`` (tab completion), and results that are
tables offer ``.to_frame()``, each row equal to the result it came from."""

from __future__ import annotations

import pandas as pd
import pytest

import synergy_opt as so


def test_dir_lists_every_public_name_even_those_loaded_on_first_use() -> None:
    names = dir(so)
    assert set(so.__all__) <= set(names)
    assert {"simulate", "generate_trace", "load_trace", "save_trace", "SimResult", "Trace"} <= set(names)
    for name in so.__all__:
        assert getattr(so, name) is not None, name


def test_results_that_are_tables_offer_to_frame() -> None:
    instance = so.load_instance("instances/paper_example.json")
    ideal = so.solve_ideal(instance)
    frame = ideal.to_frame()
    assert list(frame.index) == [job.id for job in instance.jobs]
    for job_id, config in ideal.configs.items():
        assert frame.loc[job_id, "throughput"] == config.throughput and frame.loc[job_id, "cpus"] == config.cpus
    allocation = so.run_mechanism(instance, "tune")
    placements = allocation.to_frame()
    assert len(placements) == sum(len(parts) for parts in allocation.jobs.values())
    assert placements.groupby("job")["gpus"].sum().to_dict() == {job.id: job.gpus for job in instance.jobs}
    evaluation = so.evaluate(instance, allocation)
    scores = evaluation.to_frame()
    assert scores["throughput"].sum() == pytest.approx(evaluation.objective)
    assert bool(scores["meets_floor"].all()) and not scores["split"].any()
    result = so.simulate(so.generate_trace(jobs=6, load=0.5, seed=1), so.Cluster(2), mechanism="tune")
    assert isinstance(result.to_frame(), pd.DataFrame) and result.to_frame().equals(result.jobs)
