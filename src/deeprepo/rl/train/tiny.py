"""A tiny causal LM built in-process, for CPU smoke runs and tests: no download, no weights shipped.

``build_tiny_model(out_dir)`` trains a byte-level BPE tokenizer on text deeprepo already holds
(its prompts, the scripted policies' programs, a few generated repositories), gives it a ChatML
chat template (with ``{% generation %}`` marks so assistant-only losses work), randomly
initialises a two-layer ``Qwen3`` model (~0.3M parameters) and saves both as an ordinary
transformers checkpoint: ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
``AutoTokenizer.from_pretrained(out_dir)`` load it, so it goes wherever a real checkpoint goes
(``hf/<dir>``, ``model = "<dir>"`` in a training config). Deterministic for a given ``seed``.

A random model writes garbage; it proves plumbing (generation, templates, losses, saving),
never learning.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "tokenizer_corpus"]

#: ChatML, the template most open chat models use; the generation marks let
#: ``apply_chat_template(..., return_assistant_tokens_mask=True)`` find the assistant tokens.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_VOCAB_SIZE = 4096


def tokenizer_corpus(seed: int = 0) -> Iterator[str]:
    """The local text the tokenizer learns from: what a root model reads and writes."""
    from deeprepo.base import prompts
    from deeprepo.builtin import programs
    from deeprepo.rl.policies import adversarial, reference
    from deeprepo.rl.tasks.generator import generate_task, task_seeds

    yield from prompts.ROOT_SYSTEM_PROMPTS.values()
    yield prompts.FILE_AUDIT_INSTRUCTIONS
    yield prompts.NO_CODE_NOTE
    yield prompts.FINAL_TURN_NOTE
    for module in (programs, reference, adversarial):
        for value in vars(module).values():
            if isinstance(value, str):
                yield value
            elif isinstance(value, list | tuple):
                yield from (v for v in value if isinstance(v, str))
            elif isinstance(value, dict):
                yield from (v for v in value.values() if isinstance(v, str))
    for lang in ("python", "js"):
        for task_seed in task_seeds(seed, 2):
            yield from generate_task(task_seed, "small", lang).files.values()


def build_tiny_model(out_dir: Path, seed: int = 0) -> Path:
    """Build and save the tiny model and its tokenizer under ``out_dir``; return ``out_dir``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(tokenizer_corpus(seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out_dir)

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    return out_dir
