"""The loopback server's two wire formats: the text a request asks about, and reply and
error bodies as OpenAI's ``/v1/chat/completions`` and Anthropic's ``/v1/messages`` send
them, with ``usage`` written in each format's own terms."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from deeprepo.base.chat import Usage

__all__ = ["Body", "anthropic_body", "content_text", "error_body", "openai_body", "request_text"]

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class Body(NamedTuple):
    """What one reply body says, in either format."""

    text: str
    usage: Usage | None  # None: the body has no usage block
    finish_reason: str | None = None
    cost: float | None = None  # OpenRouter's own figure, OpenAI format only
    refusal: bool = False
    empty: bool = False  # no choices (OpenAI), no content blocks (Anthropic)


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def request_text(body: Mapping[str, Any]) -> str:
    """System prompt and every message's text, joined: what a model would read."""
    parts = [content_text(body.get("system"))] if body.get("system") else []
    parts += [
        content_text(m.get("content")) for m in body.get("messages", []) if isinstance(m, dict)
    ]
    return "\n".join(parts)


def estimate_tokens(text: str) -> int:
    """4 characters a token, at least one: usage when a reply gives none."""
    return max(1, math.ceil(len(text) / 4))


def error_body(route: str, status: int, message: str) -> dict[str, Any]:
    """An error reply in the route's format (nothing billed)."""
    if route == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "code": kind}}


def openai_body(seq: int, model: str, body: Body) -> dict[str, Any]:
    """A chat completion; its prompt tokens include the cached ones, as OpenAI counts."""
    message: dict[str, Any] = {"role": "assistant", "content": body.text, "refusal": None}
    finish = body.finish_reason or "stop"
    if body.refusal:
        message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        finish = "content_filter"
    out: dict[str, Any] = {
        "id": f"chatcmpl-loopback-{seq}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": []
        if body.empty
        else [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }
    usage = body.usage
    if usage is not None:
        prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
        if usage.cache_write_tokens:
            details["cache_write_tokens"] = usage.cache_write_tokens  # OpenRouter's field
        u: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": usage.output_tokens,
            "total_tokens": prompt + usage.output_tokens,
            "prompt_tokens_details": details,
        }
        if body.cost is not None:
            u["cost"] = body.cost
        out["usage"] = u
    return out


def anthropic_body(seq: int, model: str, body: Body) -> dict[str, Any]:
    """A message; its input tokens exclude the cached ones, as Anthropic counts."""
    content: list[dict[str, Any]] = [{"type": "text", "text": body.text}]
    stop = body.finish_reason or "end_turn"
    if body.refusal:
        content, stop = [], "refusal"
    elif body.empty:
        content = []
    out: dict[str, Any] = {
        "id": f"msg_loopback_{seq}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
    }
    if body.usage is not None:
        out["usage"] = {
            "input_tokens": body.usage.input_tokens,
            "output_tokens": body.usage.output_tokens,
            "cache_read_input_tokens": body.usage.cache_read_tokens,
            "cache_creation_input_tokens": body.usage.cache_write_tokens,
        }
    return out
