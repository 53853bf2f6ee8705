"""Shared fixtures. Every test runs with no provider key, a private response cache and a
private data home (the run log), so nothing can reach a real (paid) API, read a developer's
cached replies or write into their run log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deeprepo.testing.loopback import LoopbackServer

_SCRUBBED_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENROUTER_API_KEY",
    "DEEPREPO_PRICES",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


def _real_data_home() -> Path:
    from deeprepo.local.paths import data_home

    return data_home()


#: Installed local models and their runtime (``deeprepo local setup``) stay visible to the
#: local_model tier from the private homes below; nothing else of the real home does.
_REAL_HOME = _real_data_home()


def _home(path: Path) -> str:
    for name in ("models", "runtime"):
        real = _REAL_HOME / name
        if real.is_dir() and not (path / name).exists():
            (path / name).symlink_to(real, target_is_directory=True)
    return str(path)


@pytest.fixture(scope="session", autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Set before any module- or session-scoped fixture runs the CLI (function-scoped
    # monkeypatching comes too late for those): no test writes into the real data home.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPREPO_HOME", _home(tmp_path_factory.mktemp("deeprepo-home-session")))
        mp.delenv("DEEPREPO_NO_LOG", raising=False)
        # The developer's own config.toml (models, budgets) must not change what a test runs.
        mp.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("user-config")))
        yield


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in _SCRUBBED_ENV:
        monkeypatch.delenv(name, raising=False)
    # Loopback traffic must never go through a proxy.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    cache_dir: Path = tmp_path_factory.mktemp("response-cache")
    monkeypatch.setenv("DEEPREPO_CACHE_DIR", str(cache_dir))
    # The run log (and anything else under the data home) goes to a private folder.
    monkeypatch.setenv("DEEPREPO_HOME", _home(tmp_path_factory.mktemp("deeprepo-home")))
    monkeypatch.delenv("DEEPREPO_NO_LOG", raising=False)


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A started loopback OpenAI/Anthropic server on 127.0.0.1 (stops itself after 120 s)."""
    with LoopbackServer(ttl_s=120.0, timeout_fault_s=5.0) as server:
        yield server
