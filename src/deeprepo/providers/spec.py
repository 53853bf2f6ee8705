"""Model spec strings: ``anthropic/claude-opus-4-6``, ``openrouter/minimax/minimax-m2.5``, …

A spec names a provider and the provider's own model id. The forms are::

    anthropic/<model>            Anthropic Messages API
    openai/<model>               OpenAI, or any OpenAI-compatible server with a base URL
    openrouter/<org>/<model>     OpenRouter (the model id keeps its slash)
    scripted/<policy>            a built-in scripted root policy (no network)
    static                       the built-in static-analysis worker (no network)
    oracle                       the built-in ground-truth worker (no network)
    hf/<path>                    a local transformers checkpoint folder or .gguf file, run in
                                 this process (``providers/hf_local.py``; the train extra)
    local/<name>                 a managed llama.cpp model (``deeprepo local setup``)
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from deeprepo.base.errors import ConfigError

__all__ = [
    "BUILTIN_PROVIDERS",
    "LOCAL_PROVIDERS",
    "REMOTE_PROVIDERS",
    "ModelSpec",
    "normalize_base_url",
    "parse_model_spec",
]

REMOTE_PROVIDERS = ("anthropic", "openai", "openrouter")
BUILTIN_PROVIDERS = ("scripted", "static", "oracle")
# Models run in this process from local weights: free and keyless, but not deeprepo's own
# programs (a checkpoint writes untrusted code like any model).
LOCAL_PROVIDERS = ("hf",)
#: Models deeprepo runs itself on this machine (no key, no network, $0).
LOCAL_PROVIDER = "local"
# Built-ins whose spec is the bare word (no ``/<name>`` part).
_BARE_BUILTINS = ("static", "oracle")

VALID_FORMS = (
    "anthropic/<model>, openai/<model> (add --base-url for an OpenAI-compatible server), "
    "openrouter/<org>/<model>, scripted/<policy>, static, oracle, local/<name>, "
    "hf/<checkpoint folder or .gguf>"
)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec. ``model`` is the provider's own id (``minimax/minimax-m2.5``
    for OpenRouter, ``expert`` for ``scripted/expert``, empty for ``static``)."""

    provider: str
    model: str
    base_url: str | None = None

    @property
    def name(self) -> str:
        """The spec string back: ``openrouter/minimax/minimax-m2.5``, ``static``."""
        return self.provider if not self.model else f"{self.provider}/{self.model}"

    @property
    def is_builtin(self) -> bool:
        """True for models that run in-process, cost nothing and need no key."""
        return self.provider in BUILTIN_PROVIDERS

    @property
    def is_local(self) -> bool:
        """True for weights run in this process (``hf/<path>``): no key, no cost."""
        return self.provider in LOCAL_PROVIDERS

    def __str__(self) -> str:
        return self.name


def parse_model_spec(text: str, base_url: str | None = None) -> ModelSpec:
    """Parse ``text`` (e.g. ``"anthropic/claude-sonnet-4-5"``) into a :class:`ModelSpec`.

    Raises :class:`ConfigError` naming the valid forms when the text is not one of them.
    """
    raw = text.strip()
    provider, sep, model = raw.partition("/")
    provider = provider.lower()
    if provider in _BARE_BUILTINS:
        if sep:
            raise ConfigError(
                f"model spec {text!r}: use plain {provider!r}, it takes no model name"
            )
        if base_url:
            raise ConfigError(f"{provider!r} is a built-in model; it takes no base URL")
        return ModelSpec(provider, "", None)
    if provider in LOCAL_PROVIDERS:
        path = model.strip()
        path = path.rstrip("/") or path  # "hf/ckpt/" is the folder ckpt
        if not path:
            raise ConfigError(f"model spec {text!r} names no checkpoint; use hf/<folder or .gguf>")
        if base_url:
            raise ConfigError(f"{text!r} runs in this process; it takes no base URL")
        return ModelSpec(provider, path, None)
    if provider not in REMOTE_PROVIDERS and provider not in ("scripted", LOCAL_PROVIDER):
        from deeprepo.providers.suggest import did_you_mean

        raise ConfigError(
            f"unknown model spec {text!r}{did_you_mean(text)}; valid forms: {VALID_FORMS}"
        )
    model = model.strip()
    if not model or model.endswith("/"):
        raise ConfigError(f"model spec {text!r} names no model; valid forms: {VALID_FORMS}")
    if provider == "openrouter" and "/" not in model:
        raise ConfigError(
            f"model spec {text!r}: OpenRouter models are <org>/<model>, "
            "e.g. openrouter/minimax/minimax-m2.5"
        )
    if provider in ("scripted", LOCAL_PROVIDER):
        if base_url:
            raise ConfigError(f"{text!r} is a built-in model; it takes no --base-url")
        return ModelSpec(provider, model, None)
    url = normalize_base_url(provider, base_url) if base_url else None
    return ModelSpec(provider, model, url)


def normalize_base_url(provider: str, url: str) -> str:
    """Make a user's base URL what the provider's SDK expects.

    OpenAI-style SDKs append ``/chat/completions`` to the base URL, so a bare
    ``http://host:8000`` (how vLLM, Ollama and llama.cpp are usually described) gets
    ``/v1``. The Anthropic SDK appends ``/v1/messages`` itself, so a trailing ``/v1``
    is dropped.
    """
    parts = urlsplit(url.strip())
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ConfigError(f"base URL {url!r} must look like http://host:port/v1")
    path = parts.path.rstrip("/")
    if provider == "anthropic":
        if path.endswith("/v1"):
            path = path[: -len("/v1")]
    elif path == "":
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
