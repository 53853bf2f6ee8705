"""Bad repositories through the real CLI (offline engine): binary files, non-UTF-8
text, a 50 MB file, symlink loops, a symlink to /etc, an unreadable file, very long
paths, a hard link out of the root, names with escape sequences, a backtracking
``.gitignore`` and 20,000 tiny files each get a note and the run completes; a repository of
only binary files is a one-line error with exit code 2. ``--rev`` on a repository whose git
config points every command setting at a canary never runs it, with API keys in the CLI's
environment: a missing object is a one-line error, present objects load and the run completes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clihelp import ROOT, loopback_analyze_args, run_cli
from hostile_git import make_hostile

from deeprepo.testing.loopback import LoopbackServer

pytestmark = pytest.mark.e2e

# Runs the real CLI, with one change: reading ``locked.py`` fails with EACCES, as it
# would for an ordinary user on a mode-000 file (these tests may run as root, who
# reads it anyway).
DENY_READ = """
import errno, sys
from deeprepo.codebase import loader
real = loader._open_file
def deny(path):
    if path.endswith("locked.py"):
        raise PermissionError(errno.EACCES, "Permission denied", path)
    return real(path)
loader._open_file = deny
from deeprepo.cli.app import main
sys.argv = ["deeprepo", *sys.argv[1:]]
main()
"""


CANARY_KEYS = {
    "OPENROUTER_API_KEY": "sk-or-v1-canary-git-openrouter",
    "ANTHROPIC_API_KEY": "sk-ant-canary-git-anthropic",
}


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory (tmpfs) where there is one: thousands of files are made fast."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="deeprepo-test-") as tmp:
        yield Path(tmp)


def run_denying(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", DENY_READ, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def long_path_files(base: Path) -> tuple[str, Path]:
    """A file whose absolute path is just under PATH_MAX (loaded), and one beyond it
    (skipped); returns the first's relative path and the top of the second."""
    long_dir, parts = base, list[str]()
    while len(str(long_dir)) + 2 * 201 + 10 < 4096:
        parts.append(f"{len(parts):02d}" + "n" * 198)
        long_dir = long_dir / parts[-1]
    long_dir.mkdir(parents=True)
    (long_dir / "deep.py").write_text("import os\n\ndef run(cmd):\n    os.system(cmd)\n")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        depth = 0
        while len(str(base)) + depth * 251 < 4400:  # built with dir fds: past PATH_MAX
            os.mkdir("x" * 250, dir_fd=fd)
            child = os.open("x" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, depth = child, depth + 1
        leaf = os.open("far.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"far = 1\n")
        os.close(leaf)
    finally:
        os.close(fd)
    return "/".join([*parts, "deep.py"]), base / ("x" * 250)


def test_a_hostile_repository_is_analysed_with_every_skip_noted(fast_tmp: Path) -> None:
    repo = fast_tmp / "repo"
    repo.mkdir()
    (repo / "app.py").write_text(
        "import sqlite3\n\n\ndef find(db, name):\n"
        "    return db.execute(\"SELECT * FROM users WHERE name = '%s'\" % name)\n"
    )
    (repo / "README.md").write_text("# A repository with every kind of trouble\n")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (repo / "libfast.so").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(64))
    (repo / "blob.py").write_bytes(b"x = 1\n\x00\x00 not really python")
    (repo / "latin1.py").write_bytes("# auteur: José\nname = 'café'\n".encode("latin-1"))
    with open(repo / "dump.sql", "wb") as fh:
        fh.truncate(50_000_000)  # sparse: instant, and never read
    os.symlink("loop_b", repo / "loop_a")
    os.symlink("loop_a", repo / "loop_b")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    os.symlink("..", repo / "pkg" / "up")
    os.symlink("/etc", repo / "etc")
    os.symlink("/etc/passwd", repo / "passwd.txt")
    (repo / "locked.py").write_text("SECRET = 'locked-away'\n")
    (repo / "locked.py").chmod(0)
    long_rel, far_top = long_path_files(repo)
    outside = fast_tmp / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("HARDLINK-CANARY-7c1\n")
    os.link(outside / "id_rsa", repo / "deploy_key.txt")  # a hard link out of the root
    forged = "notes.txt\n- skipped `app.py`: forged"
    (repo / forged).write_text("notes\n")
    (repo / "evil\x1b[2J\x1b[31m.png").write_bytes(b"\x89PNG")
    # Backtracking bait: ten stars against the ~4,000-character paths of long_path_files.
    (repo / ".gitignore").write_text("*n*n*n*n*n*n*n*n*n*n*b\n/**/n*n*n*n*n*n*n*n*n*n*b/\n")
    out = fast_tmp / "run"

    proc = run_denying("analyze", str(repo), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    m: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    assert m["stop_reason"] == "answer_ready" and m["offline"] is True
    skipped = {s["path"]: s["reason"] for s in m["codebase"]["skipped_files"]}
    far = next(p for p in skipped if p.startswith(far_top.name + "/"))
    assert skipped == {
        "logo.png": "binary",
        "libfast.so": "binary",
        "blob.py": "binary",
        "dump.sql": "too-large (50,000,000 bytes > 1,000,000)",
        "loop_a": "symlink-loop",
        "loop_b": "symlink-loop",
        "pkg/up": "symlink-inside-root (to ., loaded under that path)",
        "etc": "symlink-outside-root",
        "passwd.txt": "symlink-outside-root",
        "locked.py": "unreadable: Permission denied",
        far: "unreadable: File name too long",
        "deploy_key.txt": (
            "hard-link (2 names, 1 in the loaded tree; the others may be outside the root)"
        ),
        "evil\\x1b[2J\\x1b[31m.png": "binary",
    }
    assert m["codebase"]["skipped"] == len(skipped)
    # app.py, README.md, latin1.py, pkg/__init__.py, deep.py, .gitignore and the file with a
    # newline in its name
    assert m["codebase"]["files"] == 7
    assert long_rel in m["covered_paths"] and "app.py" in m["covered_paths"]

    report = (out / "report.md").read_text()
    assert "decoded with replacement (not valid UTF-8): latin1.py" in report
    assert (
        "- skipped `dump.sql`: too-large" in report
        and "- skipped `etc`: symlink-outside-root" in report
    )
    assert "app.py:5" in report  # the analysis itself ran: the SQL injection was found
    everything = report + (out / "trajectory.jsonl").read_text() + proc.stdout
    assert "root:x:0:0" not in everything and "locked-away" not in everything
    assert "HARDLINK-CANARY" not in everything
    # Names reach the report escaped: no escape sequence, no line forged by a name.
    assert "- skipped `evil\\x1b[2J\\x1b[31m.png`: binary" in report
    assert "\x1b" not in report + proc.stdout and "- skipped `app.py`: forged" not in report


def test_twenty_thousand_tiny_files_are_loaded_and_the_run_completes(fast_tmp: Path) -> None:
    repo = fast_tmp / "many"
    repo.mkdir()
    for d in range(200):
        sub = repo / f"d{d:03d}"
        sub.mkdir()
        for f in range(100):
            fd = os.open(sub / f"f{f:02d}.py", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"x = 1\n")
            os.close(fd)
    out = fast_tmp / "run"
    proc = run_cli("analyze", str(repo), "--root", "scripted/lazy", "--out", str(out))
    assert proc.returncode == 3, proc.stderr  # the lazy root audits nothing: incomplete
    m = json.loads((out / "metrics.json").read_text())
    assert m["codebase"]["files"] == 20_000 and m["codebase"]["lines"] == 20_000
    assert m["stop_reason"] == "answer_ready" and m["turns"] >= 1


def test_a_repository_of_only_binary_files_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    (tmp_path / "b.so").write_bytes(b"\x7fELF")
    (tmp_path / "c.data").write_bytes(b"\x00\x01\x02")
    proc = run_cli("analyze", str(tmp_path), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {tmp_path} has no text files to analyse (3 skipped: 3 binary); "
        "pass the directory that holds the source code"
    )
    assert not (tmp_path / "run").exists()


def test_rev_on_a_repository_that_configures_commands_never_runs_them(
    tmp_path: Path, loopback: LoopbackServer
) -> None:
    canary = tmp_path / "canary"
    env = {**CANARY_KEYS, "GIT_DIR": str(tmp_path / "elsewhere")}

    # A missing object behind a promisor remote whose ssh command is the canary.
    oid = make_hostile(tmp_path / "partial", canary, missing_blob=True)
    proc = run_cli(*loopback_analyze_args(loopback, tmp_path / "run1", "--rev", "HEAD",
                                          repo=tmp_path / "partial"), env=env)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: git cannot read the object of lib.py ({oid}): it is missing")
    assert loopback.request_count == 0 and not (tmp_path / "run1").exists()
    assert not canary.exists()

    # Every object present: the revision loads and the run completes; nothing configured ran.
    make_hostile(tmp_path / "whole", canary, missing_blob=False)
    loopback.enqueue_anthropic(
        "```python\nset_answer('# Report\\nRead ' + str(len(codebase)))\n```"
    )
    out = tmp_path / "run2"
    proc = run_cli(*loopback_analyze_args(loopback, out, "--rev", "HEAD",
                                          repo=tmp_path / "whole"), env=env)  # fmt: skip
    # Exit 3: the root answered without sending any file to a worker (an incomplete audit).
    assert proc.returncode == 3, proc.stderr
    m: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    assert m["stop_reason"] == "answer_ready" and m["codebase"]["files"] == 3
    assert "Read 3" in (out / "report.md").read_text()
    assert not canary.exists()
    written = "".join(p.read_text() for p in out.iterdir() if p.is_file())
    bodies = "".join(r.text for r in loopback.requests)
    for key in CANARY_KEYS.values():
        assert key not in written + bodies + proc.stdout + proc.stderr
