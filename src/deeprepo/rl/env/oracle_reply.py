"""What the oracle worker answers when a prompt asks for something other than an audit
(``rl/env/oracle.py``): what a model asked to "just say OK", summarise, translate, count
lines or list names would write. No finding, no cited line number: nothing a root could
record or a reward could ground as a finding."""

from __future__ import annotations

import re
from collections.abc import Mapping

from deeprepo.rl.env.oracle_read import ShownFile

__all__ = ["off_task_reply"]

_NAME_RE = re.compile(
    r"^(?:async\s+)?(?:def|class|function|func|fn)\s+([A-Za-z_$][\w$]*)"
    r"|^(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?\(?[\w\s,]*\)?\s*=>"
)
_COMMENT_RE = re.compile(r"^(#|//|/\*|\*|--)")


def _names(view: ShownFile) -> list[str]:
    out = []
    for n in sorted(view.text):
        m = _NAME_RE.match(view.text[n])
        if m:
            out.append(m.group(1) or m.group(2))
    return out


def _listing(names: list[str], limit: int = 12) -> str:
    if not names:
        return "no named functions or classes"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def off_task_reply(kind: str, shown: Mapping[str, ShownFile]) -> str:
    """The reply to a non-audit request of ``kind`` (``oracle_ask.Request.kind``) about the
    files ``shown``."""
    files = [shown[p] for p in sorted(shown)]
    if kind in ("ack", "none") or not files:
        return "OK."
    if kind == "count":
        return "\n".join(f"{v.path}: {len(v.text)} non-blank lines shown." for v in files)
    if kind == "names":
        return "\n".join(f"{v.path}: {_listing(_names(v), 50)}" for v in files)
    if kind == "translate":
        counts = [sum(1 for t in v.text.values() if _COMMENT_RE.match(t)) for v in files]
        return "\n".join(
            f"{v.path}: {k} comments translated; the code is unchanged."
            for v, k in zip(files, counts, strict=True)
        )
    if kind in ("summary", "explain"):
        return "\n".join(
            f"{v.path} holds {len(v.text)} non-blank lines and defines {_listing(_names(v))}."
            for v in files
        )
    return "Done: the request was applied to " + ", ".join(v.path for v in files) + "."
