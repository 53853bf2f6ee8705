"""The verifiers environment package (``environments/deeprepo_orchestration``).

verifiers is an optional dependency kept out of the main virtualenv, so this module is
skipped there; ``.ci/verifiers.sh`` runs it in ``.venv-vf``, where verifiers and the
environment package are installed. The adapter tests use a stand-in interaction; the
rollout tests drive a real verifiers interaction against the loopback server playing
``scripted/expert`` and compare the outcome with the same Episode run directly.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers", reason="verifiers is optional; .ci/verifiers.sh runs these tests")
vf = pytest.importorskip("verifiers.v1")

try:
    import deeprepo_orchestration  # noqa: F401
except ImportError:  # verifiers is installed but the env package is not: use the source tree
    sys.path.insert(
        0, str(Path(__file__).resolve().parents[1] / "environments" / "deeprepo_orchestration")
    )

from deeprepo_orchestration import (  # noqa: E402
    DirectChatHarness,
    InteractionRoot,
    OrchestrationEnv,
    OrchestrationEnvConfig,
    OrchestrationTaskset,
    OrchestrationTasksetConfig,
)
from deeprepo_orchestration.env import REWARD_NAME  # noqa: E402
from deeprepo_orchestration.scripted import loopback_script, scripted_replies  # noqa: E402
from deeprepo_orchestration.taskset import repository  # noqa: E402
from pydantic import ValidationError  # noqa: E402
from verifiers.v1.clients import ModelContext  # noqa: E402
from verifiers.v1.configs.client import EvalClientConfig  # noqa: E402
from verifiers.v1.utils.loaders import taskset_class  # noqa: E402

from deeprepo.base import prompts  # noqa: E402
from deeprepo.base.chat import ChatRequest, Message  # noqa: E402
from deeprepo.base.errors import BudgetExceeded, ProviderError  # noqa: E402
from deeprepo.builtin import POLICIES, make_policy  # noqa: E402
from deeprepo.orchestrator.episode import metadata_summary  # noqa: E402
from deeprepo.rl.env.rollout import run_rollout  # noqa: E402
from deeprepo.rl.tasks import generate_task, task_seeds  # noqa: E402
from deeprepo.testing.loopback import LoopbackServer, Reply, load_script  # noqa: E402

TASKSET_ID = "deeprepo-orchestration"
KEY_VAR = "DEEPREPO_TEST_LOOPBACK_KEY"


# -- the package as verifiers finds it ---------------------------------------------


def test_verifiers_resolves_the_package_by_taskset_id() -> None:
    assert taskset_class(TASKSET_ID) is OrchestrationTaskset
    assert vf.environment_class(TASKSET_ID) is OrchestrationEnv
    assert vf.taskset_config_type(TASKSET_ID) is OrchestrationTasksetConfig
    assert vf.env_config_type(TASKSET_ID) is OrchestrationEnvConfig
    # An unpinned seat plays the package's own in-process harness.
    assert vf.default_harness_id(TASKSET_ID) == TASKSET_ID
    assert (
        vf.load_harness(vf.harness_config_type(TASKSET_ID)(id=TASKSET_ID)).__class__
        is DirectChatHarness
    )


def test_env_config_defaults_run_locally() -> None:
    config = vf.resolve_env_config({"taskset": {"id": TASKSET_ID}})
    assert isinstance(config, OrchestrationEnvConfig)
    assert config.root.runtime.type == "subprocess"
    assert config.root.harness is None  # the taskset's harness
    assert config.sub == "oracle"
    episode = config.episode_config("exhaustive")
    assert (episode.max_turns, episode.prompt, episode.timeout_s) == (20, "exhaustive", None)
    sandbox = config.sandbox_config()
    assert (sandbox.mode, sandbox.cell_timeout_s, sandbox.output_limit) == ("auto", 120.0, 8192)


def test_env_config_flags_override_and_validate() -> None:
    config = vf.resolve_env_config(
        {
            "taskset": {"id": TASKSET_ID, "size": "medium"},
            "root": {"max_turns": 4},
            "max_turns": 7,
            "oracle_miss_rate": 0.25,
            "reward_weights": {"quality": 0.5},
        }
    )
    assert config.root.max_turns == 4
    assert config.root.runtime.type == "subprocess"  # a partial seat override keeps defaults
    assert config.episode_config("default").max_turns == 7
    assert config.oracle_options() == {"miss_rate": 0.25}
    with pytest.raises(ValidationError, match="unknown reward weight"):
        vf.resolve_env_config({"taskset": {"id": TASKSET_ID}, "reward_weights": {"speed": 1.0}})


# -- the taskset ----------------------------------------------------------------------


def _taskset(**fields: Any) -> OrchestrationTaskset:
    return vf.load_taskset(OrchestrationTasksetConfig(id=TASKSET_ID, **fields))


def test_taskset_yields_the_generators_repositories() -> None:
    tasks = list(_taskset(size="medium", lang="js", count=3, seed=7))
    assert [t.data.seed for t in tasks] == task_seeds(7, 3)
    assert [t.data.idx for t in tasks] == [0, 1, 2]
    for task in tasks:
        assert (task.data.size, task.data.lang, task.data.prompt_name) == (
            "medium",
            "js",
            "default",
        )
        assert task.data.prompt is None  # the Episode opens the conversation
        assert task.data.system_prompt == prompts.ROOT_SYSTEM_PROMPTS["default"]
        assert task.data.id == f"medium-js-{task.data.seed}"
    assert len({t.key for t in tasks}) == 3


def test_taskset_holds_the_hard_tier_with_its_budget() -> None:
    [task] = list(_taskset(size="hard", lang="python", count=1, seed=3))
    repo, _ = repository(task.data.seed, "hard", "python")
    budget = repo.sub_call_budget
    assert budget is not None and budget < len(repo.files)
    assert any("sub-call budget" in n for n in repo.get_codebase().metadata.notes)
    with pytest.raises(ValidationError, match="python or js"):
        list(_taskset(size="hard", lang="mixed", count=1))


def test_taskset_views_and_prompt_choice() -> None:
    taskset = _taskset(count=50, prompt="exhaustive")
    first = list(taskset.take(2))
    assert [t.data.seed for t in first] == task_seeds(0, 2)
    assert first[0].data.system_prompt == prompts.ROOT_SYSTEM_PROMPTS["exhaustive"]
    assert len(list(taskset)) == 50


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"size": "huge"}, "size"),
        ({"lang": "go"}, "lang"),
        ({"count": 0}, "count"),
        ({"prompt": "terse"}, "choose one of: default, exhaustive"),
    ],
)
def test_taskset_config_rejects_bad_values(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        OrchestrationTasksetConfig(id=TASKSET_ID, **fields)


def test_repository_is_the_generated_task_and_is_cached() -> None:
    seed = task_seeds(3, 1)[0]
    repo, index = repository(seed, "small", "python")
    gen = generate_task(seed, "small", "python")
    assert repo.id == gen.task_id
    assert repo.files == dict(gen.files)
    assert repo.ground_truth == [e.to_dict() for e in gen.ground_truth]
    assert repo.get_codebase().metadata.files == len(gen.files)
    assert repository(seed, "small", "python")[0] is repo  # -r rollouts reuse it
    assert index is repository(seed, "small", "python")[1]


# -- the root adapter ---------------------------------------------------------------


@dataclass
class _Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_input_tokens: int | None = None


@dataclass
class _Call:
    usage: _Usage | None
    finish_reason: str | None = "stop"
    error: Any = None


@dataclass
class _Error:
    type: str
    message: str


@dataclass
class _Trace:
    calls: list[_Call] = field(default_factory=list)
    stop_condition: str | None = None
    errors: list[_Error] = field(default_factory=list)


@dataclass
class _Segment:
    last_reply: str = ""
    terminated: bool = False


class _Interaction:
    """Answers each turn from a script; records what it was sent."""

    def __init__(self, replies: list[str], usages: list[_Usage | None] | None = None) -> None:
        self.trace = _Trace()
        self.sent: list[str] = []
        self._replies = list(replies)
        self._usages = list(usages or [])
        self.stop_after: str | None = None  # stop condition set once the replies run out
        self.fail_with: _Error | None = None

    async def turn(self, message: str) -> _Segment:
        self.sent.append(message)
        if not self._replies:
            if self.fail_with is not None:
                self.trace.errors.append(self.fail_with)
            self.trace.stop_condition = self.stop_after or "harness_error"
            return _Segment(terminated=True)
        usage = self._usages.pop(0) if self._usages else None
        self.trace.calls.append(_Call(usage))
        return _Segment(last_reply=self._replies.pop(0))


def _request(*contents: str) -> ChatRequest:
    roles = ["user", "assistant"]
    return ChatRequest(
        tuple(Message(roles[i % 2], c) for i, c in enumerate(contents)),
        system="system prompt",
    )


async def test_adapter_sends_only_the_newest_user_message() -> None:
    interaction = _Interaction(["reply one", "reply two"], [_Usage(100, 20, 30), _Usage(250, 40)])
    root = InteractionRoot(interaction, name="policy")
    first = await root.complete(_request("overview"))
    second = await root.complete(_request("overview", "reply one", "output one"))
    assert interaction.sent == ["overview", "output one"]
    assert (first.text, second.text) == ("reply one", "reply two")
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.cache_read_tokens) == (
        100,
        20,
        30,
    )
    assert (second.usage.input_tokens, second.usage.output_tokens) == (250, 40)
    assert first.model == second.model == root.name == "policy"
    assert first.finish_reason == "stop"
    assert root.turns_sent == 2


async def test_adapter_refuses_a_retry_instead_of_sending_twice() -> None:
    interaction = _Interaction(["reply one", "reply two"])
    root = InteractionRoot(interaction, name="policy")
    await root.complete(_request("overview"))
    with pytest.raises(ProviderError, match="cannot be retried") as info:
        await root.complete(_request("overview"))
    assert not info.value.retryable
    assert interaction.sent == ["overview"]
    with pytest.raises(ProviderError, match="must end with a user message"):
        await root.complete(_request("overview", "reply one"))


@pytest.mark.parametrize(
    ("condition", "kind"),
    [
        ("max_turns", "max_turns"),
        ("agent_timeout", "timeout"),
        ("max_total_tokens", "max_total_tokens"),
    ],
)
async def test_adapter_turns_a_verifiers_stop_into_a_budget_stop(condition: str, kind: str) -> None:
    interaction = _Interaction([])
    interaction.stop_after = condition
    root = InteractionRoot(interaction, name="policy")
    with pytest.raises(BudgetExceeded, match=condition) as info:
        await root.complete(_request("overview"))
    assert info.value.kind == kind


async def test_adapter_turns_a_verifiers_failure_into_a_provider_error() -> None:
    interaction = _Interaction([])
    interaction.fail_with = _Error("HarnessError", "model call failed with HTTP 400")
    root = InteractionRoot(interaction, name="policy")
    with pytest.raises(
        ProviderError, match="HarnessError: model call failed with HTTP 400"
    ) as info:
        await root.complete(_request("overview"))
    assert not info.value.retryable


async def test_adapter_reports_a_refused_turn() -> None:
    class Refusing(_Interaction):
        async def turn(self, message: str) -> _Segment:
            raise RuntimeError("this interaction is closed")

    root = InteractionRoot(Refusing([]), name="policy")
    with pytest.raises(ProviderError, match="refused the turn: this interaction is closed"):
        await root.complete(_request("overview"))


# -- the scripted loopback root ---------------------------------------------------------


def test_loopback_script_replays_the_policy_turn_by_turn() -> None:
    replies = scripted_replies("expert")
    assert len(replies) == len(POLICIES["expert"]) + 1
    assert [r.split("\n", 1)[0] for r in replies] == [
        f"Turn {i}." for i in range(1, len(replies) + 1)
    ]
    script = loopback_script("expert")
    assert script["default"] == {"text": replies[0]}
    # Newest first: the rule answering turn k+1 matches reply k.
    assert [r["reply"]["text"] for r in script["rules"]] == replies[:0:-1]
    assert [r["contains"] for r in script["rules"]] == [r.strip() for r in replies[-2::-1]]
    json.dumps(script)  # a loopback --script file


# -- rollouts through a real verifiers interaction ----------------------------------------


@pytest.fixture(scope="module")
def expert_server() -> Iterator[LoopbackServer]:
    """The loopback server playing scripted/expert from a script file, as vf-eval sees it."""
    with LoopbackServer(ttl_s=300.0) as server:
        yield server


@pytest.fixture
def script_file(tmp_path: Path) -> Path:
    path = tmp_path / "expert.json"
    path.write_text(json.dumps(loopback_script("expert")), encoding="utf-8")
    return path


def _run_episode(env: OrchestrationEnv, task: Any, server: LoopbackServer) -> Any:
    ctx = ModelContext(
        model="loopback/expert",
        client=EvalClientConfig(base_url=server.openai_base_url, api_key_var=KEY_VAR),
    )

    async def go() -> Any:
        async with env.serving():
            return await env.run_episode(task, ctx)

    # The env's serving resources live on their own event loop, as in vf-eval.
    return asyncio.run(go())


def _env(**env_fields: Any) -> OrchestrationEnv:
    config = vf.resolve_env_config(
        {"taskset": {"id": TASKSET_ID, "count": 1, "seed": 11}, **env_fields}
    )
    env = vf.load_environment(config)
    assert isinstance(env, OrchestrationEnv)
    return env


@pytest.mark.e2e
def test_rollout_through_verifiers_matches_the_direct_episode(
    expert_server: LoopbackServer, script_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, "loopback")
    expert_server.clear_requests()
    load_script(expert_server, script_file)
    env = _env()
    task = next(iter(env.taskset))
    episode = _run_episode(env, task, expert_server)
    assert episode.ok, episode.errors
    (trace,) = episode.traces

    repo, index = repository(task.data.seed, "small", "python")
    direct = asyncio.run(
        run_rollout(repo, root=make_policy("expert"), coverage_index=index, seed=0)
    )
    m = trace.metrics
    # The same Episode, the same sub-worker answers, the same score.
    assert trace.stop_condition == direct.stop_condition == "episode_done"
    assert m["num_turns"] == direct.result.num_turns == trace.num_turns
    assert m["sub_calls"] == direct.result.sub_calls > 0
    assert m["findings"] == len(direct.result.findings)
    assert m["files_covered"] == len(direct.result.files_covered)
    for part in ("quality_reward", "coverage_reward", "delegation_reward", "redundancy_penalty"):
        assert m[part] == pytest.approx(direct.reward.parts[part]), part
    reward = trace.rewards[REWARD_NAME]
    assert 0.0 <= reward.score <= 1.0 and reward.weight == 1.0
    assert trace.reward == pytest.approx(reward.score)
    assert m["is_truncated"] == 0.0 and m["incomplete"] == 0.0
    assert m["root_input_tokens"] > 0 and m["root_output_tokens"] > 0
    assert trace.info["deeprepo"]["answer"] == direct.result.answer

    # The model saw deeprepo's system prompt and first message, one request per turn.
    requests = expert_server.requests_for("openai")
    assert len(requests) == direct.result.num_turns
    first = requests[0].body
    assert first is not None
    assert first["messages"][0] == {
        "role": "system",
        "content": prompts.ROOT_SYSTEM_PROMPTS["default"],
    }
    overview = prompts.first_user_message(metadata_summary(repo.get_codebase()))
    assert first["messages"][1]["content"] == overview
    assert not first.get("stream")
    # Every later request replays the conversation and adds the REPL output.
    assert [len(r.body["messages"]) for r in requests if r.body] == [
        2 + 2 * i for i in range(len(requests))
    ]


@pytest.mark.e2e
def test_a_seat_limit_stops_the_episode_as_a_budget_stop(
    expert_server: LoopbackServer, script_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, "loopback")
    expert_server.clear_requests()
    load_script(expert_server, script_file)
    env = _env(root={"max_turns": 1})
    episode = _run_episode(env, next(iter(env.taskset)), expert_server)
    (trace,) = episode.traces
    assert trace.stop_condition == "max_turns"  # verifiers' own stop wins
    assert trace.is_truncated
    assert trace.metrics["num_turns"] == 1.0
    assert trace.metrics["is_truncated"] == 1.0
    assert trace.info["deeprepo"]["stop_reason"] == "budget"
    assert "max_turns" in trace.info["deeprepo"]["stop_detail"]
    assert 0.0 <= trace.rewards[REWARD_NAME].score <= 1.0
    assert len(expert_server.requests_for("openai")) == 1


@pytest.mark.e2e
def test_a_failing_model_endpoint_ends_the_episode_with_an_error(
    expert_server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, "loopback")
    expert_server.clear_requests()
    # A client error is final (no upstream retries), so the run fails fast.
    expert_server.enqueue("openai", Reply(status=400, error_message="bad request from test"))
    env = _env()
    episode = _run_episode(env, next(iter(env.taskset)), expert_server)
    (trace,) = episode.traces
    assert not trace.ok and trace.errors
    assert trace.info["deeprepo"]["stop_reason"] == "error"
    assert trace.metrics["num_turns"] == 0.0
    assert trace.rewards[REWARD_NAME].score == 0.0
