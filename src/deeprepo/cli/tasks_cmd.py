"""``deeprepo tasks generate``: repositories with planted bugs and exact ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from deeprepo.base.errors import UsageError
from deeprepo.report.rundir import check_out_dir
from deeprepo.rl.tasks import generate_tasks
from deeprepo.rl.tasks.hard_spec import HARD_SIZE

out = Console()

tasks_app = typer.Typer(
    help="Generate repositories with planted bugs and exact ground truth.",
    no_args_is_help=True,
    add_completion=False,
)


@tasks_app.callback()
def _tasks() -> None:
    """Generate repositories with planted bugs, decoys and exact ground truth."""


@tasks_app.command("generate")
def generate_command(
    out_dir: Annotated[
        Path, typer.Argument(help="Folder to write the tasks into (created if missing).")
    ],
    seed: Annotated[
        int, typer.Option(help="Seed; the same arguments always give byte-identical output.")
    ] = 0,
    n: Annotated[int, typer.Option("--n", "-n", help="Number of repositories to generate.")] = 1,
    size: Annotated[
        str,
        typer.Option(
            help="small (5-15 files), medium (30-60), large (100-300), or hard (100-500, "
            "python or js, with a sub-call budget smaller than the file count)."
        ),
    ] = "small",
    lang: Annotated[
        str, typer.Option(help="python, js, or mixed (a Python and a JavaScript service).")
    ] = "python",
    substrate: Annotated[
        str,
        typer.Option(
            help="synthetic (generated Flask/Express projects) or real (bugs planted into "
            "vendored open-source files)."
        ),
    ] = "synthetic",
) -> None:
    """Write N repositories, each as OUT_DIR/<id>/repo + ground_truth.json, and OUT_DIR/index.json."""
    if n < 1:
        raise UsageError(f"--n must be at least 1, not {n}")
    if seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {seed}")
    check_out_dir(out_dir, "OUT_DIR")
    if size == HARD_SIZE:
        from deeprepo.rl.tasks.hard import generate_hard_tasks

        if substrate != "synthetic":
            raise UsageError("--size hard is synthetic only: drop --substrate")

        infos = generate_hard_tasks(out_dir, seed=seed, n=n, lang=lang)
    else:
        infos = generate_tasks(out_dir, seed=seed, n=n, size=size, lang=lang, substrate=substrate)
    table = Table(box=None, header_style="bold")
    for col in ("task", "domain", "files", "bugs", "decoys"):
        table.add_column(col, justify="left" if col in ("task", "domain") else "right")
    for info in infos:
        table.add_row(info.id, info.domain, str(info.files), str(info.bugs), str(info.decoys))
    out.print(table)
    out.print(
        f"Wrote {len(infos)} task(s) to {out_dir} (index: {out_dir / 'index.json'}).",
        highlight=False,
        soft_wrap=True,
    )


__all__ = ["generate_command", "tasks_app"]
