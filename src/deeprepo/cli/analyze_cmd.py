"""``deeprepo analyze`` and ``deeprepo baseline``."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Finding
from deeprepo.cli import exits
from deeprepo.cli.progress import RunProgress
from deeprepo.cli.signals import run_interruptible
from deeprepo.report.outputs import coverage_line, split_by_scope
from deeprepo.report.text import console, visible
from deeprepo.run.analyze import AnalyzeOptions, RunHandle, analyze, validate
from deeprepo.run.wiring import RunLimits

err = Console(stderr=True)
out = Console()

Path_ = Annotated[
    str, typer.Argument(help="Repository directory (or a local git repository with --rev).")
]


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def resume_command(out_dir: Path) -> str:
    """The exact command that continues the run in ``out_dir``, as this process was called."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "deeprepo":
        prog = shlex.quote(argv0)
    else:  # python -m deeprepo
        prog = f"{shlex.quote(sys.executable)} -m deeprepo"
    return f"{prog} analyze --resume {shlex.quote(str(out_dir))}"


def render_summary(handle: RunHandle) -> None:
    """The run in a few lines: status and coverage first, headline findings, the rest apart."""
    r = handle.result
    if handle.offline:
        out.print(
            "[bold]Offline engine[/]: scripted root policy + static analyzers, no LLM called. "
            "Set ANTHROPIC_API_KEY or OPENROUTER_API_KEY (or pass --root/--sub) for a model-driven run.",
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
    if headline:
        _findings_table(headline)
    if rest:
        counts = " · ".join(f"{console(scope)} {len(group)}" for scope, group in rest.items())
        out.print(
            f"Other scopes (kept apart, not counted above): {counts}; listed in report.md",
            highlight=False,
        )
    if r.unaudited:
        shown = ", ".join(console(p) for p in r.unaudited[:5])
        more = f" and {len(r.unaudited) - 5} more" if len(r.unaudited) > 5 else ""
        out.print(
            f"Not audited: {shown}{more} (all in metrics.json: unaudited_paths)", highlight=False
        )
    for note in r.notes:
        out.print(f"[yellow]note[/]: {console(note)}", highlight=False)
    out.print(f"Report: {console(handle.out_dir / 'report.md')}", highlight=False)
    if handle.run_id is not None:
        out.print(f"Run log: {handle.run_id} (deeprepo runs show {handle.run_id})", highlight=False)


def _findings_table(findings: list[Finding], limit: int = 15) -> None:
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


def finish(handle: RunHandle) -> None:
    """Render the run and end the process with its exit code (see ``exits``)."""
    render_summary(handle)
    code = exits.for_result(handle.result)
    if code == exits.INTERRUPTED:
        err.print(
            f"interrupted: partial outputs in {console(handle.out_dir)}; continue with: "
            f"{console(resume_command(handle.out_dir))}",
            highlight=False,
            soft_wrap=True,
        )
    if code != exits.OK:
        raise typer.Exit(code)


# CLI parameter -> AnalyzeOptions field, where the names differ.
_OPTION_FIELD = {
    "timeout": "timeout_s",
    "max_file_size": "max_file_bytes",
    "cell_timeout": "cell_timeout_s",
    "prices": "prices_file",
    "include_scope": "include_scopes",
    "exclude_scope": "exclude_scopes",
    "log": "run_log",
}


def _given(ctx: typer.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The options typed on the command line (not defaults), as AnalyzeOptions fields."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        # typer vendors click's ParameterSource enum privately: compare by name.
        source = getattr(ctx.get_parameter_source(name), "name", None)
        if source in ("COMMANDLINE", "ENVIRONMENT"):
            out[_OPTION_FIELD.get(name, name)] = tuple(value) if isinstance(value, list) else value
    return out


def analyze_command(
    ctx: typer.Context,
    path: Annotated[
        str | None,
        typer.Argument(
            help="Repository directory (or a local git repository with --rev). "
            "Not needed with --resume."
        ),
    ] = None,
    root: Annotated[
        str | None,
        typer.Option(
            help="Root model spec: anthropic/<m>, openrouter/<org>/<m>, openai/<m>, scripted/<policy>, "
            "local/<name> (deeprepo local setup). "
            "Default: from the keys in the environment; scripted/expert offline."
        ),
    ] = None,
    sub: Annotated[
        str | None,
        typer.Option(
            help="Sub-LLM worker spec (same forms, static, or local/<name>). Default: from keys; static offline."
        ),
    ] = None,
    root_base_url: Annotated[
        str | None,
        typer.Option(
            help="Point the root at another server (OpenAI-compatible: ends in /v1; Anthropic: no /v1)."
        ),
    ] = None,
    sub_base_url: Annotated[
        str | None, typer.Option(help="Point the sub workers at another server.")
    ] = None,
    rev: Annotated[
        str | None, typer.Option(help="Analyse this git revision of PATH (no checkout).")
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Output directory (default: a new one under ./deeprepo-runs/)."),
    ] = None,
    prompt: Annotated[
        str,
        typer.Option(
            help="Root system prompt: default, exhaustive, or small (for small local models)."
        ),
    ] = "default",
    max_turns: Annotated[int, typer.Option(help="Root turns before the final submit turn.")] = 20,
    max_cost: Annotated[
        float | None, typer.Option(help="Stop once this many USD are spent.")
    ] = None,
    max_sub_calls: Annotated[int, typer.Option(help="Most sub-LLM calls for the run.")] = 2000,
    timeout: Annotated[
        float | None, typer.Option(help="Wall-clock limit for the run, in seconds.")
    ] = None,
    sub_concurrency: Annotated[int, typer.Option(help="Sub-LLM calls in flight at once.")] = 16,
    cache: Annotated[
        bool, typer.Option("--cache/--no-cache", help="Reuse cached model responses.")
    ] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache directory.")] = None,
    max_file_size: Annotated[
        int, typer.Option(help="Skip files larger than this many bytes.")
    ] = 1_000_000,
    sandbox: Annotated[
        str, typer.Option(help="Kernel isolation: auto, bwrap or process.")
    ] = "auto",
    cell_timeout: Annotated[float, typer.Option(help="Seconds one code cell may run.")] = 120.0,
    output_limit: Annotated[
        int, typer.Option(help="Characters of cell output shown to the root.")
    ] = 8192,
    prices: Annotated[
        Path | None, typer.Option(help="JSON price override file (USD per 1M tokens).")
    ] = None,
    include_scope: Annotated[
        list[str] | None,
        typer.Option(
            help="Audit only files of these scopes (repeat or comma-separate): source, config, "
            "test, example, docs, generated, vendored, or all. Default: all but docs."
        ),
    ] = None,
    exclude_scope: Annotated[
        list[str] | None,
        typer.Option(help="Do not audit files of these scopes (e.g. vendored,generated)."),
    ] = None,
    log: Annotated[
        bool,
        typer.Option(
            "--log/--no-log",
            help="Record the run in the run log (`deeprepo runs`); DEEPREPO_NO_LOG=1 also turns it off.",
        ),
    ] = True,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Continue the run in this --out directory from its trajectory.jsonl: completed "
            "turns are replayed without calling the models again. Its options are reused; "
            "budgets and timeouts given here replace them."
        ),
    ] = None,
) -> None:
    """Analyse a repository and write report.md, findings.json, findings.sarif,
    metrics.json and trajectory.jsonl.

    Exit codes: 0 complete; 1 stopped on an error; 2 bad usage; 3 incomplete (not every
    file audited, or no answer); 130 interrupted (Ctrl-C).
    """
    if resume is not None:
        from deeprepo.run.analyze import resume as resume_run
        from deeprepo.run.resume import load_run, options_from_record

        values = {k: v for k, v in ctx.params.items() if k != "resume"}
        overrides = _given(ctx, values)
        if path is not None:
            overrides["path"] = path
        if not resume.is_dir():
            raise UsageError(f"--resume {resume} is not a directory; pass a run's --out directory")
        validate(options_from_record(load_run(resume), os.environ, overrides))
        with RunProgress(err, "resume") as progress:
            handle = _run(resume_run(resume, overrides=overrides, on_event=progress), resume)
        finish(handle)
        return
    if path is None:
        raise UsageError("give the repository to analyse (PATH), or --resume RUN_DIR")
    options = AnalyzeOptions(
        path=path,
        rev=rev,
        root=root,
        sub=sub,
        root_base_url=root_base_url,
        sub_base_url=sub_base_url,
        limits=RunLimits(
            max_cost=max_cost,
            max_turns=max_turns,
            max_sub_calls=max_sub_calls,
            timeout_s=timeout,
            sub_concurrency=sub_concurrency,
            cell_timeout_s=cell_timeout,
            output_limit=output_limit,
        ),
        cache=cache,
        cache_dir=cache_dir,
        prompt=prompt,
        out_dir=out_dir,
        max_file_bytes=max_file_size,
        sandbox=sandbox,
        prices_file=prices,
        include_scopes=tuple(include_scope or ()),
        exclude_scopes=tuple(exclude_scope or ()),
        run_log=log,
    )
    validate(options)
    with RunProgress(err, "analyze") as progress:
        handle = _run(analyze(options, on_event=progress), out_dir)
    finish(handle)


def _run(coro: Any, out_dir: Path | None) -> RunHandle:
    """Run the coroutine; a Ctrl-C that lands outside the episode (loading, writing) is
    one line and exit code 130 (one inside it ends the episode: see ``finish``)."""
    try:
        handle: RunHandle = run_interruptible(coro)
    except KeyboardInterrupt:
        where = f"; outputs so far in {console(out_dir)}" if out_dir is not None else ""
        err.print(f"interrupted{where}", highlight=False)
        raise typer.Exit(exits.INTERRUPTED) from None
    return handle


def baseline_command(
    path: Path_,
    model: Annotated[
        str, typer.Option(help="Model spec for the single call, e.g. anthropic/claude-sonnet-4-5.")
    ],
    base_url: Annotated[str | None, typer.Option(help="Point the model at another server.")] = None,
    rev: Annotated[str | None, typer.Option(help="Analyse this git revision of PATH.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
    context_tokens: Annotated[
        int | None,
        typer.Option(
            help="Token budget for the codebase (default: from the model's context window)."
        ),
    ] = None,
    max_file_size: Annotated[
        int, typer.Option(help="Skip files larger than this many bytes.")
    ] = 1_000_000,
    cache: Annotated[
        bool, typer.Option("--cache/--no-cache", help="Reuse cached model responses.")
    ] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache directory.")] = None,
    prices: Annotated[Path | None, typer.Option(help="JSON price override file.")] = None,
    log: Annotated[
        bool,
        typer.Option(
            "--log/--no-log",
            help="Record the run in the run log (`deeprepo runs`); DEEPREPO_NO_LOG=1 also turns it off.",
        ),
    ] = True,
) -> None:
    """One call with as much of the codebase as fits the model's context; same outputs and accounting."""
    from deeprepo.run.baseline import BaselineOptions, run_baseline
    from deeprepo.run.baseline import validate as validate_baseline

    options = BaselineOptions(
        path=path,
        model=model,
        base_url=base_url,
        rev=rev,
        out_dir=out_dir,
        context_tokens=context_tokens,
        max_file_bytes=max_file_size,
        cache=cache,
        cache_dir=cache_dir,
        prices_file=prices,
        run_log=log,
    )
    validate_baseline(options)
    handle = _run(run_baseline(options), out_dir)
    finish(handle)
