"""Generating the replies of several ``hf/`` requests in one batch.

On a CPU, transformers' ``generate`` on one 135M-parameter model costs ~90 ms a token for
one sequence and ~150 ms a step for eight (measured on the 2-core development machine,
docs/training.md): the step's time goes to per-layer overhead, not arithmetic, so eight
rollouts generated together run ~5x faster than one after another. ``deeprepo eval -c N``
already runs N rollouts at once; with ``DEEPREPO_HF_BATCH=B`` their waiting requests are
taken B at a time, left-padded to one width and sampled together.

A lone request is generated exactly as before (no padding, its own seed), so with a batch
size of 1, or one request in flight, the replies are the ones ``hf/`` always gave. In a
batch, padding and the shared random stream make a reply depend on its batch-mates: such a
run is not repeatable reply for reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Job", "RequestBatcher", "batcher_for", "cut_reply", "generate_jobs", "left_pad"]

# How long the first waiting request waits for batch-mates: a rollout's next request comes
# within a second or so of its last reply, a generation takes tens of seconds on a CPU.
GATHER_SECONDS = 0.5


@dataclass(frozen=True)
class Job:
    """One request as token ids, with its own generation limits."""

    prompt: list[int]
    max_new: int
    temperature: float
    seed: int


def generate_jobs(loaded: Any, jobs: list[Job]) -> list[list[int]]:
    """The new tokens of each job (cut at its ``max_new`` and just after its EOS), from one
    ``generate`` call. All jobs must share a temperature; the first job's seed seeds it."""
    import torch

    tok = loaded.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    eos = tok.eos_token_id
    temperature = jobs[0].temperature
    if any(j.temperature != temperature for j in jobs):
        raise ValueError("one batch samples at one temperature")
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_k": 0}
        if temperature > 0
        else {"do_sample": False}
    )
    ids, mask = left_pad([j.prompt for j in jobs], pad)
    width = ids.shape[1]
    with loaded.lock, torch.no_grad():
        torch.manual_seed(jobs[0].seed)
        out = loaded.model.generate(
            input_ids=ids.to(loaded.device),
            attention_mask=mask.to(loaded.device),
            max_new_tokens=max(j.max_new for j in jobs),
            pad_token_id=pad,
            **sampling,
        )
    return [
        cut_reply(out[row, width:].tolist(), job.max_new, eos)[0] for row, job in enumerate(jobs)
    ]


def left_pad(contexts: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any]:
    """``(input_ids, attention_mask)``: the contexts right-aligned in one ``[batch, width]``
    tensor, ``pad`` (mask 0) on the left; what a decoder-only ``generate`` batches."""
    import torch

    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for row, context in enumerate(contexts):
        ids[row, width - len(context) :] = torch.tensor(list(context), dtype=torch.long)
        mask[row, width - len(context) :] = 1
    return ids, mask


def cut_reply(tokens: list[int], limit: int, eos: int | None) -> tuple[list[int], bool]:
    """One row of a batch's new tokens, cut to its own ``limit`` and just after its first
    ``eos`` (the rest is padding, or the batch going on past it); whether it ended by EOS."""
    kept = tokens[:limit]
    if eos is not None and eos in kept:
        return kept[: kept.index(eos) + 1], True
    return kept, False


@dataclass
class _Waiting:
    job: Job
    future: asyncio.Future[list[int]]


@dataclass
class RequestBatcher:
    """Collects the requests waiting for one loaded model in one event loop and generates
    them ``size`` at a time, one batch after another (the model runs one batch at a time)."""

    loaded: Any
    size: int
    loop: asyncio.AbstractEventLoop
    waiting: list[_Waiting] = field(default_factory=list)
    drainer: asyncio.Task[None] | None = None

    async def submit(self, job: Job) -> list[int]:
        future: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self.waiting.append(_Waiting(job, future))
        if self.drainer is None or self.drainer.done():
            self.drainer = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self.waiting:
            if len(self.waiting) < self.size:
                await asyncio.sleep(GATHER_SECONDS)
            first = self.waiting[0].job.temperature
            batch = [w for w in self.waiting if w.job.temperature == first][: self.size]
            for w in batch:
                self.waiting.remove(w)
            batch = [w for w in batch if not w.future.cancelled()]
            if not batch:
                continue
            try:
                outs = await asyncio.to_thread(generate_jobs, self.loaded, [w.job for w in batch])
            except Exception as exc:  # every request of the batch fails alike
                for w in batch:
                    if not w.future.done():
                        w.future.set_exception(exc)
                continue
            for w, new in zip(batch, outs, strict=True):
                if not w.future.done():
                    w.future.set_result(new)


_BATCHERS: dict[tuple[int, int], RequestBatcher] = {}


def batcher_for(loaded: Any, size: int) -> RequestBatcher:
    """The batcher of ``loaded`` in the running event loop (one per loop: its futures
    belong to it)."""
    loop = asyncio.get_running_loop()
    # Forget the batchers of loops that have closed (an id can be reused by a new loop).
    for stale in [k for k, b in _BATCHERS.items() if b.loop.is_closed()]:
        del _BATCHERS[stale]
    key = (id(loaded), id(loop))
    batcher = _BATCHERS.get(key)
    if batcher is None or batcher.size != size or batcher.loop is not loop:
        batcher = _BATCHERS[key] = RequestBatcher(loaded, size, loop)
    return batcher
