"""The real CLI, through the real SDKs, against the loopback server: a scripted
root conversation on the Anthropic route, sub-workers on the OpenRouter route."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from clihelp import loopback_analyze_args, run_cli

from deeprepo.base.chat import Usage
from deeprepo.report.calls import read_calls
from deeprepo.testing.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.e2e

PRICES = {
    "models": {
        "anthropic/test-root": {
            "input": 5.0,
            "output": 25.0,
            "cache_read": 0.5,
            "cache_write": 6.25,
        },
        "openrouter/test/sub": {
            "input": 0.12,
            "output": 0.48,
            "cache_read": 0.12,
            "cache_write": 0.12,
        },
    }
}
SUB_USAGE = Usage(input_tokens=1000, output_tokens=50)
WORKER_REPLY = (
    '{"findings": [{"line": 1, "kind": "test", "cwe": "CWE-20", "severity": "low", "title": "t"}]}'
)


def _fence(code: str) -> str:
    return f"Next step.\n\n```python\n{code}\n```\n"


def _dispatch_turn(n: int) -> str:
    return _fence(
        "paths = sorted(codebase)\n"
        f"replies = llm_batch([file_audit_prompt(paths[i % len(paths)]) + '#{n}-' + str(i) for i in range(15)])\n"
        "print(len(replies), sum(r.startswith('[llm error]') for r in replies))"
    )


def _write_prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return path


def _cli_args(srv: LoopbackServer, out: Path, prices: Path, *extra: str) -> list[str]:
    return loopback_analyze_args(srv, out, "--prices", str(prices), *extra)


def _cost(u: Usage, p: dict[str, float]) -> float:
    return (
        u.input_tokens * p["input"]
        + u.output_tokens * p["output"]
        + u.cache_read_tokens * p["cache_read"]
        + u.cache_write_tokens * p["cache_write"]
    ) / 1e6


def test_five_turn_conversation_with_sixty_sub_calls_is_metered_exactly(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    root_usages = [Usage(2000 + 100 * i, 300 + 10 * i, 1500 * i, 700) for i in range(5)]
    for i in range(4):
        loopback.enqueue_anthropic(_dispatch_turn(i), usage=root_usages[i])
    loopback.enqueue_anthropic(_fence("set_answer('# Report\\nAll done.')"), usage=root_usages[4])
    loopback.add_rule("Audit the file", Reply(WORKER_REPLY, usage=SUB_USAGE), route="openai")

    out = tmp_path / "run"
    proc = run_cli(
        *_cli_args(loopback, out, _write_prices(tmp_path)),
        env={"ANTHROPIC_API_KEY": "test-key", "OPENROUTER_API_KEY": "test-key"},
    )
    assert proc.returncode == 0, proc.stderr  # every file went to a worker: complete
    m: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    assert m["turns"] == 5 and m["stop_reason"] == "answer_ready"
    assert m["sub_calls"] == 60
    assert len(loopback.requests_for("anthropic")) == 5
    assert len(loopback.requests_for("openai")) == 60

    rows = {u["role"]: u for u in m["usage"]}
    root_total = sum(root_usages, Usage())
    assert (rows["root"]["input_tokens"], rows["root"]["output_tokens"]) == (
        root_total.input_tokens,
        root_total.output_tokens,
    )
    assert (rows["root"]["cache_read_tokens"], rows["root"]["cache_write_tokens"]) == (
        root_total.cache_read_tokens,
        root_total.cache_write_tokens,
    )
    assert rows["sub"]["calls"] == 60
    assert (rows["sub"]["input_tokens"], rows["sub"]["output_tokens"]) == (60_000, 3_000)

    root_cost = sum(_cost(u, PRICES["models"]["anthropic/test-root"]) for u in root_usages)
    sub_cost = 60 * _cost(SUB_USAGE, PRICES["models"]["openrouter/test/sub"])
    assert rows["root"]["cost_usd"] == pytest.approx(root_cost, abs=1e-9)
    assert rows["sub"]["cost_usd"] == pytest.approx(sub_cost, abs=1e-9)
    assert round(m["total_cost_usd"], 2) == round(root_cost + sub_cost, 2)
    assert m["total_cost_usd"] == pytest.approx(root_cost + sub_cost, abs=1e-9)

    # calls.jsonl: every call once, with its turn, text, tokens and cost; sums = the ledger.
    calls = read_calls(out / "calls.jsonl")
    assert [c["seq"] for c in calls] == list(range(1, 66))
    root_calls = [c for c in calls if c["role"] == "root"]
    sub_calls = [c for c in calls if c["role"] == "sub"]
    assert [c["turn"] for c in root_calls] == [1, 2, 3, 4, 5]
    assert sorted({c["turn"] for c in sub_calls}) == [1, 2, 3, 4]
    assert all(sum(c["turn"] == t for c in sub_calls) == 15 for t in range(1, 5))
    assert all(c["response"] == WORKER_REPLY and "Audit the file" in c["prompt"] for c in sub_calls)
    assert "llm_batch" in json.dumps(root_calls[0]) or root_calls[0]["prompt"]
    for role, group in (("root", root_calls), ("sub", sub_calls)):
        assert sum(c["cost_usd"] for c in group) == pytest.approx(rows[role]["cost_usd"], abs=1e-12)
        assert sum(c["input_tokens"] for c in group) == rows[role]["input_tokens"]
        assert sum(c["output_tokens"] for c in group) == rows[role]["output_tokens"]
    assert all(c["error"] is None and not c["cached"] and c["latency_s"] >= 0 for c in calls)
    assert all(0 <= a["t"] <= b["t"] + 5 for a, b in itertools.pairwise(calls))

    # Prompt caching is asked for on the root's growing conversation.
    last = loopback.requests_for("anthropic")[-1].body
    assert last is not None
    assert "cache_control" in json.dumps(last)
    # The sub-workers got the file content, not just paths.
    first_sub = loopback.requests_for("openai")[0].body
    assert first_sub is not None and "<file path=" in json.dumps(first_sub)


def test_max_cost_stops_the_run_and_writes_an_incomplete_report(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    # Each root call costs exactly $0.01 (2,000 input tokens at $5/M); the sub is free.
    call = Usage(input_tokens=2000, output_tokens=0)
    for i in range(10):
        loopback.enqueue_anthropic(_fence(f"step = {i}\nprint(step)"), usage=call)
    out = tmp_path / "run"
    proc = run_cli(*_cli_args(loopback, out, _write_prices(tmp_path), "--max-cost", "0.025"))
    # The scripted root audits a few files only: an honest run says incomplete (exit 3).
    assert proc.returncode == 3, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["stop_reason"] == "budget"
    assert m["incomplete"] is True
    # Never more than the limit plus the one root call that was in flight.
    assert m["total_cost_usd"] <= 0.025 + 0.01 + 1e-12
    assert m["turns"] == 3 and len(loopback.requests_for("anthropic")) == 3
    report = (out / "report.md").read_text()
    assert "Incomplete" in report and "$0.0300" in report


def test_infinite_loop_is_stopped_and_the_episode_goes_on(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.enqueue_anthropic(_fence("keep = 41\nwhile True:\n    pass"))
    loopback.enqueue_anthropic(_fence("print('alive', len(codebase))\nset_answer('done')"))
    out = tmp_path / "run"
    proc = run_cli(*_cli_args(loopback, out, _write_prices(tmp_path), "--cell-timeout", "1"))
    # The scripted root audits a few files only: an honest run says incomplete (exit 3).
    assert proc.returncode == 3, proc.stderr
    turns = [json.loads(x) for x in (out / "trajectory.jsonl").read_text().splitlines()]
    turns = [t for t in turns if t["type"] == "turn"]
    assert turns[0]["error"] == "timeout"
    told = turns[0]["output"]
    assert "1s limit" in told and "stopped" in told and "fresh kernel" in told
    assert "alive 15" in turns[1]["output"]
    # What the root was told reached it in the next request.
    second = loopback.requests_for("anthropic")[1].body
    assert second is not None and "1s limit and was stopped" in json.dumps(second)
    m = json.loads((out / "metrics.json").read_text())
    assert m["stop_reason"] == "answer_ready" and m["turns"] == 2
