"""The training config: one TOML file for ``deeprepo train sft`` and ``deeprepo train grpo``.

Validated with pydantic; every mistake becomes one line naming the key and what to write
(:class:`~deeprepo.base.errors.ConfigError`). ``train sft`` reads ``[model]`` and ``[sft]``;
``train grpo`` reads ``[model]``, ``[tasks]``, ``[episode]``, ``[grpo]`` and, when ``[sft]``
is there, warm-starts with it first. Relative paths in the file are relative to the file's
folder, so a config works from any current directory.
Example: ``configs/smoke.toml``; every key is described in ``docs/training.md``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deeprepo.base.errors import ConfigError
from deeprepo.rl.tasks.hard_spec import HARD_LANGS, HARD_SIZE
from deeprepo.rl.tasks.spec import LANGS, SIZES

__all__ = [
    "EpisodeSection",
    "GrpoSection",
    "ModelSection",
    "SftSection",
    "TasksSection",
    "TrainConfig",
    "load_config",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSection(_Section):
    """The policy: ``tiny`` (built in-process, ``train/tiny.py``) or a local checkpoint folder."""

    name: str = "tiny"
    lora: bool = False
    lora_r: Annotated[int, Field(ge=1)] = 8
    lora_alpha: Annotated[int, Field(ge=1)] = 16
    lora_dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.0
    # Which modules LoRA adapts; "all-linear" is peft's shorthand for every linear layer.
    lora_target_modules: str | list[str] = "all-linear"


class TasksSection(_Section):
    """Generated repositories with ground truth (``deeprepo tasks generate``), in memory."""

    size: str = "small"
    lang: str = "python"
    seed: Annotated[int, Field(ge=0)] = 0
    n: Annotated[int, Field(ge=1)] = 4

    @model_validator(mode="after")
    def _known(self) -> TasksSection:
        sizes = (*SIZES, HARD_SIZE)
        if self.size not in sizes:
            raise ValueError(f"size must be one of {', '.join(sizes)}, not {self.size!r}")
        langs = HARD_LANGS if self.size == HARD_SIZE else LANGS
        if self.lang not in langs:
            raise ValueError(f"lang must be one of {', '.join(langs)}, not {self.lang!r}")
        return self


class SftSection(_Section):
    """Supervised warm start on chat-format JSONL (``{"messages": [...]}`` per line).

    ``data = "generate"`` makes the examples in-process from runs of ``expert`` (a built-in
    scripted root) with ``worker`` on the tasks of ``[sft.tasks]``; a path reads a file
    written by ``deeprepo export sft``."""

    data: str = "generate"
    expert: str = "scripted/expert"
    worker: str = "oracle"
    tasks: TasksSection = TasksSection(n=2)
    max_turns: Annotated[int, Field(ge=1)] = 8
    steps: Annotated[int, Field(ge=1)] = 30
    lr: Annotated[float, Field(gt=0)] = 5e-3
    batch_size: Annotated[int, Field(ge=1)] = 1
    max_length: Annotated[int, Field(ge=64)] = 4096
    # Loss on the assistant turns only (needs a chat template with {% generation %} marks).
    assistant_only_loss: bool = True


class EpisodeSection(_Section):
    """The deeprepo episode each rollout runs (the same Episode as ``analyze`` and ``eval``)."""

    worker: str = "oracle"
    prompt: str = "default"
    max_turns: Annotated[int, Field(ge=1)] = 3
    max_new_tokens: Annotated[int, Field(ge=1)] = 256
    # The whole rollout (first prompt + every reply and observation) must fit in this.
    max_context_tokens: Annotated[int, Field(ge=256)] = 8192
    # What one observation may add to the context (chars; the Episode cuts the middle).
    max_output_chars: Annotated[int, Field(ge=200)] = 2000
    temperature: Annotated[float, Field(gt=0)] = 1.0
    sandbox: Literal["auto", "bwrap", "process"] = "auto"
    cell_timeout_s: Annotated[float, Field(gt=0)] = 30.0


class GrpoSection(_Section):
    """TRL's ``GRPOTrainer`` over deeprepo rollouts."""

    group_size: Annotated[int, Field(ge=2)] = 4
    prompts_per_step: Annotated[int, Field(ge=1)] = 1
    steps: Annotated[int, Field(ge=1)] = 3
    lr: Annotated[float, Field(gt=0)] = 1e-4
    beta: Annotated[float, Field(ge=0)] = 0.0
    # A shaping term added to the discovery reward: the share of turns whose reply held a
    # code block (half) that ran without an error (the other half). 0 trains on the
    # discovery reward alone; see docs/training.md for why a smoke run needs it.
    format_weight: Annotated[float, Field(ge=0)] = 0.0
    max_grad_norm: Annotated[float, Field(gt=0)] = 1.0
    # How many rollouts go through one forward/backward pass. The step's
    # group_size × prompts_per_step rollouts are still generated once and make one optimizer
    # step; TRL splits them into equal micro-batches (gradient accumulation). Unset: the whole
    # step in one pass, which only fits short rollouts (docs/training.md, "Memory").
    micro_batch_size: Annotated[int, Field(ge=1)] | None = None
    # Recompute activations in the backward pass instead of keeping them (non-reentrant):
    # less memory, about a third more compute.
    gradient_checkpointing: bool = False
    # Generate the policy's replies with TRL's colocated vLLM engine (device = "cuda", pip
    # install vllm), synced with the policy's weights before every step's rollouts.
    use_vllm: bool = False
    # The share of GPU memory vLLM takes for its weights and KV cache (the rest trains).
    vllm_gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.3
    # vLLM's context length; unset: episode.max_context_tokens + episode.max_new_tokens,
    # the longest request a rollout can make (a reply is asked for up to max_new_tokens and
    # cut to what the context has room for).
    vllm_max_model_len: Annotated[int, Field(ge=256)] | None = None
    save_checkpoint: bool = True
    # A wall-clock budget for the GRPO steps (seconds, from the first step's start): the
    # run stops after the step that passes it and still writes its checkpoint, log, plot
    # and summary. Unset: run every step. For machines lent for minutes (the device script).
    max_seconds: Annotated[float, Field(gt=0)] | None = None

    @property
    def rollouts_per_step(self) -> int:
        return self.group_size * self.prompts_per_step

    @property
    def micro_batch(self) -> int:
        """Rollouts per forward/backward pass (the whole step when unset)."""
        return self.micro_batch_size or self.rollouts_per_step

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per optimizer step."""
        return self.rollouts_per_step // self.micro_batch

    @model_validator(mode="after")
    def _micro_batch_divides_the_step(self) -> GrpoSection:
        n = self.rollouts_per_step
        if self.micro_batch_size is not None and n % self.micro_batch_size:
            divisors = ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)
            raise ValueError(
                f"micro_batch_size = {self.micro_batch_size} must divide group_size × "
                f"prompts_per_step = {n} (TRL splits a step into equal micro-batches); "
                f"one of {divisors}"
            )
        return self


class TrainConfig(_Section):
    """The whole file."""

    output_dir: str = "runs/train"
    device: Literal["cpu", "cuda"] = "cpu"
    seed: int = 0
    # torch's intra-op threads (0: torch's default). On a small shared CPU box 1 is much
    # faster than the default: spinning threads fight over the cores.
    threads: Annotated[int, Field(ge=0)] = 0
    model: ModelSection = ModelSection()
    tasks: TasksSection = TasksSection()
    episode: EpisodeSection = EpisodeSection()
    grpo: GrpoSection | None = None
    sft: SftSection | None = None
    #: The config file's folder, set by :func:`load_config` (not a key of the file).
    base_dir: Path = Path(".")

    def resolve(self, value: str) -> Path:
        """A path from the config: ``~`` expanded, relative ones against the file's folder."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    @property
    def out(self) -> Path:
        return self.resolve(self.output_dir)


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def load_config(path: Path, *, need: Literal["sft", "grpo"]) -> TrainConfig:
    """Read and validate ``path``; raise :class:`ConfigError` in one line on any mistake."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file (example: configs/smoke.toml)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if "base_dir" in data:
        raise ConfigError(f"{path}: base_dir is not a key (paths are relative to the file)")
    data["base_dir"] = path.resolve().parent
    try:
        config = TrainConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        msg = str(first["msg"]).removeprefix("Value error, ")
        extra = f" ({len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ConfigError(f"{path}: {_where(first['loc'])}: {msg}{extra}") from None
    if need == "sft" and config.sft is None:
        raise ConfigError(f"{path}: no [sft] section; `deeprepo train sft` needs one")
    if need == "grpo" and config.grpo is None:
        raise ConfigError(f"{path}: no [grpo] section; `deeprepo train grpo` needs one")
    if config.grpo is not None and config.grpo.use_vllm:
        if config.device != "cuda":
            raise ConfigError(
                f'{path}: grpo.use_vllm = true needs device = "cuda" (vLLM generates on the '
                "training GPU); set use_vllm = false for a CPU run"
            )
        longest = config.episode.max_context_tokens + config.episode.max_new_tokens
        max_len = config.grpo.vllm_max_model_len
        if max_len is not None and max_len < longest:
            raise ConfigError(
                f"{path}: grpo.vllm_max_model_len = {max_len:,} is shorter than the longest "
                f"request a rollout makes (episode.max_context_tokens + max_new_tokens = "
                f"{longest:,}); raise it or leave it unset"
            )
    return config
