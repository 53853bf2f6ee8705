"""Coverage weighed by how closely a worker reads (decision 102): a file's content counts as
far as the prompts that carried it could be read, on the curve the oracle answers by
(``dispatch.attention``), so one prompt holding a whole repository is not a full audit."""

from __future__ import annotations

import json

import pytest
from test_reward_rules import module, result

from deeprepo.base.finding import Finding
from deeprepo.findings.coverage import coverage_credit
from deeprepo.rl.env.dispatch import (
    DEFAULT_CONTEXT_LINES,
    attention,
    dispatch_stats,
    prompt_size,
)
from deeprepo.rl.env.oracle import OracleWorker
from deeprepo.rl.env.reward import RewardWeights, compute_reward

ASK = "Audit this code for security bugs.\n\n"
# Ten files of 160 lines: 1,600 in all, twice the default context.
FILES = {f"svc/m{k}.py": module(f"m{k}", 160) for k in range(10)}
ONE_PROMPT = ASK + "\n\n".join(FILES.values())
PER_FILE = [ASK + text for text in FILES.values()]


def credits(prompts: list[str], context_lines: float = DEFAULT_CONTEXT_LINES) -> dict[str, float]:
    stats = dispatch_stats(FILES, prompts, context_lines=context_lines)
    return {p: stats.credit(p, coverage_credit) for p in FILES}


def test_attention_is_one_within_the_context_then_falls_as_its_square() -> None:
    assert attention(1) == attention(800) == 1.0
    assert attention(1600) == pytest.approx(0.25)
    assert attention(1000, context_lines=500) == pytest.approx(0.25)
    assert attention(0) == 1.0  # an empty prompt is not "long"


def test_the_oracle_answers_by_the_same_curve() -> None:
    for context in (100, 800):
        worker = OracleWorker([], context_lines=context)
        for size in (1, 99, 100, 101, 350, 800, 1600, 4000):
            assert worker.attention(size) == attention(size, context)


def test_prompt_size_counts_non_empty_lines_of_the_view_with_most() -> None:
    text = FILES["svc/m0.py"]
    assert prompt_size(ASK + text) == 161  # the request and 160 code lines; blanks skipped
    wrapped = json.dumps({"path": "svc/m0.py", "content": text})
    assert wrapped.count("\n") == 0
    assert prompt_size(wrapped) >= 160  # a file in a JSON string is its lines, not one


def test_per_file_prompts_within_the_context_earn_full_credit() -> None:
    assert credits(PER_FILE) == dict.fromkeys(FILES, 1.0)


def test_one_prompt_of_twice_the_context_earns_a_quarter() -> None:
    size = prompt_size(ONE_PROMPT)
    assert size == 1601
    got = credits([ONE_PROMPT])
    assert got == pytest.approx(dict.fromkeys(FILES, attention(size)), abs=0.025)


def test_a_file_also_sent_alone_earns_full_credit() -> None:
    got = credits([ONE_PROMPT, PER_FILE[3]])
    assert got["svc/m3.py"] == 1.0
    assert got["svc/m4.py"] == pytest.approx(0.25)


def test_a_file_split_between_a_read_and_a_skimmed_prompt_earns_the_skimmed_weight() -> None:
    """Half of a file in a prompt read in full and the whole of it only in a long one: only
    the long prompt shows all of it, so the file earns that prompt's attention."""
    head = "\n".join(FILES["svc/m5.py"].split("\n")[:80])
    got = credits([ONE_PROMPT, ASK + head])
    assert got["svc/m5.py"] == pytest.approx(got["svc/m6.py"])
    assert got["svc/m5.py"] == pytest.approx(0.25)


def test_without_a_context_every_prompt_is_read_in_full() -> None:
    stats = dispatch_stats(FILES, [ONE_PROMPT])
    assert stats.layers is None
    assert all(stats.credit(p, coverage_credit) == 1.0 for p in FILES)


def test_a_larger_context_reads_the_long_prompt_in_full() -> None:
    assert credits([ONE_PROMPT], context_lines=2000) == dict.fromkeys(FILES, 1.0)


GT = [{"id": "a", "file": "svc/m2.py", "start_line": 40, "end_line": 40, "cwe": "CWE-89"}]
HIT = [Finding("svc/m2.py", 40, 40, "sql-injection", "CWE-89", "high", "t")]


def test_the_reward_charges_a_skimmed_repository_as_unread() -> None:
    """The same true finding, from per-file prompts or from two prompts holding the whole
    repository (half of it each, just past the context; then each the whole of it): the long prompts' coverage is
    their attention, and ending short of coverage costs as early finalising does."""
    halves = [
        ASK + "\n\n".join(list(FILES.values())[:5]),
        ASK + "\n\n".join(list(FILES.values())[5:]),
    ]
    honest = compute_reward(result(HIT, PER_FILE, []), GT, FILES)
    split = compute_reward(result(HIT, halves, []), GT, FILES)
    giant = compute_reward(result(HIT, [ONE_PROMPT, ONE_PROMPT + "\nAgain."], []), GT, FILES)
    assert prompt_size(halves[0]) == 801  # one line past the context: attention 0.9975
    assert honest.parts["coverage_reward"] == split.parts["coverage_reward"] == 1.0
    assert split.total == honest.total
    assert giant.parts["coverage_reward"] == pytest.approx(0.25)
    assert giant.parts["early_finalize_penalty"] == pytest.approx(0.75)
    assert giant.total < 0.5 * honest.total


def test_the_weight_is_a_reward_knob() -> None:
    giant = result(HIT, [ONE_PROMPT, ONE_PROMPT + "\nAgain."], [])
    wide = RewardWeights(context_lines=4000)
    assert compute_reward(giant, GT, FILES, wide).parts["coverage_reward"] == 1.0
    assert RewardWeights.from_dict({"context_lines": 400}).context_lines == 400.0


def test_the_oracle_tires_by_the_size_the_reward_weighs() -> None:
    """One size for both: a list of lines in JSON, one a line, past the context, is read
    at the same attention by the oracle and by the coverage it earns."""
    lines = [ln for text in FILES.values() for ln in text.split("\n")]
    prompt = ASK + json.dumps(lines, indent=2)
    size = prompt_size(prompt)
    assert size > DEFAULT_CONTEXT_LINES
    gt = [{"file": p, "start_line": 80, "cwe": "CWE-89", "kind": "sql-injection"} for p in FILES]
    found = 0
    for seed in range(20):
        w = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=FILES, seed=seed)
        found += len(w.findings(prompt))
    assert found / (20 * len(FILES)) == pytest.approx(attention(size), abs=0.1)
    assert credits([prompt])["svc/m0.py"] == pytest.approx(attention(size), abs=0.025)


def test_a_prompt_too_long_to_read_at_all_earns_nothing() -> None:
    """Past about 6.3 times the context attention rounds to 0: such a prompt is no layer,
    and a run that sent only such prompts covers nothing (not everything)."""
    huge = ASK + "\n\n".join(FILES.values()) * 4  # 6,400 lines: attention 0.016
    assert attention(prompt_size(huge)) < 0.025
    stats = dispatch_stats(FILES, [huge], context_lines=DEFAULT_CONTEXT_LINES)
    assert stats.layers == ()
    assert credits([huge]) == dict.fromkeys(FILES, 0.0)
    assert credits([huge, PER_FILE[0]])["svc/m0.py"] == 1.0
