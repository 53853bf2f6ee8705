"""Load a git revision (``analyze --rev``) into an :class:`~deeprepo.codebase.collect.Accumulator`:
the commit's tree is read with hardened git (:mod:`deeprepo.codebase.git`), never checked out."""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from deeprepo.base.errors import CodebaseError
from deeprepo.base.textsafe import escape_name
from deeprepo.codebase.collect import OPEN_FLAGS, Accumulator, clean_name, inside_reason
from deeprepo.codebase.git import MISSING_HINT, GitReader, TreeEntry
from deeprepo.codebase.languages import JUNK_DIRS, VCS_DIRS, has_binary_extension

__all__ = ["MAX_REVISION_BYTES", "read_revision"]

#: A git revision whose files to load add up to more than this is refused: trees can share
#: subtrees and blobs, so a small repository can list terabytes ("git bomb").
MAX_REVISION_BYTES = 4_000_000_000


def read_revision(acc: Accumulator, root: Path, rev: str) -> str:
    """Load the tree of commit ``rev`` (the part under ``root``); return the commit's full SHA.

    git runs hardened (:mod:`deeprepo.codebase.git`): the repository's config cannot make it
    run a command, fetch, or prompt.
    """
    if not rev or rev.startswith("-"):
        raise CodebaseError(f"revision {rev!r} is not valid; pass a commit, branch or tag name")
    with GitReader(root) as git:
        where = git.run("rev-parse", "--show-prefix")
        if where.returncode != 0 and b"dubious ownership" in where.stderr:
            raise CodebaseError(
                f"git refuses to read {root}: it belongs to another user (git's safe.directory "
                "check, which deeprepo keeps; it reads no git config of yours, so an exception "
                "there does not apply); run deeprepo as the repository's owner, or analyse the "
                "files on disk without --rev"
            )
        if where.returncode != 0:
            raise CodebaseError(
                f"cannot read revision {rev!r}: git says {git.last_error(where)!r} "
                f"for {root}; pass a directory inside a git repository, or drop the revision"
            )
        prefix = os.fsdecode(where.stdout).removesuffix("\n")
        sha = git.line("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if not sha:
            raise CodebaseError(
                f"revision {rev!r} was not found in the git repository at {root}; "
                "pass a commit, branch or tag that `git log --all --oneline` shows"
            )
        treeish = f"{sha}:{prefix}"  # `sha:` is the top tree
        if git.line("cat-file", "-t", treeish) != "tree":  # `sha:path^{tree}` would be a path
            raise CodebaseError(
                f"{escape_name(prefix) or root} does not exist in revision {rev!r}; "
                "load a directory that it holds"
            )
        _note_foreign_objects(acc, git, root)
        requests = _plan_revision(acc, git.list_tree(treeish))
        # Each distinct object is read once, however many paths share it.
        unique = list(dict.fromkeys(oid for _, oid, _ in requests))
        blobs = dict(zip(unique, git.cat_blobs(unique, acc.max_file_bytes), strict=True))
        for rel, oid, is_link in requests:
            data = blobs[oid]
            if is_link:
                target = posixpath.normpath(
                    posixpath.join(posixpath.dirname(rel), data.decode("utf-8", "replace"))
                )
                outside = target.startswith(("/", "../")) or target == ".."
                acc.skip(rel, "symlink-outside-root" if outside else inside_reason(target))
            else:
                acc.add(rel, data)
    acc.notes.append(f"loaded git revision {rev!r} = {sha}, not the files on disk")
    return sha


def _plan_revision(acc: Accumulator, entries: list[TreeEntry]) -> list[tuple[str, str, bool]]:
    """Which blobs to read, as (path, object id, is a symlink); record every skip."""
    requests: list[tuple[str, str, bool]] = []
    junk: set[str] = set()
    total = 0
    for entry in entries:
        rel = clean_name(acc, os.fsdecode(entry.path))
        parts = rel.split("/")
        at = next((i for i, p in enumerate(parts[:-1]) if p in JUNK_DIRS or p in VCS_DIRS), -1)
        if at >= 0:
            if parts[at] in JUNK_DIRS:
                junk.add("/".join(parts[: at + 1]) + "/")
        elif entry.kind == "commit":
            acc.skip(rel, "submodule")
        elif entry.kind != "blob":
            acc.skip(rel, f"not-a-file (git {escape_name(entry.kind)})")
        elif entry.size is None:
            raise CodebaseError(
                f"git cannot read the object of {escape_name(rel)} ({entry.oid}): it is missing "
                f"or corrupt; {MISSING_HINT}"
            )
        elif entry.mode == "120000":
            requests.append((rel, entry.oid, True))
        elif has_binary_extension(rel):
            acc.skip(rel, "binary")
        elif entry.size > acc.max_file_bytes:
            acc.too_large(rel, entry.size)
        else:
            requests.append((rel, entry.oid, False))
            total += entry.size
            if total > MAX_REVISION_BYTES:
                raise CodebaseError(
                    f"the revision holds more than {MAX_REVISION_BYTES:,} bytes of files to "
                    "load (paths can share objects); analyse a subdirectory of it"
                )
    for path in sorted(junk):
        acc.skip(path, "junk-directory")
    return requests


def _note_foreign_objects(acc: Accumulator, git: GitReader, root: Path) -> None:
    """Say so when git reads objects from outside the work tree around ``root``: a ``.git``
    file (worktrees, submodules) or ``objects/info/alternates`` can point anywhere."""
    top = git.line("rev-parse", "--show-toplevel")
    common = git.line("rev-parse", "--git-common-dir")
    if top is None or common is None:
        return
    top_real = os.path.realpath(top)
    common_real = os.path.realpath(os.path.join(root, common))
    if not _is_within(common_real, top_real):
        acc.notes.append(f"git objects are read from {escape_name(common_real)}, outside {top}")
    try:  # not through a symlink, and not a FIFO (that would block)
        fd = os.open(os.path.join(common_real, "objects", "info", "alternates"), OPEN_FLAGS)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        lines = os.read(fd, 65536).decode("utf-8", "replace").splitlines()
    finally:
        os.close(fd)
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#"):
            where = os.path.realpath(os.path.join(common_real, "objects", line))
            if os.path.isdir(where):  # only what git can use; never a line of some other file
                acc.notes.append(
                    f"git objects may also be read from alternate {escape_name(where)}"
                )


def _is_within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)
