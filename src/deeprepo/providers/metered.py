"""The metered wrapper: the one place that owns retries, concurrency, budgets,
the response cache and the usage ledger for a model.

Every call goes: concurrency slot → budget check → cache lookup (first attempt
only) → the model, under a per-call timeout → ledger. Retryable failures
(429, 5xx, timeouts, connection resets, malformed or empty replies) back off
exponentially with jitter, or wait what the server's ``retry-after`` asked (capped),
and release their slot while they wait. A server that cannot be reached at all
(:class:`ProviderUnreachable`: connection refused, DNS, TLS) is not transient: one
quick retry, then the call fails, and for :data:`UNREACHABLE_HOLD_S` every other call
of this model fails at once with the same error instead of trying again.

The ledger gets each *billed* reply exactly once: a good reply, or one that
arrived and was then rejected (the adapter hands it over as ``ProviderError.billed``).
An attempt the server never answered records nothing; a request that fails for
good without a billed reply is counted as a failed request.

A cache hit is checked after the budget, so it counts as a sub-call (a rerun stops
where the run that filled the cache stopped) but is recorded with zero tokens and
zero cost: that money was spent by the earlier run.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from deeprepo.base.chat import ChatModel, ChatRequest, Completion, Role, Usage
from deeprepo.base.errors import BudgetExceeded, ProviderError, ProviderUnreachable
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger, LLMCall
from deeprepo.providers.prices import PriceTable

#: Told of every call as it ends: the ledger record (or, for a request that failed for good
#: without a billed reply, an unbilled one carrying the error), the request, and the reply.
CallHook = Callable[[LLMCall, ChatRequest, str | None], None]

__all__ = ["UNREACHABLE_HOLD_S", "UNREACHABLE_RETRY_S", "CallHook", "MeteredModel"]

#: The one retry of an unreachable server waits this long (times the backoff base).
UNREACHABLE_RETRY_S = 0.5
#: After a call found the server unreachable, other calls fail at once for this long.
UNREACHABLE_HOLD_S = 10.0


class MeteredModel:
    """Wraps any :class:`ChatModel`; is one itself. One instance per role."""

    def __init__(
        self,
        model: ChatModel,
        role: Role,
        ledger: Ledger,
        prices: PriceTable,
        budget: Budget | None = None,
        concurrency: int = 8,
        cache: ResponseCache | None = None,
        max_retries: int = 5,
        call_timeout_s: float = 300.0,
        *,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        retry_after_cap_s: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.model = model
        self.role = role
        self.ledger = ledger
        self.prices = prices
        self.budget = budget
        if budget is not None:
            budget.attach(ledger)
        # A model may cap its own concurrency and ask for longer calls (a local llama.cpp
        # server answers one request at a time, slowly): queued calls must not time out.
        cap = getattr(model, "max_concurrency", None)
        if isinstance(cap, int) and cap >= 1:
            concurrency = min(concurrency, cap)
        floor = getattr(model, "min_call_timeout_s", None)
        if isinstance(floor, int | float) and floor > call_timeout_s:
            call_timeout_s = float(floor)
        self.concurrency = concurrency
        self.cache = cache
        self.max_retries = max_retries
        self.call_timeout_s = call_timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_cap_s = retry_after_cap_s
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self.in_flight = 0
        self.peak_in_flight = 0
        self.attempts = 0
        self.retries = 0
        self._down: ProviderUnreachable | None = None
        self._down_until = 0.0
        #: Set by the run to log each call (``calls.jsonl``); never lets an error through.
        self.on_call: CallHook | None = None

    @property
    def name(self) -> str:
        return self.model.name

    def _semaphore(self) -> asyncio.Semaphore:
        # A semaphore belongs to one event loop; callers that run asyncio.run() per
        # episode get a fresh one per loop instead of a RuntimeError.
        loop = asyncio.get_running_loop()
        if self._sem is None or self._loop is not loop:
            self._loop, self._sem = loop, asyncio.Semaphore(self.concurrency)
        return self._sem

    def _notify(self, call: LLMCall, request: ChatRequest, response: str | None) -> None:
        if self.on_call is not None:
            self.on_call(call, request, response)

    def _record(
        self, request: ChatRequest, c: Completion, latency: float, *, error: str | None = None
    ) -> None:
        cost = c.reported_cost_usd
        if cost is None:
            cost = self.prices.cost(self.name, c.usage)
        call = LLMCall(self.role, self.name, c.usage, cost, latency, False, error, c.finish_reason)
        self.ledger.record(call)
        self._notify(call, request, c.text)

    def _fail(self, request: ChatRequest, error: BaseException, t0: float | None = None) -> None:
        """Count a request that failed for good without a billed reply, and log it."""
        self.ledger.record_failure(self.role, self.name)
        latency = 0.0 if t0 is None else time.perf_counter() - t0
        unbilled = LLMCall(
            self.role, self.name, Usage(), 0.0, latency, False, str(error) or type(error).__name__
        )
        self._notify(unbilled, request, None)

    def backoff_s(self, attempt: int, err: ProviderError) -> float:
        """How long to wait before retry number ``attempt + 1``."""
        if err.retry_after is not None:
            return min(err.retry_after, self.retry_after_cap_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
        # "Equal jitter": at least half the ceiling, so retries still spread out but
        # never hammer the server right away.
        return ceiling * (0.5 + 0.5 * self._rng.random())

    async def complete(self, request: ChatRequest) -> Completion:
        """Call the model with retries; raises :class:`ProviderError` or :class:`BudgetExceeded`."""
        if self._down is not None and time.monotonic() < self._down_until:
            down = ProviderUnreachable(str(self._down), url=self._down.url)
            self._fail(request, down)
            raise down
        attempt = 0
        t0 = time.perf_counter()
        while True:
            err = await self._attempt(request, attempt)
            if isinstance(err, Completion):
                self._down = None
                return err
            if isinstance(err, ProviderUnreachable) and attempt >= 1:
                self._down, self._down_until = err, time.monotonic() + UNREACHABLE_HOLD_S
                self._fail(request, err, t0)
                raise err
            if not err.retryable or attempt >= self.max_retries:
                if err.billed is None:
                    self._fail(request, err, t0)
                if not err.retryable:
                    raise err
                raise ProviderError(
                    f"{self.name}: gave up after {attempt + 1} attempts; last error: {err}",
                    retryable=True,
                    status=err.status,
                    retry_after=err.retry_after,
                ) from err
            if isinstance(err, ProviderUnreachable):
                delay = UNREACHABLE_RETRY_S * self.backoff_base_s
            else:
                delay = self.backoff_s(attempt, err)
            left = self.budget.remaining_s() if self.budget is not None else None
            if left is not None:
                delay = max(0.0, min(delay, left))
            self.retries += 1
            await self._sleep(delay)
            attempt += 1

    async def _attempt(self, request: ChatRequest, attempt: int) -> Completion | ProviderError:
        async with self._semaphore():
            if self.budget is not None:
                try:
                    self.budget.acquire(self.role, retry=attempt > 0)
                except BudgetExceeded as exc:
                    if attempt > 0:
                        self._fail(request, exc)
                    raise
            if attempt == 0 and self.cache is not None:
                t0 = time.perf_counter()
                hit = self.cache.get(self.name, request)
                if hit is not None:
                    call = LLMCall(
                        self.role, self.name, Usage(), 0.0,
                        time.perf_counter() - t0, True, None, hit.finish_reason,
                    )  # fmt: skip
                    self.ledger.record(call)
                    self._notify(call, request, hit.text)
                    return hit
            timeout = self.call_timeout_s
            left = self.budget.remaining_s() if self.budget is not None else None
            by_deadline = left is not None and left < timeout
            if left is not None and by_deadline:
                timeout = max(left, 0.0)
            self.attempts += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(timeout):
                    completion = await self.model.complete(request)
            except TimeoutError:
                if by_deadline and self.budget is not None:
                    spent = BudgetExceeded(
                        f"time budget spent during a {self.name} call; raise --timeout to go further",
                        kind="timeout",
                        spent_usd=self.budget.spent_usd(),
                    )
                    self._fail(request, spent, t0)
                    raise spent from None
                return ProviderError(f"{self.name}: no reply within {timeout:g} s", retryable=True)
            except ProviderError as exc:
                if exc.billed is not None:
                    self._record(request, exc.billed, time.perf_counter() - t0, error=str(exc))
                return exc
            finally:
                self.in_flight -= 1
            self._record(request, completion, time.perf_counter() - t0)
            if self.cache is not None:
                self.cache.put(self.name, request, completion)
            return completion

    async def aclose(self) -> None:
        await self.model.aclose()
