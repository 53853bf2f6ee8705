"""Run the real ``deeprepo`` CLI in a subprocess (as a user would)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

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
