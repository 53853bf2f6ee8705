"""Escaping untrusted names and text for display (``deeprepo.base.textsafe``)."""

from __future__ import annotations

import random
import unicodedata

import pytest

from deeprepo.base.textsafe import escape_name, escape_text, needs_escape


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("app.py", "app.py"),
        ("naïve ünïcode 日本.py", "naïve ünïcode 日本.py"),
        ("a b\\c.py", "a b\\c.py"),  # a backslash is kept: names stay readable
        ("evil\n  forged.py", "evil\\n  forged.py"),
        ("cr\roverwrite", "cr\\roverwrite"),
        ("tab\there", "tab\\there"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("csi\x9b2J", "csi\\x9b2J"),  # the one-byte C1 form of ESC [
        ("del\x7f", "del\\x7f"),
        ("nul\x00", "nul\\x00"),
        ("gnp.\u202eexe", "gnp.\\u202eexe"),  # a right-to-left override
        ("isolate\u2066x\u2069", "isolate\\u2066x\\u2069"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep\u2029para", "line\\u2028sep\\u2029para"),
        ("bom\ufeff", "bom\\ufeff"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("surrogate\udcff", "surrogate\\udcff"),  # an undecodable byte (surrogateescape)
        ("nbsp\u00a0ok", "nbsp\u00a0ok"),  # spaces other than control characters stay
    ],
)
def test_escape_name(raw: str, shown: str) -> None:
    assert escape_name(raw) == shown
    assert escape_name(shown) == shown  # idempotent: layers may each escape
    assert needs_escape(raw) is (raw != shown)
    assert "\n" not in shown and "\x1b" not in shown and "\r" not in shown


def test_escape_text_keeps_line_breaks_and_tabs_only() -> None:
    text = "line one\n\tindented \x1b[2Jcleared\r\nbidi \u202e here"
    assert escape_text(text) == "line one\n\tindented \\x1b[2Jcleared\\r\nbidi \\u202e here"
    assert escape_text(text, keep="") == escape_name(text)
    assert escape_text(escape_text(text)) == escape_text(text)


DANGEROUS = {"Cc", "Cf", "Zl", "Zp", "Cs"}
# Printable, unprintable but harmless (spaces, private use, unassigned) and dangerous.
ALPHABET = [*"ab \n\t\r", "\u00a0", "\u3000", "\ue000", "\U000e0041", "\u202e", "\x1b"]
ALPHABET += ["\x85", "\u2028", "\u2029", "\ufeff", "\udcff", "\x00", "é", "日", "\U0001f600"]


@pytest.mark.parametrize("keep", ["\n\t", "", "\n", "\t", "\n\t\r"])
def test_escape_text_matches_its_char_by_char_definition(keep: str) -> None:
    # The fast paths (whole text, then line by line) must give what escaping every character
    # gives, for any mix of kept, harmless-unprintable and dangerous characters.
    rng = random.Random(f"textsafe-{keep!r}")
    texts = ["", "\n", "\n\n", "plain", "a\nb\n", "\u00a0\n\x1b", "x\r\n" * 3]
    texts += ["".join(rng.choices(ALPHABET, k=rng.randint(1, 60))) for _ in range(3000)]
    texts += ["line\n" * 50 + "\u202e" + "\nmore" * 50]
    for text in texts:
        expected = "".join(
            _short(ch) if ch not in keep and unicodedata.category(ch) in DANGEROUS else ch
            for ch in text
        )
        assert escape_text(text, keep=keep) == expected, repr(text)
        assert escape_text(expected, keep=keep) == expected  # idempotent


def _short(ch: str) -> str:
    short = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
