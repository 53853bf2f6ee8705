"""``deeprepo export sft RUN_DIRS... OUT.jsonl``: trajectories as chat-format SFT examples."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from deeprepo.base.errors import UsageError
from deeprepo.cli import exits
from deeprepo.report.text import console as safe

out = Console()
err = Console(stderr=True)

export_app = typer.Typer(
    help="Export runs as training data.",
    no_args_is_help=True,
    add_completion=False,
)


@export_app.callback()
def _export() -> None:
    """Export runs (trajectories of `deeprepo analyze` and `deeprepo eval`) as training data."""


@export_app.command("sft")
def sft_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders (trajectory.jsonl of `analyze`, results.jsonl of `eval`), those "
            "files, or folders holding run folders; then the OUT.jsonl to write, last.",
            show_default=False,
        ),
    ],
    include_incomplete: Annotated[
        bool,
        typer.Option(
            "--include-incomplete",
            help="Also export runs that ended without an answer or with files unaudited "
            "(runs that failed on an error or never ended are skipped always).",
        ),
    ] = False,
    min_findings: Annotated[
        int, typer.Option("--min-findings", help="Skip runs that recorded fewer findings.")
    ] = 0,
    min_reward: Annotated[
        float | None,
        typer.Option(
            "--min-reward", help="Skip eval rollouts with a lower reward (and analyze runs)."
        ),
    ] = None,
    max_examples: Annotated[
        int | None, typer.Option("--max-examples", help="Write at most this many examples.")
    ] = None,
) -> None:
    """Turn root trajectories into chat examples for SFT, one JSON object a line with
    "messages" (system, user, then assistant and user in turn, ending on the last reply) and
    "meta" (source, models, turns, findings, reward).

    The messages are exactly what the root was sent and wrote: the run's system prompt and
    first message, each reply, and each REPL output as the next user message. Only complete
    runs by default; skipped runs are counted by reason on the summary line.
    """
    from deeprepo.rl.train.export import ExportOptions, export_sft

    if len(paths) < 2:
        raise UsageError("give at least one run folder and then OUT.jsonl")
    *sources, target = paths
    if target.suffix != ".jsonl":
        raise UsageError(
            f"the last argument is the file to write and must end in .jsonl, not {target}"
        )
    if target.is_dir():
        raise UsageError(f"{target} is a folder; the last argument is the OUT.jsonl to write")
    summary = export_sft(
        sources,
        target,
        ExportOptions(
            include_incomplete=include_incomplete,
            min_findings=min_findings,
            min_reward=min_reward,
            max_examples=max_examples,
        ),
    )
    out.print(safe(summary.line()), highlight=False, soft_wrap=True)
    if summary.written == 0:
        err.print(
            "[bold red]error:[/] no run passed the filters; nothing to train on "
            "(--include-incomplete admits runs without an answer)",
            highlight=False,
        )
        raise typer.Exit(exits.ERROR)


@export_app.command("checkpoint")
def checkpoint_command(
    source: Annotated[
        str,
        typer.Argument(
            help="A .gguf file (e.g. from `deeprepo local setup`), gguf:<file>, or a "
            "checkpoint folder.",
            show_default=False,
        ),
    ],
    out_dir: Annotated[
        Path, typer.Argument(help="New folder to write the checkpoint to.", show_default=False)
    ],
    dtype: Annotated[
        str, typer.Option("--dtype", help="Weights dtype: bfloat16, float16 or float32.")
    ] = "bfloat16",
) -> None:
    """Save a GGUF model (or any checkpoint hf/ reads) as a plain transformers checkpoint
    folder, for training configs and GPU machines without the gguf package. GGUF weights are
    dequantised on load (minutes on a small CPU); needs the train extra."""
    from deeprepo.rl.train.checkpoint import check_arguments, convert_checkpoint

    check_arguments(source, out_dir, dtype)
    err.print(f"loading {safe(source)} (GGUF is dequantised: this takes a while)", highlight=False)
    done = convert_checkpoint(source, out_dir, dtype)
    out.print(
        safe(
            f"wrote {done.out_dir}: {done.parameters / 1e6:,.0f}M parameters in {dtype}, "
            f"{done.bytes_written / 2**20:,.0f} MiB (load {done.load_seconds:.0f}s, "
            f"save {done.save_seconds:.0f}s); use it as hf/{done.out_dir} or a config's model.name"
        ),
        highlight=False,
        soft_wrap=True,
    )


__all__ = ["checkpoint_command", "export_app", "sft_command"]
