"""Read a small model's audit answer leniently: never raise, keep what can be used.

Small models wrap JSON in fences or prose, stop mid-object at the token limit, answer
with a bare list or a bare finding, write ``"line": "12-14"`` or ``"L12"``. What can be
read becomes a finding dict; what cannot is counted, never a crash.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

__all__ = ["ParsedReply", "parse_findings"]

_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_INT_RE = re.compile(r"\d+")
_TEXT_FIELDS = ("kind", "cwe", "severity", "title", "detail", "fix", "code", "why")


class ParsedReply(NamedTuple):
    findings: list[dict[str, Any]]
    ok: bool  # False when nothing in the reply was JSON of a usable shape
    dropped: int  # items that were not findings (no usable line, not an object)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    # Cut at the token limit: keep the complete objects before the cut.
    start = text.find("[")
    if start == -1:
        return None
    body = text[start:]
    for end in range(len(body), 0, -1):
        if body[end - 1] != "}":
            continue
        try:
            return json.loads(body[:end] + "]")
        except ValueError:
            continue
    return None


def _candidates(text: str) -> list[Any]:
    pieces = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    out = []
    for piece in pieces:
        piece = piece.strip()
        for opener, closer in (("{", "}"), ("[", "]")):
            start, end = piece.find(opener), piece.rfind(closer)
            if start != -1 and end > start:
                data = _loads(piece[start : end + 1])
                if data is not None:
                    out.append(data)
        data = _loads(piece[piece.find("{") :]) if "{" in piece else None
        if data is not None:
            out.append(data)
    return out


def _line_of(item: dict[str, Any]) -> int | None:
    for key in ("line", "start_line", "line_number", "lineno"):
        value = item.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return int(value)
        if isinstance(value, str):
            m = _INT_RE.search(value)
            if m:
                return int(m.group())
        if isinstance(value, list) and value and isinstance(value[0], int):
            return value[0]
    return None


def _items_of(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("findings", "issues", "vulnerabilities", "results"):
            if isinstance(data.get(key), list):
                return list(data[key])
        if _line_of(data) is not None:
            return [data]  # one bare finding
        if not data:
            return []
    return None


def parse_findings(text: object) -> ParsedReply:
    """Findings from a worker's answer: ``{"line": int, "kind": str, …}`` dicts."""
    if not isinstance(text, str):
        return ParsedReply([], False, 0)
    for data in _candidates(text):
        items = _items_of(data)
        if items is None:
            continue
        findings: list[dict[str, Any]] = []
        dropped = 0
        for item in items:
            line = _line_of(item) if isinstance(item, dict) else None
            if line is None or line < 1:
                dropped += 1
                continue
            assert isinstance(item, dict)
            finding: dict[str, Any] = {"line": line}
            end = _line_of({"line": item.get("end_line")})
            if end is not None and end >= line:
                finding["end_line"] = end
            for key in _TEXT_FIELDS:
                value = item.get(key)
                if isinstance(value, str | int | float) and not isinstance(value, bool):
                    finding[key] = str(value).strip()
            if isinstance(item.get("file"), str):
                finding["file"] = item["file"]
            findings.append(finding)
        return ParsedReply(findings, True, dropped)
    return ParsedReply([], False, 0)
