"""Records and the one protocol every model implements.

An adapter (OpenAI-compatible, Anthropic, scripted policy, static worker) only
translates a :class:`ChatRequest` into its API and the reply back into a
:class:`Completion`. Retries, concurrency, budgets, caching and the ledger live
in the metered wrapper (``deeprepo.providers.metered``), never in adapters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

Role = Literal["root", "sub"]


@dataclass(frozen=True)
class Usage:
    """Tokens of one call (or a sum of calls). Cache tokens are Anthropic-style:
    ``input_tokens`` excludes the cached part; cache reads/writes are separate."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One model call. ``cache_prompt`` asks adapters that support prompt caching
    (Anthropic) to mark the conversation so later turns read it from cache."""

    messages: tuple[Message, ...]
    system: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None
    cache_prompt: bool = False

    def last_user_text(self) -> str:
        """The content of the last user message ("" when there is none)."""
        return next((m.content for m in reversed(self.messages) if m.role == "user"), "")

    def with_messages(self, messages: tuple[Message, ...]) -> ChatRequest:
        return ChatRequest(
            messages, self.system, self.max_tokens, self.temperature, self.cache_prompt
        )


@dataclass(frozen=True)
class Completion:
    """A model's reply. ``reported_cost_usd`` is the provider's own figure when it
    gives one (OpenRouter does); it wins over the price table."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    reported_cost_usd: float | None = None


@runtime_checkable
class ChatModel(Protocol):
    """What every model (remote or built-in) implements."""

    @property
    def name(self) -> str:
        """The spec string, e.g. ``anthropic/claude-opus-4-6`` or ``scripted/expert``."""
        ...

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None: ...
