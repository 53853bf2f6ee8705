"""The sub-call fast path: OpenAI-compatible and Anthropic Messages calls on bare aiohttp.

The SDK adapters (``openai_compat``, ``anthropic_api``) spend 0.7-1.0 ms of CPU a request
in the SDK's request building, httpx models and pydantic parsing; a batch of hundreds of
sub-calls from one event loop is bound by that CPU, not by the network. These clients send
the same JSON body (:func:`openai_params`, :func:`anthropic_params`), read the reply as a
plain dict with the same usage readers (:func:`openai_usage`, :func:`anthropic_usage`) and
raise the same :class:`ProviderError` / :class:`ProviderUnreachable` (built by
:func:`status_error` and the same wording) as the SDK path, so the metered wrapper retries,
bills and records them identically. Which path a run takes is ``CallSettings.http_client``
(``--http-client fast|sdk``).

Like the SDKs they read ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` when no base URL is
configured, ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``, and the proxy variables
(``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), read once when the model is built: aiohttp's
own ``trust_env`` would look them (and ``~/.netrc``) up in a worker thread on every request,
two thread hops a call. ``~/.netrc`` is not read: the key is the request's credential. Keys
travel only in the request headers; nothing here logs them.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from deeprepo.base.chat import ChatRequest, Completion
from deeprepo.base.errors import ProviderError, ProviderUnreachable
from deeprepo.base.version import VERSION
from deeprepo.providers.anthropic_api import (
    anthropic_params,
    anthropic_usage,
    messages_completion,
)
from deeprepo.providers.openai_compat import (
    OPENROUTER_BASE_URL,
    _root_cause,
    chat_completion,
    openai_params,
    openai_usage,
    shared_ssl_context,
    status_error,
    unreachable_reason,
)
from deeprepo.providers.spec import ModelSpec

__all__ = [
    "ANTHROPIC_VERSION",
    "FastAnthropicModel",
    "FastOpenAIModel",
    "HttpSession",
    "env_proxy",
]

#: The Messages API version the Anthropic SDK sends.
ANTHROPIC_VERSION = "2023-06-01"
_OPENAI_DEFAULT = "https://api.openai.com/v1"
_ANTHROPIC_DEFAULT = "https://api.anthropic.com"
# A User-Agent of our own: some gateways refuse requests without one, and aiohttp's
# default names aiohttp, not the caller.
_COMMON_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "User-Agent": f"deeprepo/{VERSION}",
}


class HttpSession:
    """One aiohttp session per event loop, its pool as wide as the batch, for one endpoint.

    Connections belong to the loop that opened them: a caller that runs ``asyncio.run()``
    per batch gets a fresh session for each loop, as the SDK path's ``LoopBoundClient``.
    The endpoint's URL and headers are parsed once, as the session's defaults: passed
    with each request, aiohttp would parse the URL and rebuild the header multidict
    every time."""

    def __init__(
        self, url: str, headers: Mapping[str, str], max_connections: int, timeout_s: float
    ) -> None:
        self.url = url
        self._target = URL(url)
        self._headers = dict(headers)
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._proxy, self._proxy_auth = env_proxy(url)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            self._drop()
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, limit_per_host=0, ssl=shared_ssl_context()
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                timeout=self._timeout,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            )
            self._loop = loop
        return self._session

    def _drop(self) -> None:
        session, loop, self._session = self._session, self._loop, None
        if session is None or session.closed:
            return
        if loop is not None and not loop.is_closed():
            # Still running elsewhere: close the session on its own loop.
            asyncio.run_coroutine_threadsafe(session.close(), loop)
        # A closed loop's connections cannot be closed through it; they go with the
        # session's last reference, as the SDK path's LoopBoundClient leaves them.

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            if self._loop is asyncio.get_running_loop():
                await session.close()
            else:
                self._session = session
                self._drop()

    async def post(self, spec: ModelSpec, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` as JSON to the endpoint; the reply's JSON object, or a
        :class:`ProviderError`."""
        data = json.dumps(body).encode("utf-8")
        url = self.url
        try:
            async with self.get().post(self._target, data=data) as resp:
                raw = await resp.read()
                status = resp.status
                if status >= 400:
                    detail, code = _error_detail(raw, status)
                    raise status_error(spec, status, detail, code, resp.headers)
        except TimeoutError as exc:
            raise ProviderError(
                f"{spec.name}: request timed out{_why(exc)}", retryable=True
            ) from exc
        except aiohttp.ClientError as exc:
            reason = unreachable_reason(exc)
            if reason is not None:
                raise ProviderUnreachable(
                    f"{spec.name}: {reason} at {url} ({_root_cause(exc)}); "
                    "is the server running, and is the base URL right?",
                    url=url,
                ) from exc
            raise ProviderError(
                f"{spec.name}: connection failed{_why(exc)}", retryable=True
            ) from exc
        try:
            parsed = json.loads(raw)
        except ValueError as exc:  # a torn or non-JSON body: a broken reply, try again
            raise ProviderError(
                f"{spec.name}: malformed reply ({type(exc).__name__}: {exc})", retryable=True
            ) from exc
        if not isinstance(parsed, dict):
            raise ProviderError(
                f"{spec.name}: malformed reply (the body is a JSON {type(parsed).__name__}, "
                "not an object)",
                retryable=True,
            )
        return parsed


def env_proxy(url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy ``HTTPS_PROXY`` / ``HTTP_PROXY`` name for ``url`` unless ``NO_PROXY``
    exempts its host (the SDKs' httpx reads the same variables); None for none."""
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None


def _why(exc: BaseException) -> str:
    text = str(exc)
    return f" ({type(exc).__name__}: {text})" if text else f" ({type(exc).__name__})"


def _error_detail(raw: bytes, status: int) -> tuple[str, object]:
    """The server's own message and error code, as the SDKs read them from an error body."""
    text = raw.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        return text, None
    if isinstance(parsed, dict):
        inner = parsed.get("error", parsed)
        if isinstance(inner, dict):
            code = inner.get("code")
            if isinstance(inner.get("message"), str):
                return str(inner["message"]), code
            return str(inner), code
    if parsed is None:
        return f"Error code: {status}", None
    return text, None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _malformed(spec: ModelSpec, what: str) -> ProviderError:
    return ProviderError(f"{spec.name}: malformed reply ({what})", retryable=True)


class FastOpenAIModel:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint, without the SDK;
    the same requests, usage, cost and errors as :class:`OpenAICompatModel`."""

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        base_url: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_connections: int = 256,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        url = base_url or spec.base_url
        if url is None and spec.provider == "openrouter":
            url = OPENROUTER_BASE_URL
        #: as configured; None is OpenAI's own API (the SDK path's test too)
        self.base_url = url
        endpoint = url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_DEFAULT
        self._url = endpoint.rstrip("/") + "/chat/completions"
        headers = dict(_COMMON_HEADERS)
        headers["Authorization"] = f"Bearer {api_key}"
        for env_name, header in (
            ("OPENAI_ORG_ID", "OpenAI-Organization"),
            ("OPENAI_PROJECT_ID", "OpenAI-Project"),
        ):
            if os.environ.get(env_name):
                headers[header] = os.environ[env_name]
        if spec.provider == "openrouter":
            headers.setdefault("X-Title", "deeprepo")
        headers.update(default_headers or {})
        self._http = HttpSession(self._url, headers, max_connections, timeout_s)

    @property
    def name(self) -> str:
        return self.spec.name

    async def complete(self, request: ChatRequest) -> Completion:
        """One chat completion; raises :class:`ProviderError` with ``retryable`` set."""
        params = openai_params(self.spec, self.base_url, request)
        data = await self._http.post(self.spec, params)
        raw_usage = _mapping(data.get("usage"))
        usage, cost = openai_usage(raw_usage, self.spec)
        choices = data.get("choices") or []
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise _malformed(self.spec, "choices is not a list of objects")
        model = str(data.get("model") or self.spec.model)
        finish = choices[0].get("finish_reason") if choices else None
        message = (_mapping(choices[0].get("message")) or {}) if choices else {}
        return chat_completion(
            self.name,
            Completion("", usage, model, finish, cost),
            billed=raw_usage is not None,
            no_choices=not choices,
            error=data.get("error"),
            content=message.get("content"),
            refusal=message.get("refusal"),
        )

    async def aclose(self) -> None:
        await self._http.aclose()


class FastAnthropicModel:
    """A Claude model over the Messages API, without the SDK; the same requests (prompt
    caching marks included), usage and errors as :class:`AnthropicModel`."""

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        base_url: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_connections: int = 256,
    ) -> None:
        self.spec = spec
        self.base_url = base_url or spec.base_url
        endpoint = self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or _ANTHROPIC_DEFAULT
        self._url = endpoint.rstrip("/") + "/v1/messages"
        headers = {
            **_COMMON_HEADERS,
            "x-api-key": api_key,
            "anthropic-version": ANTHROPIC_VERSION,
        }
        self._http = HttpSession(self._url, headers, max_connections, timeout_s)

    @property
    def name(self) -> str:
        return self.spec.name

    async def complete(self, request: ChatRequest) -> Completion:
        """One Messages call; raises :class:`ProviderError` with ``retryable`` set."""
        params = anthropic_params(self.spec, request)
        data = await self._http.post(self.spec, params)
        usage = anthropic_usage(_mapping(data.get("usage")), self.spec)
        stop = data.get("stop_reason")
        model = str(data.get("model") or self.spec.model)
        blocks = data.get("content") or []
        if not isinstance(blocks, list):
            raise _malformed(self.spec, "content is not a list")
        texts = [
            str(block.get("text"))
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return messages_completion(self.name, texts, Completion("", usage, model, stop, None))

    async def aclose(self) -> None:
        await self._http.aclose()
