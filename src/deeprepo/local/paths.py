"""Where local models and their runtime live: ``$DEEPREPO_HOME`` or the user data directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["HOME_ENV", "data_home", "logs_dir", "models_dir", "runtime_dir"]

HOME_ENV = "DEEPREPO_HOME"


def data_home(env: Mapping[str, str] | None = None) -> Path:
    """``$DEEPREPO_HOME`` when set, else platformdirs' ``user_data_dir("deeprepo")``."""
    environ = os.environ if env is None else env
    home = environ.get(HOME_ENV, "").strip()
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("deeprepo", appauthor=False))


def models_dir(env: Mapping[str, str] | None = None) -> Path:
    return data_home(env) / "models"


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    return data_home(env) / "runtime"


def logs_dir(env: Mapping[str, str] | None = None) -> Path:
    return data_home(env) / "logs"
