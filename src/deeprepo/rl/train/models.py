"""Loading the policy (``tiny`` or a local checkpoint) and saving a trained one.

No hub: a model name is ``tiny`` (built in-process, ``train/tiny.py``) or a folder holding a
transformers checkpoint (``config.json`` and weights, a tokenizer with a chat template).
A saved checkpoint is a plain one, LoRA adapters merged in, so ``hf/<dir>``,
``AutoModelForCausalLM.from_pretrained`` and a later training config all load it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deeprepo.base.errors import ConfigError
from deeprepo.rl.train.config import ModelSection, TrainConfig

__all__ = [
    "check_device",
    "import_train_stack",
    "library_warnings_off",
    "load_policy",
    "peft_config",
    "quiet",
    "resolve_model",
    "save_checkpoint",
]


def import_train_stack() -> None:
    """Fail in one line, naming the extra, when torch/transformers/trl are missing."""
    missing = []
    for module in ("torch", "transformers", "trl", "datasets"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ConfigError(
            f"deeprepo train needs {', '.join(missing)}: pip install -e '.[train]' "
            "(install torch==2.13.0 first on a CPU machine, see docs/training.md)"
        )
    import datasets
    from transformers.utils import logging as hf_logging

    # deeprepo prints one line per step; the libraries' progress bars would bury it.
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()


def check_device(config: TrainConfig) -> None:
    """Set torch's threads; refuse ``cuda`` where torch sees no GPU."""
    import torch

    if config.threads:
        torch.set_num_threads(config.threads)
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            'device = "cuda" but torch sees no CUDA GPU here; set device = "cpu" '
            "or install a CUDA build of torch"
        )


def resolve_model(section: ModelSection, config: TrainConfig, build_dir: Path) -> Path:
    """The checkpoint folder for ``[model] name``: built for ``tiny``, else a local folder."""
    if section.name == "tiny":
        from deeprepo.rl.train.tiny import build_tiny_model

        return build_tiny_model(build_dir, seed=config.seed)
    path = config.resolve(section.name)
    if not (path / "config.json").is_file():
        raise ConfigError(
            f'model.name = {section.name!r}: not "tiny" nor a folder holding a transformers '
            "checkpoint (config.json, weights, tokenizer); no model hub is used"
        )
    return path


def load_policy(path: Path, config: TrainConfig) -> tuple[Any, Any]:
    """The model (float32 weights, on the configured device) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load the model at {path}: {' '.join(str(exc).split())}"
        ) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(config.device)
    return model, tokenizer


def trainer_arguments(config: TrainConfig) -> dict[str, Any]:
    """The Trainer settings SFT and GRPO share: the device and precision, a log record every
    step (the train_log callbacks read them), no TRL checkpoints or reporters (deeprepo saves
    its own), no progress bars, data loaded in-process."""
    return dict(
        use_cpu=config.device == "cpu",
        bf16=config.device == "cuda",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=config.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def peft_config(section: ModelSection) -> Any:
    """A peft ``LoraConfig`` when ``[model] lora = true``, else ``None``."""
    if not section.lora:
        return None
    try:
        from peft import LoraConfig
    except ImportError:
        raise ConfigError("model.lora = true needs peft: pip install -e '.[train]'") from None
    return LoraConfig(
        r=section.lora_r,
        lora_alpha=section.lora_alpha,
        lora_dropout=section.lora_dropout,
        target_modules=section.lora_target_modules,
        task_type="CAUSAL_LM",
    )


def save_checkpoint(model: Any, tokenizer: Any, out_dir: Path) -> Path:
    """Save a plain transformers checkpoint (LoRA merged in) and the tokenizer to ``out_dir``."""
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


@contextmanager
def library_warnings_off() -> Iterator[None]:
    """Silence what TRL and transformers say to developers, not users: the deprecation of
    ``gradient_checkpointing``'s name and the "experimental" notice of ``rollout_func``
    (docs/decisions.md records that deeprepo relies on it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")
        warnings.filterwarnings("ignore", message=r".*experimental feature.*", category=UserWarning)
        yield


def quiet(trainer: Any) -> None:
    """Drop the Trainer's own printing of every log dict: deeprepo prints one line per step."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
