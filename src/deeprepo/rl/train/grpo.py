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
covers the policy's own tokens only (``env_mask``). The step's rollouts are generated once;
the log-probability and loss passes take them ``micro_batch_size`` at a time, their gradients
accumulated into the one optimizer step (:func:`grpo_arguments` says how TRL is told).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deeprepo.base.errors import ConfigError
from deeprepo.base.safefile import open_append, write_atomic
from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory
from deeprepo.rl.train.config import TrainConfig
from deeprepo.rl.train.models import (
    check_device,
    import_train_stack,
    library_warnings_off,
    load_policy,
    peft_config,
    quiet,
    resolve_model,
    save_checkpoint,
    trainer_arguments,
)
from deeprepo.rl.train.rollouts import EpisodeRollouts, StepStats, reward_functions

__all__ = [
    "GrpoSummary",
    "build_trainer",
    "check_vllm",
    "grpo_arguments",
    "parameter_change",
    "run_grpo",
]

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
    micro_batch: int = 0  # rollouts per forward/backward pass
    accumulation_steps: int = 1  # passes per optimizer step
    gradient_checkpointing: bool = False
    generation: str = "transformers"  # or "vllm" (TRL's colocated engine)
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


def _callback(
    log_path: Path,
    rollouts: EpisodeRollouts,
    progress: Progress,
    steps: int,
    max_seconds: float | None = None,
) -> Any:
    from transformers import TrainerCallback

    class TrainLog(TrainerCallback):  # type: ignore[misc]
        """Writes one ``train_log.jsonl`` line per optimiser step: TRL's loss and gradient
        norm beside the figures of that step's rollouts; stops training after the step that
        passes ``max_seconds`` (``time_stopped`` then says so)."""

        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.begun: float | None = None
            self.time_stopped = False
            self.rows: list[dict[str, Any]] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()
            if self.begun is None:
                self.begun = self.started

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # Checked after the step, never inside it: a step cut short would be a step of
            # rollouts without its optimiser update.
            if max_seconds is None or self.begun is None:
                return
            if time.perf_counter() - self.begun >= max_seconds and state.global_step < steps:
                self.time_stopped = True
                control.should_training_stop = True

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
            with open_append(log_path) as fh:
                fh.write(json.dumps(row) + "\n")
            progress(
                f"step {row['step']}/{steps}: reward {stats.reward_mean:.3f} ± {stats.reward_std:.3f} "
                f"(discovery {stats.discovery_mean:.3f}, format {stats.format_mean:.3f}), "
                f"groups with variance {stats.groups_with_variance}/{stats.groups}, "
                f"turns {stats.turns_mean:.2f}, grad_norm {row['grad_norm'] or 0:.4g}, "
                f"{row['seconds']:.1f}s"
            )

    return TrainLog()


def check_vllm(config: TrainConfig) -> None:
    """Refuse ``use_vllm`` in one line where it cannot run (load_config refused the CPU)."""
    assert config.grpo is not None
    if not config.grpo.use_vllm:
        return
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "grpo.use_vllm = true needs vllm, which is not installed here: pip install vllm "
            "(a build for this torch and CUDA; TRL 1.16 supports vLLM 0.22-0.31), "
            "or set use_vllm = false"
        )


def grpo_arguments(config: TrainConfig, output_dir: Path) -> dict[str, Any]:
    """The keyword arguments of TRL's ``GRPOConfig`` for ``config`` (TRL 1.16.0).

    One optimizer step covers ``prompts_per_step`` tasks × ``group_size`` rollouts, generated
    once. TRL's GRPOConfig derives ``steps_per_generation = gradient_accumulation_steps`` and
    ``generation_batch_size = per_device_train_batch_size × steps_per_generation`` when
    neither is given (``trl/trainer/grpo_config.py:1098-1100``), and the trainer:

    * loads one generation batch per ``steps_per_generation`` micro-steps
      (``get_train_dataloader``, ``grpo_trainer.py:1258-1277``) and calls the rollout function
      once for all of it (``_prepare_inputs``, lines 1538-1546: generate when
      ``_step % (steps_per_generation × num_iterations) == 0``, then serve slices of
      ``per_device_train_batch_size`` from the buffer);
    * computes rewards and group advantages over that whole batch before splitting it, so
      groups need not sit inside one micro-batch;
    * runs any no-grad log-probability pass ``per_device_train_batch_size`` rows at a time
      (lines 2505, 2643-2655) and each loss pass on one slice;
    * scales the default ``loss_type="dapo"`` loss by the active tokens of the whole
      generation batch (lines 3168-3173), so the accumulated gradient equals the one-pass
      gradient up to float rounding.

    Hence ``per_device_train_batch_size = micro_batch_size`` and
    ``gradient_accumulation_steps = rollouts_per_step / micro_batch_size``, nothing else.
    """
    assert config.grpo is not None
    grpo = config.grpo
    episode = config.episode
    args: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=grpo.micro_batch,
        gradient_accumulation_steps=grpo.accumulation_steps,
        num_generations=grpo.group_size,
        max_steps=grpo.steps,
        learning_rate=grpo.lr,
        beta=grpo.beta,
        max_grad_norm=grpo.max_grad_norm,
        temperature=episode.temperature,
        # The longest reply one call may ask for; the vLLM engine's max_tokens.
        max_completion_length=episode.max_new_tokens,
        gradient_checkpointing=grpo.gradient_checkpointing,
        use_vllm=grpo.use_vllm,
        **trainer_arguments(config),
    )
    if grpo.gradient_checkpointing:
        # Non-reentrant checkpointing also works with LoRA's frozen embeddings (TRL calls
        # enable_input_require_grads for peft models too, grpo_trainer.py:529-530).
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if grpo.use_vllm:
        args.update(
            vllm_mode="colocate",
            vllm_gpu_memory_utilization=grpo.vllm_gpu_memory_utilization,
            vllm_max_model_length=grpo.vllm_max_model_len
            or episode.max_context_tokens + episode.max_new_tokens,
        )
    return args


def build_trainer(
    config: TrainConfig,
    model: Any,
    tokenizer: Any,
    rollout_func: Callable[[list[Any], Any], dict[str, list[Any]]],
    dataset_rows: list[dict[str, str]],
    *,
    output_dir: Path | None = None,
) -> Any:
    """TRL's ``GRPOTrainer`` for ``config`` over ``rollout_func`` (call it inside
    :func:`~deeprepo.rl.train.models.library_warnings_off`)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    assert config.grpo is not None
    funcs, weights = reward_functions(config.grpo.format_weight)
    args = GRPOConfig(
        **grpo_arguments(config, output_dir or config.out / "trl"), reward_weights=weights
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=Dataset.from_list(dataset_rows),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        peft_config=peft_config(config.model),
    )


def run_grpo(config: TrainConfig, *, progress: Progress = lambda _: None) -> GrpoSummary:
    """Warm-start with ``[sft]`` when given, then run ``[grpo].steps`` GRPO steps."""
    import_train_stack()
    check_device(config)
    assert config.grpo is not None
    grpo = config.grpo
    check_vllm(config)
    started = time.perf_counter()
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "train_log.jsonl"
    log_path.unlink(missing_ok=True)
    summary = GrpoSummary(
        output_dir=str(out),
        steps_planned=grpo.steps,
        lora=config.model.lora,
        device=config.device,
        micro_batch=grpo.micro_batch,
        accumulation_steps=grpo.accumulation_steps,
        gradient_checkpointing=grpo.gradient_checkpointing,
        generation="vllm" if grpo.use_vllm else "transformers",
    )
    sft_data = None
    if config.sft is not None:
        from deeprepo.rl.train.sft import prepare_sft_data

        sft_data = prepare_sft_data(config, out / "sft", progress=progress)
    base = resolve_model(config.model, config, out / "base")
    summary.base_model = str(base)
    progress(f"model: {base}")
    if config.sft is not None:
        from deeprepo.rl.train.sft import run_sft

        sft_summary = run_sft(config, base, out / "sft", data=sft_data, progress=progress)
        base = Path(sft_summary.checkpoint)
        summary.warm_start = str(base)
        summary.sft = sft_summary.to_dict()

    model, tokenizer = load_policy(base, config)
    tasks = generate_tasks_in_memory(
        TaskSpec(config.tasks.size, config.tasks.seed, config.tasks.lang), config.tasks.n
    )
    rollouts = EpisodeRollouts(
        tasks,
        tokenizer,
        config.episode,
        seed=config.seed,
        format_weight=grpo.format_weight,
        use_vllm=grpo.use_vllm,
    )
    with library_warnings_off():
        trainer = build_trainer(config, model, tokenizer, rollouts, rollouts.dataset_rows())
        callback = _callback(log_path, rollouts, progress, grpo.steps, grpo.max_seconds)
        quiet(trainer)
        trainer.add_callback(callback)
        before = _trainable_snapshot(trainer.model)
        progress(
            f"GRPO: {grpo.steps} step(s) × {grpo.prompts_per_step} task(s) × {grpo.group_size} "
            f"rollouts on {len(tasks)} {config.tasks.size} task(s), worker {config.episode.worker}, "
            f"device {config.device}{', LoRA' if config.model.lora else ''}, "
            f"{grpo.accumulation_steps} micro-batch(es) of {grpo.micro_batch} a step"
            f"{', gradient checkpointing' if grpo.gradient_checkpointing else ''}, "
            f"generation by {'vLLM (colocated)' if grpo.use_vllm else 'transformers'}"
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
    if callback.time_stopped:
        summary.notes.append(
            f"stopped by grpo.max_seconds = {grpo.max_seconds:g} after {summary.steps} of "
            f"{grpo.steps} step(s)"
        )
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
        from deeprepo.rl.plots.training import plot_training

        summary.plot = str(plot_training(log_path, out / "training.png"))
    summary.seconds = round(time.perf_counter() - started, 2)
    write_atomic(out / "summary.json", json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary
