"""The README's main job: an offline analysis of the bundled example, through the real CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, EXAMPLE_TRUTH, run_cli

from deeprepo.findings.grading import grade, load_findings, load_ground_truth

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("offline") / "run"
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Offline engine" in proc.stdout
    return out


def _truth() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(EXAMPLE_TRUTH.read_text())
    return data


@pytest.mark.parametrize(
    "cwe_family", [("CWE-89",), ("CWE-916", "CWE-328", "CWE-327"), ("CWE-798",)]
)
def test_planted_bug_found_on_its_line(offline_run: Path, cwe_family: tuple[str, ...]) -> None:
    findings = json.loads((offline_run / "findings.json").read_text())
    entry = next(e for e in _truth() if e["vulnerable"] and e["cwe"] in cwe_family)
    hits = [
        f
        for f in findings
        if f["file"] == entry["file"]
        and f["cwe"] in cwe_family
        and entry["start_line"] <= f["start_line"] <= entry["end_line"]
    ]
    assert hits, f"no finding for {entry['id']} at {entry['file']}:{entry['start_line']}"


def test_no_finding_on_decoys(offline_run: Path) -> None:
    score = grade(load_findings(offline_run / "findings.json"), load_ground_truth(EXAMPLE_TRUTH))
    assert score.decoys_total == 2
    assert score.decoys_hit == 0
    findings = json.loads((offline_run / "findings.json").read_text())
    for decoy in (e for e in _truth() if not e["vulnerable"]):
        near = [
            f
            for f in findings
            if f["file"] == decoy["file"] and abs(f["start_line"] - decoy["start_line"]) <= 2
        ]
        assert near == [], f"finding on decoy {decoy['id']}: {near}"


def test_findings_json_shape(offline_run: Path) -> None:
    findings = json.loads((offline_run / "findings.json").read_text())
    assert isinstance(findings, list) and findings
    keys = {"file", "start_line", "end_line", "kind", "cwe", "severity", "title", "detail", "fix"}
    for f in findings:
        assert set(f) == keys | {"scope", "fingerprint"}
        assert f["scope"] == "source"
        assert f["cwe"] is None or f["cwe"].startswith("CWE-")
        assert f["end_line"] >= f["start_line"] >= 1
    # one fingerprint: findings.json's are findings.sarif's (what --baseline matches)
    sarif = json.loads((offline_run / "findings.sarif").read_text())
    in_sarif = {
        r["partialFingerprints"]["deeprepoFindingHash/v1"] for r in sarif["runs"][0]["results"]
    }
    assert {f["fingerprint"] for f in findings} == in_sarif


def test_metrics_and_report(offline_run: Path) -> None:
    m = json.loads((offline_run / "metrics.json").read_text())
    assert m["offline"] is True
    assert m["stop_reason"] == "answer_ready" and m["incomplete"] is False
    assert m["root_model"] == "scripted/expert" and m["sub_model"] == "static"
    assert m["turns"] == 3
    # Every file but the docs reached a worker, small files packed several to a prompt.
    assert m["files_covered"] == m["coverable_files"] == 14 and m["unaudited_paths"] == []
    assert m["complete"] is True and 1 <= m["sub_calls"] < 14
    assert m["total_cost_usd"] == 0.0
    roles = {(u["role"], u["model"]): u for u in m["usage"]}
    assert roles[("sub", "static")]["calls"] == m["sub_calls"]
    assert roles[("root", "scripted/expert")]["calls"] == 3
    for u in m["usage"]:
        for key in (
            "calls",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost_usd",
        ):
            assert key in u
    report = (offline_run / "report.md").read_text()
    assert "Offline engine" in report
    assert "vulnapi/models.py:32" in report
    assert "Run summary" in report and "sub-LLM" in report


def test_trajectory_has_every_turn(offline_run: Path) -> None:
    lines = [json.loads(x) for x in (offline_run / "trajectory.jsonl").read_text().splitlines()]
    assert [r["type"] for r in lines] == ["start", "turn", "turn", "turn", "end"]
    assert [r["index"] for r in lines if r["type"] == "turn"] == [1, 2, 3]
    assert lines[-1]["stop_reason"] == "answer_ready"


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda tmp: tmp / "missing", "does not exist"),
        (lambda tmp: (tmp / "f.py").write_text("x = 1\n") and tmp / "f.py", "is a file"),
        (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "no text files"),
    ],
    ids=["missing", "file", "empty"],
)
def test_bad_paths_give_one_line_and_exit_2(tmp_path: Path, make: Any, needle: str) -> None:
    target = make(tmp_path)
    proc = run_cli("analyze", str(target), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0]


def test_help_explains_itself() -> None:
    proc = run_cli("analyze", "--help")
    assert proc.returncode == 0
    for flag in (
        "--root",
        "--sub",
        "--max-cost",
        "--max-turns",
        "--max-sub-calls",
        "--timeout",
        "--no-cache",
        "--prompt",
        "--rev",
    ):
        assert flag in proc.stdout


def test_a_file_an_analyzer_cannot_read_is_said_everywhere(tmp_path: Path) -> None:
    """Python 3.12 syntax under 3.11: bandit cannot parse it; the file is not audited, the
    run is incomplete (exit 3) and says which file, in the console, metrics.json and
    report.md, instead of losing its findings without a word."""
    repo = tmp_path / "repo" / "app"
    repo.mkdir(parents=True)
    (repo / "new.py").write_text(
        "import hashlib\n\ntype Point = tuple[int, int]\n\n\n"
        "def digest(password):\n    return hashlib.md5(password.encode()).hexdigest()\n"
    )
    (repo / "old.py").write_text(
        "import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n"
    )
    out = tmp_path / "run"
    proc = run_cli("analyze", str(tmp_path / "repo"), "--out", str(out))
    metrics = json.loads((out / "metrics.json").read_text())
    if sys.version_info >= (3, 12):  # bandit parses the file: nothing to say
        assert proc.returncode == 0, proc.stderr
        assert metrics["not_analysed"] == []
        return
    assert proc.returncode == 3, proc.stderr
    assert [g["path"] for g in metrics["not_analysed"]] == ["app/new.py"]
    assert metrics["files_covered"] == 1 and metrics["coverable_files"] == 2
    assert "1 file(s) not analysed: 1 not read by bandit" in metrics["incomplete_reason"]
    assert "Not analysed (1, by bandit" in proc.stdout and "app/new.py" in proc.stdout
    assert "> - `app/new.py`: bandit: not analysed by bandit" in (out / "report.md").read_text()
    # The other file's finding is still there.
    findings = json.loads((out / "findings.json").read_text())
    assert any(f["file"] == "app/old.py" and f["cwe"] == "CWE-78" for f in findings)
