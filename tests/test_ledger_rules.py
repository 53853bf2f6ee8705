"""The rules of the usage ledger (providers/ledger.py), the one source for tokens and dollars,
one per test, through its public methods (docs/testing.md)."""

from __future__ import annotations

import json

import pytest

from deeprepo.base.chat import Usage
from deeprepo.providers.ledger import Ledger, LLMCall, UsageRow


def test_rows_sum_each_role_and_model_in_order_of_first_appearance() -> None:
    """One row per (role, model), first seen first, with every token kind summed apart."""
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w", Usage(1, 2, 3, 4), cost_usd=0.5))
    ledger.record(LLMCall("root", "r", Usage(10, 20, 30, 40), cost_usd=1.0))
    ledger.record(LLMCall("sub", "w", Usage(100, 200, 300, 400), cost_usd=0.25))
    sub, root = ledger.rows()
    assert sub == UsageRow("sub", "w", calls=2, usage=Usage(101, 202, 303, 404), cost_usd=0.75)
    assert root == UsageRow("root", "r", calls=1, usage=Usage(10, 20, 30, 40), cost_usd=1.0)


def test_cached_and_rejected_replies_are_counted_apart() -> None:
    """A cached reply is a call and a cached call; a rejected one a call and a failed call."""
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w", cached=True, cost_usd=0.0))
    ledger.record(LLMCall("sub", "w", Usage(5, 0), error="refused", cost_usd=0.1))
    ledger.record(LLMCall("sub", "w", Usage(5, 1), cost_usd=0.1))
    (row,) = ledger.rows()
    assert (row.calls, row.cached_calls, row.failed_calls, row.failed_requests) == (3, 1, 1, 0)


def test_a_request_that_failed_without_a_reply_is_counted_not_billed() -> None:
    """A failed request adds to its row's failed_requests only; a row may hold nothing else."""
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w", Usage(1, 1), cost_usd=0.2))
    ledger.record_failure("sub", "w")
    ledger.record_failure("sub", "w")
    ledger.record_failure("root", "r")
    sub, root = ledger.rows()
    assert (sub.calls, sub.failed_requests, sub.cost_usd) == (1, 2, 0.2)
    assert root == UsageRow("root", "r", failed_requests=1)
    assert len(ledger) == 1 and ledger.total_cost() == 0.2


def test_one_unpriced_call_makes_the_total_unknown_but_keeps_the_known_part() -> None:
    """total_cost is None once any call's price is unknown; known_cost is the lower bound."""
    ledger = Ledger()
    assert ledger.total_cost() == 0.0 and ledger.known_cost() == 0.0
    ledger.record(LLMCall("root", "r", cost_usd=1.5))
    ledger.record(LLMCall("root", "r", cost_usd=None))
    ledger.record(LLMCall("root", "r", cost_usd=2.0))
    assert ledger.total_cost() is None and ledger.known_cost() == 3.5
    (row,) = ledger.rows()
    assert row.cost_usd is None  # the row's dollars are unknown too, even after a priced call


def test_usage_sums_one_role_or_all() -> None:
    """usage(role) sums that role's tokens; usage() every role's."""
    ledger = Ledger()
    ledger.record(LLMCall("root", "r", Usage(1, 2, 3, 4)))
    ledger.record(LLMCall("sub", "w", Usage(10, 20, 30, 40)))
    ledger.record(LLMCall("sub", "x", Usage(100, 200, 300, 400)))
    assert ledger.usage("sub") == Usage(110, 220, 330, 440)
    assert ledger.usage("root") == Usage(1, 2, 3, 4)
    assert ledger.usage() == Usage(111, 222, 333, 444)
    assert ledger.usage("none") == Usage()


def test_sub_calls_count_worker_replies_cached_ones_included() -> None:
    """sub_call_count counts every recorded worker reply, cached ones too, no root reply."""
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w", cached=True))
    ledger.record(LLMCall("sub", "w"))
    ledger.record(LLMCall("root", "r"))
    ledger.record_failure("sub", "w")
    assert ledger.sub_call_count() == 2
    assert [c.role for c in ledger.calls()] == ["sub", "sub", "root"]


def test_the_json_summary_holds_rows_totals_and_unpriced_calls() -> None:
    """to_json: the rows, the total (null when unknown), the known part, the unpriced count
    and the worker replies."""
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w", Usage(1, 2), cost_usd=0.5))
    ledger.record(LLMCall("sub", "w", Usage(1, 2), cost_usd=None))
    ledger.record(LLMCall("sub", "w", Usage(1, 2), cost_usd=None))
    data = json.loads(ledger.to_json(indent=2))
    row = UsageRow("sub", "w", calls=3, usage=Usage(3, 6), cost_usd=None)
    assert data == {
        "rows": [row.to_dict()],
        "total_cost_usd": None,
        "known_cost_usd": 0.5,
        "unpriced_calls": 2,
        "sub_calls": 3,
    }
    assert ledger.to_json(indent=2).startswith('{\n  "rows"')
    assert "\n" not in ledger.to_json()


def test_calls_returns_a_copy() -> None:
    """The list calls() returns is the caller's: changing it leaves the ledger alone."""
    ledger = Ledger()
    ledger.record(LLMCall("sub", "w"))
    ledger.calls().clear()
    assert len(ledger) == 1 and len(ledger.calls()) == 1


def test_a_rollouts_ledger_records_every_call_and_failure_in_its_parent_too() -> None:
    """A ledger with a parent adds each reply and each failed request to the parent as well,
    so an evaluation's ledger sums its rollouts' ledgers."""
    total = Ledger()
    first, second = Ledger(parent=total), Ledger(parent=total)
    first.record(LLMCall("sub", "w", Usage(1, 2), cost_usd=0.5))
    first.record_failure("sub", "w")
    second.record(LLMCall("root", "r", Usage(3, 4), cost_usd=1.0))
    second.record_failure("root", "r")
    assert total.calls() == first.calls() + second.calls()
    assert total.rows() == first.rows() + second.rows()
    assert (total.total_cost(), len(first), len(second)) == (1.5, 1, 1)


@pytest.mark.parametrize("model", [None, 3])
def test_a_usage_row_without_a_string_model_is_refused_saying_so(model: object) -> None:
    """A row read back from JSON needs its model's name as a string."""
    with pytest.raises(ValueError) as e:
        UsageRow.from_dict({"role": "sub", "model": model})
    assert str(e.value) == f"a usage row needs a string model, got {model!r}"
