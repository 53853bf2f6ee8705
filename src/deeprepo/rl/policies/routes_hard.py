"""The hard tier's policies side by side, and gaming routes of issue 19 item 5.

Hard tier (``--generate hard:seed=N``: a sub-call budget smaller than the file count; the
budget is in ``metadata["notes"]`` and the first message). The expert and ``own-prompts``
run as they are (they do not plan for a budget: the calls past it are refused). Beside them:

``random-subset``   reads a random subset of the source files within the budget: files
                    packed up to ~700 lines a prompt, one prompt per call, the replies
                    recorded as they come (the floor a budget-aware root must beat);
``pack-all``        no choice at all: every source file, in order, packed evenly into the
                    calls the budget allows (long prompts, read at the attention their
                    length allows: little coverage, little recall);
``routes-first``    honest and budget-aware, without the ground truth: half the calls on
                    the files that import the most local modules (routes, entry points)
                    with their import closures, ~700 lines a prompt; the rest of the code
                    tops those prompts up and fills the calls left, ~740 lines a prompt,
                    as far as it goes;
``upper-bound``     allowed to see everything (:func:`upper_bound_policy`, built per task
                    from its ground truth): the files of every planted bug with the file
                    its flow starts in, ~700 lines a prompt, then the rest of
                    the code into the calls left, as ``routes-first``. The documented
                    ceiling of the tier.

Gaming routes (each must stay at or below 0.40 on the ordinary tiers, or below the lowest
honest policy; ``tests/test_routes_hard.py``):

``spray``           sends every file with ``file_audit_prompt`` (replies unread), then
                    records a finding every 4 lines within ±12 lines of each line that
                    calls a risky-looking API, of the class the API suggests;
``duplicates``      the expert's dispatch unchecked, each finding recorded five times;
``whole-file``      one finding per file and bug class spanning the whole file (line 1 to
                    the last), hoping a range match counts;
``repeat-pad``      every prompt is one file shown four times over, so that each "audit"
                    looks long and dense; the replies are recorded;
``verbatim``        every item of every reply recorded where it says, unchecked and
                    unfiltered (other files' items included).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from deeprepo.builtin.expert_helpers import HELPERS
from deeprepo.builtin.expert_report import REPORT
from deeprepo.builtin.programs import EXPERT
from deeprepo.builtin.scripted import ScriptedPolicy

__all__ = [
    "DUPLICATES",
    "PACK_ALL",
    "RANDOM_SUBSET",
    "REPEAT_PAD",
    "ROUTES_FIRST",
    "SPRAY",
    "VERBATIM",
    "WHOLE_FILE",
    "upper_bound_policy",
    "upper_bound_program",
]

_SOURCES = r"""
sources = sorted(p for p in codebase if is_source(p) and codebase[p].strip())
"""

# Reading the budget the environment states (hard tier), and packing groups of files into at
# most that many prompts of about LIMIT lines.
_BUDGET = r"""
import random

def call_budget():
    for note in metadata.get("notes") or []:
        m = re.search(r"sub-call budget: (\d+)", str(note))
        if m:
            return int(m.group(1))
    return None

LIMIT = 700
BUDGET = call_budget() or 10**6
sizes = {p: codebase[p].count("\n") + 1 for p in sources}

def packed(groups, limit=LIMIT, most=BUDGET, prompts=()):
    # First fit: a group joins the first prompt (of ``prompts`` given, then of those it
    # opened) it fits in, else opens the next one while calls remain; what fits nowhere
    # stays unread.
    out = [[list(g), sum(sizes[q] for q in g)] for g in prompts]
    for g in groups:
        g = [q for q in g if q in sizes]
        n = sum(sizes[q] for q in g)
        room = next((o for o in out if o[1] + n <= limit), None)
        if room is not None:
            room[0].extend(q for q in g if q not in room[0])
            room[1] += n
        elif len(out) < most:
            out.append([list(g), n])
    return [p for p, _ in out]

FILL = 740  # the calls left are filled closer to the ~800 lines a worker reads in full

def with_the_rest(first, limit=FILL):
    # The files ``first`` leaves out top up its prompts, then fill the calls left, ``limit``
    # lines a prompt: a worker reads little of a prompt past ~800 lines, and coverage counts
    # what it can read.
    seen = {q for g in first for q in g}
    return packed([[p] for p in sources if p not in seen], limit=limit, prompts=first)

def evenly(files):
    # Every file, in order, packed evenly into the calls allowed, however long that makes them.
    left = max(1, min(BUDGET, len(files)))
    return packed([[p] for p in files], limit=max(LIMIT, -(-sum(sizes[p] for p in files) // left)))

def ask(prompts_files):
    replies = llm_batch([flow_prompt(g) if len(g) > 1 else file_audit_prompt(g[0]) for g in prompts_files])
    for g, reply in zip(prompts_files, replies):
        items = parse_worker_reply(reply)
        if items is None:
            continue
        for q in g:
            dispatched.add(q)
            mine = [i for i in items if str(i.get("file") or "").removeprefix("./") in ("", q)]
            record(q, mine, 1, sizes[q])
"""


def _program(body: str) -> list[str]:
    """One turn: helpers, the budget, ``body``, the expert's report, submitted."""
    return [HELPERS + _SOURCES + _BUDGET + body + REPORT + "\nset_answer(report)\n"]


RANDOM_SUBSET = _program(
    r"""
rng = random.Random(len(codebase))
order = list(sources)
rng.shuffle(order)
chosen = packed([[p] for p in order])
ask(chosen)
print("read", sum(map(len, chosen)), "of", len(sources), "files in", len(chosen), "prompts")
"""
)

PACK_ALL = _program(
    r"""
chosen = evenly(sources)
ask(chosen)
print("every file in", len(chosen), "prompts")
"""
)

ROUTES_FIRST = _program(
    r"""
imports = {p: [q for q in local_imports(p) if q in sizes] for p in sources}
def closure(p):
    group, todo = [p], list(imports[p])
    while todo and sum(sizes[q] for q in group) < LIMIT:
        q = todo.pop(0)
        if q not in group and sum(sizes[x] for x in group) + sizes[q] <= LIMIT:
            group.append(q)
            todo.extend(imports[q])
    return group
heads = sorted(sources, key=lambda p: (-len(imports[p]), p))
groups, seen = [], set()
for p in heads:
    if p in seen or not imports[p]:
        continue
    g = closure(p)
    seen.update(g)
    groups.append(g)
chosen = with_the_rest(packed(groups, most=max(1, BUDGET // 2)))
ask(chosen)
print("read", sum(map(len, chosen)), "of", len(sources), "files in", len(chosen), "prompts")
"""
)


def upper_bound_program(ground_truth: Sequence[Mapping[str, object]]) -> list[str]:
    """The ceiling's program for one task: the ground truth's bug files (each with the file
    its flow starts in) read first, the rest packed into what is left."""
    groups: list[list[str]] = []
    for e in ground_truth:
        if e.get("vulnerable") is False:
            continue  # a decoy's file only invites a false finding
        related = e.get("related")
        files = [str(e["file"])]
        if isinstance(related, list | tuple):
            files += [str(r["file"]) for r in related if isinstance(r, Mapping) and "file" in r]
        groups.append(list(dict.fromkeys(files)))
    return _program(
        f"KNOWN = {json.dumps(groups)}\n"
        + r"""
ask(with_the_rest(packed(KNOWN)))
"""
    )


def upper_bound_policy(ground_truth: Sequence[Mapping[str, object]]) -> ScriptedPolicy:
    """The ``upper-bound`` root for one task, named per ground truth. It is not registered:
    one per task would pile up in the shared table that ``scripted/<name>`` reads."""
    program = upper_bound_program(ground_truth)
    digest = hashlib.sha256(program[0].encode()).hexdigest()[:12]
    return ScriptedPolicy(f"upper-bound-{digest}", turns=program)


SPRAY = _program(
    r"""
RISKY = [
    (r"execute|query\(|\.raw\(", "sql-injection", "CWE-89"),
    (r"subprocess|os\.system|child_process|exec\(", "command-injection", "CWE-78"),
    (r"open\(|sendFile|send_file|readFile", "path-traversal", "CWE-22"),
    (r"pickle|yaml\.load|deserialize|unserialize", "unsafe-deserialization", "CWE-502"),
    (r"requests\.|urlopen|fetch\(|axios", "ssrf", "CWE-918"),
    (r"random|Math\.random", "insecure-randomness", "CWE-330"),
    (r"md5|sha1", "weak-password-hash", "CWE-916"),
    (r"role|admin|owner", "missing-authorization", "CWE-862"),
    (r"len\(|\.length|limit", "off-by-one", "CWE-193"),
]
llm_batch([file_audit_prompt(p) for p in sources])
sprayed = 0
for p in sources:
    lines = codebase[p].split("\n")
    marked = set()
    for i, line in enumerate(lines, 1):
        for rx, kind, cwe in RISKY:
            if re.search(rx, line):
                for j in range(max(1, i - 12), min(len(lines), i + 12) + 1, 4):
                    if (j, cwe) not in marked:
                        marked.add((j, cwe))
                        add_finding(p, j, kind, "high", kind.replace("-", " "), cwe=cwe)
                        sprayed += 1
                break
print("sprayed", sprayed, "findings")
"""
)

# The expert's turn 2 unchecked, then its findings recorded five times each.
assert "VERIFY = True\n" in EXPERT[1]
DUPLICATES = [
    EXPERT[0],
    EXPERT[1].replace("VERIFY = True\n", "VERIFY = False\n", 1)
    + r"""
for f in list(all_findings):
    for _ in range(4):
        add_finding(f["file"], f["line"], f["kind"], f["severity"], f["title"], f["detail"],
                    f["fix"], cwe=f["cwe"], end_line=f["end_line"])
""",
    *EXPERT[2:],
]

WHOLE_FILE = _program(
    r"""
llm_batch([file_audit_prompt(p) for p in sources])
CLASSES = [("sql-injection", "CWE-89"), ("missing-authorization", "CWE-862"),
           ("off-by-one", "CWE-193"), ("path-traversal", "CWE-22"), ("race-condition", "CWE-362")]
for p in sources:
    for kind, cwe in CLASSES:
        add_finding(p, 1, kind, "high", kind, cwe=cwe, end_line=sizes[p])
"""
)

REPEAT_PAD = _program(
    r"""
replies = llm_batch([file_audit_prompt(p) + "\n" + ("\n".join([codebase[p]] * 3)) for p in sources])
for p, reply in zip(sources, replies):
    items = parse_worker_reply(reply)
    if items is not None:
        dispatched.add(p)
        record(p, items, 1, sizes[p])
"""
)

VERBATIM = _program(
    r"""
replies = llm_batch([file_audit_prompt(p) for p in sources])
taken = 0
for p, reply in zip(sources, replies):
    for item in parse_worker_reply(reply) or []:
        try:
            line = int(str(item.get("line") or 1).split("-")[0])
        except ValueError:
            line = 1
        add_finding(str(item.get("file") or p), line, str(item.get("kind") or "issue"),
                    str(item.get("severity") or "medium"), str(item.get("title") or ""),
                    str(item.get("detail") or ""), str(item.get("fix") or ""), cwe=item.get("cwe"))
        taken += 1
print(taken, "findings, as the workers gave them")
"""
)
