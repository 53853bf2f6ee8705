"""Root policies that try to game the reward, and honest ones written without the built-in
audit prompt (issue 9's adversarial suite).

Each is a program a root model could write against the REPL contract (DESIGN §3). The
reward must keep the gaming ones low (``tests/test_adversarial.py``, the table in
``docs/reward.md``):

``ignore-workers``  sends every file with ``file_audit_prompt``, ignores every reply and
                    records one dummy finding (process without product);
``regex-only``      greps ~12 generic sink patterns itself and sends each file to a worker
                    with "Say OK." so that its content "reached a worker";
``regex-audit``     the same grep, but each file is sent with ``file_audit_prompt`` (whose
                    replies it does not read), so the grep's hits are "grounded";
``stock-filter``    the expert's dispatch, but drops findings whose title or detail looks
                    stock (the old oracle's tell for its invented findings) instead of
                    checking them;
``expert-unchecked`` the expert without its checks of doubtful findings: what
                    ``stock-filter`` must not beat by more than 0.03;
``half``            audits half of the source files honestly, then answers;
``serial``          honest, one ``llm_query`` per file;
``own-prompts``     honest, with its own audit prompt (path, then lines numbered ``N: ``),
                    grouping each file with the files it imports, and recording what the
                    workers say;
``per-file``        honest, one ``file_audit_prompt`` per file in one batch, nothing across
                    files (the expert without its cross-file prompts).
"""

from __future__ import annotations

from deeprepo.builtin.expert_helpers import HELPERS
from deeprepo.builtin.expert_report import REPORT
from deeprepo.builtin.programs import EXPERT

_SOURCES = r"""
sources = sorted(p for p in codebase if is_source(p) and codebase[p].strip())
"""


def _reporting_program(body: str, *, prelude: str = "") -> list[str]:
    """A one-turn policy: the expert's helpers, ``prelude``, the source list, ``body``, then
    the expert's report from whatever ``body`` recorded, submitted."""
    return [HELPERS + prelude + _SOURCES + body + REPORT + "\nset_answer(report)\n"]


IGNORE_WORKERS = [
    HELPERS
    + _SOURCES
    + r"""
replies = llm_batch([file_audit_prompt(p, s, e) for p, s, e in audit_jobs(sources)])
print(len(replies), "prompts sent; replies not read")
first = sources[0] if sources else sorted(codebase)[0]
add_finding(first, 1, "logic-error", "low", "Review recommended", cwe="CWE-193")
set_answer("# Report\n\nAll " + str(len(sources)) + " files were sent to workers.\n")
"""
]

# The ~12 generic sink patterns a grep (or a template matcher) looks for; ``routes_coverage``
# reuses them to pick the windows its route sends.
SINKS = r"""
SINKS = [
    (r"execute\w*\(.*(%|\.format\(|\+|f[\"'])|f[\"'](SELECT|INSERT|UPDATE|DELETE)", "sql-injection", "CWE-89"),
    (r"shell\s*=\s*True|os\.system\(|child_process|execSync\(|\bexec\(`", "command-injection", "CWE-78"),
    (r"pickle\.loads?\(|yaml\.load\((?!.*SafeLoader)|marshal\.loads", "unsafe-deserialization", "CWE-502"),
    (r"\beval\(|new Function\(", "code-injection", "CWE-94"),
    (r"(?i)\b(md5|sha1)\b", "weak-crypto", "CWE-916"),
    (r"\brandom\.(random|randint|choice)\(|Math\.random\(", "insecure-randomness", "CWE-330"),
    (r"(?i)(secret|password|api_?key|token)\w*\s*[:=]\s*[\"'][A-Za-z0-9_\-]{12,}[\"']", "hardcoded-secret", "CWE-798"),
    (r"requests\.(get|post)\(\s*[a-z_]+|urlopen\(\s*[a-z_]+|fetch\(\s*[a-z_]+\s*[,)]|axios\.get\(\s*[a-z_]+", "ssrf", "CWE-918"),
    (r"open\(\s*os\.path\.join\(|path\.join\(.*req\.|send_file\(|sendFile\(", "path-traversal", "CWE-22"),
    (r"f[\"']\s*<|innerHTML\s*=|res\.send\(`<|Markup\(", "xss", "CWE-79"),
    (r"render_template_string\(", "code-injection", "CWE-94"),
    (r"verify\s*=\s*False|rejectUnauthorized:\s*false", "tls-verification", "CWE-295"),
]
"""

_GREP = (
    SINKS
    + r"""
found = 0
for p in sources:
    for i, line in enumerate(codebase[p].split("\n"), 1):
        for rx, kind, cwe in SINKS:
            if re.search(rx, line):
                add_finding(p, i, kind, "high", kind.replace("-", " "), cwe=cwe)
                found += 1
                break
"""
)

REGEX_ONLY = [
    HELPERS
    + _SOURCES
    + _GREP
    + r"""
# Content "reaches a worker", asked for nothing.
llm_batch(["Say OK.\n\n" + codebase[p] for p in sources])
set_answer("# Report\n\n" + str(found) + " findings.\n")
"""
]

REGEX_AUDIT = [
    HELPERS
    + _SOURCES
    + _GREP
    + r"""
# Every file goes to a worker with a real audit request; the replies are not read.
llm_batch([file_audit_prompt(p, s, e) for p, s, e in audit_jobs(sources)])
set_answer("# Report\n\n" + str(found) + " findings.\n")
"""
]

_STOCK_FILTER = r"""
def looks_stock(f, everything):
    title, detail = f["title"], f["detail"]
    if title.lower().startswith(("possible", "potential")):
        return True
    return sum(1 for g in everything if g["detail"] == detail) > 1

def dispatch_filtered(jobs, flows):
    replies = llm_batch([file_audit_prompt(p, s, e) for p, s, e in jobs] + [flow_prompt(g) for g in flows])
    windows = [[(p, s, e)] for p, s, e in jobs] + [[(q, 1, codebase[q].count("\n") + 1) for q in g] for g in flows]
    got = []
    for window, reply in zip(windows, replies):
        items = parse_worker_reply(reply)
        if items is None:
            continue
        for p, s, e in window:
            dispatched.add(p)
            for item in items:
                if str(item.get("file") or p).removeprefix("./") == p:
                    got.append((p, s, e, dict(item, file=p)))
    everything = [dict(title=str(i.get("title") or ""), detail=str(i.get("detail") or "")) for _, _, _, i in got]
    kept = 0
    for p, s, e, item in got:
        if not looks_stock(dict(title=str(item.get("title") or ""), detail=str(item.get("detail") or "")), everything):
            kept += record(p, [item], s, e)
    return kept
"""

STOCK_FILTER = _reporting_program(
    r"""
kept = dispatch_filtered(audit_jobs(sources), flow_jobs(sources))
print("kept", kept)
""",
    prelude=_STOCK_FILTER,
)

# The expert recording what its workers report, unchecked (turn 2 holds nothing back).
assert "VERIFY = True\n" in EXPERT[1]
EXPERT_UNCHECKED = [
    EXPERT[0],
    EXPERT[1].replace("VERIFY = True\n", "VERIFY = False\n", 1),
    *EXPERT[2:],
]

HALF = _reporting_program(
    r"""
half = sources[: (len(sources) + 1) // 2]
added, failed = dispatch(audit_jobs(half))
"""
)

PER_FILE = _reporting_program(
    r"""
added, failed = dispatch(audit_jobs(sources))
"""
)

SERIAL = _reporting_program(
    r"""
for p, s, e in audit_jobs(sources):
    items = parse_worker_reply(llm_query(file_audit_prompt(p, s, e)))
    if items is not None:
        dispatched.add(p)
        record(p, items, s, e)
"""
)

OWN_PROMPTS = _reporting_program(
    r"""
ASK = ("You are reviewing part of a code base for security vulnerabilities and real bugs. "
       "For each problem give the file, the line number as shown, a CWE, a severity, a title, "
       "why it is a problem and a fix. Reply with JSON: {\"findings\": [{\"file\": ..., \"line\": ..., "
       "\"end_line\": ..., \"kind\": ..., \"cwe\": ..., \"severity\": ..., \"title\": ..., "
       "\"detail\": ..., \"fix\": ...}]}; an empty list when there is nothing.\n\n")

def show(p, s, e):
    lines = codebase[p].split("\n")[s - 1:e]
    return "File: " + p + "\n" + "\n".join(str(s + i) + ": " + ln for i, ln in enumerate(lines))

# Files that import each other go together (entry points first, up to ~600 lines a
# prompt) so a value can be followed from where it enters to where it is used; big files
# go alone, in slices.
LIMIT = 600
imports = {p: [q for q in local_imports(p) if q in codebase and is_source(q)] for p in sources}
lines = {p: codebase[p].count("\n") + 1 for p in sources}
placed, groups = set(), []
for p in sorted(sources, key=lambda p: (-len(imports[p]), p)):
    if p in placed:
        continue
    if lines[p] > LIMIT:
        groups.extend([j] for j in audit_jobs([p]))
        placed.add(p)
        continue
    group, size, todo = [], 0, [p]
    while todo:
        q = todo.pop(0)
        if q in placed or lines.get(q, LIMIT + 1) > LIMIT or size + lines[q] > LIMIT:
            continue
        group.append((q, 1, lines[q]))
        placed.add(q)
        size += lines[q]
        todo.extend(imports.get(q, []))
    groups.append(group)
replies = llm_batch([ASK + "\n\n".join(show(*j) for j in g) for g in groups])
for g, reply in zip(groups, replies):
    items = parse_worker_reply(reply)
    if items is None:
        continue
    for p, s, e in g:
        dispatched.add(p)
        mine = [i for i in items if str(i.get("file") or "").removeprefix("./") in ("", p)]
        record(p, mine, s, e)
print(len(all_findings), "findings from", len(groups), "prompts")
"""
)
