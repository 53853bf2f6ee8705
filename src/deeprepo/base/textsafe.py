"""Show untrusted names and text without letting them act on the reader.

A file name is untrusted input: it may hold a newline (forging extra lines in ``file_tree``
or a report), a carriage return, terminal escape sequences (ESC, CSI) or bidirectional
overrides (text that reads differently from what it is). Before a name is shown to a person
or a model it goes through :func:`escape_name`; longer text that may keep its line breaks
(a finding's body, a git error) goes through :func:`escape_text`.

Both replace each dangerous character with a visible Python-style escape (``\\n``, ``\\r``,
``\\t``, ``\\x1b``, ``\\u202e``, ``\\U000e0001``) and leave everything else as it is. The output
holds no control, format, line- or paragraph-separator character, so applying either function
again changes nothing: layers may each escape what they show without double escaping. A
backslash is not escaped (names with backslashes stay readable), so the shown form of a name
is not always reversible; the data (``codebase`` keys, file texts) keeps the raw names.

For written outputs: :func:`md_text` and :func:`md_code` put a name on one line of
markdown (report.md, a SARIF message) where it can neither add a line nor form markup;
:func:`mermaid_label` puts it inside a Mermaid node label; :func:`visible` and
:func:`one_line` escape only controls and direction changes.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "escape_name",
    "escape_text",
    "md_code",
    "md_text",
    "mermaid_label",
    "needs_escape",
    "one_line",
    "visible",
]

#: Unicode categories escaped: controls (C0, DEL, C1), format characters (bidi overrides,
#: zero-width characters, BOM), line/paragraph separators, and lone surrogates (undecodable
#: bytes of a file name).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(ch: str) -> str:
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _dangerous(ch: str) -> bool:
    return unicodedata.category(ch) in _ESCAPED_CATEGORIES


def needs_escape(text: str) -> bool:
    """Whether :func:`escape_name` would change ``text``."""
    # Fast path: everything printable holds nothing to escape (str.isprintable is False for
    # every category escaped here, and runs in C).
    return not text.isprintable() and any(map(_dangerous, text))


def escape_name(name: str) -> str:
    """``name`` with every control, format and separator character shown as an escape.

    One line in, one line out: a name can never add a line, move the cursor, change colours
    or reorder the text around it. Idempotent; ordinary names come back unchanged::

        >>> escape_name("ok.py")
        'ok.py'
        >>> escape_name("evil\\n  forged.py\\x1b[31m")
        'evil\\\\n  forged.py\\\\x1b[31m'
    """
    if name.isprintable():
        return name
    return "".join(_escape_one(ch) if _dangerous(ch) else ch for ch in name)


def escape_text(text: str, *, keep: str = "\n\t") -> str:
    """Like :func:`escape_name`, but the characters in ``keep`` (newline and tab by default)
    are left as they are, for multi-line text whose lines are meant to be lines."""
    if text.isprintable() or _printable_but(text, keep):
        return text
    if "\n" not in keep:
        return _escape_chars(text, keep)
    # Multi-line text (a prompt, a file) is rarely unprintable in more than a few lines:
    # only those are looked at character by character, the rest is checked in C.
    return "\n".join(
        line if _printable_but(line, keep) else _escape_chars(line, keep)
        for line in text.split("\n")
    )


def _printable_but(text: str, keep: str) -> bool:
    """``text`` less the characters in ``keep`` is printable (so it holds nothing to escape:
    every escaped category is unprintable). A multi-line text is unprintable for its line
    breaks alone; taking them out first keeps it on the C path."""
    for ch in keep:
        text = text.replace(ch, "")
    return text.isprintable()


def _escape_chars(text: str, keep: str) -> str:
    return "".join(_escape_one(ch) if ch not in keep and _dangerous(ch) else ch for ch in text)


# --- markdown and diagrams (report.md, SARIF messages) ---------------------------------

# C0 and DEL and C1; bidi embeddings/overrides/isolates and marks; LS/PS; BOM-like ZWNBSP.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]"
)
_WHITESPACE_RUN = re.compile(r"[\t\r\n]+")
# Enough to keep emphasis, code, links/images (their brackets), strikethrough and table
# cells from forming; "(" and "#" need no escape once "[" is escaped and "#" is not first.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def _escape_match(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` with every control or direction-changing character escaped."""
    return _UNSAFE.sub(_escape_match, str(text))


def one_line(text: object) -> str:
    """Tabs and line breaks as single spaces, then :func:`visible`."""
    return visible(_WHITESPACE_RUN.sub(" ", str(text)).strip())


def md_text(text: object) -> str:
    """One line of markdown that renders as exactly ``text`` (no markup, no HTML)."""
    s = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    # A leading "-", "1." or "=" could start a list or a heading underline.
    return re.sub(r"^([-=+#]|\d+\.)", r"\\\1", s)


def md_code(text: object) -> str:
    """An inline code span showing ``text`` verbatim (one line, controls escaped)."""
    s = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


# Letters, digits and a few punctuation marks Mermaid gives no meaning inside a quoted label.
_MERMAID_PLAIN = re.compile(r"[A-Za-z0-9 _.,:/+-]")


def mermaid_label(text: object) -> str:
    """``text`` for a Mermaid node label inside ``["..."]``: one line, every character that
    is not a letter, digit or plain punctuation written as a Mermaid entity (``#34;`` for
    ``"``, ``#93;`` for ``]``, ``#96;`` for a backtick), so no name can close the label,
    add an edge (``-->``), open HTML or end the fenced block."""
    return "".join(ch if _MERMAID_PLAIN.fullmatch(ch) else f"#{ord(ch)};" for ch in one_line(text))
