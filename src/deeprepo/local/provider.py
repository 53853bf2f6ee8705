"""The ``local/<name>`` provider: a managed llama.cpp server behind the OpenAI adapter.

The server starts on the first call (not when the model is built: a run that fails
its checks starts nothing) and stops when the model is closed. Tokens are counted
from the server's ``usage`` like any provider's; the price is a true $0
(:mod:`deeprepo.providers.prices`).

As a worker it reads the standard file-audit prompt and sends the model one short
prompt per file (or per slice of a long file) in JSON mode, then merges the answers
into the standard ``{"findings": [...]}`` reply with each finding's ``file``: a
1.5B model reads one short file far better than a packed prompt of twenty.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Mapping
from typing import Any

from deeprepo.base.chat import ChatRequest, Completion, Message, Role, Usage
from deeprepo.base.errors import ProviderError
from deeprepo.base.prompts import (
    FILE_AUDIT_INSTRUCTIONS,
    SMALL_WORKER_SYSTEM_PROMPT,
    extract_file_blocks,
    small_file_audit_prompt,
)
from deeprepo.local.catalog import LocalModelInfo
from deeprepo.local.replies import parse_findings
from deeprepo.local.server import LocalServer, acquire, check_ready, release
from deeprepo.providers.openai_compat import OpenAICompatModel
from deeprepo.providers.spec import ModelSpec

__all__ = ["QUOTE_SLACK", "WINDOW_LINES", "WORKER_MAX_TOKENS", "LocalModel", "anchor_line"]

log = logging.getLogger(__name__)

#: Lines of one file a worker call reads at most (a 1.5B model loses track past this).
WINDOW_LINES = 120
#: A worker's answer is a short JSON list; a model that loops stops here.
WORKER_MAX_TOKENS = 512
#: llama.cpp's JSON mode (a grammar: the answer parses) and a mild guard against loops.
_JSON_MODE: dict[str, Any] = {"response_format": {"type": "json_object"}, "repeat_penalty": 1.1}
_extra_params: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "deeprepo_local_extra_params", default=None
)


class _ServerModel(OpenAICompatModel):
    """The OpenAI adapter plus llama.cpp's own request fields (JSON mode, repeat penalty)."""

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params = super()._params(request)
        params.update(_extra_params.get() or {})
        return params


#: How far (in lines) a copied line of code may sit from the line number given with it.
QUOTE_SLACK = 3


def _squash(code: str) -> str:
    return " ".join(code.split())


def anchor_line(item: dict[str, Any], shown: list[str], start: int) -> int | None:
    """The line a small model's finding is about, or None to drop it.

    The line number must be among the lines shown. Where the model copied the line's code
    (``"code"``), that code must be on one of the lines shown within :data:`QUOTE_SLACK`
    of it: the nearest such line is taken (small models miscount lines), and a finding
    whose code is nowhere near is dropped (the model invented it). No code: the number.
    """
    line = int(item["line"])
    if not start <= line < start + len(shown):
        return None
    quote = _squash(str(item.get("code") or ""))
    if len(quote) < 4:
        return line
    lo, hi = max(start, line - QUOTE_SLACK), min(start + len(shown), line + QUOTE_SLACK + 1)
    near = [
        n
        for n, code in ((n, _squash(shown[n - start])) for n in range(lo, hi))
        if code and (quote in code or code in quote)
    ]
    return min(near, key=lambda n: abs(n - line)) if near else None


def _as_finding(item: dict[str, Any], line: int, path: str) -> dict[str, Any]:
    """The standard finding fields: ``why`` is the detail, and the title when none."""
    out = {k: v for k, v in item.items() if k not in ("code", "why")}
    why = str(item.get("why") or "").strip()
    if why:
        out.setdefault("detail", why)
        out.setdefault("title", why[:100])
    if "end_line" in out and int(out["end_line"]) < line:
        out.pop("end_line")
    return {**out, "line": line, "file": path}


class LocalModel:
    """``local/<name>`` as root or worker. One server per model, shared by both roles."""

    #: llama.cpp's server answers one request at a time; more would only queue inside
    #: the call timeout. MeteredModel reads these two.
    max_concurrency = 1
    min_call_timeout_s = 1800.0

    def __init__(
        self,
        info: LocalModelInfo,
        *,
        role: Role,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 1800.0,
    ) -> None:
        check_ready(info, env)  # one line naming `deeprepo local setup` if anything is missing
        self.info = info
        self.role = role
        self.env = env
        self.spec = ModelSpec("local", info.name, None)
        self._timeout_s = max(timeout_s, self.min_call_timeout_s)
        self._server: LocalServer | None = None
        self._inner: _ServerModel | None = None
        self._start_lock: asyncio.Lock | None = None
        self._start_loop: asyncio.AbstractEventLoop | None = None
        self.answers = 0  # worker answers read (one per file slice)
        self.unreadable = 0  # of which were not JSON: read as no findings
        self._server_notes: list[str] = []

    @property
    def name(self) -> str:
        return self.spec.name

    async def _model(self) -> _ServerModel:
        loop = asyncio.get_running_loop()
        if self._start_lock is None or self._start_loop is not loop:
            self._start_lock, self._start_loop = asyncio.Lock(), loop
        async with self._start_lock:
            if self._server is None:
                self._server = acquire(self.info, self.env)
            url = await asyncio.to_thread(self._server.start)
            # Kept here: the server is released (and forgotten) before the run's notes.
            self._server_notes = list(self._server.notes)
            if self._inner is None or self._inner.base_url != url:
                spec = ModelSpec("openai", self.name, url)
                self._inner = _ServerModel(
                    spec, self._server.token, url, timeout_s=self._timeout_s, max_connections=4,
                    http_backend="httpx",
                )  # fmt: skip
            return self._inner

    async def complete(self, request: ChatRequest) -> Completion:
        model = await self._model()
        if self.role == "sub":
            text = request.last_user_text()
            blocks = extract_file_blocks(text) if FILE_AUDIT_INSTRUCTIONS in text else []
            if blocks:
                return await self._audit(model, request, blocks)
            if "json" in (text + (request.system or "")).lower():
                return await self._json_call(model, request)
        completion = await model.complete(request)
        return Completion(
            completion.text, completion.usage, self.name, completion.finish_reason, None
        )

    async def _json_call(self, model: _ServerModel, request: ChatRequest) -> Completion:
        """Any other worker prompt that asks for JSON (cross-file flows, checks of a
        finding): JSON mode, a short answer, and the findings re-emitted cleanly."""
        capped = ChatRequest(
            request.messages,
            request.system,
            min(request.max_tokens, WORKER_MAX_TOKENS * 2),
            0.0 if request.temperature is None else request.temperature,
        )
        token = _extra_params.set(_JSON_MODE)
        try:
            completion = await model.complete(capped)
        finally:
            _extra_params.reset(token)
        parsed = parse_findings(completion.text)
        text = json.dumps({"findings": parsed.findings}) if parsed.ok else completion.text
        return Completion(text, completion.usage, self.name, completion.finish_reason, None)

    async def _audit(
        self, model: _ServerModel, request: ChatRequest, blocks: list[tuple[str, str, int]]
    ) -> Completion:
        """One short JSON-mode call per file slice, merged into the standard reply."""
        findings: list[dict[str, Any]] = []
        usage = Usage()
        unreadable = dropped = 0
        windows = [
            (path, lines[i : i + WINDOW_LINES], start + i)
            for path, content, start in blocks
            for lines in [content.split("\n")]
            for i in range(0, max(len(lines), 1), WINDOW_LINES)
        ]  # fmt: skip
        temperature = 0.0 if request.temperature is None else request.temperature
        for path, shown, start in windows:
            sub_request = ChatRequest(
                (Message("user", small_file_audit_prompt(path, "\n".join(shown), start)),),
                system=SMALL_WORKER_SYSTEM_PROMPT,
                max_tokens=min(request.max_tokens, WORKER_MAX_TOKENS),
                temperature=temperature,
            )
            token = _extra_params.set(_JSON_MODE)
            try:
                completion = await model.complete(sub_request)
            except ProviderError as exc:
                spent = Completion("", usage, self.name) if usage != Usage() else None
                raise ProviderError(
                    f"{self.name}: auditing {path} (from line {start}) failed: {exc}",
                    retryable=exc.retryable,
                    status=exc.status,
                    billed=spent,
                ) from exc
            finally:
                _extra_params.reset(token)
            usage = usage + completion.usage
            parsed = parse_findings(completion.text)
            self.answers += 1
            if not parsed.ok:
                unreadable += 1
                self.unreadable += 1
            dropped += parsed.dropped
            for item in parsed.findings:
                line = anchor_line(item, shown, start)
                if line is None:
                    dropped += 1  # a line it was not shown, or code that is not there
                    continue
                findings.append(_as_finding(item, line, path))
        notes = []
        if unreadable:
            notes.append(f"{unreadable} of {len(windows)} answer(s) were not JSON")
            log.warning("%s: %s", self.name, notes[-1])
        if dropped:
            notes.append(
                f"{dropped} item(s) were dropped: no line of the code shown, or code that is not there"
            )
        reply: dict[str, Any] = {"findings": findings}
        if notes:
            reply["notes"] = notes
        return Completion(json.dumps(reply), usage, self.name, "stop", None)

    def run_notes(self) -> list[str]:
        """What a run's outputs should say about this model's answers."""
        notes = list(self._server_notes)
        if not self.unreadable:
            return notes
        return [
            *notes,
            f"{self.name}: {self.unreadable} of {self.answers} worker answer(s) were not JSON "
            "and were read as no findings",
        ]

    async def aclose(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.aclose()
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(release, server)
