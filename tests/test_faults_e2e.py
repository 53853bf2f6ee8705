"""Provider faults through the real CLI and SDKs, against the loopback server.

Every fault of the issue is injected on root calls and on sub-calls: 429 with and
without ``retry-after``, 500/502/503 (and Anthropic's 529), connection reset, read
timeout, malformed JSON, empty ``choices``, a refusal / content-filter finish and a
reply without ``usage``. Each is retried or handled; a sub-call that fails for good
reaches the root as an ``[llm error]`` string; a root call that fails for good stops
the run with ``stop_reason="error"`` and a salvaged report, never a traceback. The
ledger in ``metrics.json`` equals what the server billed, counted from its script.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, run_cli

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.providers.budget import Budget
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
from deeprepo.report.calls import read_calls
from deeprepo.testing.loopback import LoopbackServer, Reply

PRICES = {
    "models": {
        name: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
        for name in ("anthropic/test-root", "openrouter/test/sub", "openrouter/test/root")
    }
    | {"anthropic/test-sub": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25}}
}
ENV = {
    "ANTHROPIC_API_KEY": "test-key",
    "OPENROUTER_API_KEY": "test-key",
    "DEEPREPO_RETRY_BASE_S": "0.01",
    "DEEPREPO_CALL_TIMEOUT_S": "1.5",
}
MARK = re.compile(r"@@(\w+)@@")
RETRY_AFTER = {"retry-after": "0.2"}
OK_SUB = '{"findings": []}'


def r429(headers: dict[str, str] | None = None) -> Reply:
    return Reply(status=429, headers=headers or {}, error_message="rate limited")


def status(code: int) -> Reply:
    return Reply(status=code, error_message=f"scripted {code}")


def fault(kind: str, **kw: Any) -> Reply:
    return Reply(fault=kind, **kw)


def billed_usage(reply: Reply) -> Usage | None:
    """What the server bills for ``reply``: None when no usable body reaches the client."""
    if reply.status >= 400 or reply.fault in ("reset", "timeout", "malformed_json"):
        return None
    if reply.fault == "no_usage":
        return Usage()  # sent, but with no usage block: the client can only count 0
    assert reply.usage is not None, "scripted replies carry explicit usage"
    return reply.usage


@dataclass
class FaultScript:
    """Replies per (route, key) and attempt; keys are root turn numbers or sub markers.
    Records every reply served, so the test can sum what was billed."""

    root: dict[int, list[Reply]]
    sub: dict[str, list[Reply]]
    root_route: str
    served: list[tuple[str, str, Reply]] = field(default_factory=list)
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, route: str, body: dict[str, Any]) -> Reply:
        if route == self.root_route:
            # The turn is the number of user messages (a system message may lead, OpenAI-style).
            turn = sum(1 for m in body["messages"] if m.get("role") == "user")
            key, script, role = str(turn), self.root[turn], "root"
        else:
            text = json.dumps(body.get("messages", []))
            found = MARK.search(text)
            key = found.group(1) if found else "plain"
            script, role = self.sub.get(key, [Reply(OK_SUB, usage=SUB_OK_USAGE)]), "sub"
        with self.lock:
            n = self.attempts.get((role, key), 0)
            self.attempts[(role, key)] = n + 1
            reply = script[min(n, len(script) - 1)]
            self.served.append((role, key, reply))
        return reply

    def billed(self, role: str) -> tuple[Usage, int]:
        """Summed usage and count of the replies of ``role`` the client could bill."""
        total, count = Usage(), 0
        for r, _, reply in self.served:
            u = billed_usage(reply)
            if r == role and u is not None:
                total, count = total + u, count + 1
        return total, count

    def injected(self) -> int:
        return sum(1 for _, _, reply in self.served if reply.status >= 400 or reply.fault)


SUB_OK_USAGE = Usage(input_tokens=400, output_tokens=30)


def ok_root(code: str, n: int) -> Reply:
    return Reply(
        f"Turn {n}.\n\n```python\n{code}\n```\n", usage=Usage(2000 + n, 100 + n, 50 * n, 7)
    )


def sub_ok(n: int) -> Reply:
    return Reply(OK_SUB + f" ok-{n}", usage=Usage(300 + n, 20 + n))


def dispatch_code(markers: Sequence[str]) -> str:
    return (
        f"names = {list(markers)!r}\n"
        "res = llm_batch([f'@@{n}@@ audit this' for n in names])\n"
        "for n, r in zip(names, res):\n"
        "    print(n, '=>', r[:90])"
    )


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return path


@pytest.fixture
def make_server() -> Iterator[Any]:
    servers: list[LoopbackServer] = []

    def make(script: FaultScript) -> LoopbackServer:
        srv = LoopbackServer(reply_fn=script, ttl_s=150.0, timeout_fault_s=4.0).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()


def run(srv: LoopbackServer, out: Path, prices: Path, root: str, sub: str) -> Any:
    url = {"anthropic": srv.anthropic_base_url, "openrouter": srv.openai_base_url}
    proc = run_cli(
        "analyze",
        str(EXAMPLE),
        "--root",
        root,
        "--root-base-url",
        url[root.split("/")[0]],
        "--sub",
        sub,
        "--sub-base-url",
        url[sub.split("/")[0]],
        "--prices",
        str(prices),
        "--out",
        str(out),
        env=ENV,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def turns(out: Path) -> list[dict[str, Any]]:
    lines = (out / "trajectory.jsonl").read_text().splitlines()
    return [t for t in map(json.loads, lines) if t["type"] == "turn"]


def assert_ledger_exact(m: dict[str, Any], script: FaultScript, prices: dict[str, Any]) -> None:
    """metrics.json holds exactly what the server billed: no lost, no double-counted tokens."""
    total = 0.0
    for row in m["usage"]:
        billed, count = script.billed(row["role"])
        got = Usage(
            row["input_tokens"],
            row["output_tokens"],
            row["cache_read_tokens"],
            row["cache_write_tokens"],
        )
        assert got == billed, (row["role"], got, billed)
        assert row["calls"] == count and row["cached_calls"] == 0
        p = prices["models"][row["model"]]
        cost = (
            billed.input_tokens * p["input"]
            + billed.output_tokens * p["output"]
            + billed.cache_read_tokens * p["cache_read"]
            + billed.cache_write_tokens * p["cache_write"]
        ) / 1e6
        assert row["cost_usd"] == pytest.approx(cost, abs=1e-12)
        total += cost
    assert m["total_cost_usd"] == pytest.approx(total, abs=1e-12)


# Sub-call faults on the OpenAI/OpenRouter route: retried until a good reply, or an error string.
OPENAI_SUB_FAULTS: dict[str, list[Reply]] = {
    "r429_after": [r429(RETRY_AFTER), sub_ok(1)],
    "r429": [r429(), sub_ok(2)],
    "s500": [status(500), sub_ok(3)],
    "s502": [status(502), sub_ok(4)],
    "s503": [status(503), status(503), sub_ok(5)],
    "reset": [fault("reset"), sub_ok(6)],
    "timeout": [fault("timeout"), sub_ok(7)],
    "malformed": [fault("malformed_json"), sub_ok(8)],
    "empty": [fault("empty_choices", usage=Usage(310, 0)), sub_ok(9)],
    "nousage": [fault("no_usage", text=OK_SUB + " ok-10")],
    "refusal": [fault("refusal", usage=Usage(320, 5))],
    "dead": [status(503)] * 6,
}
SUB_EXPECT = {name: f"{OK_SUB} ok-{i}" for i, name in enumerate(OPENAI_SUB_FAULTS, 1)}
SUB_EXPECT |= {
    "refusal": "[llm error] openrouter/test/sub: the provider refused or filtered the reply",
    "dead": "[llm error] openrouter/test/sub: gave up after 6 attempts; last error: ",
}


@pytest.mark.e2e
def test_faults_on_root_and_sub_calls_are_retried_and_the_ledger_stays_exact(
    make_server: Any, prices: Path, tmp_path: Path
) -> None:
    final = "set_answer('# Report\\n\\nSurvived.')"
    root_script = {
        1: [r429(RETRY_AFTER), ok_root(dispatch_code(list(OPENAI_SUB_FAULTS)), 1)],
        2: [r429(), ok_root("print('two')", 2)],
        3: [status(500), status(502), status(503), status(529), ok_root("print('three')", 3)],
        4: [fault("reset"), ok_root("print('four')", 4)],
        5: [fault("timeout"), ok_root("print('five')", 5)],
        6: [fault("malformed_json"), ok_root("print('six')", 6)],
        7: [fault("empty_choices", usage=Usage(900, 0)), ok_root("print('seven')", 7)],
        8: [fault("no_usage", text=f"Turn 8.\n\n```python\n{final}\n```\n")],
    }
    script = FaultScript(root_script, OPENAI_SUB_FAULTS, root_route="anthropic")
    srv = make_server(script)
    out = tmp_path / "run"
    proc = run(srv, out, prices, "anthropic/test-root", "openrouter/test/sub")
    assert proc.returncode == 3, proc.stderr  # answered, but the root audited no whole file

    m = json.loads((out / "metrics.json").read_text())
    assert (m["stop_reason"], m["turns"], m["salvaged"]) == ("answer_ready", 8, False)
    got = turns(out)
    lines = dict(line.split(" => ", 1) for line in got[0]["output"].splitlines())
    for name, expected in SUB_EXPECT.items():
        assert lines[name].startswith(expected[:90]), (name, lines[name])
    assert [t["output"] for t in got[1:7]] == ["two", "three", "four", "five", "six", "seven"]

    # Every scripted attempt was made, none more: retries stop at the first good reply.
    for turn, replies in root_script.items():
        assert script.attempts[("root", str(turn))] == len(replies)
    for name, replies in OPENAI_SUB_FAULTS.items():
        assert script.attempts[("sub", name)] == len(replies), name
    rows = {u["role"]: u for u in m["usage"]}
    assert (rows["root"]["failed_calls"], rows["root"]["failed_requests"]) == (1, 0)
    assert (rows["sub"]["failed_calls"], rows["sub"]["failed_requests"]) == (2, 1)
    assert_ledger_exact(m, script, PRICES)
    assert script.injected() == 11 + 18

    # calls.jsonl holds each billed reply once (rejected ones with their error) and each
    # request that failed for good; its sums are the ledger's.
    calls = read_calls(out / "calls.jsonl")
    for role in ("root", "sub"):
        mine = [c for c in calls if c["role"] == role]
        errors = [c for c in mine if c["error"]]
        billed = rows[role]["calls"] + rows[role]["failed_requests"]
        assert len(mine) == billed, role
        assert len(errors) == rows[role]["failed_calls"] + rows[role]["failed_requests"], role
        assert sum(c["cost_usd"] for c in mine) == pytest.approx(rows[role]["cost_usd"], abs=1e-12)
        assert sum(c["input_tokens"] for c in mine) == rows[role]["input_tokens"]
    # Turn 7's first reply was billed and rejected (empty choices), then retried.
    assert [c["turn"] for c in calls if c["role"] == "root"] == [1, 2, 3, 4, 5, 6, 7, 7, 8]


# The same faults on the Anthropic route, now for the sub-workers.
ANTHROPIC_SUB_FAULTS: dict[str, list[Reply]] = {
    "r429_after": [r429(RETRY_AFTER), sub_ok(1)],
    "s529": [status(529), sub_ok(2)],
    "s500": [status(500), status(502), sub_ok(3)],
    "reset": [fault("reset"), sub_ok(4)],
    "malformed": [fault("malformed_json"), sub_ok(5)],
    "empty": [fault("empty_choices", usage=Usage(330, 0)), sub_ok(6)],
    "nousage": [fault("no_usage", text=OK_SUB + " ok-7")],
    "refusal": [fault("refusal", usage=Usage(340, 3))],
    "dead": [status(500)] * 6,
}


@pytest.mark.e2e
@pytest.mark.parametrize(
    "last_fault",
    [
        pytest.param([fault("refusal", usage=Usage(1500, 2))], id="refusal"),
        pytest.param([status(503)] * 6, id="gave-up"),
    ],
)
def test_a_root_call_that_fails_for_good_stops_the_run_with_a_salvaged_report(
    make_server: Any, prices: Path, tmp_path: Path, last_fault: list[Reply]
) -> None:
    code = dispatch_code(list(ANTHROPIC_SUB_FAULTS)) + (
        "\nadd_finding('vulnapi/db.py', 3, 'sql-injection', 'high', 'kept finding', cwe='CWE-89')"
    )
    root_script = {1: [status(502), fault("reset"), ok_root(code, 1)], 2: last_fault}
    script = FaultScript(root_script, ANTHROPIC_SUB_FAULTS, root_route="openai")
    srv = make_server(script)
    out = tmp_path / "run"
    proc = run(srv, out, prices, "openrouter/test/root", "anthropic/test-sub")
    assert proc.returncode == 1, proc.stderr  # an error stop
    assert "root model failed" in proc.stdout

    m = json.loads((out / "metrics.json").read_text())
    assert (m["stop_reason"], m["turns"], m["incomplete"]) == ("error", 1, True)
    why = "refused or filtered" if len(last_fault) == 1 else "gave up after 6 attempts"
    assert m["stop_detail"].startswith("root model failed: openrouter/test/root: ")
    assert why in m["stop_detail"]
    report = (out / "report.md").read_text()
    assert "Incomplete" in report and "kept finding" in report  # salvaged from the findings
    lines = dict(line.split(" => ", 1) for line in turns(out)[0]["output"].splitlines())
    assert lines["refusal"] == "[llm error] anthropic/test-sub: the model refused to answer"
    assert lines["dead"].startswith("[llm error] anthropic/test-sub: gave up after 6 attempts")
    for i, name in enumerate(ANTHROPIC_SUB_FAULTS, 1):
        if name not in ("refusal", "dead"):
            assert lines[name] == f"{OK_SUB} ok-{i}", name
    assert script.attempts[("root", "2")] == len(last_fault)
    assert script.injected() == 2 + len(last_fault) + 15
    rows = {u["role"]: u for u in m["usage"]}
    refused = len(last_fault) == 1
    assert (rows["root"]["failed_calls"], rows["root"]["failed_requests"]) == (
        int(refused),
        int(not refused),
    )
    assert_ledger_exact(m, script, PRICES)
    trajectory = [json.loads(x) for x in (out / "trajectory.jsonl").read_text().splitlines()]
    assert trajectory[-1]["type"] == "end" and trajectory[-1]["stop_reason"] == "error"


class CountingModel:
    """An in-process worker that answers every prompt and counts the calls."""

    name = "test/counting"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        return Completion("ok", Usage(10, 1))

    async def aclose(self) -> None:
        pass


async def test_prompts_past_the_sub_call_budget_are_refused_at_once_and_exactly() -> None:
    ledger = Ledger()
    budget = Budget(max_sub_calls=5, ledger=ledger)
    model = CountingModel()
    metered = MeteredModel(model, "sub", ledger, PriceTable.load(None), budget, concurrency=4)
    dispatcher = SubDispatcher(metered)
    assert await dispatcher.batch(["a", "b", "c"]) == ["ok"] * 3
    prompts: list[Any] = ["p"] * 100_000
    prompts[1] = 7  # a non-string keeps its own error, wherever it stands
    prompts[50_000] = None
    loop = asyncio.get_running_loop()
    tasks = 0

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        nonlocal tasks
        tasks += 1
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(counting)
    try:
        res = await dispatcher.batch(prompts)
    finally:
        loop.set_task_factory(None)
    assert tasks < 100  # a few for the prompts that go through; none per refused prompt
    assert res[0] == res[2] == "ok" and model.calls == 5 == budget.sub_calls_started
    assert res[1].startswith("[llm error] prompt must be a str, got int")
    assert res[50_000].startswith("[llm error] prompt must be a str, got NoneType")
    refused = {r for i, r in enumerate(res) if i not in (0, 1, 2, 50_000)}
    # The very error a single prompt gets on the normal path, once the budget is spent.
    assert refused == {await dispatcher.query("one more")}
    assert refused.pop().startswith(
        "[llm error] budget exhausted (sub_calls): sub-call budget spent: 5 of 5"
    )
    # Only answered prompts are calls; refused and failed ones are counted apart.
    assert (dispatcher.calls, dispatcher.refused, dispatcher.failed) == (5, 99_996 + 1, 2)
    row = ledger.rows()[0]
    assert (row.calls, row.usage.input_tokens, row.failed_requests) == (5, 50, 0)
