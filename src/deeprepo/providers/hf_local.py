"""``hf/<path>``: a local transformers checkpoint as a model, in this process.

``hf/deeprepo-runs/ckpt`` serves a checkpoint folder (``config.json``, weights, tokenizer),
``hf//abs/model.gguf`` (or ``hf/gguf:model.gguf``) a GGUF file, which transformers
dequantizes with the ``gguf`` package. It runs on CUDA when there is a GPU, else on CPU,
costs $0 and counts tokens with the checkpoint's own tokenizer: prompt tokens (the chat
template applied to the system prompt and messages) and the tokens generated.

torch and transformers are imported when the first such model is built, never at import
time; without them the error names ``pip install -e '.[train]'``. A checkpoint is loaded
once per process and shared by every model object naming it (root and sub, every rollout).

Generation settings, from the request or the environment:

- ``DEEPREPO_HF_MAX_NEW_TOKENS`` (default 1024): a cap on the request's ``max_tokens``;
- ``DEEPREPO_HF_TEMPERATURE`` (default 0.7): used when the request names none; 0 is greedy;
- ``DEEPREPO_HF_SEED`` (default 0): each call's sampling seed is derived from it, the
  request's text and how many times this process has seen that text, so a run repeats
  reply for reply (with ``--concurrency 1``) while rollouts of one example still differ;
- ``DEEPREPO_HF_DEVICE`` (``cuda`` / ``cpu``, default: cuda when available);
- ``DEEPREPO_HF_BATCH`` (default 1): up to this many concurrent requests (the rollouts of
  ``deeprepo eval -c N``) are generated together in one left-padded batch
  (``providers/hf_batch.py``); a reply then depends on which requests shared its batch, so
  a run repeats reply for reply only with 1.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.errors import ConfigError, ProviderError
from deeprepo.providers.hf_batch import Job, batcher_for, generate_jobs

__all__ = [
    "INSTALL_HINT",
    "HFLocalModel",
    "HFSettings",
    "checkpoint_location",
    "load_checkpoint",
    "pretrained_args",
]

INSTALL_HINT = "pip install -e '.[train]'"
MAX_NEW_TOKENS_ENV = "DEEPREPO_HF_MAX_NEW_TOKENS"
TEMPERATURE_ENV = "DEEPREPO_HF_TEMPERATURE"
SEED_ENV = "DEEPREPO_HF_SEED"
DEVICE_ENV = "DEEPREPO_HF_DEVICE"
BATCH_ENV = "DEEPREPO_HF_BATCH"
GGUF_PREFIX = "gguf:"
# A checkpoint without a chat template of its own (a tiny test model, a base model) is
# prompted in ChatML, the format of the Qwen models the recipes train.
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class HFSettings:
    """Generation settings (see the module doc for the environment variables)."""

    max_new_tokens: int = 1024
    temperature: float = 0.7
    seed: int = 0
    device: str | None = None  # None: cuda when available, else cpu
    batch: int = 1  # requests generated together (1: one at a time, repeatable)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HFSettings:
        def number(name: str, kind: type[int] | type[float], default: Any) -> Any:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                value = kind(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a number") from None
            if value < 0:
                raise ConfigError(f"{name} must be 0 or more, not {raw}")
            return value

        device = env.get(DEVICE_ENV, "").strip() or None
        if device is not None and device.split(":")[0] not in ("cpu", "cuda"):
            raise ConfigError(f"{DEVICE_ENV}={device!r}: use cpu or cuda")
        max_new = number(MAX_NEW_TOKENS_ENV, int, cls.max_new_tokens)
        if max_new < 1:
            raise ConfigError(f"{MAX_NEW_TOKENS_ENV} must be at least 1")
        batch = number(BATCH_ENV, int, cls.batch)
        if batch < 1:
            raise ConfigError(f"{BATCH_ENV} must be at least 1")
        return cls(
            batch=batch,
            max_new_tokens=max_new,
            temperature=number(TEMPERATURE_ENV, float, cls.temperature),
            seed=number(SEED_ENV, int, cls.seed),
            device=device,
        )


def checkpoint_location(model: str) -> tuple[Path, str | None]:
    """``(folder, gguf file name or None)`` for the path an ``hf/`` spec names.

    Raises :class:`ConfigError` when there is no checkpoint there."""
    raw = model.removeprefix(GGUF_PREFIX)
    path = Path(raw).expanduser()
    if model.startswith(GGUF_PREFIX) or path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"hf/{model}: no GGUF file at {path}")
        return path.parent, path.name
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"hf/{model}: {path} is not a transformers checkpoint folder (no config.json); "
            "give the folder a training run saved, or a .gguf file"
        )
    return path, None


def pretrained_args(name: str) -> tuple[str, dict[str, str]]:
    """``(folder, extra kwargs)`` for ``from_pretrained`` of a checkpoint name: a folder, or a
    GGUF file (``gguf:<file>`` or a path ending in ``.gguf``) as ``gguf_file=``. For training
    code that takes the same names as ``hf/<name>``."""
    folder, gguf = checkpoint_location(name)
    return str(folder), ({"gguf_file": gguf} if gguf else {})


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    device: str
    lock: threading.Lock
    context: int | None  # the model's position limit, where its config has one
    load_seconds: float


_LOADED: dict[tuple[str, str | None, str | None], _Loaded] = {}
_LOADING = threading.Lock()


def _import_torch() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigError(
            f"hf/ models need torch and transformers ({exc.name} is missing): {INSTALL_HINT}"
        ) from None
    return torch, transformers


def load_checkpoint(model: str, device: str | None = None) -> _Loaded:
    """Load (once per process) the checkpoint an ``hf/<model>`` spec names."""
    folder, gguf = checkpoint_location(model)
    key = (str(folder.resolve()), gguf, device)
    with _LOADING:
        if key in _LOADED:
            return _LOADED[key]
        torch, transformers = _import_torch()
        if gguf is not None:
            try:
                import gguf as _gguf  # noqa: F401  transformers reads GGUF files through it
            except ImportError:
                raise ConfigError(
                    f"hf/{model}: reading GGUF needs the gguf package: {INSTALL_HINT}"
                ) from None
        chosen = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if chosen.startswith("cuda") else torch.float32
        extra = {"gguf_file": gguf} if gguf else {}
        started = time.perf_counter()
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), **extra)
            net = transformers.AutoModelForCausalLM.from_pretrained(
                str(folder), dtype=dtype, **extra
            )
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ConfigError(
                f"hf/{model}: transformers could not load it: {' '.join(str(exc).split())[:300]}"
            ) from None
        net.to(chosen)
        net.eval()
        if tokenizer.chat_template is None:
            tokenizer.chat_template = CHATML_TEMPLATE
        context = getattr(net.config, "max_position_embeddings", None)
        loaded = _Loaded(
            net,
            tokenizer,
            chosen,
            threading.Lock(),
            int(context) if isinstance(context, int) else None,
            time.perf_counter() - started,
        )
        _LOADED[key] = loaded
        return loaded


class HFLocalModel:
    """A :class:`~deeprepo.base.chat.ChatModel` over a local checkpoint."""

    def __init__(self, model: str, settings: HFSettings | None = None) -> None:
        self.model = model
        self.settings = settings or HFSettings()
        self._loaded = load_checkpoint(model, self.settings.device)
        self._seen: Counter[str] = Counter()

    @property
    def name(self) -> str:
        return f"hf/{self.model}"

    @property
    def device(self) -> str:
        return self._loaded.device

    def _call_seed(self, text: str) -> int:
        self._seen[text] += 1
        digest = hashlib.sha256(f"{self.settings.seed}\0{self._seen[text]}\0{text}".encode())
        return int.from_bytes(digest.digest()[:8], "big") >> 1

    async def complete(self, request: ChatRequest) -> Completion:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        seed = self._call_seed(repr(messages))
        job = self._prepare(messages, request, seed)
        if self.settings.batch > 1:
            batcher = batcher_for(self._loaded, self.settings.batch)
            new = await batcher.submit(job)
        else:
            (new,) = await asyncio.to_thread(generate_jobs, self._loaded, [job])
        return self._completion(job, new)

    def _prepare(self, messages: list[dict[str, str]], request: ChatRequest, seed: int) -> Job:
        loaded = self._loaded
        ids = loaded.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        prompt = [int(t) for t in ids["input_ids"][0]]
        max_new = min(request.max_tokens, self.settings.max_new_tokens)
        if loaded.context is not None:
            room = loaded.context - len(prompt)
            if room < 1:
                raise ProviderError(
                    f"{self.name}: the prompt is {len(prompt):,} tokens, at or over the "
                    f"model's context of {loaded.context:,}"
                )
            max_new = min(max_new, room)
        temperature = (
            request.temperature if request.temperature is not None else self.settings.temperature
        )
        return Job(prompt, max_new, temperature, seed)

    def _completion(self, job: Job, new: list[int]) -> Completion:
        tok = self._loaded.tokenizer
        ended = bool(new) and tok.eos_token_id is not None and new[-1] == tok.eos_token_id
        return Completion(
            text=tok.decode(new, skip_special_tokens=True),
            usage=Usage(input_tokens=len(job.prompt), output_tokens=len(new)),
            model=self.name,
            finish_reason="stop" if ended or len(new) < job.max_new else "length",
        )

    async def aclose(self) -> None:
        # The checkpoint stays loaded for the process: the next model naming it reuses it.
        return None
