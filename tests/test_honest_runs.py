"""Honest runs through the real CLI: coverage that counts only answered audits, exit codes
that say how a run ended, fast failures against nothing, Ctrl-C with partial outputs, and
text from models and repositories shown as text."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelp import EXAMPLE, ROOT, loopback_analyze_args, run_cli, sigint_default

from deeprepo.testing.loopback import LoopbackServer

pytestmark = pytest.mark.e2e

N_FILES = 2600


def _write_repo(root: Path, n: int) -> Path:
    for i in range(n):
        d = root / f"pkg{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(
            f"import os\n\n\ndef f{i}(x):\n    return os.path.join(str(x), 'item_{i}')\n"
        )
    return root


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_repo(tmp_path_factory.mktemp("big") / "repo", N_FILES)


def _metrics(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "metrics.json").read_text())
    return data


def test_a_2600_file_repository_is_fully_audited_offline_by_default(
    big_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    proc = run_cli("analyze", str(big_repo), "--out", str(out), "--no-cache", timeout=300)
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    m = _metrics(out)
    assert m["complete"] is True and m["incomplete"] is False
    assert m["files_covered"] == m["coverable_files"] == N_FILES
    assert m["unaudited_paths"] == [] and m["sub_calls_refused"] == 0
    # Small files share prompts: far fewer worker calls than files, well within 2,000.
    assert 0 < int(str(m["sub_calls"])) <= N_FILES // 20
    assert f"audited {N_FILES} of {N_FILES} files" in proc.stdout
    assert "complete" in proc.stdout and "INCOMPLETE" not in proc.stdout
    print(f"\n2,600-file offline run: {wall:.1f} s wall, {m['sub_calls']} worker calls")


def test_a_lowered_sub_call_limit_makes_the_run_incomplete_everywhere(
    big_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = run_cli("analyze", str(big_repo), "--out", str(out), "--max-sub-calls", "5")
    assert proc.returncode == 3, proc.stderr
    m = _metrics(out)
    audited = int(str(m["files_covered"]))
    assert m["incomplete"] is True and m["complete"] is False
    assert 0 < audited < N_FILES and m["coverable_files"] == N_FILES
    assert len(m["unaudited_paths"]) == N_FILES - audited  # type: ignore[arg-type]
    # Refused prompts are not calls: exactly the limit was answered.
    assert m["sub_calls"] == 5 and int(str(m["sub_calls_refused"])) > 0
    sub = next(u for u in m["usage"] if u["role"] == "sub")  # type: ignore[attr-defined]
    assert sub["calls"] == 5
    reason = str(m["incomplete_reason"])
    assert "--max-sub-calls" in reason
    line = f"audited {audited} of {N_FILES} files: {reason}"
    assert "INCOMPLETE" in proc.stdout and " ".join(line.split()) in " ".join(proc.stdout.split())
    report = (out / "report.md").read_text()
    top = report.split("## Findings", 1)[0]
    assert "**Incomplete**" in top and f"audited {audited} of {N_FILES} files" in top
    assert "raise \\-\\-max-sub-calls" in top or "raise --max-sub-calls" in top


def test_connection_refused_fails_and_names_the_refusal(tmp_path: Path) -> None:
    # One quick retry, then no more (tests/test_honest_units.py): the wall time that gives is
    # benchmarks/bench_speed_targets.py's to measure.
    proc = run_cli(
        "analyze", str(EXAMPLE), "--out", str(tmp_path / "run"),
        "--root", "openai/x", "--root-base-url", "http://127.0.0.1:9/v1", "--sub", "static",
        env={"OPENAI_API_KEY": "test-key"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "connection refused at http://127.0.0.1:9/v1" in " ".join(proc.stdout.split())
    m = _metrics(tmp_path / "run")
    assert m["stop_reason"] == "error" and "connection refused" in str(m["stop_detail"])
    assert "Traceback" not in proc.stderr


def test_eval_against_nothing_exits_non_zero_with_the_first_error(tmp_path: Path) -> None:
    proc = run_cli(
        "eval", "--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1",
        "--generate", "small:seed=1", "-n", "2", "-r", "1", "-q", "--out", str(tmp_path / "ev"),
        env={"OPENAI_API_KEY": "test-key"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: every rollout (2) failed; first:")
    assert "connection refused" in last


def test_sigint_writes_partial_outputs_and_prints_the_resume_command(
    big_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", "analyze", str(big_repo), "--out", str(out),
         "--no-cache"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        start_new_session=True,  # its own process group, signalled as a terminal would
        preexec_fn=sigint_default,
    )  # fmt: skip
    assert proc.stderr is not None
    # The first progress line ends turn 1; turn 2 (the audit) is running when it comes.
    seen = [proc.stderr.readline() for _ in range(1)]
    while "turn 1/" not in seen[-1] and seen[-1] and len(seen) < 20:  # warnings may come first
        seen.append(proc.stderr.readline())
    assert "turn 1/" in seen[-1], seen
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)  # a hang guard, not a speed target
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    resume_line = [ln for ln in stderr.splitlines() if "--resume" in ln]
    assert resume_line == [
        f"interrupted: partial outputs in {out}; continue with: "
        f"{sys.executable} -m deeprepo analyze --resume {out}"
    ]
    m = _metrics(out)
    assert m["stop_reason"] == "interrupted" and m["incomplete"] is True
    assert "INTERRUPTED" in stdout
    assert "**Incomplete**" in (out / "report.md").read_text()
    assert json.loads((out / "findings.json").read_text()) == []
    assert "INTERRUPTED" in (out / "trajectory.html").read_text()  # the page of the cut run
    # ... and the printed command continues it to the end.
    done = run_cli("analyze", "--resume", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    assert _metrics(out)["complete"] is True


def test_sigterm_stops_a_background_run_as_ctrl_c_does(big_repo: Path, tmp_path: Path) -> None:
    # A job started with `&` by a non-interactive shell ignores SIGINT (POSIX): there
    # `kill` (SIGTERM) is how it is stopped, and it must still write what it has.
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", "analyze", str(big_repo), "--out", str(out),
         "--no-cache"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, COLUMNS="200"),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    assert proc.stderr is not None
    seen = [proc.stderr.readline()]
    while "turn 1/" not in seen[-1] and seen[-1] and len(seen) < 20:
        seen.append(proc.stderr.readline())
    assert "turn 1/" in seen[-1], seen
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # ignored, as the shell arranged
    time.sleep(0.5)
    assert proc.poll() is None
    proc.terminate()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    m = _metrics(out)
    assert m["stop_reason"] == "interrupted" and m["incomplete"] is True
    assert "SIGTERM" in m["stop_detail"]
    assert "--resume" in stderr


NASTY_TITLE = (
    "[/] closes [bold red]RED \x1b[2J\x1b]0;pwned\x07 back\rover \u202eevil| <script>x</script>"
)


def test_text_from_the_model_and_the_repository_is_shown_as_text(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "[bold red]x.py").write_text("import os\nprint(os.getcwd())\n")
    code = (
        "add_finding('app/[bold red]x.py', 1, 'x[/]', 'high', "
        + repr(NASTY_TITLE)
        + ", detail='line one\\nline two \\x1b[31m', fix='`rm -rf` | pipe')\n"
        + "set_answer('# Report\\n\\n<img src=x onerror=alert(1)> \\x1b[2J done')\n"
    )
    loopback.enqueue_anthropic(f"Here.\n\n```python\n{code}```\n")
    out = tmp_path / "run"
    proc = run_cli(
        *loopback_analyze_args(loopback, out, "--max-turns", "2", repo=repo),
        env={"ANTHROPIC_API_KEY": "test-key", "OPENROUTER_API_KEY": "test-key"},
    )
    assert proc.returncode == 3, proc.stderr  # answered, but nothing was audited
    assert "Traceback" not in proc.stderr
    shown = proc.stdout + proc.stderr
    for raw in ("\x1b", "\r", "\x07", "\u202e"):
        assert raw not in shown, repr(raw)
    assert "[/] closes [bold red]RED \\x1b[2J" in proc.stdout  # literally, not as markup
    assert "app/[bold red]x.py:1" in proc.stdout
    report = (out / "report.md").read_text()
    for raw in ("\x1b", "\r", "\x07", "\u202e", "<script>", "<img"):
        assert raw not in report, repr(raw)
    finding_line = next(ln for ln in report.splitlines() if "closes" in ln)
    assert "\\[/\\] closes \\[bold red\\]RED \\\\x1b\\[2J" in finding_line
    assert "evil\\|" in finding_line and "&lt;script&gt;" in finding_line
    assert "  - line one line two \\\\x1b\\[31m" in report  # one line, escape visible
    assert "`app/[bold red]x.py:1`" in report
    assert "&lt;img src=x onerror=alert(1)> \\x1b[2J done" in report
    findings = json.loads((out / "findings.json").read_text())
    assert findings[0]["title"] == NASTY_TITLE  # the data itself is kept exactly


def _scoped_repo(root: Path) -> Path:
    weak = "import hashlib\n\n\ndef digest(data):\n    return hashlib.md5(data).hexdigest()\n"
    deep = root / "src" / "a_rather_long_package_name" / "with_nested_modules_inside"
    deep.mkdir(parents=True)
    (deep / "hashing_helpers_module.py").write_text(weak)
    (root / "tests").mkdir()
    (root / "tests" / "test_hashing.py").write_text(weak)
    (root / "README.md").write_text("# Hashing\n")
    return root


def test_findings_outside_source_are_kept_apart_and_scopes_can_be_chosen(tmp_path: Path) -> None:
    repo = _scoped_repo(tmp_path / "repo")
    out = tmp_path / "run"
    env = dict(os.environ, COLUMNS="72")  # narrow: the title gives way, file:line never does
    proc = subprocess.run(
        [sys.executable, "-m", "deeprepo", "analyze", str(repo), "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    loc = "src/a_rather_long_package_name/with_nested_modules_inside/hashing_helpers_module.py:5"
    assert loc in proc.stdout
    assert "Other scopes (kept apart, not counted above): test 1" in " ".join(proc.stdout.split())
    m = _metrics(out)
    assert m["findings_by_scope"] == {"source": 1, "test": 1}
    assert m["findings_headline"] == 1 and m["coverable_files"] == 2  # README.md is docs
    report = (out / "report.md").read_text()
    assert report.count("hashing_helpers_module.py:5") == 1
    assert report.index("hashing_helpers_module.py:5") < report.index("## Findings in other scopes")
    assert report.index("tests/test_hashing.py:5") > report.index("## Findings in other scopes")

    out2 = tmp_path / "run2"
    proc = run_cli("analyze", str(repo), "--out", str(out2), "--exclude-scope", "test")
    assert proc.returncode == 0, proc.stderr
    m = _metrics(out2)
    assert m["coverable_files"] == 1 and m["audit_scopes"] == [
        "config", "example", "generated", "source", "vendored",
    ]  # fmt: skip
    assert m["findings_by_scope"] == {"source": 1}
