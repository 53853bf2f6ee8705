"""The rules of the RL reward (rl/env/reward.py, dispatch.py, grounding.py), one per test,
through their public functions (``compute_reward``, ``worker_reports``, ``DispatchStats``):
written to kill the mutants that survived the older tests (docs/testing.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from deeprepo.base.errors import ConfigError
from deeprepo.base.finding import Finding
from deeprepo.base.prompts import file_audit_prompt
from deeprepo.base.records import RunResult, Turn
from deeprepo.findings.grading import DEFAULT_TOLERANCE, parse_ground_truth
from deeprepo.rl.env.dispatch import DispatchStats, dispatch_stats, source_files
from deeprepo.rl.env.grounding import grounded, reply_items, worker_reports
from deeprepo.rl.env.reward import RewardWeights, compute_reward


def module(name: str, n: int = 40) -> str:
    return "\n".join(f"value_{name}_{i} = compute_{name}(arg_{i}, {i})" for i in range(n)) + "\n"


FILES = {"app/a.py": module("a"), "app/b.py": module("b")}
GT: list[dict[str, Any]] = [
    {"id": "a", "file": "app/a.py", "start_line": 20, "end_line": 22, "cwe": "CWE-89"},
    {"id": "b", "file": "app/b.py", "start_line": 20, "end_line": 22, "cwe": "CWE-89"},
]
TRUE = [
    Finding("app/a.py", 20, 20, "sql-injection", "CWE-89", "high", "t"),
    Finding("app/b.py", 20, 20, "sql-injection", "CWE-89", "high", "t"),
]


def turn(index: int, **tokens: int) -> Turn:
    counts = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0}
    counts |= {"cache_write_tokens": 0, **tokens}
    return Turn(
        index=index, reply="", code_blocks=[], output="", error=None, sub_calls=0,
        findings_added=0, answer_ready=False, cost_usd=0.0, seconds=0.0, **counts,
    )  # fmt: skip


def result(findings: list[Finding], prompts: list[str], turns: list[Turn]) -> RunResult:
    return RunResult(
        answer="r", incomplete=False, stop_reason="answer_ready", stop_detail="",
        findings=findings, turns=turns, sub_calls=len(prompts), files_covered=[],
        coverable_files=0, usage=[], total_cost_usd=0.0, wall_seconds=1.0, root_model="t",
        sub_model="o", sandbox_mode="process", sent_prompts=prompts,
        batch_sizes=[len(prompts)] if prompts else [],
    )  # fmt: skip


AUDIT = [file_audit_prompt(p, t) for p, t in FILES.items()]


def grounded_ids(
    replies: list[tuple[str, str]], findings: list[Finding] = TRUE, tolerance: int = 3
) -> set[str]:
    """The files (``a``, ``b``) whose submitted finding a worker reported."""
    reports = worker_reports(replies, FILES, tolerance)
    return {f.file[4] for f in findings if grounded(f, reports, tolerance)}


def test_cache_read_and_write_tokens_are_root_tokens() -> None:
    """The root's token budget counts every token it was sent or wrote, cached ones too."""
    cached = [turn(1, input_tokens=10, output_tokens=20, cache_read_tokens=300_000,
                   cache_write_tokens=4_000)]  # fmt: skip
    plain = [turn(1, input_tokens=10, output_tokens=20)]
    heavy = compute_reward(result(TRUE, AUDIT, cached), GT, FILES)
    light = compute_reward(result(TRUE, AUDIT, plain), GT, FILES)
    assert heavy.details["root_tokens"] == 304_030
    assert light.details["root_tokens"] == 30
    assert heavy.parts["efficiency_reward"] < light.parts["efficiency_reward"]
    writes = [turn(1, cache_write_tokens=300_000)]
    assert compute_reward(result(TRUE, AUDIT, writes), GT, FILES).details["root_tokens"] == 300_000


def test_the_total_never_goes_below_zero() -> None:
    """Penalties larger than what was earned give 0, not a negative reward."""
    r = compute_reward(result([], [], [turn(1)]), GT, FILES)
    assert r.parts["zero_delegation_penalty"] == 1.0 and r.total == 0.0


def test_the_total_never_goes_above_one() -> None:
    """Weights that sum past 1 cannot push a perfect run's reward past 1."""
    heavy = RewardWeights(quality=1.0, coverage=1.0)
    r = compute_reward(result(TRUE, AUDIT, [turn(1, input_tokens=10)]), GT, FILES, heavy)
    assert r.details["gate"] == 1.0 and r.total == 1.0


@pytest.mark.parametrize(
    ("line", "reported"),
    [(16, False), (17, True), (20, True), (23, True), (24, False)],
)
def test_a_worker_line_within_tolerance_of_the_submitted_one_grounds_it(
    line: int, reported: bool
) -> None:
    """A worker's reply grounds a submitted finding when it names a line within tolerance
    (3 here) of the submitted line, in its file, about code its prompt carried."""
    replies = [(AUDIT[0], f'{{"file": "app/a.py", "line": {line}}}')]
    assert grounded_ids(replies) == ({"a"} if reported else set())


def test_a_reply_grounds_only_code_its_prompt_carried() -> None:
    """A reply naming a file its prompt did not show, or a line far from the code it
    showed, grounds nothing: the worker cannot have seen it."""
    assert grounded_ids([("Audit app/a.py", '{"file": "app/a.py", "line": 20}')]) == set()
    assert grounded_ids([(AUDIT[1], '{"file": "app/a.py", "line": 20}')]) == set()
    head_only = file_audit_prompt("app/a.py", "\n".join(FILES["app/a.py"].split("\n")[:8]))
    assert grounded_ids([(head_only, '{"file": "app/a.py", "line": 20}')]) == set()
    assert grounded_ids([(AUDIT[0], '{"file": "app/a.py", "line": 20}')]) == {"a"}


def test_a_reply_grounds_only_the_class_it_reported() -> None:
    """The worker's class must be the submitted finding's (same CWE family); a reply that
    names no class grounds on file and line alone."""
    xss = '{"file": "app/a.py", "line": 20, "cwe": "CWE-79", "kind": "xss"}'
    sqli = '{"file": "app/a.py", "line": 20, "kind": "sql-injection"}'
    assert grounded_ids([(AUDIT[0], xss)]) == set()
    assert grounded_ids([(AUDIT[0], sqli)]) == {"a"}


def test_a_line_cited_in_the_prompts_own_numbering_is_mapped_back() -> None:
    """A slice renumbered from 1 is cited in its own numbering: line 5 of a slice that
    starts at file line 16 is file line 20."""
    body = "\n".join(FILES["app/a.py"].split("\n")[15:30])
    renumbered = file_audit_prompt("app/a.py", body)  # numbered 1..15
    assert grounded_ids([(renumbered, '{"file": "app/a.py", "line": 5}')]) == {"a"}
    assert grounded_ids([(renumbered, '{"file": "app/a.py", "line": 15}')]) == set()


def test_an_unnamed_line_grounds_only_bugs_in_files_the_prompt_showed() -> None:
    """A reply that names no file grounds the findings in the files whose content its
    prompt carried, never those of a file it did not show."""
    only_a = [(AUDIT[0], "Line 21: user input reaches the query")]
    assert grounded_ids(only_a) == {"a"}
    both = [(AUDIT[0] + "\n" + AUDIT[1], '[{"line": 21}]')]
    assert grounded_ids(both) == {"a", "b"}
    nothing = [("Audit the payment flow, no code here", "line 21")]
    assert grounded_ids(nothing) == set()


def test_grounding_scales_the_gate_by_who_was_shown_the_code() -> None:
    """With worker replies recorded, the gate is quality x (share of the true positives a
    worker reported + floor x share the root's own outputs showed it): a true positive on
    code neither a worker's reply nor the root's output carried is a blind guess, worth 0."""
    blind = result(TRUE, AUDIT, [turn(1, input_tokens=10)])  # its outputs show no code
    half = [(AUDIT[0], '{"line": 21}')]
    r = compute_reward(blind, GT, FILES, replies=half)
    assert r.parts["grounding_reward"] == 0.5 and r.details["gate"] == 0.5
    assert r.details["root_read_tp"] == 0.0
    assert compute_reward(blind, GT, FILES, replies=[]).details["gate"] == 0.0
    # The root printed b.py itself: its true positive there counts at the floor.
    printed = replace(turn(1, input_tokens=10), output="b.py:\n" + FILES["app/b.py"])
    read = result(TRUE, AUDIT, [printed])
    r = compute_reward(read, GT, FILES, replies=half)
    assert r.details["root_read_tp"] == 1.0 and r.details["gate"] == 0.75
    assert compute_reward(read, GT, FILES, replies=[]).details["gate"] == 0.25
    # Printing a few lines far from the finding is not reading it.
    far = "\n".join(FILES["app/b.py"].split("\n")[:6])
    elsewhere = result(TRUE, AUDIT, [replace(printed, output=far)])
    assert compute_reward(elsewhere, GT, FILES, replies=half).details["gate"] == 0.5
    # Without recorded replies grounding is not measured: the gate is quality.
    assert compute_reward(blind, GT, FILES).details["gate"] == 1.0


@pytest.mark.parametrize(
    ("repeated", "duplicates", "redundancy"),
    [(5, 1, 0.5), (1, 3, 0.75), (0, 0, 0.0), (10, 4, 1.0)],
)
def test_redundancy_is_the_larger_of_the_line_and_prompt_shares(
    repeated: int, duplicates: int, redundancy: float
) -> None:
    """Redundancy: repeated lines / shown lines or duplicate prompts / prompts, the larger."""
    stats = DispatchStats(
        covered=frozenset(), prompts=4, content_prompts=4, shown_lines=10, distinct_lines=10,
        duplicate_prompts=duplicates, repeated_lines=repeated,
    )  # fmt: skip
    assert stats.redundancy == redundancy


def test_redundancy_of_nothing_sent_is_zero() -> None:
    """No prompt and no shown line: nothing was repeated."""
    stats = DispatchStats(frozenset(), 0, 0, 0, 0, 0)
    assert stats.redundancy == 0.0
    assert replace(stats, prompts=2, duplicate_prompts=1).redundancy == 0.5


# ------------------------------------------------------------------ the weights


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"beta": 0.0}, "reward 'beta', 'files_per_turn' and 'context_lines' must be > 0"),
        ({"files_per_turn": 0.0}, "reward 'beta', 'files_per_turn' and 'context_lines' must be > 0"),
        ({"context_lines": 0.0}, "reward 'beta', 'files_per_turn' and 'context_lines' must be > 0"),
        ({"coverage_threshold": 0.0}, "reward 'coverage_threshold' and 'min_fraction' must be in (0, 1]"),
        ({"coverage_threshold": 1.5}, "reward 'coverage_threshold' and 'min_fraction' must be in (0, 1]"),
        ({"min_fraction": 0.0}, "reward 'coverage_threshold' and 'min_fraction' must be in (0, 1]"),
        ({"min_fraction": 1.5}, "reward 'coverage_threshold' and 'min_fraction' must be in (0, 1]"),
        ({"grounding_floor": 1.5}, "reward 'grounding_floor' must be in [0, 1]"),
        ({"quality": -0.1}, "reward weight 'quality' must be a number >= 0, got -0.1"),
        ({"quality": True}, "reward weight 'quality' must be a number >= 0, got True"),
    ],
)  # fmt: skip
def test_weights_out_of_range_are_refused_saying_which(kw: dict[str, Any], message: str) -> None:
    """A weight outside its range is a configuration error naming it and its range."""
    with pytest.raises(ConfigError) as e:
        RewardWeights(**kw)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "kw",
    [
        {"beta": 0.01}, {"files_per_turn": 0.5}, {"context_lines": 1.0}, {"coverage_threshold": 1.0},
        {"min_fraction": 1.0}, {"grounding_floor": 1.0}, {"grounding_floor": 0.0}, {"quality": 0},
    ],
)  # fmt: skip
def test_weights_at_the_edge_of_their_range_are_accepted(kw: dict[str, Any]) -> None:
    """The edges of each range are valid values."""
    assert RewardWeights(**kw).to_dict()[next(iter(kw))] == next(iter(kw.values()))


def test_weights_from_a_mapping_name_unknown_keys_and_keep_tolerance_whole() -> None:
    """from_dict refuses unknown keys listing them and the valid ones; tolerance is a whole
    number of lines, the rest floats."""
    with pytest.raises(ConfigError) as e:
        RewardWeights.from_dict({"zeta": 1, "alpha": 2})
    assert str(e.value).startswith("unknown reward weight(s): alpha, zeta; valid keys: quality, ")
    w = RewardWeights.from_dict({"tolerance": "3", "quality": "0.5"})
    assert w.tolerance == 3 and isinstance(w.tolerance, int) and w.quality == 0.5


# ------------------------------------------------------------------ what counts as source


def test_lock_files_at_any_depth_are_not_source_and_truth_files_always_are() -> None:
    """Lock files are not code to audit wherever they sit; a file the ground truth names is,
    whatever its kind, and one it names that the repository lacks is not."""
    files = {"a/b/package-lock.json": "{}\n", "a/b/app.json": "{}\n", "conf/.env": "KEY=1\n"}
    gt = parse_ground_truth([{"file": "conf/.env", "line": 1}, {"file": "gone.py", "line": 1}])
    assert source_files(files, gt) == {"a/b/app.json", "conf/.env"}


# ------------------------------------------------------------------ what a worker reply names


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        ('{"findings": [{"file": "./a.py", "line": 3}, {"line": "7-9"}]}', [("a.py", 3), (None, 7)]),
        ('[{"file": "a.py", "start_line": 4}, "junk", {"line": "x"}]', [("a.py", 4)]),
        ('{"file": "a.py", "line": 5}', [("a.py", 5)]),
        ('{"summary": "nothing"}', []),
        ('Found: ```json\n[{"line": 6}]\n``` and {"line": 1}', [(None, 6)]),
        ('Prose [first] then {"findings": [{"line": 8}]}', [(None, 8)]),
        ('{"findings": [{"line": 2}]} and a list [1]', [(None, 2)]),
        ('[{"line": 3}] then {"findings": [{"line": 9}]}', [(None, 3), (None, 9)]),  # no JSON
        ("See line 12 and lines: 14; not {broken", [(None, 12), (None, 14)]),
        ('{"findings": {"line": 1}}', [(None, 1)]),  # findings not a list: the mentions
        ("no numbers here", []),
    ],
)  # fmt: skip
def test_reply_items_read_json_first_then_line_mentions(
    reply: str, items: list[tuple[str | None, int]]
) -> None:
    """A reply's findings come from its JSON (plain, fenced or in prose; an object or a list,
    whichever opens first), else from every "line N" it mentions."""
    assert reply_items(reply) == items


# ------------------------------------------------------------------ the details


def test_the_details_explain_the_reward() -> None:
    """details carries the raw counts behind each part, by name."""
    run = result(TRUE[:1], AUDIT, [turn(1, input_tokens=10)])
    run = replace(run, batch_sizes=[1, 1])
    r = compute_reward(run, GT, FILES, replies=[(AUDIT[0], '{"line": 21}')])
    d = r.details
    assert (d["precision"], d["recall"], d["f1"], d["tp"], d["fp"], d["fn"]) == (
        1.0, 0.5, 2 / 3, 1.0, 0.0, 1.0,
    )  # fmt: skip
    assert (d["grounded_tp"], d["replies_recorded"], d["targeted_prompts"]) == (1.0, 1.0, 0.0)
    assert (d["content_prompts"], d["batch_share"], d["source_files"], d["files_covered"]) == (
        2.0, 0.0, 2.0, 2.0,
    )  # fmt: skip
    assert d["turn_budget"] == 6.0 + 2 / 50
    chars = sum(map(len, FILES.values()))
    assert d["root_token_budget"] == 30_000 + 0.5 * chars / 4
    assert compute_reward(run, GT, FILES).details["replies_recorded"] == 0.0


def test_a_run_with_nothing_to_read_and_nothing_done() -> None:
    """No source files: coverage is 1; no worker request: no batch share; no prompt: no
    content share; no turn: no turn score; a finding on './a.py' is on a.py, not a ghost."""
    files = {"README.md": "# docs\n"}
    findings = [Finding("./README.md", 1, 1, "k", None, "low", "t")]
    r = compute_reward(result(findings, [], []), [], files)
    assert r.parts["coverage_reward"] == 1.0 and r.parts["delegation_reward"] == 0.0
    assert r.details["batch_share"] == 0.0 and r.parts["ghost_findings_penalty"] == 0.0
    assert r.parts["efficiency_reward"] == 0.5  # the token score alone: no turn was taken


def test_a_run_exactly_on_its_budget_is_fully_efficient() -> None:
    """Using exactly the turn budget scores the turns in full."""
    files = {"README.md": "# docs\n"}
    turns = [turn(i) for i in range(1, 7)]  # the budget: 6 turns + 0 files / 50
    r = compute_reward(result([], [], turns), [], files)
    assert r.parts["efficiency_reward"] == 1.0


def test_a_reply_naming_another_file_grounds_nothing() -> None:
    """A worker naming a file other than the finding's grounds nothing."""
    replies = [(AUDIT[0] + "\n" + AUDIT[1], '{"file": "app/b.py", "line": 21}')]
    assert grounded_ids(replies, TRUE[:1]) == set()


def test_dispatch_stats_count_distinct_lines_once_per_run() -> None:
    """distinct_lines counts each file-unique line once however often it was sent."""
    stats = dispatch_stats(FILES, [AUDIT[0], AUDIT[0], AUDIT[1]])
    assert stats.distinct_lines == 80 and stats.duplicate_prompts == 1
    assert stats.covered == frozenset(FILES) and stats.content_prompts == 3


def head(text: str, n: int) -> str:
    return "\n".join(text.split("\n")[:n])


SMALL, BIG, HALF = module("s", 10), module("g", 200), module("h", 100)
SIZES = {"app/a.py": FILES["app/a.py"], "s.py": SMALL, "g.py": BIG, "h.py": HALF}


@pytest.mark.parametrize(
    ("prompt", "content"),
    [
        (head(FILES["app/a.py"], 30), 1),  # 30 lines of code: content, though no whole file
        (head(FILES["app/a.py"], 29), 0),
        (head(SMALL, 9), 1),  # 9 of a 10-line file: the file is covered
        (head(SMALL, 8), 0),
    ],
)
def test_a_prompt_carries_content_from_30_lines_or_a_covered_file(
    prompt: str, content: int
) -> None:
    """A prompt carries file content when it holds 30 codebase lines or covers a file
    (nine tenths of it)."""
    assert dispatch_stats(SIZES, [prompt]).content_prompts == content


@pytest.mark.parametrize(("lines", "targeted"), [(60, True), (61, False)])
def test_a_re_query_of_at_most_60_lines_is_targeted(lines: int, targeted: bool) -> None:
    """After a file was sent, re-sending up to 60 of its lines (under half of it) is a
    targeted check, not a repeat; 61 lines are a blind repeat."""
    stats = dispatch_stats(SIZES, [BIG, "Check this:\n" + head(BIG, lines)])
    assert stats.targeted_prompts == int(targeted)
    assert stats.repeated_lines == (0 if targeted else lines)


@pytest.mark.parametrize(("lines", "targeted"), [(49, True), (50, False)])
def test_a_re_query_of_half_a_file_is_a_repeat(lines: int, targeted: bool) -> None:
    """A re-query must show under half of the file it checks: half is a repeat."""
    stats = dispatch_stats(SIZES, [HALF, "Check this:\n" + head(HALF, lines)])
    assert stats.targeted_prompts == int(targeted)


@pytest.mark.parametrize(("lines", "content"), [(4, 1), (5, 2)])
def test_a_targeted_check_of_five_lines_carries_content(lines: int, content: int) -> None:
    """A targeted check carrying five lines of the code or more counts as a content prompt."""
    stats = dispatch_stats(SIZES, [BIG, "Check this:\n" + head(BIG, lines)])
    assert (stats.targeted_prompts, stats.content_prompts) == (1, content)


def test_the_weights_set_coverage_and_the_grading_and_grounding_tolerance() -> None:
    """min_fraction is the in-order share up to which a file earns no coverage (the credit
    rises linearly to 1 for the whole file); tolerance how far a finding or a worker's line
    may be from a bug."""
    halves = [head(t, 20) for t in FILES.values()]
    quarters = [head(t, 30) for t in FILES.values()]  # three quarters of each file, in order
    loose = RewardWeights(min_fraction=0.5, tolerance=2)
    run = result(TRUE, quarters, [turn(1)])
    assert compute_reward(run, GT, FILES, loose).parts["coverage_reward"] == 0.5
    assert compute_reward(run, GT, FILES).parts["coverage_reward"] == 0.0
    assert compute_reward(run, GT, FILES).details["coverage_share"] == 0.75
    assert dispatch_stats(FILES, halves, min_fraction=0.5).covered == frozenset(FILES)
    off = [replace(f, start_line=26, end_line=26) for f in TRUE]  # 4 lines past the bugs
    assert compute_reward(result(off, AUDIT, [turn(1)]), GT, FILES, loose).details["tp"] == 0
    assert compute_reward(result(off, AUDIT, [turn(1)]), GT, FILES).details["tp"] == 2
    replies = [(AUDIT[0], '{"line": 26}'), (AUDIT[1], '{"line": 26}')]
    exact = result(TRUE, AUDIT, [turn(1)])
    assert compute_reward(exact, GT, FILES, loose, replies=replies).details["grounded_tp"] == 0
    assert compute_reward(exact, GT, FILES, replies=replies).details["grounded_tp"] == 2


def test_a_file_the_ground_truth_names_must_be_covered_too() -> None:
    """A bug in a file that is not code (a .env) puts that file in the coverage share."""
    files = {"app/a.py": FILES["app/a.py"], "conf/.env": "SECRET_KEY=hunter2-very-secret\n"}
    gt = [{"file": "conf/.env", "start_line": 1, "cwe": "CWE-798"}]
    run = result([], [file_audit_prompt("app/a.py", files["app/a.py"])], [turn(1)])
    assert compute_reward(run, gt, files).parts["coverage_reward"] == 0.5


def test_ground_truth_may_mix_entries_and_mappings() -> None:
    """The ground truth may be given as parsed entries, mappings, or both."""
    mixed: list[Any] = [parse_ground_truth(GT)[0], GT[1]]
    r = compute_reward(result(TRUE, AUDIT, [turn(1)]), mixed, FILES)
    assert r.details["tp"] == 2 and r.details["fn"] == 0


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        ('{"line": 5, "note": [1, 2]}', [(None, 5)]),  # the object opens first
        ('[1] then {"line": 4}', []),  # the list opens first, and holds no finding
        (' [{"start_line": 3, "file": "a.py"}]', [("a.py", 3)]),
        ('] [ {"line": 4, "file": "a.py"}', [("a.py", 4)]),  # a list that never closes
        ('Prose [first] then {"findings": [{"start_line": 8}]}', [(None, 8)]),
        ('{"findings": {"start_line": 1}} [{"start_line": 2}]', [(None, 2)]),
        ('{"findings": {"start_line": 1}, "more": [{"start_line": 2}]}', [(None, 2)]),
        ('[1, {"start_line": 4}]', [(None, 4)]),
        ('[{"start_line": "x"}, {"start_line": 4}]', [(None, 4)]),
        ('{"line": 5, "file": "a.py"}.', [("a.py", 5)]),
    ],
)  # fmt: skip
def test_reply_items_try_each_json_shape_before_giving_up(
    reply: str, items: list[tuple[str | None, int]]
) -> None:
    """JSON that does not parse one way is tried the other way (object or list), and items
    that are not findings are skipped, not the end of the reply (a file name or a
    "start_line" comes only from the JSON, never from the "line N" fallback)."""
    assert reply_items(reply) == items


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        ('{"file": "a.py", "start_line": 5, "end_line": 7}', [("a.py", 5)]),
        ('[{"file": "a.py", "start_line": 5, "end_line": 7}]', [("a.py", 5)]),
        ('{"file": "a.py", "line": 5}', [("a.py", 5)]),
        ('{"file": "a.py", "end_line": 7}', []),
    ],
)  # fmt: skip
def test_a_single_finding_object_is_read_like_a_list_item(
    reply: str, items: list[tuple[str | None, int]]
) -> None:
    """A reply that is one finding object names it by 'line' or 'start_line', exactly as an
    item of a findings list does; an object with neither names no finding."""
    assert reply_items(reply) == items


def test_every_reply_is_read_for_grounding() -> None:
    """A reply that names nothing does not stop the later replies from grounding bugs."""
    replies = [(AUDIT[0], "nothing to report"), (AUDIT[0], '{"line": 21}')]
    assert grounded_ids(replies) == {"a"}


def test_without_replies_every_true_positive_counts_as_grounded() -> None:
    """With no worker replies recorded, grounding is not measured: all true positives count."""
    r = compute_reward(result(TRUE, AUDIT, [turn(1)]), GT, FILES)
    assert (r.details["grounded_tp"], r.parts["grounding_reward"]) == (2.0, 1.0)


def test_batches_that_sent_nothing_earn_no_delegation() -> None:
    """Batch requests whose prompts never went out (all refused) carry no content."""
    run = replace(result(TRUE, [], [turn(1)]), batch_sizes=[3])
    assert compute_reward(run, GT, FILES).parts["delegation_reward"] == 0.0


def test_each_targeted_re_query_is_counted() -> None:
    """Two targeted checks count two."""
    checks = ["Check this:\n" + head(BIG, 5), "Check that:\n" + head(BIG, 10)]
    assert dispatch_stats(SIZES, [BIG, *checks]).targeted_prompts == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"coverage": "most"}, "reward weight 'coverage' must be a number, got 'most'"),
        ({"tolerance": "three"}, "reward weight 'tolerance' must be a number, got 'three'"),
        ({"tolerance": [3]}, "reward weight 'tolerance' must be a number, got [3]"),
    ],
)
def test_a_weight_that_is_no_number_is_refused_naming_it(
    data: dict[str, Any], message: str
) -> None:
    """from_dict names the weight whose value is not a number, tolerance included."""
    with pytest.raises(ConfigError) as e:
        RewardWeights.from_dict(data)
    assert str(e.value) == message


def test_weights_from_a_mapping_without_tolerance_keep_the_grading_default() -> None:
    """A mapping that leaves tolerance out keeps the grader's default tolerance."""
    assert RewardWeights.from_dict({}) == RewardWeights()
    assert RewardWeights.from_dict({"quality": 0.5}).tolerance == DEFAULT_TOLERANCE


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        # one finding object that nests a list before a nested object
        ('{"file": "a.py", "line": 5, "tags": ["sqli"], "meta": {"confidence": 1}}',
         [("a.py", 5)]),
        ('\n{"file": "a.py", "line": 3}', [("a.py", 3)]),  # after a newline
        (' [{"file": "a.py", "line": 3}]', [("a.py", 3)]),  # after a space
    ],
)  # fmt: skip
def test_a_json_reply_is_read_as_the_shape_that_opens_it(
    reply: str, items: list[tuple[str | None, int]]
) -> None:
    """A reply whose JSON is one object is read as that object, whatever lists and objects
    it nests (and likewise a list), also after leading whitespace."""
    assert reply_items(reply) == items


def test_a_reply_nested_past_the_parser_names_its_lines_instead_of_failing() -> None:
    """A worker reply the analysed code talked into ``[[[[…`` raised RecursionError out of
    the reward (json.loads raises it, not ValueError): it is no JSON, so its "line N"s count."""
    reply = "See line 12. " + "[" * 100_000 + "]" * 100_000
    assert reply_items(reply) == [(None, 12)]


def test_reply_json_tries_fences_then_the_text_and_skips_what_does_not_parse() -> None:
    from deeprepo.base.jsonl import reply_json

    # The fence, then the whole text: its first "{" to its last "}" is the fenced object
    # again, then its list; the unclosed {"b": is never tried alone.
    text = '```json\n{"a": 1}\n```\nthen [2, 3] and {"b": '
    assert list(reply_json(text)) == [{"a": 1}, {"a": 1}, [2, 3]]
    assert list(reply_json("[1] {2}", earliest_first=True)) == [[1]]
    assert list(reply_json('x [1] {"k": 2}', "{")) == [{"k": 2}]
