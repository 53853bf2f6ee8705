"""What the oracle worker writes in a finding: per-class templates, shared by true and false
findings so that no field tells them apart (``rl/env/oracle.py``).

A finding's title, detail and fix come from its bug class (CWE family) with variation:
several titles and reasons per class, several sentence frames, and the flagged code
quoted. Kind and CWE are drawn from the task's own kinds and CWEs for the class, severity
from a per-class distribution. Nothing here sees whether the finding is true.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import TypedDict

from deeprepo.findings.families import FamilyTable

__all__ = ["FALLBACK_FAMILIES", "RenderedFinding", "family_hint", "render_finding"]

# Bug classes to imitate when a task names none.
FALLBACK_FAMILIES = (
    "sql-injection",
    "command-injection",
    "path-traversal",
    "unsafe-deserialization",
    "xss",
    "ssrf",
    "hardcoded-secret",
    "weak-crypto",
    "missing-authorization",
    "insecure-randomness",
    "race-condition",
    "resource-leak",
    "logic-error",
)

# (titles, reasons) per class; a reason completes "This line ..." or stands as a sentence.
_TEXT: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sql-injection": (
        (
            "SQL injection",
            "Query built from untrusted input",
            "Unparameterised SQL statement",
            "SQL string assembled from caller data",
            "Possible SQL injection in query construction",
        ),
        (
            "the SQL text is assembled from a value the caller controls instead of being bound "
            "as a parameter",
            "a request value ends up inside the query string, so it can change the statement",
            "string formatting builds the query, which lets crafted input alter it",
        ),
    ),
    "command-injection": (
        (
            "OS command injection",
            "Shell command built from input",
            "Untrusted value reaches a shell",
            "Command injection via process call",
            "Possible command injection",
        ),
        (
            "a value from outside is passed to a shell, where metacharacters run extra commands",
            "the command line is built as a string from input and run through the shell",
            "an attacker-influenced argument reaches process execution without quoting",
        ),
    ),
    "code-injection": (
        (
            "Code injection",
            "Untrusted input evaluated as code",
            "Dynamic evaluation of external data",
            "Possible template or code injection",
        ),
        (
            "input is evaluated as code, so a crafted value runs arbitrary logic",
            "a string that can come from a request is passed to an evaluator",
        ),
    ),
    "path-traversal": (
        (
            "Path traversal",
            "File path built from user input",
            "Unchecked path component",
            "Directory traversal when opening files",
            "Possible path traversal",
        ),
        (
            "a name from the request is joined into a file path without checking it stays in "
            "the base directory",
            "'../' sequences in the input can reach files outside the intended folder",
            "the path is not normalised and checked before the file is opened",
        ),
    ),
    "unsafe-deserialization": (
        (
            "Unsafe deserialization",
            "Untrusted data deserialized",
            "Insecure deserialization of input",
            "Possible unsafe deserialization",
        ),
        (
            "data that can come from outside is loaded with a deserializer that can build "
            "arbitrary objects",
            "the payload is deserialized without a safe loader, which can run code",
        ),
    ),
    "xss": (
        (
            "Cross-site scripting",
            "Unescaped value written to HTML",
            "Reflected XSS",
            "HTML built from user input",
            "Possible cross-site scripting",
        ),
        (
            "a user-supplied value is put into HTML without escaping",
            "the response embeds input as markup, so a script in it runs in the browser",
            "output is built by string formatting instead of an escaping template",
        ),
    ),
    "ssrf": (
        (
            "Server-side request forgery",
            "Outbound request to a caller-chosen URL",
            "Unvalidated URL fetched by the server",
            "Possible SSRF",
        ),
        (
            "the server fetches a URL taken from the request, which can reach internal hosts",
            "the target address is not checked against an allow-list before the request",
        ),
    ),
    "hardcoded-secret": (
        (
            "Hard-coded secret",
            "Credential committed in source",
            "Secret literal in code",
            "Hard-coded key or password",
            "Possible hard-coded credential",
        ),
        (
            "a credential is written into the source, where anyone with the code can read it",
            "the secret value is a literal instead of coming from the environment",
        ),
    ),
    "weak-crypto": (
        (
            "Weak hashing",
            "Weak cryptographic primitive",
            "Password hashed with a fast hash",
            "Insecure hash algorithm",
            "Possible weak cryptography",
        ),
        (
            "a fast, broken hash is used where a slow salted one is needed",
            "the digest used here is unsuitable for security purposes",
        ),
    ),
    "missing-authorization": (
        (
            "Missing authorization check",
            "Handler acts without checking the caller",
            "Broken access control",
            "No ownership check before the update",
            "Possible missing authorisation",
        ),
        (
            "the action runs for any caller; nothing checks they may act on this resource",
            "the handler changes data without verifying the user's role or ownership",
        ),
    ),
    "authentication": (
        (
            "Broken authentication",
            "Credential or token not verified",
            "Weak session handling",
            "Possible authentication bypass",
        ),
        (
            "the token or credential is accepted without a proper check",
            "the session is not validated, so a forged value gets in",
        ),
    ),
    "insecure-randomness": (
        (
            "Insecure randomness",
            "Predictable token generation",
            "Non-cryptographic random source",
            "Possible predictable value",
        ),
        (
            "a non-cryptographic generator produces a value that must be unguessable",
            "the token comes from a predictable random source",
        ),
    ),
    "race-condition": (
        (
            "Race condition",
            "Check-then-act without a lock",
            "Unsynchronised read-modify-write",
            "Possible race condition",
        ),
        (
            "the value is read, checked and written back without holding a lock, so "
            "concurrent calls interleave",
            "two requests can pass the check before either writes",
        ),
    ),
    "resource-leak": (
        (
            "Resource leak",
            "Handle not closed on every path",
            "Connection or file left open",
            "Possible resource leak",
        ),
        (
            "the handle opened here is not closed when an error occurs",
            "the resource is acquired without a context manager or finally block",
        ),
    ),
    "logic-error": (
        (
            "Logic error",
            "Off-by-one in bounds",
            "Incorrect boundary condition",
            "Possible logic error",
        ),
        (
            "the bound is off by one, so one element too many or too few is handled",
            "the condition does not match what the surrounding code expects",
        ),
    ),
}
_GENERIC_REASONS = (
    "input that can be influenced from outside reaches this code unchecked",
    "this code trusts a value it should validate",
)
_FRAMES = (
    "`{code}`: {reason}.",
    "{Reason}. See `{code}`.",
    "In `{code}`, {reason}.",
    "{Reason}; an attacker who controls the input can abuse it.",
    "{Reason}.",
)
_FIX_FRAMES = ("{fix}", "{fix} Add a test for it.", "Suggested fix: {fix}")
_SEVERITY: dict[str, tuple[tuple[str, float], ...]] = {
    "high-impact": (("critical", 0.3), ("high", 0.5), ("medium", 0.2)),
    "medium-impact": (("high", 0.3), ("medium", 0.5), ("low", 0.2)),
}
_HIGH_IMPACT = frozenset(
    {
        "sql-injection",
        "command-injection",
        "code-injection",
        "unsafe-deserialization",
        "hardcoded-secret",
        "path-traversal",
        "ssrf",
        "missing-authorization",
        "authentication",
    }
)

_HINTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rx), fam)
    for rx, fam in (
        (
            r"\b(execute|executemany|raw|query)\s*\(|\b(SELECT|INSERT|UPDATE|DELETE)\b",
            "sql-injection",
        ),
        (r"subprocess|os\.system|\bpopen|child_process|\bexecSync|\bspawn\(", "command-injection"),
        (r"\beval\(|\bexec\(|new Function\(", "code-injection"),
        (r"pickle|yaml\.load|marshal\.|unserialize|deserializ", "unsafe-deserialization"),
        (r"\bopen\(|path\.join|readFile|send_?[Ff]ile|createReadStream", "path-traversal"),
        (r"innerHTML|render_template_string|Markup\(|dangerouslySetInnerHTML", "xss"),
        (r"requests\.(get|post)|urlopen|\bfetch\(|axios\.|https?\.get\(", "ssrf"),
        (
            r"(?i)(secret|passw(or)?d|token|api_?key)\w*\s*[:=]\s*[\"'][^\"']{6,}",
            "hardcoded-secret",
        ),
        (r"(?i)\bmd5\b|\bsha1\b|createHash\(", "weak-crypto"),
        (r"\brandom\.|Math\.random", "insecure-randomness"),
    )
)


def family_hint(line: str) -> str | None:
    """The bug class a line's API makes an auditor think of, if any."""
    for rx, fam in _HINTS:
        if rx.search(line):
            return fam
    return None


def _quote(code: str) -> str:
    code = " ".join(code.split())
    return code if len(code) <= 40 else code[:37] + "..."


class RenderedFinding(TypedDict):
    """What a worker says of one finding, besides where it is."""

    kind: str
    cwe: str | None
    severity: str
    title: str
    detail: str
    fix: str


def render_finding(
    family: str,
    code: str,
    rng: random.Random,
    *,
    families: FamilyTable,
    kinds: Sequence[str] = (),
    cwes: Sequence[str] = (),
) -> RenderedFinding:
    """``kind``, ``cwe``, ``severity``, ``title``, ``detail`` and ``fix`` of one finding of
    ``family`` on the line ``code``; ``kinds``/``cwes`` are the task's own for the class."""
    fam = families.families.get(family)
    titles, reasons = _TEXT.get(
        family, ((fam.title if fam else family.replace("-", " ").capitalize(),), ())
    )
    reason = rng.choice(reasons or _GENERIC_REASONS)
    frame = rng.choice(_FRAMES)
    detail = frame.format(
        code=_quote(code) or "this line", reason=reason, Reason=reason[:1].upper() + reason[1:]
    )
    fix = rng.choice(_FIX_FRAMES).format(fix=fam.fix) if fam and fam.fix else ""
    kind = rng.choice(list(kinds)) if kinds else family
    if cwes:
        cwe = rng.choice(list(cwes))
    elif fam and fam.cwes:
        cwe = min(fam.cwes, key=lambda c: int(c.split("-")[1]))
    else:
        cwe = None
    table = _SEVERITY["high-impact" if family in _HIGH_IMPACT else "medium-impact"]
    severity = rng.choices([s for s, _ in table], [w for _, w in table])[0]
    return {
        "kind": kind,
        "cwe": cwe,
        "severity": severity,
        "title": rng.choice(titles),
        "detail": detail,
        "fix": fix,
    }
