"""The rules by which a run's records are read back and summed (base/records.py): a
``behaviour`` object from metrics.json or a results row, and the root's tokens over a run.
One rule per test (docs/testing.md); ``RunResult.complete`` is in tests/test_exits_rules.py."""

from __future__ import annotations

from typing import Any

import pytest

from deeprepo.base.records import Behaviour

FULL = Behaviour(
    label="batch-delegation", llm_query_calls=2, llm_batch_calls=3, batch_sizes=[4, 5],
    files_read_by_root=6, files_sent_to_workers=7, turns_with_sub_calls=8, answer_turn=9,
    exploration_turns=10, sub_prompts=11, batched_share=0.75,
)  # fmt: skip


def test_a_behaviour_written_out_reads_back_the_same() -> None:
    """Every field of a behaviour object is read back under the name it is written with."""
    assert Behaviour.from_dict(FULL.to_dict()) == FULL


def test_a_behaviour_missing_its_counts_reads_them_as_zero() -> None:
    """Counts that are missing (or null) are 0, the lists empty, and the answer turn and
    batched share unknown: a results row written before a field existed still reads."""
    empty = Behaviour(label="mixed", llm_query_calls=0, llm_batch_calls=0)
    assert Behaviour.from_dict({"label": "mixed"}) == empty
    nulls = {key: None for key in FULL.to_dict()}
    assert Behaviour.from_dict({**nulls, "label": "mixed"}) == empty


def test_a_behaviours_numbers_may_be_written_as_text() -> None:
    """Counts, sizes, the answer turn and the share are read as numbers even when a file
    holds them as strings."""
    text: dict[str, Any] = {
        key: [str(n) for n in value] if isinstance(value, list) else str(value)
        for key, value in FULL.to_dict().items()
    }
    assert Behaviour.from_dict(text) == FULL


@pytest.mark.parametrize(
    "data", [{"llm_query_calls": 1}, {"label": "mixed", "llm_batch_calls": "many"}]
)
def test_a_bad_behaviour_object_is_refused_saying_so(data: dict[str, Any]) -> None:
    """A behaviour without a label, or with a count that is no number, is a ValueError that
    says it is a bad behaviour object and why."""
    with pytest.raises(ValueError, match=r"^bad behaviour object \(.+\)$"):
        Behaviour.from_dict(data)
