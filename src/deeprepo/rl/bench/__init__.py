"""``deeprepo bench``: configurations (root × sub × prompt, and baselines) run on the same
repositories with repetitions, within budgets, compared in ``bench.md`` / ``bench.json``
and a cost-against-quality plot. See docs/bench.md."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeprepo.base.safefile import write_atomic
from deeprepo.rl.bench.config import BenchFile, ConfigSpec, RepoSpec, load_bench_file
from deeprepo.rl.bench.render import render_markdown, status_line
from deeprepo.rl.bench.runner import BenchPlan, CellResult, EventSink, prepare, run_bench
from deeprepo.rl.bench.summary import summarize

__all__ = [
    "BenchFile",
    "BenchOutcome",
    "BenchPlan",
    "CellResult",
    "ConfigSpec",
    "RepoSpec",
    "execute",
    "load_bench_file",
    "prepare",
    "status_line",
    "write_bench_outputs",
]


@dataclass(frozen=True)
class BenchOutcome:
    data: dict[str, Any]  # bench.json
    results: list[CellResult]
    json_path: Path
    md_path: Path
    png_path: Path | None
    plot_error: str = ""


def _write(path: Path, text: str) -> None:
    write_atomic(path, text)


def write_bench_outputs(
    plan: BenchPlan, results: list[CellResult], *, interrupted: bool = False
) -> BenchOutcome:
    """Write bench.json, bench.md and bench.png into the bench's folder."""
    data = summarize(plan, results, interrupted=interrupted)
    png: Path | None = None
    plot_error = ""
    try:
        from deeprepo.rl.plots.bench import plot_bench

        png = plot_bench(data, plan.out_dir / "bench.png")
    except Exception as exc:  # a plot must not cost the tables; say why it is missing
        png, plot_error = None, " ".join(str(exc).split())[:200] or type(exc).__name__
        warnings.warn(f"bench.png not written: {plot_error}", RuntimeWarning, stacklevel=2)
    data["plot"] = png.name if png is not None else None
    json_path, md_path = plan.out_dir / "bench.json", plan.out_dir / "bench.md"
    _write(json_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    _write(md_path, render_markdown(data))
    return BenchOutcome(data, results, json_path, md_path, png, plot_error)


async def execute(plan: BenchPlan, on_event: EventSink | None = None) -> BenchOutcome:
    """Run the bench and write its outputs; an interrupted bench writes what finished
    (its outputs say so) before the interruption propagates."""
    written: list[BenchOutcome] = []

    def finish(results: list[CellResult], interrupted: bool) -> None:
        written.append(write_bench_outputs(plan, results, interrupted=interrupted))

    await run_bench(plan, on_event, finish)
    return written[0]
