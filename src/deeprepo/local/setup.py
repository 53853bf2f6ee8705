"""``deeprepo local setup`` as a library call: the runtime, then the weights, timed."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from deeprepo.local.catalog import LocalModelInfo
from deeprepo.local.paths import data_home
from deeprepo.local.runtime import env_dir, install_runtime
from deeprepo.local.store import fetch_model

__all__ = ["SetupReport", "dir_bytes", "setup_local"]


@dataclass(frozen=True)
class SetupReport:
    model: LocalModelInfo
    python: Path
    weights: Path
    runtime_installed: bool  # False: it was there already
    weights_fetched: bool  # False: verified copy already there
    seconds: float
    runtime_bytes: int
    weights_bytes: int
    free_bytes: int


def dir_bytes(path: Path) -> int:
    """Bytes under ``path`` (0 when missing); symlinks are not followed."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for item in path.rglob("*") if path.is_dir() else ():
        if item.is_file() and not item.is_symlink():
            total += item.stat().st_size
    return total


def setup_local(
    info: LocalModelInfo,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    runtime: bool = True,
) -> SetupReport:
    """Install what ``local/<info.name>`` needs; re-running does only what is missing."""
    started = time.monotonic()
    home = data_home(env)
    home.mkdir(parents=True, exist_ok=True)
    if runtime:
        python, runtime_done = install_runtime(env, progress)
    else:
        python, runtime_done = Path(""), False
    weights, fetched = fetch_model(info, env, progress)
    return SetupReport(
        model=info,
        python=python,
        weights=weights,
        runtime_installed=runtime_done,
        weights_fetched=fetched,
        seconds=time.monotonic() - started,
        runtime_bytes=dir_bytes(env_dir(env)),
        weights_bytes=weights.stat().st_size,
        free_bytes=shutil.disk_usage(home).free,
    )
