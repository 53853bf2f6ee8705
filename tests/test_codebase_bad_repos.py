"""Hostile and broken repositories: each gets a clear note or a clear error, none crashes."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deeprepo.base.errors import CodebaseError
from deeprepo.codebase import Codebase, load_codebase
from deeprepo.codebase import loader as loader_module
from deeprepo.codebase.tree import DEFAULT_MAX_LINES

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")


def deny_opening(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The loader's open of any path ending in ``name`` fails with EACCES, whoever runs the
    tests (root reads a mode-000 file anyway)."""
    real_open: Callable[[str], int] = loader_module._open_file

    def denying_open(path: str) -> int:
        if path.endswith(name):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path)

    monkeypatch.setattr(loader_module, "_open_file", denying_open)


def reasons(cb: Codebase) -> dict[str, str]:
    return {s.path: s.reason for s in cb.metadata.skipped}


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A temporary directory in memory (tmpfs) where there is one: creating 20,000 files on a
    busy disk alone can take longer than the whole test should."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="deeprepo-test-") as tmp:
        yield Path(tmp)


def test_binary_files_are_skipped_and_text_beside_them_loads(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('ok')\n")
    (tmp_path / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    (tmp_path / "fake_source.py").write_bytes(b"import os\n\x00\x00binary tail")
    (tmp_path / "photo.JPG").write_bytes(b"\xff\xd8\xff\xe0 no NUL needed, extension decides")
    (tmp_path / "model.safetensors").write_bytes(b"{}")
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["app.py"]
    assert reasons(cb) == {
        "fake_source.py": "binary",
        "model.safetensors": "binary",
        "photo.JPG": "binary",
        "program": "binary",
    }


def test_non_utf8_text_is_decoded_with_replacement_and_noted(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes("# auteur: José\nx = 1\n".encode("latin-1"))
    (tmp_path / "sjis.txt").write_bytes("日本語のテキスト\n".encode("shift_jis"))
    (tmp_path / "truncated.md").write_bytes("fin: é".encode()[:-1])  # cut mid-character
    (tmp_path / "good.py").write_text("ok = 'é'\n", encoding="utf-8")
    cb = load_codebase(tmp_path)
    assert cb.metadata.files == 4
    assert cb.files["latin1.py"] == "# auteur: Jos\ufffd\nx = 1\n"
    assert cb.files["truncated.md"] == "fin: \ufffd"
    assert "\ufffd" in cb.files["sjis.txt"]
    assert cb.files["good.py"] == "ok = 'é'\n"
    assert cb.metadata.notes == [
        f"decoded with replacement (not valid UTF-8): {name}"
        for name in ("latin1.py", "sjis.txt", "truncated.md")
    ]


def test_many_replacement_notes_are_summarised(tmp_path: Path) -> None:
    for i in range(loader_module.MAX_FILE_NOTES + 7):
        (tmp_path / f"f{i:03d}.txt").write_bytes(b"\xff\n")
    notes = load_codebase(tmp_path).metadata.notes
    assert len(notes) == loader_module.MAX_FILE_NOTES + 1
    assert notes[-1] == "... and 7 more file notes like these"


def test_a_50_mb_file_is_skipped_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "small.py").write_text("x = 1\n")
    with open(tmp_path / "huge.sql", "wb") as fh:
        fh.truncate(50_000_000)  # sparse: instant to create, no disk used
    read: list[int] = []  # the size of each file read from
    real_read = loader_module._read_fd

    def reading(fd: int, limit: int, size_hint: int) -> bytes:
        read.append(os.fstat(fd).st_size)
        return real_read(fd, limit, size_hint)

    monkeypatch.setattr(loader_module, "_read_fd", reading)
    cb = load_codebase(tmp_path)
    assert read == [6]  # small.py: the size alone decided, not one byte of huge.sql was read
    assert reasons(cb) == {"huge.sql": "too-large (50,000,000 bytes > 1,000,000)"}
    # With the limit raised it is read, and its NULs mark it binary.
    assert reasons(load_codebase(tmp_path, max_file_bytes=60_000_000)) == {"huge.sql": "binary"}


@needs_symlinks
def test_symlink_loops_do_not_hang(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("pass\n")
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    os.symlink("self", tmp_path / "self")
    (tmp_path / "pkg").mkdir()
    os.symlink("..", tmp_path / "pkg" / "up")  # a directory loop through the parent
    os.symlink(".", tmp_path / "here")
    cb = load_codebase(tmp_path)  # returning at all is the point: no loop is walked round
    assert list(cb.files) == ["main.py"]
    assert reasons(cb) == {
        "a": "symlink-loop",
        "b": "symlink-loop",
        "here": "symlink-inside-root (to ., loaded under that path)",
        "pkg/up": "symlink-inside-root (to ., loaded under that path)",
        "self": "symlink-loop",
    }


@needs_symlinks
@pytest.mark.skipif(not Path("/etc/passwd").exists(), reason="needs /etc/passwd")
def test_symlinks_to_etc_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("pass\n")
    os.symlink("/etc", tmp_path / "etc")
    os.symlink("/etc/passwd", tmp_path / "passwd.txt")
    os.symlink("../../../../../../../../etc/passwd", tmp_path / "relative_escape")
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["app.py"]
    assert reasons(cb) == {
        "etc": "symlink-outside-root",
        "passwd.txt": "symlink-outside-root",
        "relative_escape": "symlink-outside-root",
    }
    assert not any("root:" in text for text in cb.files.values())


def test_a_file_that_cannot_be_read_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ok.py").write_text("ok = 1\n")
    locked = tmp_path / "locked.py"
    locked.write_text("secret = 1\n")
    locked.chmod(0)
    try:
        cb = load_codebase(tmp_path)
    finally:
        locked.chmod(0o644)
    if os.geteuid() == 0:  # root reads a mode-000 file anyway
        assert cb.files["locked.py"] == "secret = 1\n"
    else:
        assert reasons(cb) == {"locked.py": "unreadable: Permission denied"}

    # The same failure, simulated so that it holds whoever runs the tests.
    deny_opening(monkeypatch, "locked.py")
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["ok.py"]
    assert reasons(cb) == {"locked.py": "unreadable: Permission denied"}


def test_a_file_that_cannot_be_opened_still_reports_its_size_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files are opened before their size is read (from the descriptor); one that cannot be
    opened is still reported too large when it is, as when its size was looked at first."""
    (tmp_path / "ok.py").write_text("ok = 1\n")
    with open(tmp_path / "huge.sql", "wb") as fh:
        fh.truncate(5_000_000)
    deny_opening(monkeypatch, "huge.sql")
    assert reasons(load_codebase(tmp_path)) == {
        "huge.sql": "too-large (5,000,000 bytes > 1,000,000)"
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_a_file_swapped_for_a_fifo_after_the_listing_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file replaced by a FIFO between the listing and the open (a race a writer
    of the repository can win) is opened without blocking and listed, never read."""
    (tmp_path / "ok.py").write_text("ok = 1\n")
    swapped = tmp_path / "swapped.py"
    swapped.write_text("x = 1\n")
    real_open: Callable[[str], int] = loader_module._open_file

    def swapping_open(path: str) -> int:
        if path.endswith("swapped.py"):
            os.unlink(path)
            os.mkfifo(path)
        return real_open(path)

    monkeypatch.setattr(loader_module, "_open_file", swapping_open)
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["ok.py"]
    assert reasons(cb) == {"swapped.py": "not-a-regular-file"}


def test_a_directory_that_cannot_be_listed_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ok.py").write_text("ok = 1\n")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "x.py").write_text("x = 1\n")
    real_scandir = os.scandir

    def denying_scandir(path: str) -> object:
        if str(path).endswith("private"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(loader_module.os, "scandir", denying_scandir)
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["ok.py"]
    assert reasons(cb) == {"private/": "unreadable: Permission denied"}


@pytest.mark.e2e  # 20,000 files: slow; the 3 s target is benchmarks/bench_loader.py's
def test_twenty_thousand_tiny_files(fast_tmp: Path) -> None:
    for d in range(200):
        sub = os.path.join(fast_tmp, f"d{d:03d}")
        os.mkdir(sub)
        for f in range(100):
            fd = os.open(os.path.join(sub, f"f{f:02d}.py"), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"x = 1\n")
            os.close(fd)
    cb = load_codebase(fast_tmp)
    md = cb.metadata
    assert (md.files, md.chars, md.lines) == (20_000, 120_000, 20_000)
    assert md.languages == {"Python": 20_000}
    assert md.largest_files[0] == ("d000/f00.py", 6)  # ties keep path order
    tree = cb.file_tree.splitlines()
    assert len(tree) == DEFAULT_MAX_LINES + 1
    # 20,200 entries (200 dirs + 20,000 files), 4,999 shown below the root line.
    assert tree[-1].startswith("... (15,201 more entries not shown")


def test_long_paths_near_path_max_and_deep_nesting(fast_tmp: Path) -> None:
    # Names of 200 characters, nested until the absolute path is just under PATH_MAX (4096).
    long_dir = fast_tmp
    parts: list[str] = []
    while len(str(long_dir)) + 2 * 201 + 10 < 4096:
        name = f"{len(parts):02d}" + "n" * 198
        parts.append(name)
        long_dir = long_dir / name
    long_dir.mkdir(parents=True)
    (long_dir / "deep.py").write_text("deep = True\n")
    # A thousand levels of one-letter directories: the walk and the tree must not recurse.
    chain = [fast_tmp / "d"]
    for _ in range(999):  # one at a time: mkdir(parents=True) recurses past the limit
        chain.append(chain[-1] / "d")
    try:
        for d in chain:
            d.mkdir()
        (chain[-1] / "bottom.py").write_text("bottom = True\n")
        cb = load_codebase(fast_tmp)
    finally:
        # Remove bottom-up here: shutil.rmtree (pytest's cleanup) recurses once per level.
        for d in reversed(chain):
            if d.exists():
                for child in d.iterdir():
                    if not child.is_dir():
                        child.unlink()
                d.rmdir()
    long_rel = "/".join([*parts, "deep.py"])
    narrow_rel = "/".join(["d"] * 1000 + ["bottom.py"])
    assert list(cb.files) == sorted([long_rel, narrow_rel])
    assert len(str(fast_tmp / long_rel)) < 4096
    tree = cb.file_tree.splitlines()
    assert len(tree) == 1 + len(parts) + 1 + 1000 + 1
    assert "  " * (len(parts) + 1) + "deep.py" in tree
    assert tree[-1] == "  " * 1001 + "bottom.py"


def test_a_path_beyond_path_max_is_skipped_not_fatal(fast_tmp: Path) -> None:
    (fast_tmp / "ok.py").write_text("ok = 1\n")
    # Build below PATH_MAX with directory descriptors, so the absolute path can exceed it.
    fd = os.open(fast_tmp, os.O_RDONLY | os.O_DIRECTORY)
    depth = 0
    try:
        while len(str(fast_tmp)) + depth * 251 < 4400:
            name = "x" * 250
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
            depth += 1
        leaf = os.open("far.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"far = 1\n")
        os.close(leaf)
    finally:
        os.close(fd)
    cb = load_codebase(fast_tmp)
    assert "ok.py" in cb.files
    assert not any(p.endswith("far.py") for p in cb.files)
    [skip] = cb.metadata.skipped
    assert skip.reason == "unreadable: File name too long"
    assert skip.path.startswith("x" * 250 + "/") and skip.path.endswith("/")


def test_a_repository_of_only_binary_files_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    (tmp_path / "b.so").write_bytes(b"\x7fELF")
    (tmp_path / "c.data").write_bytes(b"\x00\x01\x02")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.js").write_text("x\n")
    with pytest.raises(CodebaseError) as info:
        load_codebase(tmp_path)
    assert str(info.value) == (
        f"{tmp_path} has no text files to analyse (4 skipped: 3 binary, 1 junk-directory); "
        "pass the directory that holds the source code"
    )


def test_special_files_are_skipped(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs mkfifo")
    (tmp_path / "ok.py").write_text("ok = 1\n")
    os.mkfifo(tmp_path / "pipe")  # opening it for reading would block forever
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["ok.py"]
    assert reasons(cb) == {"pipe": "not-a-regular-file"}


def test_hard_links_to_files_outside_the_root_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "credentials.txt"
    secret.write_text("AWS_SECRET=canary-hard-link\n")
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "app.py").write_text("app = 1\n")
    try:
        os.link(secret, repo / "pkg" / "notes.txt")
    except OSError as exc:
        pytest.skip(f"cannot make hard links here: {exc}")
    # Two names inside the root (and no other): loaded once, under the first name.
    (repo / "a.py").write_text("shared = 1\n")
    os.link(repo / "a.py", repo / "pkg" / "b.py")
    # Two names inside the root, one of them ignored: the walk cannot see it, so skipped.
    (repo / ".gitignore").write_text("ignored/\n")
    (repo / "ignored").mkdir()
    (repo / "c.py").write_text("c = 1\n")
    os.link(repo / "c.py", repo / "ignored" / "c.py")
    cb = load_codebase(repo)
    assert sorted(cb.files) == [".gitignore", "a.py", "app.py"]
    assert not any("canary-hard-link" in text for text in cb.files.values())
    assert reasons(cb) == {
        "c.py": "hard-link (2 names, 1 in the loaded tree; the others may be outside the root)",
        "pkg/b.py": "hard-link-inside-root (to a.py, loaded under that path)",
        "pkg/notes.txt": (
            "hard-link (2 names, 1 in the loaded tree; the others may be outside the root)"
        ),
    }


def test_control_characters_in_names_are_escaped_wherever_a_name_is_shown(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ok.py").write_text("ok = 1\n")
    forged = "evil.txt\n  FORGED_LINE.py"
    (repo / forged).write_text("text\n")
    (repo / "term\x1b[2J\x1b[31m.md").write_text("# red\n")
    (repo / "gnp.\u202eexe.py").write_text("if __name__ == '__main__':\n    pass\n")
    (repo / "dir\rname").mkdir()
    (repo / "dir\rname" / "inner.py").write_text("inner = 1\n")
    (repo / "bin\n.png").write_bytes(b"\x89PNG")
    (repo / "latin\x9b.txt").write_bytes(b"caf\xe9\n")  # a C1 CSI in the name, bad UTF-8 in it
    cb = load_codebase(repo)
    # The data keeps the raw names: they are the keys the root's code reads files by.
    assert forged in cb.files and "dir\rname/inner.py" in cb.files
    # The tree has one line per entry: no name adds a line or carries a control character.
    tree = cb.file_tree.splitlines()
    assert len(tree) == 1 + 1 + len(cb.files)  # root, one directory, every file
    assert "  evil.txt\\n  FORGED_LINE.py" in tree
    assert "  dir\\rname/" in tree and "  term\\x1b[2J\\x1b[31m.md" in tree
    assert "  gnp.\\u202eexe.py" in tree
    assert not any(ch in cb.file_tree for ch in "\r\x1b\x9b\u202e")
    md = cb.metadata
    assert md.entry_points == ["gnp.\\u202eexe.py"]
    assert reasons(cb) == {"bin\\n.png": "binary"}
    assert "decoded with replacement (not valid UTF-8): latin\\x9b.txt" in md.notes
    assert any(p == "evil.txt\\n  FORGED_LINE.py" for p, _ in md.largest_files)
    shown = repr(md.to_dict())  # nothing raw left anywhere in the metadata
    assert not any(ch in str(md.to_dict()) for ch in "\n\r\x1b\x9b\u202e"), shown


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_a_bind_mount_loop_is_walked_once(tmp_path: Path) -> None:
    """A directory mounted inside itself (no symlink involved) is listed, not walked forever;
    in a private user and mount namespace, so nothing outside the test sees the mount."""
    repo = tmp_path / "repo"
    (repo / "loop").mkdir(parents=True)
    (repo / "app.py").write_text("app = 1\n")
    probe = (
        "import json, sys; from deeprepo.codebase import load_codebase; "
        "cb = load_codebase(sys.argv[1]); "
        "print(json.dumps([sorted(cb.files), {s.path: s.reason for s in cb.metadata.skipped}]))"
    )
    script = f'mount --bind "$1" "$1/loop" && exec "{sys.executable}" -c "$2" "$1"'
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(repo), probe],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    files, skipped = json.loads(done.stdout)
    assert files == ["app.py"]
    assert skipped == {"loop/": "directory-loop (already walked)"}


def test_names_that_are_not_utf8_and_collide_once_cleaned_are_not_overwritten(
    tmp_path: Path,
) -> None:
    base = os.fsencode(tmp_path)
    for raw, text in ((b"a\xff.py", b"first = 1\n"), (b"a\xfe.py", b"second = 2\n")):
        with open(os.path.join(base, raw), "wb") as fh:
            fh.write(text)
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["a\ufffd.py"]
    assert cb.files["a\ufffd.py"] in ("first = 1\n", "second = 2\n")
    assert reasons(cb) == {
        "a\ufffd.py": "name-collision (another file shows the same name; not loaded)"
    }
    assert cb.metadata.lines == 1


def test_a_tree_of_hard_links_is_a_clear_error(tmp_path: Path) -> None:
    original = tmp_path / "original"
    original.mkdir()
    (original / "a.py").write_text("a = 1\n")
    copy = tmp_path / "copy"
    copy.mkdir()
    try:
        os.link(original / "a.py", copy / "a.py")  # as `cp -al` makes
    except OSError as exc:
        pytest.skip(f"cannot make hard links here: {exc}")
    with pytest.raises(CodebaseError) as info:
        load_codebase(copy)
    assert str(info.value) == (
        f"{copy} has no text files to analyse (1 skipped: 1 hard-link); pass the directory "
        "that holds the source code, copy a tree of hard links (`cp -al`, a backup) with "
        "`cp -r` first"
    )
