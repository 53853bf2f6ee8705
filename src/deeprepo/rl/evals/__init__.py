"""Evaluation results and the statistics that compare runs (``deeprepo compare``)."""

from deeprepo.rl.evals.compare import (
    ComparisonTable,
    PairDelta,
    RunSummary,
    compare_runs,
    default_pairs,
    render_markdown,
    render_rich,
    summarize_run,
)
from deeprepo.rl.evals.results import RolloutResult, load_results, write_results
from deeprepo.rl.evals.stats import DiffTest, diff_test, mean, separation_warning, std

__all__ = [
    "ComparisonTable",
    "DiffTest",
    "PairDelta",
    "RolloutResult",
    "RunSummary",
    "compare_runs",
    "default_pairs",
    "diff_test",
    "load_results",
    "mean",
    "render_markdown",
    "render_rich",
    "separation_warning",
    "std",
    "summarize_run",
    "write_results",
]
