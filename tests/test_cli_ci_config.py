"""A scanner people put in CI, through the CLI: a planted finding fails the gate, a
``# deeprepo: ignore`` comment suppresses it (counted), ``--since`` reports only what the last
commit added, a repository's own configuration shapes the audit and nothing else, the user's
configuration sits between the command line and the repository's, and ``baseline`` is the
deprecated name of ``single-call``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from clihelp import ROOT, run_cli

from deeprepo.builtin.analyzers.semgrep import semgrep_available
from deeprepo.cli import exits
from deeprepo.testing.loopback import LoopbackServer

pytestmark = pytest.mark.e2e

SAFE = "import subprocess\n\n\ndef listing():\n    return subprocess.run(['ls'])\n"
PLANTED = SAFE + "\n\ndef run(cmd):\n    subprocess.call(cmd, shell=True)\n"
PLANTED_LINE = 9
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
# No key turns a run paid (decision 65); they are set so a refused key would have spent.
ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-fake",
    "OPENAI_API_KEY": "sk-fake",
    "DEEPREPO_NO_LOG": "1",
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )


def _commit(repo: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (repo / name).write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A git repository whose last commit planted a command injection in app.py."""
    root = tmp_path / "proj"
    root.mkdir()
    _git(root, "init", "-q")
    _commit(root, {"app.py": SAFE}, "safe")
    _commit(root, {"app.py": PLANTED}, "planted")
    return root


def _analyze(
    repo: Path, out: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    config_home = out.parent / "no-user-config"  # a user's own config never leaks in
    return run_cli(
        "analyze",
        ".",
        "--out",
        str(out),
        *args,
        cwd=repo,
        env={**ENV, "XDG_CONFIG_HOME": str(config_home), **(env or {})},
    )


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _valid_sarif(path: Path) -> Any:
    """The SARIF log at ``path``, checked against the OASIS 2.1.0 schema."""
    log = _json(path)
    schema = _json(Path(__file__).parent / "data" / "sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    return log


def test_a_planted_high_finding_fails_the_gate(repo: Path, tmp_path: Path) -> None:
    proc = _analyze(repo, tmp_path / "run", "--fail-on", "high")
    assert proc.returncode == exits.FINDINGS, proc.stderr
    assert f"app.py:{PLANTED_LINE}" in proc.stdout


def test_an_ignore_comment_passes_the_gate_and_is_counted(repo: Path, tmp_path: Path) -> None:
    app = repo / "app.py"
    app.write_text(
        PLANTED.replace("shell=True)\n", "shell=True)  # deeprepo: ignore[CWE-78] reviewed\n"),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    proc = _analyze(repo, out, "--fail-on", "high")
    assert proc.returncode == exits.OK, proc.stdout + proc.stderr
    assert "1 suppressed in the source" in proc.stdout
    assert "1 suppressed in the source" in (out / "report.md").read_text(encoding="utf-8")
    metrics = _json(out / "metrics.json")
    assert metrics["findings_suppressed"] == 1
    [aside] = metrics["set_aside"]
    assert (aside["file"], aside["start_line"], aside["cwe"]) == ("app.py", PLANTED_LINE, "CWE-78")
    assert aside["reason"] == "reviewed"
    assert all(f["start_line"] != PLANTED_LINE for f in _json(out / "findings.json"))
    [result] = [
        r
        for r in _valid_sarif(out / "findings.sarif")["runs"][0]["results"]
        if r["locations"][0]["physicalLocation"]["region"]["startLine"] == PLANTED_LINE
    ]
    assert result["suppressions"] == [
        {"kind": "inSource", "status": "accepted", "justification": "reviewed"}
    ]


def test_since_reports_only_what_the_last_commit_added(repo: Path, tmp_path: Path) -> None:
    # an older finding, present before the last commit, in another file
    _git(repo, "reset", "-q", "--hard", "HEAD~1")
    _commit(repo, {"old.py": "import os\n\n\ndef old(cmd):\n    os.system(cmd)\n"}, "old")
    _commit(repo, {"app.py": PLANTED}, "planted")
    everything = _analyze(repo, tmp_path / "all")
    assert "old.py:5" in everything.stdout and f"app.py:{PLANTED_LINE}" in everything.stdout
    out = tmp_path / "since"
    proc = _analyze(repo, out, "--since", "HEAD~1", "--fail-on", "high")
    assert proc.returncode == exits.FINDINGS, proc.stderr
    reported = [(f["file"], f["start_line"]) for f in _json(out / "findings.json")]
    assert reported == [("app.py", PLANTED_LINE)]
    metrics = _json(out / "metrics.json")
    assert metrics["findings_baselined"] == 1
    assert metrics["baseline"] == "git revision HEAD~1"
    assert "1 already in the baseline (git revision HEAD~1)" in proc.stdout
    states = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r["baselineState"]
        for r in _valid_sarif(out / "findings.sarif")["runs"][0]["results"]
    }
    assert states == {"app.py": "new", "old.py": "unchanged"}
    # the SARIF file of that run is a baseline too: nothing is new against it
    again = _analyze(repo, tmp_path / "again", "--baseline", str(out / "findings.sarif"))
    assert again.returncode == exits.OK and "findings 0" in again.stdout


def test_a_repository_config_cannot_choose_models_endpoints_sandbox_or_outputs(
    repo: Path, tmp_path: Path
) -> None:
    with LoopbackServer(ttl_s=120.0) as server:
        (repo / ".deeprepo.toml").write_text(
            f'root = "anthropic/test-root"\n'
            f'root-base-url = "{server.anthropic_base_url}"\n'
            f'sandbox = "process"\n'
            f'out = "{tmp_path / "leak"}"\n'
            f"max-cost = 50.0\n"
            f'exclude = ["vendor/"]\n'
            f'fail-on = "high"\n',
            encoding="utf-8",
        )
        (repo / "pyproject.toml").write_text(
            "[tool.deeprepo]\n"
            f'sub = "openrouter/test/sub"\n'
            f'sub-base-url = "{server.openai_base_url}"\n'
            f'cache-dir = "{tmp_path / "cache"}"\n'
            "honor-nosec = true\n",
            encoding="utf-8",
        )
        (repo / "vendor").mkdir()
        (repo / "vendor" / "lib.py").write_text("import os\nos.system(input())\n")
        out = tmp_path / "run"
        proc = _analyze(repo, out)
        assert server.requests == []  # no request reached the endpoints the repository named
    # fail-on from the repository's file applies: it shapes the audit
    assert proc.returncode == exits.FINDINGS, proc.stdout + proc.stderr
    refused = [line for line in proc.stderr.splitlines() if "refused" in line]
    assert len(refused) == 2
    # pyproject.toml first: .deeprepo.toml is read last and wins a key both set
    assert "pyproject.toml [tool.deeprepo]: refused sub, sub-base-url, cache-dir" in refused[0]
    assert ".deeprepo.toml: refused root, root-base-url, sandbox, out, max-cost" in refused[1]
    assert "unknown key 'honor-nosec' ignored; did you mean 'honour-nosec'?" in proc.stderr
    assert proc.stdout.startswith("root scripted/expert · sub static · offline")
    assert not (tmp_path / "leak").exists() and not (tmp_path / "cache").exists()
    metrics = _json(out / "metrics.json")
    assert metrics["offline"] and metrics["sandbox"] != "process"
    assert "vendor/lib.py" not in metrics["covered_paths"]
    assert any("refused root" in note for note in metrics["notes"])


def test_the_command_line_beats_the_user_config_beats_the_repository(
    repo: Path, tmp_path: Path
) -> None:
    (repo / ".deeprepo.toml").write_text('fail-on = "critical"\n', encoding="utf-8")
    config_home = tmp_path / "config"
    (config_home / "deeprepo").mkdir(parents=True)
    (config_home / "deeprepo" / "config.toml").write_text('fail-on = "high"\n')
    env = {"XDG_CONFIG_HOME": str(config_home)}
    assert _analyze(repo, tmp_path / "a", env=env).returncode == exits.FINDINGS
    assert _analyze(repo, tmp_path / "b", "--fail-on", "critical", env=env).returncode == 0
    assert _analyze(repo, tmp_path / "c").returncode == exits.OK  # the repository's: critical


def test_honour_nosec_is_an_option(repo: Path, tmp_path: Path) -> None:
    (repo / "app.py").write_text(PLANTED.replace("shell=True)\n", "shell=True)  # nosec\n"))
    assert _analyze(repo, tmp_path / "a", "--fail-on", "high").returncode == exits.FINDINGS
    out = tmp_path / "b"
    proc = _analyze(repo, out, "--fail-on", "high", "--honour-nosec")
    assert proc.returncode == exits.OK, proc.stdout
    [aside] = _json(out / "metrics.json")["set_aside"]
    assert aside["by"] == "# nosec"


def test_baseline_is_the_deprecated_name_of_single_call(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    proc = run_cli(
        "baseline", str(tmp_path), "--model", "anthropic/claude-sonnet-4-5", "--no-log",
        env={"ANTHROPIC_API_KEY": ""},
    )  # fmt: skip
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("deprecated: `deeprepo baseline` is now `deeprepo single-call`")
    # the same command runs: here it stops on the missing key, naming this command's options
    assert "set ANTHROPIC_API_KEY, or point --base-url at a local server" in proc.stderr
    assert "--root" not in proc.stderr
    assert proc.returncode == exits.USAGE


def _pre_commit() -> str | None:
    return os.environ.get("DEEPREPO_PRE_COMMIT") or shutil.which("pre-commit")


@pytest.mark.skipif(
    _pre_commit() is None,
    reason="pre-commit is not installed (or name it: DEEPREPO_PRE_COMMIT=/path/to/pre-commit)",
)
def test_the_pre_commit_hook_blocks_a_commit_that_adds_a_high_finding(tmp_path: Path) -> None:
    # The published hook's own definition, run as `repo: local` on this checkout's deeprepo
    # (a `language: python` hook would install deeprepo from the index first).
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "deeprepo" and hook["pass_filenames"] is False
    program, args = hook["entry"].split(" ", 1)
    assert program == "deeprepo"
    local = {**hook, "entry": f"{sys.executable} -m deeprepo {args}", "language": "system"}
    project = tmp_path / "proj"
    project.mkdir()
    _git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        json.dumps({"repos": [{"repo": "local", "hooks": [local]}]})
    )
    (project / ".gitignore").write_text("deeprepo-runs/\n")
    env = {
        **os.environ,
        **GIT_ENV,
        **ENV,
        "PYTHONPATH": str(ROOT / "src"),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "XDG_CONFIG_HOME": str(tmp_path / "no-user-config"),
    }

    def commit(files: dict[str, str]) -> subprocess.CompletedProcess[str]:
        for name, text in files.items():
            (project / name).write_text(text, encoding="utf-8")
        subprocess.run(["git", "add", "-A"], cwd=project, env=env, check=True)
        return subprocess.run(
            ["git", "commit", "-q", "-m", "change"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    installed = subprocess.run(
        [str(_pre_commit()), "install"], cwd=project, env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    safe = commit({"app.py": SAFE})
    assert safe.returncode == 0, safe.stdout + safe.stderr
    blocked = commit({"app.py": PLANTED})
    assert blocked.returncode != 0
    assert "fail-on high: 1 finding(s) at or above high (exit code 4)" in blocked.stderr
    head = subprocess.run(
        ["git", "log", "--format=%s"], cwd=project, env=env, capture_output=True, text=True
    )
    assert head.stdout.splitlines() == ["change"]  # only the safe commit was made


def test_the_github_action_analyses_writes_sarif_and_reports_the_exit_code(
    repo: Path, tmp_path: Path
) -> None:
    # The composite action's own analyse step, run as a runner would run it.
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    steps = {step.get("name"): step for step in action["runs"]["steps"]}
    assert steps["Upload SARIF"]["uses"].startswith("github/codeql-action/upload-sarif@")
    assert "always()" in steps["Upload SARIF"]["if"]
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "deeprepo").write_text(f'#!/bin/sh\nexec {sys.executable} -m deeprepo "$@"\n')
    (shim / "deeprepo").chmod(0o755)
    outputs = tmp_path / "github-output"
    env = {
        **os.environ,
        **ENV,
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT / "src"),
        "XDG_CONFIG_HOME": str(tmp_path / "no-user-config"),
        "GITHUB_OUTPUT": str(outputs),
        "RUNNER_TEMP": str(tmp_path),
        "TARGET": ".",
        "FAIL_ON": "high",
        "SINCE": "",
        "BASELINE": "",
        "SARIF": "results.sarif",
    }
    proc = subprocess.run(
        ["bash", "-e", "-c", steps["Analyse"]["run"]],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr  # the step records the code; the gate step fails
    assert outputs.read_text().strip() == f"exit-code={exits.FINDINGS}"
    sarif = _json(repo / "results.sarif")
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]
    gate = subprocess.run(
        ["bash", "-e", "-c", steps["Gate"]["run"]],
        env={**env, "CODE": str(exits.FINDINGS)},
        capture_output=True,
        text=True,
    )
    assert gate.returncode == exits.FINDINGS


JS_NOSEMGREP = (
    "const express = require('express');\n"
    "const { exec } = require('child_process');\n"
    "const app = express();\n"
    "app.get('/x', (req, res) => {\n"
    "  exec(req.query.cmd); // nosemgrep\n"
    "  res.send('ok');\n"
    "});\n"
)


@pytest.mark.skipif(not semgrep_available(), reason="semgrep is not installed")
def test_a_nosemgrep_comment_hides_nothing_unless_honoured(tmp_path: Path) -> None:
    # semgrep itself honours `nosemgrep` unless told not to: the analyzer tells it not to
    root = tmp_path / "js"
    root.mkdir()
    (root / "app.js").write_text(JS_NOSEMGREP)
    plain = _analyze(root, tmp_path / "a", "--fail-on", "high")
    assert plain.returncode == exits.FINDINGS and "app.js:5" in plain.stdout
    out = tmp_path / "b"
    honoured = _analyze(root, out, "--fail-on", "high", "--honour-nosec")
    assert honoured.returncode == exits.OK, honoured.stdout
    [aside] = _json(out / "metrics.json")["set_aside"]
    assert (aside["file"], aside["start_line"], aside["by"]) == ("app.js", 5, "// nosemgrep")
