"""The in-process tiny model: a real transformers checkpoint with a chat template, deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra is not installed: pip install -e '.[train]'")
pytest.importorskip("transformers", reason="the train extra is not installed")

from deeprepo.base import prompts
from deeprepo.rl.train.tiny import build_tiny_model

pytestmark = pytest.mark.e2e


def test_tiny_model_loads_with_auto_classes_and_round_trips_text(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = build_tiny_model(tmp_path / "tiny", seed=0)
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    assert 100_000 < n_params < 1_000_000
    # Byte-level BPE: code (indentation, quotes, unicode) survives encode/decode exactly.
    text = prompts.ROOT_SYSTEM_PROMPTS["default"] + "\n    x = f'{a}'  # é → ok\n"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text) / 2  # it learnt merges from deeprepo's own text
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok"},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False)
    assert rendered.endswith("<|im_start|>assistant\nok<|im_end|>\n")
    enc = tok.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    marked = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
    assert tok.decode(marked) == "ok<|im_end|>"
    with torch.no_grad():
        logits = model(torch.tensor([ids[:16]])).logits
    assert logits.shape == (1, 16, len(tok))


def test_tiny_model_is_deterministic_per_seed(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    a = load_file(str(build_tiny_model(tmp_path / "a", seed=1) / "model.safetensors"))
    b = load_file(str(build_tiny_model(tmp_path / "b", seed=1) / "model.safetensors"))
    c = load_file(str(build_tiny_model(tmp_path / "c", seed=2) / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(bool((a[k] == b[k]).all()) for k in a)
    assert any(not bool((a[k] == c[k]).all()) for k in a if a[k].dtype.is_floating_point)
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (
        tmp_path / "b" / "tokenizer.json"
    ).read_text()
