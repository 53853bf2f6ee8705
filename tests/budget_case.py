"""The evaluation budget case, run by the local pool (test_eval_runner) and on Ray
(test_ray_executor): an HTTP root priced so each call costs exactly $0.011, four rollouts,
``--max-cost 0.02``. Both executors must give the same outcome, so it is written once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from deeprepo.base.chat import ChatRequest, Message, Usage
from deeprepo.builtin import make_policy
from deeprepo.cli.app import app
from deeprepo.rl.evals.results import load_results
from deeprepo.testing.loopback import LoopbackServer, Reply


def expert_over_http() -> Callable[[str, dict[str, object]], Reply]:
    """A loopback server's reply function: the scripted expert's reply to the chat it is
    sent, with a usage block of 1,000 input and 100 output tokens."""
    expert = make_policy("expert")

    def reply(route: str, body: dict[str, object]) -> Reply:
        raw = body.get("messages")
        msgs = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        convo = tuple(
            Message(m["role"], str(m["content"]))
            for m in msgs
            if m["role"] in ("user", "assistant")
        )
        text = asyncio.run(expert.complete(ChatRequest(convo))).text
        return Reply(text, usage=Usage(input_tokens=1000, output_tokens=100))

    return reply


def run_max_cost_eval(tmp_path: Path, *extra: str) -> tuple[Any, int]:
    """``deeprepo eval`` of the scripted expert served over HTTP at $0.011 a root call, with
    ``--max-cost 0.02`` and ``extra`` options; the CLI result and the server's request count."""
    reply = expert_over_http()
    # $10 per 1M tokens both ways: each root call costs exactly $0.011.
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"openai/priced": {"input": 10.0, "output": 10.0}}}))
    with LoopbackServer(reply_fn=reply, ttl_s=60) as srv:
        result = CliRunner().invoke(
            app,
            ["eval", "--model", "openai/priced", "--base-url", srv.openai_base_url,
             "-n", "2", "-r", "2", "--generate", "small:seed=1", "--out", str(tmp_path / "e"),
             "-q", "--sandbox", "process", "--concurrency", "1", "--prices", str(prices),
             "--max-cost", "0.02", *extra],
        )  # fmt: skip
        return result, srv.request_count


def assert_stopped_on_the_budget(tmp_path: Path, result: Any, requests: int) -> None:
    """Two calls ($0.022) pass the $0.02 cap: the first rollout's third root call is refused,
    and the three rollouts after it never start; the evaluation says so and exits 3."""
    assert result.exit_code == 3, result.output
    assert requests == 2
    rows = load_results(tmp_path / "e")
    assert len(rows) == 1
    assert rows[0].extra["stop_reason"] == "budget" and rows[0].stop_condition == "budget"
    assert "cost budget spent" in rows[0].extra["stop_detail"]
    assert "1 of 4 rollouts ran, 1 of them stopped on the budget" in result.output
    summary = (tmp_path / "e" / "summary.txt").read_text()
    assert "stopped: the evaluation's --max-cost ($0.0200) was spent ($0.0220)" in summary
