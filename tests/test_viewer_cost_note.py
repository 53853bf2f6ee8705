"""The viewer's "nothing was spent" note names the built-in models only for offline runs."""

from __future__ import annotations

from pathlib import Path

from deeprepo.report.viewer.runview import RunView
from deeprepo.report.viewer.sections import chart_section


def test_an_offline_run_that_spent_nothing_names_the_built_in_models(tmp_path: Path) -> None:
    html = "".join(chart_section(RunView(tmp_path, start={"offline": True}, calls=[])))
    assert "Nothing was spent: built-in models and cached replies cost $0." in html


def test_a_provider_run_that_spent_nothing_does_not_claim_built_in_models(
    tmp_path: Path,
) -> None:
    """An error run with an Anthropic root spent $0 because its call failed, not because a
    built-in model ran: the page said "built-in models … cost $0"."""
    view = RunView(tmp_path, start={"offline": False}, metrics={"offline": False}, calls=[])
    html = "".join(chart_section(view))
    assert "built-in models" not in html
    assert "Nothing was spent: no call was billed" in html
