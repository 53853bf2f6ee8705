"""The offline engine: built-in models that need no network and no key.

``scripted/<policy>`` root policies emit real Python into the REPL (the core ships
``expert``, the offline default root; the research stack registers more), and the
``static`` worker answers audit prompts from well-kept analyzers (``builtin/analyzers/``).
:func:`register` puts both in the provider registry; the run wiring (``deeprepo.run``)
calls it. Heavy analyzers are imported lazily, when the static worker first runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deeprepo.base.errors import ConfigError
from deeprepo.builtin.scripted import POLICIES, ScriptedPolicy, make_policy, register_policy

if TYPE_CHECKING:
    from deeprepo.base.chat import ChatModel
    from deeprepo.builtin.static import StaticWorker
    from deeprepo.providers.registry import BuildContext
    from deeprepo.providers.spec import ModelSpec

__all__ = [
    "POLICIES",
    "ScriptedPolicy",
    "StaticWorker",
    "make_policy",
    "make_static_worker",
    "register",
    "register_policy",
]


def make_static_worker(**options: Any) -> StaticWorker:
    """The analyzer-backed worker; ``codebase=`` (or ``files=``) gives it the repository, so
    slices are analysed in their whole file's context."""
    files = options.pop("files", None)
    codebase = options.pop("codebase", None)
    if options:
        raise ConfigError(
            f"the static worker takes no options but files= or codebase= "
            f"(got {', '.join(sorted(options))}); remove them or pick another --sub model"
        )
    from deeprepo.builtin.static import StaticWorker

    if files is None and codebase is not None:
        files = getattr(codebase, "files", codebase)
    return StaticWorker(files)


def _build_scripted(spec: ModelSpec, context: BuildContext) -> ChatModel:
    context.no_options(spec)
    return make_policy(spec.model)


def _build_static(spec: ModelSpec, context: BuildContext) -> ChatModel:
    return make_static_worker(**dict(context.options))


def _scripted_models() -> dict[str, str]:
    return {f"scripted/{p}": "built-in root: a scripted policy" for p in sorted(POLICIES)}


def register() -> None:
    """Register ``scripted/<policy>`` and ``static`` with the provider registry."""
    from deeprepo.providers.registry import BuiltinProvider, register_provider

    register_provider(BuiltinProvider("scripted", _build_scripted, _scripted_models))
    register_provider(
        BuiltinProvider(
            "static",
            _build_static,
            lambda: {"static": "built-in worker: answers audit prompts from static analyzers"},
        )
    )


def __getattr__(name: str) -> Any:
    # ``from deeprepo.builtin import StaticWorker`` without importing the analyzers eagerly.
    if name == "StaticWorker":
        from deeprepo.builtin.static import StaticWorker

        return StaticWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
