"""Managed local models: llama.cpp's OpenAI-compatible server with GGUF weights.

``deeprepo local setup`` installs the runtime and the weights into the user's data
directory; the ``local/<name>`` provider starts the server when a run needs it and
stops it at the end. See docs/local.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeprepo.base.chat import ChatModel
    from deeprepo.providers.registry import BuildContext
    from deeprepo.providers.spec import ModelSpec

__all__ = ["register"]


def _build_local(spec: ModelSpec, context: BuildContext) -> ChatModel:
    from deeprepo.local.catalog import get_model
    from deeprepo.local.provider import LocalModel

    context.no_options(spec)
    return LocalModel(
        get_model(spec.model), role=context.role, env=context.env, timeout_s=context.timeout_s
    )


def register() -> None:
    """Register the ``local/<name>`` provider with the provider registry."""
    from deeprepo.providers.registry import BuiltinProvider, register_provider

    register_provider(BuiltinProvider("local", _build_local))
