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
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from deeprepo.base.chat import Role, Usage, UsageRowDict, parse_role, read_count

__all__ = ["LLMCall", "Ledger", "LedgerDict", "UsageRow"]


class LedgerDict(TypedDict):
    """:meth:`Ledger.to_dict`: the rows and the totals."""

    rows: list[UsageRowDict]
    total_cost_usd: float | None
    known_cost_usd: float
    unpriced_calls: int
    sub_calls: int


@dataclass(frozen=True)
class LLMCall:
    """One model reply as billed. ``cost_usd`` is None when the price is unknown."""

    role: Role
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
    the requests that failed for good without a billed reply. ``cost_usd`` is None as
    soon as one summed call's price is unknown."""

    role: Role
    model: str
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    failed_requests: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0

    @classmethod
    def of_call(cls, call: LLMCall) -> UsageRow:
        """The row of one recorded reply."""
        return cls(
            call.role,
            call.model,
            calls=1,
            cached_calls=int(call.cached),
            failed_calls=int(call.error is not None),
            usage=call.usage,
            cost_usd=call.cost_usd,
        )

    def __add__(self, other: UsageRow) -> UsageRow:
        """The sums of both rows, under this row's role and model."""
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else self.cost_usd + other.cost_usd
        )
        return UsageRow(
            self.role,
            self.model,
            self.calls + other.calls,
            self.cached_calls + other.cached_calls,
            self.failed_calls + other.failed_calls,
            self.failed_requests + other.failed_requests,
            self.usage + other.usage,
            cost,
        )

    def to_dict(self) -> UsageRowDict:
        """The JSON row, its keys in the order every file writes them."""
        return {
            "role": self.role,
            "model": self.model,
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "failed_calls": self.failed_calls,
            "failed_requests": self.failed_requests,
            **self.usage.to_dict(),
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> UsageRow:
        """A row read back from JSON or the run log. Missing counts are 0 and a missing
        cost is 0.0; a wrong type raises ``ValueError`` naming the field."""
        role, model = parse_role(d.get("role")), d.get("model")
        if not isinstance(model, str):
            raise ValueError(f"a usage row needs a string model, got {model!r}")
        cost = d.get("cost_usd", 0.0)
        if cost is not None and (
            isinstance(cost, bool)
            or not isinstance(cost, int | float)
            or not math.isfinite(cost)
            or cost < 0
        ):  # a negative or NaN spend read back would lift a budget
            raise ValueError(f"cost_usd must be a number >= 0 or null, got {cost!r}")
        return cls(
            role,
            model,
            read_count(d, "calls"),
            read_count(d, "cached_calls"),
            read_count(d, "failed_calls"),
            read_count(d, "failed_requests"),
            Usage.from_dict(d),
            None if cost is None else float(cost),
        )


class Ledger:
    """Thread-safe record of model calls; the one source for tokens and dollars.

    With a ``parent``, every call and failure is recorded there too: an evaluation's
    ledger sums its rollouts' own ledgers, and its budget reads the sum."""

    def __init__(self, parent: Ledger | None = None) -> None:
        self.parent = parent
        self._lock = threading.Lock()
        self._calls: list[LLMCall] = []
        # (role, model) -> requests that failed for good without a reply.
        self._failures: dict[tuple[Role, str], int] = {}
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

    def record_failure(self, role: Role, model: str) -> None:
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
        acc: dict[tuple[Role, str], UsageRow] = {}
        for c in calls:
            row = UsageRow.of_call(c)
            key = (c.role, c.model)
            acc[key] = acc[key] + row if key in acc else row
        for (role, model), n in failures.items():
            row = UsageRow(role, model, failed_requests=n)
            acc[(role, model)] = acc[(role, model)] + row if (role, model) in acc else row
        return list(acc.values())

    def usage(self, role: Role | None = None) -> Usage:
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

    def to_dict(self) -> LedgerDict:
        """JSON-ready summary: rows, totals and the count of unpriced calls."""
        with self._lock:
            unknown = self._unknown_cost_calls
        return {
            "rows": [r.to_dict() for r in self.rows()],
            "total_cost_usd": self.total_cost(),
            "known_cost_usd": self.known_cost(),
            "unpriced_calls": unknown,
            "sub_calls": self.sub_call_count(),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)
