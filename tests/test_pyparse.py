"""Every parse of Python source in deeprepo's process holds one lock: ``ast.parse`` from two
threads at once can fail on CPython 3.11 (gh-106905), and the static worker analyses files in
threads while the episode parses import graphs."""

from __future__ import annotations

import ast
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from deeprepo.architecture.imports import python_imports
from deeprepo.base import pyparse
from deeprepo.builtin.analyzers import analyze_file
from deeprepo.builtin.analyzers.python import run_bandit

SOURCE = (
    "import os\nimport subprocess\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n"
)


def _held_elsewhere() -> bool:
    """Whether another thread holds the parse lock right now."""
    box: list[bool] = []

    def probe() -> None:
        got = pyparse.PARSE_LOCK.acquire(blocking=False)
        if got:
            pyparse.PARSE_LOCK.release()
        box.append(not got)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return box[0]


def test_every_parse_and_bandit_run_holds_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real_parse = ast.parse

    def spy(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_code.co_filename
        if "_pytest" not in caller:  # pytest rewrites modules imported on first use
            seen.append(_held_elsewhere())
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", spy)
    python_imports(SOURCE)
    analyze_file("app/run.py", SOURCE)
    found, _warnings = run_bandit(SOURCE)
    assert [f.cwe for f in found] == ["CWE-78"]
    # deeprepo's own parses and bandit's (inside its manager) all ran under the lock
    assert len(seen) >= 4 and all(seen), seen


def test_threads_parsing_at_once_never_fail() -> None:
    deep = "x = " + "(" * 80 + "1" + ")" * 80 + "\n"
    sources = [SOURCE + deep * n for n in range(1, 9)]

    def work(text: str) -> int:
        return sum(len(python_imports(text)) for _ in range(25))

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(work, sources * 4)) == [50] * 32
