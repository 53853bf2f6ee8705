"""Issue 18, engineer C: repository text read in deeprepo's own process, and the sandbox's
address families. Each test is an attack as its author would write it: the hostile
repository is built by hand here (never by deeprepo), and the run goes through the real
``deeprepo analyze`` command (the Typer app in this process, the real command path), or,
for the address families, through a real sandbox kernel in every mode that runs here.

- item 4: a line that makes detect-secrets cubic costs a bounded time, and a file past its
  budget is named as not analysed;
- item 5: unclosed JavaScript comments do not make the architecture pass quadratic;
  ``--timeout`` during the load stops the run (exit 3), SIGTERM stops it at once (130);
- item 6: deeply nested manifests and Python do not crash the run: named, not parsed;
- item 11: ``socket`` and ``socketpair`` outside AF_UNIX/AF_INET/AF_INET6 are refused.

Beyond the items: a baseline model's reply nested past ``json``'s recursion.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from clihelp import run_cli

from deeprepo.sandbox import seccomp
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.harden import landlock_abi
from deeprepo.sandbox.isolation import bwrap_problem
from deeprepo.sandbox.kernel import Kernel
from deeprepo.testing.loopback import LoopbackServer

try:
    seccomp.filter_bpf()
    SECCOMP: str | None = None
except seccomp.SeccompUnavailable as exc:
    SECCOMP = str(exc)
BWRAP = bwrap_problem()

# ---------------------------------------------------------------- item 11: address families

# Families an attacker reaches past the network namespace: the hypervisor (vsock), the
# kernel's routing and audit (netlink), raw frames (packet), crypto (alg), IPsec keys
# (key), radio stacks, and the ones Linux has not numbered yet.
HOSTILE_FAMILIES = {
    "AF_UNSPEC": 0,
    "AF_AX25": 3,
    "AF_APPLETALK": 5,
    "AF_X25": 9,
    "AF_KEY": 15,
    "AF_NETLINK": 16,
    "AF_PACKET": 17,
    "AF_RDS": 21,
    "AF_CAN": 29,
    "AF_TIPC": 30,
    "AF_BLUETOOTH": 31,
    "AF_ALG": 38,
    "AF_NFC": 39,
    "AF_VSOCK": 40,
    "AF_XDP": 44,
    "AF_MCTP": 45,
    "AF_FUTURE": 63,
    "AF_HUGE": 4096,
    # AF_VSOCK with the upper 32 bits set: the kernel reads an int and would see 40.
    "AF_VSOCK_HIGH_BITS": (1 << 32) | 40,
}
_NEEDED = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}

# Raw system calls, so that neither Python's socket module nor libc changes what the
# filter sees; for each family every socket type, and socketpair.
FAMILY_PROBE = (
    "import ctypes, errno, os, platform\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "NR = {'x86_64': (41, 53), 'aarch64': (198, 199)}[platform.machine()]\n"
    "def call(nr, fam, typ):\n"
    "    pair = (ctypes.c_int * 2)()\n"
    "    args = [ctypes.c_long(nr), ctypes.c_long(fam), ctypes.c_long(typ), ctypes.c_long(0)]\n"
    "    if nr == NR[1]:\n"
    "        args.append(pair)\n"
    "    r = libc.syscall(*args)\n"
    "    if r >= 0:\n"
    "        for fd in ([r] if nr == NR[0] else list(pair)):\n"
    "            os.close(fd)\n"
    "        return 'ok'\n"
    "    return errno.errorcode.get(ctypes.get_errno(), '?')\n"
    "def probe(fam):\n"
    "    got = {call(nr, fam, typ) for nr in NR for typ in (1, 2, 3, 5)}\n"
    "    return 'ok' if 'ok' in got else '|'.join(sorted(got))\n"
    "FAMS = %r\n"
    "print(' '.join(f'{name}={probe(fam)}' for name, fam in FAMS.items()))\n"
)


def _probe_cell() -> str:
    return FAMILY_PROBE % ({**HOSTILE_FAMILIES, **_NEEDED},)


def _modes() -> list[Any]:
    out = []
    for mode in ("bwrap", "process"):
        why = None
        if SECCOMP is not None:
            why = f"needs libseccomp: {SECCOMP}"
        elif BWRAP is not None and mode == "bwrap":
            why = f"needs bwrap: {BWRAP}"
        elif mode == "process" and os.geteuid() == 0 and not landlock_abi():
            why = "process mode as root needs Landlock"
        elif platform.machine() not in ("x86_64", "aarch64"):
            why = "the probe knows x86-64 and arm64 system call numbers"
        out.append(pytest.param(mode, marks=pytest.mark.skipif(why is not None, reason=why or "")))
    return out


async def _answer(batch: list[str], system: str | None) -> list[str]:
    return ["ok"] * len(batch)


@pytest.fixture(params=_modes())
async def sandboxed(request: pytest.FixtureRequest) -> AsyncIterator[Kernel]:
    config = SandboxConfig(mode=request.param, cell_timeout_s=60)
    payload: dict[str, Any] = {"codebase": {"a.py": "x = 1\n"}, "file_tree": "a.py", "metadata": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # process mode says it is weaker
        k = await Kernel.start(payload, _answer, config)
    async with k:
        yield k


@pytest.mark.e2e
async def test_11_vsock_netlink_packet_alg_key_and_unknown_families_are_refused(
    sandboxed: Kernel,
) -> None:
    r = await sandboxed.exec(_probe_cell())
    assert r.error is None, r.output
    got = dict(kv.split("=") for kv in r.output.split())
    for name in HOSTILE_FAMILIES:
        assert got[name] == "EAFNOSUPPORT", (name, got)
    for name in _NEEDED:
        assert got[name] == "ok", (name, got)
    # The kernel's normal work: unix socket pairs, subprocesses, the RPC to the parent.
    r = await sandboxed.exec(
        "import subprocess, socket\n"
        "a, b = socket.socketpair()\na.send(b'x')\n"
        "out = subprocess.run(['sh', '-c', 'echo sub'], capture_output=True, text=True).stdout\n"
        "print(b.recv(1), out.strip(), llm_query('ping'))"
    )
    assert r.output == "b'x' sub ok\n", r.output


@pytest.mark.skipif(platform.system() != "Linux", reason="netlink is Linux's")
def test_11_the_probe_would_see_the_families_without_the_filter() -> None:
    """Outside the sandbox the same probe opens netlink: what refuses it inside is the filter."""
    ns: dict[str, Any] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(FAMILY_PROBE % ({"AF_NETLINK": int(socket.AF_NETLINK), "AF_UNIX": 1},), ns)
    got = dict(kv.split("=") for kv in out.getvalue().split())
    assert got == {"AF_NETLINK": "ok", "AF_UNIX": "ok"}, got


# ---------------------------------------------------------------- items 4, 5, 6: the CLI

OFFLINE = ("--root", "scripted/expert", "--sub", "static", "--no-cache")


def _analyze(repo: Path, out: Path, *extra: str, timeout: float = 240) -> Any:
    """``deeprepo analyze`` in a child process, offline, with its data home under ``out``.

    ``timeout`` is only the bound a hang would reach (the attacks this file contains ran
    for tens of minutes before the fix)."""
    env = {
        "HOME": str(out.parent / "home"),
        "XDG_DATA_HOME": str(out.parent / "data"),
        "XDG_CACHE_HOME": str(out.parent / "cache"),
        "ANTHROPIC_API_KEY": "",
        "OPENROUTER_API_KEY": "",
        "OPENAI_API_KEY": "",
    }
    return run_cli(
        "analyze", str(repo), "--out", str(out), *OFFLINE, *extra, env=env, timeout=timeout
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


REAL_SECRET = 'DB_PASSWORD = "Zx9-hunter2-Qm7-prod"\n'
SLOW_LINE = "AKIA" + "4" * 990 + "x\n"


@pytest.mark.e2e
def test_04_lines_built_to_make_detect_secrets_cubic_cost_seconds(tmp_path: Path) -> None:
    repo = _write(
        tmp_path / "repo",
        {
            # password + 2,000 spaces + x: 25 s of CPU each before the fix (cubic).
            # Not Python (bandit would rightly call the file not analysed): a config file
            # detect-secrets reads line by line, the real secret in a Python file beside it.
            "settings.py": REAL_SECRET,
            "settings.cfg": "".join(
                [
                    "password" + " " * 2000 + "x\n",
                    "ibm_cloud_iam_key" + " \t" * 1500 + "x\n",
                    "secret_key" + " " * 3000 + ":" + " " * 3000 + "'y'\n",
                    "x = 1  # " + "password " * 400 + "\n",
                ]
            ),
            # The same line in a YAML file and in a minified line of JavaScript.
            "deploy.yml": "token:" + " " * 5000 + "abc\n",
            "app.min.js": "var a=1;" + ("password" + " " * 900 + "=") * 50 + "\n",
        },
    )
    r = _analyze(repo, tmp_path / "out", "--timeout", "120")
    assert r.returncode == 0, r.stdout + r.stderr
    findings = json.loads((tmp_path / "out" / "findings.json").read_text())
    # Normal code keeps its finding: the bound changes nothing there.
    assert any(f["file"] == "settings.py" and f["start_line"] == 1 for f in findings), findings


@pytest.mark.e2e
def test_04_a_file_past_the_secrets_budget_is_named_and_not_audited(tmp_path: Path) -> None:
    # The slowest line found once the input is bounded (AKIA + 990 digits: ~0.1 s a line);
    # 900 of them are two minutes of scan, and the budget is lowered to 0.3 s for the test.
    repo = _write(tmp_path / "repo", {"slow.py": SLOW_LINE * 900, "ok.py": REAL_SECRET})
    env_budget = {"DEEPREPO_SECRETS_BUDGET_S": "0.3"}
    r = run_cli(
        "analyze", str(repo), "--out", str(tmp_path / "out"), *OFFLINE,
        env={**env_budget, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "d"),
             "ANTHROPIC_API_KEY": "", "OPENROUTER_API_KEY": "", "OPENAI_API_KEY": ""},
        timeout=240,
    )  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    console = " ".join(r.stdout.split())
    assert "Not analysed (1, by detect-secrets" in console and "slow.py" in console, r.stdout
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert [(g["path"], g["tool"]) for g in metrics["not_analysed"]] == [
        ("slow.py", "detect-secrets")
    ], metrics["not_analysed"]
    assert "budget" in metrics["not_analysed"][0]["reason"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "slow.py" in report and "budget" in report
    findings = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert any(f["file"] == "ok.py" for f in findings), findings


@pytest.mark.e2e
def test_05_unclosed_js_comments_and_tsconfig_load_in_one_pass(tmp_path: Path) -> None:
    # Two near-megabyte files of `/*a` (still loading after 40 minutes before the fix), a
    # tsconfig of the same, and Python import lines built to rescan the file.
    big = "import x from './b'\n" + "/*a" * 300_000 + "\n"
    repo = _write(
        tmp_path / "repo",
        {
            "web/a.js": big,
            "web/b.ts": "export const b = 1\n" + "/*a" * 300_000 + "\n",
            "tsconfig.json": "{" + "/*a" * 300_000,
            "pkg/mod.py": "from a import (\n" * 40_000 + "import a \\\n" * 40_000,
            "pkg/tc.py": "if TYPE_CHECKING:\n import a\n" * 20_000 + "import os\n" * 20_000,
        },
    )
    r = _analyze(repo, tmp_path / "out", "--timeout", "200", "--max-file-size", "2000000")
    assert r.returncode in (0, 3), r.stdout + r.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert "architecture" in metrics and (tmp_path / "out" / "report.md").is_file()


@pytest.mark.e2e
def test_06_deeply_nested_manifests_and_python_are_named_not_parsed(tmp_path: Path) -> None:
    repo = _write(
        tmp_path / "repo",
        {
            "package.json": '{"a":' * 100_000 + "1" + "}" * 100_000,
            "pyproject.toml": "a = " + "[" * 100_000 + "]" * 100_000 + "\n",
            "web/package.json": "[" * 200_000,
            "tsconfig.json": "[" * 200_000 + "]" * 200_000,
            "deep_attr.py": "import os\nx = a" + ".b" * 3000 + "\n",
            "deep_unary.py": "import os\nx = " + "-" * 100_000 + "1\n",
            "deep_sum.py": "import os\nx = 1" + "+1" * 5000 + "\n",
            "deep_import.py": "from a import (" + "(" * 100_000 + "\n",
            "ok.py": "import os\nos.system(input())\n",
        },
    )
    r = _analyze(repo, tmp_path / "out")
    # Files bandit could not parse are not audited: the run is incomplete and names them.
    assert r.returncode == 3, r.stdout + r.stderr
    console = " ".join(r.stdout.split())
    for name in ("package.json", "pyproject.toml"):
        assert f"{name}: not parsed for entry points (nested too deep" in console, r.stdout
    assert "Not analysed" in console and "by bandit" in console, r.stdout
    assert "deep_sum.py" in console, r.stdout
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert any(n.startswith("package.json: not parsed") for n in metrics["notes"]), metrics
    report = (tmp_path / "out" / "report.md").read_text()
    assert "pyproject.toml: not parsed for entry points" in report
    findings = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert any(f["file"] == "ok.py" for f in findings), findings


def _slow_load_repo(root: Path, files: int) -> Path:
    """Source files of bare ``import`` lines: linear to load now, yet several seconds of
    architecture pass for ``files`` of them, so that a signal or a deadline lands inside."""
    return _write(root, {f"web/m{i % 10}/f{i}.js": "import \n" * 10_000 for i in range(files)})


@pytest.mark.e2e
def test_05_timeout_during_the_load_stops_the_run_exit_3(tmp_path: Path) -> None:
    repo = _slow_load_repo(tmp_path / "repo", 300)
    r = _analyze(repo, tmp_path / "out", "--timeout", "0.5")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "loading the repository ran past --timeout 0.5s" in " ".join(r.stderr.split())
    assert not (tmp_path / "out" / "report.md").exists()


@pytest.mark.e2e
def test_05_sigterm_during_the_architecture_pass_stops_the_run_at_once(tmp_path: Path) -> None:
    repo = _slow_load_repo(tmp_path / "repo", 300)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "ANTHROPIC_API_KEY": "",
        "OPENROUTER_API_KEY": "",
        "OPENAI_API_KEY": "",
    }
    cmd = [sys.executable, "-m", "deeprepo", "analyze", str(repo), "--out", str(out), *OFFLINE]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The run folder is made once the walk is done, just before the architecture pass.
        while not out.exists() and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)  # only a hang reaches this bound
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    # Stopped inside the load: the episode never began (no trajectory, no report).
    assert not (out / "trajectory.jsonl").exists() and not (out / "report.md").exists()


@pytest.mark.e2e
def test_04_timeout_while_detect_secrets_grinds_ends_the_run_at_its_timeout(
    tmp_path: Path,
) -> None:
    # 3,000 slow lines: ~5 minutes of detect-secrets, over three minutes of budget; the
    # run's --timeout must end it, not the budget (the 120 s bound below is only a hang's).
    repo = _write(tmp_path / "repo", {"grind.py": SLOW_LINE * 3000, "ok.py": REAL_SECRET})
    r = _analyze(
        repo, tmp_path / "out", "--timeout", "8", "--max-file-size", "5000000", timeout=120
    )
    assert r.returncode == 3, r.stdout + r.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert "grind.py" in metrics["unaudited_paths"], metrics


@pytest.mark.e2e
def test_06_a_baseline_reply_talked_into_deep_nesting_is_no_crash(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    # Beyond the item: the repository can ask the baseline model to answer `[[[[…`; the reply
    # is parsed in deeprepo's process and must read as "no findings", not a RecursionError.
    repo = _write(tmp_path / "repo", {"app.py": "import os\nos.system(input())\n"})
    loopback.enqueue_openai("```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```\n")
    out = tmp_path / "run"
    proc = run_cli(
        "baseline", str(repo), "--model", "openai/test-big", "--base-url",
        loopback.openai_base_url, "--context-tokens", "20000", "--out", str(out),
        env={"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "findings.json").read_text()) == []


def test_04_root_code_cannot_stall_the_static_worker_with_unclosed_file_tags() -> None:
    # Beyond the item: the prompt is root code's; 100,000 unclosed tags took hours before.
    from deeprepo.builtin.static import FREE_FORM_NOTE, StaticWorker

    hostile = '<file path="a.py">\n' * 100_000
    assert StaticWorker().answer(hostile).startswith(FREE_FORM_NOTE)
    block = hostile + '<file path="b.py">\n' + SLOW_LINE + "</file>"
    reply = json.loads(StaticWorker().answer(block))
    assert reply["findings"] == [] or all(f["file"] == "a.py" for f in reply["findings"])
