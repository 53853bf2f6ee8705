"""Where a run's result goes and what it exits with: ``--format``, ``-o``, ``-q``/``-v``,
``--fail-on``.

The result is one of the run folder's outputs (``json`` is findings.json, ``sarif``
findings.sarif, ``md`` report.md) or the console summary (``table``), written to stdout
(``-o -``, the default) or to a file. While a machine format goes to stdout, everything
else (the plan line, progress, the summary, notes) goes to stderr, so
``deeprepo analyze . --format sarif -o - > x.sarif`` is valid SARIF. The run folder is
written as always.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Finding
from deeprepo.base.records import RunResult
from deeprepo.cli import exits
from deeprepo.cli.progress import RunProgress
from deeprepo.findings.gate import at_or_above
from deeprepo.report.outputs import coverage_line, split_by_scope
from deeprepo.report.setaside import set_aside_line
from deeprepo.report.text import console, visible
from deeprepo.run.options import (
    AnalyzeOptions,
    RunHandle,
    effective_limits,
    plan_line,
    resolve_specs,
)

__all__ = [
    "FORMAT_FILES",
    "Format",
    "ResultView",
    "Threshold",
    "announce",
    "finish",
    "progress_for",
    "render_summary",
]

stdout = Console()
stderr = Console(stderr=True)


class Format(StrEnum):
    """``--format``: the console summary, or one of the run folder's files."""

    table = "table"
    json = "json"
    sarif = "sarif"
    md = "md"


class Threshold(StrEnum):
    """``--fail-on``: the least severe finding that fails the run (exit code 4)."""

    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"


#: The run-folder file each machine format is the content of.
FORMAT_FILES = {"json": "findings.json", "sarif": "findings.sarif", "md": "report.md"}


@dataclass(frozen=True)
class ResultView:
    """How one command shows its result (the CLI's ``--format``, ``-o``, ``-q``, ``-v``,
    ``--fail-on``)."""

    format: str = "table"
    output: str = "-"
    quiet: bool = False
    verbose: bool = False
    fail_on: str | None = None

    @property
    def to_stdout(self) -> bool:
        return self.output == "-"

    @property
    def info(self) -> Console:
        """The console for everything but the result: stderr while the result is a
        machine format on stdout, else stdout."""
        return stderr if self.to_stdout and self.format != "table" else stdout

    def check(self) -> None:
        """Refuse, before any work, an ``-o`` that cannot be written."""
        if self.quiet and self.verbose:
            raise UsageError("-q/--quiet and -v/--verbose contradict each other; give one")
        if self.to_stdout:
            return
        target = Path(self.output)
        if target.is_dir():
            raise UsageError(f"-o {self.output} is a directory; give a file, or - for stdout")
        if not target.parent.is_dir():
            raise UsageError(
                f"-o {self.output}: {target.parent} is not a directory; create it first"
            )


def announce(options: AnalyzeOptions, view: ResultView) -> None:
    """The run's first line: its root and sub models and what it may spend."""
    if view.quiet:
        return
    root, sub = resolve_specs(options)
    line = plan_line(root, sub, effective_limits(options.limits, root, sub))
    view.info.print(line, highlight=False, markup=False, soft_wrap=True)


def progress_for(view: ResultView, label: str) -> AbstractContextManager[RunProgress | None]:
    """The live progress display on stderr; none with ``-q``."""
    return nullcontext() if view.quiet else RunProgress(stderr, label, verbose=view.verbose)


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def render_summary(
    handle: RunHandle, out: Console, *, quiet: bool = False, limit: int = 15
) -> None:
    """The run in a few lines: status and coverage first, headline findings, the rest apart.
    ``quiet`` keeps the result (status, findings, notes) and drops the pointers around it."""
    r = handle.result
    if handle.offline and not quiet:
        out.print(
            "[bold]Offline engine[/]: scripted root policy + static analyzers, no LLM called. "
            "Pass --root/--sub (e.g. --root anthropic/claude-sonnet-4-5) for a model-driven run.",
            highlight=False,
        )
    headline, rest = split_by_scope(r.findings)
    code = exits.for_result(r)
    status = {
        exits.OK: "[green]complete[/]",
        exits.ERROR: "[bold red]ERROR[/]",
        exits.INTERRUPTED: "[bold yellow]INTERRUPTED[/]",
    }.get(code, "[bold yellow]INCOMPLETE[/]")
    # Status, coverage and why in one line; the stop detail is part of the why.
    out.print(f"{status} · {console(coverage_line(r))}", highlight=False)
    out.print(
        f"stop: {console(r.stop_reason)}"
        + f" · turns {r.num_turns} · worker calls {r.sub_calls}"
        + (f" ({r.sub_calls_refused} refused)" if r.sub_calls_refused else "")
        + (f" ({r.sub_calls_failed} failed)" if r.sub_calls_failed else "")
        + f" · findings {len(headline)}"
        + (f" (+{len(r.findings) - len(headline)} in other scopes)" if rest else "")
        + f" · cost {_money(r.total_cost_usd)} · {r.wall_seconds:.1f}s",
        highlight=False,
    )
    _gaps(out, r)
    if headline:
        _findings_table(out, headline, limit)
    if rest:
        counts = " · ".join(f"{console(scope)} {len(group)}" for scope, group in rest.items())
        out.print(
            f"Other scopes (kept apart, not counted above): {counts}; listed in report.md",
            highlight=False,
        )
    aside = set_aside_line(r)
    if aside is not None:
        out.print(f"{aside}; listed in report.md", highlight=False)
    if r.unaudited:
        shown = ", ".join(console(p) for p in r.unaudited[:5])
        more = f" and {len(r.unaudited) - 5} more" if len(r.unaudited) > 5 else ""
        out.print(
            f"Not audited: {shown}{more} (all in metrics.json: unaudited_paths)", highlight=False
        )
    for note in r.notes:
        out.print(f"[yellow]note[/]: {console(note)}", highlight=False)
    if quiet:
        return
    out.print(f"Report: {console(handle.out_dir / 'report.md')}", highlight=False)
    if handle.run_id is not None:
        out.print(f"Run log: {handle.run_id} (deeprepo runs show {handle.run_id})", highlight=False)


def _gaps(out: Console, r: RunResult, limit: int = 5) -> None:
    """What the run claims it did not do, right under its status: files an analyzer could
    not read (the first few; all in metrics.json) and findings a cap cut."""
    if r.not_analysed:
        paths = sorted({g.path for g in r.not_analysed})
        tools = ", ".join(sorted({g.tool for g in r.not_analysed}))
        shown = ", ".join(console(p) for p in paths[:limit])
        more = f" and {len(paths) - limit:,} more" if len(paths) > limit else ""
        parser = f"; Python parsed by {console(r.python_parser)}" if r.python_parser else ""
        out.print(
            f"[yellow]Not analysed[/] ({len(paths):,}, by {console(tools)}{parser}): "
            f"{shown}{more} (all in metrics.json: not_analysed)",
            highlight=False,
        )
    if r.findings_cut:
        out.print(
            f"[yellow]Findings cut[/]: {r.findings_cut:,} dropped by a cap, not reported "
            "(metrics.json: findings_cut)",
            highlight=False,
        )


def _findings_table(out: Console, findings: list[Finding], limit: int) -> None:
    """Severity, CWE, ``file:line`` and title, one finding a line. The location is never
    cut: the title gives way (ellipsis), or goes to its own line on a narrow terminal."""
    rows = [
        (f.severity, visible(f.cwe or ""), visible(f"{f.file}:{f.start_line}"), visible(f.title))
        for f in findings[:limit]
    ]
    sev_w = max(8, *(len(r[0]) for r in rows))
    cwe_w = max(3, *(len(r[1]) for r in rows))
    loc_w = max(8, *(len(r[2]) for r in rows))
    width = out.width
    header = f"{'severity':<{sev_w}}  {'cwe':<{cwe_w}}  {'location':<{loc_w}}  title"
    out.print(Text(header[:width], style="bold"), soft_wrap=True)
    for sev, cwe, loc, title in rows:
        head = f"{sev:<{sev_w}}  {cwe:<{cwe_w}}  "
        room = width - len(head) - loc_w - 2
        if room >= 12:
            shown = title if len(title) <= room else title[: room - 1] + "…"
            out.print(Text(f"{head}{loc:<{loc_w}}  {shown}"), soft_wrap=True)
        else:  # too narrow for both: the location whole, the title under it
            out.print(Text(f"{head}{loc}"), soft_wrap=True)
            indent = " " * 4
            shown = title if len(title) <= width - 4 else title[: max(1, width - 5)] + "…"
            out.print(Text(f"{indent}{shown}"), soft_wrap=True)
    if len(findings) > limit:
        out.print(f"… and {len(findings) - limit} more in report.md", highlight=False)


def _write_result(handle: RunHandle, view: ResultView) -> None:
    """The result in ``view.format`` to stdout or ``view.output``."""
    limit = 10**9 if view.verbose else 15
    if view.format == "table":
        if view.to_stdout:
            render_summary(handle, stdout, quiet=view.quiet, limit=limit)
            return
        with Path(view.output).open("w", encoding="utf-8") as fh:
            render_summary(handle, Console(file=fh, width=100, no_color=True), limit=limit)
    else:
        text = (handle.out_dir / FORMAT_FILES[view.format]).read_text(encoding="utf-8")
        text += "" if text.endswith("\n") else "\n"
        if view.to_stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            Path(view.output).write_text(text, encoding="utf-8")
    if not view.quiet:  # the result went elsewhere: the summary still reaches the reader
        render_summary(handle, view.info, limit=limit)


def finish(handle: RunHandle, view: ResultView, resume_hint: str) -> None:
    """Write the result, and end the process with its exit code (see ``exits``)."""
    _write_result(handle, view)
    headline, _ = split_by_scope(handle.result.findings)
    gated = at_or_above(headline, view.fail_on) if view.fail_on else []
    code = exits.for_result(handle.result, len(gated))
    if code == exits.FINDINGS:
        stderr.print(
            f"fail-on {view.fail_on}: {len(gated)} finding(s) at or above {view.fail_on} "
            f"(exit code {exits.FINDINGS})",
            highlight=False,
        )
    if code == exits.INTERRUPTED:
        stderr.print(
            f"interrupted: partial outputs in {console(handle.out_dir)}; continue with: "
            f"{console(resume_hint)}",
            highlight=False,
            soft_wrap=True,
        )
    if code != exits.OK:
        raise typer.Exit(code)
