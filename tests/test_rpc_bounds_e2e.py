"""Issue 7, items 3, 8, 10 and 11 end to end: one real ``deeprepo analyze`` run whose root
turns, served by the loopback server, flood the kernel's pipe, forge its messages, send an
oversized ``system=`` and patch the scaffold, then check that a fresh cell is reported as it
ran, and answer. The parent's peak memory is read from ``/proc/<pid>/status`` (VmHWM) while
it runs; the canary keys must appear in no request, file or output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, ROOT, loopback_analyze_args

from deeprepo.base.chat import Usage
from deeprepo.report.trajectory import read_trajectory
from deeprepo.testing.loopback import LoopbackServer, RecordedRequest, Reply

pytestmark = pytest.mark.e2e

SECRETS = {
    "OPENROUTER_API_KEY": "sk-or-v1-canary-9f2a-openrouter",
    "ANTHROPIC_API_KEY": "sk-ant-canary-9f2a-anthropic",
}
MAX_SUB_CALLS = 30
CELL_TIMEOUT = 4
OUTPUT_LIMIT = 8192
WORKER = "WORKER-REPLY"
FD = (  # the kernel's child -> parent pipe, as a cell finds it: its one write-only FIFO
    "import os, stat, sys, fcntl\n"
    "fd = next(f for f in range(3, 1024) if os.path.exists(f'/proc/self/fd/{f}')\n"
    "          and stat.S_ISFIFO(os.fstat(f).st_mode) and fcntl.fcntl(f, fcntl.F_GETFL) & 3 == 1)\n"
)
_SCRUBBED = ("API_KEY", "AUTH_TOKEN", "PROXY", "proxy", "DEEPREPO_")


def fenced(*blocks: str) -> str:
    return "".join(f"```python\n{b}\n```\n" for b in blocks)


TURNS: list[tuple[str, str]] = [
    (
        "patch-scaffold",
        fenced(
            "import builtins, json, sys\nbuiltins.print = lambda *a, **k: None\njson.dumps = lambda *a, **k: 'FORGED'\n"
            "g = llm_query.__globals__\ng['llm_batch'] = lambda ps, system=None: ['forged'] * len(ps)\n"
            "type(sys.stdout).write = lambda self, s: 0\ntype(codebase).__setitem__ = dict.__setitem__\n"
            "try:\n    llm_query.__code__ = (lambda p, system=None: 'forged').__code__\nexcept RuntimeError:\n    pass"
        ),
    ),
    (
        "fresh-cell",
        fenced(
            "import json\nprint(json.dumps([1]), llm_query('@@fresh@@'))\nadd_finding('wsgi.py', 2, 'bug', 'low', 'real')\n"
            "try:\n    codebase['wsgi.py'] = 'x'\nexcept TypeError:\n    print('read-only')"
        ),
    ),
    (
        "batch-2M",
        fenced(
            "res = llm_batch(['p%d' % i for i in range(2_000_000)])\n"
            "print(len(res), sum(not r.startswith('[llm error]') for r in res))"
        ),
    ),
    (
        "forged-unread",
        fenced(
            FD
            + 'line = b\'{"type":"llm","id":5,"prompts":[\' + b\',\'.join([b\'""\'] * 10_000) + b\']}\\n\'\n'
            "while True:\n    os.write(fd, line)"
        ),
    ),
    (
        "forged-containers",
        fenced(
            FD
            + 'line = b\'{"type":"llm","id":5,"prompts":[\' + b\'[],\' * 2_000_000 + b\'[]]}\\n\'\n'
            "for _ in range(10):\n    os.write(fd, line)\nprint('sent')"
        ),
    ),
    ("system-cap", fenced("print(llm_query('p', system='s' * 1_000_001)[:80])")),
    (
        "forged-result",
        fenced(
            FD
            + "import json, time\ncell = int(sys._getframe(0).f_code.co_filename.strip('<>').split('-')[1])\n"
            "f = {'file': 'wsgi.py', 'line': 3, 'kind': 'bug', 'severity': 'low', 'title': 'forged'}\n"
            "os.write(fd, json.dumps({'type': 'result', 'id': cell, 'output': 'O' * 3_000_000, 'error': None,\n"
            "  'answer': {'content': '', 'ready': False}, 'findings': [f] * 3000,\n"
            "  'user_vars': ['v' * 10**6] * 2}).encode() + b'\\n')\ntime.sleep(0.5)"
        ),
    ),
    ("huge-names", fenced("for i in range(200):\n    globals()['v%d_' % i + 'x' * 200_000] = i")),
    ("restart-note", fenced("import os\nos._exit(3)")),
    ("many-blocks", fenced(*["print('B' * 20_000)"] * 12)),
    (
        "surrogates",
        fenced(
            "import os\nprint('\\ud800', llm_query('\\udfff x')[:12])\n"
            "add_finding('wsgi.py', 1, 'bug', 'low', 'lone \\ud800 surrogate')\n"
            "os.write(1, b'\\xff\\xfe raw')"
        ),
    ),
    ("answer", fenced("set_answer('# Report\\n\\nThe pipe held.')")),
]


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    out: Path
    turns: dict[str, dict[str, Any]]
    requests: list[RecordedRequest]
    peak_kb: int


def _watch_peak(pid: int, peak: list[int], stop: threading.Event) -> None:
    while not stop.wait(0.05):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        m = re.search(r"VmHWM:\s+(\d+) kB", status)
        if m:
            peak[0] = max(peak[0], int(m.group(1)))


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    base = tmp_path_factory.mktemp("rpc")
    repo = base / "repo"
    shutil.copytree(EXAMPLE, repo)
    out = base / "run"

    def reply_fn(route: str, body: dict[str, Any]) -> Reply:
        if route != "anthropic":
            return Reply(WORKER, usage=Usage(input_tokens=100, output_tokens=10))
        turn = sum(1 for m in body["messages"] if m.get("role") == "user")
        return Reply(
            TURNS[min(turn, len(TURNS)) - 1][1], usage=Usage(input_tokens=1000, output_tokens=50)
        )

    with LoopbackServer(reply_fn=reply_fn, ttl_s=300.0) as srv:
        env = {k: v for k, v in os.environ.items() if not any(s in k for s in _SCRUBBED)}
        env |= SECRETS | {
            "HOME": str(base),
            "DEEPREPO_CACHE_DIR": str(base / "cache"),
            "NO_PROXY": "127.0.0.1,localhost",
            "COLUMNS": "200",
        }
        args = loopback_analyze_args(
            srv, out,
            *("--max-turns", str(len(TURNS) + 3), "--max-sub-calls", str(MAX_SUB_CALLS)),
            *("--cell-timeout", str(CELL_TIMEOUT)),
            repo=repo,
        )  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "deeprepo", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        peak = [0]
        stop = threading.Event()
        watcher = threading.Thread(target=_watch_peak, args=(proc.pid, peak, stop), daemon=True)
        watcher.start()
        try:
            stdout, stderr = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        stop.set()
        watcher.join()
        requests = srv.requests
    rows = [r for r in read_trajectory(out / "trajectory.jsonl") if r["type"] == "turn"]
    turns = {name: rows[i] for i, (name, _) in enumerate(TURNS) if i < len(rows)}
    yield Outcome(proc.returncode, stdout, stderr, out, turns, requests, peak[0])


def test_the_run_answers_and_writes_its_report(outcome: Outcome) -> None:
    assert "Traceback" not in outcome.stderr, outcome.stderr
    m = json.loads((outcome.out / "metrics.json").read_text())
    assert m["stop_reason"] == "answer_ready", m
    assert "The pipe held." in (outcome.out / "report.md").read_text()
    assert len(outcome.turns) == len(TURNS)


def test_parent_peak_memory_stays_under_800_mb(outcome: Outcome) -> None:
    print(f"deeprepo analyze peak RSS under the floods: {outcome.peak_kb / 1024:.0f} MB")
    assert 0 < outcome.peak_kb < 800 * 1024, outcome.peak_kb


def test_a_two_million_batch_ends_with_a_clear_error(outcome: Outcome) -> None:
    t = outcome.turns["batch-2M"]
    assert t["error"] is None
    lines = t["output"].splitlines()
    assert lines[0].startswith("[deeprepo] llm_batch: 1,999,9") and "--max-sub-calls" in lines[0]
    total, answered = map(int, lines[1].split())
    assert total == 2_000_000 and 0 < answered <= MAX_SUB_CALLS
    sub_requests = [r for r in outcome.requests if r.route == "openai"]
    assert len(sub_requests) == MAX_SUB_CALLS


def test_forged_floods_end_the_cell_not_the_run(outcome: Outcome) -> None:
    t = outcome.turns["forged-unread"]
    assert t["error"] == "timeout" and "A fresh kernel was started" in t["output"]
    assert "were refused without being sent" in t["output"]
    t = outcome.turns["forged-containers"]
    assert t["output"].startswith("sent") and "ignored 10 malformed message(s)" in t["output"]


def test_system_is_capped_like_prompts(outcome: Outcome) -> None:
    t = outcome.turns["system-cap"]
    assert t["output"].startswith("[llm error] system has 1,000,001 chars, over the 1,000,000-char")
    assert all(len(json.dumps(r.body)) < 200_000 for r in outcome.requests if r.route == "openai")


def test_a_forged_result_and_a_restart_note_are_bounded(outcome: Outcome) -> None:
    t = outcome.turns["forged-result"]
    assert len(t["output"]) < OUTPUT_LIMIT + 500 and "chars cut" in t["output"]
    assert t["findings_added"] == 2000  # the per-cell cap; the other 1,000 are counted as cut
    t = outcome.turns["restart-note"]
    assert "A fresh kernel was started" in t["output"] and len(t["output"]) < 4000
    assert re.search(r"x and \d{3} more\)", t["output"])  # 30 names shown, cut to 80 chars


def test_one_turn_adds_at_most_its_output_cap(outcome: Outcome) -> None:
    t = outcome.turns["many-blocks"]
    assert len(t["output"]) <= 4 * OUTPUT_LIMIT + 200 and "chars cut" in t["output"]
    root = [r for r in outcome.requests if r.route == "anthropic"]
    # Every request resends the conversation: none grew past a few turns' worth of caps.
    assert max(len(json.dumps(r.body)) for r in root) < 200_000


def test_a_patched_scaffold_does_not_rewrite_the_next_cell(outcome: Outcome) -> None:
    patched = outcome.turns["patch-scaffold"]["output"]
    assert patched.startswith("[deeprepo] this cell changed kernel internals (")
    t = outcome.turns["fresh-cell"]
    assert t["output"] == f"[1] {WORKER}\nread-only", t["output"]
    assert t["findings_added"] == 1 and t["sub_calls"] == 1
    fresh = [
        r for r in outcome.requests if r.route == "openai" and "@@fresh@@" in json.dumps(r.body)
    ]
    assert len(fresh) == 1


def test_lone_surrogates_and_raw_bytes_pass_as_text(outcome: Outcome) -> None:
    t = outcome.turns["surrogates"]
    assert t["error"] is None and t["findings_added"] == 1, t["output"]
    # The lone surrogate became "?" at the kernel's boundary (the run log is UTF-8).
    assert "\n? [llm error]" in t["output"] and "raw" in t["output"], t["output"]
    assert "\ud800" not in json.dumps(t, ensure_ascii=False)


def test_no_secret_reaches_an_output_a_file_or_a_request(outcome: Outcome) -> None:
    secrets = list(SECRETS.values())
    for req in outcome.requests:
        assert not [s for s in secrets if s in json.dumps(req.body)]
    for path in outcome.out.iterdir():
        assert not [s for s in secrets if s in path.read_text(errors="replace")], path
    assert not [s for s in secrets if s in outcome.stdout + outcome.stderr]
