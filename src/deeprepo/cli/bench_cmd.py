"""``deeprepo bench BENCH.toml``: parse, call :mod:`deeprepo.rl.bench`, render."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from deeprepo.cli import exits
from deeprepo.cli.executor_option import AddressOption, ExecutorChoice, ExecutorOption
from deeprepo.cli.http_option import HttpClientOption, run_env
from deeprepo.cli.signals import run_interruptible
from deeprepo.report.text import console
from deeprepo.rl.bench import BenchOutcome, CellResult, execute, prepare, status_line

err = Console(stderr=True)
# Piped or redirected output keeps whole table rows instead of folding them at 80 columns.
out = Console() if Console().is_terminal else Console(width=200)


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


class _Progress:
    """One line per cell as it starts and ends (stderr, so stdout keeps the table)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.ended = 0

    def __call__(self, event: str, r: CellResult, data: Mapping[str, Any]) -> None:
        label = console(r.cell.label)
        if event == "start":
            err.print(f"[dim]start[/] {label}", highlight=False)
            return
        self.ended += 1
        head = f"[{self.ended}/{self.total}] {label}:"
        if r.status != "done" or r.metrics is None:
            err.print(
                f"{console(head)} [bold yellow]{r.status}[/] {console(r.reason)}", highlight=False
            )
            return
        m = r.metrics
        audited = f"audited {m.get('files_covered', 0)} of {m.get('coverable_files', 0)} files"
        state = "complete" if m.get("complete") else "incomplete"
        err.print(
            f"{console(head)} {state} · {audited} · {_usd(m.get('total_cost_usd'))} · "
            f"{m.get('sub_calls', 0)} sub-calls · {len(r.findings)} findings · "
            f"{float(data.get('seconds', 0.0)):.1f}s",
            highlight=False,
        )


def _render(outcome: BenchOutcome) -> None:
    data = outcome.data
    table = Table(box=None, header_style="bold")
    graded = any(c["grading"] for c in data["configs"])
    cols = ["configuration", "runs", "$/run", "sub-calls", "files", "findings", "unique", "turns"]
    cols += ["behaviour"] + (["P", "R", "F1"] if graded else [])
    for col in cols:
        table.add_column(col, justify="left" if col in ("configuration", "behaviour") else "right")
    for c in data["configs"]:

        def num(v: float | None) -> str:
            return "-" if v is None else f"{v:,.1f}".removesuffix(".0")

        row = [
            console(c["name"]),
            f"{c['runs']}/{c['cells']}",
            _usd(c["cost"]["mean_total_usd"]),
            num(c["sub_calls_mean"]) if c["mode"] == "rlm" else "n/a",
            num(c["files_covered_mean"]),
            num(c["findings_mean"]),
            "-" if c["unique_finds"] is None else str(c["unique_finds"]),
            num(c["turns_mean"]),
            console(c["behaviour"]),
        ]
        if graded:
            g = c["grading"]
            row += (
                ["-"] * 3 if g is None else [f"{g[k]:.3f}" for k in ("precision", "recall", "f1")]
            )
        table.add_row(*row)
    out.print(table)
    t = data["totals"]
    judge = f", judge {_usd(t['judge_cost_usd'])} apart" if t["judge_cost_usd"] is not None else ""
    out.print(f"spent {_usd(t['cost_usd'])} (sum of the runs' ledgers){judge}", highlight=False)
    code = _exit_code(data)
    style = "green" if code == exits.OK else "bold yellow"
    out.print(f"[{style}]{console(status_line(data))}[/]", highlight=False)
    if outcome.plot_error:
        out.print(f"bench.png not written: {console(outcome.plot_error)}", highlight=False)
    written = [outcome.md_path, outcome.json_path] + (
        [outcome.png_path] if outcome.png_path else []
    )
    out.print("Wrote " + ", ".join(console(p) for p in written), highlight=False, soft_wrap=True)


def _exit_code(data: Mapping[str, Any]) -> int:
    return exits.OK if data["complete"] else exits.INCOMPLETE


def bench_command(
    bench_file: Annotated[
        Path,
        typer.Argument(
            metavar="BENCH.toml",
            help="BENCH.toml: configurations, repositories, repetitions, budgets (docs/bench.md).",
        ),
    ],
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Bench folder (default deeprepo-runs/bench-<toml name>). Rerunning into it "
            "skips finished cells.",
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Also grade each report with this model and a rubric; its cost is recorded apart.",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option("--judge-base-url", help="OpenAI-compatible server for --judge.")
    ] = None,
    http_client: HttpClientOption = None,
    executor: ExecutorOption = ExecutorChoice.local,
    address: AddressOption = None,
) -> None:
    """Run configurations (root x sub x prompt, and single-call baselines) on the same
    repositories and compare cost, coverage, findings, unique finds and, with a ground
    truth, precision / recall / F1. Writes bench.md, bench.json and bench.png; every run is
    a normal run folder under runs/. Exit 0 when every cell finished, 3 when the bench is
    partial (failed or skipped cells: rerun to retry them), 130 when interrupted."""
    plan = prepare(
        bench_file,
        out_dir,
        judge=judge,
        judge_base_url=judge_base_url,
        env=run_env(http_client),
        executor=executor.value,
        address=address,
    )
    n_conf, n_repo = len(plan.bench.config), len(plan.repos)
    err.print(
        f"bench: {n_conf} configuration(s) x {n_repo} repositor{'y' if n_repo == 1 else 'ies'} x "
        f"{plan.bench.bench.repetitions} repetition(s) = {len(plan.cells)} cells, "
        f"{plan.bench.bench.max_concurrent} at a time -> {console(plan.out_dir)}",
        highlight=False,
    )
    try:
        outcome = run_interruptible(execute(plan, on_event=_Progress(len(plan.cells))))
    except KeyboardInterrupt:
        err.print(
            f"interrupted; finished cells are kept and bench.md/bench.json say what ran "
            f"({console(plan.out_dir)}); rerun the same command to continue",
            highlight=False,
        )
        raise typer.Exit(exits.INTERRUPTED) from None
    _render(outcome)
    raise typer.Exit(_exit_code(outcome.data))


__all__ = ["bench_command"]
