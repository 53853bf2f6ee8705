"""``deeprepo plot bench|training``: PNG plots from a bench or a training log."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from deeprepo.base.errors import UsageError
from deeprepo.report.rundir import check_out_dir
from deeprepo.report.text import console

out = Console()

plot_app = typer.Typer(
    help="Draw PNG plots: a bench's cost against quality, a training log's reward and turns.",
    no_args_is_help=True,
    add_completion=False,
)


@plot_app.callback()
def _plot() -> None:
    """Draw PNG plots from deeprepo outputs."""


def _check_png(path: Path) -> None:
    if path.is_dir():
        raise UsageError(f"--out {path} is a directory; give the PNG file to write")
    check_out_dir(path.parent, "--out")


@plot_app.command("bench")
def bench_plot_command(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="BENCH_DIR_OR_JSON",
            help="A bench folder (written by deeprepo bench) or its bench.json.",
        ),
    ],
    png: Annotated[
        Path | None,
        typer.Option("-o", "--out", help="PNG to write (default: bench.png beside bench.json)."),
    ] = None,
) -> None:
    """Cost per run against F1 (or findings, without ground truth), one point per configuration."""
    from deeprepo.rl.plots.bench import load_bench_json, plot_bench

    data = load_bench_json(source)
    target = png or (source if source.is_dir() else source.parent) / "bench.png"
    _check_png(target)
    written = plot_bench(data, target)
    out.print(f"Wrote {console(written)}", highlight=False, soft_wrap=True)


@plot_app.command("training")
def training_plot_command(
    log: Annotated[
        Path,
        typer.Argument(
            metavar="TRAIN_LOG.jsonl",
            help="A training log (JSON lines with step, reward_mean, turns_mean).",
        ),
    ],
    png: Annotated[
        Path | None,
        typer.Option("-o", "--out", help="PNG to write (default: beside the log, .png)."),
    ] = None,
) -> None:
    """Reward and turns against training step."""
    if not log.is_file():
        raise UsageError(f"{log} is not a file; give the training log (JSON lines)")
    try:
        # Written on the training branch; imported by name so this command stands alone.
        training = importlib.import_module("deeprepo.rl.plots.training")
    except ModuleNotFoundError:
        raise UsageError(
            "this deeprepo has no training plots (deeprepo.rl.plots.training is missing); "
            "install a version with the training extras"
        ) from None
    target = png or log.with_suffix(".png")
    _check_png(target)
    try:
        written = training.plot_training(log, target)
    except (ValueError, KeyError, TypeError) as exc:  # rows that are not a training log
        raise UsageError(
            f"{log} is not a training log ({exc}); rows need step, reward_mean"
        ) from None
    out.print(f"Wrote {console(written)}", highlight=False, soft_wrap=True)


__all__ = ["plot_app"]
