"""trajectory.html: what the page holds, what it cuts and says it cut, and that nothing a
model or a repository wrote is interpreted (the browser checks are in test_viewer_browser)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clihelp import EXAMPLE, loopback_analyze_args, run_cli
from viewerhelp import injected, parse

from deeprepo.base.chat import Usage
from deeprepo.report.viewer import Limits, render_viewer, viewer_on_failure, write_viewer
from deeprepo.report.viewer.costchart import cost_series, nice_step
from deeprepo.report.viewer.runview import load_run_view
from deeprepo.testing.loopback import LoopbackServer, Reply
from deeprepo.testing.runfolder import RunSpec, write_run_folder

XSS = (
    "</script><script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"
    "<a href=\"javascript:document.title='PWNED'\">x</a>' onmouseover='x'\" onclick=\"x"
    "<!-- --><svg onload=alert(1)><style>body{display:none}</style>\u202e\x1b[2J\u2028\u2029"
)


def _page(run: Path, limits: Limits | None = None) -> str:
    return render_viewer(load_run_view(run), limits)


def test_the_page_holds_every_turn_and_sub_call_with_the_summary(tmp_path: Path) -> None:
    figures = write_run_folder(tmp_path / "run", RunSpec(turns=3, subs_per_turn=4))
    html = _page(tmp_path / "run")
    page = parse(html)
    assert page.count("details", "turn") == 3
    assert page.count("details", "call") == figures["sub_calls"] == 12
    assert {f"turn-{i}" for i in (1, 2, 3)} | {f"call-{i}" for i in range(1, 16)} <= page.ids()
    text = page.all_text
    for turn in (1, 2, 3):
        assert f"REPLY-{turn}" in text and f"OUTPUT-{turn}" in text and f"CODE-{turn}" in text
        assert all(f"SUBPROMPT-{turn}-{i}" in text for i in range(4))
        assert f"SUBREPLY-{turn}-0" in text
    assert "INCOMPLETE" in text and "audited 8 of 10 files: 2 files not audited" in text
    assert "anthropic/test-root" in text and "openrouter/test/sub" in text
    assert "3 failed" in text  # one failed sub-call per turn, said in the summary
    assert "failed: HTTP 500" in text
    # Cost per role, as the ledger says; the chart's lines end at the same totals.
    assert f"${figures['total_cost']:.4f}" in text
    series = cost_series(load_run_view(tmp_path / "run"))
    assert series.final["total"] == pytest.approx(figures["total_cost"])
    assert series.final["root"] == pytest.approx(figures["root_cost"])
    assert series.unknown_calls == 3
    assert page.count("polyline") == 3 and page.count("svg") == 1
    assert "FINDING-0" in text and page.count("tr", "finding") == 3
    assert "cut-notice" not in page.ids()  # nothing was cut
    assert injected(page) == []


def test_the_page_loads_nothing_and_runs_nothing(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run")
    html = _page(tmp_path / "run")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    rules = dict(r.strip().split(" ", 1) for r in csp.group(1).split(";"))
    assert rules["default-src"] == "'none'" and rules["script-src"] == "'none'"
    assert rules["style-src"].startswith("'sha256-")
    assert "<script" not in html.lower()
    assert not re.search(
        r"""(?:src|href)=|url\(|@import|https?://(?!www\.w3\.org/2000/svg")""", html
    )


def test_hostile_text_is_shown_as_text_never_as_markup(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run", RunSpec(payload=XSS))
    html = _page(tmp_path / "run")
    page = parse(html)
    assert injected(page) == []
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert page.title.startswith("deeprepo run: repo</script><script>document.title='PWNED'")
    # The payload is on the page as text (controls made visible, not dropped).
    assert "<img src=x onerror=" in page.all_text
    assert "\\u202e" in page.all_text and "\u202e" not in html and "\x1b" not in html
    assert "\u2028" not in html and "\u2029" not in html
    # Model text never reaches an attribute value.
    assert all("PWNED" not in v for _, a in page.tags for k, v in a.items() if k != "content")


def test_a_killed_run_gets_a_page_that_says_so(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run", RunSpec(turns=3, finished=False))
    page = parse(_page(tmp_path / "run"))
    text = page.all_text
    assert "NOT FINISHED" in text and "after 2 recorded turn(s)" in text
    assert "trajectory.jsonl: 1 line(s) unreadable" in text  # the torn line
    # Turn 3's calls were recorded, its turn was not: shown, and said.
    assert "Turn 3 · not recorded: the run ended during this turn" in text
    assert "SUBPROMPT-3-0" in text
    assert "No findings.json in this run folder." in text


def test_a_run_without_calls_jsonl_still_shows_its_turns_and_cost(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run")
    (tmp_path / "run" / "calls.jsonl").unlink()
    html = _page(tmp_path / "run")
    page = parse(html)
    assert page.count("details", "turn") == 3 and page.count("details", "call") == 0
    assert "has no calls.jsonl" in page.all_text
    series = cost_series(load_run_view(tmp_path / "run"))
    assert len(series.points["total"]) == 4  # the origin and one point per turn


@pytest.mark.e2e  # 2,000 sub-calls: slow; the time to write it is benchmarks/bench_viewer.py's
def test_2000_sub_calls_give_a_page_of_bounded_size_that_says_what_it_cut(tmp_path: Path) -> None:
    figures = write_run_folder(
        tmp_path / "run",
        RunSpec(turns=4, subs_per_turn=500, prompt_chars=30_000, response_chars=4_000),
    )
    written = write_viewer(tmp_path / "run")
    size = written.path.stat().st_size
    html = written.path.read_text(encoding="utf-8")
    page = parse(html)
    assert figures["sub_calls"] == written.sub_calls == 2000
    assert page.count("details", "call") == 2000  # every call listed
    assert size < 12 * 1024 * 1024, size
    notice = next(t for t in page.text if "This page is cut" in t)
    assert "text(s) shortened" in notice and "sub-call texts to 1,500 characters" in notice
    assert "without their text" not in notice  # the budget holds every call's text
    assert "S1: used by 2,000 sub-calls" in page.all_text  # the shared system prompt, once
    assert page.all_text.count("You audit code.") == 1
    assert written.cut and "text(s) shortened" in written.cut[0]
    assert "characters cut here; the whole text is in calls.jsonl (seq 2)" in page.all_text


def test_past_the_budget_calls_are_listed_without_text_and_past_the_cap_not_at_all(
    tmp_path: Path,
) -> None:
    write_run_folder(tmp_path / "run", RunSpec(turns=2, subs_per_turn=50))
    limits = Limits(call_text_budget=20_000, call_field_min=500, call_rows=60)
    page = parse(_page(tmp_path / "run", limits))
    assert page.count("details", "call") == 60
    notice = " ".join(t for t in page.text if "This page is cut" in t)
    without = int(re.search(r"([\d,]+) sub-call\(s\) listed without", notice).group(1))  # type: ignore[union-attr]
    assert 0 < without < 60 and "40 sub-call(s) not listed" in notice
    assert page.all_text.count("the page's text budget is spent") == without
    assert "40 more sub-calls not listed" in page.all_text


def test_nice_steps() -> None:
    assert [nice_step(x) for x in (0.0, 1.0, 7.3, 0.042, 950.0)] == [1.0, 0.2, 2.0, 0.01, 200.0]


@pytest.mark.e2e
def test_view_command(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run")
    proc = run_cli("view", str(tmp_path / "run"), "-o", str(tmp_path / "page.html"))
    assert proc.returncode == 0, proc.stderr
    assert "3 turns, 12 sub-calls, 3 findings" in proc.stdout
    assert parse((tmp_path / "page.html").read_text()).count("details", "turn") == 3
    for args, message in (
        ((str(tmp_path / "nope"),), "does not exist"),
        ((str(tmp_path / "page.html"),), "is a file"),
        ((str(tmp_path),), "holds no trajectory.jsonl"),
        ((str(tmp_path / "run"), "-o", str(tmp_path)), "is a directory"),
        ((str(tmp_path / "run"), "-o", str(tmp_path / "x" / "y.html")), "does not exist"),
    ):
        proc = run_cli("view", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("error: ") and message in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.e2e
def test_analyze_writes_the_page_and_a_rerun_sets_the_old_one_aside(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    page = parse((out / "trajectory.html").read_text(encoding="utf-8"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert page.count("details", "turn") == metrics["turns"]
    assert page.count("tr", "finding") == metrics["findings"]
    assert "complete" in page.all_text and "scripted/expert" in page.all_text
    assert injected(page) == []
    proc = run_cli("single-call", str(EXAMPLE), "--model", "scripted/expert", "--out", str(out))
    assert (out / "trajectory.prev.html").is_file()
    baseline = parse((out / "trajectory.html").read_text(encoding="utf-8"))
    assert baseline.count("details", "turn") == 1 and "baseline" in baseline.all_text


@pytest.mark.e2e
def test_a_model_run_on_the_loopback_server_shows_every_call_of_calls_jsonl(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """Real calls.jsonl from the real CLI: every call on the page under its turn, the chart's
    total equal to the run's cost, and the model's hostile text shown as text."""
    dispatch = (
        "paths = sorted(codebase)\n"
        "replies = llm_batch([file_audit_prompt(p) for p in paths])\n"
        "print(len(replies))"
    )
    loopback.enqueue_anthropic(f"{XSS}\n```python\n{dispatch}\n```\n", usage=Usage(2000, 300))
    loopback.enqueue_anthropic(
        "```python\nset_answer('# Report <img src=x onerror=alert(1)>')\n```", usage=Usage(3000, 50)
    )
    loopback.add_rule("Audit the file", Reply(f'{{"findings": []}} {XSS}', usage=Usage(900, 40)))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {
        "anthropic/test-root": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
        "openrouter/test/sub": {"input": 0.12, "output": 0.48, "cache_read": 0.12, "cache_write": 0.12},
    }}))  # fmt: skip
    out = tmp_path / "run"
    proc = run_cli(*loopback_analyze_args(loopback, out, "--prices", str(prices)))
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().split("\n") if line]
    subs = [c for c in calls if c["role"] == "sub"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(subs) == metrics["sub_calls"] == 15
    page = parse((out / "trajectory.html").read_text(encoding="utf-8"))
    assert injected(page) == []
    assert page.count("details", "turn") == 2 and page.count("details", "call") == 15
    assert {f"call-{c['seq']}" for c in calls} <= page.ids()
    assert page.all_text.count("</script><script>document.title='PWNED'</script>") >= 16
    series = cost_series(load_run_view(out))
    assert series.final["total"] == pytest.approx(metrics["total_cost_usd"], abs=1e-12)
    assert f"${metrics['total_cost_usd']:.4f}" in page.all_text


def test_a_resumed_sessions_calls_are_drawn_after_the_first_sessions(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run", RunSpec(turns=2, subs_per_turn=2))
    calls = [json.loads(x) for x in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    # A resume replays turn 1 (a cached sub-call, its clock back at 0), then turn 3 is new.
    calls.append({**calls[1], "seq": 7, "turn": 1, "t": 0.1, "cost_usd": 0.0, "cached": True})
    calls.append({**calls[0], "seq": 8, "turn": 3, "t": 0.5, "cost_usd": 0.5})
    (tmp_path / "run" / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    series = cost_series(load_run_view(tmp_path / "run"))
    first_end = max(c["t"] + c["latency_s"] for c in calls[:6])
    last_x, last_y = series.points["total"][-1]
    assert last_x == pytest.approx(first_end + 0.5 + 1.0)  # after the first session, not at 1.5s
    assert [x for x, _ in series.points["total"]] == sorted(x for x, _ in series.points["total"])
    assert last_y == pytest.approx(2 * 0.004 + 2 * 0.00012 + 0.5)


def test_a_run_that_raises_still_gets_its_page(tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run", RunSpec(finished=False))
    with pytest.raises(RuntimeError, match="boom"), viewer_on_failure(tmp_path / "run"):
        raise RuntimeError("boom")
    assert "NOT FINISHED" in (tmp_path / "run" / "trajectory.html").read_text()


@pytest.mark.e2e  # an offline analyze run: a kernel
@pytest.mark.filterwarnings("ignore:deeprepo. --sandbox process:RuntimeWarning")
def test_the_page_is_written_last_after_the_run_log_holds_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page is only a view of the files on disk: a crash while writing it must find the
    # run folder's files and the run log's copy of the run already complete.
    import asyncio

    import deeprepo.run.analyze as run_analyze
    from deeprepo import AnalyzeOptions, analyze
    from deeprepo.runlog import connect, list_runs, log_path

    seen: list[tuple[str, bool, list[str]]] = []
    real = run_analyze.write_viewer_quietly

    def page(run_dir: Path) -> object:
        db = connect(log_path())
        (row,) = list_runs(db)
        db.close()
        present = sorted(p.name for p in run_dir.iterdir())
        seen.append((row["status"], (run_dir / "trajectory.html").exists(), present))
        return real(run_dir)

    monkeypatch.setattr(run_analyze, "write_viewer_quietly", page)
    out = tmp_path / "run"
    options = AnalyzeOptions(path=str(EXAMPLE), cache=False, out_dir=out, sandbox="process")
    asyncio.run(analyze(options))
    ((status, page_there, present),) = seen
    assert status != "running" and not page_there
    assert {"calls.jsonl", "trajectory.jsonl", "metrics.json", "report.md"} <= set(present)
    assert (out / "trajectory.html").stat().st_size > 0
