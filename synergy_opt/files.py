"""Files in and out: regular files read as UTF-8 within a hard size limit, and writes that never leave a
half-written file.

Every writer in the package goes through :func:`atomic_path` (or :func:`atomic_open`): the content is written
to a temporary file in the target's folder and renamed over the target only once complete, so a failure (a
full disk, a bad value found while writing, an interrupt) leaves the old file, or none, never a partial one.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from synergy_opt.errors import InvalidInputError

MAX_TEXT_BYTES = 256 * 2**20  # 256 MiB: a 16384-GPU round with an inline profile per job is 27 MB
# Opening never blocks (O_NONBLOCK: a FIFO without a writer) and never takes a terminal as the controlling one.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
_CHUNK = 2**20
# The process's umask, read once: a temporary file is created private (0600) and gets the usual mode back.
_UMASK = os.umask(0)
os.umask(_UMASK)


def read_text(path: Path, limit: int | None = None, field: str = "path") -> str:
    """The file's text, decoded as UTF-8 (a leading byte-order mark is skipped); ``limit`` defaults to
    ``MAX_TEXT_BYTES``.

    Raises
    ------
    InvalidInputError
        Naming ``field`` (the argument that gave the path): unreadable, not a regular file, larger than
        ``limit`` bytes, or not UTF-8 text (binary, UTF-16).
    """
    data = read_bytes(path, limit, field)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InvalidInputError(field, str(path), "is UTF-16 text; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            field, str(path), f"is not UTF-8 text (byte {error.start} is 0x{data[error.start]:02x}; a binary file?)"
        ) from None


def read_bytes(path: Path, limit: int | None = None, field: str = "path") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` (default ``MAX_TEXT_BYTES``) of them.

    The file is opened without blocking (a FIFO with no writer would block ``open`` for ever) and refused
    unless it is a regular file (a directory, FIFO, socket or device such as ``/dev/zero``, also behind a
    symlink); the limit holds whatever the file says its size is (``/proc`` files say 0).

    Raises
    ------
    InvalidInputError
        Naming ``field`` (default ``path``): missing, unreadable (a symlink loop, no permission), not a
        regular file, or larger than ``limit`` bytes.
    """
    limit = MAX_TEXT_BYTES if limit is None else limit
    try:
        handle = os.open(path, _READ_FLAGS)
    except OSError as error:
        raise InvalidInputError(field, str(path), f"cannot read: {error.strerror or error}") from None
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise InvalidInputError(field, str(path), f"is {_file_kind(mode)}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(handle, min(limit + 1 - size, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise InvalidInputError(field, str(path), f"cannot read: {error.strerror or error}") from None
    finally:
        os.close(handle)
    if size > limit:
        raise InvalidInputError(field, str(path), f"is larger than the limit of {limit} bytes")
    return b"".join(chunks)


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((text for test, text in kinds if test(mode)), "not a regular file")


# A temporary file is named ``.<target name>.<host>-<pid>.<random>.tmp<suffix>`` beside its target, so that a
# later write to the same target can tell one left by a killed process (removed) from a live writer's (kept).
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"
_ACTIVE: set[Path] = set()  # this process's temporary files still being written
STALE_UNTAGGED_S = 3600.0  # a temporary file of the old, untagged form is stale after an hour untouched


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``target`` (same suffix) to write to; renamed onto ``target`` on success.

    A symbolic link is written through (the file it names is replaced, the link kept); a device, FIFO or socket
    is refused (OSError naming it). The folder is created if missing. On any exception the temporary file is
    removed and ``target`` is untouched; an ``OSError`` (a full disk, a file-size limit, no permission) is raised
    again naming ``target``, not the hidden temporary file. Temporary files of earlier writes to ``target`` whose
    writer is gone (killed mid-write on this host) are removed first.
    """
    final = Path(target)
    if final.is_symlink():  # written through: the rename would replace the link, not the file it names
        try:
            final = final.resolve()
        except (OSError, RuntimeError):  # a loop: RuntimeError up to Python 3.12, OSError (ELOOP) after
            raise OSError(errno.ELOOP, "is a loop of symbolic links", str(final)) from None
    if final.is_dir():  # the rename would fail with EBUSY ('.') or EISDIR: say what to give instead
        raise IsADirectoryError(errno.EISDIR, "is a folder: give a file's path to write to", str(final))
    if final.exists() and not final.is_file():  # the rename would replace a device or FIFO (root: /dev/null)
        raise OSError(errno.EINVAL, "is not a regular file (a device, FIFO or socket): give a file's path to "
                      "write to", str(final))
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(final)
        handle, name = tempfile.mkstemp(prefix=f".{final.name}.{_HOST}-{os.getpid()}.", suffix=f".tmp{final.suffix}",
                                        dir=final.parent)
    except OSError as error:
        raise _naming(error, final) from None
    os.close(handle)
    temporary = Path(name)
    _ACTIVE.add(temporary)
    try:
        temporary.chmod(0o666 & ~_UMASK)
        yield temporary
        os.replace(temporary, final)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise _naming(error, final) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    finally:
        _ACTIVE.discard(temporary)


def _naming(error: OSError, target: Path) -> OSError:
    """The same error (errno, so the same subclass) naming ``target``: a message the user can act on."""
    return OSError(error.errno, error.strerror or str(error), str(target)) if error.errno else OSError(
        f"{target}: {error}")


def _remove_stale_temporaries(final: Path) -> None:
    """Remove ``final``'s temporary files left by writers that are gone: tagged with this host and a process that
    no longer runs (or this process, not writing it now), or untagged and untouched for ``STALE_UNTAGGED_S``."""
    prefix = f".{final.name}."
    for path in final.parent.glob(f"{glob.escape(prefix)}*.tmp{glob.escape(final.suffix)}"):
        tag = path.name[len(prefix):].split(".", 1)[0]
        host, _, pid = tag.rpartition("-")
        try:
            if host == _HOST and pid.isdigit():
                stale = path not in _ACTIVE if int(pid) == os.getpid() else not _alive(int(pid))
            elif host:
                stale = False  # another host's writer: it may be alive
            else:
                stale = time.time() - path.stat().st_mtime > STALE_UNTAGGED_S
            if stale:
                path.unlink(missing_ok=True)
        except OSError:
            continue  # not ours to remove, or gone already


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextlib.contextmanager
def atomic_open(target: str | os.PathLike[str], mode: str = "w", **open_args: Any) -> Iterator[IO[Any]]:
    """``open(target, mode)`` that writes atomically (see :func:`atomic_path`)."""
    with atomic_path(target) as temporary, open(temporary, mode, **open_args) as handle:
        yield handle
