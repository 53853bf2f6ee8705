"""The reference root behaviours the reward is calibrated against (DESIGN §5): a root that
reads two files and answers (``lazy``), one that reads everything itself
(``no-delegation``), one that explores for many turns (``over-explorer``) and one that
repeats a syntax error (``syntax-errors``). Each is a list of turn programs.
"""

from __future__ import annotations

from deeprepo.builtin.expert_helpers import HELPERS
from deeprepo.builtin.expert_report import REPORT

LAZY = [
    # Reads the two biggest files itself and answers without delegating anything.
    r"""
picked = [p for p, n in metadata["largest_files"][:2]]
for p in picked:
    print("=== " + p)
    print(codebase[p][:2500])
""",
    r"""
set_answer("# Quick review\n\nI read " + " and ".join(picked) + ". The code looks reasonable; "
           "no obvious problems stood out in what I read.\n")
""",
]

NO_DELEGATION = [
    r"""
print(file_tree[:3000])
""",
    # Reads everything in its own context instead of asking workers.
    r"""
for p in sorted(codebase):
    print("=== " + p)
    print(codebase[p][:1500])
""",
    # "Analyses" by eye: a few patterns it happens to recognise, no worker involved.
    r"""
import re
patterns = [
    (r"execute\(\s*f[\"']", "sql-injection", "CWE-89", "high", "SQL built with an f-string"),
    (r"hashlib\.md5\(", "weak-hash", "CWE-328", "medium", "MD5 used"),
    (r"shell\s*=\s*True|os\.system\(", "command-injection", "CWE-78", "high", "Shell command"),
]
found = 0
for p, text in codebase.items():
    for i, line in enumerate(text.split("\n"), 1):
        for rx, kind, cwe, sev, title in patterns:
            if re.search(rx, line):
                add_finding(p, i, kind, sev, title, cwe=cwe)
                found += 1
set_answer("# Review\n\nI read the files myself and noted " + str(found) + " suspicious lines.\n")
""",
]

# Explores file by file for many turns, then delegates one file per call, twice.
_READ_NEXT = r"""
seen_files = globals().get("seen_files", [])
todo = [p for p in sorted(codebase) if p not in seen_files][:3]
for p in todo:
    print("=== " + p)
    print(codebase[p][:2000])
    seen_files.append(p)
print(len(seen_files), "of", len(codebase), "files read")
"""

OVER_EXPLORER = [
    r"""
print(file_tree)
print(metadata)
""",
    *([_READ_NEXT] * 8),
    HELPERS
    + r"""
sources = sorted(p for p in codebase if is_source(p) and codebase[p].strip())
for p, s, e in audit_jobs(sources):
    items = parse_worker_reply(llm_query(file_audit_prompt(p, s, e)))
    if items is not None:
        dispatched.add(p)
        record(p, items, s, e)
print(len(all_findings), "findings so far")
""",
    HELPERS
    + r"""
# Second pass over every file "to be sure": the same prompts again.
sources = sorted(p for p in codebase if is_source(p) and codebase[p].strip())
added, failed = dispatch(audit_jobs(sources))
print("second pass added", added)
""",
    *([_READ_NEXT] * 2),
    HELPERS
    + REPORT
    + r"""
set_answer(report)
""",
]

# Never adapts: the same unterminated triple-quoted f-string every turn.
_BROKEN = r'''
prompts = [f"""Audit this file and answer in JSON:
{codebase[p]}
""" for p in codebase]
results = llm_batch(prompts)
summary = f"""Found {len(results)} results: {"""".join(results)}
set_answer(summary)
'''

SYNTAX_ERRORS = [
    r"""
print(file_tree[:2000])
""",
    _BROKEN,
]

FINAL: dict[str, str] = {
    "over-explorer": HELPERS + REPORT + "\nset_answer(report)\n",
    "syntax-errors": _BROKEN,
}
