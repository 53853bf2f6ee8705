"""Batched generation for training: each sampled token's log-probability taken on the device
(``SampledLogprobs``) equals what ``output_scores=True`` gave, token for token."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip(
    "torch", reason="the train extra is not installed: pip install -e '.[train]'"
)
pytest.importorskip("transformers", reason="the train extra is not installed")

from deeprepo.rl.train.generation import SampledLogprobs, generate_batch  # noqa: E402
from deeprepo.rl.train.tiny import build_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _scores_path(
    model: Any, tokenizer: Any, contexts: list[list[int]], new_tokens: int, temperature: float
) -> tuple[Any, Any]:
    """The path generate_batch took before: every step's scores kept, gathered afterwards."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for row, context in enumerate(contexts):
        ids[row, width - len(context) :] = torch.tensor(context)
        mask[row, width - len(context) :] = 1
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new_tokens,
            eos_token_id=eos,
            pad_token_id=pad,
            use_cache=True,
            return_dict_in_generate=True,
            output_scores=True,
        )
    new = out.sequences[:, width:]
    steps = torch.stack(out.scores, dim=1).float().log_softmax(-1)
    return new, steps.gather(-1, new.unsqueeze(-1)).squeeze(-1)


def _contexts(tokenizer: Any) -> list[list[int]]:
    texts = ["print(file_tree)", "def f(x):\n    return x", "import os\nos.system(cmd)", "a"]
    return [list(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_device_logprobs_equal_the_full_scores_path_for_the_same_seed(
    tiny: tuple[Any, Any], temperature: float
) -> None:
    model, tokenizer = tiny
    contexts = _contexts(tokenizer)
    assert len({len(c) for c in contexts}) > 1  # left padding is exercised
    limits = [24, 9, 24, 17]
    torch.manual_seed(11)
    old_ids, old_logprobs = _scores_path(model, tokenizer, contexts, max(limits), temperature)
    torch.manual_seed(11)
    replies = generate_batch(model, tokenizer, contexts, limits, temperature=temperature)
    for row, (reply, limit) in enumerate(zip(replies, limits, strict=True)):
        assert len(reply.ids) == len(reply.logprobs) == limit  # a random model never ends early
        assert reply.ids == old_ids[row, :limit].tolist()
        assert not reply.ended
        assert torch.allclose(
            torch.tensor(reply.logprobs), old_logprobs[row, :limit], atol=1e-6, rtol=0
        )
        assert all(lp < 0 for lp in reply.logprobs)


def test_logprobs_are_those_of_the_temperature_scaled_logits(tiny: tuple[Any, Any]) -> None:
    """What TRL's loss computes from the trained model, ``log_softmax(logits / T)``, in one
    forward pass over context and reply: the sampling log-probabilities match it."""
    model, tokenizer = tiny
    context = _contexts(tokenizer)[1]
    torch.manual_seed(3)
    (reply,) = generate_batch(model, tokenizer, [context], [16], temperature=0.5)
    sequence = torch.tensor([context + reply.ids])
    with torch.no_grad():
        logits = model(sequence).logits[0, len(context) - 1 : -1].float()
    expected = (logits / 0.5).log_softmax(-1).gather(-1, torch.tensor(reply.ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(reply.logprobs), expected, atol=1e-4, rtol=0)


def test_static_cache_samples_the_same_tokens(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    contexts = _contexts(tokenizer)
    torch.manual_seed(2)
    dynamic = generate_batch(model, tokenizer, contexts, [12] * 4, temperature=1.0)
    torch.manual_seed(2)
    static = generate_batch(
        model, tokenizer, contexts, [12] * 4, temperature=1.0, cache_implementation="static"
    )
    for a, b in zip(dynamic, static, strict=True):
        assert a.ids == b.ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)


def test_sampled_logprobs_gathers_each_step_at_the_token_the_next_step_sees() -> None:
    """Processors run before sampling: step k's value is read at step k+1 from the token
    then appended, and the last step's from the finished sequences."""
    recorder = SampledLogprobs()
    steps = [torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]) for _ in range(3)]
    steps[1] = torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.0, 9.0]])
    chosen = torch.tensor([[2, 1], [0, 2], [1, 0]])  # [step, row]
    ids = torch.tensor([[7], [7]])
    for step, scores in enumerate(steps):
        assert recorder(ids, scores) is scores  # the distribution passes through unchanged
        ids = torch.cat([ids, chosen[step][:, None]], dim=1)
    got = recorder.finish(ids)
    want = torch.stack(
        [
            s.log_softmax(-1).gather(-1, c[:, None])[:, 0]
            for s, c in zip(steps, chosen, strict=True)
        ],
        dim=1,
    )
    assert got.shape == (2, 3)
    assert torch.equal(got, want)


def test_sampled_logprobs_of_no_step_is_empty() -> None:
    assert SampledLogprobs().finish(torch.tensor([[1, 2]])).shape == (1, 0)


def test_generate_batch_restores_training_mode(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    model.train()
    try:
        generate_batch(model, tokenizer, _contexts(tokenizer)[:1], [3], temperature=1.0)
        assert model.training
    finally:
        model.eval()
