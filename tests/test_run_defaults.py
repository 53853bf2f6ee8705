"""Which models a run uses and what it may spend: keys in the environment never choose a
paid run; a run that calls a provider's API always has a cost cap, named in its first line."""

from __future__ import annotations

import pytest

from deeprepo.run.options import (
    DEFAULT_MAX_COST,
    AnalyzeOptions,
    effective_limits,
    plan_line,
    resolve_specs,
)
from deeprepo.run.wiring import RunLimits

KEYS = {"ANTHROPIC_API_KEY": "a", "OPENROUTER_API_KEY": "r", "OPENAI_API_KEY": "o"}


@pytest.mark.parametrize(
    ("given", "env", "expected"),
    [
        ({}, KEYS, ("scripted/expert", "static")),  # the default stays offline
        ({}, {}, ("scripted/expert", "static")),
        ({"sub": "static"}, KEYS, ("scripted/expert", "static")),
        ({"root": "scripted/lazy"}, KEYS, ("scripted/lazy", "static")),
        ({"sub": "local/qwen"}, KEYS, ("scripted/expert", "local/qwen")),  # on this machine
        (
            {"root": "anthropic/claude-sonnet-4-5"},
            KEYS,
            ("anthropic/claude-sonnet-4-5", "openrouter/minimax/minimax-m2.5"),
        ),
        (
            {"sub": "openai/gpt-5-mini"},
            {"OPENAI_API_KEY": "o"},
            ("openai/gpt-5", "openai/gpt-5-mini"),
        ),
        (
            {"root": "openai/x", "root_base_url": "http://127.0.0.1:9/v1"},
            {},
            ("openai/x", "static"),
        ),
    ],
)
def test_models_are_chosen_explicitly(
    given: dict[str, str], env: dict[str, str], expected: tuple[str, str]
) -> None:
    root, sub = resolve_specs(AnalyzeOptions(path=".", env=env, **given))  # type: ignore[arg-type]
    assert (root.name, sub.name) == expected


def test_a_run_that_calls_an_api_gets_the_default_cap_unless_one_is_given() -> None:
    paid = resolve_specs(AnalyzeOptions(path=".", root="anthropic/m", env={}))
    offline = resolve_specs(AnalyzeOptions(path=".", env=KEYS))
    assert effective_limits(RunLimits(), *paid).max_cost == DEFAULT_MAX_COST == 2.0
    assert effective_limits(RunLimits(max_cost=7.5), *paid).max_cost == 7.5
    assert effective_limits(RunLimits(), *offline).max_cost is None
    assert plan_line(*paid, effective_limits(RunLimits(), *paid)) == (
        "root anthropic/m · sub static · cost cap $2.00 (--max-cost)"
    )
    assert plan_line(*offline, RunLimits()) == (
        "root scripted/expert · sub static · offline, no API calls, cost $0"
    )
