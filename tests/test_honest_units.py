"""Unit tests of the honest-run pieces: escaping, audit sets and reasons, the report's
scope split, exit codes and the progress ETA."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console

from deeprepo.base.chat import ChatRequest, Completion, Message
from deeprepo.base.errors import ProviderUnreachable, UsageError
from deeprepo.base.finding import Finding
from deeprepo.base.prompts import file_audit_prompt
from deeprepo.base.records import RunResult
from deeprepo.cli import exits
from deeprepo.cli.progress import RunProgress
from deeprepo.codebase.model import Codebase, CodebaseMetadata
from deeprepo.orchestrator.audit import (
    DEFAULT_AUDIT_SCOPES,
    DispatchStats,
    audit_set,
    audited_files,
    parse_scopes,
    shortfall,
)
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import UNREACHABLE_RETRY_S, MeteredModel
from deeprepo.providers.openai_compat import unreachable_reason
from deeprepo.providers.prices import PriceTable
from deeprepo.report.outputs import metrics, render_report
from deeprepo.report.text import console, md_block, md_code, md_text, visible


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\rb", "a\\x0db"),
        ("bell\x07", "bell\\x07"),
        ("\x9b31m", "\\x9b31m"),  # C1 CSI
        ("left\u202eright", "left\\u202eright"),
        ("iso\u2066late\u2069", "iso\\u2066late\\u2069"),
        ("plain café", "plain café"),
    ],
)
def test_visible_escapes_every_control_and_direction_character(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_console_text_prints_markup_literally() -> None:
    c = Console(record=True, width=200, color_system=None)
    c.print(console("[/] and [bold red]x[/bold red] \x1b[2J"))  # "[/]" alone used to crash
    assert c.export_text().strip() == "[/] and [bold red]x[/bold red] \\x1b[2J"


def test_markdown_fields_render_as_their_text() -> None:
    assert md_text("a|b *c* _d_ `e` [f](g) <b>h</b> &amp;") == (
        "a\\|b \\*c\\* \\_d\\_ \\`e\\` \\[f\\](g) &lt;b&gt;h&lt;/b&gt; &amp;amp;"
    )
    assert md_text("- not a list\nsecond line") == "\\- not a list second line"
    assert md_text("# not a heading") == "\\# not a heading"
    assert md_code("a`b") == "``a`b``" and md_code("`x`") == "`` `x` ``"
    block = md_block("# Title\n<script>x</script>\n```\n<kept in code>\n```\n\x1b[2J")
    assert block == "# Title\n&lt;script>x&lt;/script>\n```\n<kept in code>\n```\n\\x1b[2J"


def test_scopes_from_flags() -> None:
    assert parse_scopes() == DEFAULT_AUDIT_SCOPES and "docs" not in DEFAULT_AUDIT_SCOPES
    assert parse_scopes(["source,config"]) == {"source", "config"}
    assert parse_scopes(["all"], ["vendored", "generated"]) == {
        "source", "config", "test", "example", "docs",
    }  # fmt: skip
    with pytest.raises(UsageError, match="unknown scope 'tests'"):
        parse_scopes(["tests"])
    with pytest.raises(UsageError, match="no scope to audit"):
        parse_scopes(["docs"], ["docs"])


FILES = {
    "app/main.py": "import os\nprint(os.environ['HOME'])\nvalue = compute_something(1)\n",
    "app/big.py": "\n".join(f"line_number_{i} = {i} * 2" for i in range(40)),
    "tests/test_main.py": "def test_it():\n    assert True is True\n",
    "README.md": "# Read me please\n",
    "empty.py": "\n",
}
SCOPE_OF = {
    "app/main.py": "source",
    "app/big.py": "source",
    "tests/test_main.py": "test",
    "README.md": "docs",
    "empty.py": "source",
}


def test_audit_set_and_only_whole_answered_content_counts() -> None:
    targets = audit_set(FILES, SCOPE_OF, DEFAULT_AUDIT_SCOPES)
    assert targets == ["app/big.py", "app/main.py", "tests/test_main.py"]  # no docs, no empty
    half = "\n".join(FILES["app/big.py"].split("\n")[:20])
    prompts = [
        file_audit_prompt("app/main.py", FILES["app/main.py"]),
        file_audit_prompt("app/big.py", half),  # half a file is not an audit
    ]
    assert audited_files(FILES, prompts, targets) == ["app/main.py"]
    rest = "\n".join(FILES["app/big.py"].split("\n")[20:])
    prompts.append(file_audit_prompt("app/big.py", rest, 21))  # slices add up
    assert audited_files(FILES, prompts, targets) == ["app/big.py", "app/main.py"]


def test_shortfall_names_the_cause_and_the_option() -> None:
    refused = DispatchStats(answered=5, refused=7, budget_kind="sub_calls")
    why = shortfall(
        unaudited=3, answered=True, stop_reason="answer_ready", stop_detail="", stats=refused
    )
    assert why == "7 worker prompts refused by the sub-calls budget (raise --max-sub-calls)"
    failed = DispatchStats(failed=2, first_error="x: connection refused at http://h/v1")
    why = shortfall(
        unaudited=1, answered=True, stop_reason="answer_ready", stop_detail="", stats=failed
    )
    assert why == "2 worker calls failed; first: x: connection refused at http://h/v1"
    why = shortfall(
        unaudited=4,
        answered=True,
        stop_reason="answer_ready",
        stop_detail="",
        stats=DispatchStats(),
    )
    assert why.startswith("the root did not send them to a worker")
    why = shortfall(
        unaudited=0,
        answered=False,
        stop_reason="max_turns",
        stop_detail="no answer",
        stats=DispatchStats(),
    )
    assert why == "stopped on max_turns: no answer (raise --max-turns)"
    assert shortfall(
        unaudited=0, answered=True, stop_reason="answer_ready", stop_detail="", stats=refused
    ) == ""  # fmt: skip


def _finding(file: str, scope: str, severity: str, title: str) -> Finding:
    return Finding(
        file=file, start_line=1, end_line=1, kind="k", cwe="CWE-1", severity=severity,
        title=title, detail="", fix="", scope=scope,
    )  # fmt: skip


def _result(**kw: Any) -> RunResult:
    base: dict[str, Any] = dict(
        answer="# Synthesis", incomplete=False, stop_reason="answer_ready", stop_detail="",
        findings=[], turns=[], sub_calls=3, files_covered=["a.py"], coverable_files=1, usage=[],
        total_cost_usd=0.0, wall_seconds=1.0, root_model="scripted/expert", sub_model="static",
        sandbox_mode="process", audit_scopes=sorted(DEFAULT_AUDIT_SCOPES),
    )  # fmt: skip
    base.update(kw)
    return RunResult(**base)


CODEBASE = Codebase(
    files={"a.py": "x = 1\n"},
    file_tree="a.py",
    metadata=CodebaseMetadata("repo", 1, 6, 1, {"Python": 1}, [], [], scopes={"source": 1}),
    scopes={"a.py": "source"},
)


def test_report_leads_with_headline_scopes_and_lists_the_rest_apart_once() -> None:
    findings = [
        _finding("src/a.py", "source", "high", "real one"),
        _finding("tests/t.py", "test", "critical", "in a test"),
        _finding("vendor/v.js", "vendored", "high", "vendored one"),
        _finding("setup.cfg", "config", "low", "config one"),
    ]
    result = _result(findings=findings)
    report = render_report(result, CODEBASE, offline=True)
    head, rest = report.split("## Findings in other scopes")
    assert "2 findings (1 high, 1 low)" in head and "### Critical" not in head
    assert "in a test" not in head and "vendored one" not in head
    assert "| test | 1 | 1 | 0 | 0 | 0 | 0 |" in rest and "### vendored (1)" in rest
    for title in ("real one", "in a test", "vendored one", "config one"):
        assert report.count(title) == 1
    m = metrics(result, CODEBASE, offline=True)
    assert m["findings_by_scope"] == {"source": 1, "config": 1, "test": 1, "vendored": 1}
    assert m["findings_by_severity"] == {"high": 1, "low": 1} and m["findings_headline"] == 2
    assert m["complete"] is True and m["incomplete"] is False


def test_an_incomplete_run_says_so_at_the_top_of_the_report() -> None:
    result = _result(
        files_covered=[], coverable_files=1, unaudited=["a.py"], sub_calls=0,
        sub_calls_refused=4, incomplete_reason="4 worker prompts refused (raise --max-sub-calls)",
    )  # fmt: skip
    report = render_report(result, CODEBASE, offline=True)
    first = report.split("\n")[2]
    assert first.startswith("> **Incomplete**: audited 0 of 1 files: 4 worker prompts refused")
    assert "Not audited (1): `a.py`" in report
    m = metrics(result, CODEBASE, offline=True)
    assert (m["incomplete"], m["unaudited_paths"], m["sub_calls_refused"]) == (True, ["a.py"], 4)


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({}, exits.OK),
        ({"unaudited": ["a.py"]}, exits.INCOMPLETE),
        ({"incomplete": True, "stop_reason": "max_turns"}, exits.INCOMPLETE),
        ({"incomplete": True, "stop_reason": "budget"}, exits.INCOMPLETE),
        ({"incomplete": True, "stop_reason": "error"}, exits.ERROR),
        ({"sub_calls": 0, "sub_calls_failed": 3, "unaudited": ["a.py"]}, exits.ERROR),
        ({"incomplete": True, "stop_reason": "interrupted"}, exits.INTERRUPTED),
    ],
)
def test_exit_codes(kw: dict[str, Any], code: int) -> None:
    assert exits.for_result(replace(_result(), **kw)) == code


def test_progress_shows_files_audited_and_an_eta() -> None:
    now = [100.0]
    c = Console(record=True, width=200, force_terminal=False)
    progress = RunProgress(c, "analyze", clock=lambda: now[0])
    with progress:
        progress("turn_start", {"turn": 2, "max_turns": 20})
        progress("audit_start", {"files": 1000})
        progress("audited", {"files": 100, "total": 1000})
        now[0] += 10.0
        progress("audited", {"files": 300, "total": 1000})
        assert progress.eta_s() == pytest.approx(35.0)  # 700 left at 20 files/s
        text = c.export_text()
    assert "turn 2/20 · audited 300/1000 files · ETA 35s" in text


class Unreachable:
    """A model whose server refuses every connection."""

    name = "test/down"

    def __init__(self) -> None:
        self.attempts = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.attempts += 1
        raise ProviderUnreachable(
            "test/down: connection refused at http://127.0.0.1:9/v1", url="http://127.0.0.1:9/v1"
        )

    async def aclose(self) -> None:
        pass


async def test_an_unreachable_server_gets_one_quick_retry_then_fails_at_once() -> None:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    model = Unreachable()
    ledger = Ledger()
    metered = MeteredModel(model, "sub", ledger, PriceTable.load(None), sleep=sleep)
    request = ChatRequest((Message("user", "hi"),))
    with pytest.raises(ProviderUnreachable, match=r"connection refused at http://127\.0\.0\.1:9"):
        await metered.complete(request)
    assert model.attempts == 2 and slept == [UNREACHABLE_RETRY_S]
    with pytest.raises(ProviderUnreachable):  # held down: no new attempt, no wait
        await metered.complete(request)
    assert model.attempts == 2 and len(slept) == 1
    assert ledger.rows()[0].failed_requests == 2


def test_refusals_dns_and_tls_are_told_apart_from_transient_faults() -> None:
    import socket
    import ssl

    def chained(inner: BaseException) -> Exception:
        try:
            try:
                raise inner
            except BaseException as exc:
                raise RuntimeError("transport wrapper") from exc
        except RuntimeError as outer:
            return outer

    assert unreachable_reason(chained(ConnectionRefusedError(111, "refused"))) == (
        "connection refused"
    )
    assert unreachable_reason(chained(socket.gaierror(-2, "unknown"))) == "DNS lookup failed"
    assert unreachable_reason(chained(ssl.SSLCertVerificationError("bad cert"))) == (
        "TLS handshake failed"
    )
    assert unreachable_reason(chained(ConnectionResetError(104, "reset"))) is None
    assert unreachable_reason(chained(TimeoutError())) is None


def test_the_synthesis_nests_under_the_report_headings() -> None:
    text = "# Report\n## Part\n```\n# a comment\n```\n#not-a-heading"
    assert md_block(text, shift_headings=2) == (
        "### Report\n#### Part\n```\n# a comment\n```\n#not-a-heading"
    )


def test_progress_counts_worker_answers_as_they_come() -> None:
    """The dispatcher's count moves when a batch settles; the progress line counts each
    answer, so it never reads "audited 47/113 files · worker calls 0"."""
    now = [0.0]
    c = Console(record=True, width=200, force_terminal=False)
    with RunProgress(c, "analyze", clock=lambda: now[0]) as progress:
        progress("turn_start", {"turn": 2, "max_turns": 20})
        progress("audit_start", {"files": 113})
        now[0] += 60.0  # past the interval of plain progress lines
        progress("audited", {"files": 47, "total": 113, "calls": 3})
        text = c.export_text()
    assert "audited 47/113 files" in text and "worker calls 3" in text
