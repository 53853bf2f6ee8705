"""The rules by which an Episode decides whether a run is complete and what went wrong
(orchestrator/episode.py, base/records.py, orchestrator/audit.py, cli/exits.py).

The kernel is a scripted in-process stand-in (each cell's result looked up by its code), so
these tests state the Episode's own decisions without a sandbox child process and run under
the mutation tool (docs/testing.md). tests/test_episode.py runs the same loop on the real
kernel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from deeprepo.base import prompts
from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.errors import BudgetExceeded, ProviderError, SandboxError
from deeprepo.base.records import RunResult
from deeprepo.builtin import make_static_worker
from deeprepo.cli import exits
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase, CodebaseMetadata, SkippedFile
from deeprepo.orchestrator import episode as episode_module
from deeprepo.orchestrator.episode import Episode, EpisodeConfig, metadata_summary
from deeprepo.providers.budget import Budget
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger, LLMCall
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.kernel import ExecResult, LlmCall

F = "```"
APP = "def handler(request):\n    query = request.args['q']\n    return db.execute(query)\n"


@dataclass(frozen=True)
class Cell:
    """What one scripted cell does: its output, error, answer and worker prompts."""

    output: str = ""
    error: str | None = None
    answer: str | None = None  # set_answer(answer) when not None
    prompts: tuple[str, ...] = ()
    findings: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    calls: tuple[LlmCall, ...] | None = None  # default: one llm_batch of the prompts
    system: str | None = None  # the system prompt the cell gives its worker prompts
    draft: str | None = None  # answer content written without set_answer (not ready)


class ScriptedKernel:
    """The kernel's interface (``start``, ``exec``, ``close``, ``mode``) over a script."""

    mode = "scripted"
    script: ClassVar[Mapping[str, Cell]] = {}
    started: ClassVar[dict[str, Any]] = {}  # what Kernel.start was given, for the tests

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.answer: dict[str, Any] = {"content": "", "ready": False}

    @classmethod
    async def start(cls, payload: dict[str, Any], handler: Any, *a: Any, **kw: Any) -> Any:
        cls.started = {"payload": payload, "args": a, **kw}
        return cls(handler)

    async def exec(self, code: str) -> ExecResult:
        cell = self.script[code]
        if cell.prompts:
            await self.handler(list(cell.prompts), cell.system)
        if cell.answer is not None:
            self.answer = {"content": cell.answer, "ready": True}
        if cell.draft is not None:
            self.answer = {"content": cell.draft, "ready": False}
        return ExecResult(
            output=cell.output,
            error=cell.error,
            answer=dict(self.answer),
            new_findings=list(cell.findings),
            restored=[],
            restarted=False,
            lost_variables=[],
            llm_calls=len(cell.prompts),
            seconds=0.0,
            calls=cell.calls
            if cell.calls is not None
            else ((LlmCall("batch", len(cell.prompts)),) if cell.prompts else ()),
        )

    async def close(self) -> None:
        return None


class Replies:
    """A root that answers with the given replies in order (the last one repeats)."""

    def __init__(self, replies: Sequence[str], usage: Usage | None = None) -> None:
        self.replies = list(replies)
        self.usage = usage or Usage(100, 10)
        self.requests: list[ChatRequest] = []

    @property
    def name(self) -> str:
        return "test/replies"

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        i = min(len(self.requests) - 1, len(self.replies) - 1)
        return Completion(self.replies[i], self.usage, model=self.name)

    async def aclose(self) -> None:
        return None


def code(*blocks: str) -> str:
    return "\n".join(f"{F}python\n{b}\n{F}" for b in blocks)


def codebase(tmp_path: Path, files: Mapping[str, str]) -> Codebase:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return load_codebase(tmp_path)


async def run(
    monkeypatch: pytest.MonkeyPatch,
    cb: Codebase,
    replies: Sequence[str],
    script: Mapping[str, Cell],
    **config: Any,
) -> RunResult:
    kernel = type("Kernel", (ScriptedKernel,), {"script": dict(script)})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    ledger = Ledger()
    prices = PriceTable.load()
    budget = Budget(ledger=ledger)
    root = MeteredModel(Replies(replies), "root", ledger, prices, budget=budget, concurrency=1)
    sub = MeteredModel(make_static_worker(), "sub", ledger, prices, budget=budget, concurrency=1)
    episode = Episode(
        cb,
        root=root,
        dispatcher=SubDispatcher(sub),
        ledger=ledger,
        config=EpisodeConfig(**config),
    )
    return await episode.run()


@pytest.mark.parametrize("empty", ["", "   ", "\n\t\n"])
async def test_an_empty_answer_is_no_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, empty: str
) -> None:
    """set_answer("") ends the loop but is not an answer: the run is incomplete (exit 3)."""
    cb = codebase(tmp_path, {"README.md": "# docs only: nothing to audit\n"})
    r = await run(monkeypatch, cb, [code("answer")], {"answer": Cell(answer=empty)})
    assert r.stop_reason == "answer_ready"
    assert r.incomplete and not r.complete
    assert "never set its answer" in r.incomplete_reason
    assert r.answer.strip()  # a salvaged report stands in
    assert exits.for_result(r) == exits.INCOMPLETE


async def test_an_answer_with_every_file_audited_is_complete(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An answer and every audit-set file sent whole to a worker: complete, exit 0."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"send": Cell(prompts=(f"Audit app.py:\n{APP}",)), "answer": Cell(answer="# Report")}
    r = await run(monkeypatch, cb, [code("send"), code("answer")], script)
    assert (r.answer, r.incomplete, r.unaudited, r.incomplete_reason) == ("# Report", False, [], "")
    assert r.files_covered == ["app.py"] and r.coverable_files == 1 and r.sub_calls == 1
    assert r.complete and exits.for_result(r) == exits.OK


async def test_an_answer_with_a_file_never_sent_is_incomplete(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An answer is not enough: an audit-set file no worker saw makes the run incomplete."""
    cb = codebase(tmp_path, {"app.py": APP})
    r = await run(monkeypatch, cb, [code("answer")], {"answer": Cell(answer="# Report")})
    assert not r.incomplete and r.unaudited == ["app.py"] and not r.complete
    assert "did not send them to a worker" in r.incomplete_reason
    assert exits.for_result(r) == exits.INCOMPLETE


@pytest.mark.parametrize(
    ("errors", "worst"),
    [
        ((None, None), None),
        (("exception", None), "exception"),
        ((None, "exception", None), "exception"),
        (("exception", "syntax"), "syntax"),
        (("syntax", "exception"), "syntax"),
        (("timeout", "syntax", "exception"), "timeout"),
        (("exception", "timeout"), "timeout"),
        (("timeout", "crashed"), "crashed"),
        (("killed", "timeout"), "killed"),
        (("crashed", "killed"), "crashed"),  # as bad: the first one stays
        (("exception", "odd"), "exception"),  # an unknown error ranks as an exception
        (("odd", "exception"), "odd"),  # ... whichever came first
        (("odd", "syntax"), "syntax"),
    ],
)
async def test_a_turns_error_is_its_worst_blocks_error(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    errors: tuple[str | None, ...],
    worst: str | None,
) -> None:
    """A turn's error is the worst of its blocks' errors, not the last block's."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    names = [f"b{i}" for i in range(len(errors))]
    script = {n: Cell(output=n, error=e) for n, e in zip(names, errors, strict=True)}
    script["answer"] = Cell(answer="# Report")
    r = await run(monkeypatch, cb, [code(*names), code("answer")], script)
    assert [t.error for t in r.turns] == [worst, None]


async def test_each_block_output_is_shown_under_its_header(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Several blocks: the root sees each block's output under "[block n of m]"."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    script = {"a": Cell(output="one\n\n"), "b": Cell(output="  two"), "ans": Cell(answer="# R")}
    r = await run(monkeypatch, cb, [code("a", "b"), code("ans")], script)
    assert r.turns[0].output == "[block 1 of 2]\none\n[block 2 of 2]\n  two"
    assert r.turns[1].output == "[no output]"


async def test_a_turns_tokens_are_the_roots_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each turn records the root's tokens of that turn, cache reads and writes apart."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"send": Cell(prompts=(f"Audit app.py:\n{APP}",)), "answer": Cell(answer="# R")}
    kernel = type("Kernel", (ScriptedKernel,), {"script": script})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    ledger = Ledger()
    prices = PriceTable.load()
    root = MeteredModel(
        Replies([code("send"), code("answer")], Usage(100, 10, 7, 3)), "root", ledger, prices
    )
    sub = MeteredModel(make_static_worker(), "sub", ledger, prices)
    r = await Episode(cb, root=root, dispatcher=SubDispatcher(sub), ledger=ledger).run()
    tokens = [
        (t.input_tokens, t.output_tokens, t.cache_read_tokens, t.cache_write_tokens)
        for t in r.turns
    ]
    assert tokens == [(100, 10, 7, 3), (100, 10, 7, 3)]  # the worker's tokens are not the root's


# ------------------------------------------------------------------ how a run stops


class Failing:
    """A root that replies with ``replies`` in order, then raises ``error``."""

    name = "test/failing"

    def __init__(self, error: BaseException, replies: Sequence[str] = ()) -> None:
        self.error = error
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        if len(self.requests) > len(self.replies):
            raise self.error
        return Completion(self.replies[len(self.requests) - 1], Usage(1, 1), model=self.name)

    async def aclose(self) -> None:
        return None


def episode(
    monkeypatch: pytest.MonkeyPatch,
    cb: Codebase,
    root: Any,
    script: Mapping[str, Cell],
    **kw: Any,
) -> Episode:
    kernel = type("Kernel", (ScriptedKernel,), {"script": dict(script)})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    ledger = kw.pop("ledger", None)
    ledger = Ledger() if ledger is None else ledger  # an empty Ledger is falsy (len 0)
    sub = MeteredModel(make_static_worker(), "sub", ledger, PriceTable.load())
    config = EpisodeConfig(**kw.pop("config", {}))
    return Episode(cb, root=root, dispatcher=SubDispatcher(sub), ledger=ledger, config=config, **kw)


SCRIPT = {"x": Cell(output="ran"), "answer": Cell(answer="# Report")}


@pytest.mark.parametrize(
    ("error", "reason", "detail"),
    [
        (BudgetExceeded("cost limit $1 reached", kind="cost"), "budget", "cost limit $1 reached"),
        (BudgetExceeded("past --timeout 9", kind="timeout"), "timeout", "past --timeout 9"),
        (ProviderError("HTTP 500"), "error", "root model failed: HTTP 500"),
    ],
)
async def test_a_root_failure_stops_the_run_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    error: BaseException,
    reason: str,
    detail: str,
) -> None:
    """A budget, the timeout or a failed root call ends the run at once, named as such; the
    turns before it are kept and the report is salvaged."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    r = await episode(monkeypatch, cb, Failing(error, [code("x")]), SCRIPT).run()
    assert (r.stop_reason, r.stop_detail, r.num_turns) == (reason, detail, 1)
    assert r.incomplete and r.answer.startswith("# Incomplete report")
    assert f"({reason}: {detail})" in r.answer
    assert detail in r.incomplete_reason


async def test_a_sandbox_failure_stops_the_run_as_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The kernel failing for good ends the run as an error, exit 1."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})

    class Broken(ScriptedKernel):
        async def exec(self, code: str) -> ExecResult:
            raise SandboxError("the child died")

    monkeypatch.setattr(episode_module, "Kernel", Broken)
    ledger = Ledger()
    sub = MeteredModel(make_static_worker(), "sub", ledger, PriceTable.load())
    root = Replies([code("x")])
    r = await Episode(cb, root=root, dispatcher=SubDispatcher(sub), ledger=ledger).run()
    assert (r.stop_reason, r.stop_detail) == ("error", "sandbox failed: the child died")
    assert r.incomplete and exits.for_result(r) == exits.ERROR


async def test_ctrl_c_ends_the_run_as_interrupted_when_asked_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With catch_interrupt, a cancelled run ends as interrupted (exit 130) with what it has;
    without, the cancellation propagates."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    root = Failing(asyncio.CancelledError(), [code("x")])
    ep = episode(monkeypatch, cb, root, SCRIPT, config={"catch_interrupt": True})
    r = await ep.run()
    assert (r.stop_reason, r.stop_detail) == (
        "interrupted",
        "interrupted by the user (Ctrl-C or SIGTERM)",
    )
    assert r.num_turns == 1 and exits.for_result(r) == exits.INTERRUPTED
    root = Failing(asyncio.CancelledError(), [code("x")])
    with pytest.raises(asyncio.CancelledError):
        await episode(monkeypatch, cb, root, SCRIPT).run()


async def test_max_turns_then_one_final_turn_with_a_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After max_turns without an answer the root gets one final turn, told so in the same
    user message; with no answer then, the run stops on max_turns."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    root = Replies([code("x")])
    r = await episode(monkeypatch, cb, root, SCRIPT, config={"max_turns": 2}).run()
    assert (r.stop_reason, r.num_turns) == ("max_turns", 3)
    assert r.stop_detail == "no answer after 2 turns and the final turn"
    assert [t.final_turn for t in r.turns] == [False, False, True]
    last = root.requests[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert last[-1].content.endswith("\n\n" + prompts.FINAL_TURN_NOTE)
    assert last[-1].content.startswith(r.turns[1].output)
    assert prompts.FINAL_TURN_NOTE not in root.requests[-2].messages[-1].content


async def test_the_final_turn_can_still_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An answer set on the final turn counts: the run is complete."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    root = Replies([code("x"), code("answer")])
    r = await episode(monkeypatch, cb, root, SCRIPT, config={"max_turns": 1}).run()
    assert (r.stop_reason, r.stop_detail, r.answer, r.num_turns) == (
        "answer_ready",
        "",
        "# Report",
        2,
    )
    assert r.complete


async def test_the_episode_timeout_stops_before_the_next_turn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Once timeout_s has passed on the episode's clock, no new turn starts."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    now = [100.0]

    def clock() -> float:
        now[0] += 2.0
        return now[0]

    ep = episode(monkeypatch, cb, Replies([code("x")]), SCRIPT, config={"timeout_s": 5})
    ep.clock = clock
    r = await ep.run()
    assert (r.stop_reason, r.stop_detail) == ("timeout", "episode ran past 5s")
    assert r.num_turns == 1 and r.wall_seconds > 0


async def test_a_run_reports_its_turns_as_events(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each turn sends turn_start and turn_end (with the findings and worker calls so far),
    worker calls send sub_calls, and on_turn gets every turn."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"send": Cell(prompts=(f"Audit app.py:\n{APP}",)), "answer": Cell(answer="# R")}
    events: list[tuple[str, dict[str, Any]]] = []
    turns: list[int] = []
    ep = episode(
        monkeypatch,
        cb,
        Replies([code("send"), code("answer")]),
        script,
        on_event=lambda kind, data: events.append((kind, data)),
        on_turn=lambda t: turns.append(t.index),
    )
    await ep.run()
    assert events == [
        ("turn_start", {"turn": 1, "max_turns": 20}),
        ("sub_calls", {"count": 1}),
        ("turn_end", {"turn": 1, "findings": 0, "sub_calls": 1}),
        ("turn_start", {"turn": 2, "max_turns": 20}),
        ("turn_end", {"turn": 2, "findings": 0, "sub_calls": 1}),
    ]
    assert turns == [1, 2]


async def test_a_resumed_run_replays_its_turns_without_reporting_them_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Replayed turns rerun their code but are not asked of the root nor given to on_turn."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    first = await episode(monkeypatch, cb, Replies([code("x"), code("answer")]), SCRIPT).run()
    root = Replies([code("answer")])
    events: list[str] = []
    turns: list[int] = []
    ep = episode(
        monkeypatch,
        cb,
        root,
        SCRIPT,
        replay=first.turns[:1],
        on_event=lambda kind, data: events.append(f"{kind}:{data.get('turn')}"),
        on_turn=lambda t: turns.append(t.index),
    )
    r = await ep.run()
    assert r.answer == "# Report" and r.num_turns == 2 and len(root.requests) == 1
    assert "turn_replayed:1" in events and turns == [2]
    assert ep.replay_mismatches == []


async def test_the_result_records_what_ran_and_what_it_cost(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The result names the models, the sandbox, the prompts and their batches, the usage
    rows and cost from the ledger, the opening conversation and how the root worked."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"send": Cell(prompts=(f"Audit app.py:\n{APP}",)), "answer": Cell(answer="# R")}
    ledger = Ledger()
    root = MeteredModel(Replies([code("send"), code("answer")]), "root", ledger, PriceTable.load())
    ep = episode(monkeypatch, cb, root, script, ledger=ledger, config={"audit_scopes": {"source"}})
    r = await ep.run()
    assert (r.root_model, r.sub_model, r.sandbox_mode) == ("test/replies", "static", "scripted")
    assert r.sent_prompts == [f"Audit app.py:\n{APP}"] and r.batch_sizes == [1]
    assert (r.sub_calls, r.sub_calls_refused, r.sub_calls_failed) == (1, 0, 0)
    assert r.audit_scopes == ["source"] and r.coverable_files == 1
    assert [(u["role"], u["calls"]) for u in r.usage] == [("root", 2), ("sub", 1)]
    assert r.total_cost_usd == ledger.total_cost()
    assert (r.system_prompt, r.first_message) == ep.opening()
    assert r.behaviour is not None and r.behaviour.llm_batch_calls == 1
    assert r.stop_detail == "" and r.wall_seconds >= 0


# ------------------------------------------------------------------ what one turn does


async def test_the_root_sees_the_conversation_in_turns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each request carries the opening message, then each reply and what it produced, as
    alternating assistant and user messages, with the configured request settings."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    root = Replies([code("x"), code("answer")])
    config = {"max_root_tokens": 777, "temperature": 0.25, "cache_root_prompt": False}
    ep = episode(monkeypatch, cb, root, SCRIPT, config=config)
    r = await ep.run()
    system, first = ep.opening()
    one, two = root.requests
    assert [(m.role, m.content) for m in one.messages] == [("user", first)]
    assert [(m.role, m.content) for m in two.messages] == [
        ("user", first),
        ("assistant", code("x")),
        ("user", r.turns[0].output),
    ]
    assert (two.system, two.max_tokens, two.temperature, two.cache_prompt) == (
        system,
        777,
        0.25,
        False,
    )
    assert r.turns[0].output.startswith("ran") and r.turns[0].reply == code("x")
    plain = Replies([code("answer")])
    await episode(monkeypatch, cb, plain, SCRIPT).run()
    assert plain.requests[0].cache_prompt is True and plain.requests[0].temperature is None
    assert r.turns[0].code_blocks == ["x"] and not r.turns[0].answer_ready
    assert r.turns[1].answer_ready and r.turns[1].index == 2


async def test_a_reply_without_code_is_told_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A reply with no code block runs nothing and the root is told how to write one."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    r = await episode(monkeypatch, cb, Replies(["just prose", code("answer")]), SCRIPT).run()
    assert r.turns[0].code_blocks == [] and r.turns[0].output.startswith(prompts.NO_CODE_NOTE)
    assert (r.num_turns, r.answer, r.stop_reason) == (2, "# Report", "answer_ready")
    prose = await episode(
        monkeypatch, cb, Replies(["prose"]), SCRIPT, config={"max_turns": 1}
    ).run()
    assert prose.incomplete and "Partial answer" not in prose.answer


async def test_a_turn_counts_its_worker_calls_by_kind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A turn records the prompts its blocks asked of workers, its llm_query calls and the
    size of each llm_batch call, over all its blocks."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    query, batch3 = LlmCall("query", 1), LlmCall("batch", 3)
    script = {
        "a": Cell(
            prompts=("p1", "p2", "p3", "p4", "p5", "p6"), calls=(query, batch3, query, query)
        ),
        "b": Cell(prompts=("p7", "p8"), calls=(LlmCall("batch", 2),)),
        "answer": Cell(answer="# R"),
    }
    r = await episode(monkeypatch, cb, Replies([code("a", "b"), code("answer")]), script).run()
    t = r.turns[0]
    assert (t.sub_calls, t.llm_query_calls, t.llm_batch_sizes) == (8, 3, [3, 2])
    assert r.batch_sizes == [6, 2] and r.sub_calls == 8


async def test_findings_are_kept_with_their_scope_and_bad_ones_dropped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A turn keeps each valid finding, with the scope of its file; one without a file is
    dropped."""
    cb = codebase(tmp_path, {"app.py": APP, "tests/test_app.py": "def test_x():\n    pass\n"})
    good = {"file": "tests/test_app.py", "line": 1, "kind": "k", "severity": "low", "title": "t"}
    script = {"f": Cell(findings=(good, {"line": 3})), "answer": Cell(answer="# R")}
    r = await episode(monkeypatch, cb, Replies([code("f"), code("answer")]), script).run()
    (f,) = r.findings
    assert (f.file, f.scope) == ("tests/test_app.py", "test")
    assert r.turns[0].findings_added == 1


def _many(n: int, start: int = 1) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"file": "app.py", "line": i, "kind": f"k{i}", "severity": "low", "title": "t"}
        for i in range(start, start + n)
    )


async def test_a_turn_keeps_at_most_its_share_of_findings_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past the per-turn or per-run cap, a turn's extra findings are dropped and the root is
    told how many and why; exactly the cap is kept whole."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"two": Cell(findings=_many(2)), "three": Cell(findings=_many(3, 10))}
    script["answer"] = Cell(answer="# R", findings=_many(1, 20))
    config = {"max_findings_per_turn": 2, "max_findings_per_run": 3}
    root = Replies([code("two"), code("three"), code("answer")])
    r = await episode(monkeypatch, cb, root, script, config=config).run()
    assert [t.findings_added for t in r.turns] == [2, 1, 0]  # the run's cap reached: none
    assert "dropped" not in r.turns[0].output
    assert (
        "[deeprepo] 2 of the 3 findings recorded this turn were dropped: a run keeps at most "
        "2 a turn and 3 in all. Record fewer, merged findings."
    ) in r.turns[1].output
    assert len(r.findings) == 3
    # What was cut is counted and makes the run incomplete, whatever the root was told.
    assert r.findings_cut == 3  # 2 of the second turn's 3, the last turn's 1
    assert not r.complete
    assert "3 findings cut by a cap" in r.incomplete_reason


async def test_the_last_turns_are_counted_down(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """From countdown_from turns left, each output ends with how many remain; not on the last
    counted turn's successor, nor once the answer is set."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    config = {"max_turns": 5, "countdown_from": 3}
    r = await episode(monkeypatch, cb, Replies([code("x")]), SCRIPT, config=config).run()
    assert [t.output for t in r.turns] == [
        "ran",
        "ran\n" + prompts.turn_countdown(3),
        "ran\n" + prompts.turn_countdown(2),
        "ran\n" + prompts.turn_countdown(1),
        "ran",
        "ran",
    ]
    answered = await episode(
        monkeypatch, cb, Replies([code("answer")]), SCRIPT, config={"max_turns": 2}
    ).run()
    assert answered.turns[0].output == "[no output]"


@pytest.mark.parametrize(("size", "cut"), [(4 * 8192, False), (4 * 8192 + 1, True)])
async def test_a_turns_output_is_cut_to_four_times_the_sandbox_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, size: int, cut: bool
) -> None:
    """What one turn adds to the conversation is cut in the middle past 4x the sandbox's
    output limit (or max_turn_output_chars)."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    script = {"big": Cell(output="a" * size), "answer": Cell(answer="# R")}
    r = await episode(monkeypatch, cb, Replies([code("big"), code("answer")]), script).run()
    assert (r.turns[0].output == "a" * size) is not cut
    small = await episode(
        monkeypatch, cb, Replies([code("big"), code("answer")]), script,
        config={"max_turn_output_chars": 100},
    ).run()  # fmt: skip
    assert small.turns[0].output.startswith("a" * 50) and small.turns[0].output.endswith("a" * 50)
    assert len(small.turns[0].output) < 200


async def test_a_replayed_turn_keeps_its_recorded_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On resume each replayed turn is its own record, in order: the conversation goes on
    from what the root was shown before (a rerun that prints something else is noted as a
    mismatch), and the call counts come from the rerun."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    calls = (LlmCall("query", 1), LlmCall("batch", 2))
    script = {"x": Cell(output="now", prompts=("p", "q", "r"), calls=calls)}
    script["y"] = Cell(output="later")
    script["answer"] = Cell(answer="# R")
    replies = [code("x"), code("y"), code("answer")]
    first = await episode(monkeypatch, cb, Replies(replies), script).run()
    recorded = [
        replace(first.turns[0], output="then", llm_query_calls=0, llm_batch_sizes=[]),
        first.turns[1],
    ]
    root = Replies([code("answer")])
    ep = episode(monkeypatch, cb, root, script, replay=recorded)
    r = await ep.run()
    assert ep.replay_mismatches == [1]
    assert [(m.role, m.content) for m in root.requests[0].messages[1:]] == [
        ("assistant", code("x")),
        ("user", "then"),
        ("assistant", code("y")),
        ("user", "later"),
    ]
    assert [t.output for t in r.turns] == ["then", "later", "[no output]"]
    assert (r.turns[0].llm_query_calls, r.turns[0].llm_batch_sizes) == (1, [2])


# ------------------------------------------------------------------ how a run starts and ends


class Recorder:
    """A worker that records each request and answers with no finding, or fails."""

    name = "test/recorder"
    concurrency = 3

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        if self.fail:
            raise ProviderError("worker exploded")
        return Completion('{"findings": []}', Usage(1, 1), model=self.name)

    async def aclose(self) -> None:
        return None


async def test_the_kernel_gets_the_codebase_the_audit_set_and_the_worker_plan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The REPL starts with the codebase, the audit set and scopes, the worker's model and
    parallelism, the architecture, the sandbox settings, the warm pool and the sub-calls
    left."""
    cb = codebase(tmp_path, {"app.py": APP, "README.md": "# docs\n"})
    kernel = type("Kernel", (ScriptedKernel,), {"script": SCRIPT})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    ledger = Ledger()
    sub = MeteredModel(Recorder(), "sub", ledger, PriceTable.load(), concurrency=3)
    pool = object()
    sandbox = SandboxConfig(cell_timeout_s=7)
    ep = Episode(
        cb, root=Replies([code("answer")]), dispatcher=SubDispatcher(sub), ledger=ledger,
        sandbox=sandbox, pool=pool,  # type: ignore[arg-type]
    )  # fmt: skip
    assert ep.pool is pool
    await ep.run()
    started = kernel.started
    meta = started["payload"]["metadata"]
    assert meta["audit_files"] == ["app.py"] == ep.audit_paths
    assert meta["audit_scopes"] == sorted(EpisodeConfig().audit_scopes)
    assert meta["workers"] == {"model": "test/recorder", "parallel": 3}
    assert "modules" in meta["architecture"] or meta["architecture"]
    assert started["payload"]["codebase"]["app.py"] == APP
    assert started["args"] == (sandbox,) and started["pool"] is pool
    assert started["capacity"] == ep.dispatcher.sub_calls_left


async def test_the_architecture_the_kernel_gets_lists_at_most_200_of_each_kind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The architecture the REPL starts with holds at most 200 items per list, and says how
    many a longer list had."""
    imports = "\n".join(f"import extpkg{i}" for i in range(201)) + "\n"
    cb = codebase(tmp_path, {"app.py": imports})
    kernel = type("Kernel", (ScriptedKernel,), {"script": SCRIPT})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    ledger = Ledger()
    sub = MeteredModel(Recorder(), "sub", ledger, PriceTable.load())
    ep = Episode(cb, root=Replies([code("answer")]), dispatcher=SubDispatcher(sub), ledger=ledger)
    await ep.run()
    architecture = kernel.started["payload"]["metadata"]["architecture"]
    assert len(architecture["external"]) == 200
    assert architecture["truncated"] == {"external": 201}


async def test_the_opening_is_the_prompt_the_summary_and_the_task(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The root is opened with the configured system prompt and a first message holding the
    task and the repository summary over the audited scopes."""
    cb = codebase(tmp_path, {"app.py": APP, "tests/test_app.py": "def test_x():\n    pass\n"})
    config = {"prompt": "exhaustive", "task": "Find the SQL bugs.", "audit_scopes": {"source"}}
    ep = episode(monkeypatch, cb, Replies([code("answer")]), SCRIPT, config=config)
    system, first = ep.opening()
    assert system == prompts.ROOT_SYSTEM_PROMPTS["exhaustive"]
    summary = metadata_summary(cb, frozenset({"source"}))
    assert first == prompts.first_user_message(summary, "Find the SQL bugs.")
    assert first.startswith("Find the SQL bugs.") and "- to audit: 1 files (scopes source)" in first
    with pytest.raises(ValueError, match=r"^unknown prompt 'nope'$"):
        episode(monkeypatch, cb, Replies([]), SCRIPT, config={"prompt": "nope"})


async def test_a_cells_system_prompt_reaches_the_worker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """llm_query(prompt, system=...) sends that system prompt to the worker."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    worker = Recorder()
    script = {"ask": Cell(prompts=("p",), system="Be brief."), "answer": Cell(answer="# R")}
    kernel = type("Kernel", (ScriptedKernel,), {"script": script})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    ledger = Ledger()
    sub = MeteredModel(worker, "sub", ledger, PriceTable.load())
    root = Replies([code("ask"), code("answer")])
    await Episode(cb, root=root, dispatcher=SubDispatcher(sub), ledger=ledger).run()
    assert [r.system for r in worker.requests] == ["Be brief."]


async def test_refused_and_failed_worker_calls_are_the_reason_a_run_is_incomplete(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Prompts a budget refused and calls that failed are counted and named as the reason
    the files they carried were not audited."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"send": Cell(prompts=(f"A:\n{APP}", f"B:\n{APP}")), "answer": Cell(answer="# R")}
    kernel = type("Kernel", (ScriptedKernel,), {"script": script})
    monkeypatch.setattr(episode_module, "Kernel", kernel)
    for fail, budget, counts, reason in [
        (False, 0, (0, 2, 0), "2 worker prompts refused by the sub-calls budget"),
        (True, None, (0, 0, 2), "2 worker calls failed; first: "),
    ]:
        ledger = Ledger()
        limits = Budget(ledger=ledger, max_sub_calls=budget)
        sub = MeteredModel(Recorder(fail), "sub", ledger, PriceTable.load(), budget=limits)
        root = Replies([code("send"), code("answer")])
        r = await Episode(cb, root=root, dispatcher=SubDispatcher(sub), ledger=ledger).run()
        assert (r.sub_calls, r.sub_calls_refused, r.sub_calls_failed) == counts
        assert r.incomplete_reason.startswith(reason) and r.unaudited == ["app.py"]
        assert exits.for_result(r) == (exits.INCOMPLETE if budget == 0 else exits.ERROR)


async def test_a_draft_answer_is_kept_in_the_salvaged_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Answer text written without set_answer is not an answer, but the salvaged report
    keeps it as the root's partial answer; a run stopped before any draft has none."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    script = {"draft": Cell(draft="half a report")}
    r = await episode(
        monkeypatch, cb, Replies([code("draft")]), script, config={"max_turns": 1}
    ).run()
    assert r.incomplete and "## Partial answer from the root\n\nhalf a report" in r.answer
    error = ProviderError("down")
    r = await episode(monkeypatch, cb, Failing(error), script).run()
    assert r.num_turns == 0 and "Partial answer" not in r.answer


async def test_the_timeout_counts_from_the_start_inclusive(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A run that has used exactly timeout_s starts no new turn."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    now = [100.0]

    class Slow(Replies):
        async def complete(self, request: ChatRequest) -> Completion:
            now[0] += 5.0
            return await super().complete(request)

    ep = episode(monkeypatch, cb, Slow([code("x")]), SCRIPT, config={"timeout_s": 5})
    ep.clock = lambda: now[0]
    r = await ep.run()
    assert (r.stop_reason, r.num_turns, r.wall_seconds) == ("timeout", 1, 5.0)
    assert r.turns[0].seconds == 5.0


async def test_a_real_cancellation_is_absorbed_once_caught(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With catch_interrupt, a cancelled task's run ends as interrupted and the task is no
    longer marked as being cancelled (later awaits, closing the kernel, run normally)."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    waiting = asyncio.Event()

    class Hanging(Replies):
        async def complete(self, request: ChatRequest) -> Completion:
            if len(self.requests) >= 1:
                waiting.set()
                await asyncio.sleep(60)
            return await super().complete(request)

    ep = episode(monkeypatch, cb, Hanging([code("x")]), SCRIPT, config={"catch_interrupt": True})

    async def body() -> tuple[RunResult, int]:
        result = await ep.run()
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    task = asyncio.create_task(body())
    await waiting.wait()
    task.cancel()
    r, cancelling = await task
    assert r.stop_reason == "interrupted" and r.num_turns == 1 and cancelling == 0


def test_the_summary_tells_the_root_what_the_repository_holds() -> None:
    """The first message's overview: root and revision, sizes, the top 8 languages, the 5
    largest files, the first 10 source entry points (tests and examples left out), what was
    skipped, the scopes, and how many files of which scopes must be audited."""
    md = CodebaseMetadata(
        root="repo", files=1234, chars=1_234_567, lines=12_345,
        languages={f"L{i}": 20 - i for i in range(9)},
        largest_files=[(f"big{i}.py", 9000 - i) for i in range(6)],
        entry_points=["tests/main.py", *(f"app{i}.py" for i in range(12))],
        skipped=[SkippedFile("blob.bin", "binary")], revision="abc123",
        scopes={"source": 1000, "docs": 234},
    )  # fmt: skip
    cb = Codebase(
        files={"README.md": "# hi\n", "conf.yaml": "a: 1\n", "empty.py": " \n"},
        file_tree="", metadata=md,
        scopes={"README.md": "docs", "conf.yaml": "config", "empty.py": "source"},
    )  # fmt: skip
    langs = ", ".join(f"L{i} ({20 - i})" for i in range(8))
    largest = ", ".join(f"big{i}.py ({9000 - i:,} chars)" for i in range(5))
    entries = ", ".join(f"app{i}.py" for i in range(10))
    assert metadata_summary(cb, frozenset({"config", "source"})).split("\n")[:8] == [
        "- root: repo @ abc123",
        "- 1,234 files, 12,345 lines, 1,234,567 chars",
        f"- languages: {langs}",
        f"- largest: {largest}",
        f"- entry points: {entries} (+2 more)",
        "- skipped: 1 files (binary, oversized, ignored); see metadata['skipped']",
        "- scopes: source (1,000), docs (234)",
        "- to audit: 1 files (scopes config, source); the list is metadata['audit_files']",
    ]
    bare = Codebase(files={}, file_tree="", metadata=CodebaseMetadata("r", 0, 0, 0, {}, [], []))
    assert metadata_summary(bare).split("\n")[:5] == [
        "- root: r",
        "- 0 files, 0 lines, 0 chars",
        "- languages: unknown",
        "- largest: ",
        "- entry points: none found",
    ]


class Priced(Replies):
    """A root billed at a known price ($1 per million input tokens)."""

    @property
    def name(self) -> str:
        return "anthropic/claude-haiku-4-5"


async def test_a_turn_costs_what_the_root_spent_on_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each turn records the root's dollars for that turn (not the workers'); unknown when
    the root's price is."""
    cb = codebase(tmp_path, {"app.py": APP})
    script = {"send": Cell(prompts=(f"Audit app.py:\n{APP}",)), "answer": Cell(answer="# R")}
    replies = [code("send"), code("answer")]
    for root, costs in [
        (Priced(replies, Usage(1_000_000, 0)), [1.0, 1.0]),
        (Replies(replies, Usage(1_000_000, 0)), [None, None]),
    ]:
        ledger = Ledger()
        metered = MeteredModel(root, "root", ledger, PriceTable.load())
        ep = episode(monkeypatch, cb, metered, script, ledger=ledger)
        r = await ep.run()
        assert [t.cost_usd for t in r.turns] == costs
        assert r.total_cost_usd == (None if costs[0] is None else 2.0)  # the worker is free
        assert [t.input_tokens for t in r.turns] == [1_000_000, 1_000_000]


async def test_memory_addresses_are_masked_in_what_the_root_sees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A default repr's address changes on every run: the root sees 0x… instead, so a rerun
    asks the same and hits the response cache."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    out = "<Thing object at 0x7f3a2b4c5d60>, at 0x12>, <B at 0xABCD>  \n"
    script = {"x": Cell(output=out), "answer": Cell(answer="# R")}
    r = await episode(monkeypatch, cb, Replies([code("x"), code("answer")]), script).run()
    assert r.turns[0].output == "<Thing object at 0x…>, at 0x12>, <B at 0x…>"


async def test_a_turns_tokens_are_its_own_whatever_the_ledger_held_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A turn's tokens are what the root used in it, summed over every root row of the
    ledger: worker rows and rows from before the run do not leak in."""
    cb = codebase(tmp_path, {"README.md": "# docs\n"})
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w", Usage(5, 5, 5, 5)))
    ledger.record(LLMCall("root", "earlier", Usage(1000, 1000, 1000, 1000)))
    root = MeteredModel(
        Replies([code("x"), code("answer")], Usage(100, 10, 7, 3)), "root", ledger,
        PriceTable.load(),
    )  # fmt: skip
    r = await episode(monkeypatch, cb, root, SCRIPT, ledger=ledger).run()
    tokens = [
        (t.input_tokens, t.output_tokens, t.cache_read_tokens, t.cache_write_tokens)
        for t in r.turns
    ]
    assert tokens == [(100, 10, 7, 3), (100, 10, 7, 3)]


@pytest.mark.parametrize(("n", "tail"), [(10, ""), (11, " (+1 more)")])
def test_entry_points_past_ten_are_counted_not_listed(n: int, tail: str) -> None:
    """The overview lists ten entry points and counts the rest."""
    md = CodebaseMetadata("r", 0, 0, 0, {}, [], [f"e{i}.py" for i in range(n)])
    cb = Codebase(files={}, file_tree="", metadata=md)
    listed = ", ".join(f"e{i}.py" for i in range(10))
    assert f"- entry points: {listed}{tail}\n" in metadata_summary(cb)
