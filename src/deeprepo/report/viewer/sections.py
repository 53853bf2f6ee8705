"""The page's sections above the turns: run summary, cost over time, findings."""

from __future__ import annotations

from html import escape
from typing import Any

from deeprepo.base.chat import TOKEN_KEYS
from deeprepo.base.finding import SEVERITIES
from deeprepo.report.viewer.costchart import cost_series, cost_svg
from deeprepo.report.viewer.markup import Cuts, Limits, h, money, whole
from deeprepo.report.viewer.runview import RunView, num, opt_num, text

__all__ = ["chart_section", "findings_section", "summary_section"]


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
        if stop == "interrupted":
            return "INTERRUPTED", "bad", reason
        # As the exit code says (cli/exits.py): every worker call failing is an error too.
        if stop == "error" or (not num(m.get("sub_calls")) and num(m.get("sub_calls_failed"))):
            return "ERROR", "err-b", reason or text(m.get("stop_detail"))
        return "INCOMPLETE", "bad", reason
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
        line = f"audited {whole(m.get('files_covered'))} of {whole(m.get('coverable_files'))} files"
        reason = text(m.get("incomplete_reason"))
        return line + (f": {reason}" if reason and m.get("complete") is not True else "")
    if end is not None and "files_audited" in end:
        line = (
            f"audited {whole(end.get('files_audited'))} of {whole(end.get('files_to_audit'))} files"
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


def summary_section(view: RunView, cuts: Cuts) -> list[str]:
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
            f"{whole(m.get('sub_calls'))} answered · {whole(m.get('sub_calls_refused'))} refused by "
            f"a budget · {whole(m.get('sub_calls_failed'))} failed"
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
        ("Total cost", h(money(total)) + ("" if view.metrics or view.end else " (not recorded)")),
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
            # Rejected replies (billed) and requests that failed with no reply, together.
            r = {**r, "failed": num(r.get("failed_calls")) + num(r.get("failed_requests"))}
            out.append(
                f"<tr><td>{h(r.get('role'))}</td><td>{h(r.get('model'))}</td>"
                + "".join(
                    f'<td class="n">{whole(r.get(k))}</td>'
                    for k in ("calls", "cached_calls", "failed", *TOKEN_KEYS)
                )
                + f'<td class="n">{h(money(opt_num(r.get("cost_usd"))))}</td></tr>'
            )
        out.append("</table>")
    notes = [text(n) for n in m.get("notes", []) if n] if isinstance(m.get("notes"), list) else []
    problems = view.problems
    if notes or problems:
        out.append("<h4>Notes</h4><ul>")
        out += [f"<li>{h(n)}</li>" for n in notes]
        out += [f'<li class="warn">{h(p)}</li>' for p in problems]
        out.append("</ul>")
    out.append("</section>")
    return out


def _nothing_spent(view: RunView) -> str:
    """Why the cost is $0: the built-in models only where the run was offline; a run with a
    provider's model that spent nothing (its calls failed, or came from the cache) says so."""
    offline = (view.metrics or {}).get("offline", (view.start or {}).get("offline"))
    if offline is True:
        return " Nothing was spent: built-in models and cached replies cost $0."
    return (
        " Nothing was spent: no call was billed (a call that fails before a reply, and a "
        "cached reply, cost $0)."
    )


def chart_section(view: RunView) -> list[str]:
    series = cost_series(view)
    unknown = (
        f" {series.unknown_calls:,} call(s) with an unknown price are not in the lines."
        if series.unknown_calls
        else _nothing_spent(view)
        if not series.final.get("total")
        else ""
    )
    return [
        '<section id="cost"><h2>Cost over time</h2>',
        cost_svg(series),
        f'<p class="muted">Cumulative USD by role, from {escape(series.source)}.{unknown}</p>',
        "</section>",
    ]


def findings_section(view: RunView, limits: Limits, cuts: Cuts) -> list[str]:
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
