"""Argument types shared by the command lines (``python -m synergy_opt.bench``, ``python -m synergy_opt.sim``).

Each function turns one flag's text into its value or raises ``argparse.ArgumentTypeError``, which
:class:`~synergy_opt.cli.errors.OneLineParser` reports as one line with exit code 2. Generator arguments are
checked by :func:`synergy_opt.generate_round`'s own rules, so a flag accepts exactly what the function does.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import generate_round
from synergy_opt.validation import check_arguments


def int_list(text: str) -> list[int]:
    """``"1,2,5"`` as ``[1, 2, 5]``."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def generator_value(name: str, value: Any) -> Any:
    """``value`` by generate_round's own rule for its argument ``name``, or an argparse error."""
    try:
        return check_arguments(generate_round, **{name: value})[name]
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def gpu_sizes(text: str) -> list[int]:
    """Cluster sizes in GPUs, comma-separated multiples of 8."""
    sizes = int_list(text)
    if not sizes:
        raise argparse.ArgumentTypeError(f"{text!r} names no GPU count")
    return [generator_value("gpus", size) for size in sizes]


def seeds(text: str) -> list[int]:
    """One number is a count (seeds 0..N-1); a comma-separated list names the seeds (``42,`` is seed 42)."""
    values = int_list(text)
    if not values or any(value < 0 for value in values) or ("," not in text and values[0] < 1):
        raise argparse.ArgumentTypeError(f"{text!r}: give a seed count >= 1 or a list of seeds >= 0 (e.g. 0,1,5)")
    return list(range(values[0])) if "," not in text else values


def split(text: str) -> tuple[float, float, float]:
    """A workload split, three percentages ``image,language,speech``."""
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not three percentages (image,language,speech)") from None
    result: tuple[float, float, float] = generator_value("split", values)
    return result


def profile_noise(text: str) -> float:
    """Per-job log-normal noise on each throughput matrix."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    noise: float = generator_value("profile_noise", value)
    return noise


def names_of(kind: str, known: Sequence[str]) -> Callable[[str], list[str]]:
    """A parser of comma-separated names among ``known`` (or ``all``), duplicates dropped, order kept."""

    def parse(text: str) -> list[str]:
        if text == "all":
            return list(known)
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [name for name in names if name not in known]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {unknown[0] if unknown else text!r}; choose from {', '.join(known)} or 'all'"
            )
        return list(dict.fromkeys(names))

    return parse


def seconds_or_none(text: str) -> float | None:
    """A number of seconds > 0; ``0`` or ``none`` turns the limit off."""
    if text.lower() in ("none", "0"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0 (or 'none')")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return value
