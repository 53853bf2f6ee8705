"""JSON-lines text split into its records' lines.

Records are written with ``json.dumps(ensure_ascii=False)``, which leaves U+2028, U+0085,
``\\x1c`` … raw inside strings; ``str.splitlines()`` splits on those and tears a record in
two. Every reader of deeprepo's JSON-lines files splits here, on ``"\\n"`` only.
"""

from __future__ import annotations

__all__ = ["record_lines"]


def record_lines(text: str) -> list[str]:
    """The lines of ``text`` that can hold a record: split on "\\n" only, blank ones dropped."""
    return [line for line in text.split("\n") if line.strip()]
