"""Specs, prices, ledger, budget, cache, registry, and the real SDK adapters over the loopback server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeprepo.base.chat import ChatRequest, Completion, Message, Usage
from deeprepo.base.errors import BudgetExceeded, ConfigError, MissingKeyError, ProviderError
from deeprepo.providers.anthropic_api import AnthropicModel
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache, cache_key, default_cache_dir
from deeprepo.providers.ledger import Ledger, LLMCall, UsageRow
from deeprepo.providers.openai_compat import OpenAICompatModel, parse_retry_after
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.registry import LOCAL_SERVER_KEY
from deeprepo.providers.spec import ModelSpec, parse_model_spec
from deeprepo.run.models import build_model, default_models
from deeprepo.testing.loopback import LoopbackServer

BACKENDS = ["httpx", "aiohttp"]


def ask(
    text: str = "hello", *, system: str | None = "be brief", cache: bool = False
) -> ChatRequest:
    return ChatRequest((Message("user", text),), system=system, max_tokens=64, cache_prompt=cache)


# -- specs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "provider", "model"),
    [
        ("anthropic/claude-opus-4-6", "anthropic", "claude-opus-4-6"),
        ("openai/gpt-5-mini", "openai", "gpt-5-mini"),
        ("openrouter/minimax/minimax-m2.5", "openrouter", "minimax/minimax-m2.5"),
        ("openai/Qwen/Qwen3-8B", "openai", "Qwen/Qwen3-8B"),
        ("scripted/expert", "scripted", "expert"),
        ("static", "static", ""),
        (" oracle ", "oracle", ""),
    ],
)
def test_parse_model_spec_round_trips(text: str, provider: str, model: str) -> None:
    spec = parse_model_spec(text)
    assert (spec.provider, spec.model, spec.base_url) == (provider, model, None)
    assert spec.name == text.strip()
    assert spec.is_builtin == (provider in ("scripted", "static", "oracle"))


@pytest.mark.parametrize(
    "text", ["gemini/pro", "claude-opus", "openrouter/minimax", "anthropic/", "static/x", ""]
)
def test_bad_specs_name_the_valid_forms(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_spec(text)
    assert "openrouter/" in str(info.value) or "static" in str(info.value)


def test_base_urls_are_normalised_per_provider() -> None:
    assert (
        parse_model_spec("openai/m", "http://localhost:8000").base_url == "http://localhost:8000/v1"
    )
    assert parse_model_spec("openai/m", "http://h:1/v1/").base_url == "http://h:1/v1"
    assert parse_model_spec("anthropic/m", "http://h:1/v1").base_url == "http://h:1"
    with pytest.raises(ConfigError):
        parse_model_spec("openai/m", "localhost:8000")
    with pytest.raises(ConfigError):
        parse_model_spec("scripted/expert", "http://h:1")


# -- prices ---------------------------------------------------------------------


def test_packaged_prices_and_costs() -> None:
    prices = PriceTable.load()
    opus = prices.get("anthropic/claude-opus-4-6")
    assert opus is not None
    assert (opus.input, opus.output, opus.cache_read, opus.cache_write) == (5.0, 25.0, 0.5, 6.25)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=200_000,
        cache_read_tokens=2_000_000,
        cache_write_tokens=400_000,
    )
    assert prices.cost("anthropic/claude-opus-4-6", usage) == pytest.approx(5 + 5 + 1 + 2.5)
    assert prices.cost("anthropic/claude-sonnet-4-5", Usage(1000, 100)) == pytest.approx(0.0045)
    assert prices.cost(
        "openrouter/minimax/minimax-m2.5", Usage(1_000_000, 1_000_000)
    ) == pytest.approx(0.60)
    qwen = Usage(2_000_000, 1_000_000)
    assert prices.cost("openrouter/qwen/qwen3-30b-a3b-instruct-2507", qwen) == pytest.approx(0.29)
    # A provider without a separate cache price bills cached tokens at the input price.
    assert prices.cost("openrouter/minimax/minimax-m2.5", Usage(0, 0, 1_000_000)) == pytest.approx(
        0.12
    )
    assert prices.context_window("anthropic/claude-sonnet-4-5") == 200_000
    assert prices.context_window("openrouter/minimax/minimax-m2.5") is None


def test_unknown_price_is_none_and_builtins_are_free() -> None:
    prices = PriceTable.load()
    assert prices.cost("openai/some-local-model", Usage(10, 10)) is None
    assert prices.cost("scripted/expert", Usage(10**6, 10**6)) == 0.0
    assert prices.cost("static", Usage(5, 5)) == 0.0
    assert prices.cost("oracle", Usage(5, 5)) == 0.0
    # Dated snapshots price like their alias.
    assert prices.cost("anthropic/claude-sonnet-4-5-20250929", Usage(1000, 0)) == pytest.approx(
        0.003
    )


def test_override_file_merges_by_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "prices.json"
    f.write_text(
        json.dumps(
            {
                "models": {
                    "openai/my-local": {"input": 0.0, "output": 0.0},
                    "anthropic/claude-opus-4-6": {"output": 20.0},
                }
            }
        )
    )
    prices = PriceTable.load(f)
    assert prices.cost("openai/my-local", Usage(100, 100)) == 0.0
    opus = prices.get("anthropic/claude-opus-4-6")
    assert opus is not None and (opus.input, opus.output, opus.cache_read) == (5.0, 20.0, 0.5)
    monkeypatch.setenv("DEEPREPO_PRICES", str(f))
    assert "openai/my-local" in PriceTable.load()
    f.write_text('{"models": {"x/y": {"input": -1, "output": 1}}}')
    with pytest.raises(ConfigError, match="non-negative"):
        PriceTable.load(f)
    with pytest.raises(ConfigError, match="cannot read price file"):
        PriceTable.load(tmp_path / "missing.json")


# -- ledger and budget ----------------------------------------------------------


def test_ledger_rows_and_totals() -> None:
    ledger = Ledger()
    ledger.record(LLMCall("root", "anthropic/a", Usage(100, 10, 50, 5), 0.01, 1.0))
    ledger.record(LLMCall("sub", "openrouter/x/y", Usage(20, 2), 0.002, 0.5))
    ledger.record(LLMCall("sub", "openrouter/x/y", Usage(), 0.0, 0.0, cached=True))
    ledger.record(LLMCall("sub", "openrouter/x/y", Usage(3, 1), 0.001, 0.1, error="no choices"))
    ledger.record_failure("sub", "openrouter/x/y")
    root, sub = ledger.rows()
    assert (
        root.role,
        root.calls,
        root.usage.input_tokens,
        root.usage.cache_read_tokens,
        root.usage.cache_write_tokens,
    ) == ("root", 1, 100, 50, 5)
    assert (sub.calls, sub.cached_calls, sub.failed_calls, sub.failed_requests) == (3, 1, 1, 1)
    assert (sub.usage.input_tokens, sub.usage.output_tokens) == (23, 3)
    assert sub.cost_usd == pytest.approx(0.003)
    assert ledger.total_cost() == pytest.approx(0.013)
    assert ledger.sub_call_count() == 3
    assert ledger.usage("sub") == Usage(23, 3)
    ledger.record(LLMCall("sub", "openai/local", Usage(5, 5), None, 0.1))
    assert ledger.total_cost() is None
    assert ledger.known_cost() == pytest.approx(0.013)
    data = json.loads(ledger.to_json())
    assert data["total_cost_usd"] is None and data["unpriced_calls"] == 1
    assert [r["cost_usd"] for r in data["rows"]][-1] is None


def test_usage_has_one_json_form() -> None:
    usage = Usage(100, 10, 50, 5)
    assert usage.to_dict() == {
        "input_tokens": 100,
        "output_tokens": 10,
        "cache_read_tokens": 50,
        "cache_write_tokens": 5,
    }
    assert Usage.from_dict(usage.to_dict()) == usage
    # Missing keys (and null) are 0; other keys are not the record's business.
    assert Usage.from_dict({"output_tokens": 7, "cache_read_tokens": None, "role": "x"}) == Usage(
        0, 7
    )
    for bad in ("12", 1.5, True, -1, [3]):
        with pytest.raises(ValueError, match="input_tokens"):
            Usage.from_dict({"input_tokens": bad})


def test_usage_rows_read_back_what_they_write() -> None:
    row = UsageRow("sub", "openrouter/x/y", 3, 1, 1, 2, Usage(23, 3, 4, 5), None)
    d = row.to_dict()
    assert list(d) == [
        "role",
        "model",
        "calls",
        "cached_calls",
        "failed_calls",
        "failed_requests",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
    ]
    assert UsageRow.from_dict(json.loads(json.dumps(d))) == row
    assert UsageRow.from_dict({"role": "root", "model": "m"}) == UsageRow("root", "m")
    with pytest.raises(ValueError, match="cost_usd"):
        UsageRow.from_dict({"role": "root", "model": "m", "cost_usd": "free"})
    with pytest.raises(ValueError, match="role"):
        UsageRow.from_dict({"model": "m"})
    # The roles are root, sub and the bench's judge; anything else is a corrupt row.
    assert UsageRow.from_dict({"role": "judge", "model": "m"}).role == "judge"
    with pytest.raises(ValueError, match="root, sub, judge"):
        UsageRow.from_dict({"role": "worker", "model": "m"})
    # Summing keeps an unknown price unknown.
    total = UsageRow("sub", "m", 1, cost_usd=0.5) + row
    assert (total.calls, total.usage, total.cost_usd) == (4, Usage(23, 3, 4, 5), None)


def test_budget_kinds() -> None:
    ledger = Ledger()
    now = [0.0]
    budget = Budget(
        max_cost_usd=0.05, max_sub_calls=2, deadline_s=10.0, clock=lambda: now[0], ledger=ledger
    )
    budget.acquire("sub")
    budget.acquire("sub", retry=True)  # a retry is not a new sub-call
    budget.acquire("sub")
    budget.acquire("root")  # root calls do not count against sub-calls
    with pytest.raises(BudgetExceeded) as info:
        budget.acquire("sub")
    assert info.value.kind == "sub_calls"
    ledger.record(LLMCall("root", "m", Usage(), 0.05))
    with pytest.raises(BudgetExceeded) as info:
        budget.acquire("root")
    assert info.value.kind == "cost" and info.value.spent_usd == pytest.approx(0.05)
    free = Budget(deadline_s=10.0, clock=lambda: now[0])
    assert free.remaining_s() == 10.0
    now[0] = 10.0
    with pytest.raises(BudgetExceeded) as info:
        free.acquire("root")
    assert info.value.kind == "timeout"


# -- cache ----------------------------------------------------------------------


def test_cache_key_depends_on_what_shapes_the_answer() -> None:
    base = cache_key("m", ask("a"))
    assert base == cache_key("m", ask("a"))
    assert base == cache_key("m", ask("a", cache=True))  # caching hint changes the bill only
    assert base != cache_key("m2", ask("a"))
    assert base != cache_key("m", ask("b"))
    assert base != cache_key("m", ask("a", system="other"))
    r = ask("a")
    assert base != cache_key("m", ChatRequest(r.messages, r.system, 65))
    assert base != cache_key("m", ChatRequest(r.messages, r.system, 64, 0.0))


def test_cache_round_trip_is_atomic(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    assert cache.get("m", ask()) is None
    stored = Completion("answer", Usage(10, 2, 3, 1), "model-x", "stop", 0.004)
    cache.put("m", ask(), stored)
    assert cache.get("m", ask()) == stored
    files = list((tmp_path / "c").rglob("*"))
    assert [p.name for p in files if p.is_file()] == [cache_key("m", ask()) + ".json"]
    path = cache.path_for(cache_key("m", ask()))
    path.write_text("{not json")
    assert cache.get("m", ask()) is None
    assert (cache.hits, cache.misses) == (1, 2)
    assert cache.clear() == 1


def test_cache_dir_is_resolved_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResponseCache()
    monkeypatch.setenv("DEEPREPO_CACHE_DIR", str(tmp_path / "a"))
    assert cache.directory == tmp_path / "a"
    monkeypatch.delenv("DEEPREPO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "deeprepo" / "responses"


# -- adapters over the wire -----------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
async def test_openai_adapter_maps_usage_and_reported_cost(
    loopback: LoopbackServer, backend: str
) -> None:
    spec = parse_model_spec("openrouter/minimax/minimax-m2.5", loopback.openai_base_url)
    model = OpenAICompatModel(spec, "sk-test", http_backend=backend)
    loopback.enqueue_openai("the answer", usage=Usage(900, 40, 100, 0), cost=0.00042)
    try:
        got = await model.complete(ask("hello"))
    finally:
        await model.aclose()
    assert got.text == "the answer"
    assert got.usage == Usage(900, 40, 100, 0)  # cached tokens taken out of the input
    assert got.reported_cost_usd == 0.00042
    assert got.finish_reason == "stop" and got.model == "minimax/minimax-m2.5"
    req = loopback.last_request("openai")
    assert req.body is not None
    assert req.body["model"] == "minimax/minimax-m2.5"
    assert req.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]
    assert req.body["max_tokens"] == 64 and "temperature" not in req.body
    assert req.body["usage"] == {"include": True}
    assert req.headers["authorization"] == "Bearer sk-test"


def test_openai_proper_uses_max_completion_tokens() -> None:
    model = OpenAICompatModel(parse_model_spec("openai/gpt-5-mini"), "k")
    params = model._params(ChatRequest((Message("user", "q"),), max_tokens=99, temperature=0.2))
    assert params["max_completion_tokens"] == 99 and "max_tokens" not in params
    assert params["temperature"] == 0.2
    router = OpenAICompatModel(parse_model_spec("openrouter/a/b"), "k")
    assert router.base_url == "https://openrouter.ai/api/v1"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_openai_adapter_errors_carry_retry_facts(
    loopback: LoopbackServer, backend: str
) -> None:
    model = OpenAICompatModel(
        parse_model_spec("openai/gpt-4o-mini", loopback.openai_base_url), "k", http_backend=backend
    )
    loopback.enqueue_openai(status=429, headers={"retry-after": "7"})
    loopback.enqueue_openai(status=503)
    loopback.enqueue_openai(status=401)
    loopback.enqueue_openai(status=400, error_message="context too long")
    loopback.enqueue_openai(fault="empty_choices", usage=Usage(11, 3))
    loopback.enqueue_openai(fault="refusal", usage=Usage(5, 1))
    loopback.enqueue_openai(fault="malformed_json")
    loopback.enqueue_openai(fault="reset")
    errors: list[ProviderError] = []
    try:
        for _ in range(8):
            with pytest.raises(ProviderError) as info:
                await model.complete(ask())
            errors.append(info.value)
    finally:
        await model.aclose()
    facts = [(e.retryable, e.status, e.retry_after, e.billed is not None) for e in errors]
    assert facts == [
        (True, 429, 7.0, False),
        (True, 503, None, False),
        (False, 401, None, False),
        (False, 400, None, False),
        (True, None, None, True),
        (False, None, None, True),
        (True, None, None, False),
        (True, None, None, False),
    ]
    assert "OPENAI_API_KEY" in str(errors[2])
    assert "context too long" in str(errors[3])
    assert errors[4].billed is not None and errors[4].billed.usage == Usage(11, 3)


async def test_missing_usage_is_zero_with_a_warning(
    loopback: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    model = OpenAICompatModel(parse_model_spec("openai/m", loopback.openai_base_url), "k")
    loopback.enqueue_openai("fine", fault="no_usage")
    try:
        got = await model.complete(ask())
    finally:
        await model.aclose()
    assert got.text == "fine" and got.usage == Usage()
    assert "without usage" in caplog.text


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize("backend", BACKENDS)
async def test_anthropic_adapter_usage_and_prompt_caching(
    loopback: LoopbackServer, backend: str
) -> None:
    spec = parse_model_spec("anthropic/claude-opus-4-6", loopback.anthropic_base_url + "/v1")
    model = AnthropicModel(spec, "sk-ant", http_backend=backend)
    loopback.enqueue_anthropic("turn two", usage=Usage(50, 20, 4000, 300))
    loopback.enqueue_anthropic("plain")
    convo = ChatRequest(
        (Message("user", "first"), Message("assistant", "ok"), Message("user", "second")),
        system="root system",
        max_tokens=128,
        cache_prompt=True,
    )
    try:
        got = await model.complete(convo)
        await model.complete(ask("no cache"))
    finally:
        await model.aclose()
    assert got.text == "turn two" and got.finish_reason == "end_turn"
    assert got.usage == Usage(50, 20, 4000, 300)
    cached, plain = loopback.requests_for("anthropic")
    assert cached.path == "/v1/messages" and cached.body is not None
    eph = {"type": "ephemeral"}
    assert cached.body["system"] == [{"type": "text", "text": "root system", "cache_control": eph}]
    assert cached.body["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second", "cache_control": eph}]},
    ]
    assert cached.body["max_tokens"] == 128
    assert plain.body is not None and plain.body["system"] == "be brief"
    assert plain.body["messages"] == [{"role": "user", "content": "no cache"}]


async def test_anthropic_adapter_errors(loopback: LoopbackServer) -> None:
    model = AnthropicModel(
        parse_model_spec("anthropic/claude-opus-4-6", loopback.anthropic_base_url), "k"
    )
    loopback.enqueue_anthropic(status=529)
    loopback.enqueue_anthropic(fault="refusal", usage=Usage(9, 0))
    loopback.enqueue_anthropic(fault="empty_choices", usage=Usage(9, 1))
    got: list[ProviderError] = []
    try:
        for _ in range(3):
            with pytest.raises(ProviderError) as info:
                await model.complete(ask())
            got.append(info.value)
    finally:
        await model.aclose()
    assert [(e.retryable, e.status, e.billed is not None) for e in got] == [
        (True, 529, False),
        (False, None, True),
        (True, None, True),
    ]


# -- registry -------------------------------------------------------------------


def test_missing_keys_say_what_to_do() -> None:
    with pytest.raises(MissingKeyError, match="set OPENROUTER_API_KEY or pass --sub static"):
        build_model(parse_model_spec("openrouter/minimax/minimax-m2.5"), role="sub")
    with pytest.raises(
        MissingKeyError, match="set ANTHROPIC_API_KEY or pass --root scripted/expert"
    ):
        build_model(parse_model_spec("anthropic/claude-opus-4-6"), role="root")


async def test_keys_are_read_when_building(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = build_model(parse_model_spec("openai/gpt-4o", loopback.openai_base_url), role="sub")
    local = build_model(parse_model_spec("openrouter/a/b", loopback.openai_base_url), role="sub")
    try:
        assert model.name == "openai/gpt-4o"
        await model.complete(ask())
        await local.complete(ask())
    finally:
        await model.aclose()
        await local.aclose()
    first, second = loopback.requests_for("openai")
    assert first.headers["authorization"] == "Bearer sk-from-env"
    # A local server needs no key: the placeholder goes out instead.
    assert second.headers["authorization"] == f"Bearer {LOCAL_SERVER_KEY}"


def test_builtins_are_built_lazily() -> None:
    assert build_model(parse_model_spec("scripted/expert"), role="root").name == "scripted/expert"
    assert build_model(parse_model_spec("static"), role="sub").name == "static"
    with pytest.raises(ConfigError):
        build_model(parse_model_spec("scripted/no-such-policy"), role="root")
    with pytest.raises(ConfigError):
        build_model(ModelSpec("gemini", "pro"), role="root")


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({}, ("scripted/expert", "static")),
        ({"ANTHROPIC_API_KEY": "a"}, ("anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5")),
        (
            {"OPENROUTER_API_KEY": "r"},
            ("openrouter/anthropic/claude-sonnet-4.5", "openrouter/minimax/minimax-m2.5"),
        ),
        (
            {"ANTHROPIC_API_KEY": "a", "OPENROUTER_API_KEY": "r"},
            ("anthropic/claude-sonnet-4-5", "openrouter/minimax/minimax-m2.5"),
        ),
        ({"OPENAI_API_KEY": "o"}, ("openai/gpt-5", "openai/gpt-5-mini")),
        ({"ANTHROPIC_API_KEY": "  "}, ("scripted/expert", "static")),
    ],
)
def test_default_models(keys: dict[str, str], expected: tuple[str, str]) -> None:
    assert default_models(keys) == expected
    prices = PriceTable.load()
    for name in expected:
        assert prices.cost(name, Usage(1, 1)) is not None  # every default is priced
