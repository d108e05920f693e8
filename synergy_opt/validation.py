"""One validation layer for everything that enters the toolkit: a rule per kind of value, written once.

A rule is a callable ``rule(name, value) -> value`` that returns the value in its plain Python form (a numpy
integer becomes an ``int``) or raises :class:`~synergy_opt.errors.InvalidInputError` naming the argument (or
the field's path) and the value. The public functions declare their rules with :func:`checked`; the data
classes apply the same rules to their fields. The rules (``docs/inputs.md``):

- numbers: Python and numpy integers and floats (any ``numbers.Real``), never strings, booleans or None;
  finite unless said otherwise;
- integers: integral types only (``2.0`` is not an integer), within the stated range;
- booleans: ``bool`` and ``numpy.bool_`` only (``"no"`` is not False);
- names and ids: strings (Unicode text: no lone surrogates); a name must be one of the known ones (the error
  lists them);
- a round or an allocation: the object, or its JSON form (a dict, as ``load_instance`` reads it);
- a user's callable: checked for its signature up front (:class:`Function`), and called through
  :func:`call_user`, so that its own exception is reported as its own, naming the argument;
- JSON text: one reader (:func:`parse_json`), whatever holds it (a file, a CSV cell).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import math
import numbers
import os
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np

from synergy_opt.errors import CallableError, InvalidInputError, UnknownNameError

Rule = Callable[[str, Any], Any]
P = ParamSpec("P")
R = TypeVar("R")

# Limits (stated in docs/inputs.md). Counts beyond them would only fail later, inside numpy or a solver.
MAX_SERVERS = 1_000_000
MAX_GPUS_PER_SERVER = 1024
MAX_SEED = 2**31 - 1  # every backend's seed is a 32-bit integer
MAX_TIME_LIMIT = 1e9  # seconds (about 30 years); GLPK takes whole seconds as a 32-bit integer
MAX_JSON_DEPTH = 64  # a round instance needs 6 levels; metadata may nest deeper, up to this
# Integers longer than this in JSON text are kept as their text and reported with their path (Python itself
# refuses more than 4300 digits).
MAX_INT_DIGITS = 100


def is_number(value: Any) -> bool:
    """A real number that is not a boolean (Python or numpy)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _range_text(low: float | None, high: float | None, low_open: bool = False, high_open: bool = False) -> str:
    """`` in [low, high)``, `` > low``, `` <= high`` and the like, each bound open or closed as stated."""
    def shown(bound: float) -> str:
        return f"{bound:g}" if isinstance(bound, float) else str(bound)

    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{shown(low)}, {shown(high)}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {shown(low)}"
    return f" {'<' if high_open else '<='} {shown(high)}" if high is not None else ""


@dataclass(frozen=True)
class Integer:
    """An integer (Python or numpy, not bool) in ``[low, high]``, a multiple of ``step``, or one of ``among``."""

    low: int | None = None
    high: int | None = None
    step: int = 1
    among: tuple[int, ...] | None = None

    def __call__(self, name: str, value: Any) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise InvalidInputError(name, value, f"must be an integer{self._text()}")
        number = int(value)
        if self.among is not None and number not in self.among:
            raise InvalidInputError(name, value, f"must be one of {', '.join(map(str, self.among))}")
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high) or (
            number % self.step
        ):
            raise InvalidInputError(name, value, f"must be an integer{self._text()}")
        return number

    def _text(self) -> str:
        multiple = f" multiple of {self.step}" if self.step != 1 else ""
        return (f",{multiple}" if multiple else "") + _range_text(self.low, self.high)


@dataclass(frozen=True)
class Number:
    """A finite real number (Python or numpy, not bool or str) in the range given, as a float; each bound is
    included unless ``low_open`` / ``high_open`` says otherwise."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __call__(self, name: str, value: Any) -> float:
        if not is_number(value):
            raise InvalidInputError(name, value, f"must be a number{self._text()}")
        try:
            number = float(value)
        except OverflowError:
            raise InvalidInputError(name, value, f"is too large: must be a finite number{self._text()}") from None
        if not math.isfinite(number):
            raise InvalidInputError(name, value, f"must be a finite number{self._text()}")
        below = self.low is not None and (number <= self.low if self.low_open else number < self.low)
        above = self.high is not None and (number >= self.high if self.high_open else number > self.high)
        if below or above:
            raise InvalidInputError(name, value, f"must be a number{self._text()}")
        return number

    def _text(self) -> str:
        return _range_text(self.low, self.high, self.low_open, self.high_open)


# Named number rules, written once for every module that takes such a value.
NON_NEGATIVE = Number(0)
POSITIVE = Number(0, low_open=True)


def boolean(name: str, value: Any) -> bool:
    """``True`` or ``False`` (``numpy.bool_`` too); a truthy string is not a boolean."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidInputError(name, value, "must be True or False")
    return bool(value)


def text(name: str, value: Any) -> str:
    """A non-empty string (ids, names) of Unicode text: a lone surrogate (``"\\ud800"``, which JSON's
    ``\\u`` escapes can hold) could not be written to a UTF-8 file."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError(name, value, "must be a non-empty string")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(name, value, "must be Unicode text (it holds a lone surrogate)") from None
    return value


@dataclass(frozen=True)
class OneOf:
    """One of the known names (a tuple, or a function giving them, for registries that grow)."""

    known: tuple[str, ...] | Callable[[], Iterable[str]]

    def __call__(self, name: str, value: Any) -> str:
        known = tuple(self.known() if callable(self.known) else self.known)
        if not isinstance(value, str) or value not in known:
            raise UnknownNameError(name, value, known)
        return value


@dataclass(frozen=True)
class Optional:
    """None, or a value that passes ``rule``."""

    rule: Rule

    def __call__(self, name: str, value: Any) -> Any:
        return None if value is None else self.rule(name, value)


@dataclass(frozen=True)
class InstanceOf:
    """An object of ``kind`` (e.g. ``Reductions``)."""

    kind: type

    def __call__(self, name: str, value: Any) -> Any:
        if not isinstance(value, self.kind):
            raise InvalidInputError(name, value, f"must be a {self.kind.__name__}")
        return value


@dataclass(frozen=True)
class Items:
    """A non-empty sequence (not a string or a mapping; empty too with ``may_be_empty``), each item checked by
    ``item`` (named ``name[i]``), as a tuple; ``meaning`` says what it lists (e.g. ``"built-in model names"``)."""

    item: Rule
    meaning: str
    may_be_empty: bool = False

    def __call__(self, name: str, value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise InvalidInputError(name, value, f"must be a sequence of {self.meaning}")
        items = tuple(self.item(f"{name}[{index}]", item) for index, item in enumerate(value))
        if not items and not self.may_be_empty:
            raise InvalidInputError(name, value, f"must list at least one of {self.meaning}")
        return items


@dataclass(frozen=True)
class Weights:
    """``count`` non-negative numbers with a positive sum (e.g. a workload split), as a tuple of floats."""

    count: int
    meaning: str

    def __call__(self, name: str, value: Any) -> tuple[float, ...]:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise InvalidInputError(name, value, f"must be {self.count} numbers >= 0 ({self.meaning})")
        items = list(value)
        if len(items) != self.count:
            raise InvalidInputError(name, value, f"must be {self.count} numbers >= 0 ({self.meaning})")
        weights = tuple(NON_NEGATIVE(f"{name}[{index}]", item) for index, item in enumerate(items))
        if sum(weights) <= 0:
            raise InvalidInputError(name, value, f"must not all be 0 ({self.meaning})")
        if not math.isfinite(sum(weights)):  # the weights are divided by their sum: three of 1e308 make it inf
            raise InvalidInputError(name, value, f"must have a finite sum ({self.meaning})")
        return weights


def ids(name: str, value: Any) -> list[str]:
    """A sequence of ids (strings); one string is not a sequence of ids."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(name, value, "must be a sequence of job ids (strings)")
    items = list(value)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInputError(f"{name}[{index}]", item, "a job id is a string")
    return items


def named_options(name: str, value: Any) -> dict[str, Any]:
    """Named settings: a mapping of string keys to scalars (bool, int, float, str), as a plain dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(name, value, "must be a dict of option name -> value")
    plain: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidInputError(name, key, "option names are strings")
        if isinstance(item, (bool, np.bool_)):
            plain[key] = bool(item)
        elif isinstance(item, numbers.Integral):
            plain[key] = int(item)
        elif is_number(item):
            plain[key] = Number()(f"{name}.{key}", item)
        elif isinstance(item, str):
            plain[key] = item
        else:
            raise InvalidInputError(f"{name}.{key}", item, "an option's value is a bool, number or string")
    return plain


def path(name: str, value: Any) -> Path:
    """A file-system path (str or os.PathLike), not empty (``Path("")`` is the current folder) and without a NUL
    (the operating system's calls refuse one with a bare ``ValueError``)."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidInputError(name, value, "must be a path (str or pathlib.Path)")
    if "\0" in str(os.fspath(value)):
        raise InvalidInputError(name, value, "must not contain a NUL character")
    return Path(value)


def real_array(name: str, values: Any, ndim: int | None) -> np.ndarray:
    """A ``ndim``-dimensional array of numbers (any shape, a number too, when ``ndim`` is None) as floats; a
    string or boolean entry is named by its index."""
    shape_word = {None: "number or an array", 1: "list"}.get(ndim, "matrix")
    if isinstance(values, np.ma.MaskedArray):
        raise InvalidInputError(name, values, f"must be a {shape_word} of numbers, not a masked array (its mask "
                                "would be ignored)")
    try:
        raw = np.asarray(values)
    except (ValueError, TypeError):
        raise InvalidInputError(name, values, f"must be a {shape_word} of numbers") from None
    if ndim is not None and raw.ndim != ndim:
        raise InvalidInputError(name, values, f"must be a {shape_word} of numbers")
    mixed = raw.dtype.kind in "iuf" and isinstance(values, (list, tuple)) and _holds_bool(values, raw)
    if mixed or raw.dtype.kind not in "iuf":
        # numpy read True as 1, or "0.6" turned every entry into a string: find the entry at fault
        entries = raw if raw.dtype.kind == "b" else np.asarray(values, dtype=object)
        for index in np.ndindex(raw.shape):
            entry = entries[index]
            Number()(f"{name}{''.join(f'[{i}]' for i in index)}", entry.item() if raw.dtype.kind == "b" else entry)
    return raw.astype(float)


def _holds_bool(values: list[Any] | tuple[Any, ...], read: np.ndarray) -> bool:
    """Whether a nested list numpy read as numbers held a boolean (read as 0 or 1: only those are looked at)."""
    for index in zip(*np.nonzero((read == 0) | (read == 1)), strict=True):
        item: Any = values
        for i in index:
            item = item[i]
        if isinstance(item, (bool, np.bool_)):
            return True
    return False


@dataclass(frozen=True)
class Function:
    """A callable taking ``arguments`` positional arguments, ``shape`` saying which (for the message).

    The signature is checked when it can be read (a builtin's may not be; that one is checked when called).
    """

    arguments: int
    shape: str

    def __call__(self, name: str, value: Any) -> Any:
        if not callable(value):
            raise InvalidInputError(name, value, f"must be a function {self.shape}")
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):
            return value
        try:
            signature.bind(*range(self.arguments))
        except TypeError:
            raise InvalidInputError(
                name, callable_name(value), f"must be a function {self.shape}; its signature is {signature}"
            ) from None
        return value


def callable_name(function: Any) -> str:
    """How messages name a user's callable."""
    return getattr(function, "__qualname__", None) or type(function).__name__


def call_user(name: str, function: Callable[..., R], *args: Any) -> R:
    """``function(*args)``, a user's callable given as the argument ``name``: whatever it raises is reported
    as its own (:class:`~synergy_opt.errors.CallableError`, the exception kept as the cause)."""
    try:
        return function(*args)
    except Exception as error:
        raise CallableError(name, function, error) from error


# ------------------------------------------------------------------------------------- common argument kinds

BOOL: Rule = boolean
SEED = Integer(0, MAX_SEED)
TIME_LIMIT = Optional(Number(0, MAX_TIME_LIMIT, low_open=True))
MIP_GAP = Number(0, 1)
THREADS = Optional(Integer(1, 1024))


# The backend settings shared by every solve_* function and by SolverParams (the solver's name is checked by
# synergy_opt.solvers.registry.SOLVER, which knows the names).
SOLVER_SETTINGS: dict[str, Rule] = {
    "time_limit": TIME_LIMIT, "mip_gap": MIP_GAP, "threads": THREADS, "seed": SEED, "verbose": BOOL,
    "options": Optional(named_options),
}


# ------------------------------------------------------------------------------------------ checking calls


def checked(**rules: Rule) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Check (and normalise) the named arguments of a public function when it is called.

    Only the arguments the caller passes are checked (defaults are trusted); the function receives the
    normalised values (plain ``int``/``float``/``bool``, an instance built from its JSON form).
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)
        unknown = set(rules) - set(signature.parameters)
        if unknown:  # a typo in a declaration fails at import, not silently
            raise TypeError(f"{function.__qualname__} has no parameter(s) {sorted(unknown)}")

        @functools.wraps(function)
        def entry(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise InvalidInputError(f"{function.__name__}()", kwargs or args, str(error)) from None
            arguments = bound.arguments
            for name, value in arguments.items():
                rule = rules.get(name)
                if rule is not None:
                    arguments[name] = rule(name, value)
            return function(*bound.args, **bound.kwargs)

        entry.argument_rules = rules  # type: ignore[attr-defined]
        return entry

    return decorate


def check_arguments(function: Callable[..., Any], **values: Any) -> dict[str, Any]:
    """Apply a :func:`checked` function's rules to some of its arguments without calling it (for CLIs)."""
    rules: dict[str, Rule] = getattr(function, "argument_rules", {})
    return {name: rules[name](name, value) if name in rules else value for name, value in values.items()}


def check_keyword_options(
    function: Callable[..., Any], given: Mapping[str, Any] | None, field: str = "options", skip: Iterable[str] = (),
    also: Iterable[str] = (),
) -> dict[str, Any]:
    """Options passed on to ``function`` as keywords: unknown names are errors that list the known ones (with
    ``also``, the options the caller took off before, e.g. ``spend_spare``) and the closest, and values are
    checked by the parameter's type hint (bool, int, float, str, Literal)."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise InvalidInputError(field, given, "must be a dict of option name -> value")
    rules = _keyword_rules(function, tuple(skip))
    plain: dict[str, Any] = {}
    for option, value in given.items():
        if option not in rules:
            names = sorted({*rules, *also})
            close = difflib.get_close_matches(str(option), names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidInputError(f"{field}.{option}", value,
                                    f"not an option here (options: {', '.join(names) or 'none'}){hint}")
        rule = rules[option]
        plain[option] = rule(f"{field}.{option}", value) if rule is not None else value
    return plain


@functools.cache
def _keyword_rules(function: Callable[..., Any], skip: tuple[str, ...]) -> dict[str, Rule | None]:
    """Each keyword parameter of ``function`` and the rule its type hint implies (None: no simple rule)."""
    hints = typing.get_type_hints(function)
    by_type: dict[Any, Rule] = {bool: boolean, int: Integer(), float: Number(), str: text}
    rules: dict[str, Rule | None] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if name in skip or parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        hint = hints.get(name)
        literal = typing.get_origin(hint) is typing.Literal
        rules[name] = OneOf(tuple(typing.get_args(hint))) if literal else by_type.get(hint)
    return rules


# -------------------------------------------------------------------------------------------- JSON values


class OutOfRange(str):
    """A number in a JSON text that no float or sensible integer holds (its literal text)."""


class RepeatedKey(dict):  # type: ignore[type-arg]
    """A JSON object that gives ``key`` twice (JSON's parsers keep the last silently; which was meant?)."""

    key = ""


def json_value(name: str, value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data (numpy scalars become Python ones), or an error naming the path.

    Rejected: non-string keys, NaN and infinities, numbers out of range, nesting deeper than
    ``MAX_JSON_DEPTH``, and anything that is not a dict, list, tuple, str, number, bool or None.
    """
    if depth > MAX_JSON_DEPTH:
        raise InvalidInputError(name, "...", f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, OutOfRange):
        if value in ("NaN", "Infinity", "-Infinity"):
            raise InvalidInputError(name, str(value), "must be a finite number")
        shown = value if len(value) <= 24 else f"{value[:12]}...({len(value)} characters)"
        raise InvalidInputError(name, str(shown), "number out of range")
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if is_number(value):
        return Number()(name, value)
    if isinstance(value, Mapping):
        plain = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(name, key, "JSON object keys are strings")
            plain[key] = json_value(f"{name}.{key}" if name else key, item, depth + 1)
        return plain
    if isinstance(value, (list, tuple)):
        return [json_value(f"{name}[{index}]", item, depth + 1) for index, item in enumerate(value)]
    raise InvalidInputError(name, value, f"not a JSON value ({type(value).__name__})")


def parse_json(source: tuple[str, Any], text: str, root: str = "") -> Any:
    """The data in the JSON text ``text``: the toolkit's one reading of JSON, for files and CSV cells alike.

    A malformed text, or one nested so deep that Python's parser gives up, is an error naming
    ``source`` (a field and its value: ``("path", "t.json")``, ``("rows[3].profile", cell)``). An integer of
    more than ``MAX_INT_DIGITS`` digits, a ``NaN``/``Infinity`` literal, or a key given twice in one object is an
    error naming its JSON path under ``root``.
    """
    odd: list[OutOfRange | RepeatedKey] = []

    def mark(literal: str) -> OutOfRange:
        marked = OutOfRange(literal)
        odd.append(marked)
        return marked

    def object_of(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        plain = dict(pairs)
        if len(plain) == len(pairs):
            return plain
        repeated = RepeatedKey(plain)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                repeated.key = key
                break
            seen.add(key)
        odd.append(repeated)
        return repeated

    field, value = source
    try:
        data = json.loads(text, parse_int=lambda s: int(s) if len(s) <= MAX_INT_DIGITS else mark(s),
                          parse_constant=mark, object_pairs_hook=object_of)
    except json.JSONDecodeError as error:
        # The text where the parser stopped says most (a lowercase ``nan``, a trailing comma, a quote missing).
        near = error.doc[error.pos:error.pos + 20].split("\n")[0]
        raise InvalidInputError(
            field, value, f"malformed JSON at line {error.lineno} column {error.colno}: {error.msg}, near {near!r}"
            + (" (nan is not JSON, and every number must be finite)" if near[:3].lower() == "nan" else "")
        ) from None
    except RecursionError:
        raise InvalidInputError(field, value, f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    if odd:
        _raise_at(data, root)
    return data


def json_number(name: str, text: str) -> int | float:
    """A number written as JSON writes one (``600``, ``-1.5e3``: ASCII digits, no spaces, no ``NaN``), read
    by :func:`parse_json`'s rules; for number cells of a CSV file."""
    if text != text.strip():
        raise InvalidInputError(name, text, "must be a number (no spaces around it)")
    try:
        json.loads(text)
    except json.JSONDecodeError:  # not JSON at all ('two'): a CSV cell's reader need not hear of JSON
        raise InvalidInputError(name, text, "must be a number, written as JSON writes one (600, -1.5e3)") from None
    except (ValueError, RecursionError):  # JSON out of range (5000 digits), or nested deep: parse_json says so
        pass
    value = parse_json((name, text), text, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(name, text, "must be a number")
    return value


def _raise_at(value: Any, where: str, depth: int = 0) -> None:
    """Raise, naming its path, for the first number the parser marked as out of range (or NaN/Infinity), or
    the first key given twice in one object."""
    if isinstance(value, OutOfRange) or depth > MAX_JSON_DEPTH:
        json_value(where, value, depth)  # raises
    if isinstance(value, RepeatedKey):
        raise InvalidInputError(f"{where}.{value.key}" if where else value.key, value[value.key],
                                "given twice in one JSON object (which one was meant?)")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _raise_at(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key, depth + 1)



def known_fields(where: str, raw: Mapping[str, Any], known: Iterable[str]) -> None:
    """Raise on a key of the JSON object ``raw`` (at ``where``) that is not one of ``known``: a misspelt optional
    field would otherwise take its default without a word."""
    names = tuple(known)
    for key in raw:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidInputError(f"{where}.{key}" if where else str(key), raw[key],
                                    f"unknown field (known: {', '.join(names)}){hint}")


# ------------------------------------------------------------------------------------------ solver options


def unknown_option(solver: str, key: str, value: Any, known: Iterable[str], reference: str) -> InvalidInputError:
    """The error for an option ``solver`` does not know: every known one when they are few, else the closest."""
    names = sorted(set(known))
    if len(names) <= 40:
        listing = f"options: {', '.join(names)}"
    else:
        close = difflib.get_close_matches(key, names, n=6, cutoff=0.5)
        hint = f"closest: {', '.join(close)}; " if close else ""
        listing = f"{hint}{len(names)} options, listed in {reference}"
    return InvalidInputError(f"options.{key}", value, f"not a {solver} option ({listing})")
