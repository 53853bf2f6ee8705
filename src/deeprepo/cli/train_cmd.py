"""``deeprepo train sft|grpo CONFIG.toml``: training on deeprepo's own episode (the ``train`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from deeprepo.base.errors import UsageError
from deeprepo.report.text import console
from deeprepo.rl.train.config import TrainConfig, load_config

err = Console(stderr=True)
out = Console()

train_app = typer.Typer(
    help="Train a root model on deeprepo's own episode: SFT warm start, then GRPO (TRL).",
    no_args_is_help=True,
    add_completion=False,
)

_CONFIG = typer.Argument(
    help="Training config (TOML); see configs/smoke.toml and docs/training.md.",
    metavar="CONFIG.toml",
)
_OUT = typer.Option("--out", help="Output folder (overrides the config's output_dir).")


@train_app.callback()
def _train() -> None:
    """Train a root model on deeprepo's own episode (pip install -e '.[train]')."""


def _say(message: str) -> None:
    err.print(console(message), highlight=False, soft_wrap=True)


def _config(path: Path, need: str, out_dir: Path | None, steps: int | None) -> TrainConfig:
    config = load_config(path, need="grpo" if need == "grpo" else "sft")
    if out_dir is not None:
        config = config.model_copy(update={"output_dir": str(out_dir.resolve())})
    if steps is not None:
        if steps < 1:
            raise UsageError(f"--steps must be at least 1, not {steps}")
        assert config.grpo is not None
        config = config.model_copy(update={"grpo": config.grpo.model_copy(update={"steps": steps})})
    from deeprepo.report.rundir import check_out_dir

    check_out_dir(config.out, "output_dir")
    return config


@train_app.command("sft")
def sft_command(
    config_path: Annotated[Path, _CONFIG],
    out_dir: Annotated[Path | None, _OUT] = None,
) -> None:
    """Warm-start the model on the config's sft examples; write OUT/sft/checkpoint."""
    config = _config(config_path, "sft", out_dir, None)
    from deeprepo.rl.train.models import check_device, import_train_stack, resolve_model
    from deeprepo.rl.train.sft import prepare_sft_data, run_sft

    import_train_stack()
    check_device(config)
    data = prepare_sft_data(config, config.out / "sft", progress=_say)
    base = resolve_model(config.model, config, config.out / "base")
    summary = run_sft(config, base, config.out / "sft", data=data, progress=_say)
    loss = (
        f"loss {summary.loss_first:.3f} → {summary.loss_last:.3f}"
        if summary.loss_first is not None and summary.loss_last is not None
        else "no loss logged"
    )
    out.print(
        console(
            f"sft: {summary.steps} step(s) on {summary.examples} example(s), {loss}, "
            f"{summary.seconds:.1f}s; checkpoint {summary.checkpoint}"
        ),
        highlight=False,
        soft_wrap=True,
    )


@train_app.command("grpo")
def grpo_command(
    config_path: Annotated[Path, _CONFIG],
    out_dir: Annotated[Path | None, _OUT] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", help="GRPO steps (overrides grpo.steps).")
    ] = None,
) -> None:
    """Warm-start (when the config has an sft section), then run GRPO on deeprepo episodes.

    Writes OUT/train_log.jsonl (one line per step), OUT/checkpoint (loadable as hf/<dir>),
    OUT/training.png and OUT/summary.json.
    """
    config = _config(config_path, "grpo", out_dir, steps)
    from deeprepo.rl.train.grpo import run_grpo

    summary = run_grpo(config, progress=_say)
    first, last = summary.reward_first, summary.reward_last
    rewards = (
        f"reward {first:.3f} → {last:.3f} (discovery {summary.discovery_first:.3f} → "
        f"{summary.discovery_last:.3f})"
        if first is not None and last is not None
        else "no step logged"
    )
    out.print(
        console(
            f"grpo: {summary.steps}/{summary.steps_planned} step(s), {rewards}, groups with "
            f"reward variance {summary.groups_with_variance}/{summary.groups}, max grad_norm "
            f"{summary.grad_norm_max:.4g}, parameter change {summary.parameter_change:.4g}, "
            f"{summary.seconds:.1f}s"
        ),
        highlight=False,
        soft_wrap=True,
    )
    for note in summary.notes:
        err.print(f"[yellow]note:[/] {console(note)}", highlight=False, soft_wrap=True)
    for label, path in (
        ("log", summary.log),
        ("checkpoint", summary.checkpoint),
        ("plot", summary.plot),
    ):
        if path:
            out.print(console(f"{label}: {path}"), highlight=False, soft_wrap=True)


__all__ = ["grpo_command", "sft_command", "train_app"]
