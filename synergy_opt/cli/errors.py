"""Command-line errors as one line on stderr, never a traceback: bad input exits 2, any other failure 1.

Every ``python -m synergy_opt.<tool>`` uses the two pieces here:

- :class:`OneLineParser`, an ``argparse.ArgumentParser`` whose errors are one line (no usage block);
- :func:`run_cli`, which runs the tool's ``main`` and turns

  - an :class:`~synergy_opt.errors.InvalidInputError` (bad input found past the parser: a malformed instance
    file, a generator argument out of range) or an ``OSError`` (a path that cannot be read or written) into
    ``<prog>: error: <what>`` and exit code 2, as argparse does for a bad flag;
  - any other :class:`~synergy_opt.errors.SynergyError` (a solver fault, ``NoSolutionError``, an invalid
    allocation under ``strict``, a worker process that died: the input was fine, the run failed) into
    ``<prog>: failed: <ErrorName>: <what>`` and exit code 1;
  - Ctrl-C or SIGTERM into ``<prog>: interrupted`` (with what was kept, for a sweep) and exit code 130.

Usage::

    def main(argv=None) -> int:
        return run_cli(PROG, _main, argv)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, NoReturn

from synergy_opt.errors import InvalidInputError, SynergyError

USAGE_ERROR = 2  # argparse's exit code for bad arguments; bad input found later exits the same way
RUN_FAILED = 1  # the input was accepted but the run could not finish (not the caller's mistake)
INTERRUPTED = 130  # the shell's code for a run ended by Ctrl-C (128 + SIGINT)
BROKEN_PIPE = 141  # the shell's code for a writer whose reader went away (128 + SIGPIPE): `... | head`


class OneLineParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block), still exit code 2; a value that starts with a minus and
    a digit is a value (``--split -10,60,50`` is told what is wrong with -10, not "expected one argument").
    ``context``, when set, prefixes each error: where flags not typed by the user came from (an experiment
    file, a resumed folder's ``command.json``)."""

    context = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Python 3.11-3.13 take only "-8" or "-.5" for a value (so "--split -10,60,50" was "expected one
        # argument"); any "-<digit>..." is one here (no flag of ours starts so).
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def error(self, message: str) -> NoReturn:
        where = f"{self.context}: " if self.context else ""
        self.exit(USAGE_ERROR, f"{self.prog}: error: {where}{message}\n")


def run_cli(prog: str, main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """``main(argv)``'s exit code; an error prints one line: bad input (InvalidInputError, OSError) gives 2,
    any other SynergyError 1; a reader of stdout that left (``| head``) ends it quietly with 141.

    ``SystemExit`` from argparse (``--help``, a bad flag) becomes its exit code, so that callers (tests, other
    tools) get a return value rather than an exit.
    """
    try:
        with _terminate_as_interrupt():
            return main(argv)
    except KeyboardInterrupt as interrupt:
        detail = str(interrupt)
        print(f"{prog}: interrupted{': ' + detail if detail else ''}", file=sys.stderr)
        return INTERRUPTED
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else USAGE_ERROR)
    except BrokenPipeError as error:
        if not _stdout_gone():  # another pipe (a worker's, say): a fault like any other OSError
            print(f"{prog}: error: {_one_line(error)}", file=sys.stderr)
            return USAGE_ERROR
        # The reader of the output left (`| head`): not bad input. Quietly, as Unix tools end; what is still
        # buffered for stdout goes nowhere (else Python reports the pipe again at exit).
        _silence_stdout()
        return BROKEN_PIPE
    except (InvalidInputError, OSError) as error:
        print(f"{prog}: error: {_one_line(error)}", file=sys.stderr)
        return USAGE_ERROR
    except SynergyError as error:
        print(f"{prog}: failed: {type(error).__name__}: {_one_line(error)}", file=sys.stderr)
        return RUN_FAILED


def _stdout_gone() -> bool:
    """Whether stdout's reader has left: its pipe polls as broken (POLLERR on Linux, POLLHUP where a widowed pipe
    says so instead); True when stdout has no file (a test's capture: the pipe broken can only be its own)."""
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return True
    if not hasattr(select, "poll"):  # Windows: no poll; take it as stdout's, as before
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no file descriptor (a test's capture)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a batch system's stop) ends a run as Ctrl-C does: one line, what finished kept."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _one_line(error: BaseException) -> str:
    text = str(error) if not isinstance(error, OSError) or not error.filename else (
        f"{error.filename}: {error.strerror or error}"
    )
    return " ".join(text.split())
