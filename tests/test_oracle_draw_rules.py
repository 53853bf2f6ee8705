"""The rules of the oracle worker's seeded draws (rl/env/oracle.py): how many false findings
a prompt gets and where they land, how a prompt's length and instruction scale what is
reported, and what the seed and the wording decide. Every rule holds for every seed, so each
is checked over many seeds, never by pinning one seed's output (docs/testing.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from deeprepo.findings.grading import DEFAULT_TOLERANCE
from deeprepo.rl.env.oracle import OracleFinding, OracleWorker
from deeprepo.rl.env.oracle_text import FALLBACK_FAMILIES

ASK = "Audit this code for security bugs; answer in JSON."
SEEDS = range(20)


def module(name: str, n: int) -> str:
    return "\n".join(
        f"    value_{name}_{k} = handle_request(item_{k}, mode={k})" for k in range(1, n + 1)
    )


def entry(file: str, start: int, end: int | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "id": f"{file}:{start}", "file": file, "start_line": start,
        "end_line": start if end is None else end, "cwe": "CWE-89", "kind": "sql-injection",
        **kw,
    }  # fmt: skip


# A bug elsewhere, so that the files below hold no true bug: their findings are all false.
ELSEWHERE = {"svc/other.py": module("other", 20)}
GT_ELSEWHERE = [entry("svc/other.py", 10)]


def false_findings(
    text: str, *, seed: int, system: str = ASK, gt: list[dict[str, Any]] = GT_ELSEWHERE, **kw: Any
) -> list[OracleFinding]:
    """The findings of a prompt that is nothing but ``text`` (the system prompt asks)."""
    codebase = {"svc/a.py": text, **ELSEWHERE}
    w = OracleWorker(gt, miss_rate=0.0, seed=seed, codebase=codebase, **kw)
    return w.findings(text, system)


# ------------------------------------------------------------------ how many false findings


@pytest.mark.parametrize(
    ("lines", "settings", "system", "expected"),
    [
        (8, {}, ASK, 500),  # 62,500 per 1,000 lines x 8 lines
        (16, {"context_lines": 8}, ASK, 250),  # twice the limit: a quarter of the attention
        (16, {"context_lines": 8, "off_task_rate": 0.8}, "Translate this code to Go.", 200),
    ],
)
def test_a_whole_expected_number_of_false_findings_is_met_exactly(
    lines: int, settings: dict[str, Any], system: str, expected: int
) -> None:
    """False findings number false_rate x non-trivial lines shown / 1,000 x attention (1
    within context_lines, (context_lines / prompt lines) ** 2 past it, times off_task_rate off
    task), rounded down or up at random: a whole expected number is met for every seed."""
    text = module("a", lines)
    for seed in range(10):
        found = false_findings(text, seed=seed, system=system, false_rate=62_500.0, **settings)
        assert len(found) == expected, seed


# ------------------------------------------------------------------ where they land


def test_false_findings_stay_on_shown_code_away_from_every_true_bug() -> None:
    """A false finding lies on a shown non-trivial line of the file, before or after the true
    bugs but never within the grading tolerance (plus the task's range length) of one; a
    file with no decoy still gets them."""
    lines = module("a", 60).split("\n")
    for k in range(0, 60, 7):
        lines[k] = "pass"  # trivial lines: never a finding's line
    text = "\n".join(lines)
    gt = [entry("svc/a.py", 20, 21), entry("svc/a.py", 60, 60)]
    below, above = 0, 0
    for seed in SEEDS:
        found = false_findings(text, seed=seed, gt=gt, false_rate=200.0)
        assert [(f["line"], f["end_line"]) for f in found[:2]] == [(20, 21), (60, 60)]
        for f in found[2:]:  # the two true bugs come first
            n, away = f["line"], DEFAULT_TOLERANCE + f["end_line"] - f["line"]
            assert 1 <= n <= 60 and lines[n - 1] != "pass", (seed, n)
            assert n < 20 - away or n > 21 + away, (seed, n)
            assert n < 60 - away, (seed, n)
            below += n < 20
            above += n > 21
    assert below > 20 and above > 20, (below, above)


def test_a_false_finding_spans_as_many_lines_as_the_tasks_ranges() -> None:
    """A false finding's range (off a decoy) is as long as one of the task's own ranges, so
    its length says nothing about its truth: it starts on its line and ends that many
    lines further."""
    gt = [entry("svc/other.py", 2, 5), entry("svc/other.py", 12, 14)]  # 3 and 2 lines longer
    lengths: Counter[int] = Counter()
    for seed in SEEDS:
        for f in false_findings(module("a", 40), seed=seed, gt=gt, false_rate=100.0):
            lengths[f["end_line"] - f["line"]] += 1
    assert set(lengths) == {2, 3} and min(lengths.values()) > 10, lengths


def test_without_ground_truth_false_findings_are_one_line_in_the_usual_classes() -> None:
    """An oracle with an empty ground truth still answers: one-line false findings of the
    common bug classes."""
    kinds: set[str] = set()
    for seed in SEEDS:
        for f in false_findings(module("a", 40), seed=seed, gt=[], false_rate=100.0):
            assert f["end_line"] == f["line"]
            kinds.add(f["kind"])
    assert len(kinds) > 3 and kinds <= set(FALLBACK_FAMILIES), kinds


def test_a_task_with_only_decoys_gets_false_findings_on_and_off_them() -> None:
    """With no true bug in the task, false findings still come, on the decoys shown and on
    other lines, in the common bug classes."""
    gt = [entry("svc/a.py", 30, 30, vulnerable=False)]
    on, off, kinds = 0, 0, set()
    for seed in SEEDS:
        for f in false_findings(module("a", 40), seed=seed, gt=gt, false_rate=100.0):
            on += f["line"] == 30
            off += f["line"] != 30
            kinds.add(f["kind"])
    assert on > 10 and off > 10, (on, off)
    assert kinds - {"sql-injection"} <= set(FALLBACK_FAMILIES), kinds


def test_false_findings_land_on_lines_of_exactly_eight_characters_too() -> None:
    """The lines a false finding may land on are the non-trivial ones counted for its rate:
    eight characters and more."""
    text = "\n".join(f"x{k:03d} = 1" for k in range(1, 41))  # 'x001 = 1': 8 characters
    assert sum(len(false_findings(text, seed=s, false_rate=100.0)) for s in SEEDS) > 40


def test_false_findings_prefer_lines_whose_api_suggests_their_class() -> None:
    """A false finding of a class is about 20 times likelier on a line whose API suggests that
    class, and about 5 times on a line suggesting another risky class, than on a plain line
    (as an auditor's eye goes to risky calls)."""
    lines = module("a", 30).split("\n")
    sql, shell = (4, 14, 24), (9, 19, 29)  # the task's class is SQL injection
    for k in sql:
        lines[k - 1] = f"    rows_{k} = cursor.execute(query_{k})"
    for k in shell:
        lines[k - 1] = f"    out_{k} = subprocess.run(command_{k})"
    per_line: Counter[str] = Counter()
    for seed in SEEDS:
        for f in false_findings("\n".join(lines), seed=seed, false_rate=5000.0):
            n = f["line"]
            per_line["sql" if n in sql else "shell" if n in shell else "plain"] += 1
    plain = per_line["plain"] / 24
    assert 14 <= per_line["sql"] / 3 / plain <= 28, per_line
    assert 3.5 <= per_line["shell"] / 3 / plain <= 7, per_line


# ------------------------------------------------------------------ what is reported


def many_bugs(n_lines: int, every: int) -> tuple[str, list[dict[str, Any]]]:
    return module("a", n_lines), [entry("svc/a.py", k) for k in range(every, n_lines + 1, every)]


def test_by_default_800_prompt_lines_are_read_in_full_and_801_are_not() -> None:
    """A worker's default context is 800 lines: a prompt of 800 lines reports every bug it
    shows (with no misses), and one of 801 lines misses one bug in 801, for every seed."""
    text, gt = many_bugs(801, 4)
    within = "\n".join(text.split("\n")[:800])
    missed = 0
    for seed in range(40):
        w = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, seed=seed, codebase={"svc/a.py": text})
        assert len(w.findings(within, ASK)) == 200
        missed += 200 - len(w.findings(text, ASK))
    assert 1 <= missed <= 30, missed  # about 10 of 8,000


def test_a_one_line_prompt_is_read_in_full_by_a_one_line_context() -> None:
    """A prompt no longer than context_lines is read with full attention, down to one line."""
    code = {"svc/one.py": "x = 1\n    value_one = handle_request(item, mode=1)\n"}
    gt = [entry("svc/one.py", 2)]
    line = code["svc/one.py"].split("\n")[1]
    for seed in SEEDS:
        w = OracleWorker(
            gt, miss_rate=0.0, false_rate=0.0, seed=seed, codebase=code, context_lines=1
        )
        assert [f["line"] for f in w.findings(line, ASK)] == [2]


def test_each_bug_is_missed_on_its_own() -> None:
    """A missed bug does not hide the bugs after it: each is missed with miss_rate alone."""
    text, gt = many_bugs(200, 5)  # 40 bugs
    reported = 0
    for seed in range(10):
        w = OracleWorker(gt, miss_rate=0.5, false_rate=0.0, seed=seed, codebase={"svc/a.py": text})
        reported += len(w.findings(text, ASK))
    assert 150 <= reported <= 250, reported  # half of 400


def test_a_reworded_request_is_a_new_draw() -> None:
    """Asking about the same code in other words draws anew (so a second look can find what
    the first missed), while the same words always get the same answer."""
    text, gt = many_bugs(60, 6)  # 10 bugs
    w = OracleWorker(gt, miss_rate=0.5, false_rate=0.0, codebase={"svc/a.py": text})
    answers = [w.answer(f"Audit this code for bugs (pass {i}).\n{text}") for i in range(20)]
    assert len(set(answers)) > 10
    assert answers[3] == w.answer(f"Audit this code for bugs (pass {3}).\n{text}")
    seen = {f["line"] for i in range(20) for f in w.findings(f"Audit (pass {i}).\n{text}")}
    assert seen == {e["start_line"] for e in gt}


def test_an_oracle_given_no_seed_is_the_seed_zero_oracle() -> None:
    """The default seed is 0: a run that names none answers as one that names 0."""
    text, gt = many_bugs(60, 6)
    code = {"svc/a.py": text}
    plain = OracleWorker(gt, miss_rate=0.5, false_rate=50.0, codebase=code)
    zero = OracleWorker(gt, miss_rate=0.5, false_rate=50.0, codebase=code, seed=0)
    prompts = [f"Audit this code for bugs (pass {i}).\n{text}" for i in range(10)]
    assert [plain.answer(p) for p in prompts] == [zero.answer(p) for p in prompts]


# ------------------------------------------------------------------ classes and ground truth


def test_a_bug_named_by_cwe_or_by_kind_alone_is_reported_in_its_class() -> None:
    """An entry with only a CWE is reported under its class's name; one with only a kind
    with its class's lowest-numbered CWE (CWE-89 for SQL injection)."""
    text = module("a", 40)
    shown = {"svc/a.py": text}
    by_cwe = [{**entry("svc/a.py", 20), "kind": ""}]
    by_kind = [{**entry("svc/a.py", 20), "cwe": None}]
    (f,) = OracleWorker(by_cwe, miss_rate=0.0, false_rate=0.0, codebase=shown).findings(text, ASK)
    assert (f["kind"], f["cwe"]) == ("sql-injection", "CWE-89")
    (f,) = OracleWorker(by_kind, miss_rate=0.0, false_rate=0.0, codebase=shown).findings(text, ASK)
    assert (f["kind"], f["cwe"]) == ("sql-injection", "CWE-89")


def test_ground_truth_may_be_any_iterable_of_entries() -> None:
    """Entries may come from a generator, read once."""
    text = module("a", 40)
    gt = [entry("svc/a.py", 20)]
    w = OracleWorker((e for e in gt), miss_rate=0.0, false_rate=0.0, codebase={"svc/a.py": text})
    assert [f["line"] for f in w.findings(text, ASK)] == [20]


def test_a_cross_file_source_on_the_first_line_of_its_file_counts() -> None:
    """A cross-file bug whose source is line 1 of its file is reported when that line is
    shown in order with the code after it."""
    src = "    user_value = request.args['name']\n\n" + module("s", 20)
    code = {"svc/src.py": src, "svc/a.py": module("a", 40)}
    gt = [{**entry("svc/a.py", 20), "related": [{"file": "svc/src.py", "line": 1}]}]
    w = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=code)
    prompt = ASK + "\n" + "\n".join(src.split("\n")[:8]) + "\n" + code["svc/a.py"]
    assert [(f["file"], f["line"]) for f in w.findings(prompt)] == [("svc/a.py", 20)]
