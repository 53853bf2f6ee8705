"""The oracle worker: answers from ground truth for content it is shown, seeded and reproducible."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from deeprepo.findings.grading import grade, parse_findings, parse_ground_truth
from deeprepo.orchestrator.prompts import file_audit_prompt
from deeprepo.providers.base import ChatModel, ChatRequest, Message
from deeprepo.workers.oracle import OracleWorker, make_oracle


def _file(i: int, n: int = 60) -> str:
    return "\n".join(
        f"    value_{i}_{k} = handle_request(item_{k}, mode={k})" for k in range(1, n + 1)
    )


def _task(n_files: int) -> tuple[dict[str, str], list[dict[str, Any]]]:
    codebase = {f"svc/mod{i}.py": _file(i) for i in range(n_files)}
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
                "severity": "high",
                "description": "User input is formatted into SQL. Use parameters.",
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
                "vulnerable": False,
            }
        )
    return codebase, gt


CODEBASE, GT = _task(3)


def _prompt(path: str) -> str:
    return file_audit_prompt(path, CODEBASE[path])


def test_protocol_and_json_shape() -> None:
    worker = OracleWorker(GT, miss_rate=0.0, false_rate=0.0)
    assert isinstance(worker, ChatModel) and worker.name == "oracle"
    data = json.loads(worker.answer(_prompt("svc/mod0.py")))
    assert data == {
        "findings": [
            {
                "file": "svc/mod0.py",
                "line": 30,
                "end_line": 31,
                "kind": "sql-injection",
                "cwe": "CWE-89",
                "severity": "high",
                "title": "User input is formatted into SQL",
                "detail": "User input is formatted into SQL. Use parameters.",
                "fix": "Use parameterised queries (placeholders) instead of building SQL from strings.",
            }
        ]
    }


async def test_complete_returns_zero_usage() -> None:
    worker = OracleWorker(GT, miss_rate=0.0, false_rate=0.0)
    req = ChatRequest(messages=(Message("user", _prompt("svc/mod1.py")),), system="audit")
    comp = await worker.complete(req)
    assert comp.model == "oracle" and comp.usage.input_tokens == 0 and comp.usage.output_tokens == 0
    assert [f["line"] for f in json.loads(comp.text)["findings"]] == [30]
    await worker.aclose()


def test_path_only_prompts_get_nothing() -> None:
    worker = OracleWorker(GT, miss_rate=0.0, false_rate=1.0, codebase=CODEBASE)
    for prompt in [
        "Audit svc/mod0.py for SQL injection at line 30.",
        '<file path="svc/mod0.py">\n</file>',
        '<file path="svc/mod0.py" lines="25-35">\n   30 | this is not the real line\n</file>',
        file_audit_prompt("svc/missing.py", "made_up = 'content of a file that does not exist'"),
    ]:
        assert json.loads(worker.answer(prompt)) == {"findings": []}


def test_without_codebase_blocks_are_trusted_but_raw_text_is_not() -> None:
    worker = OracleWorker(GT, miss_rate=0.0, false_rate=0.0)
    assert worker.findings(CODEBASE["svc/mod0.py"]) == []
    with_cb = OracleWorker(GT, miss_rate=0.0, false_rate=0.0, codebase=CODEBASE)
    assert [f["file"] for f in with_cb.findings("Review:\n" + CODEBASE["svc/mod0.py"])] == [
        "svc/mod0.py"
    ]
    # Under half of the file's lines without markup is not "most of the file".
    part = "\n".join(CODEBASE["svc/mod0.py"].split("\n")[5:33])
    assert with_cb.findings(part) == []


def test_slices_report_only_bugs_in_the_slice() -> None:
    gt = [*GT, {"file": "svc/mod0.py", "start_line": 10, "cwe": "CWE-22", "kind": "path-traversal"}]
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=CODEBASE)
    lines = CODEBASE["svc/mod0.py"].split("\n")
    first = file_audit_prompt("svc/mod0.py", "\n".join(lines[:20]))
    second = file_audit_prompt("svc/mod0.py", "\n".join(lines[20:]), start_line=21)
    assert [f["line"] for f in worker.findings(first)] == [10]
    assert [f["line"] for f in worker.findings(second)] == [30]
    assert [f["line"] for f in worker.findings(first + "\n" + second)] == [10, 30]
    # A slice that cuts a bug's range still shows part of it.
    cut = file_audit_prompt("svc/mod0.py", "\n".join(lines[30:40]), start_line=31)
    assert [f["line"] for f in worker.findings(cut)] == [30]


def test_several_files_in_one_prompt() -> None:
    worker = OracleWorker(GT, miss_rate=0.0, false_rate=0.0)
    prompt = _prompt("svc/mod0.py") + "\n" + _prompt("svc/mod2.py")
    assert sorted(f["file"] for f in worker.findings(prompt)) == ["svc/mod0.py", "svc/mod2.py"]


def test_reproducible_regardless_of_order() -> None:
    codebase, gt = _task(60)
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    a = OracleWorker(gt, miss_rate=0.5, false_rate=0.5, seed=3, codebase=codebase)
    b = OracleWorker(gt, miss_rate=0.5, false_rate=0.5, seed=3, codebase=codebase)
    forward = [a.answer(p) for p in prompts]
    backward = [b.answer(p) for p in reversed(prompts)][::-1]
    assert forward == backward
    assert forward == [a.answer(p) for p in prompts]  # asking again gives the same answer
    other = OracleWorker(gt, miss_rate=0.5, false_rate=0.5, seed=4, codebase=codebase)
    assert sum(x != other.answer(p) for x, p in zip(forward, prompts, strict=True)) > 10


def test_miss_rate_is_respected() -> None:
    n = 400
    codebase, gt = _task(n)
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    for rate in (0.1, 0.3):
        worker = OracleWorker(gt, miss_rate=rate, false_rate=0.0, seed=1)
        found = sum(len(worker.findings(p)) for p in prompts)
        misses = n - found
        # Binomial(400, rate): stay within 4 standard deviations.
        assert abs(misses - n * rate) < 4 * math.sqrt(n * rate * (1 - rate)), misses


def test_false_findings_rate_and_they_grade_as_false() -> None:
    n = 400
    codebase, gt = _task(n)
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    worker = OracleWorker(gt, miss_rate=0.0, false_rate=0.5, seed=2, codebase=codebase)
    findings = [f for p in prompts for f in worker.findings(p)]
    score = grade(parse_findings(findings), parse_ground_truth(gt))
    assert score.tp == n and score.fn == 0
    assert abs(score.fp - n * 0.5) < 4 * math.sqrt(n * 0.25), score.fp
    # About half of the false findings land on the decoy each file shows.
    assert 0.3 < score.decoys_hit / score.fp < 0.7
    assert {u.reason for u in score.unmatched} == {"decoy", "no-match"}


def test_perfect_oracle_scores_one(tmp_path: Path) -> None:
    gt_path = tmp_path / "ground_truth.json"
    gt_path.write_text(json.dumps({"entries": GT}))
    worker = make_oracle(gt_path, miss_rate=0.0, false_rate=0.0)
    findings = [f for p in CODEBASE for f in worker.findings(_prompt(p))]
    score = grade(parse_findings(findings), parse_ground_truth(GT))
    assert (score.precision, score.recall, score.decoys_hit) == (1.0, 1.0, 0)
