"""The Episode loop (DESIGN §3) with in-process models: stop reasons, the final
turn, salvage, countdown, notes to the root, and each scripted policy's behaviour."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from clihelp import EXAMPLE

import deeprepo.rl  # noqa: F401  (registers the reference policies: lazy, no-delegation, ...)
from deeprepo.base import prompts
from deeprepo.base.chat import ChatModel, ChatRequest, Completion, Usage
from deeprepo.base.records import RunResult
from deeprepo.builtin import make_policy, make_static_worker
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator.episode import Episode, EpisodeConfig
from deeprepo.providers.budget import Budget
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
from deeprepo.sandbox.config import SandboxConfig

F = "```"


class Replies:
    """A root that answers with the given replies in order (the last one repeats)."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    @property
    def name(self) -> str:
        return "test/replies"

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        i = min(len(self.requests) - 1, len(self.replies) - 1)
        return Completion(self.replies[i], Usage(100, 10), model=self.name)

    async def aclose(self) -> None:
        return None


@pytest.fixture(scope="module")
def example() -> Codebase:
    return load_codebase(EXAMPLE)


async def run(codebase: Codebase, root: ChatModel, **config: object) -> RunResult:
    ledger = Ledger()
    prices = PriceTable.load()
    budget = Budget(ledger=ledger)
    metered_root = MeteredModel(root, "root", ledger, prices, budget=budget, concurrency=1)
    sub = MeteredModel(make_static_worker(), "sub", ledger, prices, budget=budget, concurrency=8)
    episode = Episode(
        codebase,
        root=metered_root,
        dispatcher=SubDispatcher(sub),
        ledger=ledger,
        config=EpisodeConfig(**config),  # type: ignore[arg-type]
        sandbox=SandboxConfig(cell_timeout_s=20),
    )
    return await episode.run()


def code(src: str) -> str:
    return f"{F}python\n{src}\n{F}"


@pytest.mark.e2e
async def test_answer_is_read_from_the_namespace_not_prose(example: Codebase) -> None:
    root = Replies(
        [
            "REPL output: done. I call set_answer('fake') now.",
            code("set_answer('# real report')"),
        ]
    )
    result = await run(example, root, max_turns=5)
    assert result.stop_reason == "answer_ready" and result.answer == "# real report"
    assert result.num_turns == 2
    assert result.turns[0].output == prompts.NO_CODE_NOTE
    assert not result.incomplete


@pytest.mark.e2e
async def test_countdown_then_final_turn_then_salvage(example: Codebase) -> None:
    root = Replies(
        [
            code(
                "add_finding('vulnapi/models.py', 32, 'sql-injection', 'high', 'SQLi', cwe=89)\nprint('ok')"
            )
        ]
    )
    result = await run(example, root, max_turns=3, countdown_from=2)
    # 3 turns plus the one final submit turn, then salvage.
    assert result.num_turns == 4 and result.turns[-1].final_turn
    assert result.stop_reason == "max_turns" and result.incomplete
    outputs = [t.output for t in result.turns]
    assert "2 turns left" in outputs[0] and "LAST turn" in outputs[1]
    assert prompts.FINAL_TURN_NOTE in root.requests[3].messages[-1].content
    assert "Incomplete report" in result.answer and "Findings recorded: 1 (1 high)" in result.answer
    assert [(f.file, f.start_line, f.cwe) for f in result.findings] == [
        ("vulnapi/models.py", 32, "CWE-89")
    ]


@pytest.mark.e2e
async def test_final_turn_can_still_answer(example: Codebase) -> None:
    root = Replies([code("x = 1"), code("set_answer('late but fine')")])
    result = await run(example, root, max_turns=1)
    assert result.stop_reason == "answer_ready" and not result.incomplete
    assert result.turns[-1].final_turn and result.answer == "late but fine"


@pytest.mark.e2e
async def test_syntax_error_shows_the_line_and_the_episode_goes_on(example: Codebase) -> None:
    bad = 's = f"""Found {len(codebase)} files\nprint(s)'
    root = Replies([code(bad), code("set_answer('fixed')")])
    result = await run(example, root, max_turns=4)
    first = result.turns[0]
    assert first.error == "syntax"
    assert 'f"""Found' in first.output
    assert "+" in first.output or "join" in first.output  # the hint on how to build the string
    assert result.stop_reason == "answer_ready"


@pytest.mark.e2e
async def test_overwritten_scaffold_is_restored_and_the_root_told(example: Codebase) -> None:
    root = Replies(
        [
            code("llm_batch = None\nanswer = 'oops'"),
            code("print(len(llm_batch([])))\nset_answer('ok')"),
        ]
    )
    result = await run(example, root, max_turns=4)
    assert "llm_batch" in result.turns[0].output and "restored" in result.turns[0].output.lower()
    assert result.turns[0].output.lower().count("restored") == 1
    assert "0" in result.turns[1].output and result.answer == "ok"


@pytest.mark.e2e
async def test_sub_calls_and_coverage_are_counted(example: Codebase) -> None:
    root = Replies(
        [
            code(
                "r = llm_batch([file_audit_prompt(p) for p in ['vulnapi/models.py', 'vulnapi/auth.py']])\n"
                "q = llm_query('just the path: vulnapi/db.py')\n"
                "set_answer('x')"
            )
        ]
    )
    result = await run(example, root, max_turns=2)
    assert result.sub_calls == 3 and result.batch_sizes == [2, 1]
    # Naming a path is not coverage; sending the content is.
    assert result.files_covered == ["vulnapi/auth.py", "vulnapi/models.py"]


@pytest.mark.e2e
@pytest.mark.parametrize("prompt", sorted(prompts.ROOT_SYSTEM_PROMPTS))
async def test_system_prompt_variants(example: Codebase, prompt: str) -> None:
    root = Replies([code("set_answer('x')")])
    await run(example, root, max_turns=1, prompt=prompt)
    assert root.requests[0].system == prompts.ROOT_SYSTEM_PROMPTS[prompt]
    if prompt == "exhaustive":
        assert "EVERY file in `metadata['audit_files']`" in (root.requests[0].system or "")


@pytest.mark.e2e
async def test_expert_policy_covers_every_source_file(example: Codebase) -> None:
    result = await run(example, make_policy("expert"), max_turns=20)
    assert result.stop_reason == "answer_ready" and result.num_turns == 3
    # Every file of the audit set (all scopes but docs), small files packed into few prompts,
    # then the cross-file prompts (a file with its imports), all in one batch.
    assert len(result.files_covered) == result.coverable_files == 14 and not result.unaudited
    assert result.complete and len(result.batch_sizes) == 1
    assert result.batch_sizes == [result.sub_calls]
    assert {f.cwe for f in result.findings} >= {"CWE-89", "CWE-798", "CWE-78"}


@pytest.mark.e2e
async def test_lazy_policy_reads_two_files_and_delegates_nothing(example: Codebase) -> None:
    result = await run(example, make_policy("lazy"), max_turns=20)
    assert result.stop_reason == "answer_ready" and result.num_turns == 2
    assert result.sub_calls == 0 and result.findings == []


@pytest.mark.e2e
async def test_no_delegation_policy_never_calls_a_worker(example: Codebase) -> None:
    result = await run(example, make_policy("no-delegation"), max_turns=20)
    assert result.stop_reason == "answer_ready" and result.sub_calls == 0
    assert result.files_covered == []


@pytest.mark.e2e
async def test_over_explorer_takes_many_turns_and_redispatches(example: Codebase) -> None:
    result = await run(example, make_policy("over-explorer"), max_turns=20)
    assert result.stop_reason == "answer_ready"
    assert result.num_turns >= 12
    assert result.sub_calls > len(result.files_covered)  # one by one, then a second pass
    assert 1 in result.batch_sizes  # one-by-one llm_query calls


@pytest.mark.e2e
async def test_syntax_errors_policy_never_adapts_and_is_salvaged(example: Codebase) -> None:
    result = await run(example, make_policy("syntax-errors"), max_turns=4)
    assert result.stop_reason == "max_turns" and result.incomplete
    assert [t.error for t in result.turns[1:]] == ["syntax"] * (result.num_turns - 1)
    assert result.sub_calls == 0


def test_policy_names() -> None:
    from deeprepo.base.errors import ConfigError

    with pytest.raises(ConfigError, match="scripted/expert"):
        make_policy("genius")


@pytest.mark.e2e
async def test_episode_takes_its_kernel_from_a_warm_pool(example: Codebase) -> None:
    from deeprepo.sandbox.pool import KernelPool

    config = SandboxConfig(cell_timeout_s=20)
    pool = KernelPool(config, size=1)
    pool.fill()
    try:
        ledger = Ledger()
        prices = PriceTable.load()
        root = MeteredModel(
            Replies([code("print(len(codebase))\nset_answer('x')")]), "root", ledger, prices
        )
        sub = MeteredModel(make_static_worker(), "sub", ledger, prices)
        episode = Episode(
            example,
            root=root,
            dispatcher=SubDispatcher(sub),
            ledger=ledger,
            sandbox=config,
            pool=pool,
        )
        result = await episode.run()
        assert result.stop_reason == "answer_ready" and result.answer == "x"
        assert result.turns[0].output.strip() == "15"
        assert result.sandbox_mode == pool.mode
    finally:
        await pool.aclose()
