"""``deeprepo view RUN_DIR``: (re)write a run's trajectory.html and optionally open it."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from deeprepo.base.errors import UsageError
from deeprepo.report.text import console
from deeprepo.report.viewer import VIEWER_FILE, write_viewer

out = Console()
err = Console(stderr=True)


def view_command(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="A run's --out directory (holding trajectory.jsonl; calls.jsonl, findings.json "
            "and metrics.json are shown when present)."
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help=f"Write the page here instead of RUN_DIR/{VIEWER_FILE}."
        ),
    ] = None,
    open_page: Annotated[
        bool, typer.Option("--open", help="Open the page in the default web browser.")
    ] = False,
) -> None:
    """Write trajectory.html for a run: summary, cost over time, findings, every turn and
    sub-call. One self-contained file that loads nothing from the network; analyze and
    baseline write it at the end of every run, this command writes it again (or elsewhere)."""
    if output is not None:
        if output.is_dir():
            raise UsageError(f"-o {output} is a directory; give a file name, e.g. run.html")
        if not output.parent.is_dir():
            raise UsageError(f"-o {output}: folder {output.parent} does not exist; create it first")
    written = write_viewer(run_dir, output)
    size = written.path.stat().st_size
    subs = "no calls.jsonl" if written.sub_calls is None else f"{written.sub_calls:,} sub-calls"
    out.print(
        f"wrote {console(written.path)} ({size / 1024:,.0f} KiB; {written.turns:,} turns, "
        f"{subs}, {written.findings:,} findings)",
        highlight=False,
        soft_wrap=True,
    )
    for line in written.cut:
        out.print(f"[yellow]cut[/]: {console(line)}", highlight=False, soft_wrap=True)
    for line in written.problems:
        out.print(f"[yellow]left out[/]: {console(line)}", highlight=False, soft_wrap=True)
    if open_page and not webbrowser.open(written.path.resolve().as_uri()):
        err.print(
            f"no web browser found to open it; open {console(written.path)} yourself",
            highlight=False,
            soft_wrap=True,
        )
