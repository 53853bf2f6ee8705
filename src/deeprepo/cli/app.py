"""The ``deeprepo`` command: parse, call the library, render."""

from __future__ import annotations

import asyncio
import sys
import warnings
from typing import Annotated, Any

import typer
from rich.console import Console

from deeprepo import __version__
from deeprepo.errors import DeeprepoError

app = typer.Typer(
    name="deeprepo",
    help="Analyse a code repository with a root LLM in a sandboxed REPL that delegates reading to "
    "cheap sub-LLM workers. With no API key set, runs the offline engine (scripted root + static analyzers).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()


def _version(value: bool) -> None:
    if value:
        out.print(f"deeprepo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """deeprepo: bug, security and architecture reports with the exact cost of the run."""


def _register() -> None:
    from deeprepo.cli import analyze_cmd

    app.command("analyze")(analyze_cmd.analyze_command)
    app.command("baseline")(analyze_cmd.baseline_command)
    for module, attr, name in (
        ("deeprepo.cli.score_cmd", "score_command", "score"),
        ("deeprepo.cli.compare_cmd", "compare_command", "compare"),
        ("deeprepo.cli.eval_cmd", "eval_command", "eval"),
    ):
        try:
            mod = __import__(module, fromlist=[attr])
        except ModuleNotFoundError:
            continue
        app.command(name)(getattr(mod, attr))
    try:
        from deeprepo.cli.tasks_cmd import tasks_app
    except ModuleNotFoundError:
        return
    app.add_typer(
        tasks_app, name="tasks", help="Generate repositories with planted bugs and ground truth."
    )


_register()


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    # Library warnings (e.g. the sandbox falling back to process isolation) are for the
    # user, not a developer: one line, no source location.
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: a DeeprepoError becomes one line and its exit code."""
    warnings.formatwarning = _one_line_warning
    try:
        app(args=argv)
    except DeeprepoError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted; completed turns are in the run's trajectory.jsonl")
        sys.exit(130)


if __name__ == "__main__":
    main()


__all__ = ["app", "main"]
