"""findings.sarif (report/sarif.py): valid SARIF 2.1.0 from every kind of run, with what
GitHub code scanning reads, stable fingerprints, and an incomplete run said to be one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clihelp import EXAMPLE, run_cli

from deeprepo.base.finding import Finding
from deeprepo.base.records import RunResult
from deeprepo.report.sarif import FINGERPRINT_KEY, fingerprints, sarif_log
from deeprepo.testing.loopback import LoopbackServer, Reply

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


def validate(log: dict[str, Any]) -> None:
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)


def finding(**kw: Any) -> Finding:
    base: dict[str, Any] = dict(
        file="app/db.py",
        start_line=3,
        end_line=4,
        kind="sql-injection",
        cwe="CWE-89",
        severity="high",
        title="SQL from a string",
        detail="user input reaches execute()",
        fix="use parameters",
    )
    return Finding(**{**base, **kw})


FILES = {
    "app/db.py": "import sqlite3\n\ncur.execute('SELECT ' + q)\nprint(1)\ncur.execute('SELECT ' + q)\n",
    "app/a b.py": "x = 1\n",
}


def result(findings: list[Finding], **kw: Any) -> RunResult:
    base = RunResult(
        answer="done",
        incomplete=False,
        stop_reason="answer_ready",
        stop_detail="",
        findings=findings,
        turns=[],
        sub_calls=2,
        files_covered=sorted(FILES),
        coverable_files=2,
        usage=[],
        total_cost_usd=0.0,
        wall_seconds=1.0,
        root_model="scripted/expert",
        sub_model="static",
        sandbox_mode="process",
    )
    return replace(base, **kw)


def test_log_shape_rules_levels_and_locations() -> None:
    fs = [
        finding(),
        finding(file="app/a b.py", start_line=1, end_line=1, severity="critical"),
        finding(kind="weak-hash", cwe="CWE-328", severity="low", start_line=1, end_line=1),
        finding(
            kind="logic-error", cwe=None, severity="info", title="off by one", detail="", fix=""
        ),
    ]
    log = sarif_log(result(fs), FILES)
    validate(log)
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "deeprepo" and driver["version"] and driver["informationUri"]
    rules = {r["id"]: r for r in driver["rules"]}
    assert list(rules) == ["sql-injection", "weak-hash", "logic-error"]  # one per kind
    sql = rules["sql-injection"]
    assert sql["properties"]["tags"] == ["security", "external/cwe/cwe-89"]
    assert sql["properties"]["security-severity"] == "9.5"  # its worst finding is critical
    assert sql["helpUri"] == "https://cwe.mitre.org/data/definitions/89.html"
    assert "properties" not in rules["logic-error"] and "helpUri" not in rules["logic-error"]
    levels = [(r["ruleId"], r["level"]) for r in run["results"]]
    assert levels == [
        ("sql-injection", "error"),
        ("sql-injection", "error"),
        ("weak-hash", "note"),
        ("logic-error", "note"),
    ]
    for r in run["results"]:
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    loc = run["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "app/a%20b.py", "uriBaseId": "%SRCROOT%"}
    second = run["results"][1]
    assert second["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "endLine": 4}
    assert second["message"]["text"] == (
        "SQL from a string. user input reaches execute() Fix: use parameters"
    )
    assert second["properties"] == {
        "scope": "source",
        "severity": "high",
        "cwe": "CWE-89",
        "title": "SQL from a string",
    }
    assert run["invocations"] == [
        {
            "executionSuccessful": True,
            "properties": {
                "stopReason": "answer_ready",
                "filesAudited": 2,
                "filesToAudit": 2,
                "unauditedPaths": [],
                "salvaged": False,
            },
        }
    ]


def test_model_text_is_kept_as_plain_json_text() -> None:
    text = 'Inject <script>alert("x")</script> | `code` **bold** \u202e\n[link](http://x)'
    log = sarif_log(result([finding(title=text, detail="", fix="")]), FILES)
    validate(log)
    out = json.loads(json.dumps(log))
    assert out["runs"][0]["results"][0]["message"]["text"] == text


def test_fingerprints_are_stable_and_follow_the_line_text() -> None:
    one = finding()
    moved = {"app/db.py": "# header\n" + FILES["app/db.py"]}
    a = fingerprints([one], FILES)
    # The same finding, reworded and with the line moved down by one: same fingerprint.
    b = fingerprints([replace(one, start_line=4, end_line=5, title="other words")], moved)
    assert a == b and a[0].endswith(":1")
    # Re-indented: same; another kind on that line or another file: different.
    indented = {"app/db.py": FILES["app/db.py"].replace("cur.execute", "    cur.execute")}
    assert fingerprints([one], indented) == a
    assert fingerprints([replace(one, kind="xss")], FILES) != a
    # The same line text twice in a file: told apart by occurrence.
    twice = fingerprints([one, replace(one, start_line=5, end_line=5)], FILES)
    assert twice[0] == a[0] and twice[1] == a[0].replace(":1", ":2")
    # A line the repository does not have is hashed by its number.
    gone = fingerprints([replace(one, file="nope.py")], FILES)
    assert gone != a and gone == fingerprints([replace(one, file="nope.py")], {})


def test_incomplete_run_says_so() -> None:
    r = result(
        [finding()],
        files_covered=["app/db.py"],
        unaudited=["app/a b.py"],
        incomplete_reason="1 worker prompts refused by the sub-calls budget (raise --max-sub-calls)",
    )
    log = sarif_log(r, FILES)
    validate(log)
    inv = log["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert inv["properties"]["unauditedPaths"] == ["app/a b.py"]
    (note,) = inv["toolExecutionNotifications"]
    assert note["level"] == "error" and note["descriptor"]["id"] == "incomplete-run"
    assert note["message"]["text"] == (
        "Incomplete run: audited 1 of 2 files: 1 worker prompts refused by the sub-calls "
        "budget (raise --max-sub-calls)"
    )


def _sarif(out: Path) -> dict[str, Any]:
    log: dict[str, Any] = json.loads((out / "findings.sarif").read_text())
    validate(log)
    return log


@pytest.mark.e2e
def test_analyze_example_writes_valid_sarif_matching_findings_json(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    log = _sarif(out)
    findings = json.loads((out / "findings.json").read_text())
    results = log["runs"][0]["results"]
    assert len(results) == len(findings) > 0
    for r, f in zip(results, findings, strict=True):
        loc = r["locations"][0]["physicalLocation"]
        assert (r["ruleId"], loc["artifactLocation"]["uri"], loc["region"]["startLine"]) == (
            f["kind"],
            f["file"],
            f["start_line"],
        )
        assert r["properties"]["scope"] == f["scope"]
    assert log["runs"][0]["invocations"][0]["executionSuccessful"] is True
    # A rerun gives the same fingerprints (the earlier files are set aside as .prev).
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    before = json.loads((out / "findings.prev.sarif").read_text())
    prints = [
        [r["partialFingerprints"][FINGERPRINT_KEY] for r in x["runs"][0]["results"]]
        for x in (before, _sarif(out))
    ]
    assert prints[0] == prints[1] and len(set(prints[0])) == len(prints[0])


@pytest.mark.e2e
def test_partial_run_is_incomplete_in_sarif_too(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out), "--max-sub-calls", "1")
    assert proc.returncode == 3, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    inv = _sarif(out)["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False and metrics["complete"] is False
    assert inv["properties"]["unauditedPaths"] == metrics["unaudited_paths"] != []
    assert metrics["incomplete_reason"] in inv["toolExecutionNotifications"][0]["message"]["text"]


@pytest.mark.e2e
def test_baseline_writes_valid_sarif(loopback: LoopbackServer, tmp_path: Path) -> None:
    reply = json.dumps(
        {
            "findings": [
                {"file": "vulnapi/models.py", "line": 32, "kind": "sql-injection",
                 "cwe": "CWE-89", "severity": "high", "title": "SQL built from strings"}
            ]
        }
    )  # fmt: skip
    loopback.add_rule("", Reply(reply), route="openai")
    out = tmp_path / "base"
    proc = run_cli(
        "single-call", str(EXAMPLE), "--model", "openai/t", "--base-url", loopback.openai_base_url,
        "--out", str(out), "--no-cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (r,) = _sarif(out)["runs"][0]["results"]
    assert r["ruleId"] == "sql-injection" and r["level"] == "error"
    b = json.loads((out / "metrics.json").read_text())["behaviour"]
    assert b["label"] == "no-delegation" and b["answer_turn"] == 1
    assert b["files_read_by_root"] > 0 and b["files_sent_to_workers"] == 0


@pytest.mark.parametrize("n", [0])
def test_no_findings_is_still_a_valid_log(n: int) -> None:
    log = sarif_log(result([]), FILES)
    validate(log)
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


@pytest.mark.e2e
def test_failed_baseline_reads_nothing_and_says_so(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add_rule("", Reply(status=400, error_message="bad request"), route="openai")
    out = tmp_path / "base"
    proc = run_cli(
        "single-call", str(EXAMPLE), "--model", "openai/t", "--base-url", loopback.openai_base_url,
        "--out", str(out), "--no-cache",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    b = json.loads((out / "metrics.json").read_text())["behaviour"]
    assert b["files_read_by_root"] == 0 and b["answer_turn"] is None
    assert b["label"] == "no-delegation"
    inv = _sarif(out)["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False and inv["properties"]["stopReason"] == "error"
