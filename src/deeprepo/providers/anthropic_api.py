"""Adapter for Anthropic's Messages API.

It translates a :class:`ChatRequest` into ``messages.create`` and back. With
``request.cache_prompt`` it marks the system block and the last user message
with ``cache_control: {"type": "ephemeral"}``: the root's conversation only grows,
so each turn reads everything before its newest message from the prompt cache
(billed at 0.1x) and writes the new tail (1.25x). Retries belong to the metered
wrapper; the SDK's are off.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.errors import ConfigError, ProviderError
from deeprepo.providers.openai_compat import (
    LoopBoundClient,
    _usage_warning,
    field_of,
    translate_sdk_error,
)
from deeprepo.providers.spec import ModelSpec

__all__ = ["AnthropicModel", "anthropic_params", "anthropic_usage"]

_EPHEMERAL = {"type": "ephemeral"}


def anthropic_usage(raw: Any, spec: ModelSpec) -> Usage:
    """Usage from a Messages reply's ``usage`` (an SDK object or a plain dict)."""
    if raw is None:
        _usage_warning(spec)
        return Usage()
    # Anthropic's input_tokens already excludes cache reads and writes.
    return Usage(
        input_tokens=int(field_of(raw, "input_tokens") or 0),
        output_tokens=int(field_of(raw, "output_tokens") or 0),
        cache_read_tokens=int(field_of(raw, "cache_read_input_tokens") or 0),
        cache_write_tokens=int(field_of(raw, "cache_creation_input_tokens") or 0),
    )


def anthropic_params(spec: ModelSpec, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a ``/v1/messages`` call, with ``cache_control`` marks when the
    request asks for prompt caching (the SDK adapter and the fast client send the same)."""
    messages: list[dict[str, Any]] = [
        {"role": m.role, "content": m.content} for m in request.messages
    ]
    params: dict[str, Any] = {"model": spec.model, "max_tokens": request.max_tokens}
    if request.cache_prompt:
        for msg in reversed(messages):
            if msg["role"] == "user":
                msg["content"] = [
                    {"type": "text", "text": msg["content"], "cache_control": _EPHEMERAL}
                ]
                break
    if request.system:
        params["system"] = (
            [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
            if request.cache_prompt
            else request.system
        )
    if request.temperature is not None:
        params["temperature"] = request.temperature
    params["messages"] = messages
    return params


class AnthropicModel:
    """A Claude model through the official async SDK (base URL without ``/v1``)."""

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        base_url: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_connections: int = 256,
        http_backend: str = "auto",
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ConfigError(
                "the anthropic package is missing: pip install 'anthropic>=0.40'"
            ) from exc
        self.spec = spec
        self.base_url = base_url or spec.base_url
        self._anthropic = anthropic
        self._client_kwargs: dict[str, Any] = {
            "api_key": api_key,
            "base_url": self.base_url,
            "max_retries": 0,
            "timeout": timeout_s,
        }
        self._clients = LoopBoundClient(
            anthropic, "AsyncAnthropic", self._client_kwargs, max_connections, http_backend
        )

    @property
    def name(self) -> str:
        return self.spec.name

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        return anthropic_params(self.spec, request)

    async def complete(self, request: ChatRequest) -> Completion:
        """One Messages call; raises :class:`ProviderError` with ``retryable`` set."""
        try:
            resp = await self._clients.get().messages.create(**self._params(request))
        except (self._anthropic.AnthropicError, ValueError) as exc:
            raise translate_sdk_error(exc, self.spec) from exc
        usage = anthropic_usage(getattr(resp, "usage", None), self.spec)
        stop = getattr(resp, "stop_reason", None)
        model = str(getattr(resp, "model", "") or self.spec.model)
        texts = [
            str(block.text)
            for block in (getattr(resp, "content", None) or [])
            if getattr(block, "type", None) == "text"
        ]
        return messages_completion(self.name, texts, Completion("", usage, model, stop, None))

    async def aclose(self) -> None:
        await self._clients.aclose()


def messages_completion(name: str, texts: list[str], reply: Completion) -> Completion:
    """A Messages reply, read the same way from the SDK's objects and the fast client's
    JSON: its text blocks joined; a refusal or no text is an error that was billed
    (``reply`` holds the usage, model and stop reason)."""
    billed = replace(reply, text="".join(texts))
    if reply.finish_reason == "refusal":
        raise ProviderError(f"{name}: the model refused to answer", retryable=False, billed=billed)
    if not texts:
        raise ProviderError(f"{name}: reply had no text", retryable=True, billed=billed)
    return billed
