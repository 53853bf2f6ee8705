"""The usage ledger: every billed (or cached) model reply, summed per (role, model).

The metered wrapper records each reply exactly once. A reply that arrived and was
then rejected (empty ``choices``, a refusal) is recorded with its ``error``: the
provider billed it. A request that failed without a reply (connection reset,
5xx, timeout) is billed by nobody and only counted as a failed request.

Cached replies are recorded with ``cached=True``, zero tokens and zero cost:
the money was spent by the run that filled the cache, not by this one.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from deeprepo.base.chat import Usage

__all__ = ["LLMCall", "Ledger", "UsageRow"]


@dataclass(frozen=True)
class LLMCall:
    """One model reply as billed. ``cost_usd`` is None when the price is unknown."""

    role: str
    model: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class UsageRow:
    """Sums for one (role, model). ``calls`` counts recorded replies (cached ones
    included); ``failed_calls`` those of them that were rejected; ``failed_requests``
    the requests that failed for good without a billed reply."""

    role: str
    model: str
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    failed_requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def usage(self) -> Usage:
        return Usage(
            self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Ledger:
    """Thread-safe record of model calls; the one source for tokens and dollars.

    With a ``parent``, every call and failure is recorded there too: an evaluation's
    ledger sums its rollouts' own ledgers, and its budget reads the sum."""

    def __init__(self, parent: Ledger | None = None) -> None:
        self.parent = parent
        self._lock = threading.Lock()
        self._calls: list[LLMCall] = []
        # (role, model) -> requests that failed for good without a reply.
        self._failures: dict[tuple[str, str], int] = {}
        self._known_cost = 0.0
        self._unknown_cost_calls = 0

    def record(self, call: LLMCall) -> None:
        """Add one reply."""
        with self._lock:
            self._calls.append(call)
            if call.cost_usd is None:
                self._unknown_cost_calls += 1
            else:
                self._known_cost += call.cost_usd
        if self.parent is not None:
            self.parent.record(call)

    def record_failure(self, role: str, model: str) -> None:
        """Count a request that failed for good without any billed reply."""
        with self._lock:
            key = (role, model)
            self._failures[key] = self._failures.get(key, 0) + 1
        if self.parent is not None:
            self.parent.record_failure(role, model)

    def calls(self) -> list[LLMCall]:
        """A copy of every recorded call, oldest first."""
        with self._lock:
            return list(self._calls)

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)

    def rows(self) -> list[UsageRow]:
        """One row per (role, model), in order of first appearance."""
        with self._lock:
            calls = list(self._calls)
            failures = dict(self._failures)
        acc: dict[tuple[str, str], dict[str, Any]] = {}
        for c in calls:
            a = acc.setdefault((c.role, c.model), _empty_row())
            a["calls"] += 1
            a["cached_calls"] += int(c.cached)
            a["failed_calls"] += int(c.error is not None)
            a["input_tokens"] += c.usage.input_tokens
            a["output_tokens"] += c.usage.output_tokens
            a["cache_read_tokens"] += c.usage.cache_read_tokens
            a["cache_write_tokens"] += c.usage.cache_write_tokens
            if a["cost_usd"] is not None:
                a["cost_usd"] = None if c.cost_usd is None else a["cost_usd"] + c.cost_usd
        for key, n in failures.items():
            acc.setdefault(key, _empty_row())["failed_requests"] += n
        return [UsageRow(role, model, **a) for (role, model), a in acc.items()]

    def usage(self, role: str | None = None) -> Usage:
        """Summed tokens, of one role or of all."""
        total = Usage()
        for c in self.calls():
            if role is None or c.role == role:
                total = total + c.usage
        return total

    def total_cost(self) -> float | None:
        """Dollars spent, or None if any call's price was unknown."""
        with self._lock:
            return None if self._unknown_cost_calls else self._known_cost

    def known_cost(self) -> float:
        """Dollars spent on calls whose price is known (a lower bound when some are not)."""
        with self._lock:
            return self._known_cost

    def sub_call_count(self) -> int:
        """Recorded sub-LLM replies, cached ones included."""
        with self._lock:
            return sum(1 for c in self._calls if c.role == "sub")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary: rows, totals and the count of unpriced calls."""
        with self._lock:
            unknown = self._unknown_cost_calls
        return {
            "rows": [asdict(r) for r in self.rows()],
            "total_cost_usd": self.total_cost(),
            "known_cost_usd": self.known_cost(),
            "unpriced_calls": unknown,
            "sub_calls": self.sub_call_count(),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)


def _empty_row() -> dict[str, Any]:
    return {
        "calls": 0,
        "cached_calls": 0,
        "failed_calls": 0,
        "failed_requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0.0,
    }
