"""The rules of what a run must audit and why it is incomplete (orchestrator/audit.py), one per
test (docs/testing.md)."""

from __future__ import annotations

import pytest

from deeprepo.base.errors import UsageError
from deeprepo.codebase.scope import SCOPES
from deeprepo.findings.coverage import shown_in
from deeprepo.orchestrator.audit import (
    AUDIT_MIN_FRACTION,
    DEFAULT_AUDIT_SCOPES,
    DispatchStats,
    audit_set,
    audited_files,
    parse_scopes,
    shortfall,
)


def test_docs_are_the_only_scope_not_audited_by_default() -> None:
    """By default every scope is audited but docs: prose is not code."""
    assert frozenset(SCOPES) - {"docs"} == DEFAULT_AUDIT_SCOPES
    assert parse_scopes() == DEFAULT_AUDIT_SCOPES


def test_scope_flags_take_lists_in_any_case_and_spacing() -> None:
    """--include-scope takes comma lists, any case, spaces and empty parts ignored."""
    assert parse_scopes(["Source, TEST", " config,,"]) == {"source", "test", "config"}
    assert parse_scopes(["source,,test, ,example"]) == {"source", "test", "example"}
    assert parse_scopes(["all"]) == frozenset(SCOPES)
    assert parse_scopes(["ALL"], ["docs, Test"]) == frozenset(SCOPES) - {"docs", "test"}


def test_exclude_removes_from_the_default_set() -> None:
    """--exclude-scope alone removes from the default set, not from every scope."""
    assert parse_scopes((), ["test"]) == DEFAULT_AUDIT_SCOPES - {"test"}


def test_an_unknown_scope_names_the_flag_and_the_choices() -> None:
    """A misspelt scope is a usage error naming the flag, the value and the choices."""
    with pytest.raises(UsageError) as e:
        parse_scopes(["source", " Sorce "])
    assert str(e.value).startswith("--include-scope: unknown scope 'Sorce'; choose from source,")
    assert str(e.value).endswith(", vendored or all")
    with pytest.raises(UsageError, match=r"^--exclude-scope: unknown scope 'x'"):
        parse_scopes((), ["x"])


def test_no_scope_left_is_a_usage_error() -> None:
    """Excluding every audited scope leaves nothing to audit: a usage error."""
    with pytest.raises(UsageError) as e:
        parse_scopes(["test"], ["test"])
    assert str(e.value) == "--include-scope/--exclude-scope leave no scope to audit"


def test_the_audit_set_is_the_sorted_non_empty_files_of_audited_scopes() -> None:
    """Empty or blank files and files of other scopes are out; a file with no scope is
    source."""
    files = {"b.py": "x = 1\n", "a.py": "y = 2\n", "e.py": " \n\t", "t.py": "z\n", "u.py": "w\n"}
    scopes = {"b.py": "source", "a.py": "source", "e.py": "source", "t.py": "test"}
    assert audit_set(files, scopes, {"source"}) == ["a.py", "b.py", "u.py"]
    assert audit_set(files, scopes, {"test"}) == ["t.py"]


def body(n: int) -> str:
    return "\n".join(f"value_{i} = compute({i})" for i in range(n))


@pytest.mark.parametrize(("sent", "audited"), [(10, True), (9, True), (8, False)])
def test_a_file_is_audited_when_nine_tenths_of_its_lines_reached_a_worker(
    sent: int, audited: bool
) -> None:
    """Audited means at least 90% of a file's non-trivial lines were in answered prompts, in order."""
    assert AUDIT_MIN_FRACTION == 0.9
    files = {"a.py": body(10)}
    prompt = body(sent)
    expected = ["a.py"] if audited else []
    assert audited_files(files, [prompt], ["a.py"]) == expected
    assert audited_files(files, [], ["a.py"], shown=shown_in([prompt])) == expected


def test_only_the_asked_files_that_exist_are_reported_sorted() -> None:
    """Audited files are among those asked about, sorted; a path with no file is skipped."""
    files = {"b.py": body(3), "a.py": body(3), "c.py": body(3)}
    assert audited_files(files, [body(3)], ["b.py", "a.py", "gone.py"]) == ["a.py", "b.py"]


def why(
    unaudited: int = 0,
    answered: bool = True,
    stop_reason: str = "answer_ready",
    stop_detail: str = "",
    **stats: object,
) -> str:
    return shortfall(
        unaudited=unaudited,
        answered=answered,
        stop_reason=stop_reason,
        stop_detail=stop_detail,
        stats=DispatchStats(**stats),  # type: ignore[arg-type]
    )


def test_a_complete_run_has_no_shortfall() -> None:
    """Answered and nothing unaudited: no reason, whatever else happened on the way."""
    assert why(refused=3, failed=2, stop_reason="max_turns", stop_detail="x") == ""


def test_an_interrupted_run_says_how_to_continue() -> None:
    """Interrupted says so and names --resume, and nothing else."""
    assert why(unaudited=2, stop_reason="interrupted", refused=1) == (
        "interrupted (Ctrl-C or SIGTERM); continue with --resume"
    )


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("sub_calls", "2 worker prompts refused by the sub-calls budget (raise --max-sub-calls)"),
        ("cost", "2 worker prompts refused by the cost budget (raise --max-cost)"),
        ("timeout", "2 worker prompts refused by the timeout budget (raise --timeout)"),
        ("tokens", "2 worker prompts refused by the tokens budget (raise the budget)"),
        (None, "2 worker prompts refused by a budget (raise the budget)"),
        ("", "2 worker prompts refused by a budget (raise the budget)"),
    ],
)
def test_refused_prompts_name_the_budget_and_its_option(kind: str | None, text: str) -> None:
    """Prompts refused by a budget: how many, which budget, and the option to raise it; a
    budget of no known kind is named as it is, or as "a budget" when it has no name."""
    assert why(unaudited=1, refused=2, budget_kind=kind) == text


def test_failed_calls_are_counted_with_the_first_error_when_known() -> None:
    """Failed worker calls: how many, and the first error when there is one."""
    assert why(unaudited=1, failed=3) == "3 worker calls failed"
    assert why(unaudited=1, failed=3, first_error="boom") == "3 worker calls failed; first: boom"


@pytest.mark.parametrize(
    ("reason", "detail", "text"),
    [
        ("max_turns", "no answer", "stopped on max_turns: no answer (raise --max-turns)"),
        ("timeout", "ran past 5s", "stopped on timeout: ran past 5s (raise --timeout)"),
        ("timeout", "past --timeout 5", "stopped on timeout: past --timeout 5"),
        ("budget", "cost over $1", "stopped on budget: cost over $1"),
        ("error", "root model failed", "stopped on error: root model failed"),
    ],
)
def test_a_stop_names_its_reason_and_the_option(reason: str, detail: str, text: str) -> None:
    """A stop on a limit or an error is named, with the option that raises the limit."""
    assert why(answered=False, stop_reason=reason, stop_detail=detail) == text


def test_a_stop_without_detail_is_not_a_reason_on_its_own() -> None:
    """No stop detail: the reason falls back to the unanswered root."""
    assert why(answered=False, stop_reason="budget") == "the root never set its answer (budget)"


def test_reasons_are_joined_and_fallbacks_only_stand_alone() -> None:
    """All causes are listed, joined by '; '; the unsent-files and no-answer fallbacks appear
    only when nothing else explains the shortfall."""
    assert why(unaudited=2, answered=False, refused=1, failed=1, budget_kind="cost") == (
        "1 worker prompts refused by the cost budget (raise --max-cost); 1 worker calls failed"
    )
    assert why(unaudited=2, answered=False) == (
        "the root did not send them to a worker (try --prompt exhaustive, or "
        "--exclude-scope for scopes you do not need)"
    )
    assert why(answered=False, stop_reason="answer_ready") == (
        "the root never set its answer (answer_ready)"
    )
