"""``deeprepo models``: the price table's models and the built-ins, with their provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run_cli

import deeprepo.rl  # noqa: F401  (registers the research policies the CLI lists)
from deeprepo.builtin import POLICIES
from deeprepo.providers.catalog import known_models
from deeprepo.providers.prices import PriceTable

PACKAGED = json.loads(
    (Path(__file__).parents[1] / "src" / "deeprepo" / "data" / "prices.json").read_text()
)["models"]


def test_catalog_lists_every_priced_model_then_the_builtins() -> None:
    rows = known_models(PriceTable.load())
    names = [r.name for r in rows]
    assert names[: len(PACKAGED)] == sorted(PACKAGED)
    assert set(names[len(PACKAGED) :]) == {f"scripted/{p}" for p in POLICIES} | {
        "static",
        "oracle",
    }
    for r in rows[len(PACKAGED) :]:
        assert r.kind == "built-in" and (r.input, r.output, r.cache_read, r.cache_write) == (
            0.0,
            0.0,
            0.0,
            0.0,
        )
    opus = next(r for r in rows if r.name == "anthropic/claude-opus-4-6")
    assert (opus.input, opus.output, opus.cache_read, opus.cache_write) == (5.0, 25.0, 0.5, 6.25)
    assert opus.context_window == 200_000 and opus.as_of == "2026-06" and opus.source
    minimax = next(r for r in rows if r.name == "openrouter/minimax/minimax-m2.5")
    # No context size and no cache rates are listed: unknown and input-priced, said as such.
    assert minimax.context_window is None
    assert not minimax.cache_read_listed and minimax.cache_read == minimax.input
    assert [r.name for r in known_models(PriceTable.load(), "GPT-5-M")] == ["openai/gpt-5-mini"]


def test_a_user_price_file_takes_over_the_provenance(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "models": {
                    "openai/gpt-5-mini": {"input": 0.3, "output": 2.5},
                    "anthropic/claude-opus-4-6": {"context_window": 1_000_000},
                    "acme/new": {
                        "input": 1,
                        "output": 2,
                        "source": "acme",
                        "as_of": "2026-11",
                        "source_url": "https://acme.example/prices",
                    },
                }
            }
        )
    )
    rows = {r.name: r for r in known_models(PriceTable.load(path))}
    mini = rows["openai/gpt-5-mini"]
    assert (mini.input, mini.output) == (0.3, 2.5)
    assert mini.source == f"prices file {path}" and mini.as_of is None
    opus = rows["anthropic/claude-opus-4-6"]  # only the context changed: the source stands
    assert opus.context_window == 1_000_000 and opus.source and opus.as_of == "2026-06"
    new = rows["acme/new"]
    assert (new.source, new.as_of, new.source_url) == (
        "acme",
        "2026-11",
        "https://acme.example/prices",
    )


@pytest.mark.e2e
def test_models_command_table_json_and_filter() -> None:
    proc = run_cli("models")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    opus = next(ln for ln in lines if "anthropic/claude-opus-4-6" in ln)
    assert "$5" in opus and "$25" in opus and "$6.25" in opus and "200,000" in opus
    assert "2026-06" in opus and "URL unknown" in opus
    minimax = next(ln for ln in lines if "minimax-m2.5" in ln)
    assert minimax.split()[5] == "unknown" and "$0.12*" in minimax  # the context column
    static = next(ln for ln in lines if ln.startswith("static "))
    assert "built-in" in static and static.count("$0") == 4
    assert "never 0" in proc.stdout

    proc = run_cli("models", "claude", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == sorted(n for n in PACKAGED if "claude" in n)
    assert all(r["kind"] == "priced" and r["source_url"] is None for r in rows)

    proc = run_cli("models", "scripted/", "--json")
    assert {r["name"] for r in json.loads(proc.stdout)} == {f"scripted/{p}" for p in POLICIES}


@pytest.mark.e2e
def test_models_command_no_match_is_one_line_and_exit_2() -> None:
    proc = run_cli("models", "no-such-model-xyz")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no known model matches" in proc.stderr
    proc = run_cli("models", "--prices", "/nonexistent/prices.json")
    assert proc.returncode == 2 and "cannot read price file" in proc.stderr
