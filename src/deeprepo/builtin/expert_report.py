"""The report the scripted expert writes at the end (:data:`REPORT`): a summary of the
recorded findings and the architecture from ``metadata``, left in ``report`` for
``set_answer``. The research stack's policies end with it too."""

from __future__ import annotations

REPORT = r"""
def shown(name):
    # A name from the repository on one line: a newline, ESC or BEL written as its escape.
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(name))


SEV_ORDER = ["critical", "high", "medium", "low", "info"]
sources = audit_paths()
by_sev = {s: [] for s in SEV_ORDER}
for f in all_findings:
    by_sev.get(f["severity"].lower(), by_sev["medium"]).append(f)
per_file = {}
for f in all_findings:
    per_file[f["file"]] = per_file.get(f["file"], 0) + 1
top_dirs = {}
for p in codebase:
    d = p.split("/", 1)[0] if "/" in p else "."
    top_dirs[d] = top_dirs.get(d, 0) + 1

out = ["# Code analysis report", ""]
out.append("## Summary")
out.append("")
# How many files were audited is deeprepo's figure (answered prompts only), not the root's.
out.append("- Findings: " + str(len(all_findings)) + " (" + ", ".join(s + ": " + str(len(by_sev[s])) for s in SEV_ORDER if by_sev[s]) + ")")
if per_file:
    hot = sorted(per_file.items(), key=lambda kv: -kv[1])[:5]
    out.append("- Hot spots: " + ", ".join(shown(p) + " (" + str(n) + ")" for p, n in hot))
# Each finding was recorded with add_finding: deeprepo lists them (once) in the report.
kinds = {}
for f in all_findings:
    kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
if kinds:
    out.append("- Kinds: " + ", ".join(shown(k) + " (" + str(n) + ")" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:8]))
if not all_findings:
    out.append("")
    out.append("No problems were reported by the workers.")
out.append("")
out.append("## Architecture")
out.append("")
out.append("- Languages: " + ", ".join(str(k) + " (" + str(v) + ")" for k, v in metadata["languages"].items()))
arch = metadata.get("architecture") or {}
comps = arch.get("components") or []
if comps:
    # From the import graph deeprepo computed (metadata["architecture"]): what depends on what.
    out.append("- Components (" + str(len(comps)) + "): " + ", ".join(shown(c["name"]) for c in comps[:12])
               + (" …" if len(comps) > 12 else ""))
    heavy = sorted(arch.get("edges") or [], key=lambda e: -e["imports"])[:6]
    if heavy:
        out.append("- Heaviest dependencies: " + ", ".join(
            shown(e["source"]) + " → " + shown(e["target"]) + " (" + str(e["imports"]) + ")" for e in heavy))
    cycles = arch.get("component_cycles") or []
    out.append("- Import cycles between components: " + (str(len(cycles)) if cycles else "none"))
    untested = arch.get("untested_entry_points") or []
    if untested and arch.get("test_files"):
        out.append("- Entry points no test imports: " + ", ".join(shown(u) for u in untested[:8])
                   + (" …" if len(untested) > 8 else ""))
else:
    out.append("- Layout: " + ", ".join(shown(d) + "/ (" + str(n) + ")" for d, n in sorted(top_dirs.items(), key=lambda kv: -kv[1])[:8]))
report = "\n".join(out) + "\n"
"""
