"""``deeprepo train sft``: a supervised warm start on chat-format examples.

Examples are JSON lines ``{"messages": [{"role", "content"}, ...]}``, the format
``deeprepo export sft`` writes. With ``[sft] data = "generate"`` they are made in-process:
the built-in ``expert`` root runs deeprepo's Episode (with the ``oracle`` worker) over
generated tasks, and each run becomes one example through the export's own
``conversation`` (``train/export.py``), so the examples are the conversations a root
really had. Training is TRL's ``SFTTrainer``, with the loss on the assistant turns only
when the chat template marks them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deeprepo.base import prompts
from deeprepo.base.errors import ConfigError
from deeprepo.base.jsonl import numbered_lines
from deeprepo.base.safefile import open_append, write_atomic
from deeprepo.orchestrator.episode import EpisodeConfig, metadata_summary
from deeprepo.rl.env.rollout import run_rollout
from deeprepo.rl.env.tasks import Task, TaskSpec, generate_tasks_in_memory
from deeprepo.rl.train.config import SftSection, TrainConfig
from deeprepo.rl.train.export import conversation
from deeprepo.rl.train.models import (
    check_device,
    import_train_stack,
    library_warnings_off,
    load_policy,
    peft_config,
    quiet,
    trainer_arguments,
)
from deeprepo.rl.train.models import save_checkpoint as save_model
from deeprepo.sandbox.config import SandboxConfig

__all__ = [
    "SftData",
    "SftSummary",
    "expert_examples",
    "prepare_sft_data",
    "read_examples",
    "run_sft",
]

Progress = Callable[[str], None]


@dataclass
class SftSummary:
    """What a warm start did (also ``sft/summary.json``)."""

    checkpoint: str
    examples: int
    data: str
    steps: int
    loss_first: float | None
    loss_last: float | None
    seconds: float
    expert_reward_mean: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def _expert_runs(
    tasks: Sequence[Task], sft: SftSection, config: TrainConfig
) -> list[tuple[dict[str, Any], float]]:
    from deeprepo.providers.spec import parse_model_spec
    from deeprepo.run.models import build_model

    episode = EpisodeConfig(max_turns=sft.max_turns, prompt=config.episode.prompt)
    sandbox = SandboxConfig(
        mode=config.episode.sandbox, cell_timeout_s=config.episode.cell_timeout_s
    )
    root = build_model(parse_model_spec(sft.expert, None), role="root")
    out: list[tuple[dict[str, Any], float]] = []
    try:
        for i, task in enumerate(tasks):
            outcome = await run_rollout(
                task,
                root=root,
                sub_spec=sft.worker,
                rollout_index=i,
                seed=config.seed,
                episode_config=episode,
                sandbox_config=sandbox,
            )
            result = outcome.result
            if result.stop_reason == "error" or not result.turns:
                continue  # a failed run teaches nothing
            codebase = task.get_codebase()
            messages = conversation(
                prompts.ROOT_SYSTEM_PROMPTS[episode.prompt],
                prompts.first_user_message(
                    metadata_summary(codebase, episode.audit_scopes), episode.task
                ),
                [t.to_dict() for t in result.turns],
            )
            meta = {"task": task.id, "root": sft.expert, "reward": outcome.reward.total}
            out.append(({"messages": messages, "meta": meta}, outcome.reward.total))
    finally:
        await root.aclose()
    return out


def expert_examples(sft: SftSection, config: TrainConfig) -> tuple[list[dict[str, Any]], float]:
    """Chat examples from runs of ``sft.expert`` on ``sft.tasks``, and their mean reward."""
    if not sft.expert.startswith("scripted/"):
        raise ConfigError(
            f"sft.expert = {sft.expert!r}: in-process examples come from a built-in scripted "
            "root (e.g. scripted/expert); for other models run `deeprepo eval` and "
            "`deeprepo export sft`, then set sft.data to the file"
        )
    t = sft.tasks
    tasks = generate_tasks_in_memory(TaskSpec(t.size, t.seed, t.lang), t.n)
    runs = asyncio.run(_expert_runs(tasks, sft, config))
    if not runs:
        raise ConfigError(f"no {sft.expert} run finished on the [sft.tasks]; nothing to learn from")
    return [e for e, _ in runs], sum(r for _, r in runs) / len(runs)


def read_examples(path: Path) -> list[dict[str, Any]]:
    """The examples of a JSONL file; one line per example, each with a ``messages`` list."""
    try:
        lines = numbered_lines(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"sft.data {path}: cannot read it ({exc.strerror or exc})") from None
    examples: list[dict[str, Any]] = []
    for n, line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"sft.data {path}:{n}: not a JSON line") from None
        messages = row.get("messages") if isinstance(row, dict) else None
        if not (
            isinstance(messages, list)
            and messages
            and all(
                isinstance(m, dict)
                and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)
                for m in messages
            )
        ):
            raise ConfigError(
                f'sft.data {path}:{n}: expected {{"messages": [{{"role": ..., "content": ...}}, ...]}}'
            )
        if not any(m["role"] == "assistant" for m in messages):
            raise ConfigError(f"sft.data {path}:{n}: no assistant message to learn from")
        examples.append(
            {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}
        )
    if not examples:
        raise ConfigError(f"sft.data {path}: no example in it")
    return examples


def _log_callback(log_path: Path, progress: Progress, steps: int) -> Any:
    from transformers import TrainerCallback

    class SftLog(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_log(
            self,
            args: Any,
            state: Any,
            control: Any,
            logs: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> None:
            logs = logs or {}
            if "loss" not in logs:
                return
            self.losses.append(float(logs["loss"]))
            row = {
                "step": int(state.global_step),
                "loss": float(logs["loss"]),
                "grad_norm": logs.get("grad_norm"),
                "learning_rate": logs.get("learning_rate"),
            }
            with open_append(log_path) as fh:
                fh.write(json.dumps(row) + "\n")
            if state.global_step == 1 or state.global_step % 10 == 0 or state.global_step == steps:
                progress(f"sft step {state.global_step}/{steps}: loss {row['loss']:.4f}")

    return SftLog()


@dataclass(frozen=True)
class SftData:
    """The examples a warm start trains on, where they are, and the expert's mean reward."""

    examples: list[dict[str, Any]]
    path: Path
    expert_reward: float | None = None


def prepare_sft_data(
    config: TrainConfig, out_dir: Path, *, progress: Progress = lambda _: None
) -> SftData:
    """Read ``[sft] data``, or run the expert for it (``sft_data.jsonl`` under ``out_dir``).

    Done before any model is built or loaded: a bad file or a failing expert stops the run
    before the expensive part."""
    assert config.sft is not None
    sft = config.sft
    if sft.data != "generate":
        path = config.resolve(sft.data)
        return SftData(read_examples(path), path)
    progress(f"sft: running {sft.expert} on {sft.tasks.n} {sft.tasks.size} task(s) for examples")
    examples, expert_reward = expert_examples(sft, config)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "sft_data.jsonl"
    write_atomic(path, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in examples))
    return SftData([{"messages": e["messages"]} for e in examples], path, expert_reward)


def can_mask_assistant(tokenizer: Any) -> bool:
    """Whether TRL can restrict the loss to the assistant turns with this chat template: it
    has ``{% generation %}`` marks, or TRL ships a training version of it (Qwen2.5, Qwen3,
    ...). A search for the word alone also matched ``add_generation_prompt``, which every
    template has, and TRL then refused the template (SmolLM2's) instead of training."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    if has_generation_markers(str(tokenizer.chat_template or "")):
        return True
    try:
        get_training_chat_template(tokenizer)
    except ValueError:
        return False
    return True


def run_sft(
    config: TrainConfig,
    base: Path,
    out_dir: Path,
    *,
    data: SftData | None = None,
    progress: Progress = lambda _: None,
) -> SftSummary:
    """Fine-tune ``base`` on the ``[sft]`` examples (``data``, else prepared here); save the
    result to ``out_dir``."""
    import_train_stack()
    check_device(config)
    assert config.sft is not None
    sft = config.sft
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    data = data or prepare_sft_data(config, out_dir, progress=progress)
    examples, data_path, expert_reward = data.examples, data.path, data.expert_reward

    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = load_policy(base, config)
    assistant_only = sft.assistant_only_loss and can_mask_assistant(tokenizer)
    if sft.assistant_only_loss and not assistant_only:
        progress(
            "sft: the chat template has no {% generation %} marks and TRL has no training "
            "version of it; loss on every token"
        )
    with library_warnings_off():
        args = SFTConfig(
            output_dir=str(out_dir / "trl"),
            max_steps=sft.steps,
            learning_rate=sft.lr,
            per_device_train_batch_size=sft.batch_size,
            max_length=sft.max_length,
            assistant_only_loss=assistant_only,
            gradient_checkpointing=False,
            lr_scheduler_type="constant",
            **trainer_arguments(config),
        )
        log_path = out_dir / "sft_log.jsonl"
        log_path.unlink(missing_ok=True)
        callback = _log_callback(log_path, progress, sft.steps)
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(examples),
            processing_class=tokenizer,
            peft_config=peft_config(config.model),
            callbacks=[callback],
        )
        quiet(trainer)
        progress(f"sft: {sft.steps} step(s) on {len(examples)} example(s) from {data_path}")
        trainer.train()
    checkpoint = save_model(trainer.model, tokenizer, out_dir / "checkpoint")
    losses: list[float] = callback.losses
    summary = SftSummary(
        checkpoint=str(checkpoint),
        examples=len(examples),
        data=str(data_path),
        steps=len(losses),
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        seconds=round(time.perf_counter() - started, 2),
        expert_reward_mean=expert_reward,
    )
    write_atomic(out_dir / "summary.json", json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary
