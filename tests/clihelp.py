"""Run the real ``deeprepo`` CLI in a subprocess (as a user would)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeprepo.testing.loopback import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "vulnapi"
EXAMPLE_TRUTH = ROOT / "examples" / "vulnapi.ground_truth.json"


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "deeprepo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd or ROOT,
    )


def loopback_analyze_args(
    srv: LoopbackServer, out: Path, *extra: str, repo: Path = EXAMPLE
) -> list[str]:
    """``analyze`` with the root on the server's Anthropic route (``anthropic/test-root``) and
    the sub-workers on its OpenAI-compatible route (``openrouter/test/sub``)."""
    return [
        "analyze", str(repo),
        "--root", "anthropic/test-root", "--root-base-url", srv.anthropic_base_url,
        "--sub", "openrouter/test/sub", "--sub-base-url", srv.openai_base_url,
        "--out", str(out), *extra,
    ]  # fmt: skip


def sigint_default() -> None:
    """``preexec_fn`` for a child a test will Ctrl-C: SIGINT back to its default. A job that a
    non-interactive shell starts with ``&`` (CI runners can) ignores SIGINT, and children
    inherit that, so the test would measure the shell, not deeprepo."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
