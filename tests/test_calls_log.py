"""calls.jsonl: one record per model call; cut texts say so; a resumed run numbers on;
a disk that fails stops the file, never the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeprepo.base.chat import ChatRequest, Message, Usage
from deeprepo.providers.ledger import LLMCall
from deeprepo.report.calls import TEXT_LIMIT, CallLog, read_calls


def _request(text: str, system: str | None = "sys") -> ChatRequest:
    return ChatRequest(
        (Message("user", "old"), Message("assistant", "a"), Message("user", text)), system=system
    )


def test_records_keep_the_newest_prompt_and_cut_long_texts(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with CallLog(path) as log:
        log(LLMCall("sub", "m", Usage(10, 2), 0.5, 0.25), _request("short"), "reply")
        log.turn = 2
        log(LLMCall("root", "r", Usage(1, 1), None, 0.1), _request("x" * (TEXT_LIMIT + 5)), "y")
    first, second = read_calls(path)
    assert (first["seq"], first["turn"], first["role"], first["system"]) == (1, 1, "sub", "sys")
    assert (first["prompt"], first["response"], first["truncated"]) == ("short", "reply", False)
    assert (first["input_tokens"], first["output_tokens"], first["cost_usd"]) == (10, 2, 0.5)
    assert second["system"] is None  # root calls: the system prompt is in trajectory.jsonl
    assert (second["turn"], second["cost_usd"], second["truncated"]) == (2, None, True)
    assert len(second["prompt"]) == TEXT_LIMIT


def test_a_resumed_run_appends_and_numbers_on(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with CallLog(path) as log:
        log(LLMCall("sub", "m"), _request("a"), "b")
    with path.open("a") as fh:
        fh.write('{"seq": 7, "tor')  # a crash mid-record
    with CallLog(path) as log:
        log(LLMCall("sub", "m"), _request("c"), None)
    assert [r["seq"] for r in read_calls(path)] == [1, 2]


def test_a_failing_disk_stops_the_log_not_the_caller(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    log = CallLog(Path("/dev/full"))
    log(LLMCall("sub", "m"), _request("a" * 10_000), "b" * 10_000)
    log(LLMCall("sub", "m"), _request("a"), "b")  # after the failure: silently dropped
    log.close()
    assert log.failed and "space" in log.failed.lower()


@pytest.mark.e2e
def test_an_offline_run_logs_every_call(tmp_path: Path) -> None:
    from clihelp import EXAMPLE, run_cli

    out = tmp_path / "run"
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    calls = read_calls(out / "calls.jsonl")
    for row in m["usage"]:
        mine = [c for c in calls if (c["role"], c["model"]) == (row["role"], row["model"])]
        assert len(mine) == row["calls"] > 0
        assert sum(c["output_tokens"] for c in mine) == row["output_tokens"]
    assert {c["role"] for c in calls} == {"root", "sub"}
    assert all(c["response"] for c in calls)
