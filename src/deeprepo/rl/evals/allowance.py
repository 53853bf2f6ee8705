"""A total cost cap shared out among runs that go on at once, each under its own allowance.

A bench's cells, and an evaluation's rollouts when they run as Ray tasks, cannot read one
another's spending while they run: each gets an allowance (its own cost cap) from what is
left of the total, and gives back what it did not spend when it ends.
"""

from __future__ import annotations

__all__ = ["CostGate"]


class CostGate:
    """A total cost budget across concurrent runs (a bench's cells, a Ray evaluation's rollouts).

    A starting run is given an allowance (its own ``--max-cost``): the unreserved money
    shared among the runs that may still start together, so concurrent runs together stay
    within the total (each overshoots by at most the calls it has in flight, as a single
    run does). What a run did not spend returns to the pool when it ends."""

    def __init__(self, total: float | None, slots: int) -> None:
        self.total = total
        self.slots = slots
        self.spent = 0.0
        self.unknown = 0  # runs whose cost is unknown (a model without a price)
        self._reserved: dict[int, float] = {}

    def free(self) -> float | None:
        if self.total is None:
            return None
        return self.total - self.spent - sum(self._reserved.values())

    def reserve(self, token: int, waiting: int, cap: float | None) -> float | None:
        """The allowance of a run about to start (None: no limit); 0 means do not start."""
        free = self.free()
        if free is None:
            return cap
        share = max(0.0, free) / max(1, min(self.slots - len(self._reserved), waiting))
        allowance = share if cap is None else min(cap, share)
        if allowance > 1e-9:
            self._reserved[token] = allowance
        return allowance if allowance > 1e-9 else 0.0

    def settle(self, token: int, cost: float | None) -> None:
        self._reserved.pop(token, None)
        if cost is None:
            self.unknown += 1
        else:
            self.spent += cost
