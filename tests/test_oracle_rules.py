"""The rules by which the oracle worker decides what a prompt showed (rl/env/oracle.py): a
bug is reported only where its line sits in order among its neighbours, and a file that
shares only boilerplate with a prompt was not shown. One rule per test (docs/testing.md)."""

from __future__ import annotations

from typing import Any

import pytest

from deeprepo.rl.env.oracle import OracleWorker, make_oracle

ASK = "Audit this code for security bugs; answer in JSON."


def module(name: str, n: int = 60) -> str:
    return "\n".join(
        f"    value_{name}_{k} = handle_request(item_{k}, mode={k})" for k in range(1, n + 1)
    )


def bug(file: str, start: int = 30, end: int = 31) -> dict[str, Any]:
    return {
        "id": f"{file}:{start}", "file": file, "start_line": start, "end_line": end,
        "cwe": "CWE-89", "kind": "sql-injection", "severity": "high",
    }  # fmt: skip


def worker(codebase: dict[str, str], gt: list[dict[str, Any]]) -> OracleWorker:
    return OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase)


def show(text: str, numbers: list[int | str]) -> str:
    """A prompt holding the file lines ``numbers`` (1-based) in that order; a string stands
    for a line of instruction text in between."""
    lines = text.split("\n")
    body = [n if isinstance(n, str) else lines[n - 1] for n in numbers]
    return ASK + "\n" + "\n".join(body)


CODE = {"svc/a.py": module("a")}
GT = [bug("svc/a.py")]


def found(
    prompt: str, codebase: dict[str, str] = CODE, gt: list[dict[str, Any]] = GT
) -> list[tuple[str, int]]:
    return [(f["file"], f["line"]) for f in worker(codebase, gt).findings(prompt)]


def test_a_bug_shown_in_order_with_its_neighbours_is_reported() -> None:
    """The bug's lines with their neighbours in file order: reported."""
    assert found(show(CODE["svc/a.py"], list(range(26, 36)))) == [("svc/a.py", 30)]


@pytest.mark.parametrize(
    "order",
    [
        [26, 27, 28, 29, 31, 30, 32, 33, 34, 35],  # the bug's two lines swapped
        [26, 27, 28, 29, 32, 33, 34, 35, 30, 31],  # the bug's lines moved below the rest
        [30, 31, 26, 27, 28, 29, 32, 33, 34, 35],  # ... or above it
    ],
)
def test_a_bug_whose_lines_are_out_of_order_is_not_located(order: list[int]) -> None:
    """Reordered lines (even partly) are not the code as written: nothing is reported."""
    assert found(show(CODE["svc/a.py"], order)) == []


def test_neighbours_swapped_among_themselves_still_locate_the_bug() -> None:
    """Only the order around the bug's line matters: two neighbours swapped on one side of
    it, each still close by on its own side, leave it located."""
    assert found(show(CODE["svc/a.py"], [26, 27, 29, 28, 30, 31, 32, 33, 34, 35])) == [
        ("svc/a.py", 30)
    ]


@pytest.mark.parametrize(("gap", "reported"), [(3, True), (4, False)])
def test_up_to_three_lines_may_come_between_a_line_and_its_neighbours(
    gap: int, reported: bool
) -> None:
    """A few lines of commentary between the bug and its neighbour are fine; more cut the
    bug off from its context."""
    order: list[int | str] = [26, 27, 28, 29, *(["# note"] * gap), 30, 31, 32, 33, 34, 35]
    assert found(show(CODE["svc/a.py"], order)) == ([("svc/a.py", 30)] if reported else [])


@pytest.mark.parametrize(("shown", "reported"), [(5, True), (4, False)])
def test_a_file_is_shown_by_five_of_its_lines(shown: int, reported: bool) -> None:
    """A long file shares a line or two of boilerplate with many prompts: it counts as shown
    from five of its non-trivial lines on."""
    lines = list(range(28, 28 + shown)) if shown == 5 else [29, 30, 31, 32]
    assert found(show(CODE["svc/a.py"], lines)) == ([("svc/a.py", 30)] if reported else [])


@pytest.mark.parametrize(("shown", "reported"), [(3, True), (2, False)])
def test_a_short_file_is_shown_by_half_of_its_lines(shown: int, reported: bool) -> None:
    """A file of six non-trivial lines counts as shown from three of them."""
    code = {"svc/s.py": module("s", 6)}
    gt = [bug("svc/s.py", 3, 3)]
    lines = [2, 3, 4] if shown == 3 else [3, 4]
    assert found(show(code["svc/s.py"], lines), code, gt) == ([("svc/s.py", 3)] if reported else [])


def test_a_one_line_file_is_shown_by_its_line() -> None:
    """A file with one non-trivial line is shown when that line is."""
    code = {"svc/one.py": "x = 1\n    value_one = handle_request(item, mode=1)\n"}
    gt = [bug("svc/one.py", 2, 2)]
    assert found(show(code["svc/one.py"], [2]), code, gt) == [("svc/one.py", 2)]


@pytest.mark.parametrize(("copies", "reported"), [(8, 8), (9, 0)])
def test_a_line_found_in_more_than_eight_places_anchors_nothing(copies: int, reported: int) -> None:
    """Code repeated across many files is boilerplate: a line found in more than eight places
    shows no file."""
    text = module("same")
    code = {f"svc/m{i}.py": text for i in range(copies)}
    gt = [bug(path) for path in code]
    assert len(found(show(text, list(range(26, 36))), code, gt)) == reported


GT30 = [bug("svc/a.py", 30, 30)]


def test_only_two_neighbours_on_each_side_must_be_in_order() -> None:
    """The third line before or after the bug's may be anywhere: only the two nearest
    non-trivial lines on each side are its context."""
    before = [26, 28, 29, 30, 31, 32, 33, 34, 27]
    after = [33, 26, 27, 28, 29, 30, 31, 32, 34]
    assert found(show(CODE["svc/a.py"], before), gt=GT30) == [("svc/a.py", 30)]
    assert found(show(CODE["svc/a.py"], after), gt=GT30) == [("svc/a.py", 30)]


def test_the_first_line_of_a_file_is_a_neighbour_too() -> None:
    """A bug on line 2 needs line 1 before it when line 1 is shown."""
    gt = [bug("svc/a.py", 2, 2)]
    assert found(show(CODE["svc/a.py"], [1, 2, 3, 4, 5]), gt=gt) == [("svc/a.py", 2)]
    assert found(show(CODE["svc/a.py"], [2, 3, 4, 5, 1]), gt=gt) == []


def test_a_gap_after_the_bug_line_counts_like_one_before_it() -> None:
    """Up to three lines may come between the bug's line and the next one, as before it."""
    order: list[int | str] = [26, 27, 28, 29, 30, "# a", "# b", "# c", 31, 32, 33, 34]
    assert found(show(CODE["svc/a.py"], order), gt=GT30) == [("svc/a.py", 30)]


def test_a_bug_on_a_line_of_exactly_eight_characters_is_located() -> None:
    """Lines of eight characters are code worth anchoring on, like longer ones."""
    lines = CODE["svc/a.py"].split("\n")
    lines[29] = "run(q);x"  # 8 characters
    code = {"svc/a.py": "\n".join(lines)}
    assert found(show(code["svc/a.py"], list(range(26, 36))), code, GT30) == [("svc/a.py", 30)]


def test_a_neighbour_six_lines_away_is_still_context() -> None:
    """Non-trivial lines up to six lines away (blank or short lines between) are neighbours:
    out of order, they hide the bug."""
    lines = CODE["svc/a.py"].split("\n")
    for k in range(24, 29):  # lines 25-29 become trivial: line 24 is 6 above the bug
        lines[k] = "pass"
    code = {"svc/a.py": "\n".join(lines)}
    in_order = [23, 24, 30, 31, 32, 33]
    assert found(show(code["svc/a.py"], in_order), code, GT30) == [("svc/a.py", 30)]
    moved = [23, 30, 31, 32, 33, 24]
    assert found(show(code["svc/a.py"], moved), code, GT30) == []


def test_file_blocks_without_a_codebase_are_read_by_their_path_and_lines() -> None:
    """With no codebase, ``<file path=… lines=…>`` blocks say which file and lines a prompt
    shows (a leading ./ ignored); the text outside the blocks is the instruction, so code
    that says "check" does not make a translation request an audit."""
    gt = [bug("svc/a.py", 30, 30)]
    w = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, off_task_rate=0.0)
    body = "\n".join(f"    value_{k} = check_request(item_{k}, mode={k})" for k in range(26, 35))
    for path in ("svc/a.py", "./svc/a.py"):
        prompt = f'Audit this.\n<file path="{path}" lines="26-34">\n{body}\n</file>'
        assert [(f["file"], f["line"]) for f in w.findings(prompt)] == [("svc/a.py", 30)]
    translate = f'<file path="svc/a.py" lines="26-34">\n{body}\n</file>\nTranslate this to Go.'
    assert w.findings(translate) == []


SRC = {"svc/src.py": module("src"), "svc/a.py": module("a")}


def cross(related_line: int = 20) -> list[dict[str, Any]]:
    return [{**bug("svc/a.py", 30, 30), "related": [{"file": "svc/src.py", "line": related_line}]}]


@pytest.mark.parametrize(
    ("source_lines", "reported"),
    [
        (range(20, 26), True),  # the source line and what follows it
        (range(15, 21), True),  # ... or what precedes it
        (range(13, 19), False),  # two lines short of it
        (range(22, 28), False),  # two lines past it
    ],
)
def test_a_cross_file_bug_needs_its_source_line_or_a_line_next_to_it(
    source_lines: range, reported: bool
) -> None:
    """A bug whose data comes from another file is reported when the prompt also shows that
    file's source line (or the line just before or after it), in order."""
    prompt = (
        show(SRC["svc/a.py"], list(range(26, 36)))
        + "\n"
        + "\n".join(SRC["svc/src.py"].split("\n")[n - 1] for n in source_lines)
    )
    expected = [("svc/a.py", 30)] if reported else []
    assert found(prompt, SRC, cross()) == expected


def test_a_cross_file_bug_without_its_source_does_not_hide_the_next_bug() -> None:
    """Skipping a cross-file bug whose source is not shown leaves the file's other bugs."""
    gt = [*cross(), bug("svc/a.py", 33, 33)]
    assert found(show(SRC["svc/a.py"], list(range(26, 38))), SRC, gt) == [("svc/a.py", 33)]


def test_findings_use_the_tasks_own_vocabulary() -> None:
    """A finding names its class with the task's own kind and CWE, not the family's."""
    gt = [{**bug("svc/a.py"), "kind": "raw-sql", "cwe": "CWE-564"}]
    (f,) = worker(CODE, gt).findings(show(CODE["svc/a.py"], list(range(26, 36))))
    assert (f["kind"], f["cwe"]) == ("raw-sql", "CWE-564")


def test_off_task_prompts_get_few_false_findings_too() -> None:
    """An off-task request scales false findings down like true ones."""
    w = OracleWorker(GT, miss_rate=0.0, false_rate=100.0, codebase=CODE, off_task_rate=0.05)
    prompt = "Translate this to Go.\n" + CODE["svc/a.py"]
    assert len(w.findings(prompt)) <= 1


async def test_a_reply_is_a_finished_json_answer() -> None:
    """complete() answers with the findings JSON, finish reason "stop", no tokens billed."""
    from deeprepo.base.chat import ChatRequest, Message

    req = ChatRequest(messages=(Message("user", show(CODE["svc/a.py"], list(range(26, 36)))),))
    comp = await worker(CODE, GT).complete(req)
    assert comp.finish_reason == "stop" and comp.model == "oracle"
    assert '"line": 30' in comp.text


def test_make_oracle_takes_entries_or_a_file(tmp_path: Any) -> None:
    """make_oracle builds the worker from entries or from a ground_truth.json path."""
    path = tmp_path / "gt.json"
    path.write_text('[{"file": "svc/a.py", "start_line": 30, "end_line": 31, "cwe": "CWE-89"}]')
    prompt = show(CODE["svc/a.py"], list(range(26, 36)))
    for source in (GT, path, str(path)):
        w = make_oracle(source, miss_rate=0.0, false_rate=0.0, codebase=CODE)
        assert [(f["file"], f["line"]) for f in w.findings(prompt)] == [("svc/a.py", 30)]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"miss_rate": 1.5}, "miss_rate must be within [0, 1], got 1.5"),
        ({"miss_rate": -0.1}, "miss_rate must be within [0, 1], got -0.1"),
        ({"false_rate": -1.0}, "false_rate must be >= 0, got -1.0"),
        ({"context_lines": 0}, "context_lines must be >= 1, got 0"),
        ({"off_task_rate": 1.5}, "off_task_rate must be within [0, 1], got 1.5"),
    ],
)
def test_settings_out_of_range_are_refused_saying_which(kw: dict[str, Any], message: str) -> None:
    """A rate outside its range, or no context, is refused naming the setting."""
    with pytest.raises(ValueError) as e:
        OracleWorker(GT, **kw)
    assert str(e.value) == message


def test_settings_at_the_edge_of_their_range_are_accepted() -> None:
    """A worker that misses everything, is always off task, or reads one line is valid."""
    prompt = show(CODE["svc/a.py"], list(range(26, 36)))
    assert OracleWorker(GT, miss_rate=1.0, codebase=CODE, false_rate=0.0).findings(prompt) == []
    OracleWorker(GT, off_task_rate=1.0, context_lines=1)


def test_paths_with_a_leading_dot_slash_are_the_same_files() -> None:
    """'./svc/a.py' in the codebase or in a related line is svc/a.py."""
    code = {"./svc/a.py": SRC["svc/a.py"], "./svc/src.py": SRC["svc/src.py"]}
    gt = [{**bug("svc/a.py", 30, 30), "related": [{"file": "./svc/src.py", "line": 20}]}]
    prompt = (
        show(SRC["svc/a.py"], list(range(26, 36)))
        + "\n"
        + "\n".join(SRC["svc/src.py"].split("\n")[n - 1] for n in range(18, 24))
    )
    assert found(prompt, code, gt) == [("svc/a.py", 30)]
    alone = show(SRC["svc/a.py"], list(range(26, 36)))
    assert found(alone, code, gt) == []  # the source is still required


def test_ground_truth_given_as_an_entries_object_keeps_related_lines() -> None:
    """{"entries": [...]} is read like a list, related lines included."""
    alone = show(SRC["svc/a.py"], list(range(26, 36)))
    w = make_oracle({"entries": cross()}, miss_rate=0.0, false_rate=0.0, codebase=SRC)
    assert w.findings(alone) == []
