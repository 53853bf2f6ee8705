"""The exit codes of every ``deeprepo`` command, in one place (also in ``--help``)."""

from __future__ import annotations

from deeprepo.base.records import RunResult

__all__ = [
    "ERROR",
    "EXIT_CODES_HELP",
    "FINDINGS",
    "INCOMPLETE",
    "INTERRUPTED",
    "OK",
    "USAGE",
    "for_result",
]

OK = 0  # the run is complete: an answer, and every file of the audit set audited
ERROR = 1  # the run stopped on an error (a model or the sandbox failed, nothing reachable)
USAGE = 2  # bad command line: an option, a path, a model spec (one line says which)
INCOMPLETE = 3  # outputs written, but not every file was audited, findings were cut, or no answer
FINDINGS = 4  # --fail-on: findings at or above the threshold (outputs written)
INTERRUPTED = 130  # Ctrl-C or SIGTERM: partial outputs written, marked incomplete

EXIT_CODES_HELP = (
    "Exit codes: 0 complete; 1 stopped on an error; 2 bad usage; 3 incomplete (not every "
    "file audited or read by its analyzers, findings cut, or no answer: a budget, a limit, a "
    "timeout); 4 findings at or above "
    "--fail-on; 130 interrupted (Ctrl-C or SIGTERM)."
)


def for_result(result: RunResult, gated: int = 0) -> int:
    """The exit code a finished run ends the process with; ``gated`` is the number of
    findings at or above ``--fail-on``. A gate that trips outranks an incomplete run: the
    verdict (block) is certain whatever was left unread, while an incomplete run with no
    such finding still exits 3, never 0."""
    if result.stop_reason == "interrupted":
        return INTERRUPTED
    if result.stop_reason == "error" or (result.sub_calls == 0 and result.sub_calls_failed > 0):
        return ERROR  # the root failed, or every worker call did: nothing was analysed
    if gated:
        return FINDINGS
    return OK if result.complete else INCOMPLETE
