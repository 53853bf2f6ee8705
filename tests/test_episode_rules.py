"""The rules by which an Episode decides whether a run is complete and what went wrong
(orchestrator/episode.py, base/records.py, orchestrator/audit.py, cli/exits.py).

The kernel is a scripted in-process stand-in (each cell's result looked up by its code), so
these tests state the Episode's own decisions without a sandbox child process and run under
the mutation tool (docs/testing.md). tests/test_episode.py runs the same loop on the real
kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.records import RunResult
from deeprepo.builtin import make_static_worker
from deeprepo.cli import exits
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator import episode as episode_module
from deeprepo.orchestrator.episode import Episode, EpisodeConfig
from deeprepo.providers.budget import Budget
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
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


class ScriptedKernel:
    """The kernel's interface (``start``, ``exec``, ``close``, ``mode``) over a script."""

    mode = "scripted"
    script: Mapping[str, Cell] = {}

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.answer: dict[str, Any] = {"content": "", "ready": False}

    @classmethod
    async def start(cls, payload: dict[str, Any], handler: Any, *a: Any, **kw: Any) -> Any:
        return cls(handler)

    async def exec(self, code: str) -> ExecResult:
        cell = self.script[code]
        if cell.prompts:
            await self.handler(list(cell.prompts), None)
        if cell.answer is not None:
            self.answer = {"content": cell.answer, "ready": True}
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
            calls=(LlmCall("batch", len(cell.prompts)),) if cell.prompts else (),
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
    script = {"a": Cell(output="one"), "b": Cell(output="two"), "ans": Cell(answer="# R")}
    r = await run(monkeypatch, cb, [code("a", "b"), code("ans")], script)
    assert r.turns[0].output == "[block 1 of 2]\none\n[block 2 of 2]\ntwo"
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
