"""The rules by which the root's reply becomes code (orchestrator/parser.py), one per test.

Each test states a rule a user relies on: what the REPL runs is exactly the code the model
fenced as Python, whatever the case of its tag, the blank lines inside, or the reasoning
around it. Written to kill the mutants that survived the older tests (docs/testing.md).
"""

from __future__ import annotations

import pytest

from deeprepo.orchestrator.parser import extract_code_blocks, strip_think

F = "```"


@pytest.mark.parametrize("tag", ["Python", "PYTHON", "Py", "REPL", "IPython"])
def test_fence_tag_case_does_not_matter(tag: str) -> None:
    """A ```Python fence is code like a ```python one: models capitalise tags."""
    assert extract_code_blocks(f"{F}{tag}\nx = 1\n{F}") == ["x = 1"]


@pytest.mark.parametrize("tag", ["JSON", "Bash", "Text"])
def test_other_languages_are_prose_in_any_case(tag: str) -> None:
    """A ```JSON fence is prose whatever its case: it never reaches the REPL."""
    assert extract_code_blocks(f"{F}{tag}\nx = 1\n{F}") == []


def test_blank_line_inside_a_block_does_not_close_it() -> None:
    """Only a line of backticks closes a block: a blank line is part of the code."""
    reply = f"{F}python\na = 1\n\nb = 2\n{F}\nprose"
    assert extract_code_blocks(reply) == ["a = 1\n\nb = 2"]


@pytest.mark.parametrize("line", ["```C", "```X", "```python", "```R"])
def test_a_fence_line_with_a_tag_does_not_close_a_block(line: str) -> None:
    """Backticks followed by a tag open a nested block; they do not end the outer one."""
    reply = f"{F}python\ns = '''\n{line}\n'''\n{F}"
    assert extract_code_blocks(reply) == [f"s = '''\n{line}\n'''"]


def test_code_keeps_its_indentation_and_only_blank_lines_around_it_go() -> None:
    """The code runs as written: leading spaces and trailing spaces stay, blank lines go."""
    reply = f"{F}python\n\n    x = 1  \ny = 2 \n\n{F}"
    assert extract_code_blocks(reply) == ["    x = 1  \ny = 2 "]


def test_code_that_starts_or_ends_with_letters_is_kept_whole() -> None:
    """Nothing but newlines is trimmed from a block's ends (a name like X stays)."""
    assert extract_code_blocks(f"{F}python\nX = 1\nprint(X\n{F}") == ["X = 1\nprint(X"]


def test_think_block_is_removed_without_a_trace() -> None:
    """A closed <think> section vanishes: nothing stands in its place."""
    assert strip_think("a<think>plan</think>b") == "ab"
    assert strip_think("a<THINK>plan</Think>b") == "ab"


def test_lone_closing_think_hides_only_up_to_the_first_one() -> None:
    """Reasoning ends at the first </think>; a later literal </think> is answer text."""
    assert strip_think("reasoning</think>answer names </think> later") == (
        "answer names </think> later"
    )


def test_unclosed_think_after_a_lone_close_hides_the_rest() -> None:
    """After the template's reasoning ends, an unclosed <think> still hides what follows."""
    assert strip_think("reasoning</think>answer<think>more") == "answer"
    assert strip_think("reasoning</THINK>answer<Think>more") == "answer"


def test_unclosed_think_hides_everything_from_the_first_one() -> None:
    """An unclosed <think> hides the rest of the reply from the first such tag on."""
    assert strip_think("a<think>b<think>c") == "a"


def test_code_inside_unclosed_think_is_not_run() -> None:
    """A block the model wrote while still thinking (cut off) is never run."""
    reply = f"{F}python\nok()\n{F}\n<think>\n{F}python\nnot_yet()\n{F}"
    assert extract_code_blocks(reply) == ["ok()"]


def test_a_think_pair_left_by_removing_an_inner_one_still_hides_its_text() -> None:
    """Pairs are removed once; a <think> left before a </think> opens reasoning, not prose."""
    assert strip_think("<thi<think>x</think>nk>y</think>z") == ""
