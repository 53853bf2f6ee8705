"""``deeprepo analyze`` and ``deeprepo baseline``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from deeprepo.cli.progress import RunProgress
from deeprepo.errors import UsageError
from deeprepo.orchestrator.analyze import AnalyzeOptions, RunHandle, analyze

err = Console(stderr=True)
out = Console()

Path_ = Annotated[
    str, typer.Argument(help="Repository directory (or a local git repository with --rev).")
]


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def render_summary(handle: RunHandle) -> None:
    r = handle.result
    if handle.offline:
        out.print(
            "[bold]Offline engine[/]: scripted root policy + static analyzers, no LLM called. "
            "Set ANTHROPIC_API_KEY or OPENROUTER_API_KEY (or pass --root/--sub) for a model-driven run.",
            highlight=False,
        )
    status = "[yellow]incomplete[/]" if r.incomplete else "[green]complete[/]"
    out.print(
        f"{status} · stop: {r.stop_reason} · turns {r.num_turns} · sub-calls {r.sub_calls} · "
        f"files covered {len(r.files_covered)}/{r.coverable_files} · findings {len(r.findings)} · "
        f"cost {_money(r.total_cost_usd)} · {r.wall_seconds:.1f}s",
        highlight=False,
    )
    if r.findings:
        table = Table(show_header=True, header_style="bold", box=None)
        for col in ("severity", "location", "cwe", "title"):
            table.add_column(col)
        from deeprepo.findings.model import sort_by_severity

        for f in sort_by_severity(r.findings)[:15]:
            table.add_row(f.severity, f"{f.file}:{f.start_line}", f.cwe or "", f.title[:70])
        out.print(table)
        if len(r.findings) > 15:
            out.print(f"… and {len(r.findings) - 15} more in findings.json")
    out.print(f"Report: {handle.out_dir / 'report.md'}", highlight=False)


# CLI parameter -> AnalyzeOptions field, where the names differ.
_OPTION_FIELD = {
    "timeout": "timeout_s",
    "max_file_size": "max_file_bytes",
    "cell_timeout": "cell_timeout_s",
    "prices": "prices_file",
}


def _given(ctx: typer.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The options typed on the command line (not defaults), as AnalyzeOptions fields."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        # typer vendors click's ParameterSource enum privately: compare by name.
        source = getattr(ctx.get_parameter_source(name), "name", None)
        if source in ("COMMANDLINE", "ENVIRONMENT"):
            out[_OPTION_FIELD.get(name, name)] = value
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
            help="Root model spec: anthropic/<m>, openrouter/<org>/<m>, openai/<m>, scripted/<policy>. "
            "Default: from the keys in the environment; scripted/expert offline."
        ),
    ] = None,
    sub: Annotated[
        str | None,
        typer.Option(
            help="Sub-LLM worker spec (same forms, or static). Default: from keys; static offline."
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
        str, typer.Option(help="Root system prompt: default or exhaustive.")
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
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Continue the run in this --out directory from its trajectory.jsonl: completed "
            "turns are replayed without calling the models again. Its options are reused; "
            "budgets and timeouts given here replace them."
        ),
    ] = None,
) -> None:
    """Analyse a repository and write report.md, findings.json, metrics.json and trajectory.jsonl."""
    if resume is not None:
        from deeprepo.orchestrator.resume import resume as resume_run

        values = {k: v for k, v in ctx.params.items() if k != "resume"}
        overrides = _given(ctx, values)
        if path is not None:
            overrides["path"] = path
        with RunProgress(err, "resume") as progress:
            handle = asyncio.run(resume_run(resume, overrides=overrides, on_event=progress))
        render_summary(handle)
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
        sub_concurrency=sub_concurrency,
        max_cost=max_cost,
        max_turns=max_turns,
        max_sub_calls=max_sub_calls,
        timeout_s=timeout,
        cache=cache,
        cache_dir=cache_dir,
        prompt=prompt,
        out_dir=out_dir,
        max_file_bytes=max_file_size,
        sandbox=sandbox,
        cell_timeout_s=cell_timeout,
        output_limit=output_limit,
        prices_file=prices,
    )
    with RunProgress(err, "analyze") as progress:
        handle = asyncio.run(analyze(options, on_event=progress))
    render_summary(handle)


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
) -> None:
    """One call with as much of the codebase as fits the model's context; same outputs and accounting."""
    from deeprepo.orchestrator.baseline import BaselineOptions, run_baseline

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
    )
    handle = asyncio.run(run_baseline(options))
    render_summary(handle)
