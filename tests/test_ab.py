"""benchmarks/ab.py: reading figures (the FIGURE convention and the legacy lines of older
benchmarks), the medians and ratios, and one run against HEAD on a tiny benchmark."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ab() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ab", ROOT / "benchmarks" / "ab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ab"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_figure_lines_are_read_and_other_lines_ignored() -> None:
    ab = _ab()
    out = "noise\nFIGURE rollouts_per_s=16.6 1/s higher\n  FIGURE exec_ms.process=0.2 ms \nFIGURE bad\n"
    assert ab.parse_figures(out) == [
        ab.Figure("rollouts_per_s", 16.6, "1/s", True),
        ab.Figure("exec_ms.process", 0.2, "ms", False),
    ]


def test_legacy_output_of_older_benchmarks_is_read() -> None:
    ab = _ab()
    kernel = (
        "[bwrap]\n  exec round trip      :   0.205 ms   ratio\n"
        "[process]\n  exec round trip      :   0.085 ms   ratio\n"
        "  cold start (no pool) :   73.58 ms   (reference)\n"
    )
    assert ab.figures_of("bench_kernel", kernel) == [
        ab.Figure("exec_ms.bwrap", 0.205, "ms"),
        ab.Figure("exec_ms.process", 0.085, "ms"),
        ab.Figure("start_cold_ms.process", 73.58, "ms"),
    ]
    rollouts = "rollouts/s (median of 3): 31.2 · target >= 10/s"
    assert ab.figures_of("bench_rollouts", rollouts) == [
        ab.Figure("rollouts_per_s", 31.2, "1/s", True)
    ]
    loader = "CPU per run: 0.1, 0.2 s (median 0.128)\npeak RSS growth: 1,234.5 MB for 20 MB"
    assert [(f.name, f.value) for f in ab.figures_of("bench_loader", loader)] == [
        ("load_cpu_s", 0.128),
        ("load_rss_growth_mb", 1234.5),
    ]
    # FIGURE lines win over legacy lines when a benchmark prints both.
    both = rollouts + "\nFIGURE rollouts_per_s=30 1/s higher\n"
    assert ab.figures_of("bench_rollouts", both) == [ab.Figure("rollouts_per_s", 30.0, "1/s", True)]


def test_summary_gives_medians_and_the_new_over_old_ratio() -> None:
    ab = _ab()
    samples: dict[str, object] = {}
    for side, values in (("old", (1.0, 9.0, 2.0)), ("new", (4.0, 3.0, 5.0))):
        for v in values:
            ab.collect(samples, "bench_x", side, [ab.Figure("t", v, "s")])
    ab.collect(samples, "bench_x", "new", [ab.Figure("only_new", 1.0, "s")])
    rows = ab.summary(samples)
    assert rows[0] == {
        "figure": "bench_x:t",
        "unit": "s",
        "better": "lower",
        "old_median": 2.0,
        "new_median": 4.0,
        "ratio": 2.0,
        "old_n": 3,
        "new_n": 3,
    }
    assert rows[1]["ratio"] is None and rows[1]["old_median"] is None
    table = ab.table(rows, "abc123").splitlines()
    assert table[0] == "| figure | unit | better | old (abc123) | new | new/old |"
    assert table[2] == "| bench_x:t | s | lower | 2 | 4 | 2.00 |"
    assert table[3] == "| bench_x:only_new | s | lower | - | 1 | - |"


@pytest.mark.e2e  # builds a worktree and starts kernels: a few seconds
def test_ab_runs_a_tiny_benchmark_against_head() -> None:
    before = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "ab.py"),
            "HEAD",
            "bench_kernel --mb 0.01 --starts 1 --execs 20",
            "--rounds",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["old"] == "HEAD" and report["rounds"] == 2
    exec_rows = [r for r in report["figures"] if r["figure"].startswith("bench_kernel:exec_ms.")]
    assert exec_rows, report
    for row in exec_rows:
        assert (row["old_n"], row["new_n"]) == (2, 2)
        assert row["old_median"] > 0 and row["new_median"] > 0 and row["ratio"] > 0
    after = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert after == before  # the temporary worktree is gone


@pytest.mark.e2e
def test_a_failed_run_is_named_and_the_other_runs_still_summed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An old revision's benchmark that fails (bbe29b3's rollouts hit its cgroup bug) used to
    end ab.py with no table: the failed run is named, the others keep their medians, exit 1."""
    ab = _ab()
    runs: list[Path] = []

    def run_bench(tree: Path, argv: list[str], timeout: float, script: Path | None = None) -> str:
        runs.append(tree)
        if len(runs) == 1:
            raise ab.BenchFailed("the kernel exited while starting")
        return "FIGURE exec_ms=0.5 ms lower\n"

    monkeypatch.setattr(ab, "run_bench", run_bench)
    code = ab.main(["HEAD", "bench_kernel", "--rounds", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["failed"] == ["round 1 old bench_kernel"]
    (row,) = report["figures"]
    assert (row["old_n"], row["new_n"]) == (1, 2) and row["ratio"] == 1.0


def test_a_benchmark_the_old_tree_lacks_runs_from_this_tree_only_when_portable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ab = _ab()
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "benchmarks").mkdir(parents=True)
    (new / "benchmarks").mkdir(parents=True)
    (old / "benchmarks" / "bench_both.py").write_text("# the old copy\n")
    (new / "benchmarks" / "bench_both.py").write_text(f"# {ab.PORTABLE}\n")
    (new / "benchmarks" / "bench_portable.py").write_text(f"# {ab.PORTABLE}\n")
    (new / "benchmarks" / "bench_new_api.py").write_text("from deeprepo import something_new\n")
    monkeypatch.setattr(ab, "ROOT", new)
    # A tree's own copy always wins; a missing one is borrowed only from a portable script.
    assert ab.script_for(old, "bench_both") == old / "benchmarks" / "bench_both.py"
    assert ab.script_for(old, "bench_portable") == new / "benchmarks" / "bench_portable.py"
    assert ab.script_for(old, "bench_new_api") is None
    assert ab.script_for(old, "bench_nowhere") is None
    # The benchmark that needs it says it.
    assert ab.PORTABLE in (ROOT / "benchmarks" / "bench_memory.py").read_text()
