"""From a :class:`ModelSpec` to a working :class:`ChatModel`, and the default models.

Keys are read from the environment when a model is built, never at import. Hosted
providers (Anthropic, OpenAI-compatible, OpenRouter) and in-process checkpoints (``hf/``)
are built here. Built-in models live in the rooms above (the offline engine's
``scripted``/``static`` in ``deeprepo.builtin``, managed ``local/`` models in
``deeprepo.local``, the research stack's ``oracle`` and policies in ``deeprepo.rl``) and
register themselves with :func:`register_provider`, so this module never imports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from deeprepo.base.chat import ChatModel, Role
from deeprepo.base.errors import ConfigError, MissingKeyError
from deeprepo.providers.openai_compat import KEY_ENV
from deeprepo.providers.spec import ModelSpec

__all__ = [
    "HTTP_CLIENTS",
    "LOCAL_SERVER_KEY",
    "BuildContext",
    "BuiltinProvider",
    "HttpClient",
    "build_model",
    "builtin_providers",
    "default_models",
    "register_provider",
]

# Local OpenAI-compatible servers (vLLM, Ollama, llama.cpp) accept any key, but the
# SDKs refuse to start without one.
LOCAL_SERVER_KEY = "not-needed"
OFFLINE_MODELS = ("scripted/expert", "static")
#: How a hosted model's calls go over HTTP: deeprepo's own aiohttp client or the SDK's.
HttpClient = Literal["fast", "sdk"]
HTTP_CLIENTS: tuple[HttpClient, ...] = ("fast", "sdk")


@dataclass(frozen=True)
class BuildContext:
    """What a built-in provider's factory is given besides the spec."""

    role: Role
    env: Mapping[str, str]
    timeout_s: float = 600.0
    #: Options of the built-in model (``codebase=`` for the static worker, ``ground_truth=``
    #: for the oracle); a factory that takes none refuses them.
    options: Mapping[str, object] = field(default_factory=dict)

    def no_options(self, spec: ModelSpec) -> None:
        if self.options:
            raise ConfigError(f"{spec.name} takes no options")


@dataclass(frozen=True)
class BuiltinProvider:
    """A provider deeprepo runs itself: ``build`` makes the model, ``models`` lists the
    spec strings it answers to with one line each (``deeprepo models``)."""

    name: str
    build: Callable[[ModelSpec, BuildContext], ChatModel]
    models: Callable[[], Mapping[str, str]] = dict


_BUILTINS: dict[str, BuiltinProvider] = {}


def register_provider(provider: BuiltinProvider) -> None:
    """Make ``provider.name`` a model prefix (``scripted``, ``static``, ``local``, …);
    registering a name again replaces it."""
    _BUILTINS[provider.name] = provider


def builtin_providers() -> list[BuiltinProvider]:
    """The registered built-in providers, in registration order."""
    return list(_BUILTINS.values())


def _build_hf(spec: ModelSpec, context: BuildContext) -> ChatModel:
    from deeprepo.providers.hf_local import HFLocalModel, HFSettings

    context.no_options(spec)
    return HFLocalModel(spec.model, HFSettings.from_env(context.env))


register_provider(BuiltinProvider("hf", _build_hf))


def build_model(
    spec: ModelSpec,
    *,
    role: Role,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
    max_connections: int = 256,
    builtin_kwargs: Mapping[str, object] | None = None,
    http_client: HttpClient = "fast",
) -> ChatModel:
    """Build the model ``spec`` names for ``role`` (``"root"`` or ``"sub"``).

    A hosted model talks HTTP through ``http_client``: ``"fast"`` (bare aiohttp,
    ``providers/fast_http.py``) or ``"sdk"`` (the official OpenAI/Anthropic SDK); both send
    the same requests and bill, retry and fail the same way.

    Raises :class:`MissingKeyError` when a hosted provider's key is not set; with a
    ``base_url`` (a local server) a missing key is fine.
    """
    environ = os.environ if env is None else env
    builtin = _BUILTINS.get(spec.provider)
    if builtin is not None:
        context = BuildContext(role, environ, timeout_s, dict(builtin_kwargs or {}))
        return builtin.build(spec, context)
    key_env = KEY_ENV.get(spec.provider)
    if key_env is None:
        known = ", ".join(sorted(_BUILTINS))
        raise ConfigError(
            f"{spec.name} is not available here: no provider {spec.provider!r} is registered "
            f"(built-in providers: {known}; the research models oracle and scripted/<policy> "
            "come with the deeprepo.rl package)"
        )
    key = environ.get(key_env, "").strip()
    if not key:
        if spec.base_url is None:
            fallback = "--root scripted/expert" if role == "root" else "--sub static"
            raise MissingKeyError(f"No key found - set {key_env} or pass {fallback} (runs offline)")
        key = LOCAL_SERVER_KEY
    if http_client not in HTTP_CLIENTS:
        raise ConfigError(f"unknown HTTP client {http_client!r}; use fast or sdk")
    if http_client == "fast":
        from deeprepo.providers.fast_http import FastAnthropicModel, FastOpenAIModel

        fast = FastAnthropicModel if spec.provider == "anthropic" else FastOpenAIModel
        return fast(spec, key, spec.base_url, timeout_s=timeout_s, max_connections=max_connections)
    if spec.provider == "anthropic":
        from deeprepo.providers.anthropic_api import AnthropicModel

        return AnthropicModel(
            spec, key, spec.base_url, timeout_s=timeout_s, max_connections=max_connections
        )
    from deeprepo.providers.openai_compat import OpenAICompatModel

    return OpenAICompatModel(
        spec, key, spec.base_url, timeout_s=timeout_s, max_connections=max_connections
    )


def default_models(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(root, sub)`` spec strings for the keys present; offline built-ins with none.

    The root goes to the strongest provider available (Anthropic first, for prompt
    caching); the sub goes to the cheapest good worker (MiniMax via OpenRouter,
    else the root provider's small model).
    """
    environ = os.environ if env is None else env

    def has(name: str) -> bool:
        return bool(environ.get(name, "").strip())

    anthropic, openrouter, openai = (
        has("ANTHROPIC_API_KEY"),
        has("OPENROUTER_API_KEY"),
        has("OPENAI_API_KEY"),
    )
    if not (anthropic or openrouter or openai):
        return OFFLINE_MODELS
    if anthropic:
        root = "anthropic/claude-sonnet-4-5"
    elif openrouter:
        root = "openrouter/anthropic/claude-sonnet-4.5"
    else:
        root = "openai/gpt-5"
    if openrouter:
        sub = "openrouter/minimax/minimax-m2.5"
    elif anthropic:
        sub = "anthropic/claude-haiku-4-5"
    else:
        sub = "openai/gpt-5-mini"
    return root, sub
