"""Generated tasks give no cheap tells: risky APIs in clean code, caller-dependent sinks,
labels not tied to files or comments. ``benchmarks/bench_task_tells.py`` measures the same
properties as detector scores; these tests pin the mechanisms."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

from deeprepo.rl.tasks import GeneratedTask, generate_task
from deeprepo.rl.tasks.catalogue import catalogue
from deeprepo.rl.tasks.mutate import COMMENTS, Shape, reshape, strip_comments

RISKY = re.compile(
    r"hashlib\.(md5|sha1)|createHash\(\"(md5|sha1)\"\)|\brandom\.\w+\(|Math\.random\(|"
    r"shell=True|\bexec\(|subprocess\.|execFile\(|yaml\.load\(|pickle\.loads\(|"
    r"requests\.(get|post)\(|fetch\(|open\(|path\.join\("
)
SPECS = [
    (size, lang, seed)
    for size in ("small", "medium")
    for lang in ("python", "js", "mixed")
    for seed in (31, 32)
] + [("large", "python", 33), ("large", "js", 33)]


@pytest.fixture(scope="module")
def corpus() -> list[GeneratedTask]:
    return [generate_task(seed, size, lang) for size, lang, seed in SPECS]


def _code(task: GeneratedTask) -> dict[str, str]:
    return {p: t for p, t in task.files.items() if p.endswith((".py", ".js"))}


def test_clean_files_use_risky_apis_often(corpus: list[GeneratedTask]) -> None:
    hit = total = 0
    for task in corpus:
        labelled = {e.file for e in task.ground_truth}
        for path, text in _code(task).items():
            if path not in labelled:
                total += 1
                hit += bool(RISKY.search(text))
    assert total and hit / total >= 0.3, (hit, total)


def test_cross_file_helpers_also_appear_as_guarded_decoys_and_clean_code() -> None:
    cat = catalogue()
    for bug in (s for s in cat if s.vulnerable and s.source is not None):
        decoy = next(s for s in cat if s.name == bug.name + "-guarded")
        assert not decoy.vulnerable and decoy.block == bug.block  # the same helper, byte for byte
        assert decoy.source is not None and decoy.source.code != bug.source.code
        assert decoy.description.startswith("Safe:")
    twins = [s for s in cat if s.twin_args]  # helpers that also appear as clean code
    assert twins and all(s.vulnerable and s.source is not None for s in twins)
    assert {s.lang for s in twins} == {"python", "js"}


def test_a_cross_file_sink_line_also_occurs_where_it_is_not_a_bug(
    corpus: list[GeneratedTask],
) -> None:
    """The sink line of cross-file bugs (names aside) is found outside bug ranges too."""
    outside: set[str] = set()
    sinks: list[str] = []

    def norm(line: str) -> str:
        return re.sub(r"[A-Za-z_]\w*", "I", line.strip())

    for task in corpus:
        ranges = defaultdict(set)
        for e in task.bugs:
            ranges[e.file].update(range(e.start_line, e.end_line + 1))
        for path, text in _code(task).items():
            for i, line in enumerate(text.split("\n"), 1):
                if i not in ranges[path]:
                    outside.add(norm(line))
        for e in task.bugs:
            if e.related:
                sinks.append(norm(task.files[e.file].split("\n")[e.sink_line - 1]))
    assert sinks
    shared = sum(s in outside for s in sinks)
    assert shared / len(sinks) >= 0.5, (shared, len(sinks))


def test_guarded_decoys_name_their_caller(corpus: list[GeneratedTask]) -> None:
    flows = [(t, e) for t in corpus for e in t.decoys if e.related]
    assert flows
    for task, e in flows:
        for r in e.related:
            line = task.files[r.file].split("\n")[r.line - 1]
            assert re.search(r"request\.|req\.", line), line
        assert e.cross_file == any(r.file != e.file for r in e.related)


def test_comments_in_planted_code_come_from_the_shared_pool(corpus: list[GeneratedTask]) -> None:
    pool = set(COMMENTS)
    seen = 0
    for task in corpus:
        for e in task.ground_truth:
            lines = task.files[e.file].split("\n")[e.start_line - 1 : e.end_line]
            for line in lines:
                s = line.strip()
                if s.startswith(("#", "//")):
                    seen += 1
                    assert s.lstrip("#/ ") in pool, s
                assert not s.startswith(('"""', "'''")), s  # no snippet docstrings
    # The same pool decorates clean code.
    clean = sum(
        line.strip().lstrip("#/ ") in pool
        for task in corpus
        for text in _code(task).values()
        for line in text.split("\n")
    )
    assert clean > seen


def test_bug_kinds_are_not_tied_to_one_file_name(corpus: list[GeneratedTask]) -> None:
    names: dict[str, set[str]] = defaultdict(set)
    for task in corpus:
        for e in task.bugs:
            names[e.kind].add(e.file.rsplit("/", 1)[-1])
    spread = [k for k, v in names.items() if len(v) >= 3]
    assert len(spread) >= 6, dict(names)


def test_reshape_keeps_marks_and_extends_a_wrapped_sink() -> None:
    import random

    code = (
        "def f(name: str) -> int:\n"
        '    subprocess.run(f"tar -czf {name}.tgz {name}", shell=True, check=True)  ⟦t:sink⟧\n'
        "    return 1"
    )
    out = reshape(
        random.Random(0),
        code,
        "python",
        Shape(wrap=40, drop_return_types=True, js_arrows=False, js_let=False, temp_rate=0.0),
    )
    lines = out.split("\n")
    assert lines[0] == "def f(name):"
    assert lines[1].endswith("subprocess.run(  ⟦t:sink⟧") and lines[3].endswith("⟦t:end⟧")
    assert "shell=True" in lines[2]


def test_strip_comments_drops_docstrings_but_not_code() -> None:
    code = 'def f() -> int:\n    """Doc."""\n    # why\n    return 1'
    assert strip_comments(code, "python") == "def f() -> int:\n    return 1"
    only_doc = 'def g() -> None:\n    """Only a docstring."""'
    assert strip_comments(only_doc, "python") == only_doc  # the body would be empty


# --- the learned detector of benchmarks/bench_task_tells.py -----------------------------------


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    pytest.importorskip("numpy", reason="the learned detector needs numpy (the dev extra)")
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "bench_task_tells", root / "benchmarks" / "bench_task_tells.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_task_tells"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_line_features_see_shape_neighbours_position_file_and_comments(bench: ModuleType) -> None:
    lines = ["def f(name):", "    # Why not.", "    return open(name)", ""]
    feats = bench.line_features("app/storage/files.py", lines, 2)
    kinds = {f.split(":", 1)[0] for f in feats}
    assert {"s", "t", "b", "id", "p1", "p2", "n1", "n2", "def", "pos", "size", "fn", "dir"} <= kinds
    assert "id:open" in feats and "fw:files" in feats and "dir:storage" in feats
    assert "comment" in bench.line_features("a.py", lines, 1)


def test_the_learned_detector_trains_and_scores_on_disjoint_seeds(bench: ModuleType) -> None:
    train = [generate_task(s, "small", "python") for s in (101, 102, 103)]
    test = [generate_task(s, "small", "python") for s in (201, 202)]
    m = bench.featurize(train)
    bug_lines = {
        (t, e.file, ln)
        for t, task in enumerate(train)
        for e in task.bugs
        for ln in range(e.start_line, e.end_line + 1)
        if task.files[e.file].split("\n")[ln - 1].strip()
    }
    assert {k for k, y in zip(m.keys, m.labels, strict=True) if y} == bug_lines  # decoys: 0
    import numpy as np

    part = bench._rows(m, np.array([t == 1 for t, _f, _l in m.keys]))
    again = bench.featurize(train[1:2])
    assert list(part.indices) == list(again.indices) and list(part.labels) == list(again.labels)
    flags = bench.learned_detector(train, test, 3)
    universe = {(t, f, i) for t, task in enumerate(test) for f, i, _ in bench.code_lines(task)}
    flagged = {(t, f, i) for t, s in flags.items() for f, i in s}
    assert flagged and flagged <= universe
    score, chance = bench.score_lines(test, flags, 3), bench.chance_lines(test, flags, 3)
    assert score.flags == chance.flags == len(flagged)
    assert 0.0 <= score.f1 <= 1.0 and 0.0 <= chance.f1 <= 1.0


def test_block_comments_are_pool_comments_in_clean_code_too(corpus: list[GeneratedTask]) -> None:
    # Clean blocks lose their own comments as planted ones do, so a pool comment says nothing.
    pool = set(COMMENTS)
    for task in corpus:
        for path, text in _code(task).items():
            for line in text.split("\n"):
                if line.startswith(("    ", "  ")) and line.strip().startswith(("# ", "// ")):
                    assert line.strip()[2:].strip() in pool, (path, line)


def test_bugs_sit_in_larger_files_no_more_than_chance() -> None:
    # Among the files that can hold code of any kind (a name tells __init__ and tests apart),
    # the share of bugs in the larger half stays near the share of files there.
    hits = total = 0
    chance = 0.0
    for lang in ("python", "js"):
        for seed in range(300, 312):
            task = generate_task(seed, "medium", lang)
            lines = {
                p: t.count("\n")
                for p, t in _code(task).items()
                if "__init__" not in p and "test" not in p
            }
            ranked = sorted(lines.values())
            larger = {p for p, n in lines.items() if n > ranked[len(ranked) // 2]}
            for e in task.bugs:
                total += 1
                hits += e.file in larger
                chance += len(larger) / len(lines)
    assert total >= 100 and hits / total <= chance / total + 0.1, (hits / total, chance / total)


def test_sprinkled_composed_safe_uses_are_rendered_per_placement() -> None:
    import random

    from deeprepo.rl.tasks.catalogue import safe_pool
    from deeprepo.rl.tasks.composed import is_composed_use, restyled_use

    for lang in ("python", "js"):
        uses = [u for u in safe_pool(lang) if is_composed_use(u, lang)]
        assert uses
        for use in uses[:20]:
            a = restyled_use(use, lang, random.Random(1))
            assert a == restyled_use(use, lang, random.Random(1))  # seeded: same bytes
            texts = {restyled_use(use, lang, random.Random(k)).block.code for k in range(8)}
            assert len(texts) > 1, use.block.code
    plain = next(u for u in safe_pool("python") if not is_composed_use(u, "python"))
    assert restyled_use(plain, "python", random.Random(0)) is plain
