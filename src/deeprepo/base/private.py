"""Files and folders only the current user may touch: local server state, the key that
seals run folders, the response cache.

Anyone who can plant a link, or write a file another user owns, could otherwise steer
deeprepo (a server to send prompts to, a cached answer to trust). So a private folder
is refused when it is a symbolic link, owned by another user or writable by others, a
private file when it is a link, another user's, or readable by group or others; files
are written ``0600`` through an exclusive temporary file and renamed into place.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from deeprepo.base.errors import UnsafePathError

__all__ = [
    "UnsafePathError",
    "check_private_dir",
    "check_shared_dir",
    "private_dir",
    "read_private",
    "write_private",
]


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _check(path: Path, st: os.stat_result, what: str, bad_bits: int, why: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(
            f"{what} {path} is a symbolic link; deeprepo does not follow links it would "
            f"trust. Remove it (rm {path}) or point deeprepo at a real {why}"
        )
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UnsafePathError(
            f"{what} {path} belongs to {_owner_name(st.st_uid)}, not to you; "
            f"use a {why} of your own"
        )
    if st.st_mode & bad_bits:
        mode = stat.S_IMODE(st.st_mode)
        raise UnsafePathError(
            f"{what} {path} has mode {mode:o}, so other users could change what deeprepo "
            f"trusts; run chmod {mode & ~bad_bits:o} {path}, or use another {why}"
        )


def check_shared_dir(path: Path, what: str) -> None:
    """Refuse a folder whose files deeprepo trusts when it is a link, another user's, or
    writable by others, or by a group other than the user's own (with a umask of 002, as on
    systems with a private group per user, deeprepo's own folders are group-writable). A
    folder that does not exist yet passes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    own_group = hasattr(os, "getgid") and st.st_gid == os.getgid()
    _check(path, st, what, stat.S_IWOTH | (0 if own_group else stat.S_IWGRP), "folder")


def check_private_dir(path: Path, what: str) -> None:
    """:func:`check_shared_dir`, and no access for group or others at all."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _check(path, st, what, stat.S_IRWXG | stat.S_IRWXO, "folder")


def private_dir(path: Path, what: str) -> Path:
    """Make ``path`` (and missing parents) and check it is the user's own, mode ``0700``.
    A folder made by deeprepo is made ``0700``; one that exists with a wider mode is refused."""
    if not path.exists() and not path.is_symlink():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass  # made by a concurrent run: checked below like any other
    check_private_dir(path, what)
    return path


def read_private(path: Path, what: str, limit: int = 1 << 20) -> bytes | None:
    """The bytes of a private file, or None when there is none. A link, another user's
    file, one readable by group or others, or one over ``limit`` bytes is refused
    (:class:`UnsafePathError`): it could have been planted."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_symlink():
            raise UnsafePathError(
                f"{what} {path} is a symbolic link; deeprepo does not follow links it would "
                f"trust. Remove it (rm {path})"
            ) from None
        raise UnsafePathError(f"{what} {path} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"{what} {path} is not a regular file; remove it")
        _check(path, st, what, stat.S_IRWXG | stat.S_IRWXO, "file")
        if st.st_size > limit:
            raise UnsafePathError(
                f"{what} {path} is {st.st_size:,} bytes, more than such a file ever holds; "
                "remove it"
            )
        return fh.read(limit + 1)[:limit]


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode ``0600``: an exclusive temporary file beside
    it (never a link someone planted), then an atomic rename over ``path``."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
