"""The kernel's process isolation end to end (issue 7 items 1, 4, 5, 6, 12): real
``deeprepo analyze`` runs whose root turns, served by the loopback server, attack the
sandbox's uid, sysctls, disk caps, seccomp filter and process tree; then ``kill -9`` of
deeprepo while a cell's double-forked daemon runs; then ``auto`` without bubblewrap.
Canary keys sit in the CLI's environment and must appear in no output and no request body.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import isolation_cells as iso
import pytest
from clihelp import EXAMPLE, ROOT, loopback_analyze_args, run_cli

from deeprepo.base.chat import Usage
from deeprepo.report.trajectory import read_trajectory
from deeprepo.sandbox import cgroup, seccomp
from deeprepo.sandbox.isolation import bwrap_problem
from deeprepo.testing.loopback import LoopbackServer, RecordedRequest, Reply

pytestmark = pytest.mark.e2e

BWRAP = bwrap_problem()
CGROUP = cgroup.problem()
try:
    seccomp.filter_bpf()
    SECCOMP: str | None = None
except seccomp.SeccompUnavailable as exc:
    SECCOMP = str(exc)
SECRETS = {
    "OPENROUTER_API_KEY": "sk-or-v1-canary-3b8f-isolation",
    "ANTHROPIC_API_KEY": "sk-ant-canary-3b8f-isolation",
}
USAGE = Usage(input_tokens=100, output_tokens=10)
MARK, KILL_MARK = "drleft3b8f", "drkill3b8f"
FINAL = "set_answer('# Report\\n\\nIsolation held.')"

needs_bwrap = pytest.mark.skipif(BWRAP is not None, reason=f"needs bwrap: {BWRAP}")

TURNS: list[str] = [
    iso.IDENTITY,
    iso.sysctl_write(),
    iso.fill(("/", "/dev", "/dev/shm", "/tmp"), 700, file_mb=32),
    iso.SYSCALLS,
    iso.daemon(MARK),
    iso.tree_memory(4, 900),
    FINAL,
]


def fenced(code: str) -> str:
    return f"Next.\n\n```python\n{code}\n```\n"


def cli_env(home: Path, base: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not any(s in k for s in ("API_KEY", "AUTH_TOKEN", "PROXY", "proxy", "DEEPREPO_"))
    }
    return (
        env
        | SECRETS
        | {
            "HOME": str(home),
            "DEEPREPO_CACHE_DIR": str(base / "cache"),
            "NO_PROXY": "127.0.0.1,localhost",
            "COLUMNS": "200",
        }
    )


def marked(marker: str) -> list[int]:
    """Live processes whose name, command line or environment carries ``marker``."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z":
                continue
            blobs = [
                Path(f"/proc/{entry}/{f}").read_bytes() for f in ("comm", "cmdline", "environ")
            ]
        except OSError:
            continue
        if any(needle in b for b in blobs):
            found.append(int(entry))
    return found


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    out: Path
    turns: list[dict[str, Any]]
    requests: list[RecordedRequest]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if BWRAP is not None:
        pytest.skip(f"needs bwrap: {BWRAP}")
    base = tmp_path_factory.mktemp("isolation")
    repo, home, out = base / "repo", base / "home", base / "run"
    shutil.copytree(EXAMPLE, repo)
    home.mkdir()

    def reply_fn(route: str, body: dict[str, Any]) -> Reply:
        if route != "anthropic":
            return Reply("WORKER", usage=USAGE)
        turn = sum(1 for m in body["messages"] if m.get("role") == "user")
        return Reply(fenced(TURNS[min(turn, len(TURNS)) - 1]), usage=USAGE)

    with LoopbackServer(reply_fn=reply_fn, ttl_s=300.0) as srv:
        args = loopback_analyze_args(
            srv, out, "--max-turns", str(len(TURNS) + 2), "--cell-timeout", "60", repo=repo
        )
        proc = subprocess.run(
            [sys.executable, "-m", "deeprepo", *args],
            cwd=ROOT,
            env=cli_env(home, base),
            capture_output=True,
            text=True,
            timeout=300,
        )
        requests = srv.requests
    turns = [r for r in read_trajectory(out / "trajectory.jsonl") if r["type"] == "turn"]
    yield Run(proc.returncode, proc.stdout, proc.stderr, out, turns, requests)


def _turn(run: Run, cell: str) -> dict[str, Any]:
    return run.turns[TURNS.index(cell)]


def test_the_run_completes_with_its_report(run: Run) -> None:
    # Exit 3 (incomplete): the attacking root answers without sending any file to a worker.
    assert run.returncode == 3, run.stderr
    m = json.loads((run.out / "metrics.json").read_text())
    assert m["stop_reason"] == "answer_ready" and m["sandbox"] == "bwrap"
    assert len(run.turns) == len(TURNS)
    assert "Isolation held." in (run.out / "report.md").read_text()


def test_cells_run_as_nobody_when_deeprepo_is_root(run: Run) -> None:
    ids = _turn(run, iso.IDENTITY)["output"].splitlines()[0].split()
    assert ids[0] == "uid" and "0" not in ids[1:4] and "0" not in ids[5:8]


def test_sysctls_stay_the_hosts(run: Run) -> None:
    out = _turn(run, iso.sysctl_write())["output"].split()
    assert len(out) == 3 and "wrote" not in out


def test_700_mb_fit_nowhere(run: Run) -> None:
    out = _turn(run, TURNS[2])["output"].splitlines()
    got = {line.split()[0]: int(line.split()[1]) for line in out if line.startswith("/")}
    assert got["/"] == 0 and got["/dev"] == 0
    assert got["/dev/shm"] <= 64 and got["/tmp"] <= 256  # the caps, not 700


@pytest.mark.skipif(SECCOMP is not None, reason=f"needs libseccomp: {SECCOMP}")
def test_the_seccomp_filter_holds(run: Run) -> None:
    res = dict(kv.split("=") for kv in _turn(run, iso.SYSCALLS)["output"].split())
    assert res["ptrace_attach_init"] == res["unshare_user"] == res["keyctl"] == "EPERM"
    assert res["bpf"] == res["io_uring_setup"] == res["mount"] == "EPERM"


def test_a_daemon_is_stopped_when_its_cell_ends(run: Run) -> None:
    out = _turn(run, iso.daemon(MARK))["output"]
    assert out.startswith("daemonized\n") and "stopped 2 process(es)" in out
    assert marked(MARK) == []


@pytest.mark.skipif(CGROUP is not None, reason=f"needs a cgroup: {CGROUP}")
def test_four_children_of_900_mb_do_not_all_fit_in_2_gb(run: Run) -> None:
    t = _turn(run, TURNS[5])
    if t["error"] is None:
        assert int(t["output"].splitlines()[0]) < 4, t["output"]
    else:  # the OOM killer chose the kernel itself: a fresh one took over
        assert "A fresh kernel was started" in t["output"]


def test_no_canary_in_any_output_or_request(run: Run) -> None:
    secrets = list(SECRETS.values())
    for req in run.requests:
        assert not [s for s in secrets if s in json.dumps(req.body)]
    for path in run.out.iterdir():
        assert not [s for s in secrets if s in path.read_text(errors="replace")], path
    assert not [s for s in secrets if s in run.stdout + run.stderr]


# ---------------------------------------------------------------- kill -9 of deeprepo


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("auto", marks=needs_bwrap),
        pytest.param(
            "process",
            marks=pytest.mark.skipif(
                CGROUP is not None, reason=f"process mode needs a cgroup for this: {CGROUP}"
            ),
        ),
    ],
)
def test_kill_9_of_deeprepo_leaves_no_sandbox_process(mode: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    marker = f"{KILL_MARK}{mode[0]}"
    # A daemon that double-forks, calls setsid, ignores SIGTERM and tries to ptrace init,
    # then the cell keeps running, so it is still there when deeprepo dies.
    cell = iso.daemon(marker) + "\nimport time\ntime.sleep(120)"

    def reply_fn(route: str, body: dict[str, Any]) -> Reply:
        return Reply(fenced(cell) if route == "anthropic" else "W", usage=USAGE)

    with LoopbackServer(reply_fn=reply_fn, ttl_s=300.0) as srv:
        args = loopback_analyze_args(
            srv, tmp_path / "run", "--sandbox", mode, "--cell-timeout", "300", repo=EXAMPLE
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "deeprepo", *args],
            cwd=ROOT,
            env=cli_env(home, tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 90
            while len(marked(marker)) < 2 and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
            assert len(marked(marker)) >= 2  # the daemon and its sleep are up
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            if proc.stderr:
                proc.stderr.close()
    deadline = time.monotonic() + 60  # a hang guard: they die with deeprepo, however loaded
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(marker) == []


# ---------------------------------------------------------------- auto without bubblewrap


def test_auto_without_bwrap_refuses_in_one_line(tmp_path: Path) -> None:
    # A PATH with python but without bwrap: the CLI must refuse before any model call.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    env = {"PATH": str(bindir), "ANTHROPIC_API_KEY": "x", "OPENROUTER_API_KEY": "y"}
    r = run_cli(
        "analyze", str(EXAMPLE), "--root", "anthropic/test-root",
        "--root-base-url", "http://127.0.0.1:9/", "--sub", "openrouter/test/sub",
        "--sub-base-url", "http://127.0.0.1:9/", "--out", str(tmp_path / "run"),
        env=env,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "install bubblewrap" in lines[0] and "--sandbox process" in lines[0]


def test_auto_without_bwrap_runs_the_builtin_offline_engine_in_process_mode(
    tmp_path: Path,
) -> None:
    # The scripted root is deeprepo's own program, not model-written code: without bwrap the
    # offline engine still runs (process isolation) and says so, instead of refusing.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    out = tmp_path / "run"
    r = run_cli("analyze", str(EXAMPLE), "--out", str(out), env={"PATH": str(bindir)})
    if r.returncode == 2 and "refusing --sandbox process as root" in r.stderr:
        pytest.skip("process mode is refused here (root without Landlock)")
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["sandbox"] == "process"
    assert any("bubblewrap is not available" in n for n in m["notes"]), m["notes"]
    assert "bubblewrap is not available" in r.stdout
