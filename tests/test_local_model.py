"""The real model tier: a llama.cpp server with real weights (``-m local_model``).

Skipped, with the reason, when the runtime or every model's weights are missing
(``deeprepo local setup --model smollm2-135m`` installs the smallest). CI installs
them (scripts/setup-local.sh), so there these run. ``DEEPREPO_LOCAL_TEST_MODEL``
picks the model; else the smallest one installed.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from clihelp import EXAMPLE, run_cli

from deeprepo.base.chat import ChatRequest, Message
from deeprepo.base.prompts import file_audit_prompt
from deeprepo.local.catalog import CATALOG, LocalModelInfo, get_model
from deeprepo.local.provider import LocalModel
from deeprepo.local.runtime import find_runtime
from deeprepo.local.store import installed

pytestmark = [pytest.mark.e2e, pytest.mark.local_model, pytest.mark.slow]


def _model() -> LocalModelInfo:
    if find_runtime() is None:
        pytest.skip("llama.cpp runtime not installed (deeprepo local setup --model smollm2-135m)")
    wanted = os.environ.get("DEEPREPO_LOCAL_TEST_MODEL", "").strip()
    if wanted:
        info = get_model(wanted)
        if not installed(info).size_ok:
            pytest.skip(f"{wanted} weights not installed (deeprepo local setup --model {wanted})")
        return info
    for info in sorted(CATALOG.values(), key=lambda i: i.size_bytes):
        if installed(info).size_ok:
            return info
    pytest.skip("no local model installed (deeprepo local setup --model smollm2-135m)")


def test_a_real_worker_call_on_a_bundled_file_returns_parseable_findings() -> None:
    info = _model()
    path = "vulnapi/auth.py"
    content = (EXAMPLE / path).read_text()
    model = LocalModel(info, role="sub")

    async def go() -> tuple[str, int, int]:
        try:
            request = ChatRequest((Message("user", file_audit_prompt(path, content)),))
            c = await model.complete(request)
            return c.text, c.usage.input_tokens, c.usage.output_tokens
        finally:
            await model.aclose()

    text, tokens_in, tokens_out = asyncio.run(go())
    data = json.loads(text)  # the provider always answers JSON for an audit prompt
    n_lines = content.count("\n") + 1
    assert isinstance(data["findings"], list)
    for item in data["findings"]:
        assert item["file"] == path and 1 <= item["line"] <= n_lines
    assert tokens_in > 200 and tokens_out > 0  # counted from the server's own usage


def test_a_short_real_run_completes_at_zero_cost(tmp_path: Path) -> None:
    info = _model()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text(
        "import hashlib\nimport sqlite3\n\n\n"
        "def find(conn: sqlite3.Connection, name: str) -> list:\n"
        "    return conn.execute(f\"SELECT * FROM users WHERE name = '{name}'\").fetchall()\n\n\n"
        "def digest(password: str) -> str:\n"
        "    return hashlib.md5(password.encode()).hexdigest()\n"
    )
    out = tmp_path / "run"
    r = run_cli("analyze", str(repo), "--sub", f"local/{info.name}", "--out", str(out),
                timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    (row,) = [u for u in metrics["usage"] if u["model"] == f"local/{info.name}"]
    assert row["calls"] >= 1 and row["input_tokens"] > 100 and row["output_tokens"] > 0
    assert row["cost_usd"] == 0.0 and metrics["total_cost_usd"] == 0.0
    assert metrics["files_covered"] == metrics["coverable_files"] == 1
