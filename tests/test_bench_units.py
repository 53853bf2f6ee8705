"""Bench pieces without runs: the TOML checks, unique-finds matching, the cost gate,
the economics projection."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import ROOT

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Finding
from deeprepo.rl.bench.config import load_bench_file
from deeprepo.rl.bench.runner import CostGate
from deeprepo.rl.bench.summary import economics
from deeprepo.rl.bench.unique import distinct_finds, same_find, unique_finds

GOOD = """
[bench]
repetitions = 2
[[repo]]
path = "repo"
[[config]]
name = "a"
root = "scripted/expert"
sub = "static"
"""


def _f(file: str, line: int, cwe: str | None = "CWE-89", kind: str = "x") -> Finding:
    return Finding(file=file, start_line=line, end_line=line, kind=kind, cwe=cwe,
                   severity="high", title="t")  # fmt: skip


def _load(tmp_path: Path, text: str) -> str:
    p = tmp_path / "b.toml"
    p.write_text(text)
    with pytest.raises(UsageError) as info:
        load_bench_file(p)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_a_good_file_parses_with_defaults(tmp_path: Path) -> None:
    p = tmp_path / "b.toml"
    p.write_text(GOOD)
    b = load_bench_file(p)
    assert b.bench.repetitions == 2 and b.bench.max_concurrent == 1 and b.bench.cache is False
    assert b.config[0].mode == "rlm" and b.config[0].prompt == "default"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[bench\n", "is not valid TOML"),
        (GOOD.replace("repetitions = 2", "repetitions = 0"), "bench.repetitions"),
        (GOOD.replace("repetitions = 2", "repetitons = 2"), "bench.repetitons: unknown key"),
        (GOOD.replace('sub = "static"', ""), "config[1] ('a'): an rlm configuration needs root"),
        (
            GOOD + '[[config]]\nname = "a"\nmode = "baseline"\nmodel = "static"\n',
            "two configurations",
        ),
        (
            GOOD + '[[config]]\nname = "b"\nmode = "baseline"\n',
            "config[2] ('b'): a baseline needs model",
        ),
        (GOOD + '[[config]]\nname = "b"\nmode = "agent"\nmodel = "m"\n', "config[2] ('b').mode"),
        (GOOD + '[[config]]\nname = "b/c"\nroot = "r"\nsub = "s"\n', "it names a folder"),
        (
            GOOD.replace('path = "repo"', 'path = "r"\ndir = "d"'),
            "exactly one of path, dir or generate",
        ),
        (GOOD.replace('[[repo]]\npath = "repo"\n', ""), "repo"),
        (GOOD.replace("max_turns", "x") + "max_cost = -1\n", "config[1] ('a').max_cost"),
        (
            GOOD + '[[config]]\nname = "b"\nmode = "baseline"\nmodel = "m"\nmax_cost = 1.0\n',
            "a baseline is one call",
        ),
    ],
)
def test_bad_files_are_one_line_naming_the_key(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _load(tmp_path, text)


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_bench_file(tmp_path / "nope.toml")


def test_three_way_example_parses_with_the_seeds_models() -> None:
    b = load_bench_file(ROOT / "examples" / "bench" / "three-way.toml")
    roots = {c.root for c in b.config if c.mode == "rlm"}
    assert roots == {
        "anthropic/claude-opus-4-6",
        "anthropic/claude-sonnet-4-5",
        "openrouter/minimax/minimax-m2.5",
    }
    assert {c.sub for c in b.config if c.mode == "rlm"} == {"openrouter/minimax/minimax-m2.5"}
    assert [c.model for c in b.config if c.mode == "baseline"] == ["anthropic/claude-opus-4-6"]
    assert b.bench.max_cost is not None


def test_same_find_needs_file_family_and_line_tolerance() -> None:
    a = _f("app.py", 10, "CWE-89")
    assert same_find(a, _f("app.py", 20, "CWE-564"), 10)  # same family (SQL injection)
    assert same_find(a, _f("./app.py", 12, None, kind="sql-injection"), 10)  # by kind
    assert not same_find(a, _f("app.py", 21, "CWE-89"), 10)  # 11 lines apart
    assert not same_find(a, _f("other.py", 10, "CWE-89"), 10)
    assert not same_find(a, _f("app.py", 10, "CWE-78"), 10)  # command injection


def test_unique_finds_are_what_no_other_configuration_found() -> None:
    shared = _f("app.py", 10, "CWE-89")
    only_a = _f("app.py", 40, "CWE-78")
    only_b = _f("util.py", 5, "CWE-798")
    found = unique_finds(
        {
            # a saw its own bug in two repetitions: one find, not two
            "a": [shared, only_a, _f("app.py", 42, "CWE-77")],
            "b": [_f("app.py", 14, "CWE-89"), only_b],
            "c": [],
        },
        tolerance=10,
    )
    assert found == {"a": [only_a], "b": [only_b], "c": []}
    assert distinct_finds([only_a, _f("app.py", 42, "CWE-77"), shared], 10) == [only_a, shared]


def test_cost_gate_shares_what_is_left_between_concurrent_runs() -> None:
    gate = CostGate(total=1.0, slots=2)
    first = gate.reserve(1, waiting=4, cap=None)
    second = gate.reserve(2, waiting=3, cap=None)
    assert first == pytest.approx(0.5) and second == pytest.approx(0.5)
    gate.settle(1, 0.2)  # spent 0.2 of its 0.5: the rest returns to the pool
    assert gate.free() == pytest.approx(0.3)
    assert gate.reserve(3, waiting=2, cap=0.1) == pytest.approx(0.1)  # a config's own cap
    gate.settle(2, 0.5)
    gate.settle(3, 0.3)
    assert gate.reserve(4, waiting=1, cap=None) == 0.0  # nothing left: the cell is skipped
    assert CostGate(None, 2).reserve(1, waiting=1, cap=None) is None  # no bench budget


def test_economics_projects_from_the_measured_cost_per_sub_call() -> None:
    e = economics(runs=2, root_cost=1.44, sub_cost=0.03, billed_sub_calls=18)
    rows = {r["sub_calls"]: r for r in e["rows"]}
    assert set(rows) == {10, 100, 1000, 10000}
    assert rows[100]["sub_cost_usd"] == pytest.approx(100 * 0.03 / 18)
    assert rows[100]["root_cost_usd"] == pytest.approx(0.72)
    assert rows[100]["sub_share"] == pytest.approx((0.3 / 1.8) / (0.3 / 1.8 + 0.72))
    measured = e["measured"]  # the mean run as it was: 9 sub-calls, $0.015 + $0.72
    assert measured["sub_calls"] == 9 and measured["sub_cost_usd"] == pytest.approx(0.015)
    assert measured["total_cost_usd"] == pytest.approx(0.735)
    assert economics(1, 0.5, 0.0, 0)["rows"] == []  # no sub-calls: nothing to project from
    assert economics(1, None, 0.1, 5)["note"].startswith("cost unknown")


@pytest.mark.e2e
def test_plot_training_cli_draws_the_training_log(tmp_path: Path) -> None:
    pytest.importorskip("deeprepo.rl.plots.training")
    import json
    import struct

    from clihelp import run_cli

    log = tmp_path / "train.jsonl"
    log.write_text(
        "".join(
            json.dumps({"step": s, "reward_mean": 0.2 + 0.05 * s, "turns_mean": 6 - 0.2 * s}) + "\n"
            for s in range(10)
        )
    )
    png = tmp_path / "train.png"
    proc = run_cli("plot", "training", str(log), "-o", str(png))
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert 200 <= width <= 4000 and 200 <= height <= 4000


@pytest.mark.e2e
def test_plot_bench_refuses_a_folder_without_bench_json(tmp_path: Path) -> None:
    from clihelp import run_cli

    proc = run_cli("plot", "bench", str(tmp_path))
    assert proc.returncode == 2 and "no bench.json" in proc.stderr


def test_behaviour_labels_summarise_the_runs() -> None:
    from deeprepo.rl.bench.summary import _label_summary

    assert _label_summary([None, None]) == "-"
    assert _label_summary(["delegator", "delegator"]) == "delegator"
    assert _label_summary(["delegator", "lazy", "delegator"]) == "delegator 2, lazy 1"
    assert _label_summary(["lazy", None]) == "lazy 1, - 1"


def test_repositories_from_a_folder_find_their_ground_truth(tmp_path: Path) -> None:
    from deeprepo.rl.bench.config import RepoSpec
    from deeprepo.rl.bench.repos import resolve_repos

    (tmp_path / "repos" / "alpha").mkdir(parents=True)
    (tmp_path / "repos" / "beta").mkdir()
    (tmp_path / "repos" / "alpha.ground_truth.json").write_text("[]")
    tasks = tmp_path / "tasks" / "t1"
    (tasks / "repo").mkdir(parents=True)
    (tasks / "ground_truth.json").write_text("[]")
    repos = resolve_repos(
        [RepoSpec(dir="repos"), RepoSpec(dir="tasks"), RepoSpec(path="repos/beta", name="b2")],
        tmp_path,
        tmp_path / "out",
    )
    assert [(r.id, r.ground_truth is not None) for r in repos] == [
        ("alpha", True), ("beta", False), ("t1", True), ("b2", False),
    ]  # fmt: skip
    with pytest.raises(UsageError, match="both named 'beta'"):
        resolve_repos([RepoSpec(dir="repos"), RepoSpec(path="repos/beta")], tmp_path, tmp_path)
    with pytest.raises(UsageError, match="is not a directory"):
        resolve_repos([RepoSpec(path="nope")], tmp_path, tmp_path)
