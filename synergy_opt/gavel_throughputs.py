"""Gavel's measured throughputs of its job types on each GPU type (Narayanan et al., OSDI '20;
github.com/stanford-futuredata/gavel, MIT License): the shipped copy (``synergy_opt/data/gavel/``) or a file in
Gavel's own form, read once and checked. Gavel's traces (:mod:`synergy_opt.sim.gavel`) and the built-in models'
speeds across GPU types (:mod:`synergy_opt.profiles`) both read them here."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.files import read_text
from synergy_opt.validation import Integer, parse_json, path

UNCONSOLIDATED = "_unconsolidated"
_GAVEL_KEY = re.compile(r"^\('(?P<job_type>.*)', (?P<scale>\d+)\)$")
_SCALE = Integer(1)


@dataclass(frozen=True)
class GavelThroughputs:
    """Steps per second of Gavel's job types: ``steps_per_s[gpu_type][(job_type, scale_factor)]``."""

    steps_per_s: Mapping[str, Mapping[tuple[str, int], float]]
    source: str = ""

    @property
    def types(self) -> tuple[str, ...]:
        """Every GPU type of the file."""
        return tuple(self.steps_per_s)

    @property
    def consolidated_types(self) -> tuple[str, ...]:
        """The types that are not ``*_unconsolidated`` (a job spread over servers): a trace's default types."""
        return tuple(name for name in self.steps_per_s if not name.endswith(UNCONSOLIDATED))

    def get(self, gpu_type: str, job_type: str, scale_factor: int) -> float | None:
        """The throughput (0: the job cannot run on that type), or None where the file has no entry."""
        return self.steps_per_s.get(gpu_type, {}).get((job_type, scale_factor))


def shipped_file(name: str) -> Path:
    """A file of the shipped copy of Gavel's data (``synergy_opt/data/gavel/``)."""
    return Path(str(resources.files("synergy_opt").joinpath("data/gavel", name)))


def load_gavel_throughputs(source: str | os.PathLike[str] | None = None) -> GavelThroughputs:
    """Gavel's isolated throughputs: the shipped copy (None), or a file in either form.

    Gavel's own form (``simulation_throughputs.json``): ``{gpu_type: {"('job type', scale)": {"null": steps/s,
    ...}}}`` (co-located entries ignored). The shipped form: ``{"source": ..., "throughputs": {gpu_type:
    {job_type: {"scale": steps/s}}}}``. Every value must be a finite number >= 0.
    """
    where = shipped_file("isolated_throughputs.json") if source is None else path("throughputs", source)
    data = parse_json(("throughputs", str(where)), read_text(where, field="throughputs"))
    if not isinstance(data, Mapping) or not data:
        raise InvalidInputError("throughputs", str(where), "must be a JSON object of GPU types")
    if "throughputs" in data:
        table = _shipped_form(data["throughputs"])
        label = str(data.get("source", where.name))
    else:
        table = _gavel_form(data)
        label = where.name
    return GavelThroughputs(table, label)


def _shipped_form(raw: Any) -> dict[str, dict[tuple[str, int], float]]:
    table: dict[str, dict[tuple[str, int], float]] = {}
    for gpu_type, jobs in _object("throughputs", raw).items():
        entries: dict[tuple[str, int], float] = {}
        for job_type, scales in _object(f"throughputs.{gpu_type}", jobs).items():
            for scale, value in _object(f"throughputs.{gpu_type}.{job_type}", scales).items():
                field = f"throughputs.{gpu_type}.{job_type}.{scale}"
                entries[(job_type, _scale(field, scale))] = _steps_per_s(field, value)
        table[gpu_type] = entries
    return table


def _gavel_form(raw: Mapping[str, Any]) -> dict[str, dict[tuple[str, int], float]]:
    table: dict[str, dict[tuple[str, int], float]] = {}
    for gpu_type, jobs in raw.items():
        entries: dict[tuple[str, int], float] = {}
        for key, combos in _object(gpu_type, jobs).items():
            match = _GAVEL_KEY.match(key)
            if match is None:
                raise InvalidInputError(f"{gpu_type}.{key}", key, "a Gavel job key is \"('job type', scale)\"")
            combos = _object(f"{gpu_type}.{key}", combos)
            if "null" in combos:
                entries[(match["job_type"], int(match["scale"]))] = _steps_per_s(f"{gpu_type}.{key}.null",
                                                                                  combos["null"])
        table[gpu_type] = entries
    return table


def _object(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(field, value, "must be a JSON object")
    return value


def _scale(field: str, value: str) -> int:
    try:
        return int(_SCALE(field, int(value)))
    except ValueError:
        raise InvalidInputError(field, value, "a scale factor is a whole number of GPUs >= 1") from None


def _steps_per_s(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidInputError(field, value, "a throughput is a finite number of steps per second >= 0")
    return float(value)
