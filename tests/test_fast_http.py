"""The sub-call fast path (``providers/fast_http.py``) against the SDK adapters on the same
loopback server: the same request bodies, usage, cache counts, costs, errors (type, message,
retryable, status, retry-after, what was billed), and the same ledger and findings for a
whole run."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, loopback_analyze_args, run_cli

from deeprepo.base.chat import ChatModel, ChatRequest, Message, Usage
from deeprepo.base.errors import ConfigError, ProviderError, ProviderUnreachable
from deeprepo.providers.anthropic_api import AnthropicModel
from deeprepo.providers.fast_http import FastAnthropicModel, FastOpenAIModel
from deeprepo.providers.openai_compat import OpenAICompatModel
from deeprepo.providers.registry import build_model
from deeprepo.providers.spec import parse_model_spec
from deeprepo.report.trajectory import read_trajectory
from deeprepo.run.analyze import AnalyzeOptions, analyze
from deeprepo.run.wiring import HTTP_CLIENT_ENV, CallSettings
from deeprepo.testing.loopback import LoopbackServer, Reply, Route

KEY = "sk-never-shown-1234"


def ask(text: str = "audit this", *, cache: bool = False) -> ChatRequest:
    convo = (Message("user", "first"), Message("assistant", "ok"), Message("user", text))
    return ChatRequest(convo, system="be brief", max_tokens=64, cache_prompt=cache)


def make(client: str, route: Route, base: str, **kw: Any) -> ChatModel:
    if route == "openai":
        spec = parse_model_spec("openrouter/test/sub", base + "/v1")
        return (FastOpenAIModel if client == "fast" else OpenAICompatModel)(spec, KEY, **kw)
    spec = parse_model_spec("anthropic/claude-test", base)
    return (FastAnthropicModel if client == "fast" else AnthropicModel)(spec, KEY, **kw)


# Every way a reply can go wrong that the SDK path handles, and good replies with cache
# counts, a reported cost and no usage at all.
SCRIPT: list[Reply] = [
    Reply("fine", usage=Usage(900, 40, 100, 0), cost=0.00042),
    Reply("cached", usage=Usage(50, 20, 4000, 300)),
    Reply("no usage", fault="no_usage"),
    Reply(status=429, headers={"retry-after": "7"}),
    Reply(status=429, headers={"retry-after-ms": "1500"}),
    Reply(status=503),
    Reply(status=529),
    Reply(status=401),
    Reply(status=403),
    Reply(status=404),
    Reply(status=400, error_message="context too long"),
    Reply(fault="empty_choices", usage=Usage(11, 3)),
    Reply(fault="refusal", usage=Usage(5, 1)),
    Reply(fault="malformed_json"),
    Reply(fault="reset"),
]


def outcome(got: Any) -> tuple[Any, ...]:
    if not isinstance(got, ProviderError):
        return ("ok", got)
    message = str(got)
    if got.status is None and "(" in message:
        # The transport's own words for a torn body or a dropped connection differ
        # (aiohttp's vs httpx's exception names); what precedes them does not.
        message = message.split(" (")[0]
    return (type(got).__name__, message, got.retryable, got.status, got.retry_after, got.billed)


async def run_script(client: str, route: Route) -> tuple[list[tuple[Any, ...]], list[Any]]:
    with LoopbackServer(ttl_s=60.0) as srv:
        for reply in SCRIPT:
            srv.enqueue(route, reply)
        model = make(client, route, srv.url)
        got: list[tuple[Any, ...]] = []
        try:
            for i in range(len(SCRIPT)):
                try:
                    got.append(outcome(await model.complete(ask(f"q{i}", cache=i == 1))))
                except ProviderError as exc:
                    got.append(outcome(exc))
        finally:
            await model.aclose()
        # The key as sent: Anthropic's documented x-api-key on the fast path, a Bearer
        # header from newer Anthropic SDKs; OpenAI's Bearer on both.
        seen = [(r.path, r.body, KEY in (r.headers.get("authorization", "") + r.headers.get("x-api-key", "")))
                for r in srv.requests]  # fmt: skip
    return got, seen


@pytest.mark.parametrize("route", ["openai", "anthropic"])
async def test_every_reply_and_error_is_the_same_as_the_sdk_path(route: Route) -> None:
    fast, fast_seen = await run_script("fast", route)
    sdk, sdk_seen = await run_script("sdk", route)
    reset = len(SCRIPT) - 1
    assert fast[:reset] == sdk[:reset]
    # A dropped connection: the SDK's transport calls it a timeout, the fast path says
    # what happened; both are retried alike.
    assert fast[reset][1].endswith("connection failed")
    assert fast[reset][2:] == sdk[reset][2:] == (True, None, None, None)
    assert fast_seen == sdk_seen  # the same bodies on the same paths, the same key header
    kinds = [o[0] for o in fast]
    assert kinds.count("ok") == 3 and len(kinds) == len(SCRIPT)
    by_status = {o[3]: o for o in fast if o[0] == "ProviderError" and o[3] is not None}
    assert fast[3][2:5] == (True, 429, 7.0) and fast[4][2:5] == (True, 429, 1.5)
    assert by_status[401][2] is False and by_status[404][2] is False
    assert by_status[503][2] is True and by_status[529][2] is True
    key_env = "OPENROUTER_API_KEY" if route == "openai" else "ANTHROPIC_API_KEY"
    assert key_env in by_status[401][1]
    assert "context too long" in by_status[400][1]
    assert all(KEY not in str(o) for o in fast)  # the key is never in an error


async def test_a_refused_connection_is_unreachable_on_both_paths() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    messages = []
    for client in ("fast", "sdk"):
        model = make(client, "openai", f"http://127.0.0.1:{port}")
        try:
            with pytest.raises(ProviderUnreachable) as info:
                await model.complete(ask())
        finally:
            await model.aclose()
        assert info.value.url == f"http://127.0.0.1:{port}/v1/chat/completions"
        messages.append(str(info.value).split(" (")[0])
    assert messages[0] == messages[1]
    assert messages[0].endswith(
        f"connection refused at http://127.0.0.1:{port}/v1/chat/completions"
    )


@pytest.mark.parametrize("route", ["openai", "anthropic"])
async def test_a_reply_past_the_timeout_is_a_retryable_timeout(
    loopback: LoopbackServer, route: Route
) -> None:
    loopback.enqueue(route, Reply(fault="timeout"))
    model = make("fast", route, loopback.url, timeout_s=0.3)
    try:
        with pytest.raises(ProviderError, match="request timed out") as info:
            await model.complete(ask())
    finally:
        await model.aclose()
    assert info.value.retryable and info.value.status is None


def test_the_sdk_honours_base_url_variables_and_so_does_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/custom/v1/")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/claude")
    fast = FastOpenAIModel(parse_model_spec("openai/gpt-5-mini"), KEY)
    assert fast._url == "http://127.0.0.1:9/custom/v1/chat/completions"
    assert fast.base_url is None  # still OpenAI proper: max_completion_tokens is sent
    claude = FastAnthropicModel(parse_model_spec("anthropic/claude-x"), KEY)
    assert claude._url == "http://127.0.0.1:9/claude/v1/messages"


def test_the_http_client_is_chosen_by_the_run_settings() -> None:
    assert CallSettings.from_env({}).http_client == "fast"
    assert CallSettings.from_env({HTTP_CLIENT_ENV: "SDK"}).http_client == "sdk"
    with pytest.raises(ConfigError, match="use fast or sdk"):
        CallSettings.from_env({HTTP_CLIENT_ENV: "curl"})
    spec = parse_model_spec("openai/m", "http://127.0.0.1:9/v1")
    assert isinstance(build_model(spec, role="sub", env={}), FastOpenAIModel)
    assert isinstance(build_model(spec, role="sub", env={}, http_client="sdk"), OpenAICompatModel)
    claude = parse_model_spec("anthropic/c", "http://127.0.0.1:9")
    assert isinstance(build_model(claude, role="root", env={}), FastAnthropicModel)


# -- a whole run through each client --------------------------------------------------

ROOT_CELLS = [
    "paths = sorted(codebase)[:5]\n"
    "answers = llm_batch([file_audit_prompt(p) + '\\nFILE=' + p for p in paths] + ['FLAKY'])\n"
    "for a in answers:\n"
    "    if not a.startswith('[llm error]'):\n"
    "        for f in json.loads(a)['findings']:\n"
    "            add_finding(f['file'], f['line'], 'test', f['severity'], f['title'])\n"
    "print(len(answers), sum(a.startswith('[llm error]') for a in answers))",
    "set_answer('# Report\\n\\ndone')",
]


def scripted() -> LoopbackServer:
    """Root turns from ROOT_CELLS; each sub prompt answered with a finding for the first
    file it names, usage with cache counts and a cost; FLAKY fails with 503 once."""
    lock = threading.Lock()
    flaky = {"failed": False}

    def reply(route: str, body: dict[str, Any]) -> Reply:
        if route == "anthropic":
            turn = (len(body["messages"]) + 1) // 2
            code = ROOT_CELLS[turn - 1]
            return Reply(f"```python\nimport json\n{code}\n```", usage=Usage(1000, 60, 200 * turn))
        text = body["messages"][-1]["content"]
        if "FLAKY" in text:
            with lock:
                first, flaky["failed"] = not flaky["failed"], True
            if first:
                return Reply(status=503)
            return Reply('{"findings": []}', usage=Usage(10, 2), cost=0.0)
        name = text.rsplit("FILE=", 1)[1].strip()
        found = {"file": name, "line": 1, "severity": "low", "title": f"seen {name}"}
        return Reply(json.dumps({"findings": [found]}), usage=Usage(700, 40, 64, 8), cost=0.0001)

    return LoopbackServer(reply_fn=reply, ttl_s=120.0)


@pytest.mark.e2e
async def test_a_run_bills_and_finds_the_same_through_either_client(tmp_path: Path) -> None:
    runs: dict[str, Any] = {}
    for client in ("fast", "sdk", "fast"):
        with scripted() as srv:
            out = tmp_path / f"{client}-{len(runs)}"
            handle = await analyze(
                AnalyzeOptions(
                    path=str(EXAMPLE),
                    root="anthropic/test-root",
                    sub="openrouter/test/sub",
                    root_base_url=srv.anthropic_base_url,
                    sub_base_url=srv.openai_base_url,
                    out_dir=out,
                    cache=False,
                    run_log=False,
                    env={
                        "ANTHROPIC_API_KEY": KEY,
                        "OPENROUTER_API_KEY": KEY,
                        "DEEPREPO_RETRY_BASE_S": "0",
                        HTTP_CLIENT_ENV: client,
                    },
                )
            )
            bodies = sorted(json.dumps(r.body, sort_keys=True) for r in srv.requests)
        result = handle.result
        start = next(r for r in read_trajectory(out / "trajectory.jsonl") if r["type"] == "start")
        assert start["http_client"] == client
        assert KEY not in (out / "trajectory.jsonl").read_text()
        runs[f"{client}-{len(runs)}"] = (
            result.usage,
            [f.to_dict() for f in result.findings],
            result.sub_calls,
            result.sub_calls_failed,
            result.files_covered,
            result.answer,
            bodies,
        )
    fast, sdk, fast_again = runs.values()
    assert fast == sdk == fast_again
    usage, findings = fast[0], fast[1]
    sub = next(row for row in usage if row["role"] == "sub")
    assert sub["calls"] == 6 and sub["failed_calls"] == 0
    assert sub["cache_read_tokens"] == 5 * 64 and sub["cache_write_tokens"] == 5 * 8
    assert sub["cost_usd"] == pytest.approx(0.0005)
    assert len(fast[6]) == 2 + 7  # two root turns, six prompts and the 503's retry
    assert len(findings) == 5


@pytest.mark.e2e
def test_the_flag_chooses_the_client_and_the_start_record_says_which(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "OPENROUTER_API_KEY": KEY, HTTP_CLIENT_ENV: "fast"}
    for client in ("sdk", "fast"):
        loopback.enqueue_anthropic("```python\nset_answer('# Report')\n```")
        out = tmp_path / client
        args = loopback_analyze_args(loopback, out, "--max-turns", "1", "--http-client", client)
        proc = run_cli(*args, env=env)
        assert proc.returncode in (0, 3), proc.stderr  # answered; nothing audited is exit 3
        start = next(r for r in read_trajectory(out / "trajectory.jsonl") if r["type"] == "start")
        assert start["http_client"] == client  # the flag wins over the environment
    bad = run_cli(*loopback_analyze_args(loopback, tmp_path / "bad", "--http-client", "curl"))
    assert bad.returncode == 2 and "curl" in bad.stderr and "Traceback" not in bad.stderr


def test_a_model_serves_one_event_loop_after_another(loopback: LoopbackServer) -> None:
    """Callers that run ``asyncio.run`` per batch get a fresh pool for each loop, never a
    connection bound to a closed one."""
    model = make("fast", "openai", loopback.url)
    for i in range(3):
        loopback.enqueue_openai(f"answer {i}")
        assert asyncio.run(model.complete(ask())).text == f"answer {i}"

    async def close() -> None:
        await model.aclose()

    asyncio.run(close())
    assert len(loopback.requests_for("openai")) == 3
    assert loopback.last_request("openai").headers["user-agent"].startswith("deeprepo/")
