"""``deeprepo train grpo``: TRL's GRPOTrainer on deeprepo's own episode.

What a run writes under ``output_dir``::

    base/               the tiny model as built (model.name = "tiny")
    sft/                the warm-started checkpoint, sft_log.jsonl, sft_data.jsonl ([sft] only)
    train_log.jsonl     one line per GRPO step (see docs/training.md for every key)
    checkpoint/         the trained policy: a plain transformers checkpoint, LoRA merged
    training.png        reward and turns against step
    summary.json        what ran: steps, rewards first/last, parameter change, seconds

The loop per step: TRL asks the rollout function (``train/rollouts.py``) for
``group_size × prompts_per_step`` completions; each is one Episode run by the policy,
scored by ``compute_reward``; TRL normalises the rewards within each group, and the loss
covers the policy's own tokens only (``env_mask``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deeprepo.env.tasks import TaskSpec, generate_tasks_in_memory
from deeprepo.train.config import TrainConfig
from deeprepo.train.models import (
    check_device,
    import_train_stack,
    library_warnings_off,
    load_policy,
    peft_config,
    quiet,
    resolve_model,
    save_checkpoint,
)
from deeprepo.train.rollouts import EpisodeRollouts, StepStats, reward_functions

__all__ = ["GrpoSummary", "parameter_change", "run_grpo"]

Progress = Callable[[str], None]


@dataclass
class GrpoSummary:
    """What a GRPO run did (also written as ``summary.json``)."""

    output_dir: str
    steps: int = 0
    steps_planned: int = 0
    base_model: str = ""
    warm_start: str | None = None
    lora: bool = False
    device: str = "cpu"
    reward_first: float | None = None
    reward_last: float | None = None
    discovery_first: float | None = None
    discovery_last: float | None = None
    groups_with_variance: int = 0
    groups: int = 0
    grad_norm_max: float = 0.0
    parameter_change: float = 0.0  # L2 norm of (trained − initial) over the trained parameters
    seconds: float = 0.0
    checkpoint: str | None = None
    log: str = ""
    plot: str | None = None
    sft: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _trainable_snapshot(model: Any) -> dict[str, Any]:
    return {
        n: p.detach().float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad
    }


def parameter_change(before: dict[str, Any], model: Any) -> float:
    """L2 norm of the change of the parameters recorded in ``before``."""
    total = 0.0
    params = dict(model.named_parameters())
    for name, old in before.items():
        new = params[name].detach().float().cpu()
        total += float(((new - old) ** 2).sum())
    return math.sqrt(total)


def _callback(log_path: Path, rollouts: EpisodeRollouts, progress: Progress, steps: int) -> Any:
    from transformers import TrainerCallback

    class TrainLog(TrainerCallback):  # type: ignore[misc]
        """Writes one ``train_log.jsonl`` line per optimiser step: TRL's loss and gradient
        norm beside the figures of that step's rollouts."""

        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.rows: list[dict[str, Any]] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()

        def on_log(
            self,
            args: Any,
            state: Any,
            control: Any,
            logs: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> None:
            logs = logs or {}
            if "grad_norm" not in logs and "loss" not in logs:
                return  # the end-of-training summary, not a step
            stats = rollouts.last_stats or StepStats()
            grad = logs.get("grad_norm")
            row: dict[str, Any] = {
                "step": int(state.global_step),
                **{k: v for k, v in stats.to_dict().items()},
                "loss": logs.get("loss"),
                "grad_norm": float(grad) if grad is not None else None,
                "learning_rate": logs.get("learning_rate"),
                "seconds": round(time.perf_counter() - self.started, 3),
            }
            self.rows.append(row)
            with log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            progress(
                f"step {row['step']}/{steps}: reward {stats.reward_mean:.3f} ± {stats.reward_std:.3f} "
                f"(discovery {stats.discovery_mean:.3f}, format {stats.format_mean:.3f}), "
                f"groups with variance {stats.groups_with_variance}/{stats.groups}, "
                f"turns {stats.turns_mean:.2f}, grad_norm {row['grad_norm'] or 0:.4g}, "
                f"{row['seconds']:.1f}s"
            )

    return TrainLog()


def run_grpo(config: TrainConfig, *, progress: Progress = lambda _: None) -> GrpoSummary:
    """Warm-start with ``[sft]`` when given, then run ``[grpo].steps`` GRPO steps."""
    import_train_stack()
    check_device(config)
    assert config.grpo is not None
    grpo = config.grpo
    started = time.perf_counter()
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "train_log.jsonl"
    log_path.unlink(missing_ok=True)
    summary = GrpoSummary(
        output_dir=str(out), steps_planned=grpo.steps, lora=config.model.lora, device=config.device
    )
    sft_data = None
    if config.sft is not None:
        from deeprepo.train.sft import prepare_sft_data

        sft_data = prepare_sft_data(config, out / "sft", progress=progress)
    base = resolve_model(config.model, config, out / "base")
    summary.base_model = str(base)
    progress(f"model: {base}")
    if config.sft is not None:
        from deeprepo.train.sft import run_sft

        sft_summary = run_sft(config, base, out / "sft", data=sft_data, progress=progress)
        base = Path(sft_summary.checkpoint)
        summary.warm_start = str(base)
        summary.sft = sft_summary.to_dict()

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = load_policy(base, config)
    tasks = generate_tasks_in_memory(
        TaskSpec(config.tasks.size, config.tasks.seed, config.tasks.lang), config.tasks.n
    )
    rollouts = EpisodeRollouts(
        tasks, tokenizer, config.episode, seed=config.seed, format_weight=grpo.format_weight
    )
    funcs, weights = reward_functions(grpo.format_weight)
    with library_warnings_off():
        args = GRPOConfig(
            output_dir=str(out / "trl"),
            per_device_train_batch_size=grpo.group_size * grpo.prompts_per_step,
            num_generations=grpo.group_size,
            max_steps=grpo.steps,
            learning_rate=grpo.lr,
            beta=grpo.beta,
            max_grad_norm=grpo.max_grad_norm,
            temperature=config.episode.temperature,
            reward_weights=weights,
            gradient_checkpointing=False,
            use_cpu=config.device == "cpu",
            bf16=config.device == "cuda",
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            seed=config.seed,
            use_vllm=False,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=funcs,
            args=args,
            train_dataset=Dataset.from_list(rollouts.dataset_rows()),
            processing_class=tokenizer,
            rollout_func=rollouts,
            peft_config=peft_config(config.model),
        )
        callback = _callback(log_path, rollouts, progress, grpo.steps)
        quiet(trainer)
        trainer.add_callback(callback)
        before = _trainable_snapshot(trainer.model)
        progress(
            f"GRPO: {grpo.steps} step(s) × {grpo.prompts_per_step} task(s) × {grpo.group_size} "
            f"rollouts on {len(tasks)} {config.tasks.size} task(s), worker {config.episode.worker}, "
            f"device {config.device}{', LoRA' if config.model.lora else ''}"
        )
        trainer.train()
    summary.parameter_change = parameter_change(before, trainer.model)
    rows: list[dict[str, Any]] = callback.rows
    summary.steps = len(rows)
    if rows:
        summary.reward_first, summary.reward_last = rows[0]["reward_mean"], rows[-1]["reward_mean"]
        summary.discovery_first = rows[0]["discovery_mean"]
        summary.discovery_last = rows[-1]["discovery_mean"]
        summary.groups_with_variance = sum(int(r["groups_with_variance"]) for r in rows)
        summary.groups = sum(int(r["groups"]) for r in rows)
        summary.grad_norm_max = max(float(r["grad_norm"] or 0.0) for r in rows)
    if summary.groups and summary.groups_with_variance == 0:
        summary.notes.append(
            "no group had rewards that differ: every advantage was 0 and the policy did not move"
        )
    if summary.discovery_last is not None and summary.discovery_last == 0 and grpo.format_weight:
        summary.notes.append(
            "the discovery reward was 0 throughout: only the format term varied (plumbing, not learning)"
        )
    if grpo.save_checkpoint:
        checkpoint = save_checkpoint(trainer.model, tokenizer, out / "checkpoint")
        summary.checkpoint = str(checkpoint)
        progress(f"checkpoint: {checkpoint}")
    summary.log = str(log_path)
    if rows:
        from deeprepo.plots.training import plot_training

        summary.plot = str(plot_training(log_path, out / "training.png"))
    summary.seconds = round(time.perf_counter() - started, 2)
    (out / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2) + "\n", "utf-8")
    return summary
