"""The helpers the scripted expert's programs define in the REPL (:data:`HELPERS`): which
files to audit, how to cut and pack them into worker prompts, how to read a worker's
JSON, the cross-file prompts, and the short re-queries that check a doubtful finding.

The research stack's policies (``deeprepo.rl.policies``) run them too.
"""

from __future__ import annotations

# Shared by the policies that delegate: which files to audit, how to cut them,
# and how to read a worker's JSON (plain, fenced, or inside prose).
HELPERS = r"""
import json, re

SOURCE_EXTS = {
    ".py", ".pyi", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".vue", ".svelte",
    ".java", ".kt", ".scala", ".go", ".rs", ".rb", ".php", ".cs", ".c", ".h", ".cc",
    ".cpp", ".hpp", ".swift", ".m", ".sh", ".bash", ".ps1", ".sql", ".html", ".htm",
    ".jinja", ".jinja2", ".j2", ".ejs", ".hbs", ".erb", ".yaml", ".yml", ".toml",
    ".ini", ".cfg", ".conf", ".env", ".properties", ".xml", ".tf", ".json", ".gradle",
}
SOURCE_NAMES = {"Dockerfile", "Makefile", ".env", "Procfile", "Jenkinsfile"}
SKIP_NAMES = {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Cargo.lock", "composer.lock"}
CHUNK_LINES = 300
PACK_CHARS = 16000  # small files share a worker prompt up to about this many characters
PACK_CHARS_MAX = 200000  # ... more on big repositories (~1,000 prompts), never past this

def is_source(path):
    name = path.rsplit("/", 1)[-1]
    if name in SKIP_NAMES or name.endswith((".min.js", ".min.css", ".map")):
        return False
    ext = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    return name in SOURCE_NAMES or ext.lower() in SOURCE_EXTS

def audit_paths():
    # The run's audit set when deeprepo lists it; else judge by the file names.
    listed = metadata.get("audit_files")
    if isinstance(listed, list):
        return sorted(p for p in listed if p in codebase)
    return sorted(p for p in codebase if is_source(p) and codebase[p].strip())

def audit_jobs(paths):
    jobs = []
    for p in paths:
        n = codebase[p].count("\n") + 1
        for start in range(1, n + 1, CHUNK_LINES):
            jobs.append((p, start, min(start + CHUNK_LINES - 1, n)))
    return jobs

def parse_worker_reply(text):
    if not isinstance(text, str) or text.startswith("[llm error]"):
        return None
    candidates = re.findall(r"```(?:json)?\s*(.*?)```", text, re.S) + [text]
    for cand in candidates:
        for opener, closer in (("{", "}"), ("[", "]")):
            start, end = cand.find(opener), cand.rfind(closer)
            if start == -1 or end <= start:
                continue
            try:
                data = json.loads(cand[start:end + 1])
            except ValueError:
                continue
            if isinstance(data, dict):
                data = data.get("findings", [])
            if isinstance(data, list):
                return [d for d in data if isinstance(d, dict)]
    return []

def record(path, items, lo, hi, shared=False):
    added = 0
    for item in items:
        named = str(item.get("file") or "").removeprefix("./")
        if (named or shared) and named != path:
            continue  # about another file of the prompt, or not saying which
        try:
            line = int(str(item.get("line", item.get("start_line", lo))).split("-")[0])
        except ValueError:
            continue
        if not lo <= line <= hi:
            continue
        try:
            end = max(line, int(item.get("end_line") or line))
        except ValueError:
            end = line
        f = dict(file=path, line=line, end_line=end, kind=str(item.get("kind") or "issue"),
                 severity=str(item.get("severity") or "medium"), title=str(item.get("title") or ""),
                 detail=str(item.get("detail") or ""), fix=str(item.get("fix") or ""), cwe=item.get("cwe"))
        key = (path, line, str(f["cwe"] or f["kind"]))
        if VERIFY:
            # Held until checked (verify_pending); a second prompt reporting it corroborates it.
            if key in pending:
                pending[key]["reports"] += 1
            else:
                pending[key] = dict(f, reports=1)
                added += 1
            continue
        if key in seen_keys:
            continue
        seen_keys.add(key)
        all_findings.append(f)
        add_finding(path, line, f["kind"], f["severity"], f["title"], f["detail"], f["fix"], cwe=f["cwe"], end_line=end)
        added += 1
    return added

def pack(jobs):
    # Group slices into prompts of about PACK_CHARS (more for big repositories), so the
    # number of worker calls follows the size of the code, not the number of files. A
    # group is joined into its prompt as soon as it is full, and each text is let go once
    # it is in a group: the texts, their blocks and the prompts are never three copies of
    # the code at once (a 40 MB repository's kernel peaked 70 MB higher).
    texts = [file_audit_prompt(p, s, e) for p, s, e in jobs]
    limit = min(max(PACK_CHARS, sum(map(len, texts)) // 1000), PACK_CHARS_MAX)
    if SERIAL:
        limit = 0  # one answer at a time anyway: a prompt per file shows progress and keeps it
    groups, prompts, size = [], [], 0
    for k, job in enumerate(jobs):
        text, texts[k] = texts[k], None
        block = text[text.find("<file path="):]
        if groups and size + len(block) <= limit:
            groups[-1][0].append(job)
            groups[-1][1].append(block)
            size += len(block)
        else:
            if groups:
                prompts.append(packed_prompt(*groups[-1][1:]))
            groups.append(([job], [block], text[:text.find("<file path=")]))
            size = len(block)
    if groups:
        prompts.append(packed_prompt(*groups[-1][1:]))
    return [g[0] for g in groups], prompts

def packed_prompt(blocks, head):
    if len(blocks) > 1:
        head += ("Several files follow: give each finding's \"file\" exactly as in its "
                 "<file path>.\n\n")
    prompt = head + "\n".join(blocks) + "\n"
    blocks.clear()
    return prompt

def dispatch(jobs, flows=()):
    # One parallel batch: the packed file (or slice) audits, then the cross-file groups.
    groups, prompts = pack(jobs)
    replies = llm_batch(prompts + [flow_prompt(g) for g in flows])
    failed, added = [], 0
    for group, reply in zip(flows, replies[len(prompts):]):
        for q in group:
            added += record(q, parse_worker_reply(reply) or [], 1, codebase[q].count("\n") + 1)
    for group, reply in zip(groups, replies):
        items = parse_worker_reply(reply)
        if items is None:
            failed.extend(group)
            continue
        for p, s, e in group:
            dispatched.add(p)
            added += record(p, items, s, e, shared=len(group) > 1)
    return added, failed

import posixpath

_SUFFIXES = {}

def _suffixes():
    if not _SUFFIXES:
        for p in codebase:
            parts = p.split("/")
            for i in range(len(parts)):
                _SUFFIXES.setdefault("/".join(parts[i:]), p)
    return _SUFFIXES

def local_imports(path):
    # Source files of this repository that `path` imports (Python and JS/TS).
    text, table, out = codebase[path], _suffixes(), []
    here = posixpath.dirname(path)
    if path.endswith(".py"):
        for m in re.finditer(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w, \t]+)|import[ \t]+([\w.]+))", text, re.M):
            dots, mod, names, plain = m.groups()
            if plain:
                stems = [plain.replace(".", "/")]
            else:
                stem = (mod or "").replace(".", "/")
                if dots:
                    base = here.split("/") if here else []
                    base = base[: len(base) - (len(dots) - 1)] if len(dots) > 1 else base
                    stem = "/".join(x for x in [*base, stem] if x)
                stems = [stem + "/" + n if stem else n for n in re.findall(r"\w+", names)] + ([stem] if stem else [])
            for st in stems:
                for cand in (st + ".py", st + "/__init__.py"):
                    hit = table.get(cand)
                    if hit and hit != path and hit not in out:
                        out.append(hit)
    else:
        for m in re.finditer(r"(?:require\(|from[ \t]+|import[ \t]+)[\"'](\.{1,2}/[^\"']+)[\"']", text):
            base = posixpath.normpath(posixpath.join(here, m.group(1)))
            for cand in (base, *(base + e for e in (".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", "/index.js", "/index.ts"))):
                if cand in codebase and cand != path and cand not in out:
                    out.append(cand)
                    break
    return out

FLOW_LINES = 700
FLOW_DEPTH = 3
# Cross-file prompts repeat code the audit already showed: past this many, a big repository
# pays twice for little (they are for flows between a few modules, not for every file).
MAX_FLOW_PROMPTS = 500

def flow_jobs(paths):
    # Each file with the local modules it imports, and what those import (up to FLOW_DEPTH
    # hops, nearest first, within FLOW_LINES), in one prompt: a value read in one file may
    # reach a dangerous call in another, through a module in between, which no single-file
    # audit (nor a file with its direct imports only) can see.
    sizes = {p: codebase[p].count("\n") + 1 for p in paths}
    jobs = []
    for p in paths:
        if sizes[p] > FLOW_LINES // 2:
            continue
        group, total, frontier = [p], sizes[p], [p]
        for _ in range(FLOW_DEPTH):
            nxt = []
            for f in frontier:
                for q in local_imports(f):
                    if q in group or q not in sizes:
                        continue
                    if total + sizes[q] <= FLOW_LINES:
                        group.append(q)
                        total += sizes[q]
                        nxt.append(q)
            frontier = nxt
        if len(group) > 1:
            jobs.append(group)
    # A group inside a bigger one adds nothing the bigger one did not show.
    kept = []
    for g in sorted(jobs, key=len, reverse=True):
        if not any(set(g) <= set(k) for k in kept):
            kept.append(g)
    return kept

FLOW_ASK = ("Audit these files together for security vulnerabilities and real bugs. A value read "
            "in one file (a request parameter, say) may reach a dangerous call in another: follow it. "
            "Answer with JSON only: {\"findings\": [{\"file\", \"line\", \"end_line\", \"kind\", "
            "\"cwe\", \"severity\", \"title\", \"detail\", \"fix\"}]}.\n\n")

def flow_prompt(group):
    blocks = []
    for q in group:
        full = file_audit_prompt(q)
        blocks.append(full[full.index("<file"):])
    return FLOW_ASK + "\n\n".join(blocks)

# Checking doubtful findings: a short re-query around the cited line (and, for a line
# inside a function other files call, the call sites that feed it, up to two hops back),
# asking whether the problem is real. A finding stays when a check reports it again.
VERIFY_RADIUS = 15
CALL_RADIUS = 9
VERIFY_LINES = 50  # non-trivial lines: the reward's targeted re-query is <= 60
MAX_CHAINS = 3

_DEF_RES = [
    re.compile(r"^\s*(?:async\s+)?def\s+(\w+)"),
    re.compile(r"^\s*(?:export\s+)?(?:async\s+)?function\s*\*?\s*(\w+)"),
    re.compile(r"^\s*(?:export\s+)?(?:const|let|var)\s+(\w+)\s*=\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*=>|\w+\s*=>)"),
    re.compile(r"^\s*(?:static\s+)?(?:async\s+)?(\w+)\s*\([^)]*\)\s*\{"),
    re.compile(r"^\s*(\w+)\s*:\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*=>)"),
]
_NOT_NAMES = {"if", "for", "while", "switch", "catch", "return", "function", "with"}

def enclosing_name(path, line):
    # The function or method the line sits in (the nearest definition above it).
    lines = codebase[path].split("\n")
    for i in range(min(line, len(lines)) - 1, -1, -1):
        for rx in _DEF_RES:
            m = rx.match(lines[i])
            if m and m.group(1) not in _NOT_NAMES:
                return m.group(1)
    return None

_IMPORTERS = {}

def importers(path):
    if not _IMPORTERS:
        for f in sorted(codebase):
            if is_source(f):
                for q in local_imports(f):
                    _IMPORTERS.setdefault(q, []).append(f)
    return _IMPORTERS.get(path, [])

def call_sites(path, line):
    # Lines in modules importing `path` that call the function holding `line`.
    name = enclosing_name(path, line)
    if not name:
        return []
    rx = re.compile(r"\b" + re.escape(name) + r"\s*\(")
    out = []
    for f in importers(path):
        for i, text in enumerate(codebase[f].split("\n"), 1):
            if rx.search(text) and not any(d.match(text) for d in _DEF_RES):
                out.append((f, i))
    return out

def window(path, line, radius):
    # At most `radius` lines each side, and well under half of a small file's code: a
    # check looks at the line in context, it does not re-send the file.
    lines = codebase[path].split("\n")
    code = {t.strip() for t in lines if len(t.strip()) >= 8}
    while True:
        lo, hi = max(1, line - radius), min(len(lines), line + radius)
        shown = {t.strip() for t in lines[lo - 1:hi] if len(t.strip()) >= 8}
        if radius <= 2 or len(shown) < 0.4 * len(code):
            return (path, lo, hi)
        radius -= 1

VERIFY_ASK = ("Check one reported finding. Is there a real security vulnerability or bug at line "
              "{line} of {path} (reported as: {title})? Look at where its input comes from in the "
              "code below. Answer with JSON only: {{\"findings\": [{{\"file\", \"line\", \"kind\", "
              "\"cwe\", \"severity\", \"title\", \"detail\"}}]}} with the finding if it is real, "
              "or {{\"findings\": []}} if it is not.\n\n")

def verify_prompt(f, windows):
    blocks = []
    for path, lo, hi in windows:
        full = file_audit_prompt(path, lo, hi)
        blocks.append(full[full.index("<file"):])
    return VERIFY_ASK.format(line=f["line"], path=f["file"], title=f["title"] or f["kind"]) + "\n\n".join(blocks)

def code_lines(ws):
    return sum(1 for p, lo, hi in ws for t in codebase[p].split("\n")[lo - 1:hi] if len(t.strip()) >= 8)

def verify_checks(f):
    # The windows of each check for one finding: the line in two spans of context (workers
    # miss things; a second look is cheap), then a few call chains that feed it. A serial
    # worker gets the first look only: each prompt costs a whole answer's time.
    checks = [[window(f["file"], f["line"], VERIFY_RADIUS)], [window(f["file"], f["line"], CALL_RADIUS)]]
    if SERIAL:
        return checks[:1]
    chains = []
    for site in call_sites(f["file"], f["line"]):
        back = call_sites(*site)
        chains.extend([[site, b] for b in back[:2]] or [[site]])
    for chain in chains[:MAX_CHAINS]:
        for radius in (CALL_RADIUS, CALL_RADIUS - 3):  # two looks here too
            ws = [window(f["file"], f["line"], radius)] + [window(p, n, radius) for p, n in chain]
            if code_lines(ws) <= VERIFY_LINES:
                checks.append(ws)
    return checks

def verify_pending(tolerance=3):
    # Findings two prompts reported are corroborated; the rest are checked, all in one batch.
    doubtful = [f for f in pending.values() if f["reports"] < 2]
    prompts, owner = [], []
    for k, f in enumerate(doubtful):
        for ws in verify_checks(f):
            prompts.append(verify_prompt(f, ws))
            owner.append(k)
    replies = llm_batch(prompts) if prompts else []
    confirmed, answered = set(), set()
    for k, reply in zip(owner, replies):
        f = doubtful[k]
        items = parse_worker_reply(reply)
        if items is None:
            continue  # the check failed: it says nothing either way
        answered.add(k)
        for item in items:
            named = str(item.get("file") or f["file"]).removeprefix("./")
            try:
                line = int(str(item.get("line", 0)).split("-")[0])
            except ValueError:
                continue
            if named == f["file"] and abs(line - f["line"]) <= tolerance:
                confirmed.add(k)
    kept = [f for f in pending.values() if f["reports"] >= 2]
    kept += [f for k, f in enumerate(doubtful) if k in confirmed or k not in answered]
    for f in kept:
        key = (f["file"], f["line"], str(f["cwe"] or f["kind"]))
        if key in seen_keys:
            continue
        seen_keys.add(key)
        f = {k: v for k, v in f.items() if k != "reports"}
        all_findings.append(f)
        unrecorded.append(f)  # recorded by record_some, a cell's worth at a time
    for f in doubtful:
        if f not in kept:
            print("  dropped (not confirmed):", f["file"] + ":" + str(f["line"]), "-", f["title"][:60])
    dropped = len(pending) - len(kept)
    pending.clear()
    return len(doubtful), len(prompts), len(kept), dropped

# deeprepo keeps this many findings a cell and counts the rest as cut: past it, the rest waits
# in unrecorded for the next turn's cell.
CELL_FINDINGS = 2000

def record_some(limit=CELL_FINDINGS):
    # add_finding for up to limit checked findings (all with None); how many are left.
    n = len(unrecorded) if limit is None else min(limit, len(unrecorded))
    for f in unrecorded[:n]:
        add_finding(f["file"], f["line"], f["kind"], f["severity"], f["title"], f["detail"], f["fix"], cwe=f["cwe"], end_line=f["end_line"])
    del unrecorded[:n]
    return len(unrecorded)

all_findings = globals().get("all_findings", [])
seen_keys = globals().get("seen_keys", set())
dispatched = globals().get("dispatched", set())
VERIFY = globals().get("VERIFY", False)
# Workers that answer one prompt at a time (a local model on a CPU): plan fewer prompts.
SERIAL = ((globals().get("metadata") or {}).get("workers") or {}).get("parallel") == 1
pending = globals().get("pending", {})
unrecorded = globals().get("unrecorded", [])
"""
