"""What a cell did, as the message the kernel's loop sends: read from the runners' reports.

Kernel side, stdlib only, a private copy in the child (``child.py``) linked to the private
``protocol``, ``scaffold`` and ``runner``. It runs in the loop's thread, so it reads what
the runners hand back only as exact ``str``/``int``/``bool``/``tuple`` values, and never
compares, hashes or formats anything else (see ``loop.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from deeprepo.sandbox import protocol, runner, scaffold
else:  # private copies, linked by child.py when it loads this module: nothing is imported here
    protocol = runner = scaffold = None

MAX_NAME_CHARS = 80  # a variable name in a result (a cell can make names of megabytes)
MAX_FINDINGS_PER_CELL = 2000  # the parent keeps 1,000 a cell; a message stays under MAX_CONTAINERS
_FINDING_KEYS = ("file", "line", "end_line", "kind", "severity", "title", "detail", "fix", "cwe")


def read(cell_id: int, items: list[Any]) -> tuple[dict[str, Any], bool, bool]:
    """The result message for what the runners reported (read as exact plain types only),
    whether the cell was a syntax error, and whether it wants the cyclic gc on."""
    state: tuple[Any, ...] = ()
    notes: list[str] = []
    syntax = False
    error = None
    out: tuple[Any, ...] = ("", 0, "", (), 0, True)
    for item in items:
        if type(item) is not tuple or not item or type(item[0]) is not str:
            continue
        kind = item[0]
        if kind == "syntax":
            syntax = True
        elif kind == "ran" and len(item) == 2 and type(item[1]) is str:
            error = "exception" if item[1] == "exception" else None
        elif kind == "ok" and len(item) == 4 and not state:
            state = _state(item)
        elif kind == "error" and len(item) == 2 and type(item[1]) is str:
            notes.append(item[1][:500])
        elif kind == "out" and len(item) == 7:
            head, total, tail, kept, recorded, gc_on = item[1:]
            if (type(head), type(total), type(tail), type(kept)) == (str, int, str, tuple) and (
                type(recorded) is int and type(gc_on) is bool
            ):
                out = (head, total, tail, kept, recorded, gc_on)
    head, total, tail, kept, recorded, gc_on = out
    cut = total - len(head) - len(tail)
    output = head + protocol.cut_note(cut) + tail if cut > 0 else head + tail
    output += "".join(notes)
    findings = [f for f in map(_finding, kept[:MAX_FINDINGS_PER_CELL]) if f is not None]
    if recorded > MAX_FINDINGS_PER_CELL:
        output += (
            f"[deeprepo] this cell recorded {recorded:,} findings; only the first "
            f"{MAX_FINDINGS_PER_CELL:,} were kept.\n"
        )
    result: dict[str, Any] = {
        "type": "result",
        "id": cell_id,
        "output": output,
        "error": "syntax" if syntax else None,
        "answer": {"content": "", "ready": False},
        "findings": findings,
        # Findings this cell recorded that the cap dropped: the run counts them, so a cut
        # makes it incomplete instead of shrinking the report silently.
        "findings_cut": max(0, recorded - MAX_FINDINGS_PER_CELL),
        "restored": [],
        "user_vars": [],
        "mark": True,
    }
    if state and not syntax:  # after a syntax error nothing ran: nothing to report
        restored, content, ready, names = state
        result["error"] = error
        result["restored"] = [n for n in restored if n in scaffold.SCAFFOLD or n == "answer"]
        result["answer"] = {"content": content, "ready": ready}
        names = sorted(
            n[:MAX_NAME_CHARS] for n in names if n not in scaffold.SCAFFOLD and n != "answer"
        )
        if len(names) > protocol.MAX_USER_VARS:
            more = len(names) - protocol.MAX_USER_VARS
            names = [*names[: protocol.MAX_USER_VARS], f"... and {more} more"]
        result["user_vars"] = names
    return result, syntax, gc_on


def fit(result: dict[str, Any], line_of: Callable[[dict[str, Any]], bytes]) -> bytes:
    """The result as one line the parent accepts: findings, then the answer's end and the
    output's middle dropped while it is too long, with a note."""
    max_bytes = protocol.MAX_LINE_BYTES // 2
    line = line_of(result)
    if len(line) <= max_bytes:
        return line
    notes: list[str] = []
    findings = list(result["findings"])
    cut = int(result.get("findings_cut") or 0)
    while len(line) > max_bytes and findings:
        keep = len(findings) // 2
        notes.append(f"{len(findings) - keep} findings")
        cut += len(findings) - keep
        findings = findings[:keep]
        result = {**result, "findings_cut": cut}
        line = line_of({**result, "findings": findings})
    answer = dict(result["answer"])
    if len(line) > max_bytes and len(answer["content"]) > max_bytes // 16:
        answer["content"] = answer["content"][: max_bytes // 16]
        notes.append("the end of the answer")
    output = result["output"]
    if len(line) > max_bytes and len(output) > max_bytes // 16:
        output = protocol.cut_middle(output, max_bytes // 16)
        notes.append("the middle of the output")
    output += f"[deeprepo] the cell's result was too large; dropped: {', '.join(notes)}.\n"
    return line_of({**result, "findings": findings, "answer": answer, "output": output})


def _state(item: tuple[Any, ...]) -> tuple[Any, ...]:
    """An ``ok`` report as ``(restored, content, ready, names)`` of exact plain types, or
    ``()`` if it is not one the runner makes."""
    _, restored, pair, names = item
    if type(restored) is not tuple or type(names) is not tuple:
        return ()
    if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str:
        return ()
    return (
        [n for n in restored if type(n) is str],
        pair[0],
        pair[1] is True,
        [n for n in names if type(n) is str],
    )


def _finding(f: object) -> dict[str, Any] | None:
    """One finding the runner kept, as the parent reads it (checked again: exact types)."""
    plain = runner.plain_finding(f)
    return None if plain is None else dict(zip(_FINDING_KEYS, plain, strict=True))
