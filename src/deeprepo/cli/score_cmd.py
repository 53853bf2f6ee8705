"""``deeprepo score FINDINGS GROUND_TRUTH``: precision, recall and F1 against a ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deeprepo.base.errors import UsageError
from deeprepo.findings.grading import (
    DEFAULT_TOLERANCE,
    Score,
    grade,
    load_findings,
    load_ground_truth,
)


def score_command(
    findings: Path = typer.Argument(
        ..., help="Findings JSON: a list, or a report with 'findings'."
    ),
    ground_truth: Path = typer.Argument(..., help="ground_truth.json of the task."),
    tolerance: int = typer.Option(
        DEFAULT_TOLERANCE, "--tolerance", min=0, help="Lines a finding may be off the bug's range."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print JSON (with matched pairs) instead of tables."
    ),
) -> None:
    """Grade findings against a ground truth: precision, recall, F1, per CWE family, decoys hit."""
    for label, path in (("FINDINGS", findings), ("GROUND_TRUTH", ground_truth)):
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise UsageError(f"{label} {path} {what}; give a JSON file")
    score = grade(load_findings(findings), load_ground_truth(ground_truth), tolerance=tolerance)
    if json_out:
        typer.echo(json.dumps(score.to_dict(), indent=2))
        return
    _print_tables(score)


def _print_tables(score: Score) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    summary = Table(title=f"Score (tolerance ±{score.tolerance} lines)", show_header=False)
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    for name, value in (
        ("precision", f"{score.precision:.3f}"),
        ("recall", f"{score.recall:.3f}"),
        ("F1", f"{score.f1:.3f}"),
        ("true positives", str(score.tp)),
        ("false positives", str(score.fp)),
        ("missed (false negatives)", str(score.fn)),
        ("decoys hit", f"{score.decoys_hit} of {score.decoys_total}"),
    ):
        summary.add_row(name, value)
    if score.duplicates_dropped:
        summary.add_row("exact duplicates dropped", str(score.duplicates_dropped))
    console.print(summary)

    families = Table(title="Per CWE family")
    for col in ("family", "TP", "FP", "FN", "precision", "recall"):
        families.add_column(col, justify="left" if col == "family" else "right")
    for f in score.per_family:
        families.add_row(
            f.family, str(f.tp), str(f.fp), str(f.fn), f"{f.precision:.2f}", f"{f.recall:.2f}"
        )
    console.print(families)
