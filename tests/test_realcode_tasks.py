"""Tasks on the real-code substrate: vendored data, determinism, exact ground truth, valid
code, and bug placement independent of file size and position."""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import math
import re
import shutil
import subprocess
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deeprepo.base.errors import UsageError
from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory, parse_task_spec
from deeprepo.rl.tasks import GeneratedTask, generate_task, generate_tasks
from deeprepo.rl.tasks.realcode import corpus, licence_text, manifest, packages
from deeprepo.rl.tasks.realtask import NOTICES, plantable

PERMISSIVE = re.compile(
    r"^(MIT|ISC|BSD-[23]-Clause|Apache-2\.0|PSF-2\.0)( OR (MIT|BSD-[23]-Clause|Apache-2\.0))?$"
)
SPECS = [
    (size, lang, seed)
    for size in ("small", "medium")
    for lang in ("python", "js", "mixed")
    for seed in (1, 2)
]


@cache
def task(size: str, lang: str, seed: int) -> GeneratedTask:
    return generate_task(seed, size, lang, "real")


@lru_cache(maxsize=2)
def originals(lang: str) -> dict[str, str]:
    return {f.path: f.text for f in corpus(lang)}


def original(path: str) -> str:
    return {**originals("python"), **originals("js")}[path]


# --- the vendored data ---------------------------------------------------------------------------


def test_every_vendored_file_has_a_manifest_entry_with_its_sha256_and_a_licence() -> None:
    data = resources.files("deeprepo.rl.tasks").joinpath("realcode")
    by_name = {p.name: p for p in packages()}
    texts = {f.path: f for lang in ("python", "js") for f in corpus(lang)}
    assert len(texts) == len(manifest()["files"]) >= 300
    for entry in manifest()["files"]:
        f = texts[entry["path"]]
        assert hashlib.sha256(f.text.encode()).hexdigest() == entry["sha256"]
        assert f.package in by_name, f.path
        assert f.anchors and all(a > f.import_after for a in f.anchors), f.path
        assert "⟦" not in f.text, f.path  # would read as a ground-truth mark
    for p in packages():
        assert PERMISSIVE.match(p.licence), p
        assert re.fullmatch(r"(pypi:[\w.-]+==[\w.]+|npm:[\w.-]+@[\w.]+)", p.source), p
        assert len(p.archive_sha256) == 64 and p.files > 0, p
        assert data.joinpath(p.licence_file).is_file() and len(licence_text(p)) > 200, p
    assert {p.name for p in packages()} == {f.package for f in texts.values()}
    assert 10 <= sum(p.source.startswith("pypi:") for p in packages()) <= 25
    assert 10 <= sum(p.source.startswith("npm:") for p in packages()) <= 30
    size = sum(f.stat().st_size for f in Path(str(data)).rglob("*") if f.is_file())
    assert size < 3_000_000


def test_python_anchors_are_top_level_statement_boundaries() -> None:
    for f in corpus("python"):
        lines = f.text.split("\n")
        for a in f.anchors:
            probe = "\n".join(
                [*lines[: a - 1], "", "", "def __probe__():", "    pass", "", "", *lines[a - 1 :]]
            )
            ast.parse(probe)


# --- tasks -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size,lang,seed", SPECS[:6])
def test_same_seed_same_task_byte_for_byte(size: str, lang: str, seed: int) -> None:
    a, b = generate_task(seed, size, lang, "real"), generate_task(seed, size, lang, "real")
    assert a.files == b.files and a.ground_truth_json() == b.ground_truth_json()
    assert json.dumps(a.files) == json.dumps(b.files)
    other = generate_task(seed + 100, size, lang, "real")
    assert other.files != a.files
    assert a.task_id == f"{size}-{lang}-real-{seed}"


def test_written_tasks_are_byte_identical_and_the_synthetic_default_is_unchanged(
    tmp_path: Path,
) -> None:
    for out in (tmp_path / "a", tmp_path / "b"):
        generate_tasks(out, seed=5, n=2, size="small", lang="js", substrate="real")
    files_a = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    assert generate_task(5, "small", "python").task_id == "small-python-5"
    assert (
        generate_task(5, "small", "python").files
        == generate_task(5, "small", "python", "synthetic").files
    )


@pytest.mark.parametrize("size,lang,seed", SPECS)
def test_size_band_licences_and_one_block_per_code_file(size: str, lang: str, seed: int) -> None:
    t = task(size, lang, seed)
    lo, hi = {"small": (5, 15), "medium": (30, 60)}[size]
    assert lo <= len(t.files) <= hi
    notices = t.files[NOTICES]
    code = {p: text for p, text in t.files.items() if p != NOTICES}
    for path, text in code.items():
        pkg = next(f.package for lang_ in ("python", "js") for f in corpus(lang_) if f.path == path)
        assert pkg in notices, path
        before, after = original(path).split("\n"), text.split("\n")
        grown = [
            op
            for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
            if op[0] != "equal"
        ]
        assert grown and all(op[0] == "insert" for op in grown), path  # host lines never edited
    assert len(t.bugs) >= 1 and len(t.ground_truth) <= len(code)


def _inserted(before: str, after: str) -> set[int]:
    sm = difflib.SequenceMatcher(None, before.split("\n"), after.split("\n"), autojunk=False)
    return {j + 1 for op, _, _, j1, j2 in sm.get_opcodes() if op == "insert" for j in range(j1, j2)}


def _sink_regexes(lang: str) -> dict[str, list[re.Pattern[str]]]:
    out: dict[str, list[re.Pattern[str]]] = {}
    for s in plantable(lang):
        for line in s.block.code.split("\n"):
            if "⟦sink⟧" not in line:
                continue
            text = re.sub(r"\s*⟦\w+⟧", "", line).strip().rstrip(";")
            parts = re.split(r"(«[\w.:]+»|[\"'])", text)
            rx = "".join(
                ".+?" if p.startswith("«") else "[\"']" if p in ('"', "'") else re.escape(p)
                for p in parts
            )
            # The planter adapts declarations to the host's style (var in old CommonJS files).
            rx = re.sub(r"^(?:const|let|var)\\ ", r"(?:const|let|var)\\ ", rx)
            out.setdefault(s.kind, []).append(re.compile(rx + r";?"))
    return out


@pytest.mark.parametrize("size,lang,seed", SPECS)
def test_ground_truth_is_at_the_planted_lines(size: str, lang: str, seed: int) -> None:
    t = task(size, lang, seed)
    sinks = {lg: _sink_regexes(lg) for lg in ("python", "js")}
    for e in t.ground_truth:
        text = t.files[e.file]
        lines = text.split("\n")
        inserted = _inserted(original(e.file), text)
        assert set(range(e.start_line, e.end_line + 1)) <= inserted, e
        assert e.start_line <= e.sink_line <= e.end_line
        named = re.findall(r"`(\w+)", e.description)
        assert not named or any(n in lines[i - 1] for n in named for i in inserted), e
        sink = lines[e.sink_line - 1].strip()
        lg = "python" if e.file.endswith(".py") else "js"
        assert any(rx.fullmatch(sink) for rx in sinks[lg][e.kind]), (e, sink)


def test_planted_python_parses_and_js_passes_node_check(tmp_path: Path) -> None:
    node = shutil.which("node")
    for size, lang, seed in [*SPECS, ("large", "mixed", 1)]:
        t = task(size, lang, seed)
        for path, text in t.files.items():
            if path.endswith(".py"):
                ast.parse(text, filename=path)
            elif path.endswith((".js", ".cjs", ".mjs")) and node:
                esm = next(f.esm for f in corpus("js") if f.path == path)
                f = tmp_path / ("check.mjs" if esm else "check.cjs")
                f.write_text(text, encoding="utf-8")
                r = subprocess.run([node, "--check", str(f)], capture_output=True, text=True)
                assert r.returncode == 0, (path, r.stderr[-400:])
    if node is None:
        pytest.skip("node is not installed: JS files were not checked (Python files were)")


# --- placement without tells ---------------------------------------------------------------------

STAT_SEEDS = range(200, 240)


@lru_cache(maxsize=1)
def _placement() -> tuple[int, int, float, list[float], list[float]]:
    """Over many small tasks: bugs in the larger half of their task's code files, bugs, the
    share expected by chance, and the relative positions of bug blocks and of clean blocks."""
    hits = total = 0
    expected = 0.0
    bug_rel: list[float] = []
    clean_rel: list[float] = []
    for lang in ("python", "js"):
        for seed in STAT_SEEDS:
            t = task("small", lang, seed)
            sizes = {p: text.count("\n") for p, text in t.files.items() if p != NOTICES}
            ranked = sorted(sizes.values())
            median = ranked[len(ranked) // 2]
            larger = {p for p, n in sizes.items() if n > median}
            bug_files = {e.file for e in t.bugs}
            for e in t.bugs:
                total += 1
                hits += e.file in larger
                expected += len(larger) / len(sizes)
            for path, text in t.files.items():
                if path == NOTICES or any(e.file == path for e in t.decoys):
                    continue
                # The block is the last inserted run (imports, when added, come first).
                block = max(_inserted(original(path), text))
                (bug_rel if path in bug_files else clean_rel).append(block / sizes[path])
    return hits, total, expected / total, bug_rel, clean_rel


def test_bug_files_are_not_concentrated_in_the_larger_half() -> None:
    hits, total, p, _, _ = _placement()
    # Files are drawn uniformly, so the share in the larger half is ~p (below 0.5 when the
    # median file ties). Deterministic seeds; 3 standard deviations of a binomial is the bound.
    sd = math.sqrt(p * (1 - p) / total)
    assert total >= 100
    assert abs(hits / total - p) <= 3 * sd + 0.02, (hits, total, p)


def test_bug_position_within_a_file_is_that_of_clean_blocks_and_spread() -> None:
    _, _, _, bug_rel, clean_rel = _placement()

    def thirds(rel: list[float]) -> list[float]:
        return [sum(lo <= r < lo + 1 / 3 for r in rel) / len(rel) for lo in (0, 1 / 3, 2 / 3)]

    bugs, clean = thirds(bug_rel), thirds(clean_rel)
    for b, c in zip(bugs, clean, strict=True):
        # Same draw for both: differences are sampling noise (3 sd of the smaller sample).
        assert abs(b - c) <= 3 * math.sqrt(c * (1 - c) / len(bug_rel)) + 0.02, (bugs, clean)
    assert all(share >= 0.15 for share in bugs), bugs


# --- spec, CLI -----------------------------------------------------------------------------------


def test_spec_key_substrate() -> None:
    spec = parse_task_spec("small:seed=3:lang=js:substrate=real")
    assert spec == TaskSpec("small", 3, "js", None, "real")
    assert str(spec) == "small:seed=3:lang=js:substrate=real"
    assert parse_task_spec("small:seed=3").substrate == "synthetic"
    with pytest.raises(UsageError, match="substrate must be one of synthetic, real"):
        parse_task_spec("small:substrate=fake")
    tasks = generate_tasks_in_memory(spec, 1)
    assert tasks[0].id.startswith("small-js-real-") and tasks[0].ground_truth
    with pytest.raises(UsageError, match="unknown substrate"):
        generate_task(1, "small", "python", "other")


def test_cli_generate_substrate_real(tmp_path: Path) -> None:
    from deeprepo.cli.app import app

    r = CliRunner().invoke(
        app, ["tasks", "generate", str(tmp_path / "t"), "--substrate", "real", "--seed", "4"]
    )
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "t" / "index.json").read_text())
    assert index[0]["id"].startswith("small-python-real-")
    assert (tmp_path / "t" / index[0]["id"] / "repo" / NOTICES).is_file()
