"""The project's exception hierarchy.

Faults raise; solver outcomes (infeasible, time limit) are returned as statuses, never raised.
"""

from __future__ import annotations

from typing import Any


class SynergyError(Exception):
    """Root of every error this toolkit raises on purpose."""


class InvalidInputError(SynergyError, ValueError):
    """Bad input: names the offending field and value."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={_short(value)}: {reason}")


class UnknownNameError(InvalidInputError):
    """A model, solver or mechanism name that is not known; lists the known ones."""

    def __init__(self, field: str, value: Any, known: list[str] | tuple[str, ...]) -> None:
        self.known = tuple(known)
        super().__init__(field, value, f"unknown; choose one of {', '.join(self.known)}")


class CallableError(InvalidInputError):
    """A user's callable (a policy, a mechanism, a profiler's ``measure`` or memory model) raised.

    Names the argument and the callable, and reports the callable's own exception, which is also kept as
    ``error`` and as ``__cause__``.
    """

    def __init__(self, field: str, function: Any, error: Exception) -> None:
        self.error = error
        name = getattr(function, "__qualname__", None) or type(function).__name__
        super().__init__(field, name, f"raised {type(error).__name__}: {error}")


class SolverUnavailableError(SynergyError):
    """A registered backend whose library or binary is not installed here."""


class NoSolutionError(SynergyError):
    """A solution was asked of a result that has none (infeasible, or a limit hit before any incumbent)."""


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except ValueError:  # an integer past Python's 4300-digit limit for str()
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
