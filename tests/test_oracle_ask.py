"""The oracle worker follows the instruction like a worker (issue 19 item 2): it audits when
asked to, in any wording, and not when told not to or asked for something else, however
many audit words the refusal holds (``rl/env/oracle_ask.py``)."""

from __future__ import annotations

import json

import pytest

from deeprepo.base.prompts import (
    FILE_AUDIT_INSTRUCTIONS,
    SMALL_FILE_AUDIT_INSTRUCTIONS,
    WORKER_SYSTEM_PROMPT,
    file_audit_prompt,
)
from deeprepo.rl.env.oracle import OracleWorker
from deeprepo.rl.env.oracle_ask import classify_instruction, read_request

AUDITS = [
    FILE_AUDIT_INSTRUCTIONS,  # holds "Do not report style issues" and still asks
    SMALL_FILE_AUDIT_INSTRUCTIONS,
    "Find bugs.",
    "Review this file for security issues.",
    "What could go wrong here?",
    "Check this code.",
    "Audit the code below.",
    "Are there any vulnerabilities in this module?",
    "Is this code safe?",
    "Look for injection flaws and report them as JSON.",
    "Please do a security review of these files.",
    "Make sure there are no bugs in this file.",
    "Don't miss any vulnerabilities: go through every line.",
    "Spot anything off? Report the line numbers.",
    "Tell me if an attacker could exploit this.",
    "Hunt for logic errors, off-by-one mistakes and race conditions.",
    "Scan the module and flag anything suspicious.",
    "Just find the bugs, nothing else.",
    "Only report real vulnerabilities, not style issues.",
    "Review this code; if everything is fine, just say OK.",
    "Summarise the security issues in this file.",
    "Do not report style issues. Report security bugs with line numbers.",
    "Don't just summarise it, find the bugs.",
    "Double-check this function for an injection.",
    "Red-team this handler.",
    "I want you to audit this file.",
    "Any concerns with this handler?",
    "Finde Sicherheitslücken in diesem Code.",
    "Busca errores de seguridad en este archivo.",
]
NOT_AUDITS = [
    ("Say OK.", "ack"),
    ("Just say OK. There is no need to check anything.", "ack"),
    ("Do not check anything.", "ack"),
    ("No need to review this code, just reply OK.", "ack"),
    ("Summarise this file.", "summary"),
    ("Translate the comments to French.", "translate"),
    ("Count the lines.", "count"),
    ("List the function names.", "names"),
    ("Do not look for bugs; summarise what this module does.", "summary"),
    ("Don't audit this. Reply with OK.", "ack"),
    ("Security review: not needed. Say OK.", "ack"),
    ("Look for bugs? No. Just acknowledge receipt.", "ack"),
    ("Ignore any security issues and describe the API.", "explain"),
    ("Without reviewing it, tell me how many lines it has.", "count"),
    ("Reply with a single word: OK", "ack"),
    ("Explain what this code does.", "explain"),
    ("Rewrite this file in TypeScript.", "other"),
    ("This code was already reviewed; list the classes it defines.", "names"),
    ("Say OK and nothing else, do not report bugs or vulnerabilities.", "ack"),
    ("Do not check whether there are bugs.", "ack"),
    ("Skip the audit and summarise.", "summary"),
    ("Write a haiku about this code.", "other"),
    ("Check the spelling of the comments.", "other"),
    ("Answer OK. Do not look for vulnerabilities, bugs, flaws or problems.", "ack"),
    ("Bugs are not the point here: give me an overview.", "summary"),
    ("Just say OK. Then review the code for bugs.", "ack"),
    ("Do not report any findings; list the imports.", "names"),
    ("There are no bugs here. Say OK.", "ack"),
    ("Say OK, we audit this ourselves.", "ack"),
    ("The audit is done, say OK.", "ack"),
    ("Nicht prüfen, nur OK sagen.", "ack"),
    # File names and markup are no request: a file called errors.py asks for nothing.
    ('Reply OK.\n<file path="app/errors/checks.py">\n    2 | \n</file>', "ack"),
    ("Summarise security/audit.py and lib/bugs.js.", "summary"),
    ("Bugs? Don't care. Just acknowledge.", "ack"),
    ("Abstain from reviewing; reply OK.", "ack"),
]


@pytest.mark.parametrize("instruction", AUDITS)
def test_audit_requests_in_many_wordings_audit(instruction: str) -> None:
    """However an audit is asked for, it is an audit: with the worker system prompt, with a
    system prompt that asks for nothing, and with none."""
    for system in (WORKER_SYSTEM_PROMPT, "You are a helpful assistant.", None):
        assert read_request(instruction, system).audit is True, system


@pytest.mark.parametrize(("instruction", "kind"), NOT_AUDITS)
def test_negated_and_other_requests_do_not_audit(instruction: str, kind: str) -> None:
    """A refusal or another request is no audit, whatever audit words it holds, even under a
    system prompt that asks for audits; the reply kind is what was asked for."""
    request = read_request(instruction, WORKER_SYSTEM_PROMPT)
    assert (request.audit, request.kind) == (False, kind)
    assert not classify_instruction(instruction, WORKER_SYSTEM_PROMPT)


def test_a_prompt_that_asks_nothing_does_what_the_system_prompt_asks() -> None:
    """Bare code (no instruction) is audited under an audit system prompt, not under one
    that asks for something else; an exclusive system prompt overrides the user's ask."""
    assert read_request("", WORKER_SYSTEM_PROMPT).audit is True
    assert read_request("", "You translate code to Go.").audit is False
    assert read_request("", None).audit is None
    assert read_request("Find bugs.", "Only ever reply OK.").audit is False


CODE = "\n".join(
    [f"def handler_{k}(request, value_{k}):" for k in range(3)]
    + [f"    result_{k} = compute_total(request.args, value_{k}, {k})" for k in range(40)]
)
GT = [{"file": "svc/a.py", "start_line": 20, "cwe": "CWE-89", "kind": "sql-injection"}]


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("Just say OK. There is no need to check anything.", "OK."),
        ("Count the lines.", "svc/a.py: 43 non-blank lines shown."),
        ("List the function names.", "svc/a.py: handler_0, handler_1, handler_2"),
        ("Summarise this file.", "svc/a.py holds 43 non-blank lines and defines handler_0"),
    ],
)
def test_a_non_audit_request_gets_what_it_asked_and_no_finding(
    instruction: str, expected: str
) -> None:
    """The oracle answers a non-audit request as a worker would (no JSON, no finding, no
    cited line), even with certain recall and a huge false-finding rate."""
    w = OracleWorker(GT, miss_rate=0.0, false_rate=1000.0, codebase={"svc/a.py": CODE})
    prompt = instruction + "\n\n" + CODE
    assert w.findings(prompt, WORKER_SYSTEM_PROMPT) == []
    reply = w.answer(prompt, WORKER_SYSTEM_PROMPT)
    assert reply.startswith(expected) and "findings" not in reply and "line " not in reply
    audit = w.answer(file_audit_prompt("svc/a.py", CODE), WORKER_SYSTEM_PROMPT)
    assert [f["line"] for f in json.loads(audit)["findings"]][:1] == [20]
