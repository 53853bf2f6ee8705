"""Attacks on what deeprepo writes and what its outputs show (issue 18, items 2, 7, 8, 10).

Each test is the attacker's move, built by hand: a run folder with links planted where
deeprepo writes, a repository whose file names forge markdown or terminal escapes, a root
that reports findings on paths outside the repository, a calls.jsonl built to blow up the
viewer's memory. Each then runs the real CLI (``python -m deeprepo`` in a subprocess) and
checks that the attack is contained and said out loud.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clihelp import ROOT, run_cli

pytestmark = pytest.mark.e2e

VICTIM_TEXT = "ssh-ed25519 AAAA-the-users-own-key user@host\n"


def _env(tmp_path: Path) -> dict[str, str]:
    """A private cache, data home and HOME: the test never touches the user's own."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }


def _victims(tmp_path: Path, names: list[str]) -> dict[str, Path]:
    """Files outside the run folder that a link planted in it points at."""
    folder = tmp_path / "victim"
    folder.mkdir(exist_ok=True)
    out = {}
    for name in names:
        path = folder / name.strip(".").replace("/", "_")
        path.write_text(VICTIM_TEXT)
        out[name] = path
    return out


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _finished_run(run: Path) -> None:
    """A run folder as a colleague would send it: a start, one turn, an end."""
    run.mkdir(parents=True)
    _jsonl(
        run / "trajectory.jsonl",
        [
            {"type": "start", "path": "repo", "root_model": "scripted/expert", "sub_model": "x"},
            {"type": "turn", "index": 1, "code": "print(1)", "output": "1", "reasoning": ""},
            {"type": "end", "stop_reason": "answer_ready"},
        ],
    )


def _resumable_run(run: Path, repo: Path, *, run_log: bool = False) -> None:
    """A run folder that stopped before its first turn, with the options of an offline run."""
    run.mkdir(parents=True)
    options = {
        "path": str(repo), "root": "scripted/expert", "sub": "static", "cache": False,
        "run_log": run_log, "out_dir": str(run), "sandbox": "auto",
    }  # fmt: skip
    # The attacker knows the repository, so the record carries its real fingerprint
    # (a record without one is refused before anything is written).
    from deeprepo.codebase.loader import load_codebase
    from deeprepo.run.analyze import codebase_fingerprint

    sha = codebase_fingerprint(load_codebase(str(repo)))
    _jsonl(
        run / "trajectory.jsonl",
        [{"type": "start", "path": str(repo), "root_model": "scripted/expert",
          "sub_model": "static", "options": options, "codebase_sha256": sha}],
    )  # fmt: skip


def _small_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "app.py").write_text("import os\n\n\ndef run(cmd):\n    os.system(cmd)\n")
    return path


def _assert_untouched(victims: dict[str, Path]) -> None:
    for name, path in victims.items():
        assert not path.is_symlink() and path.read_text() == VICTIM_TEXT, f"{name} wrote through"


# --- item 2: writes never follow a link planted in a run folder ------------------------


def test_view_never_writes_through_links_planted_at_tmp_and_final_names(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _finished_run(run)
    names = [".trajectory.html.tmp", "trajectory.html.tmp", "trajectory.html"]
    victims = _victims(tmp_path, names)
    for name, target in victims.items():
        (run / name).symlink_to(target)

    proc = run_cli("view", str(run), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stderr
    _assert_untouched(victims)
    page = run / "trajectory.html"
    assert not page.is_symlink() and "<html" in page.read_text()


def test_resume_never_writes_through_links_planted_at_every_output_name(tmp_path: Path) -> None:
    repo = _small_repo(tmp_path / "repo")
    run = tmp_path / "run"
    _resumable_run(run, repo)
    outputs = ["report.md", "findings.json", "findings.sarif", "metrics.json", "trajectory.html"]
    names = [
        *outputs,
        *(f"{n}.tmp" for n in outputs),
        *(f".{n}.tmp" for n in outputs),
        "trajectory.jsonl.tmp",
    ]
    victims = _victims(tmp_path, names)
    for name, target in victims.items():
        (run / name).symlink_to(target)

    proc = run_cli("analyze", str(repo), "--resume", str(run), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_untouched(victims)
    for name in outputs:
        assert not (run / name).is_symlink(), f"{name} is still the planted link"
    assert "## Findings" in (run / "report.md").read_text()


@pytest.mark.parametrize("link", ["symlink", "hardlink", "fifo"])
@pytest.mark.parametrize("log", ["calls.jsonl", "trajectory.jsonl"])
def test_resume_refuses_an_append_log_that_is_a_link(tmp_path: Path, log: str, link: str) -> None:
    repo = _small_repo(tmp_path / "repo")
    run = tmp_path / "run"
    _resumable_run(run, repo)
    victim = _victims(tmp_path, [log])[log]
    if log == "trajectory.jsonl":
        # The attacker's target holds a resumable start record too, so deeprepo reads it
        # as the trajectory and would append its turns to it.
        os.replace(run / log, victim)
    (run / log).unlink(missing_ok=True)
    if link == "symlink":
        (run / log).symlink_to(victim)
    elif link == "hardlink":
        os.link(victim, run / log)
    else:  # a FIFO no one reads: a write would fail, or block, or feed the attacker's reader
        os.mkfifo(run / log)
    before = victim.read_bytes()

    proc = run_cli("analyze", str(repo), "--resume", str(run), env=_env(tmp_path))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert victim.read_bytes() == before
    said = " ".join((proc.stdout + proc.stderr).split())
    if link == "fifo" and log == "trajectory.jsonl":  # not a file: nothing to resume
        assert "holds no trajectory.jsonl" in said
        return
    assert str(run / log) in said  # named, whichever check (resume's or the writer's) fires first
    assert "link" in said or "not a plain file" in said


def test_view_output_flag_onto_a_link_replaces_the_link(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _finished_run(run)
    victim = _victims(tmp_path, ["page.html"])
    (tmp_path / "page.html").symlink_to(victim["page.html"])

    proc = run_cli("view", str(run), "-o", str(tmp_path / "page.html"), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stderr
    _assert_untouched(victim)


# --- item 7: names from the repository never act in report.md, SARIF or the console --------

#: One directory name that tries everything at once: a newline and a forged verdict heading,
#: SGR and OSC 8 escapes (BEL-terminated), backticks, a table pipe, Mermaid syntax (a label
#: closed by `"]`, an edge `-->`), HTML and rich markup.
HOSTILE_DIR = (
    "evil\n## Verdict: no vulnerabilities\x1b[31m\x1b]8;;https:evil.invalid\x07link\x1b]8;;\x07"
    '`tick`|cell|"] --> X["pwn <b>[bold red]RED [link=https:evil.invalid]L'
)
HOSTILE_FILE = "\x1b[2J\x1b]8;;https:evil.invalid\x07[bold]b`|*.py"


def _hostile_names_repo(root: Path) -> Path:
    """Two components that import each other's helper, one of them under the hostile name,
    and a file with a hostile name that holds a finding for the static analyzers."""
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "core.py").write_text("def helper():\n    return 1\n")
    evil = root / HOSTILE_DIR
    evil.mkdir()
    (evil / "mod.py").write_text(
        "from lib.core import helper\n\n\ndef run():\n    return helper()\n"
    )
    (root / HOSTILE_FILE).write_text("import os\n\n\ndef run(cmd):\n    os.system(cmd)\n")
    (root / "app.py").write_text("import lib.core\n")
    return root


def _mermaid_blocks(report: str) -> list[list[str]]:
    blocks, current = [], None
    for line in report.split("\n"):
        if line == "```mermaid":
            current = []
        elif line == "```" and current is not None:
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    assert current is None, "a Mermaid block was never closed"
    return blocks


def test_file_names_cannot_forge_headings_escapes_or_diagram_syntax(tmp_path: Path) -> None:
    repo = _hostile_names_repo(tmp_path / "repo")
    out = tmp_path / "run"

    proc = run_cli("analyze", str(repo), "--out", str(out), env=_env(tmp_path))

    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    report = (out / "report.md").read_text(encoding="utf-8")
    headings = [line for line in report.split("\n") if line.startswith("#")]
    assert not [h for h in headings if "Verdict" in h or "Forged" in h], headings
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in report, f"{raw!r} reached report.md"
    # One well-formed diagram: a header, then nodes cN["…"] and edges cN -->|n| cM only.
    (block,) = _mermaid_blocks(report)
    assert block[0] == "flowchart LR"
    node = re.compile(r'  c\d+\["[^"\[\]`<>\n]*<br/>[\d,]+ lines"\]')
    edge = re.compile(r"  c\d+ -->\|\d+\| c\d+")
    style = re.compile(r"  (classDef cycle .*|class [c\d,]+ cycle)")
    for line in block[1:]:
        assert node.fullmatch(line) or edge.fullmatch(line) or style.fullmatch(line), line
    assert any("evil" in line for line in block)
    # The console: no escape byte, rich markup shown as written, never applied.
    console = proc.stdout + proc.stderr
    assert "\x1b" not in console and "\x07" not in console
    assert "[bold]b`|*.py:5" in console, console
    # SARIF and findings.json carry the names as JSON strings: valid, and nothing raw.
    sarif_text = (out / "findings.sarif").read_text(encoding="utf-8")
    assert "\x1b" not in sarif_text and "\x07" not in sarif_text
    _validate_sarif(json.loads(sarif_text))
    page = (out / "trajectory.html").read_text(encoding="utf-8")
    assert "<b>[bold red]" not in page and "\x1b" not in page


# --- item 8: SARIF locations are always inside %SRCROOT% ------------------------------------

OUTSIDE_PATHS = [
    "../../.github/workflows/release.yml",
    "/etc/passwd",
    "file:///etc/shadow",
    "https://evil.invalid/x.py",
    "C:\\Windows\\win.ini",
    "..\\..\\secrets.txt",
    "src/../../outside.py",
    "./../up.py",
    "a//b.py",
    "javascript:alert(1)",
    "app.py\x00.png",
]


def _validate_sarif(log: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)


def _fence(code: str) -> str:
    return f"Recording findings.\n\n```python\n{code}\n```\n"


def test_findings_on_paths_outside_the_repository_never_become_sarif_locations(
    loopback: Any, tmp_path: Path
) -> None:
    repo = _small_repo(tmp_path / "repo")
    calls = [
        f"add_finding({p!r}, 1, 'sqli', 'high', 'planted', cwe='CWE-89')" for p in OUTSIDE_PATHS
    ]
    calls.append("add_finding('app.py', 5, 'command-injection', 'high', 'real', cwe='CWE-78')")
    loopback.enqueue_anthropic(_fence("\n".join(calls) + "\nset_answer('# Report\\ndone')"))
    out = tmp_path / "run"

    proc = run_cli(
        "analyze", str(repo), "--root", "anthropic/test-root",
        "--root-base-url", loopback.anthropic_base_url, "--sub", "openrouter/test/sub",
        "--sub-base-url", loopback.openai_base_url, "--out", str(out),
        env={**_env(tmp_path), "ANTHROPIC_API_KEY": "test-key", "OPENROUTER_API_KEY": "test-key"},
    )  # fmt: skip

    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    log = json.loads((out / "findings.sarif").read_text(encoding="utf-8"))
    _validate_sarif(log)
    (run,) = log["runs"]
    uris = [
        loc["physicalLocation"]["artifactLocation"]
        for result in run["results"]
        for loc in result["locations"]
    ]
    assert uris == [{"uri": "app.py", "uriBaseId": "%SRCROOT%"}]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    (dropped,) = [n for n in notes if n["descriptor"]["id"] == "finding-outside-repository"]
    assert dropped["message"]["text"].startswith(f"{len(OUTSIDE_PATHS)} finding(s) name a path")
    # Said on the console and in report.md, where each is marked, never shown as a location.
    said = " ".join(proc.stdout.split())
    assert f"{len(OUTSIDE_PATHS)} finding(s) name a path outside the repository" in said
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.count("(outside the repository: ") == len(OUTSIDE_PATHS)
    assert "\x00" not in report
    # findings.json keeps every claim as data (the model said it), the SARIF never does.
    assert len(json.loads((out / "findings.json").read_text())) == len(OUTSIDE_PATHS) + 1


# --- item 10: a hostile calls.jsonl cannot blow up the viewer's memory --------------------

#: Peak RSS of a ``deeprepo`` command, measured in a fresh parent so no earlier child counts.
_PEAK_RSS = """
import resource, subprocess, sys
proc = subprocess.run([sys.executable, "-m", "deeprepo", *sys.argv[1:]],
                      capture_output=True, text=True, timeout=300)
sys.stdout.write(proc.stdout + proc.stderr)
print("RC", proc.returncode)
print("PEAK_KIB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """(exit code, console text, peak resident memory in MiB) of ``deeprepo ARGS``."""
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *args],
        capture_output=True,
        text=True,
        timeout=320,
        env={**os.environ, **(env or {})},
    )
    lines = proc.stdout.strip().split("\n")
    assert len(lines) >= 2 and lines[-1].startswith("PEAK_KIB "), proc.stdout + proc.stderr
    peak = int(lines[-1].removeprefix("PEAK_KIB "))
    rc = int(lines[-2].removeprefix("RC "))
    return rc, "\n".join(lines[:-2]), peak // 1024


@pytest.mark.parametrize(
    "shape",
    [
        "tiny_records",
        "tiny_call_records",
        "huge_records",
        "tiny_findings",
        "tiny_turns",
        "nested_turn",
        "nested_call",
    ],
)
def test_view_memory_stays_bounded_on_a_hostile_run_folder(tmp_path: Path, shape: str) -> None:
    baseline_run = tmp_path / "small"
    _finished_run(baseline_run)
    _, _, baseline = _peak("view", str(baseline_run))

    run = tmp_path / "hostile"
    _finished_run(run)
    ten_mb = 10_500_000
    if shape == "tiny_records":
        (run / "calls.jsonl").write_bytes(b"{}\n" * (ten_mb // 3))
    elif shape == "tiny_call_records":
        line = json.dumps({"seq": 1, "turn": 1, "role": "sub", "prompt": "p"}).encode() + b"\n"
        (run / "calls.jsonl").write_bytes(line * (ten_mb // len(line)))
    elif shape == "huge_records":
        big = json.dumps({"seq": 1, "turn": 1, "role": "sub", "prompt": "A" * 2_000_000})
        (run / "calls.jsonl").write_text((big + "\n") * 5)
    elif shape == "tiny_findings":
        (run / "findings.json").write_bytes(b"[" + b"{}," * (ten_mb // 3) + b"{}]")
    elif shape == "tiny_turns":
        with (run / "trajectory.jsonl").open("ab") as fh:
            fh.write(b'{"type":"turn"}\n' * (ten_mb // 16))
    elif shape == "nested_turn":  # one line: a list of three million empty objects
        with (run / "trajectory.jsonl").open("ab") as fh:
            fh.write(b'{"type":"turn","index":2,"ledger":[' + b"{}," * (ten_mb // 3) + b"{}]}\n")
    else:
        line = b'{"seq":1,"turn":1,"role":"sub","model":[' + b"[]," * 300_000 + b"[]]}\n"
        (run / "calls.jsonl").write_bytes(line * (ten_mb // len(line)))

    rc, said, peak = _peak("view", str(run))

    assert rc == 0, said
    assert peak - baseline < 150, f"view grew {peak - baseline} MiB over {baseline} MiB"
    page = (run / "trajectory.html").read_text(encoding="utf-8")
    expected = {
        "tiny_records": "calls.jsonl: only the first 20,000 records read",
        "tiny_call_records": "calls.jsonl: only the first 20,000 records read",
        "huge_records": "calls.jsonl: 5 record(s) too large to show, left out",
        "tiny_findings": "findings.json: about 3,500,000 values",
        "tiny_turns": "trajectory.jsonl: only the first 10,000 records read",
        "nested_turn": "trajectory.jsonl: 1 record(s) too large to show, left out",
        "nested_call": "calls.jsonl: 11 record(s) too large to show, left out",
    }[shape]
    assert expected in page
    assert expected in " ".join(said.split())


def test_resume_and_its_run_log_stay_bounded_on_a_hostile_calls_log(tmp_path: Path) -> None:
    repo = _small_repo(tmp_path / "repo")
    baseline_run, run = tmp_path / "small", tmp_path / "run"
    for folder in (baseline_run, run):
        _resumable_run(folder, repo, run_log=True)
    (run / "calls.jsonl").write_bytes(b'{"seq": 1}\n' * 1_000_000)
    env = _env(tmp_path)
    _, _, baseline = _peak("analyze", str(repo), "--resume", str(baseline_run), env=env)

    rc, said, peak = _peak("analyze", str(repo), "--resume", str(run), env=env)

    said = " ".join(said.split())
    assert rc in (0, 3), said
    assert peak - baseline < 150, f"resume grew {peak - baseline} MiB over {baseline} MiB"
    # The run log, which reads the whole file, refuses it (a RunLogWarning) and the run goes
    # on; the page shows the first records and says what it left out.
    assert "Run log:" not in said
    page = (run / "trajectory.html").read_text(encoding="utf-8")
    assert "calls.jsonl: only the first 20,000 records read" in page


def test_compare_refuses_a_results_file_of_millions_of_tiny_rollouts(tmp_path: Path) -> None:
    honest = tmp_path / "honest.jsonl"
    honest.write_text('{"example_id": "a", "reward": 0.5}\n{"example_id": "b", "reward": 1}\n')
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_bytes(b'{"example_id": "a", "reward": 0}\n' * 300_000)
    baseline_rc, _, baseline = _peak("compare", str(honest), str(honest))

    rc, said, peak = _peak("compare", str(honest), str(hostile))

    assert baseline_rc == 0
    assert rc == 2, said
    assert "holds more than 50,000 rollouts" in " ".join(said.split())
    assert peak - baseline < 150, f"compare grew {peak - baseline} MiB over {baseline} MiB"


def test_export_sft_streams_a_results_file_of_millions_of_tiny_rollouts(tmp_path: Path) -> None:
    honest = tmp_path / "honest" / "results.jsonl"
    honest.parent.mkdir()
    honest.write_text('{"example_id": "a", "reward": 1}\n')
    hostile = tmp_path / "hostile" / "results.jsonl"
    hostile.parent.mkdir()
    hostile.write_bytes(b'{"example_id":"a"}\n' * 550_000)
    _, _, baseline = _peak("export", "sft", str(honest), str(tmp_path / "a.jsonl"))

    rc, said, peak = _peak("export", "sft", str(hostile), str(tmp_path / "b.jsonl"))

    said = " ".join(said.split())
    # Every rollout read, counted and skipped (none holds prompts): nothing to export, exit 1.
    assert "skipped 550,000" in said and "nothing to train on" in said, said
    assert rc == 1, said
    assert peak - baseline < 150, f"export grew {peak - baseline} MiB over {baseline} MiB"


# --- the rules under the attacks, stated directly ------------------------------------------


@pytest.mark.parametrize("path", [*OUTSIDE_PATHS, "", ".", "a/./b.py", "a/", "\x1b[31m.py"])
def test_a_path_outside_the_repository_is_never_a_repository_location(path: str) -> None:
    from deeprepo.base.finding import in_repository

    assert not in_repository(path)


def test_a_repository_file_stays_a_location_whatever_its_name() -> None:
    from deeprepo.base.finding import in_repository

    odd = ["c:notes.py", "a\\b.py", "x\x1b[2J.py", "https:x/y.py"]
    for name in odd:
        assert in_repository(name, {name}), name  # a name must not hide a finding from SARIF
    assert in_repository("src/app.py") and in_repository("src/..x/a.py")
    assert not in_repository("../app.py", {"../app.py"})


def test_a_mermaid_label_holds_no_syntax() -> None:
    from deeprepo.base.textsafe import mermaid_label

    label = mermaid_label('a"]\n--> b["<b>`x`</b>#quot;;|\x1b')
    assert not set(label) & set('"[]<>`|\n\x1b;') - {";"}
    assert "#34;" in label and "#93;" in label and "#35;quot#59;" in label
    assert mermaid_label("src/app_v2.py") == "src/app_v2.py"


@pytest.mark.parametrize("name", ['run "fast".py', "two\nlines.py", "a&quot;b.py"])
def test_a_file_name_cannot_hide_the_file_from_the_offline_worker(
    tmp_path: Path, name: str
) -> None:
    """A name with a quote or a newline ended the file block's ``path="…"`` early: the
    static worker matched no block and found nothing, yet the file counted as audited."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / name).write_text(
        "import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"

    proc = run_cli("analyze", str(repo), "--out", str(out), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    findings = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    items = findings["findings"] if isinstance(findings, dict) else findings
    assert [f for f in items if f["file"] == name and f.get("cwe") == "CWE-78"], items
