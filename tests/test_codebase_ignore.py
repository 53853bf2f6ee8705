"""``.gitignore`` matching: git's semantics (checked against git itself), and patterns that
cannot make the loader backtrack catastrophically."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from deeprepo.codebase import load_codebase
from deeprepo.codebase import loader as loader_module
from deeprepo.codebase.ignore import IgnoreRules

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Each was a hang with a backtracking regex: ten stars, ten ``**``, stars glued to a literal
# prefix (git makes those a ``**``), negated classes between stars.
PATHOLOGICAL = [
    "*a*a*a*a*a*a*a*a*a*a*b",
    "**/a*a*a*a*a*a*a*a*a*a*b/**",
    "a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/b",
    "/a**a**a**a**a**a**a**a**/b",
    "[a][a]*[a]*[!b]*[a]*[a]*[a]*[a]*[a]*[a]*b",
    "?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*b",
]


def test_pathological_patterns_and_a_4000_character_path_load_and_match(tmp_path: Path) -> None:
    # A backtracking matcher never returns on these (it hangs, which is the failure); how fast
    # they load is benchmarks/bench_speed_targets.py's to measure.
    (tmp_path / ".gitignore").write_text("\n".join(PATHOLOGICAL) + "\n")
    (tmp_path / "ok.py").write_text("ok = 1\n")
    deep = tmp_path
    while len(str(deep)) < 3700:  # names of 250 characters (NAME_MAX is 255)
        deep = deep / ("a" * 250)
    deep.mkdir(parents=True)
    (deep / ("a" * 250)).write_text("deep = 1\n")
    rel = str((deep / ("a" * 250)).relative_to(tmp_path))
    assert len(str(tmp_path / rel)) > 3900
    cb = load_codebase(tmp_path)
    assert sorted(cb.files) == sorted([".gitignore", "ok.py", rel])
    # The same rules, matched directly against a 4,000-character name of one segment.
    rules = IgnoreRules(PATHOLOGICAL)
    assert rules.match("a" * 4000, False) is None
    assert rules.match("a" * 4000 + "b", False) is True
    assert rules.match("/".join(["a"] * 2000), True) is None


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "expected"),
    [
        # The literal prefix of an anchored pattern: stars after it and before "/" are "**".
        ("/a**/b", "ab", False, True),
        ("/a**/b", "a/x/b", False, True),
        ("/a**/b", "ax/b", False, True),
        ("/x/a**b", "x/ab", False, True),
        ("/x/a**b", "x/a/b", False, None),
        ("/a**", "a/x/b", False, True),
        # Elsewhere, "**" glued to other characters is one star; "/**" is everything inside.
        ("a**b", "x/axb", False, True),
        ("a**b", "a/b", False, None),
        ("/a/**b", "a/xb", False, True),
        ("/a/**b", "a/x/b", False, None),
        ("dir/**", "dir", True, None),
        ("dir/**", "dir/x/y.py", False, True),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("**/b", "x/y/b", True, True),
        # Classes never match "/", negated or not; POSIX classes; escapes.
        ("x[!a]y", "x/y", False, None),
        ("x[%-0]y", "x/y", False, None),
        ("[[:digit:]]*.log", "logs/7a.log", False, True),
        ("\\!important", "!important", False, True),
        ("\\#hash", "#hash", False, True),
        ("trailing\\ ", "trailing ", False, True),
        ("trailing   ", "trailing", False, True),
        # Directories only; anchoring; negation.
        ("build/", "build", False, None),
        ("build/", "src/build", True, True),
        ("/build", "src/build", True, None),
        ("!keep.log", "keep.log", False, False),
    ],
)
def test_git_pattern_semantics(pattern: str, path: str, is_dir: bool, expected: bool) -> None:
    assert IgnoreRules([pattern]).match(path, is_dir) is expected


def test_invalid_lines_are_skipped_with_a_note_and_the_rest_applies(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n[z-a]\nbad\\\n[[:nope:]]\n")
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "debug.log").write_text("noise\n")
    cb = load_codebase(tmp_path)
    assert sorted(cb.files) == [".gitignore", "a.py"]
    notes = [n for n in cb.metadata.notes if "is not a valid pattern" in n]
    assert notes == [
        ".gitignore line 2 is not a valid pattern (reversed range z-a); that line was not applied",
        ".gitignore line 3 is not a valid pattern (a pattern cannot end with a backslash); "
        "that line was not applied",
        ".gitignore line 4 is not a valid pattern (unknown character class [:nope:]); "
        "that line was not applied",
    ]


def test_a_fifo_or_symlink_as_an_ignore_file_is_not_read(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs mkfifo")
    (tmp_path / ".git" / "info").mkdir(parents=True)
    os.mkfifo(tmp_path / ".git" / "info" / "exclude")  # a plain open() blocks forever
    secret = tmp_path.parent / f"{tmp_path.name}-rules"
    secret.write_text("*.py\n")
    os.symlink(secret, tmp_path / ".gitignore")
    (tmp_path / "a.py").write_text("a = 1\n")
    cb = load_codebase(tmp_path)  # returning at all is the point: the FIFO was not opened to read
    assert list(cb.files) == ["a.py"]  # the linked rules did not apply


def test_an_oversized_ignore_file_is_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader_module, "MAX_IGNORE_FILE_BYTES", 100)
    (tmp_path / ".gitignore").write_text("*.py\n" + "#" * 200 + "\n")
    (tmp_path / "a.py").write_text("a = 1\n")
    cb = load_codebase(tmp_path)
    assert "a.py" in cb.files
    assert ".gitignore is 206 bytes (more than 100); its rules were not applied" in (
        cb.metadata.notes
    )


def test_too_many_rules_in_all_stop_applying_further_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader_module, "MAX_IGNORE_RULES", 3)
    (tmp_path / ".gitignore").write_text("*.log\n*.tmp\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("*.py\n*.md\n")
    (tmp_path / "sub" / "a.py").write_text("a = 1\n")
    (tmp_path / "x.log").write_text("x\n")
    cb = load_codebase(tmp_path)
    assert "sub/a.py" in cb.files and "x.log" not in cb.files
    assert (
        "sub/.gitignore was not applied: the ignore files hold more than 3 rules in all"
        in cb.metadata.notes
    )


def test_a_repository_inside_an_ignored_folder_of_another_loads_whole(tmp_path: Path) -> None:
    # `deeprepo tasks generate` writes into a folder the project's .gitignore names; the
    # generated repository (itself a git repository) must load where it was written.
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("vendor/\n*.py\n")
    inner = tmp_path / "vendor" / "lib"
    (inner / ".git" / "info").mkdir(parents=True)
    (inner / ".git" / "info" / "exclude").write_text("*.bak\n")
    (inner / "x.py").write_text("x = 1\n")
    (inner / "y.py").write_text("y = 1\n")
    (inner / "old.bak").write_text("excluded by the inner repository's own rules\n")
    cb = load_codebase(inner)
    assert list(cb.files) == ["x.py", "y.py"] and cb.metadata.ignored == 1
    assert load_codebase(inner, respect_gitignore=False).metadata.files == 3


# ---------------------------------------------------------------------------- against git

ATOMS = ["a", "b", "ab", "*", "?", "**", "***", "[ab]", "[!a]", "[^b]", "[]a]", "[a-]",
         "[a-c]", "[[:alpha:]]", "x.py", "*.py", "c", "\\*", "\\ ", " ", "#"]  # fmt: skip
NAMES = ["a", "b", "ab", "ba", "x.py", "a.py", "c", "abc", "aa", "bab", "a b", "[ab]"]


def _pattern(rng: random.Random) -> str:
    segments = ("".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 3))) for _ in range(3))
    p = "/".join(list(segments)[: rng.randint(1, 3)])
    p = ("/" if rng.random() < 0.2 else "") + p + ("/" if rng.random() < 0.25 else "")
    return ("!" if rng.random() < 0.3 else "") + p


def _random_tree(rng: random.Random, root: Path) -> None:
    files: set[str] = set()
    for _ in range(25):
        parts = [rng.choice(NAMES) for _ in range(rng.randint(1, 4))]
        path = "/".join(parts)
        if any("/".join(parts[:i]) in files for i in range(1, len(parts))):
            continue  # a file where a directory must be
        if any(f.startswith(path + "/") for f in files):
            continue
        files.add(path)
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("x\n")
    dirs = sorted({f.rsplit("/", 1)[0] for f in files if "/" in f})
    ignore_dirs = [""] + [d for d in dirs if rng.random() < 0.3]
    for d in ignore_dirs:
        lines = [_pattern(rng) for _ in range(rng.randint(1, 4))]
        (root / d / ".gitignore").write_text("\n".join(lines) + "\n")
    (root / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text(_pattern(rng) + "\n")


@pytest.mark.e2e
@needs_git
def test_the_loader_ignores_exactly_what_git_ignores(tmp_path: Path) -> None:
    rng = random.Random(20261124)
    for trial in range(60):
        root = tmp_path / f"t{trial}"
        root.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        _random_tree(rng, root)
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
        want = sorted(p for p in listed.decode().split("\0") if p)
        try:
            got = sorted(load_codebase(root).files)
        except Exception as exc:  # everything ignored
            assert "no text files" in str(exc)
            got = []
        rules = {
            str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.name in (
                ".gitignore", "exclude")
        }  # fmt: skip
        assert got == want, rules
