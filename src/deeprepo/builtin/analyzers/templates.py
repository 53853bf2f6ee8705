"""Whether a template's unescaped output can carry user data, for semgrep's template rules.

semgrep matches ``{{ x|safe }}`` and ``{% autoescape off %}`` as text. They are XSS only where
the page is HTML and the value can come from a user. :func:`template_finding_matters` drops
the matches that cannot be:

- **plain-text templates**: a ``.txt`` template, or one with no HTML markup outside its
  template tags and either words there or a name that says text (``subject``, ``text``,
  ``plain``, ``sms`` as a word of the file name) (an email's text body, a subject line, an SMS or chat message). Nothing
  there is parsed as HTML; Django documents ``{% autoescape off %}`` for exactly these. A file
  of template tags alone (``{{ comment.body|safe }}``) is kept: it is a fragment that may be
  included into an HTML page. A markup-free fragment *with* words is missed: the include site,
  not the fragment, shows the page is HTML, and a regex over one file cannot see it;
- **constants**: a quoted literal, a translation of one (``_("...")``, ``gettext``) or a
  helper called with literals only (``icon("plus")``, ``include_svg("a.svg")``), marked safe:
  the text is the developer's, the translators' or the server's own files;
- **framework output**: a form or form field (``form.x``, ``field(...)``: the widget escapes
  the value it shows) and the CSRF token;
- **values escaped or serialised first**: ``|escape|safe``, ``|tojson|safe``, ``|urlencode|safe``,
  ``|bleach|safe``: the filter before ``safe`` already made the value inert;
- an ``{% autoescape off %}`` block that renders no variable.
"""

from __future__ import annotations

import re

__all__ = ["JUDGED_RULES", "template_finding_matters"]

#: semgrep rule ids (``deeprepo/data/semgrep/templates.yml``) this module judges.
JUDGED_RULES = frozenset({"template-jinja-safe-filter", "template-autoescape-off"})
_TEMPLATE_TAGS = re.compile(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}", re.S)
_HTML = re.compile(r"<(?:[A-Za-z][\w:-]*|!DOCTYPE|!--|/[A-Za-z])[\s/>]", re.IGNORECASE)
_SAFE_OUTPUT = re.compile(r"\{\{([^{}]*?)\|\s*(?:safe|raw)\b[^{}]*\}\}")
_LITERAL = re.compile(r"""^\s*(?:"[^"]*"|'[^']*')\s*$""")
# A call whose arguments are all literals: f("a"), f("a", size=2).
_CONSTANT_CALL = re.compile(
    r"""^\s*[A-Za-z_][\w.]*\(\s*(?:(?:\w+\s*=\s*)?(?:"[^"]*"|'[^']*'|\d+|True|False|None)"""
    r"""\s*(?:,\s*|(?=\))))*\)\s*$"""
)
_FRAMEWORK = re.compile(r"^\s*(?:form|field|csrf_token|csrf_input)\b")
_TRANSLATED = re.compile(
    r"""^\s*(?:_|gettext|ngettext|pgettext|trans|_l|lazy_gettext)\s*\(\s*(?:"[^"]*"|'[^']*')"""
    r"""(?:\s*,[^()]*)?\)\s*$"""
)
# Filters whose output is escaped, serialised or a number: ``safe`` after them is harmless.
_INERT_FILTERS = frozenset(
    {"escape", "e", "force_escape", "tojson", "json", "escapejs", "urlencode", "urlize",
     "bleach", "sanitize", "clean", "sanitize_html", "striptags", "length", "count", "int",
     "float", "filesizeformat", "intcomma", "json_script", "markdown_safe", "date", "time"}
)  # fmt: skip
_TEXT_NAMES = frozenset({"subject", "text", "plain", "txt", "sms"})
_WORD = re.compile(r"[A-Za-z]{2,}")
_BLOCK_END = re.compile(r"\{%-?\s*endautoescape\b")


def template_finding_matters(rule: str, path: str, text: str, start: int, end: int) -> bool:
    """Whether semgrep's ``rule`` match on lines ``start..end`` of template ``text`` can be XSS."""
    if rule not in JUDGED_RULES:
        return True
    if _plain_text(path, text):
        return False
    lines = text.split("\n")
    if rule == "template-autoescape-off":
        after = "\n".join(lines[start - 1 :])
        close = _BLOCK_END.search(after)
        block = after[: close.start()] if close else after
        return "{{" in block
    shown = "\n".join(lines[start - 1 : end])
    outputs = [m.group(1) for m in _SAFE_OUTPUT.finditer(shown)]
    return not outputs or any(not _inert(expr) for expr in outputs)


def _plain_text(path: str, text: str) -> bool:
    """Whether the template renders text that no browser parses as HTML."""
    name = path.rsplit("/", 1)[-1].lower()
    if name.endswith(".txt") or ".txt." in name:
        return True
    # The e-mail conventions: welcome_subject.html, alert-body-text.html, sms-plain.j2.
    words = set(re.split(r"[^a-z0-9]+", name.rsplit(".", 1)[0]))
    if words & _TEXT_NAMES and not _HTML.search(_TEMPLATE_TAGS.sub(" ", text)):
        return True
    outside = _TEMPLATE_TAGS.sub(" ", text)
    return not _HTML.search(outside) and bool(_WORD.search(outside))


def _inert(expr: str) -> bool:
    """Whether ``{{ expr|safe }}``'s value is a constant or was escaped before ``safe``."""
    head, *filters = _split_filters(expr)
    if any(p.match(head) for p in (_LITERAL, _TRANSLATED, _CONSTANT_CALL, _FRAMEWORK)):
        return True
    names = [f.split(":", 1)[0].split("(", 1)[0].strip().lower() for f in filters]
    return any(name in _INERT_FILTERS for name in names)


def _split_filters(expr: str) -> list[str]:
    """``a|b:"x|y"|c`` -> ``["a", 'b:"x|y"', "c"]``: pipes inside quotes are not filters."""
    parts: list[str] = []
    cur: list[str] = []
    quote = ""
    for ch in expr:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "|":
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts
