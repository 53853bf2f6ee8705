"""Sampling the policy's replies in batches, each token with the log-probability it was drawn with.

:func:`generate_batch` runs transformers' ``generate`` on left-padded contexts and takes each
sampled token's log-probability on the device while it generates (:class:`SampledLogprobs`);
:func:`generate_vllm` asks TRL's colocated vLLM engine instead. Both return one
:class:`Generated` per context, cut to that context's own token limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deeprepo.providers.hf_batch import cut_reply, left_pad

__all__ = ["Generated", "SampledLogprobs", "generate_batch", "generate_vllm"]


@dataclass(frozen=True)
class Generated:
    """One sampled reply: its tokens, their log-probabilities, and whether it ended by EOS."""

    ids: list[int]
    logprobs: list[float]
    ended: bool


class SampledLogprobs:
    """A logits processor that keeps each sampled token's log-probability on the device.

    transformers calls logits processors before it samples, so the token a step picks is not
    known while that step's scores are processed. Each call therefore keeps the step's
    log-softmax (``[batch, vocab]``, on the device) and, from the second call on, gathers
    the previous step's value at the token the previous step appended (``input_ids[:, -1]``);
    :meth:`finish` gathers the last step's at the last token of the output. Only one step's
    distribution is alive at a time and only ``[batch, new_tokens]`` values leave the device,
    where ``output_scores=True`` kept every step's full-vocabulary scores and copied them all
    to the CPU (for Qwen's 151,936-token vocabulary, ~600 KB a token).

    It must run after every processor that shapes the sampling distribution (temperature
    included): :func:`generate_batch` puts it last.
    """

    def __init__(self) -> None:
        self._last: Any = None  # the previous step's log-softmax, [batch, vocab]
        self._taken: list[Any] = []  # one [batch] tensor per sampled token

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self._last is not None:
            self._taken.append(self._last.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self._last = scores.float().log_softmax(-1)
        return scores

    def finish(self, sequences: Any) -> Any:
        """The ``[batch, new_tokens]`` log-probabilities, on the device, given the output."""
        import torch

        if self._last is not None:
            self._taken.append(self._last.gather(-1, sequences[:, -1:]).squeeze(-1))
            self._last = None
        if not self._taken:
            return torch.zeros((sequences.shape[0], 0), device=sequences.device)
        return torch.stack(self._taken, dim=1)


def generate_batch(
    model: Any,
    tokenizer: Any,
    contexts: Sequence[Sequence[int]],
    max_new_tokens: Sequence[int],
    *,
    temperature: float,
    cache_implementation: str | None = None,
) -> list[Generated]:
    """Sample one reply for each context in one left-padded ``generate`` call.

    The log-probabilities are those of the distribution each token was sampled from: the
    model's logits after the processors its generation config asks for (a repetition penalty,
    say), divided by ``temperature``, with no top-k/top-p/min-p filtering (what TRL's loss
    computes, ``logits / temperature``, apart from such processors). :class:`SampledLogprobs`
    takes them on the device during generation. ``cache_implementation`` is passed to
    ``generate`` (``"static"``: a preallocated KV cache; ``None``: transformers' dynamic one).
    """
    import torch
    from transformers import LogitsProcessorList, TemperatureLogitsWarper

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = tokenizer.eos_token_id
    ids, mask = left_pad(contexts, pad)
    width = ids.shape[1]
    recorder = SampledLogprobs()
    # transformers appends its own warpers (temperature, top-k, ...) after the processors it
    # is given, so the temperature is applied here, before the recorder, and every warper of
    # the model's generation config is switched off: the recorder then sees the distribution
    # the sampler draws from.
    processors = LogitsProcessorList(
        [*([TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []), recorder]
    )
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            sequences = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                min_p=None,
                typical_p=1.0,
                epsilon_cutoff=0.0,
                eta_cutoff=0.0,
                logits_processor=processors,
                max_new_tokens=max(max_new_tokens),
                eos_token_id=eos,
                pad_token_id=pad,
                use_cache=True,
                cache_implementation=cache_implementation,
                return_dict_in_generate=False,
            )
            chosen = recorder.finish(sequences).cpu()
    finally:
        if was_training:
            model.train()
    new = sequences[:, width:].cpu()
    results: list[Generated] = []
    for row, limit in enumerate(max_new_tokens):
        kept, ended = cut_reply(new[row].tolist(), limit, eos)
        results.append(Generated(kept, chosen[row, : len(kept)].tolist(), ended))
    return results


def generate_vllm(
    engine: Any,
    contexts: Sequence[Sequence[int]],
    max_new_tokens: Sequence[int],
    *,
    eos_token_id: int | None,
) -> list[Generated]:
    """Sample one reply for each context with TRL's vLLM engine (``trainer.vllm_generation``).

    TRL 1.16 ``trl/generation/vllm_generation.py:550``::

        def generate(self, prompts: list[list[int]], images: list[list | None] | None,
                     num_generations: int, profiler: ProfilingContext | None = None) -> tuple
        # -> (prompt_ids, completion_ids, logprobs, logprob_token_ids); logprobs is
        #    [sequence][token][k] with k = 1 when TRL built the engine with logprobs=0

    In colocate mode it builds one ``SamplingParams`` from the engine's own attributes
    (``n=1``, ``temperature``, ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``,
    ``max_tokens=max_completion_length``, ``logprobs``; lines 662-683), which
    ``GRPOTrainer`` set from ``GRPOConfig`` (``grpo_trainer.py:1107-1138``), and returns the
    outputs in the order of ``prompts`` (lines 729-733). One request length serves all rows, so
    each reply is cut here to its own limit, as :func:`generate_batch` does. A reply counts as
    ended only at the tokenizer's EOS, as on the transformers path; vLLM may also stop at
    another EOS of the model's generation config, and the chat frame then closes the message
    after that token: the sequence still only grows by appending.
    """
    limit = getattr(engine, "max_completion_length", None)
    if limit is not None and max(max_new_tokens) > int(limit):
        raise RuntimeError(
            f"the vLLM engine generates at most {limit} tokens a reply but a rollout asked for "
            f"{max(max_new_tokens)} (GRPOConfig.max_completion_length must be "
            "episode.max_new_tokens)"
        )
    _, completions, logprobs, _ = engine.generate(
        prompts=[list(c) for c in contexts], images=None, num_generations=1
    )
    if len(completions) != len(contexts):
        raise RuntimeError(
            f"the vLLM engine returned {len(completions)} replies for {len(contexts)} prompts"
        )
    if logprobs is None:
        raise RuntimeError("the vLLM engine returned no log-probabilities (logprobs=None)")
    results: list[Generated] = []
    for ids, per_token, limit_row in zip(completions, logprobs, max_new_tokens, strict=True):
        tokens = [int(t) for t in ids]
        keep, ended = min(limit_row, len(tokens)), False
        for i, tok in enumerate(tokens[:keep]):
            if tok == eos_token_id:
                keep, ended = i + 1, True
                break
        # The sampled token's log-probability is the first of each token's list; vLLM's NaN
        # comes back as None (extract_logprobs, line 96): NaN again, as TRL reads it
        # (grpo_trainer.py:2463-2470 maps None to NaN and zeroes its importance-ratio term).
        values = [float("nan") if lp[0] is None else float(lp[0]) for lp in per_token[:keep]]
        results.append(Generated(tokens[:keep], values, ended))
    return results
