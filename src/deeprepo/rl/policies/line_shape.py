"""A line's shape: identifiers, strings and numbers abstracted, keywords kept (the template
matcher of ``routes_oracle.py``; this module's source also runs in the REPL)."""

import re

_SHAPE_STR = re.compile(r"""[rbfu]*("|'|`)(?:\\.|(?!\1).)*\1""")
_SHAPE_NUM = re.compile(r"\b\d[\d_.]*\b")
_SHAPE_ID = re.compile(r"[A-Za-z_$][\w$]*")
_SHAPE_KEEP = frozenset(
    [
        "False",
        "None",
        "True",
        "and",
        "as",
        "assert",
        "async",
        "await",
        "break",
        "class",
        "continue",
        "def",
        "del",
        "elif",
        "else",
        "except",
        "finally",
        "for",
        "from",
        "global",
        "if",
        "import",
        "in",
        "is",
        "lambda",
        "nonlocal",
        "not",
        "or",
        "pass",
        "raise",
        "return",
        "try",
        "while",
        "with",
        "yield",
        "const",
        "let",
        "var",
        "function",
        "new",
        "this",
        "typeof",
        "instanceof",
        "of",
        "catch",
        "throw",
        "switch",
        "case",
        "default",
        "null",
        "undefined",
        "true",
        "false",
        "export",
        "module",
        "require",
    ]
)


def line_shape(line: str) -> str:
    """``query = f"SELECT {x}"`` → ``I = S``: the line with names, strings and numbers
    abstracted."""
    s = _SHAPE_STR.sub("S", line.strip())
    s = _SHAPE_NUM.sub("N", s)
    return _SHAPE_ID.sub(lambda m: m.group(0) if m.group(0) in _SHAPE_KEEP else "I", s)
