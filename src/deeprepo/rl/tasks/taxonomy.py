"""The bug taxonomy as data: every planted bug kind, its CWE and its CWE family.

A finding matches a ground-truth entry when its CWE is in the entry's
``acceptable_cwes`` (DESIGN §6), so the family lists here decide how strict the
grading is: they hold the CWEs a careful reviewer could reasonably give the
same defect (e.g. weak password hashing is CWE-916, CWE-328 or CWE-327). Each
list contains the grader's family (``deeprepo/data/cwe_families.json``) of its
canonical CWE, which a test checks; deserialization also accepts the
code-injection CWEs because one JavaScript variant evaluates the payload.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BugKind:
    """One kind of planted defect."""

    key: str  # kebab-case, the ``kind`` of ground-truth entries and findings
    title: str
    cwe: str  # the canonical CWE, "CWE-89"
    acceptable_cwes: tuple[str, ...]  # the CWE family a finding may cite; starts with ``cwe``
    severity: str  # critical | high | medium | low
    fix: str  # one line, the remedy a report should propose


def _kind(key: str, title: str, cwes: tuple[int, ...], severity: str, fix: str) -> BugKind:
    ids = tuple(f"CWE-{n}" for n in cwes)
    return BugKind(key, title, ids[0], ids, severity, fix)


BUG_KINDS: dict[str, BugKind] = {
    k.key: k
    for k in (
        _kind(
            "sql-injection",
            "SQL injection",
            (89, 564, 943),
            "critical",
            "pass values as query parameters, never by string formatting",
        ),
        _kind(
            "command-injection",
            "OS command injection",
            (78, 77, 88),
            "critical",
            "run the program with an argument list and no shell",
        ),
        _kind(
            "path-traversal",
            "Path traversal",
            (22, 23, 36, 73),
            "high",
            "resolve the path and check that it stays inside the base directory",
        ),
        _kind(
            "unsafe-deserialization",
            "Deserialization of untrusted data",
            (502, 94, 95),
            "critical",
            "parse untrusted data with a data-only format (JSON, yaml.safe_load)",
        ),
        _kind(
            "xss",
            "Cross-site scripting",
            (79, 80, 116),
            "high",
            "escape untrusted values before they are written into HTML",
        ),
        _kind(
            "ssrf",
            "Server-side request forgery",
            (918,),
            "high",
            "only fetch URLs whose host is on an allow-list",
        ),
        _kind(
            "weak-password-hash",
            "Weak password hashing",
            (916, 328, 327, 759, 760, 326, 261),
            "high",
            "hash passwords with bcrypt, scrypt, argon2 or PBKDF2 with a per-user salt",
        ),
        _kind(
            "hardcoded-secret",
            "Hard-coded credential",
            (798, 259, 321, 547),
            "high",
            "read secrets from the environment or a secret store",
        ),
        _kind(
            "missing-authorization",
            "Missing authorisation check",
            (862, 285, 863, 639, 306),
            "high",
            "check that the caller is authenticated and allowed before acting",
        ),
        _kind(
            "insecure-randomness",
            "Insecure randomness for a security token",
            (330, 338, 331, 340),
            "medium",
            "generate tokens with a CSPRNG (secrets / crypto.randomBytes)",
        ),
        _kind(
            "race-condition",
            "Race condition on shared state",
            (362, 366, 367, 364, 667),
            "medium",
            "make the read-modify-write atomic (a lock or a single conditional UPDATE)",
        ),
        _kind(
            "resource-leak",
            "Resource leak",
            (772, 404, 775, 400, 401, 459),
            "low",
            "release the resource on every path (with-statement / try-finally)",
        ),
        _kind(
            "off-by-one",
            "Off-by-one / incorrect calculation",
            (193, 682, 129, 131, 670),
            "low",
            "fix the boundary arithmetic",
        ),
    )
}


def bug_kind(key: str) -> BugKind:
    """The kind record for ``key``; ``KeyError`` names the known kinds."""
    try:
        return BUG_KINDS[key]
    except KeyError:
        raise KeyError(f"unknown bug kind {key!r}; known: {', '.join(sorted(BUG_KINDS))}") from None


def cwe_family(cwe: str) -> tuple[str, ...]:
    """All CWEs acceptable for the kind whose canonical or family CWE is ``cwe`` (empty if none)."""
    for kind in BUG_KINDS.values():
        if cwe in kind.acceptable_cwes:
            return kind.acceptable_cwes
    return ()
