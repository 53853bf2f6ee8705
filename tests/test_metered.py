"""The metered wrapper and the sub-call dispatcher, through the real SDKs and the loopback server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from deeprepo.base.chat import ChatModel, ChatRequest, Message, Usage
from deeprepo.base.errors import BudgetExceeded, ProviderError
from deeprepo.providers.anthropic_api import AnthropicModel
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.dispatch import ERROR_PREFIX, SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.openai_compat import OpenAICompatModel
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.testing.loopback import LoopbackServer, Reply

PRICES = PriceTable.load()


class Sleeps:
    """A stand-in for asyncio.sleep that records the delays instead of waiting them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
async def make(loopback: LoopbackServer) -> AsyncIterator[Callable[..., MeteredModel]]:
    """Build metered models over the loopback server; closes them afterwards."""
    built: list[MeteredModel] = []

    def factory(
        spec_text: str = "openai/gpt-4o-mini", *, role: str = "sub", **kw: Any
    ) -> MeteredModel:
        spec = parse_model_spec(spec_text)
        inner: ChatModel
        if spec.provider == "anthropic":
            inner = AnthropicModel(
                spec, "k", loopback.anthropic_base_url, timeout_s=kw.pop("timeout_s", 30)
            )
        else:
            inner = OpenAICompatModel(
                spec, "k", loopback.openai_base_url, timeout_s=kw.pop("timeout_s", 30)
            )
        kw.setdefault("ledger", Ledger())
        kw.setdefault("prices", PRICES)
        kw.setdefault("sleep", Sleeps())
        model = MeteredModel(inner, role, **kw)
        built.append(model)
        return model

    yield factory
    for m in built:
        await m.aclose()


def req(text: str = "audit this", system: str | None = "sys") -> ChatRequest:
    return ChatRequest((Message("user", text),), system=system, max_tokens=100)


async def test_success_records_server_usage_and_table_cost(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    m = make("openai/gpt-4o-mini")
    loopback.enqueue_openai("ok", usage=Usage(1000, 200, 400))
    got = await m.complete(req())
    assert got.text == "ok"
    (call,) = m.ledger.calls()
    assert (call.role, call.model, call.usage, call.cached, call.error) == (
        "sub",
        "openai/gpt-4o-mini",
        Usage(1000, 200, 400),
        False,
        None,
    )
    assert call.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.6 + 400 * 0.075) / 1e6)
    assert call.latency_s > 0


async def test_reported_cost_wins_and_unknown_price_is_none(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    ledger = Ledger()
    router = make("openrouter/minimax/minimax-m2.5", ledger=ledger)
    local = make("openai/my-local-model", ledger=ledger)
    loopback.enqueue_openai("a", usage=Usage(1000, 1000), cost=0.0123)
    loopback.enqueue_openai("b", usage=Usage(10, 10))
    await router.complete(req())
    await local.complete(req())
    costs = {r.model: r.cost_usd for r in ledger.rows()}
    assert costs == {"openrouter/minimax/minimax-m2.5": 0.0123, "openai/my-local-model": None}
    assert ledger.total_cost() is None
    assert ledger.known_cost() == pytest.approx(0.0123)


async def test_anthropic_cache_tokens_are_priced(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    m = make("anthropic/claude-opus-4-6", role="root")
    loopback.enqueue_anthropic("turn", usage=Usage(1000, 200, 5000, 800))
    await m.complete(ChatRequest((Message("user", "go"),), system="s", cache_prompt=True))
    (row,) = m.ledger.rows()
    assert (row.usage.cache_read_tokens, row.usage.cache_write_tokens) == (5000, 800)
    assert row.cost_usd == pytest.approx((1000 * 5 + 200 * 25 + 5000 * 0.5 + 800 * 6.25) / 1e6)


async def test_retries_every_transient_fault_and_counts_billed_replies_once(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    sleeps = Sleeps()
    m = make(max_retries=8, sleep=sleeps, backoff_base_s=0.5, backoff_max_s=4.0)
    loopback.enqueue_openai(status=429)
    loopback.enqueue_openai(status=500)
    loopback.enqueue_openai(status=502)
    loopback.enqueue_openai(status=503)
    loopback.enqueue_openai(fault="reset")
    loopback.enqueue_openai(fault="malformed_json")
    loopback.enqueue_openai(fault="empty_choices", usage=Usage(70, 5))  # billed, then rejected
    loopback.enqueue_openai("finally", usage=Usage(100, 20))
    got = await m.complete(req())
    assert got.text == "finally"
    assert loopback.request_count == 8
    assert m.attempts == 8 and m.retries == 7
    calls = m.ledger.calls()
    assert [(c.usage, c.error is not None) for c in calls] == [
        (Usage(70, 5), True),
        (Usage(100, 20), False),
    ]
    (row,) = m.ledger.rows()
    assert (row.calls, row.failed_calls, row.failed_requests) == (2, 1, 0)
    assert (row.usage.input_tokens, row.usage.output_tokens) == (170, 25)
    # Exponential backoff with jitter: each delay in [ceiling/2, ceiling], ceiling doubling to the max.
    ceilings = [min(4.0, 0.5 * 2**i) for i in range(7)]
    assert len(sleeps.delays) == 7
    for delay, ceiling in zip(sleeps.delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


async def test_retry_after_is_honoured_and_capped(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    sleeps = Sleeps()
    m = make(sleep=sleeps, retry_after_cap_s=60.0)
    loopback.enqueue_openai(status=429, headers={"retry-after": "7"})
    loopback.enqueue_openai(status=429, headers={"retry-after": "3600"})
    loopback.enqueue_openai(status=429, headers={"retry-after-ms": "250"})
    loopback.enqueue_openai("ok")
    assert (await m.complete(req())).text == "ok"
    assert sleeps.delays == [7.0, 60.0, 0.25]
    assert m.ledger.rows()[0].calls == 1


async def test_gives_up_after_max_retries(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    m = make(max_retries=2)
    for _ in range(3):
        loopback.enqueue_openai(status=503)
    with pytest.raises(ProviderError, match="gave up after 3 attempts") as info:
        await m.complete(req())
    assert info.value.status == 503
    assert loopback.request_count == 3
    (row,) = m.ledger.rows()
    assert (row.calls, row.failed_requests, row.usage.input_tokens) == (0, 1, 0)


async def test_non_retryable_errors_fail_at_once(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    m = make()
    loopback.enqueue_openai(status=400, error_message="prompt too long")
    loopback.enqueue_openai(fault="refusal", usage=Usage(30, 2))
    with pytest.raises(ProviderError, match="prompt too long"):
        await m.complete(req())
    with pytest.raises(ProviderError, match="refused"):
        await m.complete(req())
    assert loopback.request_count == 2
    (row,) = m.ledger.rows()
    # The refusal was billed; the 400 was not.
    assert (row.calls, row.failed_calls, row.failed_requests, row.usage.input_tokens) == (
        1,
        1,
        1,
        30,
    )


async def test_a_hung_call_times_out_and_is_retried(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    m = make(call_timeout_s=0.3)
    loopback.timeout_fault_s = 3600  # the server never gives up on it: only the timeout can
    loopback.enqueue_openai(fault="timeout")
    # Every later reply is the same, so a retry that is slow on a loaded machine changes nothing.
    loopback.default = Reply("after the hang", usage=Usage(9, 9))
    async with asyncio.timeout(60):  # a hang guard: without the call timeout this never returns
        assert (await m.complete(req())).text == "after the hang"
    assert m.attempts >= 2 and len(loopback.requests) == m.attempts
    assert m.ledger.usage() == Usage(9, 9)  # only the answered call is billed


async def test_cost_budget_stops_further_calls(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    budget = Budget(max_cost_usd=0.01)
    m = make("openrouter/minimax/minimax-m2.5", budget=budget)
    loopback.enqueue_openai("pricey", cost=0.011)
    await m.complete(req())
    with pytest.raises(BudgetExceeded) as info:
        await m.complete(req("another"))
    assert info.value.kind == "cost" and info.value.spent_usd == pytest.approx(0.011)
    assert loopback.request_count == 1


async def test_sub_call_budget_in_a_batch(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    m = make(budget=Budget(max_sub_calls=3), concurrency=2)
    d = SubDispatcher(m)
    out = await d.batch([f"p{i}" for i in range(5)])
    answered = [o for o in out if not o.startswith(ERROR_PREFIX)]
    refused = [o for o in out if o.startswith(ERROR_PREFIX)]
    assert len(answered) == 3 and len(refused) == 2
    assert all("budget exhausted (sub_calls)" in o for o in refused)
    assert loopback.request_count == 3
    assert d.last_budget_error is not None and d.last_budget_error.kind == "sub_calls"
    assert len(d.sent_prompts) == 3 and d.errors == 2


async def test_deadline_budget(make: Callable[..., MeteredModel], loopback: LoopbackServer) -> None:
    now = [0.0]
    m = make(budget=Budget(deadline_s=5.0, clock=lambda: now[0]))
    await m.complete(req())
    now[0] = 5.5
    with pytest.raises(BudgetExceeded, match="time budget"):
        await m.complete(req())
    assert loopback.request_count == 1


async def test_cache_hit_makes_no_request(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    cache = ResponseCache()  # under DEEPREPO_CACHE_DIR, a temp dir in tests
    m = make("openai/gpt-4o-mini", cache=cache)
    loopback.enqueue_openai("fresh", usage=Usage(500, 50))
    first = await m.complete(req())
    second = await m.complete(req())
    assert second == first
    assert loopback.request_count == 1
    fresh, hit = m.ledger.calls()
    assert (fresh.cached, fresh.usage) == (False, Usage(500, 50))
    assert (hit.cached, hit.usage, hit.cost_usd) == (True, Usage(), 0.0)
    (row,) = m.ledger.rows()
    assert (row.calls, row.cached_calls, row.usage.input_tokens) == (2, 1, 500)
    await m.complete(req(system="other system"))  # a different request misses
    assert loopback.request_count == 2
    assert len(list(cache.directory.glob("*/*.json"))) == 2


async def test_concurrency_is_bounded(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    loopback.latency_s = 0.05
    m = make(concurrency=4)
    out = await SubDispatcher(m).batch([f"p{i}" for i in range(20)])
    assert len(out) == 20 and m.peak_in_flight == 4


async def test_batch_isolates_failures_and_keeps_order(
    make: Callable[..., MeteredModel], loopback: LoopbackServer
) -> None:
    loopback.reply_fn = lambda route, body: Reply("echo:" + body["messages"][-1]["content"])
    loopback.add_rule("BROKEN", Reply(status=400, error_message="bad item"))
    d = SubDispatcher(make(concurrency=8), system_default="worker system")
    prompts: list[Any] = [f"file {i}" for i in range(10)]
    prompts[3] = "BROKEN file"
    prompts[6] = 42
    out = await d.batch(prompts)
    assert out[3].startswith(ERROR_PREFIX) and "bad item" in out[3]
    assert out[6] == ERROR_PREFIX + "prompt must be a str, got int"
    assert [o for i, o in enumerate(out) if i not in (3, 6)] == [
        f"echo:file {i}" for i in range(10) if i not in (3, 6)
    ]
    assert d.sent_prompts == [f"file {i}" for i in range(10) if i not in (3, 6)]
    assert (d.calls, d.failed, d.refused, d.errors) == (8, 2, 0, 2)  # calls: answered only
    sent = loopback.requests_for("openai")
    assert all(
        r.body is not None
        and r.body["messages"][0] == {"role": "system", "content": "worker system"}
        for r in sent
    )
    # query() never raises either.
    loopback.add_rule("ALSO BROKEN", Reply(status=401))
    assert (await d.query("ALSO BROKEN")).startswith(ERROR_PREFIX)
    assert await d.query("single", system="custom") == "echo:single"
    assert loopback.last_request().body["messages"][0]["content"] == "custom"  # type: ignore[index]
    with pytest.raises(TypeError, match="llm_query"):
        await d.batch("not a list")  # type: ignore[arg-type]


def test_models_survive_one_event_loop_per_call(loopback: LoopbackServer) -> None:
    """Callers that run asyncio.run() per batch reuse the same model objects: the
    semaphore and the HTTP client are made per event loop."""
    spec = parse_model_spec("openai/gpt-4o-mini", loopback.openai_base_url)
    m = MeteredModel(OpenAICompatModel(spec, "k"), "sub", Ledger(), PRICES, concurrency=2)
    d = SubDispatcher(m)

    async def one_run() -> list[str]:
        try:
            return await d.batch(["a", "b", "c"])
        finally:
            await m.aclose()  # connections belong to this loop; the next run opens new ones

    for _ in range(3):
        assert asyncio.run(one_run()) == ['{"findings": []}'] * 3
    assert m.ledger.rows()[0].calls == 9
    assert m.peak_in_flight == 2
