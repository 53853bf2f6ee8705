"""Sinks whose label depends on where their input comes from.

Every cross-file bug is a helper (the sink) plus a route that feeds it request input. The
same helper, byte for byte, also appears

* as a **decoy**, fed by a route that checks the value first (:func:`guarded_decoys`): the
  sink line and the helper are identical to the bug's, only the caller differs;
* as **clean code**, called with a constant (:func:`twin_caller`).

Helpers are renamed at random (:func:`renamed`) in all three roles alike, so a name does not
say which one a helper is. A reader has to follow the value from the route to the sink.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet

# snippet name → (guard lines inserted after the source line, imports, what the guard does)
_PY_GUARDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "py-sqli-search": (
        'if not re.fullmatch(r"[\\w ]{1,40}", term):\n    abort(400)',
        ("import re", "from flask import abort"),
        "the search term is limited to word characters and spaces",
    ),
    "py-sqli-order": (
        'if sort not in ("id", "created_at") or direction not in ("ASC", "DESC"):\n    abort(400)',
        ("from flask import abort",),
        "sort column and direction are checked against fixed allow-lists",
    ),
    "py-cmd-archive": (
        'if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name):\n    abort(400)',
        ("import re", "from flask import abort"),
        "the name is restricted to letters, digits, `_` and `-`",
    ),
    "py-path-attachment": (
        'if not re.fullmatch(r"[A-Za-z0-9_-]{1,60}\\.[a-z]{2,4}", name):\n    abort(404)',
        ("import re", "from flask import abort"),
        "the file name may not contain a slash or `..`",
    ),
    "py-deser-pickle": (
        'key = current_app.config["SECRET_KEY"].encode()\n'
        "expected = hmac.new(key, blob.encode(), hashlib.sha256).hexdigest()\n"
        'if blob and not hmac.compare_digest(expected, request.cookies.get("prefs_sig", "")):\n'
        "    abort(400)",
        ("import hashlib", "import hmac", "from flask import abort, current_app"),
        "the cookie must carry a valid HMAC made with the server's key, so only data the "
        "server wrote is unpickled",
    ),
    "py-deser-yaml": (
        'if "!" in text:\n    abort(400)',
        ("from flask import abort",),
        "documents with YAML tags are refused, so the loader only builds plain data",
    ),
    "py-xss-banner": (
        "message = escape(message)",
        ("from markupsafe import escape",),
        "the message is HTML-escaped before it is passed on",
    ),
    "py-ssrf-preview": (
        'if urlparse(url).hostname not in ("partners.example.com", "cdn.example.com"):\n'
        "    abort(400)",
        ("from urllib.parse import urlparse", "from flask import abort"),
        "only URLs on a fixed host allow-list are passed on",
    ),
}
_JS_BAD = 'return res.status(400).json({ error: "invalid input" });'
_JS_GUARDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "js-sqli-search": (
        f"if (!/^[\\w ]{{1,40}}$/.test(term)) {{\n  {_JS_BAD}\n}}",
        (),
        "the search term is limited to word characters and spaces",
    ),
    "js-sqli-order": (
        f'if (!["id", "created_at"].includes(sort) || !["ASC", "DESC"].includes(direction)) {{\n  {_JS_BAD}\n}}',
        (),
        "sort column and direction are checked against fixed allow-lists",
    ),
    "js-cmd-archive": (
        f"if (!/^[A-Za-z0-9_-]{{1,40}}$/.test(name)) {{\n  {_JS_BAD}\n}}",
        (),
        "the name is restricted to letters, digits, `_` and `-`",
    ),
    "js-path-attachment": (
        f"if (!/^[A-Za-z0-9_-]{{1,60}}\\.[a-z]{{2,4}}$/.test(name)) {{\n  {_JS_BAD}\n}}",
        (),
        "the file name may not contain a slash or `..`",
    ),
    "js-deser-cookie": (
        'const expected = crypto.createHmac("sha256", process.env.COOKIE_SECRET || "").update(blob).digest("hex");\n'
        'const given = Buffer.from(String(req.get("x-preferences-sig") || ""));\n'
        f"if (blob && (given.length !== expected.length || !crypto.timingSafeEqual(given, Buffer.from(expected)))) {{\n  {_JS_BAD}\n}}",
        ("crypto",),
        "the value must carry a valid HMAC made with the server's key, so only data the server "
        "wrote is deserialised",
    ),
    "js-deser-vm": (
        f'if (!/^[\\s\\w\\[\\]{{}}:,."-]*$/.test(text)) {{\n  {_JS_BAD}\n}}',
        (),
        "the text may only hold JSON-like characters (no parentheses, so no calls)",
    ),
    "js-xss-banner": (
        "const clean = message.replace(/[&<>\"']/g, (ch) => `&#${ch.charCodeAt(0)};`);",
        (),
        "the message is HTML-escaped before it is passed on",
    ),
    "js-ssrf-preview": (
        'if (!["partners.example.com", "cdn.example.com"].includes(new URL(url).hostname)) {\n'
        f"  {_JS_BAD}\n}}",
        (),
        "only URLs on a fixed host allow-list are passed on",
    ),
}
# A guard that rebinds the value: the call passes the new name.
_REBIND = {"js-xss-banner": ("message", "clean")}

# snippet name → constant arguments a clean caller passes
TWIN_ARGS: dict[str, str] = {
    "py-sqli-search": '"featured"',
    "py-sqli-order": '"created_at", "DESC"',
    "py-cmd-archive": '"nightly"',
    "py-path-attachment": '"terms-of-service.pdf"',
    "py-deser-yaml": '"name: defaults\\nversion: 1\\n"',
    "py-xss-banner": '"Scheduled maintenance on Sunday, 02:00 UTC", "warning"',
    "py-ssrf-preview": '"https://www.example.com/about"',
    "js-sqli-search": '"featured"',
    "js-sqli-order": '"created_at", "DESC"',
    "js-cmd-archive": '"nightly"',
    "js-path-attachment": '"terms-of-service.pdf"',
    "js-xss-banner": '"Scheduled maintenance on Sunday, 02:00 UTC", "warning"',
    "js-ssrf-preview": '"https://www.example.com/about"',
}
_PY_SUFFIXES = (
    "_now",
    "_batch",
    "_for_report",
    "_job",
    "_all",
    "_quick",
    "_v2",
    "_direct",
    "_task",
)
_JS_SUFFIXES = ("Now", "Batch", "ForReport", "Job", "All", "Quick", "V2", "Direct", "Task")
_PY_CALLER_PREFIXES = ("nightly_", "prefetch_", "default_", "scheduled_", "demo_", "warm_")
_JS_CALLER_PREFIXES = ("nightly", "prefetch", "default", "scheduled", "demo", "warm")


def _insert_guard(code: str, guard: str) -> str:
    lines = code.split("\n")
    i = next(k for k, ln in enumerate(lines) if "⟦source⟧" in ln)
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i + 1 : i + 1] = [indent + g if g else g for g in guard.split("\n")]
    return "\n".join(lines)


def guarded_decoys(snippets: tuple[Snippet, ...]) -> tuple[Snippet, ...]:
    """A decoy for each cross-file bug: the same helper, fed by a route that checks the value."""
    out: list[Snippet] = []
    for s in snippets:
        guards = _PY_GUARDS if s.lang == "python" else _JS_GUARDS
        if not s.vulnerable or s.source is None or s.name not in guards:
            continue
        guard, imports, what = guards[s.name]
        code = _insert_guard(s.source.code, guard)
        if s.name in _REBIND:
            old, new = _REBIND[s.name]
            code = code.replace(f"«sink_fn»({old})", f"«sink_fn»({new})")
        source = replace(s.source, code=code, imports=(*s.source.imports, *imports))
        out.append(
            replace(
                s,
                name=s.name + "-guarded",
                vulnerable=False,
                source=source,
                description=f"Safe: the helper looks like the bug of its kind, but its only caller "
                f"checks the input first: {what}.",
            )
        )
    return tuple(out)


def renamed(snippet: Snippet, rng: random.Random) -> Snippet:
    """The snippet with its helper renamed by a neutral suffix (half of the time)."""
    if snippet.source is None or rng.random() < 0.5:
        return snippet
    suffix = rng.choice(_PY_SUFFIXES if snippet.lang == "python" else _JS_SUFFIXES)
    return replace(snippet, block=rename_block(snippet.block, snippet.block.key + suffix))


def rename_block(block: Block, new: str) -> Block:
    old = block.key
    code = re.sub(re.escape(old) + r"(?=\()", new, block.code)
    exports = tuple(new if e == old else e for e in block.exports)
    return replace(block, key=new, code=code, exports=exports)


def twin_caller(snippet: Snippet, rng: random.Random, sink_id: str, sink_fn: str) -> Block:
    """A clean function that calls the helper with constant arguments."""
    args = TWIN_ARGS[snippet.name]
    if snippet.lang == "python":
        name = rng.choice(_PY_CALLER_PREFIXES) + re.sub(r"\W", "", sink_fn).lower()
        code = f"def {name}(«self0»):\n    return «{sink_id}.»{sink_fn}({args})"
        return Block(name, code, uses=(sink_id,))
    name = rng.choice(_JS_CALLER_PREFIXES) + sink_fn[:1].upper() + sink_fn[1:]
    code = f"«afn»{name}() {{\n  return «{sink_id}.»{sink_fn}({args});\n}}"
    return Block(name, code, uses=(sink_id,), exports=(name,))
