"""The rules by which the oracle worker reads a prompt (rl/env/oracle_read.py): which lines
are code and which the instruction, how a file embedded as one escaped string is unpacked,
how a file block's lines are numbered and placed, and how big a prompt is. One rule per test
(docs/testing.md); tests/test_oracle_rules.py holds the rules of order and neighbours."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deeprepo.rl.env.oracle import OracleWorker

ASK = "Audit this code for security bugs; answer in JSON."


def module(name: str, n: int = 60) -> str:
    return "\n".join(
        f"    value_{name}_{k} = handle_request(item_{k}, mode={k})" for k in range(1, n + 1)
    )


def bug(file: str, line: int) -> dict[str, Any]:
    return {"id": f"{file}:{line}", "file": file, "start_line": line, "end_line": line,
            "cwe": "CWE-89", "kind": "sql-injection"}  # fmt: skip


def found(
    prompt: str, codebase: dict[str, str] | None, gt: list[dict[str, Any]], **kw: Any
) -> list[tuple[str, int]]:
    w = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=codebase, **kw)
    return [(f["file"], f["line"]) for f in w.findings(prompt)]


def block(path: str, first: int, lines: list[str]) -> str:
    body = "\n".join(lines)
    return f'<file path="{path}" lines="{first}-{first + len(lines) - 1}">\n{body}\n</file>'


# ------------------------------------------------------------------ code or instruction


def test_the_repositorys_short_lines_are_code_not_instruction() -> None:
    """A line of the repository's code too short to locate a file ('check()') is still code:
    it does not turn a translation request into an audit."""
    lines = module("a", 40).split("\n")
    lines[9] = "check()"
    code = {"svc/a.py": "\n".join(lines)}
    prompt = "Translate this to Go.\n" + code["svc/a.py"]
    assert found(prompt, code, [bug("svc/a.py", 20)], off_task_rate=0.0) == []
    assert found(ASK + "\n" + code["svc/a.py"], code, [bug("svc/a.py", 20)]) == [("svc/a.py", 20)]


def test_an_instruction_over_several_lines_is_read_line_by_line() -> None:
    """Instruction lines are read as separate lines: an audit word that ends one still asks
    for an audit."""
    code = {"svc/a.py": module("a", 40)}
    prompt = "Look at this code for bugs\n" + code["svc/a.py"] + "\nthen list them"
    assert found(prompt, code, [bug("svc/a.py", 20)], off_task_rate=0.0) == [("svc/a.py", 20)]


def test_text_right_against_a_file_block_keeps_its_words() -> None:
    """Without a codebase the instruction is the prompt with its file blocks cut out, nothing
    put in their place: a request written against a block still asks for an audit."""
    lines = [f"    value_{k} = check_request(item_{k}, mode={k})" for k in range(26, 35)]
    prompt = "Find bugs" + block("svc/a.py", 26, lines)
    assert found(prompt, None, [bug("svc/a.py", 30)], off_task_rate=0.0) == [("svc/a.py", 30)]


# ------------------------------------------------------------------ escaped files


def test_a_file_embedded_as_one_escaped_string_is_read_from_three_newlines() -> None:
    """A file quoted as one JSON string is unpacked once the prompt holds more escaped
    newlines than lines, from three escaped newlines (a four-line file) on."""
    code = {"svc/e.py": module("e", 4)}
    prompt = "Audit this for bugs: " + json.dumps({"svc/e.py": code["svc/e.py"]})
    assert found(prompt, code, [bug("svc/e.py", 2)]) == [("svc/e.py", 2)]


def test_code_with_escapes_in_its_strings_is_read_as_written() -> None:
    """A prompt whose code holds '\\n' escapes in its strings, no more of them than it has
    lines, is code as written, not an escaped file to unpack."""
    lines = [f'    out_{k}.write("row {k}\\n")' for k in range(1, 7)]
    lines[2] = '    out_3.write("row 3\\n\\n")'  # seven escapes in seven prompt lines
    code = {"svc/w.py": "\n".join(lines)}
    prompt = ASK + "\n" + code["svc/w.py"]
    assert prompt.count("\\n") == len(prompt.split("\n")) == 7
    assert found(prompt, code, [bug("svc/w.py", 3)]) == [("svc/w.py", 3)]


# ------------------------------------------------------------------ lines and neighbours


@pytest.mark.parametrize("with_codebase", [True, False])
def test_a_neighbour_of_exactly_eight_characters_is_context(with_codebase: bool) -> None:
    """A neighbour line of eight characters is code worth keeping in order: shown after the
    bug's line instead of before it, the bug is not located (with a codebase or blocks)."""
    lines = module("a").split("\n")
    lines[28] = "run(q);y"  # line 29, 8 characters, just before the bug
    code = {"svc/a.py": "\n".join(lines)}
    gt = [bug("svc/a.py", 30)]
    if with_codebase:
        prompt = ASK + "\n" + "\n".join(lines[n - 1] for n in [26, 27, 28, 30, 31, 32, 33, 29])
        assert found(prompt, code, gt) == []
    else:
        prompt = ASK + "\n" + block("svc/a.py", 30, lines[29:34]) + "\n"
        prompt += block("svc/a.py", 29, lines[28:29])
        assert found(prompt, None, gt) == []
        assert found(ASK + "\n" + block("svc/a.py", 26, lines[25:34]), None, gt) == [
            ("svc/a.py", 30)
        ]


def test_a_line_repeated_on_the_next_line_shown_once_shows_neither_copy() -> None:
    """Two identical lines in a row shown once are not the code as written: a bug on either
    copy is not located; shown twice, in order, it is."""
    lines = module("a").split("\n")
    lines[29] = lines[28]  # lines 29 and 30 read the same
    code = {"svc/a.py": "\n".join(lines)}
    once = ASK + "\n" + "\n".join(lines[n - 1] for n in [26, 27, 28, 29, 31, 32, 33])
    twice = ASK + "\n" + "\n".join(lines[n - 1] for n in range(26, 34))
    for line in (29, 30):
        assert found(once, code, [bug("svc/a.py", line)]) == []
        assert found(twice, code, [bug("svc/a.py", line)]) == [("svc/a.py", line)]


def test_a_code_line_that_starts_with_a_number_is_cited_at_its_own_line() -> None:
    """A line whose code begins with a number ('8010: route…') is matched as written, so the
    finding cites the file's line, not that number."""
    code = {"conf/ports.yaml": "\n".join(f"{8000 + k}: route_to_service_{k}" for k in range(1, 21))}
    prompt = ASK + "\n" + code["conf/ports.yaml"]
    assert found(prompt, code, [bug("conf/ports.yaml", 10)]) == [("conf/ports.yaml", 10)]


def test_a_short_file_is_shown_by_half_its_lines_rounded_down() -> None:
    """A file of seven non-trivial lines counts as shown from three of them."""
    code = {"svc/s.py": module("s", 7)}
    lines = code["svc/s.py"].split("\n")
    prompt = ASK + "\n" + "\n".join(lines[1:4])
    assert found(prompt, code, [bug("svc/s.py", 3)]) == [("svc/s.py", 3)]


def test_a_file_blocks_blank_lines_keep_their_place() -> None:
    """In a file block, blank lines between a bug and its nearest code are still lines of the
    block: a neighbour six lines up, across blank lines, is in order and close by."""
    lines = module("a").split("\n")
    for k in range(24, 29):
        lines[k] = ""  # lines 25-29 blank: line 24 is six lines above the bug
    prompt = ASK + "\n" + block("svc/a.py", 20, lines[19:34])
    assert found(prompt, None, [bug("svc/a.py", 30)]) == [("svc/a.py", 30)]


# ------------------------------------------------------------------ a prompt's size


@pytest.mark.parametrize(("context_lines", "share"), [(13, (20, 20)), (6, (1, 10))])
def test_a_block_prompts_size_is_its_non_empty_lines(
    context_lines: int, share: tuple[int, int]
) -> None:
    """Without a codebase too, a prompt's size is its non-empty lines: a prompt of 13 (an
    instruction, a block of ten lines, its two tags) is read in full by a context of 13,
    and past a context of 6 a bug is reported about (6/13)^2 of the time (one in five)."""
    lines = module("a").split("\n")
    prompt = ASK + "\n\n" + block("svc/a.py", 21, lines[20:30]) + "\n"
    assert sum(1 for ln in prompt.split("\n") if ln.strip()) == 13
    reported = 0
    for seed in range(20):
        w = OracleWorker(
            [bug("svc/a.py", 25)], miss_rate=0.0, false_rate=0.0, seed=seed,
            context_lines=context_lines,
        )  # fmt: skip
        reported += len(w.findings(prompt))
    assert share[0] <= reported <= share[1], reported


def test_a_file_blocks_lines_are_numbered_from_its_start_one_per_line() -> None:
    """Each line of a file block is one line of the file, numbered from the block's start,
    however many words it holds."""
    lines = [f"    result_{k} = run_query(sql_{k})" for k in range(11, 21)]
    prompt = ASK + "\n" + block("svc/q.py", 11, lines)
    assert found(prompt, None, [bug("svc/q.py", 12)]) == [("svc/q.py", 12)]


def test_readers_of_equal_codebases_share_one_index_and_read_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every rollout builds its own oracle over the same task: the readers share the index
    and its memo of resolved lines, and a memo that starts over reads the same."""
    from deeprepo.rl.env import oracle_read

    files = {"a.py": module("a"), "b.py": module("b")}
    prompt = (
        "Audit this file.\n"
        + "\n".join(f"{i:4d} | {ln}" for i, ln in enumerate(files["a.py"].split("\n"), 1))
        + "\n"
        + files["b.py"][:400]
    )
    first = oracle_read.PromptReader(dict(files))
    second = oracle_read.PromptReader(dict(files))
    want = first.read(prompt)
    assert first._index is not None and second._index is None
    got = second.read(prompt)
    assert second._index is first._index
    monkeypatch.setattr(oracle_read, "_MEMO_LINES", 3)  # the memo starts over every 3 lines
    first._index.reads.clear()  # so the prompt is read line by line again, not remembered
    third = oracle_read.PromptReader({"./" + k: v for k, v in files.items()})
    again = third.read(prompt)

    def plain(read: Any) -> Any:
        shown, instruction, size = read
        views = {p: (v.at, v.number, v.text, v.nontrivial) for p, v in shown.items()}
        return views, instruction, size

    assert plain(got) == plain(want) == plain(again)
    assert sorted(want[0]) == ["a.py", "b.py"] and want[1].startswith("Audit this file.\n")


def test_a_remembered_reading_is_the_reading_worked_out() -> None:
    """Readers of one codebase remember whole readings; each equals a fresh one, and a
    caller that changes the returned mapping changes no later reading."""
    from deeprepo.base.prompts import file_audit_prompt
    from deeprepo.rl.env import oracle_read

    files = {
        "app/views.py": "\n".join(f"    value_{i} = compute(item_{i}, {i})" for i in range(40))
    }
    prompts = [
        file_audit_prompt("app/views.py", files["app/views.py"]),
        "Summarise this:\n" + "\n".join(files["app/views.py"].split("\n")[5:25]),
        "Reply OK.",
    ]
    reader = oracle_read.PromptReader(files)
    for prompt in prompts:
        first = reader.read(prompt)
        again = oracle_read.PromptReader(files).read(prompt)  # the shared index remembers it
        plain = oracle_read.PromptReader(files)
        plain._index = oracle_read._Index(files)  # its own index: nothing remembered
        fresh = plain._read(prompt)
        for got in (first, again):
            assert got[1:] == fresh[1:]
            assert {p: (v.at, v.number, v.text) for p, v in got[0].items()} == {
                p: (v.at, v.number, v.text) for p, v in fresh[0].items()
            }
        first[0].clear()
        assert reader.read(prompt)[0].keys() == fresh[0].keys()
    assert reader.read(prompts[0])[0]  # the file is found


def test_remembered_readings_start_over_past_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from deeprepo.rl.env import oracle_read

    monkeypatch.setattr(oracle_read, "_READ_LINES", 50)
    files = {"a.py": module("bound", 40)}  # a codebase no other test reads: its own index
    reader = oracle_read.PromptReader(files)
    first, second = ASK + "\n" + files["a.py"], "Summarise.\n" + files["a.py"]
    reader.read(first)
    index = reader._index
    assert index is not None and list(index.reads) == [first] and index.read_lines == 41
    reader.read(second)  # 41 + 41 lines: the first reading goes
    assert list(index.reads) == [second] and index.read_lines == 41
