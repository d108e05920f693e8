"""Files in and out: text read as UTF-8 within a size limit, and writes that never leave a half-written file.

Every writer in the package goes through :func:`atomic_path` (or :func:`atomic_open`): the content is written
to a temporary file in the target's folder and renamed over the target only once complete, so a failure (a
full disk, a bad value found while writing, an interrupt) leaves the old file, or none, never a partial one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from synergy_opt.errors import InvalidInputError

MAX_TEXT_BYTES = 256 * 2**20  # 256 MiB: a 16384-GPU round with an inline profile per job is 27 MB
# The process's umask, read once: a temporary file is created private (0600) and gets the usual mode back.
_UMASK = os.umask(0)
os.umask(_UMASK)


def read_text(path: Path, limit: int | None = None) -> str:
    """The file's text, decoded as UTF-8 (a leading byte-order mark is skipped); ``limit`` defaults to
    ``MAX_TEXT_BYTES``.

    Raises
    ------
    InvalidInputError
        Naming ``path``: unreadable, larger than ``limit`` bytes, or not UTF-8 text (binary, UTF-16).
    """
    limit = MAX_TEXT_BYTES if limit is None else limit
    try:
        size = path.stat().st_size
        if size > limit:
            raise InvalidInputError("path", str(path), f"is {size} bytes; the limit is {limit} bytes")
        data = path.read_bytes()
    except OSError as error:
        raise InvalidInputError("path", str(path), f"cannot read: {error.strerror or error}") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InvalidInputError("path", str(path), "is UTF-16 text; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            "path", str(path), f"is not UTF-8 text (byte {error.start} is 0x{data[error.start]:02x}; a binary file?)"
        ) from None


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``target`` (same suffix) to write to; renamed onto ``target`` on success.

    The folder is created if missing. On any exception the temporary file is removed and ``target`` is
    untouched.
    """
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=f".tmp{final.suffix}", dir=final.parent)
    os.close(handle)
    temporary = Path(name)
    temporary.chmod(0o666 & ~_UMASK)
    try:
        yield temporary
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(target: str | os.PathLike[str], mode: str = "w", **open_args: Any) -> Iterator[IO[Any]]:
    """``open(target, mode)`` that writes atomically (see :func:`atomic_path`)."""
    with atomic_path(target) as temporary, open(temporary, mode, **open_args) as handle:
        yield handle
