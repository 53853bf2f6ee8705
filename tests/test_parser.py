from deeprepo.orchestrator.parser import extract_code_blocks, strip_think

F = "```"


def test_python_repl_and_bare_fences_in_order() -> None:
    reply = f"Plan.\n{F}python\nx = 1\n{F}\nthen\n{F}repl\ny = 2\n{F}\n{F}\nz = 3\n{F}\n"
    assert extract_code_blocks(reply) == ["x = 1", "y = 2", "z = 3"]


def test_other_languages_are_prose() -> None:
    reply = f'{F}json\n{{"a": 1}}\n{F}\n{F}bash\nrm -rf /\n{F}\n{F}py\nok = True\n{F}'
    assert extract_code_blocks(reply) == ["ok = True"]


def test_think_sections_are_ignored() -> None:
    reply = f"<think>\n{F}python\nbad()\n{F}\n</think>\n{F}python\ngood()\n{F}"
    assert extract_code_blocks(reply) == ["good()"]


def test_lone_closing_think_hides_preceding_text() -> None:
    assert strip_think("reasoning here </think>answer") == "answer"
    assert strip_think("answer <think> unfinished") == "answer "


def test_unclosed_last_fence_runs_to_end() -> None:
    assert extract_code_blocks(f"{F}python\na = 1\nb = 2") == ["a = 1\nb = 2"]


def test_no_code_and_empty_blocks() -> None:
    assert extract_code_blocks("just prose, REPL output: 42") == []
    assert extract_code_blocks(f"{F}python\n\n{F}") == []


def test_longer_fence_can_hold_triple_backticks() -> None:
    reply = "````python\ns = '```'\n````"
    assert extract_code_blocks(reply) == ["s = '```'"]


def test_set_answer_in_prose_is_not_code() -> None:
    assert extract_code_blocks("I will now call set_answer('done').") == []
