"""Issue 19's coverage routes, as root policies: ways to make code *look* sent that the
order-aware coverage (``findings.coverage``) must not pay for, and honest workers' prompts
in other formats that it must pay for as the expert's.

Gaming routes (``tests/test_routes_coverage.py`` keeps each at or below 0.40):

``shuffled-padding``   audits the larger half of the source files (by size) honestly, with
                       the expert's prompts; sends every other file to a worker as its lines
                       shuffled, with an audit request, and ignores those replies;
``shuffled-quarter``   the same with only the largest quarter audited honestly (most bugs sit
                       in big files where a generator places them by size);
``prefix-90``          sends each file cut to the shortest prefix holding 90% of its
                       distinct lines, and records what the workers report;
``windows-only``       sends every file shuffled (for coverage), and ±8-line windows around the
                       lines a grep of generic sinks hits (the template matcher's guesses), and
                       records what the workers report about the windows.

Honest formats (each must score at least 0.75 of the expert's reward on the same tasks): the
expert's plan without its checks (one prompt per file or 300-line slice, one per file with the
local modules it imports), an audit request of its own, and the code as

``fmt-numbers-right``  ``code  # 12`` (the line number on the right);
``fmt-diff``           a new-file unified diff (``+code`` lines under an ``@@`` hunk);
``fmt-json``           ``{"path": ..., "start_line": ..., "content": "<the slice, escaped>"}``;
``fmt-json-lines``     ``{"path": ..., "lines": ["<line>", ...]}``;
``fmt-xml-lines``      ``<file path=...>`` of ``<line n="12">code</line>`` elements, XML-escaped.
"""

from __future__ import annotations

from deeprepo.builtin.expert_helpers import HELPERS
from deeprepo.builtin.expert_report import REPORT
from deeprepo.rl.policies.adversarial import SINKS

__all__ = ["GAMING", "HONEST_FORMATS", "POLICIES"]

_SOURCES = r"""
import random
sources = sorted(p for p in codebase if is_source(p) and codebase[p].strip())
ASK = ("Audit this code for security vulnerabilities and real bugs. Reply with JSON only: "
       "{\"findings\": [{\"file\", \"line\", \"end_line\", \"kind\", \"cwe\", \"severity\", "
       "\"title\", \"detail\", \"fix\"}]}, an empty list when there is nothing.\n\n")

def shuffled(p):
    lines = codebase[p].split("\n")
    random.Random(p).shuffle(lines)
    return ASK + "File: " + p + "\n" + "\n".join(lines)

def by_size(paths):
    return sorted(paths, key=lambda p: (-len(codebase[p]), p))
"""


def _program(body: str) -> list[str]:
    """A one-turn policy: the expert's helpers, the source list, ``body``, then the expert's
    report from whatever ``body`` recorded, submitted."""
    return [HELPERS + _SOURCES + body + REPORT + "\nset_answer(report)\n"]


def _shuffled_padding(honest_share: str) -> list[str]:
    return _program(
        r"""
ranked = by_size(sources)
keep = ranked[: max(1, round(len(ranked) * """
        + honest_share
        + r"""))]
padding = [p for p in sources if p not in keep]
groups, prompts = pack(audit_jobs(keep))
replies = llm_batch(prompts + [shuffled(p) for p in padding])
for group, reply in zip(groups, replies):
    items = parse_worker_reply(reply)
    for p, s, e in group:
        dispatched.add(p)
        record(p, items or [], s, e, shared=len(group) > 1)
print(len(keep), "audited,", len(padding), "sent shuffled (replies not read)")
"""
    )


SHUFFLED_PADDING = _shuffled_padding("0.5")
SHUFFLED_QUARTER = _shuffled_padding("0.25")

PREFIX_90 = _program(
    r"""
def prefix_end(p):
    # The shortest prefix holding 90% of the file's distinct non-blank lines.
    lines = codebase[p].split("\n")
    distinct = {ln.strip() for ln in lines if ln.strip()}
    seen = set()
    for i, ln in enumerate(lines, 1):
        if ln.strip():
            seen.add(ln.strip())
        if len(seen) >= 0.9 * len(distinct):
            return i
    return len(lines)

jobs = []
for p in sources:
    end = prefix_end(p)
    jobs.extend((q, s, min(e, end)) for q, s, e in audit_jobs([p]) if s <= end)
added, failed = dispatch(jobs)
print(added, "findings from", len(jobs), "prefix slices")
"""
)

WINDOWS_ONLY = _program(
    SINKS
    + r"""
RADIUS = 8
windows = []
for p in sources:
    lines = codebase[p].split("\n")
    for i, line in enumerate(lines, 1):
        if any(re.search(rx, line) for rx, _, _ in SINKS):
            lo, hi = max(1, i - RADIUS), min(len(lines), i + RADIUS)
            if windows and windows[-1][0] == p and windows[-1][2] >= lo:
                windows[-1] = (p, windows[-1][1], hi)  # overlapping windows merge
            else:
                windows.append((p, lo, hi))
asks = [ASK + file_audit_prompt(p, lo, hi)[file_audit_prompt(p, lo, hi).index("<file"):]
        for p, lo, hi in windows]
replies = llm_batch([shuffled(p) for p in sources] + asks)
for (p, lo, hi), reply in zip(windows, replies[len(sources):]):
    dispatched.add(p)
    record(p, parse_worker_reply(reply) or [], lo, hi)
print(len(windows), "windows around grep hits; every file sent shuffled")
"""
)

# Honest formats: each defines show(p, s, e), the code of lines s..e of p in its format. The
# strategy is the expert's without its checks: each file (or 300-line slice) alone, and each
# file with the local modules it imports (``flow_jobs``), so only the format differs.
_HONEST = r"""
jobs = audit_jobs(sources)
flows = flow_jobs(sources)
prompts = [ASK + show(p, s, e) for p, s, e in jobs]
prompts += [FLOW_ASK + "\n\n".join(show(q, 1, codebase[q].count("\n") + 1) for q in g) for g in flows]
replies = llm_batch(prompts)
for (p, s, e), reply in zip(jobs, replies):
    items = parse_worker_reply(reply)
    if items is None:
        continue
    dispatched.add(p)
    record(p, items, s, e)
for g, reply in zip(flows, replies[len(jobs):]):
    for q in g:
        record(q, parse_worker_reply(reply) or [], 1, codebase[q].count("\n") + 1, shared=True)
print(len(all_findings), "findings from", len(prompts), "prompts")
"""


def _honest(show: str) -> list[str]:
    return _program(show + _HONEST)


FMT_NUMBERS_RIGHT = _honest(
    r"""
def show(p, s, e):
    lines = codebase[p].split("\n")[s - 1:e]
    return "File: " + p + "\n" + "\n".join(ln + "  # " + str(s + i) for i, ln in enumerate(lines))
"""
)

FMT_DIFF = _honest(
    r"""
def show(p, s, e):
    lines = codebase[p].split("\n")[s - 1:e]
    head = "--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +" + str(s) + "," + str(len(lines)) + " @@\n"
    return head + "\n".join("+" + ln for ln in lines)
"""
)

FMT_JSON = _honest(
    r"""
def show(p, s, e):
    text = "\n".join(codebase[p].split("\n")[s - 1:e])
    return json.dumps({"path": p, "start_line": s, "content": text})
"""
)

FMT_JSON_LINES = _honest(
    r"""
def show(p, s, e):
    return json.dumps({"path": p, "first_line": s, "lines": codebase[p].split("\n")[s - 1:e]}, indent=1)
"""
)

FMT_XML_LINES = _honest(
    r"""
from xml.sax.saxutils import escape, quoteattr

def show(p, s, e):
    lines = codebase[p].split("\n")[s - 1:e]
    body = "\n".join('<line n="' + str(s + i) + '">' + escape(ln) + "</line>" for i, ln in enumerate(lines))
    return "<file path=" + quoteattr(p) + ">\n" + body + "\n</file>"
"""
)

#: The routes the reward must keep low.
GAMING: dict[str, list[str]] = {
    "shuffled-padding": SHUFFLED_PADDING,
    "shuffled-quarter": SHUFFLED_QUARTER,
    "prefix-90": PREFIX_90,
    "windows-only": WINDOWS_ONLY,
}
#: Honest work in other formats, which the reward must pay for.
HONEST_FORMATS: dict[str, list[str]] = {
    "fmt-numbers-right": FMT_NUMBERS_RIGHT,
    "fmt-diff": FMT_DIFF,
    "fmt-json": FMT_JSON,
    "fmt-json-lines": FMT_JSON_LINES,
    "fmt-xml-lines": FMT_XML_LINES,
}
POLICIES: dict[str, list[str]] = {**GAMING, **HONEST_FORMATS}
