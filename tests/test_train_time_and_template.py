"""Two things a real model on a lent machine needs from ``deeprepo train``.

- ``[grpo] max_seconds``: GRPO stops after the step that passes the budget (never inside
  one), so a run on a machine lent for minutes still writes its checkpoint and summary.
- The SFT's assistant-only loss is asked of TRL only where TRL can do it: a template with
  ``{% generation %}`` marks or one TRL knows; SmolLM2's plain ChatML template (which only
  says ``add_generation_prompt``) trains on every token instead of failing.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers", reason="the train extra is not installed")
pytest.importorskip("trl", reason="the train extra is not installed")

from deeprepo.base.errors import ConfigError
from deeprepo.rl.train.config import load_config
from deeprepo.rl.train.grpo import _callback
from deeprepo.rl.train.sft import can_mask_assistant
from deeprepo.rl.train.tiny import CHAT_TEMPLATE

# SmolLM2-135M-Instruct's template, as `deeprepo export checkpoint` writes it from the GGUF.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _step(callback: object, step: int) -> SimpleNamespace:
    state = SimpleNamespace(global_step=step)
    control = SimpleNamespace(should_training_stop=False)
    callback.on_step_begin(None, state, control)  # type: ignore[attr-defined]
    callback.on_step_end(None, state, control)  # type: ignore[attr-defined]
    return control


def test_max_seconds_stops_after_the_step_that_passes_it(tmp_path: Path) -> None:
    callback = _callback(tmp_path / "log.jsonl", None, lambda _: None, 5, 1e-9)  # type: ignore[arg-type]
    assert _step(callback, 1).should_training_stop
    assert callback.time_stopped


def test_max_seconds_unset_or_not_passed_lets_every_step_run(tmp_path: Path) -> None:
    unset = _callback(tmp_path / "a.jsonl", None, lambda _: None, 5)  # type: ignore[arg-type]
    assert not any(_step(unset, s).should_training_stop for s in range(1, 5))
    ample = _callback(tmp_path / "b.jsonl", None, lambda _: None, 5, 3600.0)  # type: ignore[arg-type]
    assert not _step(ample, 1).should_training_stop and not ample.time_stopped


def test_the_last_step_is_not_counted_as_stopped_by_time(tmp_path: Path) -> None:
    callback = _callback(tmp_path / "log.jsonl", None, lambda _: None, 3, 1e-9)  # type: ignore[arg-type]
    _step(callback, 3)
    assert not callback.time_stopped


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_seconds_must_be_positive(tmp_path: Path, value: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"[grpo]\nmax_seconds = {value}\n")
    with pytest.raises(ConfigError, match=r"grpo\.max_seconds"):
        load_config(path, need="grpo")


def _tokenizer(template: str) -> object:
    """A real transformers tokenizer (TRL renders the template through it), vocabulary of one."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    inner = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=inner, chat_template=template)


def test_assistant_only_loss_where_trl_can_mask_it() -> None:
    assert can_mask_assistant(_tokenizer(CHAT_TEMPLATE))
    assert "add_generation_prompt" in SMOLLM2_TEMPLATE
    assert not can_mask_assistant(_tokenizer(SMOLLM2_TEMPLATE))
