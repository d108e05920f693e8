"""Argument types shared by the command lines (``python -m synergy_opt.bench``, ``python -m synergy_opt.sim``).

Each function turns one flag's text into its value or raises ``argparse.ArgumentTypeError``, which
:class:`~synergy_opt.cli.errors.OneLineParser` reports as one line with exit code 2. Generator arguments are
checked by :func:`synergy_opt.generate_round`'s own rules, so a flag accepts exactly what the function does.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any

from synergy_opt.errors import InvalidInputError
from synergy_opt.generate import generate_round
from synergy_opt.validation import MAX_SEED, MAX_TIME_LIMIT, check_arguments

# The stated bounds on what a flag expands to (docs/inputs.md, "Command lines and experiment files").
MAX_LIST_VALUES = 1000  # values in one comma-separated flag (or one list of an experiment file)
MAX_SEED_COUNT = 1000  # --seeds N runs seeds 0..N-1
MAX_FLAG_CHARS = 100_000  # the text of one flag's value


def items(text: str, separator: str = ",") -> list[str]:
    """The parts of a comma-separated flag, at most ``MAX_LIST_VALUES`` of them; one trailing comma is allowed
    (``--seeds 42,`` is a list of one), an empty part elsewhere is an error (``8,,16`` was read as ``8,16``)."""
    if len(text) > MAX_FLAG_CHARS:
        raise argparse.ArgumentTypeError(f"{text[:20]!r}...: {len(text)} characters; the limit is {MAX_FLAG_CHARS}")
    if not text.strip():
        return []  # the caller says what it names none of
    parts = [part.strip() for part in text.split(separator)]
    if len(parts) > 1 and not parts[-1]:
        parts.pop()
    if "" in parts:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} has an empty item")
    if len(parts) > MAX_LIST_VALUES:
        raise argparse.ArgumentTypeError(f"{len(parts)} values; at most {MAX_LIST_VALUES} in one flag")
    return parts


def int_list(text: str) -> list[int]:
    """``"1,2,5"`` as ``[1, 2, 5]`` (ASCII digits only: ``int()`` would also read full-width and other digits)."""
    parts = items(text)
    if not all(part.lstrip("+-").isascii() and part.lstrip("+-").isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a comma-separated list of integers")
    try:
        return [int(part) for part in parts]
    except ValueError:  # more digits than Python converts (4300)
        raise argparse.ArgumentTypeError(f"{text[:60]!r}...: an integer with too many digits") from None


def number(text: str) -> float:
    """A finite decimal number written in ASCII (``float()`` alone takes ``inf``, ``nan`` and other digits)."""
    value = text.strip()
    try:
        result = float(value) if value.isascii() else float("nan")
    except ValueError:
        result = float("nan")
    if not math.isfinite(result):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a finite number")
    return result


def generator_value(name: str, value: Any) -> Any:
    """``value`` by generate_round's own rule for its argument ``name``, or an argparse error."""
    try:
        return check_arguments(generate_round, **{name: value})[name]
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def gpu_sizes(text: str) -> list[int]:
    """Cluster sizes in GPUs, comma-separated multiples of 8, duplicates dropped (a size is one sweep cell)."""
    sizes = int_list(text)
    if not sizes:
        raise argparse.ArgumentTypeError(f"{text!r} names no GPU count")
    return [generator_value("gpus", size) for size in dict.fromkeys(sizes)]


def seeds(text: str) -> list[int]:
    """One number is a count (seeds 0..N-1, N at most ``MAX_SEED_COUNT``); a comma-separated list names the
    seeds (``42,`` is seed 42), each in ``0..validation.MAX_SEED``, duplicates dropped."""
    values = int_list(text)
    if not values or any(value < 0 for value in values) or ("," not in text and values[0] < 1):
        raise argparse.ArgumentTypeError(f"{text!r}: give a seed count >= 1 or a list of seeds >= 0 (e.g. 0,1,5)")
    if "," not in text:
        if values[0] > MAX_SEED_COUNT:
            raise argparse.ArgumentTypeError(f"{text!r}: at most {MAX_SEED_COUNT} seeds (a list names larger seeds)")
        return list(range(values[0]))
    too_large = [value for value in values if value > MAX_SEED]
    if too_large:
        raise argparse.ArgumentTypeError(f"seed {too_large[0]}: seeds are at most {MAX_SEED}")
    return list(dict.fromkeys(values))


def split(text: str) -> tuple[float, float, float]:
    """A workload split, three percentages ``image,language,speech``."""
    try:
        values = tuple(number(part) for part in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not three percentages (image,language,speech)") from None
    result: tuple[float, float, float] = generator_value("split", values)
    return result


def profile_noise(text: str) -> float:
    """Per-job log-normal noise on each throughput matrix."""
    noise: float = generator_value("profile_noise", number(text))
    return noise


def names_of(kind: str, known: Sequence[str], everything: Sequence[str] | None = None) -> Callable[[str], list[str]]:
    """A parser of comma-separated names among ``known`` (or ``all``: ``everything``, default every known name),
    duplicates dropped, order kept."""

    def parse(text: str) -> list[str]:
        names = items(text)
        if names == ["all"]:
            return list(known if everything is None else everything)
        if "all" in names and "all" not in known:
            raise argparse.ArgumentTypeError(f"{text[:60]!r}: 'all' stands alone (it names every {kind})")
        unknown = [name for name in names if name not in known]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {unknown[0] if unknown else text!r}; choose from {', '.join(known)} or 'all'"
            )
        return list(dict.fromkeys(names))

    return parse


def seconds_or_none(text: str) -> float | None:
    """A time limit in seconds, > 0 and at most ``validation.MAX_TIME_LIMIT``; ``none`` turns it off (``0`` is
    refused, as the Python API refuses ``time_limit=0``: it once meant no limit here, silently)."""
    if text.lower() == "none":
        return None
    try:
        value = number(text)
    except argparse.ArgumentTypeError:
        value = -1.0
    if not 0 < value <= MAX_TIME_LIMIT:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a number of seconds in (0, {MAX_TIME_LIMIT:g}] "
                                         "(or 'none')")
    return value


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A parser of one integer in ``low..high`` (ASCII digits)."""

    def parse(text: str) -> int:
        values = int_list(text) if "," not in text else []
        if len(values) != 1 or not low <= values[0] <= high:
            raise argparse.ArgumentTypeError(f"{text[:60]!r} is not an integer in {low}..{high}")
        return values[0]

    return parse


def positive_int(text: str) -> int:
    """An integer >= 1 (and at most 10^9: no count the CLIs take is larger)."""
    return bounded_int(1, 10**9)(text)
