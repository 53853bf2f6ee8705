"""The import contract (``scripts/check_layers.py``, drawn in docs/architecture.md) holds,
and the core stands without the research stack."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _checker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "check_layers", ROOT / "scripts" / "check_layers.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imports_only_go_down_with_no_circles_and_nothing_loaded_by_path() -> None:
    assert _checker().check() == []


def test_the_checker_sees_an_upward_import_a_circle_and_a_load_by_path(tmp_path: Path) -> None:
    """The contract is only as good as its checker: a planted violation of each rule is named."""
    checker = _checker()
    pkg = tmp_path / "deeprepo"
    for room in ("base", "run", "sandbox"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "base" / "a.py").write_text("def f():\n    from deeprepo.run import b\n")
    (pkg / "run" / "b.py").write_text("from deeprepo.run import c\n")
    (pkg / "run" / "c.py").write_text("import deeprepo.run.b\n")
    (pkg / "sandbox" / "d.py").write_text(
        "import importlib.util\nimportlib.util.spec_from_file_location('x', 'x.py')\n"
    )
    checker.SRC = tmp_path
    problems = "\n".join(checker.check())
    assert "deeprepo.base.a:2 imports deeprepo.run.b: base → run goes up to" in problems
    assert "file circle: deeprepo.run.b → deeprepo.run.c → deeprepo.run.b" in problems
    assert "deeprepo.sandbox.d:2 loads a module by path" in problems


@pytest.mark.e2e
def test_the_core_runs_an_analysis_without_importing_the_research_stack(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("import pickle\n\ndef load(b):\n    return pickle.loads(b)\n")
    code = f"""
import asyncio, sys
import deeprepo
assert {{m for m in sys.modules if m.startswith("deeprepo.")}} <= {{"deeprepo.base", "deeprepo.base.version"}}
handle = asyncio.run(deeprepo.analyze(deeprepo.AnalyzeOptions(
    {str(repo)!r}, out_dir=__import__("pathlib").Path({str(tmp_path / "out")!r}),
    sandbox="process", run_log=False, cache=False, env={{}})))
assert handle.result.complete and handle.result.findings, handle.result
research = sorted(m for m in sys.modules if m.startswith("deeprepo.rl"))
print("research:", research)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "research: []" in done.stdout
