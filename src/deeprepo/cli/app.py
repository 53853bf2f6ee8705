"""The ``deeprepo`` command: parse, call the library, render."""

from __future__ import annotations

import signal
import sys
import warnings
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from typer._click import exceptions as click_exceptions

from deeprepo.base.errors import DeeprepoError
from deeprepo.base.version import VERSION
from deeprepo.cli import exits
from deeprepo.cli.completion import install_completion, show_completion
from deeprepo.cli.helptext import ReadableGroup
from deeprepo.report.text import console, visible

app = typer.Typer(
    name="deeprepo",
    help="Analyse a code repository with a root LLM in a sandboxed REPL that delegates reading to "
    "cheap sub-LLM workers. By default runs the offline engine (scripted root + static analyzers), "
    "whatever API keys are set; --root/--sub choose a model-driven run.",
    no_args_is_help=True,
    # -h everywhere: click hands help_option_names down to every subcommand's context.
    context_settings={"help_option_names": ["-h", "--help"]},
    # Completion: cli.completion's pair (typer's ignores a named shell when shellingham is
    # installed).
    add_completion=False,
    # Plain click layout, rewrapped, click-style value names (cli.helptext): rich panels
    # squeeze option help into a few words a line at 80 columns.
    rich_markup_mode=None,
    cls=ReadableGroup,
    pretty_exceptions_enable=False,
    epilog=exits.EXIT_CODES_HELP,
)
err = Console(stderr=True)
out = Console()


def _version(value: bool) -> None:
    if value:
        out.print(f"deeprepo {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
    show: Annotated[
        str | None,
        typer.Option(
            "--show-completion",
            callback=show_completion,
            is_eager=True,
            expose_value=False,
            metavar="SHELL",
            help="Print the completion script for SHELL (bash, zsh, fish, powershell) and exit.",
        ),
    ] = None,
    install: Annotated[
        bool,
        typer.Option(
            "--install-completion",
            callback=install_completion,
            is_eager=True,
            expose_value=False,
            help="Install completion for the shell this runs in, and exit.",
        ),
    ] = False,
) -> None:
    """deeprepo: bug, security and architecture reports with the exact cost of the run."""
    # The command line is the whole product: the research stack's models (oracle, the
    # reference and gaming scripted roots) are registered beside the core's.
    import deeprepo.rl  # noqa: F401


def _register() -> None:
    from deeprepo.cli import analyze_cmd

    app.command("analyze", epilog=exits.EXIT_CODES_HELP)(analyze_cmd.analyze_command)
    from deeprepo.cli import single_call_cmd

    app.command("single-call")(single_call_cmd.single_call_command)
    # The old name, for one release: says so on stderr, then runs single-call.
    app.command("baseline", hidden=True)(single_call_cmd.baseline_alias)
    for module, attr, name in (
        ("deeprepo.cli.score_cmd", "score_command", "score"),
        ("deeprepo.cli.compare_cmd", "compare_command", "compare"),
        ("deeprepo.cli.eval_cmd", "eval_command", "eval"),
        ("deeprepo.cli.models_cmd", "models_command", "models"),
        ("deeprepo.cli.view_cmd", "view_command", "view"),
        ("deeprepo.cli.bench_cmd", "bench_command", "bench"),
    ):
        try:
            mod = __import__(module, fromlist=[attr])
        except ModuleNotFoundError:
            continue
        app.command(name)(getattr(mod, attr))
    from deeprepo.cli.runs_cmd import runs_app

    app.add_typer(runs_app, name="runs", help="The run log: list, show and export past runs.")
    try:
        from deeprepo.cli.export_cmd import export_app
    except ModuleNotFoundError:
        pass
    else:
        app.add_typer(
            export_app, name="export", help="Export runs as SFT data; GGUF models as checkpoints."
        )
    from deeprepo.cli.plot_cmd import plot_app

    app.add_typer(plot_app, name="plot", help="Draw PNG plots from a bench or a training log.")
    from deeprepo.cli.local_cmd import local_app

    app.add_typer(
        local_app, name="local", help="Local models (llama.cpp): setup, list, status, serve."
    )
    try:
        from deeprepo.cli.tasks_cmd import tasks_app
    except ModuleNotFoundError:
        return
    app.add_typer(
        tasks_app, name="tasks", help="Generate repositories with planted bugs and ground truth."
    )
    from deeprepo.cli.train_cmd import train_app

    app.add_typer(
        train_app, name="train", help="Train a root model on deeprepo's episode: SFT, then GRPO."
    )


_register()


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    # Library warnings (e.g. the sandbox falling back to process isolation) are for the
    # user, not a developer: one line, no source location.
    return f"warning: {visible(' '.join(str(message).split()))}\n"


def _error_line(message: str, hint: str = "") -> None:
    text = " ".join(str(message).split())  # one line, whatever the message held
    err.print(f"[bold red]error:[/] {console(text)}{hint}", highlight=False, soft_wrap=True)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (``kill``, a supervisor, a CI timeout) outside an event loop stops a command
    as Ctrl-C does: through the SIGINT handler in force, or as KeyboardInterrupt where
    SIGINT is ignored (a job a non-interactive shell started with ``&``). Inside a loop,
    :func:`deeprepo.cli.signals.run_interruptible` handles it."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error is one line and its exit code (``exits``)."""
    warnings.formatwarning = _one_line_warning
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        # Not standalone: click would turn Ctrl-C into a silent exit 130 and a bad option
        # into a multi-line box; here both are handled in one place.
        code = app(args=argv, standalone_mode=False)
    except DeeprepoError as exc:
        _error_line(str(exc))
        sys.exit(exc.exit_code)
    except click_exceptions.NoArgsIsHelpError as exc:
        err.print(exc.format_message(), highlight=False, markup=False)
        sys.exit(exits.USAGE)
    except click_exceptions.UsageError as exc:
        ctx = exc.ctx
        where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        _error_line(exc.format_message(), console(where))
        sys.exit(exits.USAGE)
    except click_exceptions.ClickException as exc:
        _error_line(exc.format_message())
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted", highlight=False)
        sys.exit(exits.INTERRUPTED)
    except OSError as exc:  # a disk full, a folder that vanished: say what, not where in the code
        _error_line(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        sys.exit(exits.ERROR)
    sys.exit(code if isinstance(code, int) else exits.OK)


if __name__ == "__main__":
    main()


__all__ = ["app", "main"]
