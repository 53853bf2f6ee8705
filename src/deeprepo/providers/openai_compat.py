"""Adapter for OpenAI's Chat Completions wire format: OpenAI, OpenRouter, vLLM, Ollama, ….

It only translates: a :class:`ChatRequest` into ``chat.completions.create`` and the
reply into a :class:`Completion`. The SDK's own retries are off (``max_retries=0``);
the metered wrapper retries, using the ``retryable`` flag and ``retry_after`` this
module puts on every :class:`ProviderError`.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import logging
import re
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.errors import ConfigError, ProviderError, ProviderUnreachable
from deeprepo.providers.spec import ModelSpec

__all__ = [
    "OPENROUTER_BASE_URL",
    "LoopBoundClient",
    "OpenAICompatModel",
    "field_of",
    "make_http_client",
    "openai_params",
    "openai_usage",
    "parse_retry_after",
    "status_error",
    "translate_sdk_error",
]

log = logging.getLogger(__name__)

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
# Request timeout, conflict, too early, rate limit: worth another try. So is every 5xx.
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
# A 429 with these codes is a billing wall, not a rate limit: retrying cannot help.
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_detail(exc: Exception) -> str:
    """The server's own error message (both wire formats), not the SDK's wrapper text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    text = str(getattr(exc, "message", None) or exc)
    return re.sub(r"^Error code: \d+ - ", "", text)


def unreachable_reason(exc: BaseException) -> str | None:
    """ "connection refused", "DNS lookup failed" or "TLS handshake failed" when the
    exception (or one it was raised from) says the server cannot be reached at all."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {c.__name__ for c in type(current).__mro__}
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror) or "ClientConnectorDNSError" in names:
            return "DNS lookup failed"
        if isinstance(current, ssl.SSLError) or names & {
            "ClientConnectorCertificateError",
            "ClientConnectorSSLError",
            "ClientSSLError",
        }:
            return "TLS handshake failed"
        current = current.__cause__ or current.__context__
    return None


def _root_cause(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(exc) not in seen and (exc.__cause__ or exc.__context__) is not None:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return exc


def status_error(
    spec: ModelSpec,
    status: int,
    detail: str,
    code: object,
    headers: Mapping[str, str] | None,
) -> ProviderError:
    """The :class:`ProviderError` for an HTTP error reply, the same from the SDK adapters
    and the fast client: retryable for 408/409/425/429 and 5xx (not a billing wall), with
    ``retry_after`` from the headers and a hint at what to check."""
    retry_after = parse_retry_after(headers)
    retryable = (status in _RETRYABLE_STATUS or status >= 500) and code not in _QUOTA_CODES
    hint = ""
    if status in (401, 403):
        hint = f"; check {KEY_ENV.get(spec.provider, 'the API key')} and the model's access"
    elif status == 404:
        from deeprepo.providers.suggest import did_you_mean

        near = did_you_mean(spec.name) if spec.base_url is None else ""
        hint = f"; check the model name {spec.model!r} and the base URL{near}"
    elif code in _QUOTA_CODES:
        hint = "; the account is out of credit"
    return ProviderError(
        f"{spec.name}: HTTP {status} {detail}{hint}",
        retryable=retryable,
        status=status,
        retry_after=retry_after,
    )


def chat_completion(
    name: str,
    reply: Completion,
    *,
    billed: bool,
    no_choices: bool,
    error: object,
    content: object,
    refusal: object,
) -> Completion:
    """A chat completion's reply, read the same way from the SDK's objects and the fast
    client's JSON. ``reply`` holds its usage, model, finish reason and cost; an error
    carries it as billed only when the provider reported usage (``billed``). No choices
    (OpenRouter can answer 200 with an error object instead), a refusal or a filter, or no
    content are errors; else the text."""
    charged = reply if billed else None
    if no_choices:
        why = (
            f": {error.get('message', error) if isinstance(error, dict) else error}"
            if error
            else ""
        )
        raise ProviderError(f"{name}: reply had no choices{why}", retryable=True, billed=charged)
    if content is None:
        if reply.finish_reason == "content_filter" or refusal:
            raise ProviderError(
                f"{name}: the provider refused or filtered the reply"
                + (f": {refusal}" if refusal else ""),
                retryable=False,
                billed=charged,
            )
        raise ProviderError(f"{name}: reply had no content", retryable=True, billed=charged)
    return replace(reply, text=str(content))


def translate_sdk_error(exc: Exception, spec: ModelSpec) -> ProviderError:
    """Turn an OpenAI/Anthropic SDK exception (both are Stainless SDKs, so the same
    shape) into a :class:`ProviderError` with ``retryable``, ``status``, ``retry_after``."""
    name = type(exc).__name__
    mro = {c.__name__ for c in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        code = getattr(exc, "code", None)
        return status_error(spec, status, _error_detail(exc), code, headers)
    cause = exc.__cause__ or exc.__context__
    why = f" ({type(cause).__name__}: {cause})" if cause else ""
    reason = unreachable_reason(exc)
    if reason is not None:
        request = getattr(exc, "request", None)
        url = str(getattr(request, "url", "") or spec.base_url or "") or None
        root = _root_cause(exc)
        return ProviderUnreachable(
            f"{spec.name}: {reason} at {url or 'the provider'} ({root}); "
            "is the server running, and is the base URL right?",
            url=url,
        )
    if "APITimeoutError" in mro:
        # Some transports report a dropped connection as a timeout; the cause tells.
        return ProviderError(f"{spec.name}: request timed out{why}", retryable=True)
    if "APIConnectionError" in mro:
        return ProviderError(f"{spec.name}: connection failed{why}", retryable=True)
    if "APIResponseValidationError" in mro or isinstance(exc, ValueError):
        # A body that is not JSON or not the expected shape: a broken reply, try again.
        return ProviderError(f"{spec.name}: malformed reply ({name}: {exc})", retryable=True)
    return ProviderError(f"{spec.name}: {name}: {exc}", retryable=False)


def make_http_client(sdk: Any, max_connections: int, backend: str = "auto") -> Any:
    """An HTTP client for a Stainless SDK module (``openai`` or ``anthropic``) whose pool
    holds ``max_connections``, so a wide batch never queues inside the client.

    ``backend="auto"`` takes the SDK's aiohttp transport when ``aiohttp`` is installed:
    per request it costs about half the CPU of the default httpx pool, which matters
    for batches of hundreds of sub-calls. ``"httpx"`` forces the default transport.
    """
    try:
        import httpx2 as hx
    except ImportError:  # pragma: no cover - SDKs before the httpx2 move
        import httpx as hx  # type: ignore[no-redef]
    limits = hx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    tls = {"verify": shared_ssl_context()}
    if backend not in ("auto", "httpx", "aiohttp"):
        raise ConfigError(f"unknown HTTP backend {backend!r}; use auto, httpx or aiohttp")
    if backend != "httpx" and hasattr(sdk, "DefaultAioHttpClient"):
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            if backend == "aiohttp":
                raise ConfigError("the aiohttp backend needs: pip install aiohttp") from None
        else:
            return sdk.DefaultAioHttpClient(limits=limits, **tls)
    return sdk.DefaultAsyncHttpxClient(limits=limits, **tls)


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context per process, with the same CA bundle the HTTP client would load.

    Loading the CA bundle costs about 85 ms; a fresh client (one per role, and one per
    event loop) would otherwise pay it every time.
    """
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class LoopBoundClient:
    """One SDK client per event loop.

    HTTP connections belong to the event loop that opened them, so a caller that runs
    ``asyncio.run()`` per batch gets a fresh client (and pool) for each loop instead of
    reusing connections bound to a closed one.
    """

    def __init__(
        self,
        sdk: Any,
        client_class: str,
        kwargs: Mapping[str, Any],
        max_connections: int,
        backend: str,
    ) -> None:
        self._sdk = sdk
        self._client_class = client_class
        self._kwargs = dict(kwargs)
        self._max_connections = max_connections
        self._backend = backend
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            http = make_http_client(self._sdk, self._max_connections, self._backend)
            self._client = getattr(self._sdk, self._client_class)(**self._kwargs, http_client=http)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _usage_warning(spec: ModelSpec) -> None:
    # Not fatal: the answer is still good, only the ledger undercounts. Say so.
    log.warning("%s sent a reply without usage; counting it as 0 tokens", spec.name)


def field_of(obj: Any, name: str) -> Any:
    """``obj.name`` of an SDK object, or ``obj[name]`` of the plain dict the fast client
    reads: one reader of usage for both paths."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def openai_usage(raw: Any, spec: ModelSpec) -> tuple[Usage, float | None]:
    """Usage (input without cache reads and writes) and the reported cost, if any, from a
    ``/chat/completions`` reply's ``usage`` (an SDK object or a plain dict)."""
    if raw is None:
        _usage_warning(spec)
        return Usage(), None
    prompt = int(field_of(raw, "prompt_tokens") or 0)
    details = field_of(raw, "prompt_tokens_details")
    cached = int(field_of(details, "cached_tokens") or 0)
    written = int(field_of(details, "cache_write_tokens") or 0)  # OpenRouter
    usage = Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=int(field_of(raw, "completion_tokens") or 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )
    cost = field_of(raw, "cost")  # OpenRouter reports each call's own cost
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
        return usage, float(cost)
    return usage, None


def openai_params(spec: ModelSpec, base_url: str | None, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a ``/chat/completions`` call (the SDK adapter and the fast client
    send the same)."""
    messages: list[dict[str, str]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages += [{"role": m.role, "content": m.content} for m in request.messages]
    params: dict[str, Any] = {"model": spec.model, "messages": messages}
    # OpenAI's own API rejects max_tokens on reasoning models; other servers may not
    # know max_completion_tokens.
    if spec.provider == "openai" and base_url is None:
        params["max_completion_tokens"] = request.max_tokens
    else:
        params["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if spec.provider == "openrouter":
        params["usage"] = {"include": True}  # ask for the call's cost in usage.cost
    return params


class OpenAICompatModel:
    """A model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        base_url: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_connections: int = 256,
        default_headers: Mapping[str, str] | None = None,
        http_backend: str = "auto",
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ConfigError("the openai package is missing: pip install 'openai>=1.40'") from exc
        self.spec = spec
        url = base_url or spec.base_url
        if url is None and spec.provider == "openrouter":
            url = OPENROUTER_BASE_URL
        self.base_url = url
        headers = dict(default_headers or {})
        if spec.provider == "openrouter":
            headers.setdefault("X-Title", "deeprepo")
        self._openai = openai
        from openai.types.chat import ChatCompletion

        self._completion_type = ChatCompletion
        self._client_kwargs: dict[str, Any] = {
            "api_key": api_key,
            "base_url": url,
            "max_retries": 0,
            "timeout": timeout_s,
            "default_headers": headers or None,
        }
        self._clients = LoopBoundClient(
            self._openai, "AsyncOpenAI", self._client_kwargs, max_connections, http_backend
        )

    @property
    def name(self) -> str:
        return self.spec.name

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        return openai_params(self.spec, self.base_url, request)

    async def complete(self, request: ChatRequest) -> Completion:
        """One chat completion; raises :class:`ProviderError` with ``retryable`` set."""
        client = self._clients.get()
        try:
            # The generic post() skips the SDK's per-request walk over the typed params
            # (a third of its CPU per call); the body is plain JSON already.
            resp = await client.post(
                "/chat/completions", body=self._params(request), cast_to=self._completion_type
            )
        except (self._openai.OpenAIError, ValueError) as exc:
            raise translate_sdk_error(exc, self.spec) from exc
        usage, cost = openai_usage(getattr(resp, "usage", None), self.spec)
        choices = getattr(resp, "choices", None) or []
        model = str(getattr(resp, "model", "") or self.spec.model)
        finish = choices[0].finish_reason if choices else None
        # Only a reply that reports usage was billed as far as we can know.
        has_usage = getattr(resp, "usage", None) is not None
        message = choices[0].message if choices else None
        return chat_completion(
            self.name,
            Completion("", usage, model, finish, cost),
            billed=has_usage,
            no_choices=not choices,
            error=getattr(resp, "error", None),
            content=getattr(message, "content", None),
            refusal=getattr(message, "refusal", None),
        )

    async def aclose(self) -> None:
        await self._clients.aclose()
