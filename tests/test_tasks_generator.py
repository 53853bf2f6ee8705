"""The task generator: determinism, size bands, parseable code, exact ground truth."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deeprepo.base.errors import UsageError
from deeprepo.rl.tasks import (
    BUG_KINDS,
    SIZES,
    GeneratedTask,
    generate_task,
    generate_tasks,
    read_ground_truth,
)
from deeprepo.rl.tasks import generator as gen
from deeprepo.rl.tasks.catalogue import catalogue
from deeprepo.rl.tasks.render import extract_marks, fill
from deeprepo.rl.tasks.snippets import Snippet

# A sink each kind's ground-truth range must contain (checked on the lines start..end).
SINK_PATTERNS: dict[str, str] = {
    "sql-injection": r"\.execute\(|query\(|SELECT|INSERT|UPDATE|DELETE",
    "command-injection": r"shell=True|os\.system\(|\bexec\(|execSync\(",
    "path-traversal": r"\bopen\(|send_file\(|sendFile\(|readFile\(",
    "unsafe-deserialization": r"pickle\.loads\(|yaml\.load\(|unserialize\(|runInNewContext\(",
    "xss": r"<[a-z0-9]+[^>]*>[^\n]*(\$?\{)",
    "ssrf": r"requests\.(get|post)\(|urlopen\(|fetch\(",
    "weak-password-hash": r"\bmd5\b|sha1|sha256",
    "hardcoded-secret": r"\"[A-Za-z0-9_]{20,}\"|Bearer [A-Za-z0-9]{20,}",
    "missing-authorization": r"\.route\(|router\.(get|post|put|patch|delete)\(|\"admin\"",
    "insecure-randomness": r"random\.(choice|choices|randint|random|getrandbits)\(|Math\.random\(|secrets\.choice\(|randomBytes\(",
    "race-condition": r"\] = \w+ \+ 1|- amount\)|open\(path, \"wb\"\)|writeFileSync\(",
    "resource-leak": r"\bopen\(|connect\(|openSync\(|get_connection\(",
    "off-by-one": r"page \* per_page|safePage \* limit|// per_page|Math\.floor\(|limit - 1"
    r"|\(page - 1\) \* per_page|\(safePage - 1\) \* limit"
    r"|(length|len\(tags\)) > 10|range\(1, max_tries\)|attempt < maxTries",
}
# Where a cross-file bug's untrusted value enters.
SOURCE_PATTERN = r"request\.(args|form|cookies|get_json|get_data)|req\.(query|body|params|get)"
AUTH_MARKERS = re.compile(r"login_required|require_role|requireAuth|requireRole")

CORPUS_SPECS = (
    *[("small", lang, seed) for lang in ("python", "js", "mixed") for seed in range(4)],
    *[("medium", lang, seed) for lang in ("python", "js", "mixed") for seed in range(2)],
    *[("large", lang, 0) for lang in ("python", "js", "mixed")],
)


@pytest.fixture(scope="module")
def corpus() -> list[GeneratedTask]:
    return [generate_task(seed, size, lang) for size, lang, seed in CORPUS_SPECS]


def _lines(task: GeneratedTask, path: str) -> list[str]:
    return task.files[path].split("\n")


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _node_check(files: dict[str, str], tmp_path: Path) -> list[str]:
    """Syntax-check many JS files in one node process, the way ``node --check`` compiles a
    CommonJS file (module wrapper via vm.compileFunction); returns the failures."""
    root = tmp_path / "js"
    paths = []
    for i, (name, text) in enumerate(sorted(files.items())):
        p = root / str(i) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        paths.append(str(p))
    script = (
        "const fs=require('fs'),vm=require('vm');const bad=[];"
        "for(const f of JSON.parse(fs.readFileSync(0,'utf8'))){try{vm.compileFunction(fs.readFileSync(f,'utf8'),"
        "['exports','require','module','__filename','__dirname'],{filename:f})}catch(e){bad.push(f+': '+e.message)}}"
        "process.stdout.write(JSON.stringify(bad))"
    )
    done = subprocess.run(
        ["node", "-e", script],
        input=json.dumps(paths),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    bad: list[str] = json.loads(done.stdout)
    # The literal `node --check` on a few files, so the batch check cannot drift from it.
    for p in paths[:: max(1, len(paths) // 4)]:
        r = subprocess.run(["node", "--check", p], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            bad.append(f"{p}: {r.stderr.strip()}")
    return bad


# --- determinism ---------------------------------------------------------------------------------


def test_same_arguments_give_identical_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    infos = generate_tasks(a, seed=7, n=2, size="medium", lang="mixed")
    generate_tasks(b, seed=7, n=2, size="medium", lang="mixed")
    tree_a = _tree(a)
    assert tree_a == _tree(b)
    assert len(tree_a) == sum(i.files for i in infos) + len(infos) + 1  # + ground truths + index
    # Regenerating into the same folder replaces the tasks and keeps the bytes.
    generate_tasks(a, seed=7, n=2, size="medium", lang="mixed")
    assert _tree(a) == tree_a
    assert generate_task(11, "small", "js") == generate_task(11, "small", "js")


def test_different_seeds_give_different_repositories() -> None:
    tasks = [generate_task(seed, "medium", "python") for seed in range(6)]
    assert len({tuple(sorted(t.files.items())) for t in tasks}) == 6
    assert len({t.domain for t in tasks}) >= 3
    layouts = {next(p for p in t.files if p.endswith("app.py")) for t in tasks}
    assert len(layouts) >= 3  # package names and folders vary
    assert len({t.files["README.md"].split("\n")[0] for t in tasks if "README.md" in t.files}) >= 3


def test_task_seeds_extend_as_a_prefix() -> None:
    assert gen.task_seeds(7, 5)[:3] == gen.task_seeds(7, 3)
    assert gen.task_seeds(7, 3) != gen.task_seeds(8, 3)


# --- sizes and syntax ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("lang", ["python", "js", "mixed"])
def test_file_counts_stay_in_the_size_band(size: str, lang: str) -> None:
    lo, hi = SIZES[size]
    seeds = range(6) if size == "small" else range(2)
    counts = [len(generate_task(seed, size, lang).files) for seed in seeds]
    assert all(lo <= c <= hi for c in counts), counts


def test_every_python_file_parses(corpus: list[GeneratedTask]) -> None:
    checked = 0
    for task in corpus:
        for path, text in task.files.items():
            if path.endswith(".py"):
                ast.parse(text, filename=f"{task.task_id}/{path}")
                checked += 1
    assert checked > 300


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_every_js_file_passes_node_check(corpus: list[GeneratedTask], tmp_path: Path) -> None:
    files = {
        f"{t.task_id}/{p}": text for t in corpus for p, text in t.files.items() if p.endswith(".js")
    }
    assert len(files) > 200
    assert _node_check(files, tmp_path) == []


def test_no_template_marks_leak_into_output(corpus: list[GeneratedTask]) -> None:
    for task in corpus:
        for path, text in task.files.items():
            assert "«" not in text and "⟦" not in text, f"{task.task_id}/{path}"
            assert text.endswith("\n") and not text.endswith("\n\n\n"), f"{task.task_id}/{path}"


# --- ground truth --------------------------------------------------------------------------------


def test_vulnerable_ranges_contain_the_sink_of_their_kind(corpus: list[GeneratedTask]) -> None:
    checked = 0
    for task in corpus:
        for e in task.bugs:
            lines = _lines(task, e.file)
            assert 1 <= e.start_line <= e.sink_line <= e.end_line <= len(lines), e
            window = "\n".join(lines[e.start_line - 1 : e.end_line])
            assert re.search(SINK_PATTERNS[e.kind], window), (task.task_id, e.kind, window)
            if e.kind == "missing-authorization" and not re.search(r"IDOR|inverted", e.description):
                # A missing decorator: no auth marker in the range (an IDOR or an inverted
                # role test sits behind a login check, so they are exempt).
                assert not AUTH_MARKERS.search(window), window
            checked += 1
    assert checked >= 60


def test_entries_carry_the_taxonomy(corpus: list[GeneratedTask]) -> None:
    for task in corpus:
        ids = [e.id for e in task.ground_truth]
        assert len(ids) == len(set(ids))
        for e in task.ground_truth:
            kind = BUG_KINDS[e.kind]
            assert e.cwe == kind.cwe and e.acceptable_cwes == kind.acceptable_cwes
            assert e.cwe in e.acceptable_cwes
            assert e.file in task.files
            assert e.severity == (kind.severity if e.vulnerable else "info")
            assert e.description and "«" not in e.description


def test_at_least_twelve_kinds_appear_across_seeds(corpus: list[GeneratedTask]) -> None:
    for lang in ("python", "js"):
        kinds = {e.kind for t in corpus if t.lang == lang for e in t.bugs}
        assert len(kinds) >= 12, (lang, sorted(kinds))
    assert {e.kind for t in corpus for e in t.bugs} == set(BUG_KINDS)


def test_cross_file_bugs_point_at_the_sink_and_list_the_source(corpus: list[GeneratedTask]) -> None:
    cross = [(t, e) for t in corpus for e in t.bugs if e.cross_file]
    assert len(cross) >= 10
    for task, e in cross:
        assert e.related and all(r.file != e.file for r in e.related)
        for r in e.related:
            source_line = _lines(task, r.file)[r.line - 1]
            assert re.search(SOURCE_PATTERN, source_line), (task.task_id, r, source_line)
            assert f"`{r.file}` line {r.line}" in e.description
        sink_window = "\n".join(_lines(task, e.file)[e.start_line - 1 : e.end_line])
        assert re.search(SINK_PATTERNS[e.kind], sink_window)
    assert any(t.size == "medium" and e.cross_file for t in corpus for e in t.bugs)


def test_decoys_are_present_and_safe_looking(corpus: list[GeneratedTask]) -> None:
    assert all(task.decoys for task in corpus)
    decoy_kinds = {e.kind for t in corpus for e in t.decoys}
    assert len(decoy_kinds) >= 8
    for task in corpus:
        for e in task.decoys:
            assert e.description.startswith("Safe:")
            lines = _lines(task, e.file)
            assert 1 <= e.start_line <= e.sink_line <= e.end_line <= len(lines)


def test_bugs_are_a_minority_of_files(corpus: list[GeneratedTask]) -> None:
    for task in corpus:
        buggy = {e.file for e in task.bugs}
        assert task.bugs and len(buggy) <= max(2, len(task.files) // 2), task.task_id


@pytest.mark.e2e
def test_every_catalogued_snippet_plants_cleanly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Force each bug and decoy variant into a project: it must place, parse and mark its sink."""
    cat = catalogue()
    assert len({s.name for s in cat}) == len(cat)
    for kind in BUG_KINDS:
        for lang in ("python", "js"):
            assert any(s.kind == kind and s.lang == lang and s.vulnerable for s in cat), (
                kind,
                lang,
            )
    js_files: dict[str, str] = {}
    for lang in ("python", "js"):
        batches: list[list[Snippet]] = []
        for snip in (s for s in cat if s.lang == lang):
            slot = (snip.host, snip.block.key) if snip.replaces else None
            batch = next(
                (
                    b
                    for b in batches
                    if len(b) < 8 and slot not in {(x.host, x.block.key) for x in b if x.replaces}
                ),
                None,
            )
            if batch is None:
                batches.append(batch := [])
            batch.append(snip)
        for i, batch in enumerate(batches):
            monkeypatch.setattr(gen, "plan_snippets", lambda *_a, _b=batch, **_k: list(_b))
            task = generate_task(1000 + i, "medium", lang)
            got = Counter((e.kind, e.vulnerable) for e in task.ground_truth)
            assert got == Counter((s.kind, s.vulnerable) for s in batch), [s.name for s in batch]
            for path, text in task.files.items():
                if path.endswith(".py"):
                    ast.parse(text)
                elif path.endswith(".js"):
                    js_files[f"{lang}{i}/{path}"] = text
            for e in task.bugs:
                window = "\n".join(_lines(task, e.file)[e.start_line - 1 : e.end_line])
                assert re.search(SINK_PATTERNS[e.kind], window), (e.kind, window)
    if shutil.which("node"):
        assert _node_check(js_files, tmp_path) == []


def test_taxonomy_covers_the_graders_cwe_families() -> None:
    path = resources.files("deeprepo") / "data" / "cwe_families.json"
    if not path.is_file():
        pytest.skip("the grader's CWE family table is not installed")
    families = json.loads(path.read_text(encoding="utf-8"))["families"]
    for kind in BUG_KINDS.values():
        family = next(f for f in families.values() if int(kind.cwe.split("-")[1]) in f["cwes"])
        assert {f"CWE-{c}" for c in family["cwes"]} <= set(kind.acceptable_cwes), kind.key
        assert kind.key in family["kinds"]


# --- files on disk and the CLI -------------------------------------------------------------------


def test_written_layout_index_and_ground_truth(tmp_path: Path) -> None:
    infos = generate_tasks(tmp_path, seed=3, n=2, size="small", lang="python")
    index = json.loads((tmp_path / "index.json").read_text())
    assert isinstance(index, list) and [i["id"] for i in index] == [i.id for i in infos]
    assert set(index[0]) == {
        "id",
        "seed",
        "size",
        "lang",
        "domain",
        "files",
        "bugs",
        "decoys",
        "path",
    }
    for item in index:
        task_dir = tmp_path / item["path"]
        raw = (task_dir / "ground_truth.json").read_text()
        assert (
            raw.endswith("]\n")
            and raw == json.dumps(json.loads(raw), sort_keys=True, indent=2) + "\n"
        )
        entries = json.loads(raw)
        assert set(entries[0]) == {
            "id",
            "file",
            "start_line",
            "end_line",
            "cwe",
            "acceptable_cwes",
            "kind",
            "severity",
            "description",
            "vulnerable",
            "cross_file",
            "related",
        }
        assert len([e for e in entries if e["vulnerable"]]) == item["bugs"]
        assert len([e for e in entries if not e["vulnerable"]]) == item["decoys"]
        assert sum(1 for p in (task_dir / "repo").rglob("*") if p.is_file()) == item["files"]
        for e in read_ground_truth(task_dir / "ground_truth.json"):
            assert (task_dir / "repo" / e.file).is_file()
        assert generate_task(item["seed"], "small", "python").task_id == item["id"]


def test_refuses_to_overwrite_a_foreign_directory(tmp_path: Path) -> None:
    seed = gen.task_seeds(5, 1)[0]
    (tmp_path / f"small-python-{seed}").mkdir()
    (tmp_path / f"small-python-{seed}" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a generated task"):
        generate_tasks(tmp_path, seed=5, n=1, size="small", lang="python")
    assert (tmp_path / f"small-python-{seed}" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 0}, "at least 1"),
        ({"size": "huge"}, "unknown size"),
        ({"lang": "go"}, "unknown lang"),
    ],
)
def test_bad_arguments_raise_usage_errors(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"seed": 1, "n": 1, "size": "small", "lang": "python", **kwargs}
    with pytest.raises(UsageError, match=message) as info:
        generate_tasks(tmp_path, **args)  # type: ignore[arg-type]
    assert info.value.exit_code == 2


def test_cli_generate_writes_tasks_and_prints_a_summary(tmp_path: Path) -> None:
    from deeprepo.cli.tasks_cmd import tasks_app

    result = CliRunner().invoke(
        tasks_app,
        ["generate", "--seed", "4", "--n", "2", "--size", "small", "--lang", "js", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    index = json.loads((tmp_path / "index.json").read_text())
    assert len(index) == 2 and all(i["lang"] == "js" for i in index)
    assert "Wrote 2 task(s)" in result.output and index[0]["id"] in result.output
    bad = CliRunner().invoke(tasks_app, ["generate", "--n", "0", str(tmp_path / "x")])
    assert isinstance(bad.exception, UsageError) and bad.exception.exit_code == 2


def test_cli_main_turns_bad_input_into_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = pytest.importorskip("deeprepo.cli.app")
    with pytest.raises(SystemExit) as info:
        app.main(["tasks", "generate", "--size", "huge", str(tmp_path)])
    assert info.value.code == 2
    assert "unknown size 'huge'" in capsys.readouterr().err


# --- the rendering primitives --------------------------------------------------------------------


def test_fill_indents_multiline_values_and_marks_give_exact_lines() -> None:
    text = fill("def f():\n    «body»\n    return «x»", {"body": "a = 1\nb = 2", "x": "a + b"})
    assert text == "def f():\n    a = 1\n    b = 2\n    return a + b"
    clean, marks = extract_marks("m.py", "x = 1\ny = run(x)  ⟦t1:sink⟧\nz = 3  ⟦t1:end⟧\n")
    assert clean == "x = 1\ny = run(x)\nz = 3\n"
    assert [(m.tag, m.name, m.line) for m in marks] == [("t1", "sink", 2), ("t1", "end", 3)]
