"""``deeprepo single-call``: one model call with as much of the codebase as fits, the
comparison an RLM run is measured against; ``deeprepo baseline`` is its deprecated name.

Renamed because every scanner means by "baseline" the findings a run is compared with
(``deeprepo analyze --baseline FILE``), not a one-call comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deeprepo.cli import output
from deeprepo.cli.analyze_cmd import Path_, finish
from deeprepo.cli.analyze_cmd import _run as run_command

__all__ = ["baseline_alias", "single_call_command"]


def single_call_command(
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
    """One model call with as much of the codebase as fits its context, for comparison with
    analyze; same outputs and accounting."""
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
    handle = run_command(run_baseline(options), out_dir)
    finish(handle)


def baseline_alias(
    ctx: typer.Context,
    path: Path_,
    model: Annotated[str, typer.Option(help="Model spec for the single call.")],
    base_url: Annotated[str | None, typer.Option(help="Point the model at another server.")] = None,
    rev: Annotated[str | None, typer.Option(help="Analyse this git revision of PATH.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
    context_tokens: Annotated[
        int | None, typer.Option(help="Token budget for the codebase.")
    ] = None,
    max_file_size: Annotated[int, typer.Option(help="Skip files larger than this.")] = 1_000_000,
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse responses.")] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache directory.")] = None,
    prices: Annotated[Path | None, typer.Option(help="JSON price override file.")] = None,
    log: Annotated[bool, typer.Option("--log/--no-log", help="Record the run.")] = True,
) -> None:
    """Deprecated name of single-call (removed in the next release)."""
    output.stderr.print(
        "deprecated: `deeprepo baseline` is now `deeprepo single-call` (a one-call comparison; "
        "for findings new since a baseline see analyze --baseline/--since)",
        highlight=False,
        soft_wrap=True,
    )
    ctx.invoke(single_call_command, **ctx.params)
