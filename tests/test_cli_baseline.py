"""``deeprepo single-call`` (formerly ``baseline``): one call with as much of the codebase as fits, same outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import EXAMPLE, run_cli

from deeprepo.base.chat import Usage
from deeprepo.codebase.loader import load_codebase
from deeprepo.run.baseline import pack_codebase, parse_baseline_findings
from deeprepo.testing.loopback import LoopbackServer

REPLY = """# Review

The search endpoint builds SQL from user input.

```json
{"findings": [
  {"file": "vulnapi/models.py", "line": 32, "kind": "sql-injection", "cwe": "CWE-89",
   "severity": "high", "title": "SQL injection in search", "detail": "f-string SQL", "fix": "bind parameters"},
  {"file": "not/a/file.py", "line": 3, "kind": "x", "cwe": "CWE-1", "severity": "low", "title": "ghost"}
]}
```
"""


def test_pack_prioritises_entry_points_and_code_and_lists_the_rest() -> None:
    cb = load_codebase(EXAMPLE)
    included, left_out, text = pack_codebase(cb, budget_chars=6000)
    assert included and left_out
    assert set(included) | set(left_out) == set(cb.files)
    assert included[0] in cb.metadata.entry_points
    assert len(text) <= 6000
    assert all(f'<file path="{p}">' in text for p in included)
    everything, nothing, _ = pack_codebase(cb, budget_chars=10**7)
    assert nothing == [] and len(everything) == len(cb.files)


def test_findings_on_files_not_shown_are_dropped() -> None:
    found = parse_baseline_findings(REPLY, {"vulnapi/models.py"})
    assert [(f.file, f.start_line, f.cwe) for f in found] == [("vulnapi/models.py", 32, "CWE-89")]


@pytest.mark.e2e
def test_baseline_cli_against_loopback(loopback: LoopbackServer, tmp_path: Path) -> None:
    loopback.enqueue_openai(REPLY, usage=Usage(input_tokens=4000, output_tokens=500))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"openai/test-big": {"input": 2.0, "output": 8.0}}}))
    out = tmp_path / "run"
    proc = run_cli(
        "single-call",
        str(EXAMPLE),
        "--model",
        "openai/test-big",
        "--base-url",
        loopback.openai_base_url,
        "--context-tokens",
        "20000",
        "--prices",
        str(prices),
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["mode"] == "baseline" and m["turns"] == 1 and m["sub_calls"] == 0
    assert m["total_cost_usd"] == (4000 * 2.0 + 500 * 8.0) / 1e6
    findings = json.loads((out / "findings.json").read_text())
    assert [(f["file"], f["start_line"]) for f in findings] == [("vulnapi/models.py", 32)]
    sent = loopback.requests_for("openai")[0].body
    assert sent is not None
    user = sent["messages"][-1]["content"]
    # With a 20k-token context the whole example fits; the prompt says how many files are shown.
    assert "15 of 15 files shown" in user
    assert "Review" in (out / "report.md").read_text()


@pytest.mark.e2e
def test_baseline_left_out_files_are_named(loopback: LoopbackServer, tmp_path: Path) -> None:
    loopback.enqueue_openai(REPLY, usage=Usage(input_tokens=100, output_tokens=10))
    out = tmp_path / "run"
    proc = run_cli(
        "single-call", str(EXAMPLE), "--model", "openai/test-small", "--base-url", loopback.openai_base_url,
        "--context-tokens", "9000", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr  # files left out were not audited: incomplete
    m = json.loads((out / "metrics.json").read_text())
    assert m["incomplete"] is True and "--context-tokens" in m["incomplete_reason"]
    assert m["total_cost_usd"] is None  # unknown price is unknown, never $0
    assert m["notes"] and "left out" in m["notes"][0]
    user = loopback.requests_for("openai")[0].body["messages"][-1]["content"]  # type: ignore[index]
    assert "did not fit" in user
    assert "left out" in (out / "report.md").read_text()


@pytest.mark.e2e
def test_baseline_rerun_into_the_same_out_keeps_the_old_files(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    for _ in range(2):
        loopback.enqueue_openai(REPLY, usage=Usage(input_tokens=100, output_tokens=10))
        proc = run_cli(
            "single-call", str(EXAMPLE), "--model", "openai/t", "--base-url", loopback.openai_base_url,
            "--out", str(out), "--no-cache",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    kinds = [json.loads(x)["type"] for x in (out / "trajectory.jsonl").read_text().splitlines()]
    assert kinds == ["start", "turn", "end"]
    assert (out / "trajectory.prev.jsonl").exists()
