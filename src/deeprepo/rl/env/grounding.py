"""Which true positives a worker reported: the findings named in the recorded worker
replies, matched to ground-truth entries (the reward's grounding part)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from deeprepo.base.jsonl import reply_json
from deeprepo.findings.coverage import CoverageIndex, prompt_lines
from deeprepo.findings.grading import DEFAULT_TOLERANCE, GroundTruthEntry

__all__ = ["grounded_entries", "reply_items"]

_LINE_RE = re.compile(r"(?i)\blines?\b\W{0,3}(\d+)")


def reply_items(text: str) -> list[tuple[str | None, int]]:
    """``(file or None, line)`` of every finding a worker's reply names: the items of its
    JSON (plain, fenced or inside prose), else every "line N" it mentions."""
    # An object or a list, whichever opens first.
    for data in reply_json(text, earliest_first=True):
        if isinstance(data, dict):
            # One finding object is named by the keys a list item is named by.
            one = "line" in data or "start_line" in data
            data = data.get("findings", [data] if one else [])
        if not isinstance(data, list):
            continue
        out: list[tuple[str | None, int]] = []
        for item in data:
            if not isinstance(item, dict):
                continue
            try:
                line = int(str(item.get("line", item.get("start_line", ""))).split("-")[0])
            except ValueError:
                continue
            name = item.get("file")
            out.append((str(name).removeprefix("./") if name else None, line))
        return out
    return [(None, int(m)) for m in _LINE_RE.findall(text)]


def grounded_entries(
    replies: Sequence[tuple[str, str]],
    entries: Sequence[GroundTruthEntry],
    index: CoverageIndex,
    tolerance: int = DEFAULT_TOLERANCE,
) -> set[str]:
    """Ids of the entries some worker reported: a reply names a line within ``tolerance``
    of the entry, in its file (named, or, unnamed, one whose content the prompt carried)."""
    by_file: dict[str, list[GroundTruthEntry]] = {}
    for e in entries:
        by_file.setdefault(e.file, []).append(e)
    out: set[str] = set()
    for prompt, reply in replies:
        items = reply_items(reply)
        if not items:
            continue
        shown: list[str] | None = None
        for name, line in items:
            if name is not None:
                files = [name]
            else:
                if shown is None:
                    fr = index.fractions(prompt_lines([prompt]))
                    shown = [p for p, f in fr.items() if f > 0 and p in by_file]
                files = shown
            for path in files:
                for e in by_file.get(path, ()):
                    if e.start_line - tolerance <= line <= e.end_line + tolerance:
                        out.add(e.id)
    return out
