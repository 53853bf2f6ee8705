"""The loopback model server: wire formats, scripting, faults, recording, self-shutdown."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from deeprepo.base.chat import Usage
from deeprepo.testing.loopback import DEFAULT_TEXT, LoopbackServer, Reply

CHAT = {"model": "m", "messages": [{"role": "user", "content": "x" * 40}]}
MSGS = {
    "model": "m",
    "max_tokens": 5,
    "system": "s" * 8,
    "messages": [{"role": "user", "content": "y" * 12}],
}


def post(server: LoopbackServer, path: str, body: object) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=5.0)


def test_default_reply_has_usage_from_text_length(loopback: LoopbackServer) -> None:
    r = post(loopback, "/v1/chat/completions", CHAT)
    assert r.status_code == 200
    data = r.json()
    assert data["choices"][0]["message"]["content"] == DEFAULT_TEXT
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["prompt_tokens"] == 10  # 40 chars / 4
    assert data["usage"]["completion_tokens"] == math.ceil(len(DEFAULT_TEXT) / 4)
    assert data["usage"]["total_tokens"] == 10 + math.ceil(len(DEFAULT_TEXT) / 4)
    assert data["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}

    a = post(loopback, "/v1/messages", MSGS).json()
    assert a["content"] == [{"type": "text", "text": DEFAULT_TEXT}]
    assert a["stop_reason"] == "end_turn"
    assert a["usage"]["input_tokens"] == 6  # "s"*8 + "\n" + "y"*12 = 21 chars, rounded up
    assert a["usage"]["cache_read_input_tokens"] == 0


def test_scripted_usage_in_both_wire_formats(loopback: LoopbackServer) -> None:
    loopback.enqueue_openai("first", usage=Usage(100, 20, 30, 5), cost=0.0125)
    loopback.enqueue_openai("second")
    loopback.enqueue_anthropic("claude", usage=Usage(100, 20, 30, 5))
    one = post(loopback, "/v1/chat/completions", CHAT).json()
    assert one["choices"][0]["message"]["content"] == "first"
    assert one["usage"] == {
        "prompt_tokens": 135,
        "completion_tokens": 20,
        "total_tokens": 155,
        "prompt_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 5},
        "cost": 0.0125,
    }
    assert (
        post(loopback, "/chat/completions", CHAT).json()["choices"][0]["message"]["content"]
        == "second"
    )
    a = post(loopback, "/messages", MSGS).json()
    assert a["content"][0]["text"] == "claude"
    assert a["usage"] == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 30,
        "cache_creation_input_tokens": 5,
    }
    assert loopback.pending("openai") == 0 and loopback.pending("anthropic") == 0


def test_records_every_request(loopback: LoopbackServer) -> None:
    post(loopback, "/v1/chat/completions", CHAT)
    httpx.post(loopback.url + "/v1/messages", json=MSGS, headers={"x-api-key": "k"}, timeout=5)
    nope = post(loopback, "/v2/unknown", {})
    assert nope.status_code == 404
    assert loopback.request_count == 3
    assert [r.route for r in loopback.requests] == ["openai", "anthropic", "unknown"]
    last = loopback.last_request("anthropic")
    assert last.body == MSGS
    assert last.headers["x-api-key"] == "k"
    assert last.text == "s" * 8 + "\n" + "y" * 12
    assert last.last_user_text == "y" * 12
    loopback.clear_requests()
    assert loopback.request_count == 0


def test_reply_choice_order_queue_rule_function_default(loopback: LoopbackServer) -> None:
    loopback.reply_fn = lambda route, body: f"fn:{route}:{body['messages'][-1]['content']}"
    loopback.add_rule("SPECIAL", Reply("rule"), route="openai")
    loopback.enqueue_openai("queued")

    def ask(text: str) -> str:
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        return str(
            post(loopback, "/v1/chat/completions", body).json()["choices"][0]["message"]["content"]
        )

    assert ask("SPECIAL a") == "queued"
    assert ask("SPECIAL b") == "rule"
    assert ask("plain") == "fn:openai:plain"
    loopback.reply_fn = None
    assert ask("plain") == DEFAULT_TEXT


def test_error_status_bodies_and_headers(loopback: LoopbackServer) -> None:
    loopback.enqueue_openai(status=429, headers={"retry-after": "7"}, error_message="slow down")
    loopback.enqueue_anthropic(status=529)
    r = post(loopback, "/v1/chat/completions", CHAT)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "7"
    assert r.json()["error"]["message"] == "slow down"
    a = post(loopback, "/v1/messages", MSGS)
    assert a.status_code == 529
    assert a.json()["error"]["type"] == "overloaded_error"


def test_faults_at_the_wire(loopback: LoopbackServer) -> None:
    loopback.enqueue_openai(fault="reset")
    with pytest.raises(httpx.TransportError):
        post(loopback, "/v1/chat/completions", CHAT)
    loopback.enqueue_openai(fault="malformed_json")
    with pytest.raises(json.JSONDecodeError):
        post(loopback, "/v1/chat/completions", CHAT).json()
    loopback.enqueue_openai(fault="empty_choices", usage=Usage(7, 3))
    data = post(loopback, "/v1/chat/completions", CHAT).json()
    assert data["choices"] == [] and data["usage"]["prompt_tokens"] == 7
    loopback.enqueue_openai(fault="no_usage")
    assert "usage" not in post(loopback, "/v1/chat/completions", CHAT).json()
    loopback.enqueue_openai(fault="refusal")
    choice = post(loopback, "/v1/chat/completions", CHAT).json()["choices"][0]
    assert choice["finish_reason"] == "content_filter" and choice["message"]["content"] is None
    loopback.enqueue_anthropic(fault="refusal")
    assert post(loopback, "/v1/messages", MSGS).json()["stop_reason"] == "refusal"
    loopback.enqueue_openai(fault="timeout")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(loopback.url + "/v1/chat/completions", json=CHAT, timeout=0.2)


def test_latency_is_added_to_every_reply(loopback: LoopbackServer) -> None:
    # Only lower bounds: a loaded machine makes any reply later, never sooner.
    loopback.latency_s = 0.15
    loopback.enqueue_openai("queued", delay_s=0.1)
    t0 = time.perf_counter()
    first = post(loopback, "/v1/chat/completions", CHAT).json()
    assert time.perf_counter() - t0 >= 0.25  # the server's latency plus the reply's own delay
    t0 = time.perf_counter()
    second = post(loopback, "/v1/chat/completions", CHAT).json()
    assert time.perf_counter() - t0 >= 0.15  # the latency again
    # The delay went with the queued reply; the next one is the default, which has none.
    assert first["choices"][0]["message"]["content"] == "queued"
    assert second["choices"][0]["message"]["content"] == DEFAULT_TEXT


def test_watchdog_stops_the_server_by_itself() -> None:
    server = LoopbackServer(ttl_s=0.3).start()
    url = server.url
    # Nobody calls stop(); the wait's bound only keeps a broken watchdog from hanging the test.
    assert server.wait_stopped(60)
    assert not server.running
    with pytest.raises(httpx.TransportError):
        httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=1.0)


def test_reply_from_dict_reads_both_usage_spellings() -> None:
    r = Reply.from_dict(
        {"text": "t", "usage": {"prompt_tokens": 50, "completion_tokens": 5, "cached_tokens": 20}}
    )
    assert r.usage == Usage(30, 5, 20, 0)
    r = Reply.from_dict(
        {
            "usage": {"input_tokens": 9, "output_tokens": 2, "cache_creation_input_tokens": 4},
            "status": 503,
        }
    )
    assert r.usage == Usage(9, 2, 0, 4) and r.status == 503


@pytest.mark.e2e
def test_runs_as_a_process_and_exits_after_ttl(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "openai": [
                    {"text": "scripted", "usage": {"prompt_tokens": 11, "completion_tokens": 2}}
                ],
                "rules": [{"contains": "BOOM", "reply": {"status": 400}}],
            }
        )
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deeprepo.testing.loopback",
            "--port",
            "0",
            "--ttl",
            "5",  # long enough for the two requests below on a loaded machine
            "--script",
            str(script),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[0] == "PORT"
        url = f"http://127.0.0.1:{int(first[1])}"
        data = httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=5).json()
        assert data["choices"][0]["message"]["content"] == "scripted"
        assert data["usage"]["prompt_tokens"] == 11
        boom = {"model": "m", "messages": [{"role": "user", "content": "BOOM"}]}
        assert httpx.post(url + "/v1/chat/completions", json=boom, timeout=5).status_code == 400
        assert proc.wait(timeout=60) == 0  # it exits by itself once its ttl is over
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
