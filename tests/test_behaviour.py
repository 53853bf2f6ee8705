"""Behaviour metrics (orchestrator/behaviour.py): the counts the kernel and the episode
record, the files the root and the workers were shown, and the label rules."""

from __future__ import annotations

import pytest
from clihelp import EXAMPLE
from test_episode import Replies, code, run

from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator.behaviour import (
    OVER_EXPLORATION_TURNS,
    Behaviour,
    ShownIndex,
    TurnCalls,
    behaviour_of,
    label_of,
)
from deeprepo.policies import make_policy


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
    assert index.shown(["\n".join(f"{i:>5} | {ln}" for i, ln in enumerate(a_lines, 1))]) == {
        "a.py"
    }
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


async def test_a_batch_split_over_requests_is_one_call(example: Codebase) -> None:
    # Over the 4 MB a request may carry: the child sends it in several requests.
    root = Replies(
        [code("r = llm_batch(['x' * 900_000 for _ in range(6)])\nset_answer(str(len(r)))")]
    )
    result = await run(example, root, max_turns=2)
    assert result.behaviour is not None
    assert result.behaviour.batch_sizes == [6] and result.behaviour.llm_batch_calls == 1
    assert len(result.batch_sizes) > 1  # the dispatcher saw several requests


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
