"""The oracle worker: answers like an LLM auditor from ground truth, for the code a prompt
carries (in any shape), seeded and reproducible, with no tell between true and false."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from deeprepo.base.chat import ChatModel, ChatRequest, Message
from deeprepo.base.prompts import WORKER_SYSTEM_PROMPT, file_audit_prompt
from deeprepo.findings.families import default_families
from deeprepo.findings.grading import grade, parse_findings, parse_ground_truth
from deeprepo.rl.env.oracle import OracleWorker, classify_instruction, make_oracle

DESCRIPTION = "User input is formatted into SQL. Use parameters."


def _file(i: int, n: int = 60) -> str:
    return "\n".join(
        f"    value_{i}_{k} = handle_request(item_{k}, mode={k})" for k in range(1, n + 1)
    )


def _task(n_files: int, n_lines: int = 60) -> tuple[dict[str, str], list[dict[str, Any]]]:
    codebase = {f"svc/mod{i}.py": _file(i, n_lines) for i in range(n_files)}
    gt: list[dict[str, Any]] = []
    for i in range(n_files):
        gt.append(
            {
                "id": f"b{i}",
                "file": f"svc/mod{i}.py",
                "start_line": 30,
                "end_line": 31,
                "cwe": "CWE-89",
                "kind": "sql-injection",
                "severity": "critical",
                "description": DESCRIPTION,
                "vulnerable": True,
            }
        )
        gt.append(
            {
                "id": f"d{i}",
                "file": f"svc/mod{i}.py",
                "start_line": 55,
                "end_line": 55,
                "cwe": "CWE-78",
                "kind": "command-injection",
                "severity": "info",
                "description": "Safe: an argument list, no shell.",
                "vulnerable": False,
            }
        )
    return codebase, gt


CODEBASE, GT = _task(3)


def _prompt(path: str) -> str:
    return file_audit_prompt(path, CODEBASE[path])


def _worker(**kw: Any) -> OracleWorker:
    return OracleWorker(GT, **{"miss_rate": 0.0, "false_rate": 0.0, "codebase": CODEBASE, **kw})


def test_protocol_and_json_shape() -> None:
    worker = _worker()
    assert isinstance(worker, ChatModel) and worker.name == "oracle"
    (f,) = json.loads(worker.answer(_prompt("svc/mod0.py")))["findings"]
    assert (f["file"], f["line"], f["end_line"]) == ("svc/mod0.py", 30, 31)
    assert (f["kind"], f["cwe"]) == ("sql-injection", "CWE-89")  # the task's own vocabulary
    assert f["severity"] in ("critical", "high", "medium")
    assert f["title"] and f["detail"] and f["fix"]
    # Never the ground truth's text: written from the bug class's templates.
    assert DESCRIPTION not in json.dumps(f) and "formatted into SQL" not in f["title"]
    assert "value_0_30" in f["detail"] or "`" not in f["detail"]


async def test_complete_returns_zero_usage_and_reads_the_system_prompt() -> None:
    worker = _worker()
    req = ChatRequest(messages=(Message("user", _prompt("svc/mod1.py")),), system="audit")
    comp = await worker.complete(req)
    assert comp.model == "oracle" and comp.usage.input_tokens == 0 and comp.usage.output_tokens == 0
    assert [f["line"] for f in json.loads(comp.text)["findings"]] == [30]
    bare = CODEBASE["svc/mod1.py"]
    audit = ChatRequest(messages=(Message("user", bare),), system=WORKER_SYSTEM_PROMPT)
    assert json.loads((await worker.complete(audit)).text)["findings"]
    other = ChatRequest(messages=(Message("user", bare),), system="You translate code to Go.")
    reply = (await worker.complete(other)).text
    assert "findings" not in reply and "translated" in reply  # what was asked, not an audit
    await worker.aclose()


def test_path_only_prompts_get_nothing() -> None:
    worker = _worker(false_rate=1000.0)
    for prompt in [
        "Audit svc/mod0.py for SQL injection at line 30.",
        '<file path="svc/mod0.py">\n</file>',
        '<file path="svc/mod0.py" lines="25-35">\n   30 | this is not the real line\n</file>',
        file_audit_prompt("svc/missing.py", "made_up = 'content of a file that does not exist'"),
    ]:
        assert json.loads(worker.answer(prompt)) == {"findings": []}


def _shapes(path: str) -> dict[str, str]:
    lines = CODEBASE[path].split("\n")
    ask = "Audit this code for security bugs; answer in JSON.\n\n"
    return {
        "audit prompt": _prompt(path),
        "N: ": ask + f"File: {path}\n" + "\n".join(f"{i}: {ln}" for i, ln in enumerate(lines, 1)),
        "tab": ask + "\n".join(f"{i}\t{ln}" for i, ln in enumerate(lines, 1)),
        "L12": ask + "\n".join(f"L{i} {ln}" for i, ln in enumerate(lines, 1)),
        "spaces": ask + "\n".join(f"  {i}  {ln}" for i, ln in enumerate(lines, 1)),
        "fenced": ask + f"`{path}`:\n```python\n" + CODEBASE[path] + "\n```",
        "quoted": ask + "\n".join("> " + ln for ln in lines),
        "json": ask + json.dumps({"path": path, "content": CODEBASE[path]}),
        "no header": ask + CODEBASE[path],
    }


@pytest.mark.parametrize("shape", list(_shapes("svc/mod0.py")))
def test_any_reasonable_shape_is_read(shape: str) -> None:
    worker = _worker()
    found = worker.findings(_shapes("svc/mod0.py")[shape])
    assert [(f["file"], f["line"]) for f in found] == [("svc/mod0.py", 30)]


def test_shuffled_lines_show_nothing_it_can_locate() -> None:
    worker = _worker()
    reported = 0
    for seed in range(50):
        lines = CODEBASE["svc/mod0.py"].split("\n")
        random.Random(seed).shuffle(lines)
        reported += len(worker.findings("Audit this code for bugs:\n" + "\n".join(lines)))
    assert reported <= 2


def test_cites_the_prompts_own_numbering() -> None:
    lines = CODEBASE["svc/mod0.py"].split("\n")[20:40]  # file lines 21-40, numbered 1-20
    prompt = "Audit for bugs:\n" + "\n".join(f"{i}: {ln}" for i, ln in enumerate(lines, 1))
    assert [(f["line"], f["end_line"]) for f in _worker().findings(prompt)] == [(10, 11)]


def test_slices_report_only_bugs_in_the_slice() -> None:
    gt = [*GT, {"file": "svc/mod0.py", "start_line": 10, "cwe": "CWE-22", "kind": "path-traversal"}]
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=CODEBASE)
    lines = CODEBASE["svc/mod0.py"].split("\n")
    first = file_audit_prompt("svc/mod0.py", "\n".join(lines[:20]))
    second = file_audit_prompt("svc/mod0.py", "\n".join(lines[20:]), start_line=21)
    assert [f["line"] for f in worker.findings(first)] == [10]
    assert [f["line"] for f in worker.findings(second)] == [30]
    assert sorted(f["line"] for f in worker.findings(first + "\n" + second)) == [10, 30]
    # A slice that cuts a bug's range still shows part of it.
    cut = file_audit_prompt("svc/mod0.py", "\n".join(lines[30:40]), start_line=31)
    assert [f["line"] for f in worker.findings(cut)] == [30]


def test_several_files_in_one_prompt_and_without_a_codebase() -> None:
    prompt = _prompt("svc/mod0.py") + "\n" + _prompt("svc/mod2.py")
    assert sorted(f["file"] for f in _worker().findings(prompt)) == ["svc/mod0.py", "svc/mod2.py"]
    # Without a codebase, <file> blocks are read and trusted; raw text is not.
    blind = OracleWorker(GT, miss_rate=0.0, false_rate=0.0)
    assert sorted(f["file"] for f in blind.findings(prompt)) == ["svc/mod0.py", "svc/mod2.py"]
    assert blind.findings(CODEBASE["svc/mod0.py"]) == []


@pytest.mark.parametrize(
    "instruction",
    [
        "Translate this code to French comments.",
        "Say OK.",
        "Summarise what this module does in one sentence.",
        "Reformat this file with black.",
    ],
)
def test_off_task_instructions_get_almost_nothing(instruction: str) -> None:
    codebase, gt = _task(200)
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase, seed=5)
    found = sum(len(worker.findings(instruction + "\n\n" + text)) for text in codebase.values())
    assert found <= 200 * 0.12, found  # off_task_rate 0.05
    assert not classify_instruction(instruction, WORKER_SYSTEM_PROMPT)
    assert classify_instruction("Summarise the security issues in this file.")


def test_recall_falls_past_the_context_budget() -> None:
    codebase, gt = _task(100)
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase, seed=3)
    everything = "Audit all of this for bugs:\n\n" + "\n\n".join(codebase.values())  # 6,000 lines
    assert len(worker.findings(everything)) <= 100 * 0.3
    few = "Audit all of this for bugs:\n\n" + "\n\n".join(list(codebase.values())[:10])
    assert len(worker.findings(few)) == 10  # 600 lines: within the budget


def _cross_task() -> tuple[dict[str, str], list[dict[str, Any]]]:
    codebase = {"app/views.py": _file(1), "app/dal.py": _file(2), "app/other.py": _file(3)}
    gt = [
        {
            "id": "x1",
            "file": "app/dal.py",
            "start_line": 40,
            "end_line": 40,
            "cwe": "CWE-89",
            "kind": "sql-injection",
            "description": "Cross-file: the value enters in app/views.py line 12.",
            "cross_file": True,
            "related": [{"file": "app/views.py", "line": 12}],
        }
    ]
    return codebase, gt


def test_a_cross_file_bug_needs_its_source_in_the_same_prompt() -> None:
    codebase, gt = _cross_task()
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase)
    sink = file_audit_prompt("app/dal.py", codebase["app/dal.py"])
    source = file_audit_prompt("app/views.py", codebase["app/views.py"])
    other = file_audit_prompt("app/other.py", codebase["app/other.py"])
    assert worker.findings(sink) == []
    assert worker.findings(sink + "\n" + other) == []
    (f,) = worker.findings(source + "\n" + sink)
    assert (f["file"], f["line"]) == ("app/dal.py", 40)
    assert "views" not in json.dumps(f)  # never names the source from the ground truth


def test_the_oracle_reads_ground_truth_as_the_grader_does() -> None:
    # Parsed entries, raw dicts or {"entries": ...}: one reader, so the cross-file rule
    # holds whatever form the caller holds (parsed entries once lost their "related").
    codebase, gt = _cross_task()
    sink = file_audit_prompt("app/dal.py", codebase["app/dal.py"])
    source = file_audit_prompt("app/views.py", codebase["app/views.py"])
    for form in (gt, parse_ground_truth(gt), {"entries": gt}, tuple(gt)):
        worker = OracleWorker(form, miss_rate=0.0, false_rate=0.0, codebase=codebase)
        assert worker.findings(sink) == []
        assert len(worker.findings(source + "\n" + sink)) == 1


def test_a_cross_file_bug_through_a_hop_module() -> None:
    # route -> hop -> sink: the source line and the sink in one prompt, a third file between.
    codebase, gt = _cross_task()
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase)
    shown = [
        file_audit_prompt(p, codebase[p]) for p in ("app/views.py", "app/other.py", "app/dal.py")
    ]
    (f,) = worker.findings("\n".join(shown))
    assert (f["file"], f["line"]) == ("app/dal.py", 40)
    # A short check of the sink with a few lines around the source finds it too.
    window = "\n".join(codebase["app/views.py"].split("\n")[6:18])
    check = "Is there a real vulnerability at line 40 of app/dal.py?\n" + window + "\n"
    sink = codebase["app/dal.py"].split("\n")
    check += "\n".join(f"{n}: {sink[n - 1]}" for n in range(30, 51))
    (f,) = worker.findings(check)
    assert (f["file"], f["line"]) == ("app/dal.py", 40)


def test_a_repeated_line_is_cited_where_its_number_says() -> None:
    # The same text at lines 10 and 40 of one file; the bug is the copy at line 10.
    lines = _file(7).split("\n")
    lines[39] = lines[9]
    codebase = {"app/repo.py": "\n".join(lines)}
    gt = [
        {
            "id": "b",
            "file": "app/repo.py",
            "start_line": 10,
            "end_line": 10,
            "cwe": "CWE-89",
            "kind": "sql-injection",
            "vulnerable": True,
        }
    ]
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase)
    (f,) = worker.findings(file_audit_prompt("app/repo.py", codebase["app/repo.py"]))
    assert f["line"] == 10


def test_a_short_check_confirms_true_bugs_and_rarely_false_ones() -> None:
    # What a root's verification relies on: a check is an independent draw (a new window
    # and instruction), a true bug comes back at the worker's recall, and a false finding
    # only when a new false draw lands next to it (false findings are per 1,000 lines).
    lines = CODEBASE["svc/mod0.py"].split("\n")

    def check(line: int, lo: int, hi: int) -> str:
        shown = "\n".join(f"{n}: {lines[n - 1]}" for n in range(lo, hi + 1))
        return f"Is there a real vulnerability at line {line} of svc/mod0.py? JSON only.\n{shown}"

    def again(worker: OracleWorker, line: int, lo: int, hi: int) -> bool:
        return any(abs(f["line"] - line) <= 3 for f in worker.findings(check(line, lo, hi)))

    workers = [OracleWorker(GT, seed=s, codebase=CODEBASE) for s in range(400)]
    true = sum(again(w, 30, 15, 45) for w in workers) / len(workers)
    false = sum(again(w, 10, 1, 25) for w in workers) / len(workers)
    decoy = sum(again(w, 55, 41, 60) for w in workers) / len(workers)
    assert 0.85 <= true <= 0.95, true
    assert false <= 0.01 and decoy <= 0.02, (false, decoy)


def test_reproducible_regardless_of_order() -> None:
    codebase, gt = _task(60)
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    a = OracleWorker(gt, miss_rate=0.5, false_rate=20.0, seed=3, codebase=codebase)
    b = OracleWorker(gt, miss_rate=0.5, false_rate=20.0, seed=3, codebase=codebase)
    forward = [a.answer(p) for p in prompts]
    backward = [b.answer(p) for p in reversed(prompts)][::-1]
    assert forward == backward
    assert forward == [a.answer(p) for p in prompts]  # asking again gives the same answer
    other = OracleWorker(gt, miss_rate=0.5, false_rate=20.0, seed=4, codebase=codebase)
    assert sum(x != other.answer(p) for x, p in zip(forward, prompts, strict=True)) > 10


def test_miss_rate_is_respected() -> None:
    n = 400
    codebase, gt = _task(n)
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    for rate in (0.1, 0.3):
        worker = OracleWorker(gt, miss_rate=rate, false_rate=0.0, seed=1, codebase=codebase)
        found = sum(len(worker.findings(p)) for p in prompts)
        misses = n - found
        # Binomial(400, rate): stay within 4 standard deviations.
        assert abs(misses - n * rate) < 4 * math.sqrt(n * rate * (1 - rate)), misses


def test_false_findings_come_per_thousand_lines_and_grade_as_false() -> None:
    # The same 24,000 lines as 400 files of 60 lines or 40 files of 600 lines.
    rate = 10.0  # per 1,000 lines: 240 expected
    for n_files, n_lines in ((400, 60), (40, 600)):
        codebase, gt = _task(n_files, n_lines)
        worker = OracleWorker(gt, miss_rate=0.0, false_rate=rate, seed=2, codebase=codebase)
        findings = []
        for p, t in codebase.items():
            lines = t.split("\n")
            for s in range(0, len(lines), 300):  # slices within the context budget
                findings += worker.findings(
                    file_audit_prompt(p, "\n".join(lines[s : s + 300]), s + 1)
                )
        score = grade(parse_findings(findings), parse_ground_truth(gt))
        assert score.tp == n_files and score.fn == 0
        expected = rate * n_files * n_lines / 1000
        assert abs(score.fp - expected) < 4 * math.sqrt(expected), (n_files, score.fp)
        assert {u.reason for u in score.unmatched} == {"decoy", "no-match"}


def test_false_findings_look_like_true_ones() -> None:
    # One class for bugs and decoys, so only the truth differs; many draws of each.
    codebase, gt = _task(300)
    for e in gt:
        e.update(cwe="CWE-89", kind="sql-injection")
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=25.0, seed=9, codebase=codebase)
    findings = [f for p, t in codebase.items() for f in worker.findings(file_audit_prompt(p, t))]
    true = [f for f in findings if f["line"] == 30]
    false = [f for f in findings if f["line"] == 55]  # on the decoy
    assert len(true) == 300 and len(false) > 100
    for fld in ("title", "severity", "fix", "kind", "cwe"):
        a, b = Counter(f[fld] for f in true), Counter(f[fld] for f in false)
        tv = sum(abs(a[k] / len(true) - b[k] / len(false)) for k in a | b) / 2
        assert tv < 0.15, (fld, tv)
    frames = Counter(f["detail"].split("`")[0][:12] for f in true)
    assert set(frames) == {f["detail"].split("`")[0][:12] for f in false}


def test_perfect_oracle_scores_one(tmp_path: Path) -> None:
    gt_path = tmp_path / "ground_truth.json"
    gt_path.write_text(json.dumps({"entries": GT}))
    worker = make_oracle(gt_path, miss_rate=0.0, false_rate=0.0, codebase=CODEBASE)
    findings = [f for p in CODEBASE for f in worker.findings(_prompt(p))]
    score = grade(parse_findings(findings), parse_ground_truth(GT))
    assert (score.precision, score.recall, score.decoys_hit) == (1.0, 1.0, 0)
    assert default_families().label(findings[0]["cwe"], findings[0]["kind"]) == "sql-injection"
