"""The models a run can name: the core's built-in providers registered, then built.

Importing this module registers the offline engine (``scripted/expert``, ``static``,
``deeprepo.builtin``) and managed local models (``local/<name>``, ``deeprepo.local``) with
the provider registry; the research stack adds its own when ``deeprepo.rl`` is imported.
"""

from __future__ import annotations

from deeprepo import builtin, local
from deeprepo.providers.registry import build_model, default_models

__all__ = ["build_model", "default_models"]

builtin.register()
local.register()
