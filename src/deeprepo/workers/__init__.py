"""Built-in sub-LLM workers that need no network and no key.

``make_worker("static")`` returns the analyzer-backed :class:`StaticWorker`
(``codebase=`` gives it the repository, so slices are analysed in their whole
file's context);
``make_worker("oracle", ground_truth=...)`` the ground-truth worker used for tasks.
Workers are imported lazily so that naming one does not load the others'
dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deeprepo.errors import ConfigError

if TYPE_CHECKING:
    from deeprepo.providers.base import ChatModel
    from deeprepo.workers.static import StaticWorker

__all__ = ["WORKER_NAMES", "StaticWorker", "make_worker"]

WORKER_NAMES = ("static", "oracle")


def make_worker(name: str, **options: Any) -> ChatModel:
    """Build the built-in worker called ``name``.

    Raises :class:`ConfigError` for an unknown name (listing the valid ones) or
    for options the worker does not take.
    """
    key = name.strip().lower()
    if key == "static":
        files = options.pop("files", None)
        codebase = options.pop("codebase", None)
        if options:
            raise ConfigError(
                f"the static worker takes no options but files= or codebase= "
                f"(got {', '.join(sorted(options))}); remove them or pick another --sub model"
            )
        from deeprepo.workers.static import StaticWorker

        if files is None and codebase is not None:
            files = getattr(codebase, "files", codebase)
        return StaticWorker(files)
    if key == "oracle":
        if "ground_truth" not in options:
            raise ConfigError(
                "the oracle worker answers from a task's ground truth: pass ground_truth= "
                "(a list of entries or a path to ground_truth.json), or use --sub static"
            )
        from deeprepo.workers.oracle import make_oracle

        gt = options.pop("ground_truth")
        try:
            return make_oracle(gt, **options)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad oracle worker options: {exc}") from exc
    raise ConfigError(f"unknown built-in worker {name!r}; valid workers: {', '.join(WORKER_NAMES)}")


def __getattr__(name: str) -> Any:
    # ``from deeprepo.workers import StaticWorker`` without importing it eagerly.
    if name == "StaticWorker":
        from deeprepo.workers.static import StaticWorker

        return StaticWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
