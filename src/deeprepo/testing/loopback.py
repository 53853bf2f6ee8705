"""A loopback model server for tests and benchmarks: OpenAI and Anthropic wire formats.

It speaks ``POST /v1/chat/completions`` (OpenAI, OpenRouter, vLLM …) and
``POST /v1/messages`` (Anthropic) on 127.0.0.1, serves scripted replies with
real ``usage`` blocks, injects faults, records every request, and shuts itself
down after ``ttl_s`` so a forgotten server never outlives its test::

    with LoopbackServer(latency_s=0.05) as srv:
        srv.enqueue_openai('{"findings": []}', usage=Usage(100, 20, 30))
        client = AsyncOpenAI(base_url=srv.openai_base_url, api_key="x")

A reply is chosen from, in order: the route's queue, the first matching rule
(:meth:`LoopbackServer.add_rule`), the reply function, the default reply. Usage
not given is computed from text length (4 chars a token), deterministically.

As a process: ``python -m deeprepo.testing.loopback --port 0 --ttl 600 [--latency 0.2]
[--script FILE.json]`` prints ``PORT <n>`` on its first line and exits after ``ttl``.
A script file holds ``{"latency_s", "openai": [reply…], "anthropic": [reply…],
"rules": [{"contains", "route", "reply"}], "default": reply}`` with replies as
:meth:`Reply.from_dict` reads them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from deeprepo.base.chat import Usage
from deeprepo.base.closing import Closing
from deeprepo.testing.transport import HTTPServer, Response
from deeprepo.testing.wire import (
    Body,
    anthropic_body,
    content_text,
    error_body,
    estimate_tokens,
    openai_body,
    request_text,
)

__all__ = ["DEFAULT_TEXT", "Fault", "LoopbackServer", "RecordedRequest", "Reply", "Route", "spawn"]

Route = Literal["openai", "anthropic"]
Fault = Literal["reset", "malformed_json", "empty_choices", "no_usage", "timeout", "refusal"]
DEFAULT_TEXT = '{"findings": []}'
_ROUTES: dict[str, Route] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
}


@dataclass(frozen=True)
class Reply:
    """One scripted reply. ``usage`` is in deeprepo's terms (input excludes cache
    reads and writes); the server writes it in each wire format. ``status`` ≥ 400
    sends an error body in the route's format (nothing billed)."""

    text: str = DEFAULT_TEXT
    usage: Usage | None = None
    cost: float | None = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    fault: Fault | None = None
    finish_reason: str | None = None
    error_message: str = "scripted error from the loopback server"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reply:
        """Read a reply from JSON. ``usage`` takes deeprepo keys (``input_tokens``,
        ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``) or OpenAI keys
        (``prompt_tokens`` incl. ``cached_tokens``, ``completion_tokens``)."""
        u = d.get("usage")
        usage = None
        if isinstance(u, Mapping):
            if "prompt_tokens" in u:
                cached = int(u.get("cached_tokens", 0))
                usage = Usage(
                    int(u["prompt_tokens"]) - cached, int(u.get("completion_tokens", 0)), cached
                )
            else:  # Anthropic's names for the cache counts are read too
                usage = Usage.from_dict(
                    {
                        "cache_read_tokens": u.get("cache_read_input_tokens"),
                        "cache_write_tokens": u.get("cache_creation_input_tokens"),
                        **u,
                    }
                )
        known = {"text", "cost", "status", "headers", "delay_s", "fault", "finish_reason"}
        kwargs = {k: v for k, v in d.items() if k in known}
        if "error_message" in d:
            kwargs["error_message"] = str(d["error_message"])
        return cls(usage=usage, **kwargs)


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server saw it. ``body`` is None when it was not valid JSON."""

    route: str
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    time: float

    @property
    def text(self) -> str:
        """System prompt and every message's text, joined: what a model would read."""
        return request_text(self.body or {})

    @property
    def last_user_text(self) -> str:
        msgs = [m for m in (self.body or {}).get("messages", []) if m.get("role") == "user"]
        return content_text(msgs[-1].get("content")) if msgs else ""


ReplyFn = Callable[[str, dict[str, Any]], "Reply | str"]


class LoopbackServer(Closing):
    """A scripted OpenAI/Anthropic-compatible server on 127.0.0.1; see the module docstring."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        ttl_s: float = 300.0,
        reply_fn: ReplyFn | None = None,
        default: Reply | None = None,
        timeout_fault_s: float = 30.0,
        port: int = 0,
    ) -> None:
        self.latency_s = latency_s
        self.ttl_s = ttl_s
        self.reply_fn = reply_fn
        self.default = default or Reply()
        self.timeout_fault_s = timeout_fault_s
        self._port_wanted = port
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Reply]] = {"openai": deque(), "anthropic": deque()}
        self._rules: list[tuple[str, str | None, Reply]] = []
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Timer | None = None
        self._ids = 0

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> LoopbackServer:
        """Bind, serve in a daemon thread and arm the ``ttl_s`` watchdog."""
        if self._httpd is not None:
            return self
        httpd = HTTPServer(("127.0.0.1", self._port_wanted), self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._watchdog = threading.Timer(self.ttl_s, self.stop)
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent); sleeping handlers wake and drop their replies."""
        self._stopping.set()
        httpd, self._httpd = self._httpd, None
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.cancel()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    @property
    def running(self) -> bool:
        return self._httpd is not None and not self._stopping.is_set()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block until the server stopped (e.g. by its watchdog)."""
        return self._stopping.wait(timeout)

    def open(self) -> None:
        """:meth:`start`, for a ``with`` block."""
        self.start()

    def close(self) -> None:
        """:meth:`stop`, for a ``with`` block."""
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the loopback server is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL for OpenAI-style SDKs (they append ``/chat/completions``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for the Anthropic SDK (it appends ``/v1/messages``)."""
        return self.url

    # -- scripting -------------------------------------------------------------
    def enqueue(self, route: Route, reply: Reply | str) -> None:
        """Queue a reply for the next request on ``route``."""
        with self._lock:
            self._queues[route].append(Reply(reply) if isinstance(reply, str) else reply)

    def enqueue_openai(self, text: str = DEFAULT_TEXT, **kwargs: Any) -> None:
        """Queue a reply for ``/v1/chat/completions``; kwargs as :class:`Reply`."""
        self.enqueue("openai", Reply(text, **kwargs))

    def enqueue_anthropic(self, text: str = DEFAULT_TEXT, **kwargs: Any) -> None:
        """Queue a reply for ``/v1/messages``; kwargs as :class:`Reply`."""
        self.enqueue("anthropic", Reply(text, **kwargs))

    def add_rule(self, contains: str, reply: Reply | str, route: Route | None = None) -> None:
        """Answer every request whose text contains ``contains`` with ``reply``."""
        with self._lock:
            self._rules.append((contains, route, Reply(reply) if isinstance(reply, str) else reply))

    def pending(self, route: Route) -> int:
        with self._lock:
            return len(self._queues[route])

    # -- what was asked ----------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    def requests_for(self, route: Route) -> list[RecordedRequest]:
        return [r for r in self.requests if r.route == route]

    def last_request(self, route: Route | None = None) -> RecordedRequest:
        reqs = self.requests if route is None else self.requests_for(route)
        if not reqs:
            raise LookupError("the loopback server has received no such request")
        return reqs[-1]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- serving (called from handler threads) -----------------------------------
    def respond(self, path: str, raw: bytes, headers: dict[str, str]) -> Response:
        """Record one request and decide its answer (the handler waits and sends it)."""
        route = _ROUTES.get(path)
        try:
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                body = None
        except ValueError:
            body = None
        seq = self._record(RecordedRequest(route or "unknown", path, body, headers, time.time()))
        if route is None:
            return _json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
        if body is None:
            return _json(400, {"error": {"message": "body is not a JSON object", "type": "bad"}})
        if body.get("stream"):
            return _json(400, {"error": {"message": "streaming is not supported", "type": "bad"}})
        reply = self._choose(route, body)
        if reply.fault == "timeout":
            # Hold the request past the client's timeout, then drop it unanswered.
            return Response(wait_s=self.timeout_fault_s)
        wait = self.latency_s + reply.delay_s
        if reply.fault == "reset":
            return Response(wait_s=wait)
        if reply.status >= 400:
            error = error_body(route, reply.status, reply.error_message)
            return _json(reply.status, error, reply.headers, wait)
        if reply.fault == "malformed_json":
            torn = b'{"id": "loopback", "choices": [{"message": {"content": "tru'
            return Response(200, torn, reply.headers, wait)
        usage = reply.usage or Usage(
            estimate_tokens(request_text(body)), estimate_tokens(reply.text)
        )
        shape = Body(
            reply.text,
            None if reply.fault == "no_usage" else usage,
            reply.finish_reason,
            reply.cost,
            refusal=reply.fault == "refusal",
            empty=reply.fault == "empty_choices",
        )
        build = openai_body if route == "openai" else anthropic_body
        return _json(
            200, build(seq, str(body.get("model", "loopback")), shape), reply.headers, wait
        )

    def _record(self, req: RecordedRequest) -> int:
        with self._lock:
            self._requests.append(req)
            self._ids += 1
            return self._ids

    def _choose(self, route: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queues[route]:
                return self._queues[route].popleft()
            rules = list(self._rules)
        if rules:
            text = request_text(body)
            for contains, rule_route, reply in rules:
                if (rule_route is None or rule_route == route) and contains in text:
                    return reply
        if self.reply_fn is not None:
            got = self.reply_fn(route, body)
            return Reply(got) if isinstance(got, str) else got
        return self.default


def _json(
    status: int, obj: object, headers: Mapping[str, str] | None = None, wait_s: float = 0.0
) -> Response:
    return Response(status, json.dumps(obj).encode("utf-8"), headers or {}, wait_s)


def load_script(server: LoopbackServer, path: Path) -> None:
    """Apply a script file (see the module docstring) to ``server``."""
    data = json.loads(Path(path).read_text("utf-8"))
    if "latency_s" in data:
        server.latency_s = float(data["latency_s"])
    for route in ("openai", "anthropic"):
        for item in data.get(route, []):
            server.enqueue(route, Reply.from_dict(item) if isinstance(item, dict) else str(item))
    for rule in data.get("rules", []):
        server.add_rule(str(rule["contains"]), Reply.from_dict(rule["reply"]), rule.get("route"))
    if isinstance(data.get("default"), dict):
        server.default = Reply.from_dict(data["default"])


def spawn(
    *, latency_s: float = 0.0, script: Path | None = None, ttl_s: float = 600.0
) -> tuple[subprocess.Popen[str], int]:
    """Start the server as its own process (so its threads do not share the caller's GIL);
    returns the process and its port. The caller kills it by pid; it also exits by itself
    after ``ttl_s``."""
    cmd = [sys.executable, "-m", "deeprepo.testing.loopback", "--port", "0", "--ttl", str(ttl_s),
           "--latency", str(latency_s)]  # fmt: skip
    if script is not None:
        cmd += ["--script", str(script)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    if len(first) != 2 or first[0] != "PORT":
        proc.kill()
        proc.wait()
        raise RuntimeError("the loopback server process did not start")
    return proc, int(first[1])


def main(argv: list[str] | None = None) -> int:
    """Run the server as a process until its ttl ends."""
    p = argparse.ArgumentParser(prog="python -m deeprepo.testing.loopback", description=__doc__)
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--ttl", type=float, default=600.0, help="seconds before it exits by itself")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    p.add_argument("--script", type=Path, default=None, help="JSON file of scripted replies")
    args = p.parse_args(argv)
    server = LoopbackServer(latency_s=args.latency, ttl_s=args.ttl, port=args.port)
    if args.script is not None:
        load_script(server, args.script)
    server.start()
    print(f"PORT {server.port}", flush=True)
    try:
        server.wait_stopped()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
