"""The codebase loader: ignore rules, skips, decoding, metadata, tree, git revisions, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deeprepo.base.errors import CodebaseError, UsageError
from deeprepo.codebase import Codebase, SkippedFile, load_codebase
from deeprepo.codebase.languages import extension, find_entry_points, language_of
from deeprepo.codebase.tree import build_tree


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path → text or bytes) under ``root``."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


def skipped(cb: Codebase) -> dict[str, str]:
    return {s.path: s.reason for s in cb.metadata.skipped}


# ---------------------------------------------------------------------------- ignore rules


def test_gitignore_root_nested_and_negation(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".gitignore": "*.log\nout/\n!keep.log\n",
            "a.py": "x = 1\n",
            "debug.log": "noise\n",
            "keep.log": "kept\n",
            "out/gen.py": "generated\n",
            "sub/.gitignore": "secret.txt\n!important.log\n/only_here.txt\n",
            "sub/secret.txt": "s\n",
            "sub/important.log": "re-included by the nested file\n",
            "sub/other.log": "still ignored by the root file\n",
            "sub/only_here.txt": "anchored to sub/\n",
            "sub/deeper/only_here.txt": "not matched by the anchored rule\n",
            "other/secret.txt": "the nested rule does not reach here\n",
        },
    )
    cb = load_codebase(tmp_path)
    assert list(cb.files) == [
        ".gitignore",
        "a.py",
        "keep.log",
        "other/secret.txt",
        "sub/.gitignore",
        "sub/deeper/only_here.txt",
        "sub/important.log",
    ]
    # debug.log, out/, sub/secret.txt, sub/other.log, sub/only_here.txt
    assert "5 paths matched .gitignore rules and were not loaded" in cb.metadata.notes
    assert cb.metadata.skipped == []  # ignored paths are counted, not listed

    everything = load_codebase(tmp_path, respect_gitignore=False)
    assert everything.metadata.files == 12
    assert "out/gen.py" in everything.files


def test_only_the_targets_own_ignore_rules_apply_never_an_enclosing_repositorys(
    tmp_path: Path,
) -> None:
    # A subfolder analysed on its own is a project of its own: the ignore files above it
    # (the enclosing repository's .gitignore and .git/info/exclude) are not its rules.
    write(
        tmp_path,
        {
            ".git/info/exclude": "*.bak\n",
            ".gitignore": "*.tmp\nsub/generated/\n",
            "sub/a.py": "a = 1\n",
            "sub/a.tmp": "ignored only by the top .gitignore\n",
            "sub/a.bak": "ignored only by .git/info/exclude\n",
            "sub/generated/g.py": "ignored only by a rule written relative to the top\n",
            "sub/.gitignore": "*.log\n",
            "sub/debug.log": "ignored by the target's own .gitignore\n",
        },
    )
    cb = load_codebase(tmp_path / "sub")
    assert list(cb.files) == [".gitignore", "a.bak", "a.py", "a.tmp", "generated/g.py"]
    assert cb.metadata.root == "sub" and cb.metadata.ignored == 1
    # At the repository's top, its .git/info/exclude is the target's own and applies.
    top = load_codebase(tmp_path)
    assert "sub/a.bak" not in top.files and "sub/a.tmp" not in top.files


def test_junk_and_vcs_directories_are_listed_once_not_file_by_file(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"node_modules/pkg{i}/index.js": "x\n" for i in range(30)}
    files.update(
        {
            "src/__pycache__/m.cpython-311.pyc": b"\x00\x01",
            "src/m.py": "m = 1\n",
            ".venv/lib/site.py": "venv\n",
            ".git/HEAD": "ref: refs/heads/main\n",
            "build/out.js": "built\n",
        }
    )
    cb = load_codebase(write(tmp_path, files))
    assert list(cb.files) == ["src/m.py"]
    assert cb.metadata.skipped == [
        SkippedFile(".venv/", "junk-directory"),
        SkippedFile("build/", "junk-directory"),
        SkippedFile("node_modules/", "junk-directory"),
        SkippedFile("src/__pycache__/", "junk-directory"),
    ]


# ---------------------------------------------------------------------------- skips and decoding


def test_binary_and_oversized_files_are_skipped_with_reasons(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "logo.png": "text inside, but the extension says binary",
            "blob.dat2": b"head\x00tail",
            "late_nul.txt": b"a" * 9000 + b"\x00",  # NUL past the 8 KiB sniff: text
            "exact.py": "x" * 10_000,
            "big.py": "y" * 10_001,
            "small.py": "ok\n",
        },
    )
    cb = load_codebase(tmp_path, max_file_bytes=10_000)
    assert list(cb.files) == ["exact.py", "late_nul.txt", "small.py"]
    assert skipped(cb) == {
        "big.py": "too-large (10,001 bytes > 10,000)",
        "blob.dat2": "binary",
        "logo.png": "binary",
    }
    # The default limit (1,000,000) loads big.py.
    assert "big.py" in load_codebase(tmp_path).files


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"secret.txt": "TOP SECRET\n"})
    root = write(tmp_path / "repo", {"a.py": "print('a')\n", "pkg/b.py": "b = 2\n"})
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "leakdir")
    os.symlink("a.py", root / "alias.py")
    os.symlink("pkg", root / "pkg_alias")
    os.symlink("missing.py", root / "dangling.py")
    cb = load_codebase(root)
    assert list(cb.files) == ["a.py", "pkg/b.py"]
    assert not any("TOP SECRET" in text for text in cb.files.values())
    assert skipped(cb) == {
        "alias.py": "symlink-inside-root (to a.py, loaded under that path)",
        "dangling.py": "broken-symlink",
        "leak.txt": "symlink-outside-root",
        "leakdir": "symlink-outside-root",
        "pkg_alias": "symlink-inside-root (to pkg, loaded under that path)",
    }


def test_text_encodings_are_decoded_and_noted(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "latin.txt": "café\n".encode("latin-1"),
            "bom.py": b"\xef\xbb\xbfprint(1)\n",
            "wide.txt": "hé\n".encode("utf-16"),
            "plain.py": "naïve = 'ünïcode'\n",
        },
    )
    cb = load_codebase(tmp_path)
    assert cb.files["latin.txt"] == "caf\ufffd\n"
    assert cb.files["bom.py"] == "print(1)\n"  # BOM dropped, no note
    assert cb.files["wide.txt"] == "hé\n"
    assert cb.files["plain.py"] == "naïve = 'ünïcode'\n"
    assert cb.metadata.notes == [
        "decoded as UTF-16: wide.txt",
        "decoded with replacement (not valid UTF-8): latin.txt",
    ]


# ---------------------------------------------------------------------------- metadata and tree

SMALL = {
    "app/__init__.py": "",
    "app/main.py": 'print("hi")\n',
    "app/util.py": "def f():\n    return 1\n",
    "web/index.js": "console.log(1)",
    "README.md": "# Demo\n\nText\n",
}


def test_metadata_numbers_are_exact(tmp_path: Path) -> None:
    root = write(tmp_path / "demo", dict(SMALL))
    cb = load_codebase(root)
    md = cb.metadata
    assert list(cb.files) == sorted(SMALL)
    assert cb.files == SMALL
    assert (md.root, md.files, md.chars, md.lines) == ("demo", 5, 61, 7)
    assert list(md.languages.items()) == [("Python", 3), ("JavaScript", 1), ("Markdown", 1)]
    assert md.largest_files == [
        ("app/util.py", 22),
        ("web/index.js", 14),
        ("README.md", 13),
        ("app/main.py", 12),
        ("app/__init__.py", 0),
    ]
    assert md.entry_points == ["app/main.py", "web/index.js"]
    assert (md.skipped, md.notes, md.revision) == ([], [], None)
    payload = json.loads(json.dumps(cb.payload()))
    assert payload["metadata"]["largest_files"][0] == ["app/util.py", 22]
    assert payload["codebase"] == SMALL


def test_tree_format(tmp_path: Path) -> None:
    cb = load_codebase(write(tmp_path / "demo", dict(SMALL)))
    assert cb.file_tree == (
        "demo/\n"
        "  app/\n"
        "    __init__.py\n"
        "    main.py\n"
        "    util.py\n"
        "  web/\n"
        "    index.js\n"
        "  README.md"
    )


def test_tree_is_capped_with_a_note() -> None:
    paths = [f"d{i}/f{j}.py" for i in range(10) for j in range(10)]  # 10 dirs + 100 files
    tree = build_tree(paths, root_name="r", max_lines=12)
    lines = tree.splitlines()
    assert lines[:4] == ["r/", "  d0/", "    f0.py", "    f1.py"]
    assert len(lines) == 13
    assert lines[-1].startswith("... (99 more entries not shown; the tree is capped at 12 lines")
    assert build_tree(paths, root_name="r").count("\n") == 110  # uncapped: 1 + 110 lines


def test_output_is_deterministic(tmp_path: Path) -> None:
    names = [f"m{(i * 7919) % 50}/f{i}.py" for i in range(200)]
    write(tmp_path, {n: f"v = {i}\n" for i, n in enumerate(names)})
    first, second = load_codebase(tmp_path), load_codebase(tmp_path)
    assert first == second
    assert list(first.files) == sorted(first.files)


def test_languages_by_extension_and_name() -> None:
    assert language_of("src/App.TSX") == "TypeScript"
    assert language_of("docker/Dockerfile") == "Dockerfile"
    assert language_of("Makefile") == "Makefile"
    assert language_of(".eslintrc.json") == "JSON"
    assert language_of("notes.unknownext") is None
    assert language_of(".bashrc") is None
    assert extension("a/b.tar.GZ") == ".gz"
    assert extension("dir.d/noext") == ""


def test_entry_points_heuristics() -> None:
    files = {
        "cli/run.py": "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
        "cli/reversed.py": 'if "__main__" == __name__:\n    pass\n',
        "cli/mentions.py": 'NAME = "__main__"  # not a guard\n',
        "pkg/__main__.py": "",
        "package.json": json.dumps({"main": "lib/start", "bin": {"tool": "./bin/tool.js"}}),
        "lib/start.js": "",
        "bin/tool.js": "",
        "web/package.json": json.dumps({"main": "dist/missing.js", "bin": "cli"}),
        "web/cli/index.js": "",
        "pyproject.toml": (
            '[project.scripts]\nmy = "mypkg.cli:main"\n'
            '[tool.poetry.scripts]\nold = "mypkg.legacy:run"\n'
        ),
        "src/mypkg/cli.py": "",
        "src/mypkg/legacy/__init__.py": "",
        "broken/package.json": "{ not json",
        "broken/pyproject.toml": "[project\n",
    }
    assert find_entry_points(files) == [
        "bin/tool.js",
        "cli/reversed.py",
        "cli/run.py",
        "lib/start.js",
        "pkg/__main__.py",
        "src/mypkg/cli.py",
        "src/mypkg/legacy/__init__.py",
        "web/cli/index.js",
    ]


# ---------------------------------------------------------------------------- git revisions

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def two_commits(tmp_path: Path) -> tuple[Path, str, str]:
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, {"a.py": "v1\n", "old.py": "old\n", "sub/s.py": "s1\n", "img.png": b"\x89PNG"})
    os.symlink("/etc/passwd", repo / "passwd")
    os.symlink("a.py", repo / "alias.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    first = git(repo, "rev-parse", "HEAD")
    write(repo, {"a.py": "v2\n", "new.py": "new\n", "sub/s.py": "s2\n"})
    (repo / "old.py").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    second = git(repo, "rev-parse", "HEAD")
    write(repo, {"a.py": "uncommitted\n"})
    return repo, first, second


@pytest.mark.e2e
@needs_git
def test_git_revision_is_read_without_checkout(two_commits: tuple[Path, str, str]) -> None:
    repo, first, second = two_commits
    old = load_codebase(repo, rev=first)
    assert old.files == {"a.py": "v1\n", "old.py": "old\n", "sub/s.py": "s1\n"}
    assert old.metadata.revision == first
    assert f"loaded git revision {first!r} = {first}, not the files on disk" in old.metadata.notes
    assert skipped(old) == {
        "alias.py": "symlink-inside-root (to a.py, loaded under that path)",
        "img.png": "binary",
        "passwd": "symlink-outside-root",
    }
    head = load_codebase(repo, rev="HEAD")
    assert head.files == {"a.py": "v2\n", "new.py": "new\n", "sub/s.py": "s2\n"}
    assert head.metadata.revision == second
    assert load_codebase(repo, rev="HEAD~1").files == old.files
    assert load_codebase(repo).files["a.py"] == "uncommitted\n"  # the disk is untouched
    assert (repo / "a.py").read_text() == "uncommitted\n"
    # A subdirectory of the work tree loads that part of the commit, paths relative to it.
    assert load_codebase(repo / "sub", rev=first).files == {"s.py": "s1\n"}


@pytest.mark.e2e
@needs_git
def test_git_revision_errors(two_commits: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, _, _ = two_commits
    with pytest.raises(CodebaseError, match=r"revision 'no-such-branch' was not found"):
        load_codebase(repo, rev="no-such-branch")
    with pytest.raises(CodebaseError, match=r"revision '--all' is not valid"):
        load_codebase(repo, rev="--all")
    plain = write(tmp_path / "plain", {"a.py": "1\n"})
    with pytest.raises(
        CodebaseError, match=r"cannot read revision 'HEAD'.*inside a git repository"
    ):
        load_codebase(plain, rev="HEAD")


# ---------------------------------------------------------------------------- errors


def test_missing_path_is_a_codebase_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(CodebaseError) as info:
        load_codebase(missing)
    assert str(info.value).startswith(f"{missing} does not exist; check the path")
    assert isinstance(info.value, UsageError) and info.value.exit_code == 2


def test_a_file_is_a_codebase_error(tmp_path: Path) -> None:
    f = write(tmp_path, {"one.py": "x\n"}) / "one.py"
    with pytest.raises(CodebaseError) as info:
        load_codebase(f)
    assert str(info.value) == f"{f} is a file; pass the directory that contains it"


def test_empty_directory_is_a_codebase_error(tmp_path: Path) -> None:
    with pytest.raises(CodebaseError) as info:
        load_codebase(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path} has no text files to analyse (0 skipped)")
    assert "\n" not in message


def test_everything_ignored_suggests_turning_gitignore_off(tmp_path: Path) -> None:
    write(tmp_path, {".gitignore": "*\n", "a.py": "x\n"})
    with pytest.raises(CodebaseError, match=r"2 ignored by \.gitignore.*respect_gitignore=False"):
        load_codebase(tmp_path)


def test_everything_too_large_suggests_raising_the_limit(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "x" * 50, "b.py": "y" * 60})
    with pytest.raises(CodebaseError) as info:
        load_codebase(tmp_path, max_file_bytes=10)
    assert "(2 skipped: 2 too-large)" in str(info.value)
    assert "raise max_file_bytes (now 10)" in str(info.value)


def test_a_codebase_reprs_as_a_summary_not_its_text(tmp_path: Path) -> None:
    # asyncio.run reprs the main task's result as it ends (its SIGINT handler's repr): a
    # RunHandle holding every file's text made that a copy of the repository in memory.
    (tmp_path / "big.py").write_text("x = 1\n" * 100_000)
    (tmp_path / "small.py").write_text("y = 2\n")
    cb = load_codebase(tmp_path)
    shown = repr(cb)
    assert shown == f"Codebase(root={cb.metadata.root!r}, files=2, chars={cb.metadata.chars})"
    assert len(shown) < 300 and "x = 1" not in shown
