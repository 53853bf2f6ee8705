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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html import escape
from pathlib import Path

from deeprepo.base.safefile import write_atomic
from deeprepo.base.version import VERSION
from deeprepo.report.viewer.markup import Cuts, Limits, h
from deeprepo.report.viewer.runview import RunView, load_run_view, text
from deeprepo.report.viewer.sections import chart_section, findings_section, summary_section
from deeprepo.report.viewer.turns import turns_section

__all__ = [
    "VIEWER_FILE",
    "ViewerPage",
    "render_viewer",
    "viewer_on_failure",
    "write_viewer",
    "write_viewer_quietly",
]

VIEWER_FILE = "trajectory.html"

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
    findings = findings_section(view, limits, cuts)
    turns = turns_section(view, limits, cuts)
    body = [
        "<main>",
        f"<h1>deeprepo run: {h(repo or view.run_dir.name)}</h1>",
        f'<p class="muted">Run folder {h(str(view.run_dir))} · started '
        f"{h((view.start or {}).get('started_at') or 'unknown')} · deeprepo "
        f"{h((view.start or {}).get('deeprepo_version') or '?')}</p>",
        *_cut_notice(cut_lines := _cut_lines(cuts, limits)),
        *summary_section(view, cuts),
        *chart_section(view),
        *findings,
        *turns,
        f'<p class="muted">Page written by deeprepo {escape(VERSION)} from the run folder; '
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
    #: What the run folder held that the page could not read or left out (said on the page).
    problems: list[str]


def write_viewer(
    run_dir: Path, out: Path | None = None, limits: Limits | None = None
) -> ViewerPage:
    """Render ``run_dir`` into ``out`` (default ``run_dir/trajectory.html``), atomically.
    Raises :class:`~deeprepo.base.errors.UsageError` when ``run_dir`` holds no trajectory."""
    view = load_run_view(run_dir)
    target = out or run_dir / VIEWER_FILE
    page, cut = _render(view, limits or Limits())
    write_atomic(target, page)
    return ViewerPage(
        path=target,
        turns=len(view.turns),
        sub_calls=None if view.calls is None else sum(c.role != "root" for c in view.calls),
        findings=len(view.findings or []),
        cut=cut,
        problems=list(view.problems),
    )


def write_viewer_quietly(run_dir: Path) -> ViewerPage | None:
    """:func:`write_viewer` at the end of a run: a page that cannot be written is a warning,
    never the run's failure (its other outputs are already on disk). Nothing is written for a
    folder with no trajectory.jsonl (outputs written by a library caller, not by a run)."""
    if not (run_dir / "trajectory.jsonl").is_file():
        return None
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
