"""From a :class:`ModelSpec` to a working :class:`ChatModel`, and the default models.

Keys are read from the environment when a model is built, never at import.
Built-in models (``scripted/<policy>``, ``static``, ``oracle``) are imported
lazily from their own packages, so nothing here loads a heavy dependency early.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from deeprepo.errors import ConfigError, MissingKeyError
from deeprepo.providers.base import ChatModel
from deeprepo.providers.openai_compat import KEY_ENV
from deeprepo.providers.spec import ModelSpec

__all__ = ["LOCAL_SERVER_KEY", "build_model", "default_models"]

# Local OpenAI-compatible servers (vLLM, Ollama, llama.cpp) accept any key, but the
# SDKs refuse to start without one.
LOCAL_SERVER_KEY = "not-needed"
OFFLINE_MODELS = ("scripted/expert", "static")


def build_model(
    spec: ModelSpec,
    *,
    role: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
    max_connections: int = 256,
    builtin_kwargs: Mapping[str, object] | None = None,
) -> ChatModel:
    """Build the model ``spec`` names for ``role`` (``"root"`` or ``"sub"``).

    Raises :class:`MissingKeyError` when a hosted provider's key is not set; with a
    ``base_url`` (a local server) a missing key is fine.
    """
    environ = os.environ if env is None else env
    if spec.provider == "scripted":
        from deeprepo.policies import make_policy

        if builtin_kwargs:
            raise ConfigError(f"{spec.name} takes no options")
        policy: ChatModel = make_policy(spec.model)
        return policy
    if spec.provider == "local":
        from deeprepo.local.catalog import get_model
        from deeprepo.local.provider import LocalModel

        if builtin_kwargs:
            raise ConfigError(f"{spec.name} takes no options")
        return LocalModel(get_model(spec.model), role=role, env=env, timeout_s=timeout_s)
    if spec.provider in ("static", "oracle"):
        from deeprepo.workers import make_worker

        return make_worker(spec.provider, **dict(builtin_kwargs or {}))
    if spec.provider == "hf":
        from deeprepo.providers.hf_local import HFLocalModel, HFSettings

        if builtin_kwargs:
            raise ConfigError(f"{spec.name} takes no options")
        return HFLocalModel(spec.model, HFSettings.from_env(environ))
    key_env = KEY_ENV.get(spec.provider)
    if key_env is None:
        raise ConfigError(f"no adapter for provider {spec.provider!r}")
    key = environ.get(key_env, "").strip()
    if not key:
        if spec.base_url is None:
            fallback = "--root scripted/expert" if role == "root" else "--sub static"
            raise MissingKeyError(f"No key found - set {key_env} or pass {fallback} (runs offline)")
        key = LOCAL_SERVER_KEY
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
