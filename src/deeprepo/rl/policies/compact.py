"""A compact expert: the scripted expert's method in programs short enough to learn from.

The scripted ``expert`` (``builtin/programs.py``) sends ~37,000 characters of helpers a run,
~4,500 tokens in its second turn alone: a poor supervised target for a small model, whose
context and attention that one reply would swallow. ``compact`` does the same work in three
turns of at most ~1,000 tokens each (estimated without a tokenizer as characters / 3.5;
``tests/test_compact_policy.py`` holds every turn to it):

1. list the source files (``metadata["audit_files"]``) with their sizes;
2. one ``llm_batch``: each file (big ones in 300-line slices) with ``file_audit_prompt``, and
   each file together with the local modules it imports, two hops deep, within 700 lines, so
   a value read in one file can be followed to the call it reaches in another; parse the JSON
   replies and keep each finding with how many prompts reported it;
3. check the doubtful findings (reported once, by a one-file prompt) with two short re-queries
   around the cited line (±15 and ±9 lines, under 40% of the file's code), keep those a check
   reports again within 3 lines, record them with ``add_finding`` and submit a short report.

A finding only a multi-file prompt reported is kept unchecked: a window around its line
cannot show where its input comes from, so a re-query could only drop it. It scores within a
few points of the full expert on small generated tasks with the oracle worker
(``tests/test_compact_policy.py``); ``deeprepo eval --model scripted/compact`` runs it and
``deeprepo export sft`` turns its runs into training examples.
"""

from __future__ import annotations

__all__ = ["BRIEF", "COMPACT", "COMPACT_FINAL"]

_LIST = r"""
src = metadata["audit_files"]
size = {p: codebase[p].count("\n") + 1 for p in src}
print(len(src), "source files,", sum(size.values()), "lines")
for p in sorted(src, key=lambda p: -size[p])[:25]:
    print(" ", size[p], p)
"""

_AUDIT = r"""
import json, re

def parse(reply):
    if not isinstance(reply, str) or reply.startswith("[llm error]"):
        return None
    for text in re.findall(r"```(?:json)?\s*(.*?)```", reply, re.S) + [reply]:
        i, j = text.find("{"), text.rfind("}")
        try:
            data = json.loads(text[i:j + 1])
        except ValueError:
            continue
        if isinstance(data, dict):
            data = data.get("findings", [])
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
    return []

def stem(p):
    return p.rsplit("/", 1)[-1].split(".")[0]

def imports(p):
    # Modules of p's own language whose name an import line of p mentions.
    heads = "\n".join(re.findall(r"^.*\b(?:import|from|require)\b.*$", codebase[p], re.M))
    ext = p.rsplit(".", 1)[-1]
    return [q for q in src if q != p and q.endswith("." + ext) and stem(q) not in ("", "__init__", "index")
            and re.search(r"\b" + re.escape(stem(q)) + r"\b", heads)]

jobs = [([p], s, min(s + 299, size[p])) for p in src for s in range(1, size[p] + 1, 300)]
groups = []
for p in src:
    g, hop = [p], [p]
    for _ in range(2):
        hop = [q for h in hop for q in imports(h) if q not in g]
        for q in hop:
            if q not in g and sum(size[x] for x in g) + size[q] <= 700:
                g.append(q)
    if len(g) > 1 and not any(set(g) <= set(h) for h in groups):
        groups.append(g)
jobs += [(g, 1, None) for g in groups]
FLOW = ("Audit these files together for security vulnerabilities and real bugs: follow each value "
        "read in one file into the calls it reaches in the others. Answer with JSON only: "
        '{"findings": [{"file", "line", "kind", "cwe", "severity", "title", "detail", "fix"}]}.\n\n')

def prompt(files, s, e):
    if len(files) == 1:
        return file_audit_prompt(files[0], s, e)
    # Its own instruction: the same one would draw the same answer for each file again.
    blocks = [file_audit_prompt(q) for q in files]
    return FLOW + "".join(b[b.index("<file"):] for b in blocks)

found = {}
for (files, s, e), reply in zip(jobs, llm_batch([prompt(*j) for j in jobs])):
    for d in parse(reply) or []:
        p = str(d.get("file") or files[0]).removeprefix("./")
        try:
            line = int(str(d.get("line", s)).split("-")[0])
        except ValueError:
            continue
        if p in files and (e is None or s <= line <= e):
            key = (p, line, str(d.get("cwe") or d.get("kind")))
            f = found.setdefault(key, dict(d, file=p, line=line, n=0, alone=len(files) == 1))
            f["n"] += 1
print(len(jobs), "prompts,", len(found), "findings")
"""

_CHECK = r"""
def window(p, line, r):
    rows = codebase[p].split("\n")
    code = {t.strip() for t in rows if len(t.strip()) >= 8}
    while True:
        lo, hi = max(1, line - r), min(len(rows), line + r)
        if r <= 2 or len({t.strip() for t in rows[lo - 1:hi] if len(t.strip()) >= 8}) < 0.4 * len(code):
            return lo, hi
        r -= 1

doubt = [f for f in found.values() if f["n"] < 2 and f["alone"]]
asks = [(f, window(f["file"], f["line"], r)) for f in doubt for r in (15, 9)]
replies = llm_batch([file_audit_prompt(f["file"], lo, hi) for f, (lo, hi) in asks]) if asks else []
seen = set()
for (f, _), reply in zip(asks, replies):
    for d in parse(reply) or []:
        try:
            if abs(int(str(d.get("line")).split("-")[0]) - f["line"]) <= 3:
                seen.add(id(f))
        except ValueError:
            pass
kept = [f for f in found.values() if id(f) in seen or not (f["n"] < 2 and f["alone"])]
for f in kept:
    add_finding(f["file"], f["line"], str(f.get("kind") or "issue"), str(f.get("severity") or "medium"),
                str(f.get("title") or ""), str(f.get("detail") or ""), str(f.get("fix") or ""),
                cwe=f.get("cwe"))
print("checked", len(doubt), "doubtful:", len(kept), "findings kept of", len(found))
"""

_SUBMIT = r"""
lines = ["# Code analysis report", "", "- Files audited: " + str(len(src)),
         "- Findings: " + str(len(kept))]
lines += ["- " + f["file"] + ":" + str(f["line"]) + " " + str(f.get("title") or f.get("kind")) for f in kept[:30]]
set_answer("\n".join(lines) + "\n")
"""

#: The turn programs of ``scripted/compact`` (the last one repeats).
COMPACT = [_LIST, _AUDIT, _CHECK + _SUBMIT]

#: Its program on the Episode's final turn: record what it has and submit.
COMPACT_FINAL = (
    r"""
found = globals().get("found", {})
src = globals().get("src", sorted(codebase))
kept = list(found.values())
for f in kept:
    add_finding(f["file"], f["line"], str(f.get("kind") or "issue"), str(f.get("severity") or "medium"),
                str(f.get("title") or ""), str(f.get("detail") or ""), str(f.get("fix") or ""),
                cwe=f.get("cwe"))
"""
    + _SUBMIT
)

# The whole method in one reply of ~250 tokens (issue 21's CPU learning run): every file to a
# worker in one batch, the JSON replies parsed defensively, every finding recorded, submit. It
# is the ``small`` root prompt's worked example made robust (a reply that is not JSON, a line
# such as "12-14", a finding that is not an object), so a model warm-started on it can be
# trained on this 2-core CPU at all: the compact expert's ~1,500 tokens a rollout, generated
# and back-propagated through a 135M model here, cost minutes a rollout (docs/training.md).
_BRIEF = r"""
import json
paths = metadata["audit_files"]
replies = llm_batch([file_audit_prompt(p) for p in paths])
n = 0
for path, reply in zip(paths, replies):
    try:
        items = json.loads(reply[reply.find("{"):reply.rfind("}") + 1]).get("findings", [])
    except (ValueError, AttributeError):
        items = []
    for f in items:
        try:
            add_finding(path, int(str(f.get("line")).split("-")[0]), str(f.get("kind") or "issue"),
                        str(f.get("severity") or "medium"), str(f.get("title") or ""), cwe=f.get("cwe"))
            n += 1
        except (ValueError, AttributeError, TypeError):
            pass
set_answer("Audited " + str(len(paths)) + " files; " + str(n) + " findings.")
"""

#: ``scripted/brief``: the one-turn program (it repeats if a turn does not submit).
BRIEF = [_BRIEF]
