"""The reward: pure-function tests on constructed RunResults, and its calibration against
the scripted policies with the oracle worker on generated medium tasks."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

import pytest

from deeprepo.base.errors import ConfigError
from deeprepo.base.finding import Finding
from deeprepo.base.prompts import file_audit_prompt
from deeprepo.base.records import RunResult, Turn
from deeprepo.rl.env.dispatch import dispatch_stats, source_files
from deeprepo.rl.env.grounding import reply_items
from deeprepo.rl.env.reward import RewardWeights, compute_reward, part_metric
from deeprepo.rl.env.rollout import RolloutOutcome
from deeprepo.rl.evals.compare import summarize_run
from deeprepo.rl.evals.results import RolloutResult


def _module(name: str, n: int) -> str:
    return "\n".join(f"value_{name}_{i} = compute_{name}(arg_{i}, {i})" for i in range(n)) + "\n"


FILES: dict[str, str] = {
    "app/a.py": _module("a", 40),
    "app/b.py": _module("b", 40),
    "app/c.py": _module("c", 40),
    "app/d.py": _module("d", 40),
    "README.md": "# Project\n\nThis is documentation, not code to audit.\n",
    "app/empty.py": "\n",
}
SOURCES = ["app/a.py", "app/b.py", "app/c.py", "app/d.py"]
GT: list[dict[str, Any]] = [
    {"file": "app/a.py", "start_line": 5, "cwe": "CWE-89", "kind": "sql-injection"},
    {"file": "app/b.py", "start_line": 12, "cwe": "CWE-78", "kind": "command-injection"},
    {"file": "app/c.py", "start_line": 30, "cwe": "CWE-798", "kind": "hardcoded-secret"},
    {"file": "app/d.py", "start_line": 20, "cwe": "CWE-89", "vulnerable": False},
]
TRUE_FINDINGS = [
    Finding("app/a.py", 5, 5, "sql-injection", "CWE-89", "high", "SQL injection"),
    Finding("app/b.py", 12, 12, "command-injection", "CWE-78", "high", "Command injection"),
    Finding("app/c.py", 30, 30, "hardcoded-secret", "CWE-798", "high", "Secret"),
]


def turn(index: int, input_tokens: int = 1000, output_tokens: int = 200) -> Turn:
    return Turn(
        index=index,
        reply="",
        code_blocks=[],
        output="",
        error=None,
        sub_calls=0,
        findings_added=0,
        answer_ready=False,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=0,
        cache_write_tokens=0,
        cost_usd=0.0,
        seconds=0.0,
    )


def run(
    prompts: list[str],
    batch_sizes: list[int] | None = None,
    findings: list[Finding] | None = None,
    turns: int = 3,
    stop_reason: str = "answer_ready",
    tokens_per_turn: int = 1000,
) -> RunResult:
    return RunResult(
        answer="report",
        incomplete=stop_reason != "answer_ready",
        stop_reason=stop_reason,
        stop_detail="",
        findings=list(TRUE_FINDINGS if findings is None else findings),
        turns=[turn(i, tokens_per_turn) for i in range(1, turns + 1)],
        sub_calls=len(prompts),
        files_covered=[],
        coverable_files=0,
        usage=[],
        total_cost_usd=0.0,
        wall_seconds=1.0,
        root_model="test",
        sub_model="oracle",
        sandbox_mode="process",
        sent_prompts=prompts,
        batch_sizes=[len(prompts)] if batch_sizes is None and prompts else (batch_sizes or []),
    )


def audit(paths: list[str]) -> list[str]:
    return [file_audit_prompt(p, FILES[p]) for p in paths]


def part(reward: Any, name: str) -> float:
    return float(reward.parts[part_metric(name)])


# ------------------------------------------------------------------------------ parts


def test_source_files_leave_out_prose_and_empty_files_but_keep_ground_truth_files() -> None:
    assert source_files(FILES) == set(SOURCES)
    files = {**FILES, "deploy/.env": "API_KEY=abcdef123456\n"}
    from deeprepo.findings.grading import parse_ground_truth

    gt = parse_ground_truth([{"file": "deploy/.env", "start_line": 1, "cwe": "CWE-798"}])
    assert source_files(files, gt) == {*SOURCES, "deploy/.env"}


def test_ideal_run_scores_one() -> None:
    reward = compute_reward(run(audit(SOURCES)), GT, FILES)
    assert reward.total == pytest.approx(1.0)
    assert part(reward, "quality") == 1.0
    assert part(reward, "coverage") == 1.0
    assert part(reward, "delegation") == 1.0
    assert part(reward, "efficiency") == 1.0
    for penalty in ("zero_delegation", "early_finalize", "redundancy", "ghost_findings"):
        assert part(reward, penalty) == 0.0
    assert reward.details["tp"] == 3 and reward.details["source_files"] == 4


def test_every_part_is_reported_under_its_metric_name() -> None:
    reward = compute_reward(run(audit(SOURCES)), GT, FILES)
    assert set(reward.parts) == {
        "quality_reward",
        "grounding_reward",
        "coverage_reward",
        "delegation_reward",
        "efficiency_reward",
        "zero_delegation_penalty",
        "early_finalize_penalty",
        "redundancy_penalty",
        "ghost_findings_penalty",
        "empty_report_penalty",
    }
    assert reward.metrics()["reward"] == reward.total


def test_quality_is_f_half_from_the_grader() -> None:
    # 2 of 3 bugs found plus one finding on the decoy: tp 2, fp 1, fn 1.
    findings = [
        *TRUE_FINDINGS[:2],
        Finding("app/d.py", 20, 20, "sql-injection", "CWE-89", "high", "Decoy"),
    ]
    reward = compute_reward(run(audit(SOURCES), findings=findings), GT, FILES)
    p = r = 2 / 3
    assert part(reward, "quality") == pytest.approx(1.25 * p * r / (0.25 * p + r))
    assert reward.details["decoys_hit"] == 1
    # beta 1 gives F1
    w = RewardWeights(beta=1.0)
    assert part(
        compute_reward(run(audit(SOURCES), findings=findings), GT, FILES, w), "quality"
    ) == (pytest.approx(2 / 3))


def test_coverage_counts_source_files_whose_content_reached_a_worker() -> None:
    reward = compute_reward(run(audit(["app/a.py", "app/b.py", "README.md"])), GT, FILES)
    assert part(reward, "coverage") == pytest.approx(0.5)
    assert reward.details["files_covered"] == 2


def test_a_file_split_across_prompts_is_covered_without_redundancy() -> None:
    lines = FILES["app/a.py"].split("\n")
    halves = [
        file_audit_prompt("app/a.py", "\n".join(lines[:20]), 1),
        file_audit_prompt("app/a.py", "\n".join(lines[20:]), 21),
    ]
    stats = dispatch_stats(FILES, halves)
    assert "app/a.py" in stats.covered
    assert stats.redundancy == 0.0


def test_delegation_is_the_share_of_sub_calls_sent_in_batches() -> None:
    prompts = audit(SOURCES)
    # two single llm_query calls and one batch of two
    reward = compute_reward(run(prompts, batch_sizes=[1, 1, 2]), GT, FILES)
    assert part(reward, "delegation") == pytest.approx(0.5)
    assert (
        compute_reward(run(prompts, batch_sizes=[1, 1, 1, 1]), GT, FILES).parts["delegation_reward"]
        == 0.0
    )
    none = compute_reward(run([], findings=[]), GT, FILES)
    assert part(none, "delegation") == 0.0
    assert part(none, "zero_delegation") == 1.0


def test_efficiency_compares_turns_and_root_tokens_with_a_budget() -> None:
    w = RewardWeights()
    budget_turns = w.base_turns + 4 / w.files_per_turn
    reward = compute_reward(run(audit(SOURCES), turns=round(2 * budget_turns)), GT, FILES)
    turn_score = budget_turns / round(2 * budget_turns)
    assert part(reward, "efficiency") == pytest.approx((turn_score + 1.0) / 2)
    chars = sum(len(FILES[p]) for p in SOURCES)
    token_budget = w.base_root_tokens + w.root_token_share * chars / 4
    heavy = run(audit(SOURCES), turns=2, tokens_per_turn=int(token_budget))  # 2x budget
    ratio = token_budget / (2 * (int(token_budget) + 200))
    assert part(compute_reward(heavy, GT, FILES), "efficiency") == pytest.approx((1 + ratio) / 2)


def test_root_tokens_count_cache_reads_and_writes_in_the_reward_and_the_results() -> None:
    # The same prompts, billed fresh or read from the cache: the root read them either way,
    # so the reward's token budget and results.jsonl's input_tokens must count them alike.
    w = RewardWeights()
    chars = sum(len(FILES[p]) for p in SOURCES)
    budget = int(w.base_root_tokens + w.root_token_share * chars / 4)
    fresh = run(audit(SOURCES), turns=2, tokens_per_turn=budget)
    cached = replace(
        fresh,
        turns=[
            replace(t, input_tokens=10, cache_read_tokens=budget - 30, cache_write_tokens=20)
            for t in fresh.turns
        ],
    )
    assert cached.root_tokens == fresh.root_tokens == (2 * budget, 2 * 200)
    assert cached.root_tokens.total == 2 * budget + 400
    a, b = compute_reward(fresh, GT, FILES), compute_reward(cached, GT, FILES)
    assert a.details["root_tokens"] == b.details["root_tokens"] == 2 * budget + 400
    assert part(b, "efficiency") == part(a, "efficiency") < 1.0
    outcome = RolloutOutcome("t", 0, cached, b, 1.0, 0)
    record = RolloutResult.from_outcome(outcome)
    assert (record.input_tokens, record.output_tokens) == (2 * budget, 400)


def test_efficiency_is_scaled_by_coverage_so_quitting_early_is_not_efficient() -> None:
    reward = compute_reward(run(audit(["app/a.py"]), turns=1), GT, FILES)
    assert part(reward, "efficiency") == pytest.approx(0.25)


def test_finalising_before_coverage_is_penalised_by_the_shortfall() -> None:
    reward = compute_reward(run(audit(["app/a.py"])), GT, FILES)  # coverage 0.25
    assert part(reward, "early_finalize") == pytest.approx(1 - 0.25)  # every unread file
    # Running out of turns instead of submitting does not escape it.
    truncated = compute_reward(run(audit(["app/a.py"]), stop_reason="max_turns"), GT, FILES)
    assert part(truncated, "early_finalize") == pytest.approx(1 - 0.25)
    full = compute_reward(run(audit(["app/a.py", "app/b.py", "app/c.py", "app/d.py"])), GT, FILES)
    assert part(full, "early_finalize") == 0.0


def test_total_is_the_weighted_sum_minus_penalties_clamped() -> None:
    result = run(audit(["app/a.py", "app/b.py"]), batch_sizes=[1, 1], findings=TRUE_FINDINGS[:1])
    reward = compute_reward(result, GT, FILES)
    w = RewardWeights()
    expected = part(reward, "quality") * (
        w.quality
        + w.coverage * part(reward, "coverage")
        + w.delegation * part(reward, "delegation")
        + w.efficiency * part(reward, "efficiency")
    ) - w.early_finalize * part(reward, "early_finalize")
    assert reward.details["gate"] == part(reward, "quality")  # no replies: grounding 1
    assert reward.total == pytest.approx(max(0.0, expected))
    nothing = compute_reward(run([], findings=[], turns=20), GT, FILES)
    assert nothing.total == 0.0


def test_compare_counts_zero_delegation_by_the_reward_rule() -> None:
    # Sub-calls that only name paths delegate nothing: the reward's penalty and the
    # compare table's rate must say so alike, whatever the sub-call count.
    path_only = [f"Audit the file {p} for bugs." for p in SOURCES]
    runs = [run(path_only, findings=[]), run(audit(SOURCES)), run([], findings=[])]
    records = []
    for i, result in enumerate(runs):
        reward = compute_reward(result, GT, FILES)
        records.append(RolloutResult.from_outcome(RolloutOutcome("t", i, result, reward, 1.0, 0)))
    assert [part(compute_reward(r, GT, FILES), "zero_delegation") for r in runs] == [1.0, 0, 1.0]
    assert [r.sub_calls for r in records] == [4, 4, 0]
    assert summarize_run("x", records).zero_delegation_rate == pytest.approx(2 / 3)
    # A results file without the reward's counts: only a rollout with no sub-call is known
    # to have delegated nothing.
    bare = [RolloutResult(r.example_id, r.rollout, sub_calls=r.sub_calls) for r in records]
    assert summarize_run("x", bare).zero_delegation_rate == pytest.approx(1 / 3)


# ------------------------------------------------------------------------------ anti-gaming


def test_naming_paths_without_content_earns_nothing() -> None:
    path_only = [f'Audit the file {p} for bugs.\n<file path="{p}">\n</file>' for p in SOURCES]
    gamed = compute_reward(run(path_only, findings=[]), GT, FILES)
    assert part(gamed, "coverage") == 0.0
    assert part(gamed, "delegation") == 0.0  # batched, but nothing was delegated
    assert part(gamed, "zero_delegation") == 1.0
    assert part(gamed, "efficiency") == 0.0
    assert gamed.total == 0.0
    honest = compute_reward(run(audit(SOURCES)), GT, FILES)
    assert honest.total > gamed.total


def test_quality_gates_everything_and_junk_is_no_better_than_an_empty_report() -> None:
    silent = compute_reward(run(audit(SOURCES), findings=[]), GT, FILES)
    assert part(silent, "coverage") == 1.0 and part(silent, "delegation") == 1.0
    assert part(silent, "empty_report") == 1.0  # still reported as a metric
    assert silent.total == 0.0
    junk = [Finding("app/d.py", 1, 1, "logic-error", "CWE-193", "low", "Review recommended")]
    ignoring = compute_reward(run(audit(SOURCES), findings=junk), GT, FILES)
    assert part(ignoring, "quality") == 0.0 and ignoring.total == 0.0
    assert ignoring.total <= silent.total
    reporting = compute_reward(run(audit(SOURCES)), GT, FILES)
    assert reporting.total == pytest.approx(1.0)
    # On a task with nothing to find, an empty report is the right answer and junk is not.
    clean_gt = [e for e in GT if not e.get("vulnerable", True)]
    clean = compute_reward(run(audit(SOURCES), findings=[]), clean_gt, FILES)
    assert part(clean, "empty_report") == 0.0 and clean.total == pytest.approx(1.0)
    assert compute_reward(run(audit(SOURCES), findings=junk), clean_gt, FILES).total == 0.0
    # Half the bugs, precisely: the process parts earn in proportion.
    half = compute_reward(run(audit(SOURCES), findings=TRUE_FINDINGS[:1]), GT, FILES)
    assert half.total == pytest.approx(part(half, "quality"))


def _reply(path: str, *lines: int, named: bool = True, cwe: str = "CWE-89") -> str:
    items = [{"line": n, "cwe": cwe} | ({"file": path} if named else {}) for n in lines]
    return json.dumps({"findings": items})


def test_grounding_credits_true_positives_a_worker_reported() -> None:
    prompts = audit(SOURCES)
    replies = [
        (prompts[0], _reply("app/a.py", 5)),
        (prompts[1], "```json\n" + _reply("app/b.py", 13, named=False, cwe="CWE-78") + "\n```"),
        (prompts[2], '{"findings": []}'),
        (prompts[3], "Nothing here."),
    ]
    reward = compute_reward(run(prompts), GT, FILES, replies=replies)
    assert part(reward, "quality") == 1.0
    assert part(reward, "grounding") == pytest.approx(2 / 3)  # c.py's secret came from no worker
    # ... nor did the root print c.py: a guess on code it was never shown counts nothing.
    assert reward.details["gate"] == pytest.approx(2 / 3)
    # Findings the root wrote itself while workers were asked for nothing: blind guesses,
    # unless its own outputs showed it the code (a grep that prints what it matched).
    said_ok = [(p, "OK") for p in prompts]
    alone = compute_reward(run(prompts), GT, FILES, replies=said_ok)
    assert part(alone, "grounding") == 0.0 and alone.total == 0.0
    printing = run(prompts)
    printing.turns[0] = replace(printing.turns[0], output="\n".join(FILES.values()))
    read = compute_reward(printing, GT, FILES, replies=said_ok)
    assert read.details["root_read_tp"] == 3.0 and read.total == pytest.approx(0.5)
    # A worker that reported another class at that line did not report what was submitted.
    wrong_class = [(prompts[0], _reply("app/a.py", 5, cwe="CWE-798"))]
    assert part(compute_reward(run(prompts), GT, FILES, replies=wrong_class), "grounding") == 0.0
    assert reply_items("see line 12 and lines 40-42") == [(None, 12), (None, 40)]
    assert reply_items('[{"file": "./x.py", "line": "7-9"}]') == [("x.py", 7)]


def test_dispatching_the_same_file_many_times_is_penalised() -> None:
    once = compute_reward(run(audit(SOURCES)), GT, FILES)
    five = compute_reward(run(audit(SOURCES) * 5), GT, FILES)
    assert part(five, "coverage") == part(once, "coverage") == 1.0
    assert part(five, "redundancy") == pytest.approx(0.8)
    assert five.total < once.total - 0.25
    # the same content in differently worded prompts is still a repeat
    reworded = [p.replace("Audit the file", "Please review the file") for p in audit(SOURCES)]
    twice = compute_reward(run(audit(SOURCES) + reworded), GT, FILES)
    assert part(twice, "redundancy") == pytest.approx(0.5)


def test_targeted_re_queries_and_new_context_are_not_repeats() -> None:
    lines = FILES["app/a.py"].split("\n")
    check = "Is line 5 exploitable? Answer yes or no.\n" + "\n".join(
        f"{i}: {ln}" for i, ln in enumerate(lines[:12], 1)
    )
    verified = dispatch_stats(FILES, [*audit(SOURCES), check])
    assert verified.redundancy == 0.0 and verified.targeted_prompts == 1
    # ... and it carries code, so it does not lower the delegation part's content share
    assert verified.content_prompts == verified.prompts
    # a file shown again beside a file it was not shown with: following data across files
    pair = file_audit_prompt("app/a.py", FILES["app/a.py"]) + file_audit_prompt(
        "app/b.py", FILES["app/b.py"]
    )
    assert dispatch_stats(FILES, [*audit(SOURCES), pair]).redundancy == 0.0
    # ... but the same pair again, or one of its files alone again, is blind
    assert dispatch_stats(FILES, [*audit(SOURCES), pair, pair]).redundancy == pytest.approx(0.25)
    alone_again = dispatch_stats(FILES, [pair, *audit(["app/a.py"])])
    assert alone_again.redundancy == pytest.approx(1 / 3)


def test_boilerplate_shared_by_files_is_not_a_repeat() -> None:
    header = "# Copyright (c) Example Corp. All rights reserved.\nimport logging, os, sys\n"
    files = {p: header + t for p, t in FILES.items() if p in SOURCES}
    prompts = [file_audit_prompt(p, t) for p, t in files.items()]
    assert dispatch_stats(files, prompts).redundancy == 0.0


def test_findings_on_files_that_do_not_exist_are_penalised() -> None:
    ghosts = [
        Finding(f"app/ghost_{i}.py", 3, 3, "sql-injection", "CWE-89", "high", "Invented")
        for i in range(3)
    ]
    clean = compute_reward(run(audit(SOURCES)), GT, FILES)
    gamed = compute_reward(run(audit(SOURCES), findings=TRUE_FINDINGS + ghosts), GT, FILES)
    assert part(gamed, "ghost_findings") == pytest.approx(0.5)
    assert gamed.details["ghost_findings"] == 3
    assert gamed.details["fp"] == 3  # the grader counts them as false positives too
    assert gamed.total < clean.total - 0.2


# ------------------------------------------------------------------------------ weights


def test_weights_load_from_a_dict_and_reject_unknown_keys() -> None:
    w = RewardWeights.from_dict({"quality": 1, "coverage": "0", "tolerance": 5})
    assert (w.quality, w.coverage, w.tolerance) == (1.0, 0.0, 5)
    assert w.delegation == RewardWeights().delegation
    with pytest.raises(ConfigError, match=r"unknown reward weight.*qualty.*valid keys"):
        RewardWeights.from_dict({"qualty": 1})
    with pytest.raises(ConfigError, match="must be a number"):
        RewardWeights.from_dict({"quality": "high"})
    with pytest.raises(ConfigError, match=">= 0"):
        RewardWeights(redundancy=-1)
    assert RewardWeights.from_dict(RewardWeights().to_dict()) == RewardWeights()


def test_weights_change_the_total() -> None:
    result = run(audit(["app/a.py", "app/b.py"]), findings=TRUE_FINDINGS[:2])
    p, r = 1.0, 2 / 3
    quality = 1.25 * p * r / (0.25 * p + r)
    only_quality = RewardWeights(
        quality=1, coverage=0, delegation=0, efficiency=0, early_finalize=0
    )
    assert compute_reward(result, GT, FILES, only_quality).total == pytest.approx(quality)
    only_coverage = RewardWeights(
        quality=0, coverage=1, delegation=0, efficiency=0, early_finalize=0
    )
    assert compute_reward(result, GT, FILES, only_coverage).total == pytest.approx(0.5 * quality)


# ------------------------------------------------------------------------------ calibration

# One medium task per language (the tasks `--generate medium:seed=11:lang=L` gives first),
# each with three worker seeds: a band bounds a policy's mean, and one rollout a task left the
# expert's mean to the oracle's draws (0.840 on seed 0 alone, 0.875 over seeds 0-2).
CALIBRATION_LANGS = ("python", "js", "mixed")
CALIBRATION_WORKER_SEEDS = (0, 1, 2)
BANDS = {
    "expert": (0.85, 1.0),
    "lazy": (0.0, 0.40),
    "no-delegation": (0.0, 0.30),
    "syntax-errors": (0.0, 0.30),
}


@pytest.fixture(scope="module")
def calibration() -> dict[str, list[float]]:
    from deeprepo.builtin import make_policy
    from deeprepo.orchestrator.episode import EpisodeConfig
    from deeprepo.rl.env.rollout import run_rollout
    from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory
    from deeprepo.sandbox.config import SandboxConfig

    tasks = [
        generate_tasks_in_memory(TaskSpec("medium", seed=11, lang=lang), 1)[0]
        for lang in CALIBRATION_LANGS
    ]

    async def go() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for policy in ("expert", "lazy", "no-delegation", "over-explorer", "syntax-errors"):
            root = make_policy(policy)
            rollouts = [
                run_rollout(
                    task,
                    root=root,
                    seed=seed,
                    rollout_index=0,
                    episode_config=EpisodeConfig(max_turns=20),
                    sandbox_config=SandboxConfig(mode="process"),
                )
                for task in tasks
                for seed in CALIBRATION_WORKER_SEEDS
            ]
            out[policy] = [o.reward.total for o in await asyncio.gather(*rollouts)]
        return out

    t0 = time.perf_counter()
    result = asyncio.run(go())
    print(f"calibration took {time.perf_counter() - t0:.1f}s: {result}")
    return result


@pytest.mark.e2e
@pytest.mark.parametrize("policy", sorted(BANDS))
def test_calibration_bands(calibration: dict[str, list[float]], policy: str) -> None:
    lo, hi = BANDS[policy]
    mean = sum(calibration[policy]) / len(calibration[policy])
    assert lo <= mean <= hi, f"{policy}: mean reward {mean:.3f} outside [{lo}, {hi}]"


@pytest.mark.e2e
def test_over_explorer_scores_below_expert(calibration: dict[str, list[float]]) -> None:
    expert = sum(calibration["expert"]) / len(calibration["expert"])
    over = sum(calibration["over-explorer"]) / len(calibration["over-explorer"])
    assert over < expert - 0.1
