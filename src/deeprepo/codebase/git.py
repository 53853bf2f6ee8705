"""Read a git repository that nobody has vetted, without letting it run anything.

A repository's own configuration (``.git/config`` and what it includes) can name commands that
git runs: ``core.sshCommand`` during a fetch, ``core.fsmonitor``, hooks, a pager, credential
helpers, external diff and filter drivers. A partial clone's *promisor* remote makes even a
read (``ls-tree --long``, ``cat-file``) fetch a missing object, so a crafted ``.git/config``
turned ``deeprepo analyze --rev`` into running the attacker's command with deeprepo's
environment (the API keys). Every git command here therefore runs:

* with an **allow-listed environment**: no API keys, proxies or ``GIT_*`` variables of the
  caller (``GIT_DIR``, ``GIT_CONFIG_PARAMETERS`` …); no system or global config
  (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``); ``HOME`` an empty private
  directory; no transport protocol at all (``GIT_ALLOW_PROTOCOL`` empty, which beats any
  ``protocol.*.allow`` in the repository's config); no terminal or askpass prompt; lazy fetch
  off (``GIT_NO_LAZY_FETCH``, git ≥ 2.44) and replace refs ignored;
* with **no program to run**: ``PATH`` and ``GIT_EXEC_PATH`` are that same empty directory, so
  the ``git fetch`` a lazy fetch starts cannot be found (git < 2.44 has no switch to turn lazy
  fetch off), nor can anything a shell command would name;
* with ``-c`` **overrides** (which beat the repository's config) for every setting that names a
  command a read might reach: ``core.sshCommand``, ``core.fsmonitor``, ``core.hooksPath``,
  ``core.askPass``, ``credential.helper``, ``diff.external``, ``protocol.allow``, and no pager
  (``--no-pager``), no automatic gc or maintenance.

Only plumbing that reads objects is used (``rev-parse``, ``ls-tree``, ``cat-file --batch``
without ``--filters`` or ``--textconv``): no checkout, no attribute filters, no index. A
missing or corrupt object is a :class:`~deeprepo.base.errors.CodebaseError` naming the path; so is
a command that makes no progress for ``GIT_IDLE_TIMEOUT_S`` (a FIFO in ``.git`` blocks git's
reads) and a tree listing more than ``MAX_TREE_ENTRIES`` paths (a "git bomb").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from deeprepo.base.closing import Closing
from deeprepo.base.errors import CodebaseError
from deeprepo.base.textsafe import escape_name

__all__ = [
    "CONFIG_OVERRIDES",
    "MAX_TREE_ENTRIES",
    "MISSING_HINT",
    "GitReader",
    "TreeEntry",
    "git_environment",
]

#: ``-c`` settings given to every git command; they take precedence over the repository's.
CONFIG_OVERRIDES: tuple[str, ...] = (
    "core.sshCommand=false",
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.askPass=",
    "core.pager=cat",
    "credential.helper=",  # an empty value clears the list of helpers
    "diff.external=",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "core.alternateRefsCommand=",
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
)

#: A revision listing more files than this is refused (a "git bomb" lists billions).
MAX_TREE_ENTRIES = 1_000_000

#: A git command that makes no progress for this long is killed: a FIFO or device in the
#: `.git` directory (a loose object, the config, HEAD) blocks git's read forever.
GIT_IDLE_TIMEOUT_S = 30.0

#: What to do about an object git cannot read.
MISSING_HINT = (
    "run `git fsck` there. deeprepo never fetches missing objects (a repository's "
    "config can make a fetch run commands): check the revision out and analyse the "
    "directory without --rev"
)


def git_environment(empty_dir: str) -> dict[str, str]:
    """The whole environment of a git command; ``empty_dir`` is a private, empty directory.
    Nothing is copied from deeprepo's own environment."""
    return {
        "LC_ALL": "C",  # git's messages in English: a few are recognised
        "PATH": empty_dir,
        "GIT_EXEC_PATH": empty_dir,
        "HOME": empty_dir,
        "XDG_CONFIG_HOME": empty_dir,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",  # set but empty: git neither runs core.askPass nor SSH_ASKPASS
        "GIT_ALLOW_PROTOCOL": "",  # no transport at all (file, ssh, http, ext …)
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
    }


class TreeEntry(NamedTuple):
    """One ``ls-tree --long`` record."""

    mode: str
    kind: str  # blob, tree, commit (a submodule)
    oid: str
    size: int | None  # None for a submodule, or for an object git could not read
    path: bytes  # raw, relative to the listed tree


class GitReader(Closing):
    """Read-only access to the repository around ``root``; use as a context manager.

    ``with GitReader(root) as git: ...`` creates the private empty directory every command
    uses as ``HOME``, ``PATH`` and exec path, and removes it at the end.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        git = shutil.which("git")
        if git is None:
            raise CodebaseError(
                "git is not installed; install git or load the directory without a revision"
            )
        self._git = os.path.realpath(git)
        self._empty: str | None = None
        self._env: dict[str, str] = {}

    def open(self) -> None:
        """Create the private empty directory the commands run in."""
        self._empty = tempfile.mkdtemp(prefix="deeprepo-git-")
        self._env = git_environment(self._empty)

    def close(self) -> None:
        """Remove that directory."""
        if self._empty is not None:
            shutil.rmtree(self._empty, ignore_errors=True)
            self._empty = None

    def command(self, *args: str) -> list[str]:
        """The argv of one hardened git command."""
        argv = [self._git, "--no-pager"]
        for setting in CONFIG_OVERRIDES:
            argv += ["-c", setting]
        return [*argv, *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        if self._empty is None:
            raise RuntimeError("GitReader used outside its `with` block")
        try:
            return subprocess.run(
                self.command(*args),
                cwd=self.root,
                env=self._env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
                timeout=GIT_IDLE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise self._stalled(args[0]) from None

    def _stalled(self, what: str) -> CodebaseError:
        return CodebaseError(
            f"git stopped answering ({what}, {GIT_IDLE_TIMEOUT_S:g} s without progress) in "
            f"{self.root}: something in its .git directory blocks reading (a FIFO or device "
            f"where a file should be?); {MISSING_HINT}"
        )

    def line(self, *args: str) -> str | None:
        """The single line a command prints (trailing newline removed), or ``None`` on failure."""
        done = self.run(*args)
        if done.returncode != 0:
            return None
        out = done.stdout[:-1] if done.stdout.endswith(b"\n") else done.stdout
        return os.fsdecode(out)

    def last_error(self, done: subprocess.CompletedProcess[bytes]) -> str:
        """git's last line on stderr, escaped for display (paths in it are untrusted)."""
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return escape_name(said[-1]) if said else "nothing"

    def list_tree(self, treeish: str, max_entries: int | None = None) -> list[TreeEntry]:
        """Every blob, symlink and submodule under ``treeish``, recursively.

        Read as a stream and stopped past ``max_entries``: trees can share subtrees, so a
        few kilobytes of objects can list billions of paths (a "git bomb")."""
        if self._empty is None:
            raise RuntimeError("GitReader used outside its `with` block")
        if max_entries is None:
            max_entries = MAX_TREE_ENTRIES
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                self.command("ls-tree", "--full-tree", "-r", "-z", "--long", treeish),
                cwd=self.root,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
            assert proc.stdout is not None
            entries: list[TreeEntry] = []
            pending = b""
            watchdog = _Watchdog(proc)
            try:
                while chunk := proc.stdout.read(1 << 16):
                    watchdog.touch()
                    records = (pending + chunk).split(b"\0")
                    pending = records.pop()
                    entries.extend(self._entry(r) for r in records if r)
                    if len(entries) > max_entries:
                        raise CodebaseError(
                            f"{escape_name(treeish)} in {self.root} lists more than "
                            f"{max_entries:,} files (trees that share subtrees can list "
                            "billions); analyse a subdirectory of it"
                        )
            except BaseException:
                proc.kill()  # stopped early: nothing more is wanted from it
                raise
            finally:
                watchdog.stop()
                proc.stdout.close()
                returncode = proc.wait()
            if watchdog.fired:
                raise self._stalled("ls-tree")
            if pending:
                entries.append(self._entry(pending))
            if returncode != 0:
                err.seek(0)
                said = err.read(1 << 16).decode("utf-8", "replace").strip().splitlines()
                raise CodebaseError(
                    f"git could not list {escape_name(treeish)} in {self.root} (git says "
                    f"{escape_name(said[-1]) if said else 'nothing'!r}); {MISSING_HINT}"
                )
        return entries

    def _entry(self, record: bytes) -> TreeEntry:
        meta, _, path = record.partition(b"\t")
        fields = meta.decode("ascii", "replace").split()
        if len(fields) != 4 or not path:
            raise CodebaseError(
                f"git printed an unexpected tree record for {self.root}; {MISSING_HINT}"
            )
        mode, kind, oid, size = fields
        return TreeEntry(mode, kind, oid, int(size) if size.isdigit() else None, path)

    def cat_blobs(self, oids: Sequence[str], max_bytes: int) -> Iterator[bytes]:
        """Stream blob contents from one ``git cat-file --batch`` process, in request order.

        Raises :class:`CodebaseError` for an object git cannot read, or one bigger than
        ``max_bytes`` (the listing said it was not).
        """
        if not oids:
            return
        if self._empty is None:
            raise RuntimeError("GitReader used outside its `with` block")
        proc = subprocess.Popen(
            self.command("cat-file", "--batch"),
            cwd=self.root,
            env=self._env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def feed() -> None:
            # A thread writes the requests so that a full stdout pipe cannot deadlock us.
            try:
                stdin.write(("\n".join(oids) + "\n").encode())
                stdin.close()
            except OSError:  # git went away (we stopped reading); the reader reports it
                pass

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        watchdog = _Watchdog(proc)
        try:
            for oid in oids:
                header = stdout.readline(200).split()
                watchdog.touch()
                if watchdog.fired:
                    raise self._stalled("cat-file")
                if len(header) != 3 or header[1] != b"blob" or not header[2].isdigit():
                    raise CodebaseError(
                        f"git cannot read object {oid} of {self.root} (missing or corrupt); "
                        + MISSING_HINT
                    )
                size = int(header[2])
                if size > max_bytes:
                    raise CodebaseError(
                        f"git object {oid} of {self.root} is {size:,} bytes, not the size its "
                        f"tree lists; {MISSING_HINT}"
                    )
                data = stdout.read(size)
                if watchdog.fired:
                    raise self._stalled("cat-file")
                if len(data) != size or stdout.read(1) != b"\n":
                    raise CodebaseError(
                        f"git stopped while reading object {oid} of {self.root}; {MISSING_HINT}"
                    )
                yield data
        finally:
            watchdog.stop()
            if proc.poll() is None:
                proc.kill()  # stopped early: nothing more is wanted from it
            stdout.close()
            writer.join()
            proc.wait()


class _Watchdog:
    """Kills ``proc`` when :meth:`touch` has not been called for ``GIT_IDLE_TIMEOUT_S``."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.fired = False
        self._last = time.monotonic()
        self._done = threading.Event()
        self._limit = GIT_IDLE_TIMEOUT_S
        threading.Thread(target=self._watch, daemon=True).start()

    def touch(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while not self._done.wait(min(1.0, self._limit / 4)):
            if time.monotonic() - self._last > self._limit:
                self.fired = True
                self.proc.kill()
                return
