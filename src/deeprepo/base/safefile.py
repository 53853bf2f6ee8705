"""The one way deeprepo writes a file: never through a link planted where it writes.

A run folder, a bench or eval folder, a training output folder are shared (attached to a bug
report, copied from a colleague, downloaded from CI), so whatever already sits in them is
untrusted. A symbolic link at ``report.md.tmp`` or ``calls.jsonl`` must not turn a write into
a write to ``~/.ssh/authorized_keys``; nor may a hard link to such a file.

- :func:`write_atomic` writes a whole file: a fresh temporary file with a random name created
  with ``O_EXCL`` (``tempfile.mkstemp``) in the same folder, written, synced, then
  ``os.replace``-d onto the final name. A link at the final name is replaced, never
  followed; nothing at a predictable temporary name is ever opened.
- :func:`open_append` opens a log for appending (``calls.jsonl``, ``results.jsonl``, a
  training log) with ``O_NOFOLLOW`` and refuses anything but a plain file with one link.
- :func:`open_update` opens an existing file for reading and rewriting in place (cutting a
  torn tail) under the same rule.
- :func:`refuse_link` says, for a folder deeprepo is about to write into, that it is no link.

A refusal raises :class:`~deeprepo.base.errors.UnsafePathError` naming the path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Literal, overload

from deeprepo.base.errors import UnsafePathError

__all__ = ["open_append", "open_update", "refuse_link", "write_atomic"]

_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# Read once, at import: os.umask can only be read by setting it, which would race with
# threads creating files while a run writes its outputs.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _refusal(path: Path, what: str) -> UnsafePathError:
    return UnsafePathError(
        f"refusing to write {path}: {what}; deeprepo never writes through a link or into a "
        "file that is not its own. Remove it, or pass a fresh output folder"
    )


def refuse_link(path: Path) -> None:
    """Raise :class:`UnsafePathError` when ``path`` is a symbolic link (to anything).

    For a folder inside an output folder (a bench cell, a task folder) that deeprepo writes
    into: a link there would carry every write somewhere else. The output folder the user
    named on the command line is theirs to point anywhere and is not checked.
    """
    if path.is_symlink():
        raise _refusal(path, f"it is a symbolic link (to {os.readlink(path)!r})")


def _checked_fd(path: Path, flags: int, mode: int = 0o644) -> int:
    try:
        fd = os.open(path, flags | _FLAGS, mode)
    except OSError as exc:
        if path.is_symlink():
            raise _refusal(path, f"it is a symbolic link (to {os.readlink(path)!r})") from exc
        if path.exists() and not path.is_file():  # a FIFO with no reader: ENXIO
            raise _refusal(path, "it is not a plain file") from exc
        raise
    try:
        st = os.fstat(fd)
        # A character device (/dev/null, /dev/full) is the user's own choice: a run folder
        # from elsewhere cannot carry one (making one takes root); a FIFO or socket it can.
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise _refusal(path, "it is not a plain file")
        if st.st_nlink > 1:
            raise _refusal(path, f"it is a hard link ({st.st_nlink} names share it)")
        # O_NONBLOCK was only there so that a FIFO could not stall the open.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


@overload
def open_append(path: Path, *, binary: Literal[False] = False) -> IO[str]: ...
@overload
def open_append(path: Path, *, binary: Literal[True]) -> IO[bytes]: ...
def open_append(path: Path, *, binary: bool = False) -> IO[str] | IO[bytes]:
    """``path`` opened for appending (created when missing), text UTF-8 unless ``binary``.

    Raises :class:`UnsafePathError` when ``path`` is a symbolic link, a hard link, a FIFO, a
    socket or a folder."""
    fd = _checked_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    if binary:
        return os.fdopen(fd, "ab")
    return os.fdopen(fd, "a", encoding="utf-8")


def open_update(path: Path) -> IO[bytes]:
    """An existing plain file opened ``rb+`` (read, rewrite, truncate), under the rules of
    :func:`open_append`."""
    return os.fdopen(_checked_fd(path, os.O_RDWR), "rb+")


def write_atomic(path: Path, data: str | bytes | Iterable[str], *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8; an iterable of strings is
    written piece by piece, never held whole) in one step.

    A reader sees the old file or the new one, never half of one; a link at ``path`` is
    replaced by the new file, not followed. Raises :class:`UnsafePathError` when ``path``
    names a folder."""
    if path.is_dir() and not path.is_symlink():
        raise _refusal(path, "it is a folder")
    pieces: Iterable[bytes] = (
        [data.encode("utf-8")]
        if isinstance(data, str)
        else [data]
        if isinstance(data, bytes)
        else (piece.encode("utf-8") for piece in data)
    )
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces:
                fh.write(piece)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        # mkstemp makes the file 0600; outputs are shared like any file the user writes.
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
