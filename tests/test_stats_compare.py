"""Statistics (bootstrap CI, permutation test) and the `deeprepo compare` table."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from deeprepo.base.errors import UsageError
from deeprepo.cli.compare_cmd import compare_command
from deeprepo.rl.evals import (
    RolloutResult,
    compare_runs,
    load_results,
    render_markdown,
    render_rich,
    write_results,
)
from deeprepo.rl.evals.compare import default_labels, default_pairs, parse_pairs
from deeprepo.rl.evals.stats import (
    bootstrap_diff_ci,
    diff_test,
    mean,
    paired_permutation_pvalue,
    permutation_pvalue,
    quantile,
    separation_warning,
    std,
)


def test_mean_and_population_std() -> None:
    xs = [0.636, 0.9, 0.85]
    assert mean(xs) == pytest.approx(0.795333, abs=1e-6)
    assert std(xs) == pytest.approx(0.114500, abs=1e-6)  # population: divide by n
    assert std([8.0, 4.0, 14.0]) == pytest.approx(statistics.pstdev([8.0, 4.0, 14.0]))
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    with pytest.raises(ValueError):
        mean([])


def test_identical_samples_are_not_separated() -> None:
    rng = random.Random(0)
    a = [rng.random() for _ in range(30)]
    t = diff_test(a, list(a))
    assert t.delta == 0.0 and t.p_value == 1.0
    assert t.ci_low < 0.0 < t.ci_high
    warning = separation_warning(t)
    assert warning is not None and "includes 0" in warning


def test_clearly_separated_samples() -> None:
    rng = random.Random(1)
    a = [0.2 + rng.uniform(-0.05, 0.05) for _ in range(20)]
    b = [0.8 + rng.uniform(-0.05, 0.05) for _ in range(20)]
    t = diff_test(a, b)
    assert t.delta == pytest.approx(0.6, abs=0.03)
    assert t.p_value < 0.01
    assert 0.55 < t.ci_low < t.delta < t.ci_high < 0.65
    assert separation_warning(t) is None
    # Reversed, the difference changes sign and the test stays two-sided.
    r = diff_test(b, a)
    assert r.delta == pytest.approx(-t.delta) and r.p_value == pytest.approx(t.p_value)


def test_seeded_determinism() -> None:
    rng = random.Random(2)
    a = [rng.random() for _ in range(25)]
    b = [rng.random() + 0.1 for _ in range(25)]
    kw = {"resamples": 2000, "permutations": 2000}
    assert diff_test(a, b, seed=7, **kw) == diff_test(a, b, seed=7, **kw)
    assert bootstrap_diff_ci(a, b, seed=7, resamples=2000) != bootstrap_diff_ci(
        a, b, seed=8, resamples=2000
    )


def test_exact_permutation_p_values() -> None:
    # C(6, 3) = 20 relabellings; only the two extreme ones are as large as observed.
    assert permutation_pvalue([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]) == pytest.approx(2 / 20)
    # 2^5 sign flips; all positive or all negative.
    assert paired_permutation_pvalue([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(2 / 32)


def test_monte_carlo_p_value_floor() -> None:
    a, b = [0.0] * 30, [1.0] * 30
    assert permutation_pvalue(a, b, permutations=999) == pytest.approx(1 / 1000)


def test_paired_when_examples_are_shared() -> None:
    ids = ["e1", "e1", "e2", "e2", "e3", "e3"]
    a = [0.1, 0.3, 0.5, 0.7, 0.2, 0.2]
    b = [0.2, 0.4, 0.7, 0.7, 0.4, 0.4]
    t = diff_test(a, b, a_ids=ids, b_ids=ids)
    assert t.paired and t.n_units == 3
    assert t.delta == pytest.approx((0.1 + 0.1 + 0.2) / 3)
    assert t.p_value == pytest.approx(2 / 8)  # every per-example difference is positive
    u = diff_test(a, b, a_ids=ids, b_ids=["x"] * 6)
    assert not u.paired and u.n_units == 12


def test_warning_for_few_rollouts() -> None:
    t = diff_test([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    warning = separation_warning(t)
    assert warning is not None and "only 3 rollouts" in warning


def _runs() -> list[tuple[str, list[RolloutResult]]]:
    def run(
        rewards: list[float], turns: list[int], subs: list[int], tokens: list[int]
    ) -> list[RolloutResult]:
        return [
            RolloutResult(
                example_id=f"ex{i // 2}",
                rollout=i % 2,
                reward=r,
                num_turns=t,
                sub_calls=s,
                input_tokens=k,
            )
            for i, (r, t, s, k) in enumerate(zip(rewards, turns, subs, tokens, strict=True))
        ]

    return [
        ("base", run([0.2, 0.4, 0.3, 0.5], [10, 12, 8, 6], [0, 0, 3, 4], [1000, 2000, 3000, 4000])),
        ("sft", run([0.5, 0.6, 0.5, 0.6], [5, 5, 6, 4], [2, 0, 3, 5], [500, 500, 700, 300])),
        ("rl", run([0.8, 0.9, 0.7, 0.8], [4, 4, 4, 4], [6, 6, 6, 6], [400, 400, 400, 400])),
    ]


def test_compare_table_numbers() -> None:
    table = compare_runs(_runs())
    base, sft, rl = table.runs
    assert (base.rollouts, base.examples) == (4, 2)
    assert base.reward_mean == pytest.approx(0.35)
    assert base.reward_std == pytest.approx(0.111803, abs=1e-6)
    assert (base.reward_min, base.reward_max) == (0.2, 0.5)
    assert (base.turns_mean, base.turns_min, base.turns_max) == (9.0, 6, 12)
    assert (
        base.zero_delegation_rate == 0.5
        and sft.zero_delegation_rate == 0.25
        and rl.zero_delegation_rate == 0.0
    )
    assert base.input_tokens_mean == 2500.0
    assert [(p.a, p.b) for p in table.pairs] == [("base", "sft"), ("sft", "rl"), ("base", "rl")]
    first = table.pairs[2]
    assert first.delta == pytest.approx(0.45) and first.relative == pytest.approx(0.45 / 0.35)
    assert first.paired  # same two examples in both runs
    assert first.ci_low <= first.delta <= first.ci_high
    assert first.p_value == pytest.approx(0.5)  # 2 examples: 2 of 4 sign flips as extreme
    assert all(p.warning and "only 4 rollouts" in p.warning for p in table.pairs)


def test_compare_chosen_pairs_and_errors() -> None:
    table = compare_runs(_runs(), [(2, 0)])
    assert [(p.a, p.b) for p in table.pairs] == [("rl", "base")]
    assert table.pairs[0].delta == pytest.approx(-0.45)
    with pytest.raises(UsageError):
        compare_runs(_runs(), [(0, 0)])
    with pytest.raises(UsageError, match="no rollouts"):
        compare_runs([("empty", [])])
    assert default_pairs(1) == [] and default_pairs(2) == [(0, 1)]


def test_renderers() -> None:
    table = compare_runs(_runs())
    md = render_markdown(table)
    assert "| base | 4 (2 ex.) | 0.350 (σ 0.112) | 0.200–0.500 | 9.0 (6–12) | 50% | 2,500 |" in md
    assert "| base → rl | +0.450 | +128.6% |" in md
    assert md.count("- ") >= 3  # one warning per pair
    console = Console(record=True, width=200)
    for r in render_rich(table):
        console.print(r)
    text = console.export_text()
    assert "base → rl" in text and "+128.6%" in text and "warning:" in text


def test_labels_and_pairs_parsing(tmp_path: Path) -> None:
    assert default_labels([Path("a.jsonl"), Path("runs/b/results.jsonl")]) == ["a", "b"]
    assert default_labels([Path("x/a.jsonl"), Path("y/a.jsonl")]) == ["a (1)", "a (2)"]
    assert default_labels([Path("a"), Path("b")], "before, after") == ["before", "after"]
    with pytest.raises(UsageError, match="2 names for 3 files"):
        default_labels([Path("a"), Path("b"), Path("c")], "x,y")
    assert parse_pairs("before:after,2:1", ["before", "after"]) == [(0, 1), (1, 0)]
    assert parse_pairs(None, ["a"]) is None
    with pytest.raises(UsageError, match="neither a label"):
        parse_pairs("a:z", ["a", "b"])


def test_results_round_trip_and_bad_lines(tmp_path: Path) -> None:
    r = RolloutResult(
        example_id="e1",
        rollout=1,
        reward=0.5,
        parts={"coverage": 1.0},
        trajectory=[{"turn": 1}],
        extra={"seed": 7},
    )
    assert RolloutResult.from_json(r.to_json()) == r
    path = tmp_path / "results.jsonl"
    write_results(path, [r, r])
    assert load_results(tmp_path) == [r, r]  # a directory holding results.jsonl
    path.write_text(r.to_json() + "\n\n" + '{"example_id": "e2"}\n')
    with pytest.raises(UsageError, match=r"results.jsonl line 3: missing 'example_id' or 'reward'"):
        load_results(path)
    path.write_text("not json\n")
    with pytest.raises(UsageError, match="line 1"):
        load_results(path)
    with pytest.raises(UsageError, match="not found"):
        load_results(tmp_path / "nope.jsonl")


def test_compare_command(tmp_path: Path) -> None:
    files = []
    for label, results in _runs():
        path = tmp_path / f"{label}.jsonl"
        write_results(path, results)
        files.append(str(path))
    app = typer.Typer()
    app.command()(compare_command)
    runner = CliRunner()
    res = runner.invoke(
        app, [*files, "--labels", "A,B,C", "--pairs", "A:C", "--json", "--resamples", "1000"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [r["label"] for r in data["runs"]] == ["A", "B", "C"]
    assert len(data["pairs"]) == 1 and data["pairs"][0]["delta"] == pytest.approx(0.45)
    res = runner.invoke(app, [*files, "--markdown", "--resamples", "1000"])
    assert res.exit_code == 0 and "| base → rl |" in res.output
    res = runner.invoke(app, files)
    assert res.exit_code == 0 and "Differences" in res.output and "sft → rl" in res.output
