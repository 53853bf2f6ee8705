"""Live-provider smoke tests: real, paid APIs. Skipped unless DEEPREPO_LIVE_TESTS=1 and the
key is set (the autouse fixture in conftest removes keys, so these read them first)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clihelp import EXAMPLE, run_cli

LIVE = os.environ.get("DEEPREPO_LIVE_TESTS") == "1"
KEYS = {k: os.environ.get(k, "") for k in ("ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")}

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.live,
    pytest.mark.skipif(not LIVE, reason="live API tests: set DEEPREPO_LIVE_TESTS=1 (costs money)"),
]


@pytest.mark.skipif(not all(KEYS.values()), reason="needs ANTHROPIC_API_KEY and OPENROUTER_API_KEY")
def test_real_models_analyse_the_example_within_budget(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli(
        "analyze", str(EXAMPLE), "--root", "anthropic/claude-haiku-4-5",
        "--sub", "openrouter/minimax/minimax-m2.5", "--max-cost", "0.25", "--max-turns", "8",
        "--out", str(out), "--no-cache",
        env=KEYS, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["offline"] is False and m["total_cost_usd"] is not None
    assert m["total_cost_usd"] <= 0.25 + 0.05  # the limit plus calls in flight
    assert m["sub_calls"] > 0
