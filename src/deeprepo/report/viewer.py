"""``trajectory.html``: one self-contained page per run folder, readable with no network.

The page holds the run summary, cost over time (inline SVG), the findings, and every turn
in order (the root's reply, the code it ran, the REPL output) with its sub-calls grouped
under it (prompt, response, tokens, cost, latency), collapsible with ``<details>``.

Safety: everything on the page that came from a model or a repository goes through
:func:`h` / :func:`hb` (``html.escape(..., quote=True)`` after control and bidi characters
are made visible). The page carries no script at all and a Content-Security-Policy that
forbids every load (scripts, images, fonts, frames, network); its one ``<style>`` is allowed
by hash. Links are never built from model text.

Size: a run with thousands of sub-calls must still give a page a browser opens quickly, so
texts are cut (head and tail kept) and, past a budget, sub-calls are listed without their
text; the page says what was cut and where the full text is (:class:`Limits`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from deeprepo import __version__
from deeprepo.findings.model import SEVERITIES
from deeprepo.report.costchart import cost_series, cost_svg
from deeprepo.report.runview import CallRecord, RunView, load_run_view, num, opt_num, text
from deeprepo.textsafe import escape_name, escape_text

__all__ = [
    "Limits",
    "ViewerPage",
    "render_viewer",
    "viewer_on_failure",
    "write_viewer",
    "write_viewer_quietly",
]

VIEWER_FILE = "trajectory.html"


@dataclass(frozen=True)
class Limits:
    """How much text the page holds (characters); the rest stays in the run's files."""

    turn_field: int = 60_000  # a reply, a code block, an output
    call_field_max: int = 8_000  # a sub-call's prompt or response, when there are few calls
    call_field_min: int = 600  # … shrinking with the number of calls down to this
    call_text_budget: int = 6_000_000  # all sub-call text on the page together
    call_rows: int = 5_000  # sub-calls listed at all (the rest counted)
    findings: int = 2_000


@dataclass
class Cuts:
    """What the page left out, said at its top."""

    fields: int = 0  # texts shortened
    chars: int = 0  # characters left out of them
    calls_without_text: int = 0
    calls_not_listed: int = 0
    findings_not_listed: int = 0
    call_field_limit: int = 0
    notes: list[str] = field(default_factory=list)


def h(value: object) -> str:
    """One line of untrusted text for HTML: controls shown as escapes, markup as text."""
    return escape(escape_name(text(value) if not isinstance(value, str) else value), quote=True)


def hb(value: str) -> str:
    """Untrusted multi-line text for a ``<pre>``: line breaks and tabs kept."""
    return escape(escape_text(value), quote=True)


def _pre(value: str, limit: int, cuts: Cuts, where: str, cls: str = "") -> str:
    """A ``<pre>`` of untrusted text, cut to ``limit`` characters (head and tail kept)."""
    if len(value) <= limit:
        body = hb(value)
    else:
        head = limit * 3 // 4
        tail = limit - head
        removed = len(value) - limit
        cuts.fields += 1
        cuts.chars += removed
        body = (
            f'{hb(value[:head])}<span class="cut">[… {removed:,} characters cut here; the whole '
            f"text is in {escape(where)} …]</span>{hb(value[len(value) - tail :])}"
        )
    return f'<pre class="{cls}">{body}</pre>' if cls else f"<pre>{body}</pre>"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _int(value: object) -> str:
    return f"{int(num(value)):,}"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#111827;background:#fff}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb}
h4{margin:10px 0 4px;font-size:13px;color:#374151}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f9fafb}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#f8fafc;border:1px solid #e5e7eb;padding:8px;margin:4px 0;max-height:36em;overflow:auto;font:12px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
pre.out{background:#f0fdf4}pre.err{background:#fef2f2}
details{margin:4px 0}summary{cursor:pointer}
details.turn{border:1px solid #d1d5db;border-radius:6px;padding:6px 10px;margin:10px 0}
details.turn>summary{font-weight:600}
details.call{border-left:3px solid #fcd34d;padding-left:8px}details.call.failed{border-left-color:#dc2626}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;font-weight:700}
.ok{background:#dcfce7;color:#166534}.bad{background:#fef3c7;color:#92400e}.err-b{background:#fee2e2;color:#991b1b}
.cut,.muted{color:#6b7280;font-style:italic}.warn{background:#fffbeb;border:1px solid #fcd34d;padding:6px 10px}
.sev-critical,.sev-high{color:#b91c1c;font-weight:600}.sev-medium{color:#b45309}.sev-low,.sev-info{color:#4b5563}
svg.chart{max-width:100%;height:auto;font:11px system-ui,sans-serif}svg.chart text{fill:#374151}
.resume{border-top:2px dashed #9ca3af;margin:14px 0;padding-top:6px;color:#4b5563}
""".strip()


def _csp(css: str) -> str:
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    return (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; font-src 'none'; "
        "script-src 'none'; connect-src 'none'; frame-src 'none'; object-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )


def _metric(view: RunView, key: str) -> Any:
    return (view.metrics or {}).get(key)


def _status(view: RunView) -> tuple[str, str, str]:
    """(badge text, badge class, why) from metrics.json, else the end record, else the turns."""
    m, end = view.metrics, view.end
    if m is not None:
        reason = text(m.get("incomplete_reason"))
        stop = text(m.get("stop_reason"))
        if m.get("complete") is True:
            return "complete", "ok", ""
        return (
            (
                "INTERRUPTED"
                if stop == "interrupted"
                else "ERROR"
                if stop == "error"
                else "INCOMPLETE"
            ),
            "err-b" if stop == "error" else "bad",
            reason,
        )
    if end is not None:
        stop = text(end.get("stop_reason"))
        why = text(end.get("incomplete_reason")) or text(end.get("stop_detail"))
        if end.get("incomplete") is False:
            return (
                "complete",
                "ok",
                "metrics.json is missing: the figures come from trajectory.jsonl",
            )
        return "INCOMPLETE", "bad", why or f"stop: {stop}"
    return (
        "NOT FINISHED",
        "err-b",
        f"the run stopped before its end record (killed or crashed) after {len(view.turns)} "
        "recorded turn(s); what is below is what it recorded",
    )


def _coverage(view: RunView) -> str:
    m, end = view.metrics, view.end
    if m is not None:
        line = f"audited {_int(m.get('files_covered'))} of {_int(m.get('coverable_files'))} files"
        reason = text(m.get("incomplete_reason"))
        return line + (f": {reason}" if reason and m.get("complete") is not True else "")
    if end is not None and "files_audited" in end:
        line = (
            f"audited {_int(end.get('files_audited'))} of {_int(end.get('files_to_audit'))} files"
        )
        reason = text(end.get("incomplete_reason"))
        return line + (f": {reason}" if reason else "")
    return "unknown (no metrics.json and no end record)"


def _usage_rows(view: RunView) -> tuple[list[dict[str, Any]], str]:
    if isinstance(u := _metric(view, "usage"), list):
        return [r for r in u if isinstance(r, dict)], "metrics.json"
    if view.end is not None and isinstance(u := view.end.get("ledger"), list):
        return [r for r in u if isinstance(r, dict)], "the end record"
    for turn in reversed(view.turns):
        if isinstance(u := turn.get("ledger"), list):
            return [r for r in u if isinstance(r, dict)], "the ledger after the last recorded turn"
    return [], ""


def _summary(view: RunView, cuts: Cuts) -> list[str]:
    start, m = view.start or {}, view.metrics or {}
    badge, cls, why = _status(view)
    root_model = m.get("root_model") or start.get("root_model") or start.get("model")
    sub_model = m.get("sub_model") or start.get("sub_model") or "none"
    mode = m.get("mode") or start.get("mode") or "rlm"
    total = opt_num(m.get("total_cost_usd")) if view.metrics else None
    if view.metrics is None and view.end is not None:
        total = opt_num(view.end.get("total_cost_usd"))
    wall = m.get("wall_seconds", (view.end or {}).get("wall_seconds"))
    rows = [
        ("Mode", h(mode)),
        ("Root model", f"<code>{h(root_model or 'unknown')}</code>"),
        ("Sub model", f"<code>{h(sub_model)}</code>"),
        ("Coverage", h(_coverage(view))),
        (
            "Stop reason",
            h(text(m.get("stop_reason") or (view.end or {}).get("stop_reason")) or "none recorded")
            + (f" ({h(m.get('stop_detail'))})" if m.get("stop_detail") else ""),
        ),
        ("Turns", f"{len(view.turns):,} recorded"),
    ]
    if view.metrics is not None:
        calls = (
            f"{_int(m.get('sub_calls'))} answered · {_int(m.get('sub_calls_refused'))} refused by "
            f"a budget · {_int(m.get('sub_calls_failed'))} failed"
        )
        rows.append(("Worker calls", calls))
    if view.calls is not None:
        subs = [c for c in view.calls if c.role == "sub"]
        rows.append(
            (
                "calls.jsonl",
                f"{len(view.calls):,} model calls ({len(subs):,} sub, {len(view.calls) - len(subs):,} "
                f"root; {sum(c.cached for c in view.calls):,} cached, "
                f"{sum(bool(c.error) for c in view.calls):,} failed)",
            )
        )
    rows += [
        ("Wall time", f"{num(wall):.1f} s" if wall is not None else "unknown"),
        ("Total cost", h(_money(total)) + ("" if view.metrics or view.end else " (not recorded)")),
    ]
    out = [
        '<section id="summary"><h2>Run summary</h2>',
        f'<p><span class="badge {cls}" id="status">{escape(badge)}</span> '
        f"{h(_coverage(view)) if badge == 'complete' else h(why)}</p>",
        "<table>",
        *(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows),
        "</table>",
    ]
    usage, source = _usage_rows(view)
    if usage:
        out += [
            f"<h4>Tokens and cost per role (from {escape(source)})</h4><table><tr><th>role</th>"
            "<th>model</th><th>calls</th><th>cached</th><th>failed</th><th>input</th><th>output"
            "</th><th>cache read</th><th>cache write</th><th>cost</th></tr>"
        ]
        for r in usage:
            out.append(
                f"<tr><td>{h(r.get('role'))}</td><td>{h(r.get('model'))}</td>"
                + "".join(
                    f'<td class="n">{_int(r.get(k))}</td>'
                    for k in (
                        "calls",
                        "cached_calls",
                        "failed_calls",
                        "input_tokens",
                        "output_tokens",
                        "cache_read_tokens",
                        "cache_write_tokens",
                    )
                )
                + f'<td class="n">{h(_money(opt_num(r.get("cost_usd"))))}</td></tr>'
            )
        out.append("</table>")
    notes = [text(n) for n in m.get("notes", []) if n] if isinstance(m.get("notes"), list) else []
    problems = view.problems + cuts.notes
    if notes or problems:
        out.append("<h4>Notes</h4><ul>")
        out += [f"<li>{h(n)}</li>" for n in notes]
        out += [f'<li class="warn">{h(p)}</li>' for p in problems]
        out.append("</ul>")
    out.append("</section>")
    return out


def _chart(view: RunView) -> list[str]:
    series = cost_series(view)
    unknown = (
        f" {series.unknown_calls:,} call(s) with an unknown price are not in the lines."
        if series.unknown_calls
        else ""
    )
    return [
        '<section id="cost"><h2>Cost over time</h2>',
        cost_svg(series),
        f'<p class="muted">Cumulative USD by role, from {escape(series.source)}.{unknown}</p>',
        "</section>",
    ]


def _findings(view: RunView, limits: Limits, cuts: Cuts) -> list[str]:
    out = ['<section id="findings"><h2>Findings</h2>']
    if view.findings is None:
        return [*out, '<p class="muted">No findings.json in this run folder.</p></section>']
    if not view.findings:
        return [*out, "<p>No findings recorded.</p></section>"]
    shown = view.findings[: limits.findings]
    cuts.findings_not_listed = len(view.findings) - len(shown)
    out.append(
        f"<p>{len(view.findings):,} findings, most severe first.</p><table><tr><th>severity</th>"
        "<th>location</th><th>CWE</th><th>kind</th><th>scope</th><th>title and detail</th></tr>"
    )
    for f in shown:
        sev = text(f.get("severity"))
        sev_cls = sev if sev in SEVERITIES else "info"
        start, end = int(num(f.get("start_line"))), int(num(f.get("end_line")))
        loc = f"{text(f.get('file'))}:{start}" + (f"-{end}" if end and end != start else "")
        detail = "".join(
            f'<br><span class="muted">{label}</span>{h(f.get(key))}'
            for key, label in (("detail", ""), ("fix", "Fix: "))
            if f.get(key)
        )
        out.append(
            f'<tr class="finding"><td class="sev-{sev_cls}">{h(sev)}</td><td><code>{h(loc)}'
            f"</code></td><td>{h(f.get('cwe') or '')}</td><td>{h(f.get('kind'))}</td>"
            f"<td>{h(f.get('scope'))}</td><td>{h(f.get('title'))}{detail}</td></tr>"
        )
    out.append("</table>")
    if cuts.findings_not_listed:
        out.append(
            f'<p class="cut">… and {cuts.findings_not_listed:,} more findings, not listed here '
            "(all in findings.json).</p>"
        )
    return [*out, "</section>"]


def _call_line(c: CallRecord) -> str:
    parts = [
        f"#{c.seq}",
        h(c.model),
        f"{c.input_tokens:,} in / {c.output_tokens:,} out"
        + (f" / {c.cache_read_tokens:,} cache read" if c.cache_read_tokens else "")
        + (f" / {c.cache_write_tokens:,} cache write" if c.cache_write_tokens else ""),
        escape(_money(c.cost_usd)),
        f"{c.latency_s:.2f} s",
        f"at {c.t:.1f} s",
    ]
    if c.cached:
        parts.append("cached")
    if c.error:
        parts.append(f'<b class="sev-high">failed: {h(c.error[:200])}</b>')
    return " · ".join(parts)


class _CallText:
    """Hands out the sub-call text budget in call order."""

    def __init__(self, n_calls: int, limits: Limits, cuts: Cuts) -> None:
        per = limits.call_text_budget // max(1, 2 * n_calls)
        self.field = max(limits.call_field_min, min(limits.call_field_max, per))
        self.left = limits.call_text_budget
        cuts.call_field_limit = self.field

    def take(self, c: CallRecord) -> bool:
        want = min(len(c.prompt), self.field) + min(len(c.response or ""), self.field)
        if want > self.left:
            return False
        self.left -= want + min(len(c.system), self.field)
        return True


def _call(c: CallRecord, budget: _CallText, cuts: Cuts) -> str:
    failed = " failed" if c.error else ""
    head = f'<details class="call{failed}" id="call-{c.seq}"><summary>{_call_line(c)}</summary>'
    if not budget.take(c):
        cuts.calls_without_text += 1
        return (
            head
            + '<p class="cut">Text not shown: the page\'s text budget is spent (see calls.jsonl).</p></details>'
        )
    where = f"calls.jsonl (seq {c.seq})"
    out = [head]
    if c.system:
        out += ["<h4>System</h4>", _pre(c.system, budget.field, cuts, where)]
    out += ["<h4>Prompt</h4>", _pre(c.prompt, budget.field, cuts, where)]
    if c.response is not None:
        out += ["<h4>Response</h4>", _pre(c.response, budget.field, cuts, where, "out")]
    else:
        out.append('<p class="muted">No response.</p>')
    if c.error:
        out += ["<h4>Error</h4>", _pre(c.error, budget.field, cuts, where, "err")]
    facts = [f"finish reason: {h(c.finish_reason)}"] if c.finish_reason else []
    if c.truncated:
        facts.append("prompt or response was cut to 32 KiB when recorded")
    if facts:
        out.append(f'<p class="muted">{"; ".join(facts)}</p>')
    return "".join(out) + "</details>"


def _turn(
    index: int,
    turn: dict[str, Any] | None,
    calls: list[CallRecord],
    ctx: _TurnContext,
) -> list[str]:
    subs = [c for c in calls if c.role != "root"]
    roots = [c for c in calls if c.role == "root"]
    bits = [f"Turn {index}"]
    if turn is None:
        bits.append("not recorded: the run ended during this turn")
    else:
        bits += [
            f"{_int(turn.get('input_tokens'))} in / {_int(turn.get('output_tokens'))} out tokens",
            escape(_money(opt_num(turn.get("cost_usd")))),
            f"{num(turn.get('seconds')):.2f} s",
            f"{_int(turn.get('sub_calls'))} sub-call(s)",
        ]
        if num(turn.get("findings_added")):
            bits.append(f"+{_int(turn.get('findings_added'))} finding(s)")
        if turn.get("answer_ready") is True:
            bits.append("answer set")
        if turn.get("final_turn") is True:
            bits.append("final submit turn")
        if turn.get("error"):
            bits.append(f'<span class="sev-high">error: {h(turn.get("error"))}</span>')
    is_open = " open" if ctx.open_turns else ""
    out = [
        f'<details class="turn" id="turn-{index}"{is_open}><summary>{" · ".join(bits)}</summary>'
    ]
    where = f"trajectory.jsonl (turn {index})"
    if turn is not None:
        out += [
            "<h4>Root reply</h4>",
            _pre(text(turn.get("reply")), ctx.limits.turn_field, ctx.cuts, where),
        ]
        blocks = turn.get("code_blocks")
        if isinstance(blocks, list) and blocks:
            out.append(f"<details><summary>Code run: {len(blocks)} block(s)</summary>")
            out += [_pre(text(b), ctx.limits.turn_field, ctx.cuts, where) for b in blocks]
            out.append("</details>")
        out += [
            "<h4>REPL output (what the root was shown next)</h4>",
            _pre(text(turn.get("output")), ctx.limits.turn_field, ctx.cuts, where, "out"),
        ]
    for c in roots:
        out.append(f'<p class="muted" id="call-{c.seq}">Root call: {_call_line(c)}</p>')
    if subs:
        cost = sum(c.cost_usd or 0.0 for c in subs)
        unknown = sum(c.cost_usd is None for c in subs)
        failed = sum(bool(c.error) for c in subs)
        listed = subs[: max(0, ctx.limits.call_rows - ctx.listed)]
        ctx.listed += len(listed)
        ctx.cuts.calls_not_listed += len(subs) - len(listed)
        out.append(
            f'<details class="subcalls"><summary>{len(subs):,} sub-call(s) · '
            f"{sum(c.input_tokens for c in subs):,} in / {sum(c.output_tokens for c in subs):,} "
            f"out tokens · ${cost:.4f}"
            + (f" + {unknown} unknown" if unknown else "")
            + (f" · {failed} failed" if failed else "")
            + "</summary>"
        )
        out += [_call(c, ctx.budget, ctx.cuts) for c in listed]
        if len(listed) < len(subs):
            out.append(
                f'<p class="cut">{len(subs) - len(listed):,} more sub-calls not listed (the page '
                f"lists {ctx.limits.call_rows:,} at most; all are in calls.jsonl).</p>"
            )
        out.append("</details>")
    elif turn is not None and ctx.has_calls and num(turn.get("sub_calls")):
        out.append('<p class="muted">No sub-call of this turn is in calls.jsonl.</p>')
    return [*out, "</details>"]


@dataclass
class _TurnContext:
    limits: Limits
    cuts: Cuts
    budget: _CallText
    open_turns: bool
    has_calls: bool
    listed: int = 0


def _turns(view: RunView, limits: Limits, cuts: Cuts) -> list[str]:
    by_turn = view.calls_by_turn()
    n_subs = sum(c.role != "root" for c in view.calls or [])
    ctx = _TurnContext(
        limits, cuts, _CallText(n_subs, limits, cuts), len(view.turns) <= 12, view.calls is not None
    )
    out = ['<section id="turns"><h2>Turns</h2>']
    if view.calls is None:
        out.append(
            '<p class="muted">This run folder has no calls.jsonl (a run made before deeprepo '
            "recorded each call): sub-calls are counted per turn but their text is not shown.</p>"
        )
    seen: set[int] = set()
    for event in view.events:
        if event.get("type") == "resume":
            out.append(
                f'<div class="resume">Resumed ({h(event.get("resumed_at"))}): '
                f"{_int(event.get('replayed_turns'))} turn(s) replayed from the record.</div>"
            )
            continue
        index = int(num(event.get("index"), len(seen) + 1))
        calls = by_turn.get(index, []) if index not in seen else []
        seen.add(index)
        out += _turn(index, event, calls, ctx)
    for index in sorted(set(by_turn) - seen):
        out += _turn(index, None, by_turn[index], ctx)
    if not view.events and not by_turn:
        out.append("<p>No turn was recorded.</p>")
    return [*out, "</section>"]


def _cut_lines(cuts: Cuts, limits: Limits) -> list[str]:
    said = []
    if cuts.fields:
        said.append(
            f"{cuts.fields:,} text(s) shortened ({cuts.chars:,} characters left out; head and "
            f"tail kept; turn texts to {limits.turn_field:,} and sub-call texts to "
            f"{cuts.call_field_limit:,} characters each)"
        )
    if cuts.calls_without_text:
        said.append(f"{cuts.calls_without_text:,} sub-call(s) listed without their text")
    if cuts.calls_not_listed:
        said.append(f"{cuts.calls_not_listed:,} sub-call(s) not listed")
    if cuts.findings_not_listed:
        said.append(f"{cuts.findings_not_listed:,} finding(s) not listed")
    return said


def _cut_notice(said: list[str]) -> list[str]:
    if not said:
        return []
    return [
        f'<p class="warn" id="cut-notice">This page is cut to stay usable: {"; ".join(said)}. '
        "The run folder's trajectory.jsonl, calls.jsonl and findings.json hold everything.</p>"
    ]


def render_viewer(view: RunView, limits: Limits | None = None) -> str:
    """The page for one run folder, as a string."""
    return _render(view, limits or Limits())[0]


def _render(view: RunView, limits: Limits) -> tuple[str, list[str]]:
    cuts = Cuts()
    repo = text(((view.metrics or {}).get("codebase") or {}).get("root")) or text(
        (view.start or {}).get("path")
    )
    # Findings and turns first: they count the cuts the notice at the top reports.
    findings = _findings(view, limits, cuts)
    turns = _turns(view, limits, cuts)
    body = [
        "<main>",
        f"<h1>deeprepo run: {h(repo or view.run_dir.name)}</h1>",
        f'<p class="muted">Run folder {h(str(view.run_dir))} · started '
        f"{h((view.start or {}).get('started_at') or 'unknown')} · deeprepo "
        f"{h((view.start or {}).get('deeprepo_version') or '?')}</p>",
        *_cut_notice(cut_lines := _cut_lines(cuts, limits)),
        *_summary(view, cuts),
        *_chart(view),
        *findings,
        *turns,
        f'<p class="muted">Page written by deeprepo {escape(__version__)} from the run folder; '
        "it loads nothing from the network.</p></main>",
    ]
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_csp(CSS)}">',
            '<meta name="referrer" content="no-referrer">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>deeprepo run: {h(repo or view.run_dir.name)}</title>",
            f"<style>{CSS}</style></head><body>",
            *body,
            "</body></html>",
            "",
        ]
    )
    return page, cut_lines


@dataclass(frozen=True)
class ViewerPage:
    """A page written: where, what it shows, and what it had to cut."""

    path: Path
    turns: int
    sub_calls: int | None  # None: the run folder has no calls.jsonl
    findings: int
    cut: list[str]


def write_viewer(
    run_dir: Path, out: Path | None = None, limits: Limits | None = None
) -> ViewerPage:
    """Render ``run_dir`` into ``out`` (default ``run_dir/trajectory.html``), atomically.
    Raises :class:`~deeprepo.errors.UsageError` when ``run_dir`` holds no trajectory."""
    view = load_run_view(run_dir)
    target = out or run_dir / VIEWER_FILE
    page, cut = _render(view, limits or Limits())
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return ViewerPage(
        path=target,
        turns=len(view.turns),
        sub_calls=None if view.calls is None else sum(c.role != "root" for c in view.calls),
        findings=len(view.findings or []),
        cut=cut,
    )


def write_viewer_quietly(run_dir: Path) -> ViewerPage | None:
    """:func:`write_viewer` at the end of a run: a page that cannot be written is a warning,
    never the run's failure (its other outputs are already on disk)."""
    try:
        return write_viewer(run_dir)
    except Exception as exc:  # the run's result must survive a viewer bug or a full disk
        warnings.warn(f"{VIEWER_FILE} not written: {exc}", stacklevel=2)
        return None


@contextmanager
def viewer_on_failure(run_dir: Path) -> Iterator[None]:
    """Write the page from what is on disk when the block raises (a crash, Ctrl-C outside the
    episode), then let the exception go on: a run that died still gets its page."""
    try:
        yield
    except BaseException:
        if (run_dir / "trajectory.jsonl").is_file():
            write_viewer_quietly(run_dir)
        raise
