"""The trainee model as deeprepo's root: a ChatModel backed by a verifiers interaction.

deeprepo's :class:`~deeprepo.orchestrator.episode.Episode` owns the turn loop: it
asks its root for a reply, runs the code blocks in the sandbox kernel and sends
the output back as the next user message. Here the root is the policy under
evaluation or training, reached through ``agents.<seat>.interaction(task)``: each
``complete(request)`` sends the request's newest user message with
``interaction.turn(msg)`` and returns the segment's reply. The interaction keeps
the conversation (and records it on the trace, tokens and all), so only the new
message crosses over; the system prompt travels as the task's ``system_prompt``.

This module does not import verifiers: it needs only the shape of an interaction
(``turn``, ``trace``), which keeps it testable with a stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from deeprepo import BudgetExceeded, ChatRequest, Completion, ProviderError, Usage

__all__ = ["InteractionRoot", "usage_of_calls"]


class SegmentLike(Protocol):
    """What ``Interaction.turn`` returns (``verifiers.v1.Segment``)."""

    @property
    def terminated(self) -> bool: ...

    @property
    def last_reply(self) -> str: ...


class InteractionLike(Protocol):
    """The part of ``verifiers.v1.Interaction`` the adapter uses."""

    @property
    def trace(self) -> Any: ...

    async def turn(self, message: str) -> SegmentLike: ...


def usage_of_calls(calls: Sequence[Any]) -> Usage:
    """Sum verifiers ``ModelCall.usage`` records into deeprepo's :class:`Usage`.

    verifiers' ``prompt_tokens`` already excludes cache reads (``cached_input_tokens``),
    which is deeprepo's convention for ``input_tokens`` too.
    """
    total = Usage()
    for call in calls:
        u = getattr(call, "usage", None)
        if u is None:
            continue
        total = total + Usage(
            input_tokens=int(u.prompt_tokens or 0),
            output_tokens=int(u.completion_tokens or 0),
            cache_read_tokens=int(u.cached_input_tokens or 0),
        )
    return total


class InteractionRoot:
    """A :class:`~deeprepo.base.chat.ChatModel` whose replies come from an interaction.

    One instance serves one episode. A turn cannot be replayed through an interaction
    (the model already answered it), so a repeated or skipped request raises a
    non-retryable :class:`ProviderError` instead of sending twice.
    """

    def __init__(self, interaction: InteractionLike, *, name: str) -> None:
        self._interaction = interaction
        self._name = name
        self._sent = 0  # user messages sent so far

    @property
    def name(self) -> str:
        return self._name

    @property
    def turns_sent(self) -> int:
        """How many user messages went through the interaction."""
        return self._sent

    async def complete(self, request: ChatRequest) -> Completion:
        """Send the newest user message as one interaction turn; return the reply."""
        if not request.messages or request.messages[-1].role != "user":
            raise ProviderError(
                "the root request must end with a user message; this is a bug in the "
                "episode wiring, please report it"
            )
        users = sum(1 for m in request.messages if m.role == "user")
        if users != self._sent + 1:
            # A retry (or a skipped turn) would desynchronise the two conversations.
            raise ProviderError(
                f"root turn {users} asked for, but {self._sent} turns were sent through the "
                "verifiers interaction; a turn cannot be retried there (set max_retries=0)"
            )
        self._sent = users
        trace = self._interaction.trace
        calls_before = len(trace.calls)
        try:
            segment = await self._interaction.turn(request.messages[-1].content)
        except (RuntimeError, ValueError) as exc:
            raise ProviderError(f"the verifiers interaction refused the turn: {exc}") from exc
        if segment.terminated:
            raise _stopped(trace)
        calls = list(trace.calls[calls_before:])
        finish = next((c.finish_reason for c in reversed(calls) if c.error is None), None)
        return Completion(
            text=segment.last_reply,
            usage=usage_of_calls(calls),
            model=self._name,
            finish_reason=finish,
        )

    async def aclose(self) -> None:
        """Nothing to close: the interaction belongs to the env's ``run``."""
        return None


def _stopped(trace: Any) -> BudgetExceeded | ProviderError:
    """The deeprepo error for a rollout verifiers ended instead of answering."""
    condition = str(trace.stop_condition or "stopped")
    errors = list(getattr(trace, "errors", []) or [])
    if errors:  # a failure (harness, model call, setup), not a limit
        last = errors[-1]
        return ProviderError(
            f"the verifiers rollout failed ({condition}): {getattr(last, 'type', 'Error')}: "
            f"{getattr(last, 'message', '')}"
        )
    kind = "timeout" if "timeout" in condition else condition
    return BudgetExceeded(
        f"the verifiers rollout stopped the root ({condition}); raise the seat's limits "
        "(--env.<seat>.max-turns, token limits, timeouts) to let it go further",
        kind=kind,
    )
