"""What one cell did, as the parent reports it: :class:`ExecResult`, and the checks every
result message goes through (it may be forged: a cell can write on the pipe), the
notes of a restart, and how a child's exit status reads.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from deeprepo.sandbox import protocol
from deeprepo.sandbox.rpc import LlmCall

ERRORS = ("syntax", "exception", "timeout", "killed", "crashed")
_SCAFFOLD = ("llm_query", "llm_batch", "add_finding", "set_answer", "file_audit_prompt")
RESTORABLE = (*_SCAFFOLD, "codebase", "file_tree", "metadata", "answer")
_FINDING_KEYS = ("file", "line", "end_line", "kind", "severity", "title", "detail", "fix", "cwe")
# A result (forged or not) carries no more: the child sends at most as many (its own cap,
# which keeps a message under protocol.MAX_CONTAINERS); what either cuts is counted.
MAX_FINDINGS_PER_CELL = 2000
_FIELD_CHARS = {
    "file": 1000,
    "kind": 200,
    "severity": 50,
    "title": 1000,
    "detail": 20_000,
    "fix": 20_000,
}
NOTES_SLACK = 2048  # the child's own notes after the cut output (a cut, a dropped finding count)
_MAX_NAMES_SHOWN = 30  # lost variable names in a restart note
_MAX_NAME_CHARS = 80


@dataclass(frozen=True)
class ExecResult:
    """What one cell did, as the orchestrator needs it."""

    output: str  # stdout+stderr+traceback cut to output_limit (head and tail kept), then notes
    error: str | None  # None, "syntax", "exception", "timeout", "killed", "crashed"
    answer: dict[str, Any]  # {"content": str, "ready": bool}, read from the namespace
    new_findings: list[dict[str, Any]]  # add_finding calls of this cell
    restored: list[str]  # scaffold names the code overwrote, now restored
    restarted: bool  # the kernel died (or was stopped) and a fresh one was started
    lost_variables: list[str]  # user variable names lost in that restart
    llm_calls: int  # sub-LLM prompts requested during this cell
    seconds: float
    calls: tuple[LlmCall, ...] = ()  # the cell's llm_query / llm_batch calls, in order
    findings_cut: int = 0  # add_finding calls of this cell dropped by a cap (child or parent)


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def plain_text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (a cell can print one) becomes ``?``, so
    the run log, the report and the next request can be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def clean_answer(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {"content": "", "ready": False}
    content = value.get("content")
    return {
        "content": plain_text(content) if isinstance(content, str) else "",
        "ready": value.get("ready") is True,
    }


def clean_names(names: list[Any]) -> list[str]:
    """Variable names from a result, each cut to a readable length, at most MAX_USER_VARS."""
    out = [
        plain_text(n if len(n) <= _MAX_NAME_CHARS else n[: _MAX_NAME_CHARS - 1] + "…")
        for n in names
        if isinstance(n, str)
    ]
    return out[: protocol.MAX_USER_VARS + 1]


def clean_finding(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: raw.get(k) for k in _FINDING_KEYS}
    for key in ("file", "kind", "severity", "title", "detail", "fix"):
        text = "" if out[key] is None else str(out[key])
        cap = _FIELD_CHARS[key]
        out[key] = plain_text(text if len(text) <= cap else text[: cap - 1] + "…")
    if out["cwe"] is not None:
        out["cwe"] = plain_text(str(out["cwe"])[:50])
    line = out["line"]
    if not isinstance(line, int) or isinstance(line, bool) or not 0 < line < 10**9:
        out["line"] = line = 1
    end = out["end_line"]
    if not isinstance(end, int) or isinstance(end, bool) or not line <= end < 10**9:
        out["end_line"] = line
    return out


def compose(output: str, stray: str, notes: list[str]) -> str:
    parts = [output.rstrip("\n")] if output.strip() else []
    if stray.strip():
        parts.append(
            "[written directly to fd 1/2, e.g. by a subprocess or a crash]\n" + stray.rstrip("\n")
        )
    parts += notes
    return "\n".join(parts) + ("\n" if parts else "")


def classify_exit(rc: int | None, mode: str) -> tuple[str, str]:
    """("killed" | "crashed", how it ended) from the child's (or bwrap's) exit status."""
    if rc is None:
        return "crashed", "it stopped answering"
    sig = -rc if rc < 0 else (rc - 128 if mode == "bwrap" and rc > 128 else 0)
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig in (signal.SIGKILL, signal.SIGXCPU):
            return "killed", f"killed by {name}: a memory or CPU limit, or the code killed itself"
        return "crashed", f"killed by {name}"
    return "crashed", f"exit code {rc}"


def restart_note(reason: str, lost: list[str]) -> str:
    shown = clean_names(lost)[:_MAX_NAMES_SHOWN]
    names = ", ".join(shown) if shown else "none"
    if len(lost) > len(shown):
        names += f" and {len(lost) - len(shown):,} more"
    return (
        f"[deeprepo] {reason}. A fresh kernel was started: codebase, file_tree, metadata and the "
        f"scaffold functions are loaded again and answer keeps its content, but your variables are "
        f"gone ({names}) and so are files in the temp dir. Re-create what you need, and split "
        "long work into smaller cells."
    )
