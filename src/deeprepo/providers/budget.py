"""Budgets on dollars, sub-calls and wall time, checked before every model call.

The metered wrapper calls :meth:`Budget.acquire` right before each attempt. It
refuses when the spend *already recorded* in the ledger has reached the cost
limit, when the sub-calls already started have reached their limit, or when the
deadline has passed. So a budget is never overrun by more than the calls in
flight at the moment it ran out. Calls whose price is unknown add nothing to
the recorded spend; the cost limit then bounds only the priced calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from deeprepo.base.chat import Role
from deeprepo.base.errors import BudgetExceeded
from deeprepo.providers.ledger import Ledger

__all__ = ["Budget"]


class Budget:
    """Limits for one run; ``None`` means no limit. ``deadline_s`` counts from creation on
    ``clock``. A ``parent`` budget is checked before every call too: the cost cap of an
    evaluation whose rollouts each have their own budget (their ledgers record into the
    parent's, see :class:`Ledger`)."""

    def __init__(
        self,
        max_cost_usd: float | None = None,
        max_sub_calls: int | None = None,
        deadline_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        ledger: Ledger | None = None,
        parent: Budget | None = None,
    ) -> None:
        self.max_cost_usd = max_cost_usd
        self.parent = parent
        self.max_sub_calls = max_sub_calls
        self.deadline_s = deadline_s
        self._clock = clock
        self._start = clock()
        self._ledger = ledger
        self._lock = threading.Lock()
        self._sub_calls_started = 0

    def attach(self, ledger: Ledger) -> None:
        """Read the spend from ``ledger`` (the metered wrapper attaches its own if unset)."""
        if self._ledger is None:
            self._ledger = ledger

    @property
    def ledger(self) -> Ledger | None:
        return self._ledger

    @property
    def sub_calls_started(self) -> int:
        return self._sub_calls_started

    def spent_usd(self) -> float:
        """The known spend recorded so far."""
        return 0.0 if self._ledger is None else self._ledger.known_cost()

    def elapsed_s(self) -> float:
        return self._clock() - self._start

    def remaining_s(self) -> float | None:
        """Seconds until the deadline, or None without one."""
        if self.deadline_s is None:
            return None
        return self.deadline_s - self.elapsed_s()

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` if the cost or time budget (or the parent's) is spent."""
        if self.parent is not None:
            self.parent.check()
        spent = self.spent_usd()
        if self.max_cost_usd is not None and spent >= self.max_cost_usd:
            raise BudgetExceeded(
                f"cost budget spent: ${spent:.4f} of ${self.max_cost_usd:.4f}; "
                "raise --max-cost to go further",
                kind="cost",
                spent_usd=spent,
            )
        left = self.remaining_s()
        if left is not None and left <= 0:
            raise BudgetExceeded(
                f"time budget spent: {self.elapsed_s():.1f} s of {self.deadline_s:.1f} s; "
                "raise --timeout to go further",
                kind="timeout",
                spent_usd=spent,
            )

    def acquire(self, role: Role, *, retry: bool = False) -> None:
        """Allow one call by ``role`` or raise :class:`BudgetExceeded`.

        A sub-call counts once, when first started; ``retry=True`` marks a further
        attempt of a call already counted.
        """
        self.check()
        if role != "sub" or retry:
            return
        with self._lock:
            if self.max_sub_calls is not None and self._sub_calls_started >= self.max_sub_calls:
                raise BudgetExceeded(
                    f"sub-call budget spent: {self._sub_calls_started} of {self.max_sub_calls} "
                    "sub-LLM calls; raise --max-sub-calls or batch more work per call",
                    kind="sub_calls",
                    spent_usd=self.spent_usd(),
                )
            self._sub_calls_started += 1
