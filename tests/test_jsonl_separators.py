"""JSON-lines files are written with ``ensure_ascii=False``, so a model's U+2028, U+2029,
U+0085 or \\x1c stays raw inside a string: readers must split on "\\n" only, or the record
is torn and silently dropped (a turn lost to ``--resume``, a call lost to the viewer)."""

from __future__ import annotations

import json
from pathlib import Path

from deeprepo.report.calls import read_calls
from deeprepo.report.trajectory import TrajectoryWriter, read_trajectory

SEPARATORS = "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0bh\x0ci"


def test_trajectory_records_with_unicode_line_separators_read_back_whole(tmp_path: Path) -> None:
    with TrajectoryWriter(tmp_path / "trajectory.jsonl") as log:
        log.record("start", note=SEPARATORS)
        log.record("end", note="x")
    records = read_trajectory(tmp_path / "trajectory.jsonl")
    assert [(r["type"], r["note"]) for r in records] == [("start", SEPARATORS), ("end", "x")]


def test_call_records_with_unicode_line_separators_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text(
        "".join(json.dumps({"seq": n, "response": SEPARATORS}, ensure_ascii=False) + "\n"
                for n in (1, 2)),
        encoding="utf-8",
    )  # fmt: skip
    assert [(r["seq"], r["response"]) for r in read_calls(path)] == [
        (1, SEPARATORS),
        (2, SEPARATORS),
    ]


def test_training_readers_keep_records_whole(tmp_path: Path) -> None:
    from deeprepo.rl.plots.training import read_train_log
    from deeprepo.rl.train.sft import read_examples

    examples = tmp_path / "sft.jsonl"
    messages = [
        {"role": "user", "content": "a\u2028b\x1cc"},
        {"role": "assistant", "content": "d\u0085e"},
    ]
    examples.write_text(json.dumps({"messages": messages}, ensure_ascii=False) + "\n", "utf-8")
    assert [e["messages"] for e in read_examples(examples)] == [messages]
    log = tmp_path / "train_log.jsonl"
    log.write_text(
        json.dumps({"step": 1, "note": "x\u2028y", "reward_mean": 0.5}, ensure_ascii=False) + "\n"
    )
    assert [r["note"] for r in read_train_log(log)] == ["x\u2028y"]


def test_one_splitter_numbers_lines_as_an_editor_does() -> None:
    from deeprepo.base.jsonl import numbered_lines, read_objects

    text = '{"a": "x\u2028y"}\n\n  \n[1]\n{"b": 2}\n{"torn'
    assert numbered_lines(text) == [(1, '{"a": "x\u2028y"}'), (4, "[1]"), (5, '{"b": 2}'),
                                    (6, '{"torn')]  # fmt: skip
    assert read_objects(text) == ([{"a": "x\u2028y"}, {"b": 2}], 2)


def test_results_and_viewer_readers_keep_records_whole(tmp_path: Path) -> None:
    import pytest

    from deeprepo.base.errors import UsageError
    from deeprepo.report.viewer.runview import load_run_view
    from deeprepo.rl.evals.results import RolloutResult, load_results, write_results

    results = tmp_path / "results.jsonl"
    write_results(results, [RolloutResult("ex", model=SEPARATORS), RolloutResult("ex", 1)])
    assert [r.model for r in load_results(results)] == [SEPARATORS, ""]
    results.write_text(results.read_text("utf-8") + "\nnot json\n", "utf-8")
    with pytest.raises(UsageError, match="line 4"):  # the file's own numbering, blanks counted
        load_results(results)

    with TrajectoryWriter(tmp_path / "trajectory.jsonl") as log:
        log.record("start", note=SEPARATORS)
    (tmp_path / "calls.jsonl").write_text(
        json.dumps({"seq": 1, "response": SEPARATORS}, ensure_ascii=False) + "\n{torn",
        encoding="utf-8",
    )
    view = load_run_view(tmp_path)
    assert view.start is not None and view.start["note"] == SEPARATORS
    assert [c.response for c in view.calls or []] == [SEPARATORS]
    assert any("calls.jsonl: 1 line(s) unreadable" in p for p in view.problems)
