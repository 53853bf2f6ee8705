"""``load_codebase(rev=...)`` on repositories that try to make git run their commands, leak
the caller's environment, or read objects that are missing or corrupt."""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from hostile_git import canary_command, git, make_hostile

from deeprepo.base.errors import CodebaseError
from deeprepo.codebase import git as git_module
from deeprepo.codebase import load_codebase
from deeprepo.codebase import revision as revision_module
from deeprepo.codebase.git import CONFIG_OVERRIDES, GitReader, git_environment

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]

CANARY_ENV = {"ANTHROPIC_API_KEY": "sk-ant-canary-git", "HTTPS_PROXY": "http://canary.invalid"}


@pytest.fixture
def canary_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name, value in CANARY_ENV.items():
        monkeypatch.setenv(name, value)
    # Variables that would redirect git to another repository, if they reached it.
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.sshcommand'='touch /tmp/x'")
    return tmp_path / "canary"


def test_the_hostile_repository_runs_its_command_under_plain_git(tmp_path: Path) -> None:
    """The fixture is a live attack on this machine's git: plain `git cat-file` runs it."""
    canary = tmp_path / "canary"
    oid = make_hostile(tmp_path / "repo", canary, missing_blob=True)
    git(tmp_path / "repo", "cat-file", "-p", oid, env={"ANTHROPIC_API_KEY": "sk-plain"})
    assert "ran" in canary.read_text()
    assert "sk-plain" in canary.read_text()


def test_a_promisor_remote_cannot_make_a_revision_load_run_a_command(
    tmp_path: Path, canary_env: Path
) -> None:
    oid = make_hostile(tmp_path / "repo", canary_env, missing_blob=True)
    with pytest.raises(CodebaseError) as info:
        load_codebase(tmp_path / "repo", rev="HEAD")
    message = str(info.value)
    assert message.startswith(f"git cannot read the object of lib.py ({oid}): it is missing")
    assert "never fetches missing objects" in message and "\n" not in message
    assert not canary_env.exists()


def test_every_command_setting_is_inert_when_the_objects_are_present(
    tmp_path: Path, canary_env: Path
) -> None:
    make_hostile(tmp_path / "repo", canary_env, missing_blob=False)
    cb = load_codebase(tmp_path / "repo", rev="HEAD")
    assert sorted(cb.files) == [".gitattributes", "app.py", "lib.py"]
    assert cb.files["lib.py"] == "def helper():\n    return 42\n"  # no filter ran on it
    assert not canary_env.exists()


def test_a_corrupt_object_is_one_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a = 1\n")
    (repo / "b.py").write_text("b = 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    oid = git(repo, "rev-parse", "HEAD:b.py")
    path = repo / ".git" / "objects" / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(b"not zlib at all")
    with pytest.raises(CodebaseError, match=rf"^git cannot read the object of b\.py \({oid}\)"):
        load_codebase(repo, rev="HEAD")
    # A valid header that lies about the size: the listing and the read disagree.
    path.write_bytes(zlib.compress(b"blob 3\x00b = 2\n"))
    with pytest.raises(CodebaseError, match="git") as info:
        load_codebase(repo, rev="HEAD")
    assert "\n" not in str(info.value)


def test_a_config_include_of_a_system_file_does_not_show_its_content(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    secret = tmp_path / "secret.conf"
    secret.write_text("TOP-SECRET-LINE without a section\n")
    git(repo, "config", "include.path", str(secret))
    with pytest.raises(CodebaseError) as info:
        load_codebase(repo, rev="HEAD")
    assert "TOP-SECRET" not in str(info.value) and "\n" not in str(info.value)


def test_objects_from_outside_the_work_tree_are_noted(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q")
    (main / "a.py").write_text("a = 1\n")
    git(main, "add", "-A")
    git(main, "commit", "-q", "-m", "c")
    # A `.git` file pointing at another repository (as worktrees and submodules do).
    pointer = tmp_path / "pointer"
    pointer.mkdir()
    (pointer / ".git").write_text(f"gitdir: {main / '.git'}\n")
    cb = load_codebase(pointer, rev="HEAD")
    assert cb.files == {"a.py": "a = 1\n"}
    assert f"git objects are read from {main / '.git'}, outside {pointer}" in cb.metadata.notes
    # Alternates: objects borrowed from another object store.
    borrower = tmp_path / "borrower"
    git(tmp_path, "clone", "-q", "--shared", str(main), str(borrower))
    cb = load_codebase(borrower, rev="HEAD")
    assert (
        f"git objects may also be read from alternate {main / '.git' / 'objects'}"
        in cb.metadata.notes
    )


def test_git_runs_with_an_allow_listed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    env = git_environment(str(tmp_path))
    assert "OPENAI_API_KEY" not in env and "GIT_DIR" not in env and "LANG" not in env
    assert env["LC_ALL"] == "C"
    assert env["PATH"] == env["GIT_EXEC_PATH"] == env["HOME"] == str(tmp_path)
    assert env["GIT_ALLOW_PROTOCOL"] == "" and env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert "core.sshCommand=false" in CONFIG_OVERRIDES
    # The private directory is empty while git runs, and gone afterwards.
    with GitReader(tmp_path) as reader:
        argv = reader.command("status")
        home = reader.run("rev-parse", "--git-dir")  # not a repository: fails, does not matter
        assert home.returncode != 0
        empty = git_environment("x")  # same keys whatever the directory
        assert set(empty) == set(reader._env)
        assert os.listdir(reader._env["HOME"]) == []
        private = reader._env["HOME"]
    assert not os.path.exists(private)
    assert argv[1] == "--no-pager" and argv[-1] == "status"


def test_the_canary_command_is_a_real_command(tmp_path: Path) -> None:
    """Guard for the tests above: the canary command writes its file when run."""
    canary = tmp_path / "c"
    os.system(canary_command(canary))
    assert "ran" in canary.read_text()


def test_names_from_a_revision_are_escaped_where_shown(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a\nFORGED.py").write_text("a = 1\n")
    os.symlink("a\nFORGED.py", repo / "link\x1b[2J")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    cb = load_codebase(repo, rev="HEAD")
    assert list(cb.files) == ["a\nFORGED.py"]
    assert cb.file_tree.splitlines() == ["repo/", "  a\\nFORGED.py"]
    assert [(s.path, s.reason) for s in cb.metadata.skipped] == [
        ("link\\x1b[2J", "symlink-inside-root (to a\\nFORGED.py, loaded under that path)")
    ]


def _git_bomb(repo: Path, levels: int) -> None:
    """A commit whose trees share subtrees: 10**levels paths from a few hundred bytes."""
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "blob.txt").write_text("boom = 1\n")
    oid = git(repo, "hash-object", "-w", "blob.txt")
    kind, mode, prefix = "blob", "100644", "f"
    for _ in range(levels):
        listing = "".join(f"{mode} {kind} {oid}\t{prefix}{i}\n" for i in range(10))
        done = subprocess.run(
            ["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True, check=True
        )
        oid, kind, mode, prefix = done.stdout.strip(), "tree", "040000", "d"
    commit = git(repo, "commit-tree", oid, "-m", "bomb")
    git(repo, "update-ref", "refs/heads/bomb", commit)


def test_a_git_bomb_is_refused_at_the_entry_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # How fast the refusal comes is benchmarks/bench_speed_targets.py's to measure.
    _git_bomb(tmp_path / "repo", levels=7)  # ten million paths
    monkeypatch.setattr(git_module, "MAX_TREE_ENTRIES", 50_000)
    with pytest.raises(CodebaseError, match=r"lists more than 50,000 files"):
        load_codebase(tmp_path / "repo", rev="bomb")


def test_paths_sharing_one_object_read_it_once_and_count_toward_the_byte_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _git_bomb(tmp_path / "repo", levels=3)  # a thousand paths, one blob
    cb = load_codebase(tmp_path / "repo", rev="bomb")
    assert cb.metadata.files == 1000 and set(cb.files.values()) == {"boom = 1\n"}
    monkeypatch.setattr(revision_module, "MAX_REVISION_BYTES", 9 * 999)
    with pytest.raises(CodebaseError, match=r"more than 8,991 bytes of files to load"):
        load_codebase(tmp_path / "repo", rev="bomb")


def test_a_fifo_in_the_git_directory_cannot_hang_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs mkfifo")
    monkeypatch.setattr(git_module, "GIT_IDLE_TIMEOUT_S", 1.0)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    oid = git(repo, "rev-parse", "HEAD:a.py")
    loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
    loose.unlink()
    os.mkfifo(loose)  # git's read of the object blocks forever
    with pytest.raises(CodebaseError, match=r"git stopped answering \(ls-tree, 1 s"):
        load_codebase(repo, rev="HEAD")
    loose.unlink()
    os.mkfifo(repo / ".git" / "objects" / "info" / "alternates")
    (repo / ".git" / "config").rename(repo / ".git" / "config.real")
    os.mkfifo(repo / ".git" / "config")
    with pytest.raises(CodebaseError, match=r"git stopped answering \(rev-parse"):
        load_codebase(repo, rev="HEAD")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root (chown)")
def test_a_repository_of_another_user_is_a_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 4321, 4321)
    with pytest.raises(CodebaseError, match=r"^git refuses to read .* belongs to another user"):
        load_codebase(repo, rev="HEAD")
