"""The policy being trained, as the root model of an Episode, keeping every token it saw.

:class:`PolicyRoot` is a :class:`~deeprepo.base.chat.ChatModel`: the Episode calls it
exactly as it calls Claude or a scripted policy, so a training rollout is the same loop,
prompts, parser, sandbox and reward as ``analyze`` and ``eval``. Underneath it keeps the
rollout as one token sequence, the way GRPO needs it:

* turn 1: the chat template renders the system prompt and first message with the generation
  prompt: these are the rollout's ``prompt_ids``;
* each reply the policy samples is appended as *model* tokens (``env_mask`` 1), with the
  log-probabilities it was sampled with;
* each observation the Episode sends back (the REPL output, the countdown, the final-turn
  note) is appended as *environment* tokens (``env_mask`` 0): the end of the assistant
  message, the user message, the next generation prompt, as the chat template writes them.

The template is never re-applied to the whole conversation after turn 1: the sequence only
grows by appending, so the tokens trained on are exactly the tokens the policy was
conditioned on. :class:`ChatFrame` learns from the template, with sentinel messages, which
text closes an assistant message and which text wraps a user message.

Replies of all rollouts in flight are generated together (:class:`GenerationQueue`): the
queue waits until every live episode is waiting for the policy, then runs one batched
generation, which is what makes a GPU worth using: transformers' ``generate`` (left-padded,
:func:`~deeprepo.rl.train.generation.generate_batch`) or, with ``[grpo] use_vllm = true``,
TRL's colocated vLLM engine (:func:`~deeprepo.rl.train.generation.generate_vllm`), which TRL
syncs with the policy's weights before each step. Both live in ``train/generation.py`` and are
re-exported here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.errors import BudgetExceeded, ConfigError
from deeprepo.rl.train.generation import Generated, generate_batch, generate_vllm

__all__ = [
    "ChatFrame",
    "Generated",
    "GenerationQueue",
    "PolicyRoot",
    "TokenTrace",
    "generate_batch",
    "generate_vllm",
]

_REPLY = "\x01REPLY\x01"
_OBS = "\x02OBS\x02"


@dataclass(frozen=True)
class ChatFrame:
    """How a chat template opens a conversation and extends it by one observation."""

    render_opening: Callable[[str | None, str], str]
    close_after_reply: str  # what the template writes after an assistant message's content
    user_prefix: str  # closing text excluded: from the user turn up to its content
    user_suffix: str  # after the user content, through the next generation prompt
    eos_text: str

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ChatFrame:
        """Probe ``tokenizer.apply_chat_template`` with sentinels; raise :class:`ConfigError`
        when the template does not extend a conversation by appending."""

        def render(messages: list[dict[str, str]], gen: bool) -> str:
            text = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=gen
            )
            return str(text)

        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(
                "the model's tokenizer has no chat template; deeprepo train needs one"
            )
        base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        with_reply = [*base, {"role": "assistant", "content": _REPLY}]
        t1 = render(with_reply, False)
        t2 = render([*with_reply, {"role": "user", "content": _OBS}], True)
        if _REPLY not in t1 or not t2.startswith(t1) or t2.count(_OBS) != 1:
            raise ConfigError(
                "the model's chat template does not extend a conversation by appending to it; "
                "deeprepo train needs one that does (ChatML-style templates do)"
            )
        close = t1[t1.rindex(_REPLY) + len(_REPLY) :]
        prefix, suffix = t2[len(t1) :].split(_OBS)
        eos_id = tokenizer.eos_token_id
        eos_text = tokenizer.decode([eos_id]) if eos_id is not None else ""

        def opening(system: str | None, first: str) -> str:
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": first})
            return render(messages, True)

        return cls(opening, close, prefix, suffix, eos_text)

    def continuation(self, observation: str, *, reply_ended: bool) -> str:
        """The environment text after a reply: the rest of the assistant message's closing
        (the part the policy did not write itself), the observation, the generation prompt."""
        close = self.close_after_reply
        if reply_ended and self.eos_text and close.startswith(self.eos_text):
            close = close[len(self.eos_text) :]
        return close + self.user_prefix + observation + self.user_suffix


@dataclass
class TokenTrace:
    """One rollout's tokens: the opening prompt, then replies and observations interleaved."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    replies: int = 0
    truncated_replies: int = 0  # replies cut at max_new_tokens
    last_ended: bool = True

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)

    def add(self, ids: Sequence[int], *, model: bool, logprobs: Sequence[float] = ()) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([1 if model else 0] * len(ids))
        self.logprobs.extend(logprobs if model else [0.0] * len(ids))


class GenerationQueue:
    """Batches the policy's generations across the episodes running concurrently.

    Each live episode either runs code in its kernel or waits for the policy; when every
    live one waits, their contexts go to one ``generate`` call (in a thread, so the event
    loop stays free). ``retire()`` when an episode ends so the others stop waiting for it.
    ``threaded=False`` calls ``generate`` on the event loop's own thread instead: nothing else
    is waiting then anyway, and vLLM's in-process engine stays on the thread that made it.
    """

    def __init__(
        self,
        generate: Callable[[list[list[int]], list[int]], list[Generated]],
        live: int,
        *,
        threaded: bool = True,
    ) -> None:
        self._generate = generate
        self._threaded = threaded
        self._live = live
        self._pending: list[tuple[int, list[int], int, asyncio.Future[Generated]]] = []
        self.calls = 0
        self.batch_sizes: list[int] = []

    async def submit(self, key: int, context: list[int], max_new_tokens: int) -> Generated:
        """Wait for a reply to ``context``. Rows are generated in ``key`` order, so which
        random numbers a rollout draws does not depend on which kernel finished first."""
        future: asyncio.Future[Generated] = asyncio.get_running_loop().create_future()
        self._pending.append((key, context, max_new_tokens, future))
        self._maybe_flush()
        return await future

    def retire(self) -> None:
        self._live -= 1
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self._pending and len(self._pending) >= self._live:
            batch, self._pending = sorted(self._pending, key=lambda p: p[0]), []
            asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(
        self, batch: list[tuple[int, list[int], int, asyncio.Future[Generated]]]
    ) -> None:
        self.calls += 1
        self.batch_sizes.append(len(batch))
        contexts, limits = [c for _, c, _, _ in batch], [n for _, _, n, _ in batch]
        try:
            if self._threaded:
                results = await asyncio.to_thread(self._generate, contexts, limits)
            else:
                results = self._generate(contexts, limits)
        except BaseException as exc:  # every waiting episode hears of it
            for _, _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, _, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)


class PolicyRoot:
    """The trained model as an Episode's root, recording its rollout in a :class:`TokenTrace`."""

    def __init__(
        self,
        *,
        tokenizer: Any,
        frame: ChatFrame,
        queue: GenerationQueue,
        max_new_tokens: int,
        max_context_tokens: int,
        name: str = "policy",
        key: int = 0,
    ) -> None:
        self.tokenizer = tokenizer
        self.frame = frame
        self.queue = queue
        self.max_new_tokens = max_new_tokens
        self.max_context_tokens = max_context_tokens
        self._name = name
        self.key = key
        self.trace = TokenTrace()

    @property
    def name(self) -> str:
        return self._name

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    async def complete(self, request: ChatRequest) -> Completion:
        trace = self.trace
        replies_so_far = sum(1 for m in request.messages if m.role == "assistant")
        if replies_so_far != trace.replies:
            raise RuntimeError(
                f"PolicyRoot follows one conversation: it has {trace.replies} replies on record "
                f"but the request holds {replies_so_far}"
            )
        if trace.replies == 0:
            trace.prompt_ids = self._encode(
                self.frame.render_opening(request.system, request.messages[0].content)
            )
            env: list[int] = []
        else:
            text = self.frame.continuation(
                request.messages[-1].content, reply_ended=trace.last_ended
            )
            env = self._encode(text)
        room = self.max_context_tokens - trace.length - len(env)
        if room < 1:
            raise BudgetExceeded(
                f"the rollout's context is full ({self.max_context_tokens:,} tokens, "
                "episode.max_context_tokens)",
                kind="tokens",
            )
        trace.add(env, model=False)
        context = trace.prompt_ids + trace.completion_ids
        out = await self.queue.submit(self.key, context, min(self.max_new_tokens, room))
        trace.add(out.ids, model=True, logprobs=out.logprobs)
        trace.replies += 1
        trace.last_ended = out.ended
        trace.truncated_replies += 0 if out.ended else 1
        text = self.tokenizer.decode(out.ids, skip_special_tokens=True)
        return Completion(
            text=text,
            usage=Usage(input_tokens=len(context), output_tokens=len(out.ids)),
            model=self._name,
            finish_reason="stop" if out.ended else "length",
        )

    async def aclose(self) -> None:
        return None
