"""Shell completion: ``--show-completion SHELL`` and ``--install-completion``.

Typer's own pair takes a shell name only when its shell detection is switched off; with
shellingham installed (typer's default) ``--show-completion bash`` ignored ``bash``, printed
the script of whatever shell it detected, and "Shell  not supported." where it found none
(a cron job, an IDE, a detached process). Here the script is printed for the shell named,
and installing detects the shell it runs in, saying what to do when it cannot tell.
"""

from __future__ import annotations

from typing import Any

import typer
import typer.completion

__all__ = ["SHELLS", "install_completion", "show_completion"]

SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
_PROG = "deeprepo"
_VAR = "_DEEPREPO_COMPLETE"


def _typer(name: str) -> Any:
    # typer.completion's helpers are not in its __all__; they are what add_completion uses.
    return getattr(typer.completion, name)


def show_completion(ctx: typer.Context, value: str | None) -> None:
    """``--show-completion SHELL``: print the script and exit."""
    if value is None or ctx.resilient_parsing:
        return
    shell = value.strip().lower()
    if shell not in SHELLS:
        raise typer.BadParameter(
            f"shell {value!r} is not supported: name one of {', '.join(SHELLS)}"
        )
    typer.echo(_typer("get_completion_script")(prog_name=_PROG, complete_var=_VAR, shell=shell))
    raise typer.Exit()


def install_completion(ctx: typer.Context, value: bool) -> None:
    """``--install-completion``: install for the shell this runs in, and exit."""
    if not value or ctx.resilient_parsing:
        return
    shell = _typer("_get_shell_name")() or ""
    if shell not in SHELLS:
        raise typer.BadParameter(
            "could not tell which shell this runs in; print the script with "
            f"--show-completion SHELL ({', '.join(SHELLS)}) and source it from your shell's startup file"
        )
    shell, path = _typer("install")(shell=shell, prog_name=_PROG, complete_var=_VAR)
    typer.echo(f"{shell} completion installed in {path}; restart the shell to use it")
    raise typer.Exit()


# Typer's completion classes (the reply format its scripts expect), which add_completion
# would have registered; `import typer` has already loaded them.
_typer("completion_init")()
