"""The ``static`` worker on the example repository, through the real audit prompt."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from deeprepo.base.chat import ChatModel, ChatRequest, Message, Usage
from deeprepo.base.errors import ConfigError
from deeprepo.base.prompts import file_audit_prompt
from deeprepo.builtin import make_static_worker
from deeprepo.builtin.analyzers import analyze_file
from deeprepo.builtin.static import FREE_FORM_NOTE, StaticWorker
from deeprepo.providers.spec import parse_model_spec
from deeprepo.run.models import build_model

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
REPO = EXAMPLES / "vulnapi"
GROUND_TRUTH: list[dict[str, Any]] = json.loads(
    (EXAMPLES / "vulnapi.ground_truth.json").read_text()
)
FIELDS = {"line", "end_line", "kind", "cwe", "severity", "title", "detail", "fix"}
SEVERITIES = {"critical", "high", "medium", "low", "info"}
TOLERANCE = 2


def _request(prompt: str) -> ChatRequest:
    return ChatRequest(messages=(Message("user", prompt),))


def _source(rel: str) -> str:
    return (REPO / rel).read_text()


async def _audit(rel: str, content: str | None = None, start_line: int = 1) -> list[dict[str, Any]]:
    content = _source(rel) if content is None else content
    completion = await StaticWorker().complete(
        _request(file_audit_prompt(rel, content, start_line))
    )
    data = json.loads(completion.text)
    assert set(data) == {"findings"}
    return list(data["findings"])


def _entry(entry_id: str) -> dict[str, Any]:
    return next(e for e in GROUND_TRUTH if e["id"] == entry_id)


def _matches(finding: dict[str, Any], entry: dict[str, Any], tol: int = TOLERANCE) -> bool:
    return (
        finding["cwe"] in entry["acceptable_cwes"]
        and entry["start_line"] - tol <= finding["line"] <= entry["end_line"] + tol
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    "entry_id",
    [
        "sqli-search-users",
        "md5-password-hash",
        "hardcoded-jwt-secret",
        "xss-comment-body",
        "cmdi-admin-ping",
    ],
)
async def test_planted_bug_is_reported_with_an_acceptable_cwe_on_its_line(entry_id: str) -> None:
    entry = _entry(entry_id)
    findings = await _audit(entry["file"])
    hits = [f for f in findings if _matches(f, entry)]
    assert len(hits) == 1, findings
    assert hits[0]["file"] == entry["file"]
    assert hits[0]["severity"] in {"high", "medium"}


@pytest.mark.e2e
async def test_cwes_are_the_precise_ones() -> None:
    expected = {
        "sqli-search-users": ("sql-injection", "CWE-89", "high"),
        "md5-password-hash": ("weak-password-hash", "CWE-916", "high"),
        "hardcoded-jwt-secret": ("hardcoded-secret", "CWE-798", "high"),
        "cmdi-admin-ping": ("command-injection", "CWE-78", "high"),
    }
    for entry_id, (kind, cwe, severity) in expected.items():
        entry = _entry(entry_id)
        (hit,) = [f for f in await _audit(entry["file"]) if _matches(f, entry)]
        assert (hit["kind"], hit["cwe"], hit["severity"]) == (kind, cwe, severity)
        assert hit["line"] == entry["start_line"]


@pytest.mark.parametrize(
    "entry_id", ["decoy-parameterised-user-query", "decoy-secret-from-environment"]
)
async def test_decoy_lines_get_no_finding(entry_id: str) -> None:
    entry = _entry(entry_id)
    findings = await _audit(entry["file"])
    on_decoy = [f for f in findings if entry["start_line"] <= f["line"] <= entry["end_line"]]
    assert on_decoy == []


@pytest.mark.e2e
async def test_whole_repository_has_full_recall_and_no_false_positive() -> None:
    vulnerable = [e for e in GROUND_TRUTH if e["vulnerable"]]
    matched: set[str] = set()
    false_positives = []
    for path in sorted(p for p in REPO.rglob("*") if p.is_file()):
        rel = path.relative_to(REPO).as_posix()
        for f in await _audit(rel):
            hit = [e["id"] for e in vulnerable if e["file"] == rel and _matches(f, e)]
            if hit:
                matched.update(hit)
            else:
                false_positives.append((rel, f["line"], f["kind"]))
    assert matched == {e["id"] for e in vulnerable}
    assert false_positives == []


async def test_secret_reported_once_and_never_echoed() -> None:
    entry = _entry("hardcoded-jwt-secret")
    line = _source(entry["file"]).split("\n")[entry["start_line"] - 1]
    secret = line.split('"')[1]
    completion = await StaticWorker().complete(
        _request(file_audit_prompt(entry["file"], _source(entry["file"])))
    )
    assert secret not in completion.text
    on_line = [
        f for f in json.loads(completion.text)["findings"] if f["line"] == entry["start_line"]
    ]
    assert len(on_line) == 1  # bandit B105 and detect-secrets merged


@pytest.mark.parametrize(
    ("start", "end"),
    [(20, 40), (31, 33), (32, 32), (25, 60), (28, 90)],
)
async def test_slices_report_original_file_lines(start: int, end: int) -> None:
    entry = _entry("sqli-search-users")
    lines = _source(entry["file"]).split("\n")
    piece = "\n".join(lines[start - 1 : end])
    findings = await _audit(entry["file"], piece, start)
    assert [(f["line"], f["cwe"]) for f in findings] == [(entry["start_line"], "CWE-89")]


async def test_slice_of_a_non_python_style_secret_keeps_original_lines() -> None:
    entry = _entry("hardcoded-jwt-secret")
    lines = _source(entry["file"]).split("\n")
    # From inside the class body: dedent is needed for bandit, offsets for both tools.
    piece = "\n".join(lines[7:12])
    findings = await _audit(entry["file"], piece, 8)
    assert [(f["line"], f["cwe"]) for f in findings] == [(9, "CWE-798")]


async def test_slice_cut_mid_statement_is_trimmed_not_dropped() -> None:
    src = "\n".join(
        [
            "import subprocess",  # 1
            "def run(host):",  # 2
            '    subprocess.call("ping " + host, shell=True)',  # 3
            "    values = (",  # 4
            "        1,",  # 5
        ]
    )
    findings = analyze_file("tools/net.py", src, start_line=100)
    assert [(f.line, f.cwe) for f in findings] == [(102, "CWE-78")]
    piece = "\n".join(["        2,", "    )", '    eval(input("> "))'])
    assert [(f.line, f.kind) for f in analyze_file("tools/net.py", piece, 40)] == [
        (42, "code-injection")
    ]


@pytest.mark.e2e
async def test_multi_file_prompt_labels_each_finding_with_its_file() -> None:
    a, b = _entry("md5-password-hash"), _entry("cmdi-admin-ping")
    prompt = file_audit_prompt(a["file"], _source(a["file"])) + file_audit_prompt(
        b["file"], _source(b["file"])
    )
    data = json.loads((await StaticWorker().complete(_request(prompt))).text)
    got = {(f["file"], f["line"], f["cwe"]) for f in data["findings"]}
    assert got == {(a["file"], 16, "CWE-916"), (b["file"], 32, "CWE-78")}


async def test_free_form_prompt_gets_the_note_and_empty_json() -> None:
    completion = await StaticWorker().complete(
        _request("Summarise the architecture of this repository.")
    )
    assert completion.text.startswith(FREE_FORM_NOTE)
    assert json.loads(completion.text.splitlines()[-1]) == {"findings": []}
    assert completion.usage == Usage()


@pytest.mark.e2e
async def test_every_reply_is_valid_worker_json_with_zero_usage() -> None:
    worker = make_static_worker()
    for path in sorted(p for p in REPO.rglob("*") if p.is_file()):
        rel = path.relative_to(REPO).as_posix()
        completion = await worker.complete(_request(file_audit_prompt(rel, path.read_text())))
        assert completion.usage == Usage(0, 0, 0, 0)
        assert completion.model == "static"
        for f in json.loads(completion.text)["findings"]:
            assert set(f) >= FIELDS
            assert isinstance(f["line"], int) and isinstance(f["end_line"], int)
            assert 1 <= f["line"] <= f["end_line"] <= len(path.read_text().split("\n"))
            assert f["severity"] in SEVERITIES
            assert f["cwe"] is None or f["cwe"].startswith("CWE-")
    await worker.aclose()


def test_weak_hash_outside_password_context_is_cwe_328() -> None:
    src = "import hashlib\n\ndef etag(body: bytes) -> str:\n    return hashlib.md5(body).hexdigest()\n"
    (f,) = analyze_file("web/cache.py", src)
    assert (f.line, f.kind, f.cwe) == (4, "weak-hash", "CWE-328")


def test_informational_results_are_dropped() -> None:
    src = "\n".join(
        [
            "import pickle",  # B403: informational
            "import subprocess",  # B404: informational
            "def check(x):",
            "    assert x",  # B101: informational
            "    try:",
            "        return x.strip()",
            "    except Exception:",
            "        pass",  # B110: informational
        ]
    )
    assert analyze_file("app/util.py", src) == []


def test_planted_nosec_does_not_hide_a_bug() -> None:
    # The analysed repository is untrusted: a `# nosec` comment must not silence the audit.
    src = "import pickle\n\ndef load(x):\n    return pickle.loads(x)  # nosec B301\n"
    findings = analyze_file("app/util.py", src)
    assert [(f.line, f.cwe) for f in findings] == [(4, "CWE-502")]


def test_unparseable_python_still_gets_the_secret_scan() -> None:
    src = 'print "hello"\naws_key = "AKIAIOSFODNN7EXAMPLF"\n'
    findings = analyze_file("legacy/old.py", src)
    assert [(f.line, f.cwe, f.tool) for f in findings] == [(2, "CWE-798", "detect-secrets")]


@pytest.mark.e2e
def test_javascript_gets_secrets_and_semgrep_rules() -> None:
    src = 'const stripe = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";\neval(location.hash.slice(1));\n'
    findings = analyze_file("web/app.js", src, start_line=10)
    assert [(f.line, f.kind, f.severity) for f in findings] == [
        (10, "hardcoded-secret", "high"),
        (11, "code-injection", "critical"),
    ]
    assert "4eC39HqLyjWDarjtT1zdp7dc" not in json.dumps([f.to_json() for f in findings])


async def test_a_concurrent_batch_gives_every_caller_the_same_findings() -> None:
    # Its speed (per file, 20 at once) is benchmarks/bench_speed_targets.py's to measure.
    worker = StaticWorker()
    entry = _entry("sqli-search-users")
    prompt = file_audit_prompt(entry["file"], _source(entry["file"]))
    replies = await asyncio.gather(*(worker.complete(_request(prompt)) for _ in range(20)))
    assert {r.text for r in replies} == {replies[0].text}
    assert [f["line"] for f in json.loads(replies[0].text)["findings"]] == [32]


def test_the_static_worker_is_built_from_its_spec() -> None:
    worker = build_model(parse_model_spec(" Static "), role="sub")
    assert isinstance(worker, ChatModel)
    assert worker.name == "static"
    with pytest.raises(ConfigError, match="no options"):
        make_static_worker(seed=3)
    with pytest.raises(ConfigError, match="no options"):
        build_model(parse_model_spec("static"), role="sub", builtin_kwargs={"seed": 3})
