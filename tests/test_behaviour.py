"""Behaviour metrics (orchestrator/behaviour.py): the counts the kernel and the episode
record, the files the root and the workers were shown, and the label rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import EXAMPLE, loopback_analyze_args, run_cli
from test_episode import Replies, code, run
from test_sarif import validate as validate_sarif

from deeprepo.base.records import Behaviour
from deeprepo.builtin import make_policy
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator.behaviour import (
    OVER_EXPLORATION_TURNS,
    ShownIndex,
    TurnCalls,
    behaviour_of,
    label_of,
)
from deeprepo.rl.evals.compare import compare_runs, render_markdown
from deeprepo.rl.evals.results import RolloutResult, load_results
from deeprepo.testing.loopback import LoopbackServer, Reply


@pytest.fixture(scope="module")
def example() -> Codebase:
    return load_codebase(EXAMPLE)


FILES = {
    "a.py": "\n".join(f"value_{i} = compute_alpha({i})" for i in range(20)),
    "b.py": "\n".join(f"other_{i} = compute_beta({i})" for i in range(20)),
    "c.py": "# Licensed under the Apache License 2.0\nimport os.path as osp\nvalue_c = 1234567\n",
    "d.py": "# Licensed under the Apache License 2.0\nimport os.path as osp\n",
    "tiny.py": "x = 1\n",
}


def test_shown_needs_five_distinctive_lines_or_the_whole_small_file() -> None:
    index = ShownIndex(FILES)
    a_lines = FILES["a.py"].splitlines()
    assert index.shown(["\n".join(a_lines[:4])]) == set()
    assert index.shown(["\n".join(a_lines[:5])]) == {"a.py"}
    # Numbered as the audit prompt numbers lines.
    assert index.shown(["\n".join(f"{i:>5} | {ln}" for i, ln in enumerate(a_lines, 1))]) == {"a.py"}
    # The licence header and import are shared with d.py: not c.py's own lines.
    assert index.shown([FILES["d.py"]]) == {"d.py"}
    assert index.shown([FILES["c.py"]]) == {"c.py", "d.py"}
    assert index.shown(["x = 1"]) == set()  # no line of substance


def test_label_rules_in_order() -> None:
    base = dict(
        sub_prompts=10,
        batched_prompts=10,
        files_read_by_root=0,
        files_sent_to_workers=10,
        exploration_turns=2,
        turns_with_sub_calls=1,
    )
    assert label_of(**base) == "batch-delegation"
    assert label_of(**{**base, "sub_prompts": 0, "batched_prompts": 0}) == "no-delegation"
    over = {**base, "exploration_turns": OVER_EXPLORATION_TURNS}
    assert label_of(**over) == "over-exploration"
    # Exploration spread among as many delegating turns is not over-exploration.
    assert label_of(**{**over, "turns_with_sub_calls": OVER_EXPLORATION_TURNS}) != (
        "over-exploration"
    )
    assert label_of(**{**base, "files_read_by_root": 10}) == "self-analysis"
    assert label_of(**{**base, "files_read_by_root": 3}) == "mixed"  # 3 > 10/4
    assert label_of(**{**base, "files_read_by_root": 2}) == "batch-delegation"
    assert label_of(**{**base, "batched_prompts": 7}) == "mixed"  # 70% < 75%


def test_behaviour_of_turns() -> None:
    a_text = FILES["a.py"]
    turns = [
        TurnCalls(1, "tree\n" + a_text),  # the root reads a.py itself
        TurnCalls(2, "dispatched", query_calls=1, batch_sizes=(3, 1)),
        TurnCalls(3, "", answer_ready=True),
        TurnCalls(4, "after the answer (a final turn)"),
    ]
    b = behaviour_of(turns, files=FILES, sent_prompts=[FILES["b.py"], FILES["c.py"]])
    assert b.llm_query_calls == 1 and b.llm_batch_calls == 2 and b.batch_sizes == [3, 1]
    assert b.sub_prompts == 5 and b.batched_share == 0.6
    assert b.files_read_by_root == 1 and b.files_sent_to_workers == 3  # b, c and d (c holds d)
    assert b.turns_with_sub_calls == 1 and b.answer_turn == 3 and b.exploration_turns == 1
    assert b.label == "mixed"
    assert Behaviour.from_dict(b.to_dict()) == b
    with pytest.raises(ValueError, match="behaviour"):
        Behaviour.from_dict({"llm_query_calls": 1})


@pytest.mark.e2e
async def test_query_and_batch_calls_counted_per_call(example: Codebase) -> None:
    root = Replies(
        [
            code("print(file_tree[:200])"),
            code(
                "r = llm_batch([file_audit_prompt(p) for p in ['vulnapi/models.py', 'vulnapi/auth.py']])\n"
                "q = llm_query('just the path: vulnapi/db.py')\n"
                "r2 = llm_batch(['one prompt'])\n"
                "print(codebase['vulnapi/db.py'])"
            ),
            code("r3 = llm_batch(['a', 'b', 'c'])\nq2 = llm_query('x')\nset_answer('done')"),
        ]
    )
    result = await run(example, root, max_turns=5)
    b = result.behaviour
    assert b is not None
    assert b.llm_query_calls == 2 and b.llm_batch_calls == 3
    assert b.batch_sizes == [2, 1, 3]
    assert [t.llm_query_calls for t in result.turns] == [0, 1, 1]
    assert [t.llm_batch_sizes for t in result.turns] == [[], [2, 1], [3]]
    assert b.turns_with_sub_calls == 2 and b.answer_turn == 3 and b.exploration_turns == 1
    assert b.files_read_by_root == 1  # db.py, printed whole
    assert b.files_sent_to_workers == 2  # models.py and auth.py; db.py was only named
    assert b.sub_prompts == 8 and b.label == "mixed"  # 5 of 8 prompts batched


@pytest.mark.e2e
async def test_a_batch_split_over_requests_is_one_call(example: Codebase) -> None:
    # Over the 4 MB a request may carry: the child sends it in several requests.
    root = Replies(
        [code("r = llm_batch(['x' * 900_000 for _ in range(6)])\nset_answer(str(len(r)))")]
    )
    result = await run(example, root, max_turns=2)
    assert result.behaviour is not None
    assert result.behaviour.batch_sizes == [6] and result.behaviour.llm_batch_calls == 1
    assert len(result.batch_sizes) > 1  # the dispatcher saw several requests


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("policy", "label"),
    [
        ("expert", "batch-delegation"),
        ("lazy", "no-delegation"),
        ("no-delegation", "no-delegation"),
        ("over-explorer", "over-exploration"),
    ],
)
async def test_scripted_policies_get_their_label(
    example: Codebase, policy: str, label: str
) -> None:
    result = await run(example, make_policy(policy), max_turns=20)
    b = result.behaviour
    assert b is not None and b.label == label
    if policy == "expert":
        assert b.llm_query_calls == 0 and b.files_read_by_root == 0
        assert b.files_sent_to_workers >= 14 and b.answer_turn == result.num_turns
    if policy == "lazy":
        assert b.files_read_by_root == 2 and b.sub_prompts == 0
    if policy == "over-explorer":
        assert b.llm_query_calls > 0 and b.files_read_by_root > 0


def _fence(src: str) -> str:
    return f"Next.\n\n```python\n{src}\n```\n"


@pytest.mark.e2e
def test_loopback_run_counts_known_calls(loopback: LoopbackServer, tmp_path: Path) -> None:
    """A model root (the loopback's Anthropic route) whose code makes known calls: two
    llm_query, two llm_batch of 4 and 2, one file printed whole; metrics.json says so."""
    loopback.enqueue_anthropic(_fence("print(file_tree[:300])"))
    loopback.enqueue_anthropic(
        _fence(
            "paths = sorted(p for p in codebase if p.endswith('.py'))[:4]\n"
            "r = llm_batch([file_audit_prompt(p) for p in paths])\n"
            "q = llm_query('which of these files handles auth? ' + ', '.join(paths))\n"
            "print(codebase['vulnapi/models.py'])"
        )
    )
    loopback.enqueue_anthropic(
        _fence(
            "r2 = llm_batch(['summarise: ' + x for x in r[:2]])\n"
            "q2 = llm_query('one-line summary please')\n"
            "set_answer('# Report\\nDone.')"
        )
    )
    loopback.add_rule("", Reply('{"findings": []}'), route="openai")
    out = tmp_path / "run"
    proc = run_cli(
        *loopback_analyze_args(loopback, out),
        env={"ANTHROPIC_API_KEY": "k", "OPENROUTER_API_KEY": "k"},
    )
    assert proc.returncode in (0, 3), proc.stderr  # 4 files audited of 14: incomplete is fine
    m = json.loads((out / "metrics.json").read_text())
    assert m["schema_version"] == 3
    b = m["behaviour"]
    assert b["llm_query_calls"] == 2 and b["llm_batch_calls"] == 2
    assert b["batch_sizes"] == [4, 2] and b["sub_prompts"] == 8
    assert len(loopback.requests_for("openai")) == 8 == m["sub_calls"]
    assert b["turns_with_sub_calls"] == 2 and b["answer_turn"] == 3
    assert b["exploration_turns"] == 1
    assert b["files_read_by_root"] == 1  # models.py, printed whole
    assert b["files_sent_to_workers"] == 4 == m["files_covered"]
    # 6 of 8 prompts batched (75%) and the root read 1 file for 4 sent (a quarter): both
    # thresholds met exactly.
    assert b["label"] == "batch-delegation" and b["batched_share"] == 0.75
    validate_sarif(json.loads((out / "findings.sarif").read_text()))
    traj = [json.loads(x) for x in (out / "trajectory.jsonl").read_text().splitlines()]
    turns = [t for t in traj if t["type"] == "turn"]
    assert [t["llm_query_calls"] for t in turns] == [0, 1, 1]
    assert [t["llm_batch_sizes"] for t in turns] == [[], [4], [2]]


@pytest.mark.e2e
def test_eval_rows_and_compare_show_behaviour(tmp_path: Path) -> None:
    outs = []
    for policy in ("expert", "no-delegation"):
        out = tmp_path / policy
        proc = run_cli(
            "eval", "--model", f"scripted/{policy}", "-n", "2", "-r", "1",
            "--generate", "small:seed=5", "--out", str(out),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        rows = load_results(out)
        assert [r.behaviour["label"] for r in rows] == (
            ["batch-delegation"] * 2 if policy == "expert" else ["no-delegation"] * 2
        )
        outs.append(out)
    proc = run_cli("compare", *map(str, outs), "--json", "--resamples", "100")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert runs[0]["behaviour"]["labels"] == {"batch-delegation": 2}
    assert runs[1]["behaviour"]["labels"] == {"no-delegation": 2}
    assert runs[1]["behaviour"]["llm_batch_calls_mean"] == 0 and (
        runs[1]["behaviour"]["files_read_by_root_mean"] > 0
    )
    md = run_cli("compare", *map(str, outs), "--markdown", "--resamples", "100").stdout
    assert "| expert | batch-delegation 2 |" in md and "| no-delegation | no-delegation 2 |" in md


def test_compare_reads_results_without_behaviour() -> None:
    old = RolloutResult(example_id="a", reward=0.5)
    new = RolloutResult(
        example_id="a",
        reward=0.7,
        behaviour=Behaviour("mixed", 1, 1, [3], 2, 4, 2, 3).to_dict(),
    )
    assert RolloutResult.from_json(new.to_json()).behaviour == new.behaviour
    table = compare_runs([("old", [old]), ("new", [old, new])], resamples=100, permutations=100)
    assert table.runs[0].behaviour is None
    b = table.runs[1].behaviour
    assert b is not None and b.rollouts == 1 and b.labels == {"mixed": 1}
    assert b.batch_size_mean == 3 and b.answer_turn_mean == 3
    assert "(1 without metrics)" in render_markdown(table)


def test_call_log_groups_requests_and_ignores_empty_forgeries() -> None:
    from deeprepo.sandbox.rpc import CallLog, LlmCall

    log = CallLog()
    log.add({"type": "llm", "api": "batch", "call": 1, "size": 5, "prompts": ["a", "b"]})
    log.add({"type": "llm", "api": "batch", "call": 1, "size": 5, "prompts": ["c", "d", "e"]})
    log.add({"type": "llm", "api": "query", "call": 2, "size": 1, "prompts": ["q"]})
    log.add({"type": "llm", "id": 77, "prompts": 5})  # forged, nothing in it: no call
    log.add({"type": "llm", "prompts": ["x", "y"]})  # untagged: a batch call of its own
    log.add({"type": "llm", "prompts": ["z"]})  # and another
    assert log.calls() == (
        LlmCall("batch", 5),
        LlmCall("query", 1),
        LlmCall("batch", 2),
        LlmCall("batch", 1),
    )
