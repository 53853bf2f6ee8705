"""``deeprepo export sft``: trajectories back into the exact conversations the root had."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, loopback_analyze_args, run_cli

from deeprepo.base import prompts
from deeprepo.base.chat import ChatRequest, Completion
from deeprepo.builtin import make_policy
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.rl.env.rollout import run_rollout
from deeprepo.rl.env.tasks import generate_tasks_in_memory, parse_task_spec
from deeprepo.rl.evals.results import RolloutResult, write_results
from deeprepo.rl.train.export import ExportOptions, conversation, export_sft
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.testing.loopback import LoopbackServer

KEYS = {"ANTHROPIC_API_KEY": "test-key", "OPENROUTER_API_KEY": "test-key"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def _sent(body: dict[str, Any]) -> list[dict[str, str]]:
    """An Anthropic request body as chat messages: what the root model was sent."""
    msgs = [{"role": "system", "content": _text(body["system"])}]
    msgs += [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"]]
    return msgs


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("offline") / "run"
    proc = run_cli("analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.e2e
def test_export_is_exactly_what_the_root_was_sent_final_turn_note_included(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    # Turn 1 prints, turn 2 has no code block (the no-code note comes back), max_turns=2 then
    # gives a final turn whose request carries the final-turn note; it never answers.
    replies = [
        "Look first.\n```python\nprint(len(codebase), 'files')\n```",
        "I think the code is fine.",
        "```python\nx = 1\n```",
    ]
    for reply in replies:
        loopback.enqueue_anthropic(reply)
    out = tmp_path / "run"
    proc = run_cli(*loopback_analyze_args(loopback, out, "--max-turns", "2"), env=KEYS)
    assert proc.returncode == 3, proc.stderr  # no answer: incomplete

    sent = [_sent(r.body or {}) for r in loopback.requests_for("anthropic")]
    assert len(sent) == 3

    target = tmp_path / "sft.jsonl"
    skipped = export_sft([out], target)
    assert (skipped.written, dict(skipped.skipped)) == (0, {"incomplete": 1})

    summary = export_sft([out], target, ExportOptions(include_incomplete=True))
    assert summary.written == 1
    [example] = _read(target)
    messages = example["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "user"] * 2 + [
        "assistant"
    ]
    # Every request the root received is a prefix of the example, reply by reply.
    for k, request in enumerate(sent):
        assert messages[: len(request)] == request
        assert messages[len(request)] == {"role": "assistant", "content": replies[k]}
    assert messages[-1]["content"] == replies[-1]
    assert prompts.NO_CODE_NOTE in messages[5]["content"]
    assert messages[5]["content"].endswith(prompts.FINAL_TURN_NOTE)
    assert example["meta"]["complete"] is False and example["meta"]["turns"] == 3


@pytest.mark.e2e
def test_trajectory_without_recorded_prompts_is_rebuilt_from_the_unchanged_repository(
    offline_run: Path, tmp_path: Path
) -> None:
    recorded = tmp_path / "a.jsonl"
    assert export_sft([offline_run], recorded).written == 1

    old = tmp_path / "old"
    old.mkdir()
    records = _read(offline_run / "trajectory.jsonl")
    assert records[0]["type"] == "start"
    del records[0]["system_prompt"], records[0]["first_user_message"]
    (old / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    rebuilt = tmp_path / "b.jsonl"
    assert export_sft([old], rebuilt).written == 1
    assert _read(rebuilt)[0]["messages"] == _read(recorded)[0]["messages"]

    records[0]["codebase_sha256"] = "0" * 64  # the repository "changed" since
    (old / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = export_sft([old], rebuilt, ExportOptions(include_incomplete=True))
    assert summary.written == 0
    assert dict(summary.skipped) == {"no prompts recorded and the repository changed since": 1}


@pytest.mark.e2e
def test_filters_and_the_summary_count_what_was_skipped(offline_run: Path, tmp_path: Path) -> None:
    records = _read(offline_run / "trajectory.jsonl")
    end = records[-1]
    assert end["type"] == "end" and end["findings"] > 0

    def variant(name: str, recs: list[dict[str, Any]]) -> Path:
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        (d / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        return d

    variant("a-good", records)
    variant("b-good", records)
    variant("c-killed", records[:-1])  # no end record
    variant("d-failed", [*records[:-1], {**end, "stop_reason": "error", "incomplete": True}])
    variant("e-budget", [*records[:-1], {**end, "stop_reason": "budget", "incomplete": True}])
    out = tmp_path / "sft.jsonl"

    summary = export_sft([tmp_path / "runs"], out)  # a folder of run folders
    assert summary.runs == 5 and summary.written == 2
    assert dict(summary.skipped) == {
        "unfinished (no end record: killed or still running)": 1,
        "failed (stopped on an error)": 1,
        "incomplete": 1,
    }
    assert "skipped 3:" in summary.line()

    summary = export_sft(
        [tmp_path / "runs"], out, ExportOptions(include_incomplete=True, max_examples=2)
    )
    assert summary.written == 2 and summary.skipped["over --max-examples 2"] == 1
    assert len(_read(out)) == 2

    many = end["findings"] + 1
    summary = export_sft([tmp_path / "runs"], out, ExportOptions(min_findings=many))
    assert summary.written == 0 and summary.skipped[f"under --min-findings {many}"] == 2


class _Recorder:
    """The scripted expert, keeping every request it was sent."""

    def __init__(self) -> None:
        self.model = make_policy("expert")
        self.requests: list[ChatRequest] = []

    @property
    def name(self) -> str:
        return self.model.name

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        return await self.model.complete(request)

    async def aclose(self) -> None:
        await self.model.aclose()


@pytest.mark.e2e
def test_eval_rollouts_export_one_exact_example_each(tmp_path: Path) -> None:
    [task] = generate_tasks_in_memory(parse_task_spec("small:seed=5"), 1)
    root = _Recorder()

    async def go() -> list[Any]:
        outs = []
        for k in range(2):
            outs.append(
                await run_rollout(
                    task,
                    root=root,
                    rollout_index=k,
                    episode_config=EpisodeConfig(max_turns=6),
                    sandbox_config=SandboxConfig(mode="process"),
                )
            )
        return outs

    outcomes = asyncio.run(go())
    write_results(tmp_path / "results.jsonl", [RolloutResult.from_outcome(o) for o in outcomes])
    target = tmp_path / "sft.jsonl"
    summary = export_sft([tmp_path], target, ExportOptions(min_reward=0.5))
    assert summary.written == 2, summary.line()
    examples = _read(target)
    turns = outcomes[0].result.num_turns
    assert len(root.requests) == 2 * turns
    for k, example in enumerate(examples):
        assert example["meta"]["rollout"] == k and example["meta"]["reward"] >= 0.5
        for request in root.requests[k * turns : (k + 1) * turns]:
            sent = [{"role": "system", "content": request.system}]
            sent += [{"role": m.role, "content": m.content} for m in request.messages]
            assert example["messages"][: len(sent)] == sent
    summary = export_sft([tmp_path], target, ExportOptions(min_reward=1.01))
    assert summary.written == 0 and summary.skipped["under --min-reward 1.01"] == 2


@pytest.mark.e2e
def test_a_baseline_run_is_not_a_conversation(tmp_path: Path) -> None:
    run = tmp_path / "baseline"
    proc = run_cli("baseline", str(EXAMPLE), "--model", "scripted/expert", "--out", str(run))
    assert (run / "trajectory.jsonl").is_file(), proc.stderr
    summary = export_sft([run], tmp_path / "sft.jsonl", ExportOptions(include_incomplete=True))
    assert summary.written == 0
    assert dict(summary.skipped) == {"a baseline run (one call, no root conversation)": 1}


def test_conversation_refuses_turns_out_of_order() -> None:
    turns = [{"index": 1, "reply": "a", "output": "o"}, {"index": 3, "reply": "b", "output": "p"}]
    with pytest.raises(ValueError, match="turn 3 where turn 2"):
        conversation("s", "u", turns)


@pytest.mark.e2e
def test_cli_summary_line_and_exit_codes(offline_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "sft.jsonl"
    proc = run_cli("export", "sft", str(offline_run), str(target))
    assert proc.returncode == 0, proc.stderr
    assert "exported 1 example(s) from 1 run(s)" in proc.stdout
    assert len(_read(target)) == 1

    proc = run_cli("export", "sft", str(offline_run), str(target), "--min-findings", "999")
    assert proc.returncode == 1
    assert "skipped 1: 1 under --min-findings 999" in proc.stdout
    assert "no run passed the filters" in proc.stderr

    proc = run_cli("export", "sft", str(offline_run), str(tmp_path / "out.json"))
    assert proc.returncode == 2 and "must end in .jsonl" in proc.stderr
    proc = run_cli("export", "sft", str(tmp_path / "missing"), str(target))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
