"""Git repositories whose own configuration tries to run commands (for the ``--rev`` tests).

Every setting git knows that names a program points at ``CANARY_COMMAND``, which writes its
environment (the API keys, if it ever runs in deeprepo's context) to a canary file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

#: Settings that make git run a program, each set to the canary command by :func:`make_hostile`.
COMMAND_SETTINGS = (
    "core.sshCommand",
    "core.fsmonitor",
    "core.pager",
    "core.askPass",
    "core.gitProxy",
    "core.editor",
    "diff.external",
    "diff.evil.textconv",
    "filter.evil.clean",
    "filter.evil.smudge",
    "filter.evil.process",
    "gpg.program",
    "remote.origin.uploadpack",
    "remote.origin.receivepack",
    "uploadpack.packObjectsHook",
    "core.alternateRefsCommand",
    "pager.cat-file",
    "pager.ls-tree",
    "pager.rev-parse",
)


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Plain git, as a user runs it (not hardened), with a fixed identity."""
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        **(env or {}),
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=full, capture_output=True, text=True, check=False
    )
    if done.returncode != 0 and env is None:
        raise AssertionError(f"git {args} failed: {done.stderr}")
    return done.stdout.strip()


def canary_command(canary: Path) -> str:
    """A shell command that records that it ran, and the environment it ran with."""
    return f"env >> {shlex.quote(str(canary))}; echo ran >> {shlex.quote(str(canary))}; false"


def make_hostile(repo: Path, canary: Path, *, missing_blob: bool) -> str:
    """Commit ``app.py`` and ``lib.py`` in a new repository at ``repo`` whose config points
    every command setting, hook and a promisor remote at the canary; with ``missing_blob``,
    delete ``lib.py``'s object so that reading it starts a lazy fetch. Returns that object id.
    """
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "app.py").write_text("import os\n\nos.system(input())\n")
    (repo / "lib.py").write_text("def helper():\n    return 42\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hostile")
    oid = git(repo, "rev-parse", "HEAD:lib.py")
    command = canary_command(canary)
    for setting in COMMAND_SETTINGS:
        git(repo, "config", setting, command)
    for key, value in (
        ("credential.helper", f"!{command}"),
        ("alias.ls-tree", f"!{command}"),
        ("core.hooksPath", str(repo / ".git" / "hooks")),
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.promisor", "true"),
        ("remote.origin.url", "ssh://attacker.invalid/repo.git"),
        ("protocol.allow", "always"),
        ("protocol.ssh.allow", "always"),
        ("log.showSignature", "true"),
        ("status.showUntrackedFiles", "all"),
    ):
        git(repo, "config", key, value)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("reference-transaction", "post-checkout", "post-index-change", "pre-auto-gc"):
        (hooks / hook).write_text(f"#!/bin/sh\n{command}\n")
        (hooks / hook).chmod(0o755)
    if missing_blob:
        (repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    return oid
