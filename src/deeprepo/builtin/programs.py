"""The Python the scripted expert writes, turn by turn, and the helpers other policies share.

This is code a competent root model would write against the REPL contract of DESIGN §3
(the research stack's weaker and gaming policies, ``deeprepo.rl.policies``, reuse
:data:`HELPERS` and :data:`REPORT`). Nothing here knows the
repository in advance: every decision is made from ``codebase``,
``metadata`` and the workers' replies at run time.
"""

from __future__ import annotations

from deeprepo.builtin.expert_helpers import HELPERS
from deeprepo.builtin.expert_report import REPORT

EXPERT = [
    # Turn 1: look at the shape of the repository before deciding anything.
    r"""
print(metadata["files"], "files,", metadata["lines"], "lines,", metadata["chars"], "chars")
print("languages:", metadata["languages"])
print("entry points:", metadata["entry_points"])
print("largest:", metadata["largest_files"][:5])
print("skipped:", len(metadata["skipped"]))
print(file_tree[:3000])
""",
    # Turn 2: delegate every source file (big ones in slices) in one parallel batch; hold
    # the findings until they are checked.
    "VERIFY = True\n"
    + HELPERS
    + r"""
sources = audit_paths()
jobs = audit_jobs(sources)
flows = [] if SERIAL else flow_jobs(sources)[:MAX_FLOW_PROMPTS]
if SERIAL:
    print("the worker answers one prompt at a time: no cross-file prompts, one check per finding")
print("dispatching", len(jobs), "file slices over", len(sources), "files to audit and",
      len(flows), "cross-file prompts (a file with the modules it imports)")
added, failed = dispatch(jobs, flows)
print("findings reported:", added, "| failed prompts:", len(failed))
for f in list(pending.values())[:40]:
    print(" ", f["severity"], f["file"] + ":" + str(f["line"]), f["cwe"], "-", f["title"][:80])
""",
    # Turn 3: retry what failed, check coverage, record what was checked, write the report,
    # answer. A cell keeps CELL_FINDINGS findings: with more, the answer waits and this turn
    # runs again (the last program repeats), recording the next cell's worth.
    HELPERS
    + r"""
sources = audit_paths()
retry = [j for j in audit_jobs(sources) if j[0] not in dispatched]
if retry:
    added, failed = dispatch(retry)
    print("retried", len(retry), "prompts:", added, "new findings,", len(failed), "still failing")
print("covered", len(dispatched), "of", len(sources), "source files")
doubtful, checks, kept, dropped = verify_pending()
print("checked", doubtful, "doubtful findings with", checks, "short re-queries:",
      kept, "findings kept,", dropped, "dropped")
"""
    + r"""
left = record_some()
if left:
    print("recorded", CELL_FINDINGS, "findings;", left, "left for the next turn")
"""
    + REPORT
    + r"""
if not left:
    set_answer(report)
    print(report[:1500])
""",
]

#: The program a policy runs on the extra turn at ``max_turns`` (``prompts.FINAL_TURN_NOTE``).
EXPERT_FINAL = (
    HELPERS + "\nverify_pending()\nrecord_some(None)\n" + REPORT + "\nset_answer(report)\n"
)

SALVAGE_SUBMIT = r"""
set_answer("# Report\n\nI ran out of turns before finishing the review.\n")
"""
