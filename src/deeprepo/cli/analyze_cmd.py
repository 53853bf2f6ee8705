"""``deeprepo analyze``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from deeprepo.base.errors import UsageError
from deeprepo.cli import exits, output
from deeprepo.cli.http_option import HttpClientOption, run_env
from deeprepo.cli.output import Format, ResultView, Threshold, announce, progress_for
from deeprepo.cli.progress import RunProgress
from deeprepo.cli.signals import run_interruptible
from deeprepo.report.text import console
from deeprepo.run.analyze import AnalyzeOptions, RunHandle, analyze, validate
from deeprepo.run.config import load_repo_config, load_user_config, settle
from deeprepo.run.wiring import RunLimits

err = output.stderr


def resume_command(out_dir: Path) -> str:
    """The exact command that continues the run in ``out_dir``, as this process was called."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "deeprepo":
        prog = shlex.quote(argv0)
    else:  # python -m deeprepo
        prog = f"{shlex.quote(sys.executable)} -m deeprepo"
    return f"{prog} analyze --resume {shlex.quote(str(out_dir))}"


def finish(handle: RunHandle, view: ResultView | None = None) -> None:
    """Write the run's result as ``view`` asks (the table on stdout by default) and end the
    process with its exit code (see ``exits``)."""
    output.finish(handle, view or ResultView(), resume_command(handle.out_dir))


Path_ = Annotated[
    str, typer.Argument(help="Repository directory (or a local git repository with --rev).")
]

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
# How the result is shown, not what the run is: never recorded, never a --resume override.
_VIEW_PARAMS = ("fmt", "output_file", "fail_on", "quiet", "verbose")
# Only a new run reads them: a resumed run keeps what it set aside the first time.
_NEW_RUN_PARAMS = ("honour_nosec", "inline_suppressions", "baseline", "since")


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
            "Default: scripted/expert (offline, whatever keys are set); with a --sub that "
            "calls an API, from the keys present."
        ),
    ] = None,
    sub: Annotated[
        str | None,
        typer.Option(
            help="Sub-LLM worker spec (same forms, static, or local/<name>). Default: static; "
            "with a --root that calls an API, from the keys present."
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
        float | None,
        typer.Option(
            help="Stop once this many USD are spent. Default: 2.00 for a run that calls an "
            "API, else none."
        ),
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
    gitignore: Annotated[
        bool,
        typer.Option(
            "--gitignore/--no-gitignore",
            help="Apply the repository's own .gitignore files (never those of a folder above it).",
        ),
    ] = True,
    fmt: Annotated[
        Format,
        typer.Option(
            "--format",
            help="The result: table (the console summary), json (findings.json), sarif "
            "(findings.sarif) or md (report.md). With -o - the rest goes to stderr.",
        ),
    ] = Format.table,
    output_file: Annotated[
        str,
        typer.Option("-o", "--output", help="Write the result to this file; - is stdout."),
    ] = "-",
    fail_on: Annotated[
        Threshold | None,
        typer.Option(
            help="Exit with code 4 when a headline finding is this severe or more "
            "(low, medium, high, critical)."
        ),
    ] = None,
    http_client: HttpClientOption = None,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="Print only errors and the result.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option("-v", "--verbose", help="Every finding in the table, and the loader's notes."),
    ] = False,
    honour_nosec: Annotated[
        bool,
        typer.Option(
            "--honour-nosec/--no-honour-nosec",
            help="Let bandit's # nosec and semgrep's # nosemgrep suppress findings on their "
            "line (counted as suppressed). # deeprepo: ignore[RULE] reason always does.",
        ),
    ] = False,
    inline_suppressions: Annotated[
        bool,
        typer.Option(
            "--inline-suppressions/--no-inline-suppressions",
            help="Let # deeprepo: ignore[RULE] comments suppress findings (counted apart).",
        ),
    ] = True,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="Report only findings not in this earlier run's findings.sarif or "
            "findings.json (matched by fingerprint); the others are counted as baselined."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Report only findings not found at this git revision of PATH (analysed "
            "first with the same options), e.g. HEAD~1 or origin/main."
        ),
    ] = None,
) -> None:
    """Analyse a repository and write report.md, findings.json, findings.sarif,
    metrics.json and trajectory.jsonl.

    The default is the offline engine, whatever API keys the environment holds; --root or
    --sub chooses a model-driven run, capped at $2.00 unless --max-cost says otherwise.
    Settings also come from the user's config.toml and, for the shape of the audit only, the
    repository's [tool.deeprepo] or .deeprepo.toml; the command line wins.
    """
    if resume is None and path is not None:
        return _analyze_configured(ctx, path)
    view = ResultView(fmt.value, output_file, quiet, verbose, fail_on.value if fail_on else None)
    view.check()
    if resume is not None:
        from deeprepo.run.analyze import resume as resume_run
        from deeprepo.run.resume import load_run, options_from_record

        env = run_env(http_client)
        skip = (*_VIEW_PARAMS, *_NEW_RUN_PARAMS, "resume", "http_client")
        values = {k: v for k, v in ctx.params.items() if k not in skip}
        overrides = _given(ctx, values)
        if path is not None:
            overrides["path"] = path
        if not resume.is_dir():
            raise UsageError(f"--resume {resume} is not a directory; pass a run's --out directory")
        resumed = options_from_record(load_run(resume), env, overrides)
        validate(resumed)
        announce(resumed, view)
        with progress_for(view, "resume") as progress:
            handle = _run(
                resume_run(resume, overrides=overrides, env=env, on_event=progress),
                resume,
                progress,
            )
        finish(handle, view)
        return
    raise UsageError("give the repository to analyse (PATH), or --resume RUN_DIR")


def _settled(ctx: typer.Context, path: str) -> tuple[dict[str, Any], list[str]]:
    """The parameters with the configuration files applied (the command line wins, then the
    user's file, then the repository's), and what the files refused or did not know."""
    given = {
        name
        for name in ctx.params
        if getattr(ctx.get_parameter_source(name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")
    }
    user, repo = load_user_config(), load_repo_config(Path(path))
    defaults = {**ctx.params, "include": [], "exclude": []}
    return settle(given, defaults, user, repo), [*user.messages, *repo.messages]


def _analyze_configured(ctx: typer.Context, path: str) -> None:
    """A new run: options from the command line and the configuration files."""
    p, messages = _settled(ctx, path)
    for message in messages:  # never hidden by -q: a refused key is a reason to look
        err.print(f"warning: {console(message)}", highlight=False, soft_wrap=True)
    fail_on = p["fail_on"]
    view = ResultView(
        Format(p["fmt"]).value,
        p["output_file"],
        p["quiet"],
        p["verbose"],
        None if fail_on is None else Threshold(fail_on).value,
    )
    view.check()
    options = AnalyzeOptions(
        path=path,
        rev=p["rev"],
        root=p["root"],
        sub=p["sub"],
        root_base_url=p["root_base_url"],
        sub_base_url=p["sub_base_url"],
        limits=RunLimits(
            max_cost=p["max_cost"],
            max_turns=p["max_turns"],
            max_sub_calls=p["max_sub_calls"],
            timeout_s=p["timeout"],
            sub_concurrency=p["sub_concurrency"],
            cell_timeout_s=p["cell_timeout"],
            output_limit=p["output_limit"],
        ),
        cache=p["cache"],
        cache_dir=p["cache_dir"],
        prompt=p["prompt"],
        out_dir=p["out_dir"],
        max_file_bytes=p["max_file_size"],
        sandbox=p["sandbox"],
        prices_file=p["prices"],
        include_scopes=tuple(p["include_scope"] or ()),
        exclude_scopes=tuple(p["exclude_scope"] or ()),
        run_log=p["log"],
        gitignore=p["gitignore"],
        include=tuple(p["include"]),
        exclude=tuple(p["exclude"]),
        inline_suppressions=p["inline_suppressions"],
        honour_nosec=p["honour_nosec"],
        baseline=p["baseline"],
        since=p["since"],
        config_notes=tuple(messages),
        env=run_env(p["http_client"]),
    )
    validate(options)
    announce(options, view)
    out_dir = p["out_dir"]
    with progress_for(view, "analyze") as progress:
        handle = _run(analyze(options, on_event=progress), out_dir, progress)
    finish(handle, view)


def _run(coro: Any, out_dir: Path | None, progress: RunProgress | None = None) -> RunHandle:
    """Run the coroutine; a Ctrl-C that lands outside the episode (loading, writing) is
    one line and exit code 130 (one inside it ends the episode: see ``finish``). The first
    Ctrl-C says "stopping…" at once."""

    def stopping() -> None:
        if progress is not None:
            progress.stopping()
        else:
            err.print("stopping…", highlight=False)

    try:
        handle: RunHandle = run_interruptible(coro, stopping)
    except KeyboardInterrupt:
        where = f"; outputs so far in {console(out_dir)}" if out_dir is not None else ""
        err.print(f"interrupted{where}", highlight=False)
        raise typer.Exit(exits.INTERRUPTED) from None
    return handle
