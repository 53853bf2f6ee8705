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
"""

from __future__ import annotations

import unicodedata

__all__ = ["escape_name", "escape_text", "needs_escape"]

#: Unicode categories escaped: controls (C0, DEL, C1), format characters (bidi overrides,
#: zero-width characters, BOM), line/paragraph separators, and lone surrogates (undecodable
#: bytes of a file name).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
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
    return "".join(_escape_char(ch) if _dangerous(ch) else ch for ch in name)


def escape_text(text: str, *, keep: str = "\n\t") -> str:
    """Like :func:`escape_name`, but the characters in ``keep`` (newline and tab by default)
    are left as they are, for multi-line text whose lines are meant to be lines."""
    if text.isprintable():
        return text
    return "".join(_escape_char(ch) if ch not in keep and _dangerous(ch) else ch for ch in text)
