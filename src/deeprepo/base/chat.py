"""Records and the one protocol every model implements.

An adapter (OpenAI-compatible, Anthropic, scripted policy, static worker) only
translates a :class:`ChatRequest` into its API and the reply back into a
:class:`Completion`. Retries, concurrency, budgets, caching and the ledger live
in the metered wrapper (``deeprepo.providers.metered``), never in adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Literal, Protocol, TypedDict, runtime_checkable

#: Who a metered call works for: the root, a sub-LLM worker, or the bench's judge.
Role = Literal["root", "sub", "judge"]
ROLES: tuple[Role, ...] = ("root", "sub", "judge")


def parse_role(value: object) -> Role:
    """A role read back from disk; raises ``ValueError`` naming the roles there are."""
    for role in ROLES:
        if value == role:
            return role
    raise ValueError(f"role {value!r} is not one of {', '.join(ROLES)}")


class UsageDict(TypedDict):
    """:class:`Usage` as JSON (``calls.jsonl``, cache entries, usage rows)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


@dataclass(frozen=True)
class Usage:
    """Tokens of one call (or a sum of calls). Cache tokens are Anthropic-style:
    ``input_tokens`` excludes the cached part; cache reads/writes are separate."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(self.counts(), other.counts(), strict=True)))

    def counts(self) -> tuple[int, int, int, int]:
        """The four counts, in :data:`TOKEN_KEYS` order."""
        return (
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
        )

    def to_dict(self) -> UsageDict:
        """The four counts under their JSON keys (:data:`TOKEN_KEYS`, in that order)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Usage:
        """The counts of a JSON object (other keys are ignored). A missing key, or null,
        is 0; a count that is not a whole number >= 0 raises ``ValueError`` naming it."""
        return cls(*(read_count(d, key) for key in TOKEN_KEYS))


#: The JSON keys of :class:`Usage`, in the order every file writes them.
TOKEN_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Usage))


def read_count(d: Mapping[str, object], key: str) -> int:
    """``d[key]`` as a count: missing or null is 0; anything but a whole number >= 0
    raises ``ValueError`` naming the key."""
    value = d.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a whole number >= 0, got {value!r}")
    return value


class UsageRowDict(UsageDict):
    """One usage row as JSON: the sums of one (role, model) in ``metrics.json``'s
    ``usage``, a trajectory's ``ledger`` and a ``results.jsonl`` row's ``usage``."""

    role: Role
    model: str
    calls: int
    cached_calls: int
    failed_calls: int
    failed_requests: int
    cost_usd: float | None


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
