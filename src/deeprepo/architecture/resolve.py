"""Import targets → files of the repository, or the name of an external package.

Python: absolute imports are looked up under the *import roots*: the directory of a script
that sits outside any package (Python puts it first on ``sys.path``), the parents of
top-level packages (folders holding ``__init__.py`` whose parent holds none: ``src/`` in a
src layout, the repository root in a flat one) and, for namespace packages, those parents'
own ancestors. The longest dotted prefix that names a module wins, so ``from a.b import c``
lands on ``a/b/c.py`` when ``c`` is a submodule and on ``a/b/__init__.py`` (or ``a/b.py``)
when it is a name. Relative imports climb ``level - 1`` folders from the importing package.

JavaScript / TypeScript: relative specifiers are tried as written, with each extension and
as a folder's ``index``; a ``.js`` specifier also finds its ``.ts`` source. Bare specifiers
go through ``tsconfig.json`` / ``jsconfig.json`` ``paths`` and ``baseUrl`` and the names of
the repository's own ``package.json`` files (workspaces) before they count as external.
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
from collections.abc import Mapping
from typing import Any

from deeprepo.architecture.imports import PyImport

__all__ = ["JS_EXTENSIONS", "PY_EXTENSIONS", "JsResolver", "PyResolver", "package_name"]

PY_EXTENSIONS = (".py",)
JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte")
# Tried, in this order, after a specifier written without its extension.
_JS_TRY = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte", ".json")
_JS_TO_TS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
# Python 2's standard library too: old code (and `try: import StringIO`) still imports it.
_PY_STDLIB = frozenset(sys.stdlib_module_names) | frozenset(
    [
        "__future__",
        "__main__",
        "__builtin__",
        "StringIO",
        "cStringIO",
        "ConfigParser",
        "Queue",
        "SocketServer",
        "BaseHTTPServer",
        "SimpleHTTPServer",
        "CGIHTTPServer",
        "Cookie",
        "cookielib",
        "HTMLParser",
        "httplib",
        "htmlentitydefs",
        "urllib2",
        "urlparse",
        "robotparser",
        "xmlrpclib",
        "cPickle",
        "copy_reg",
        "commands",
        "thread",
        "dummy_thread",
        "UserDict",
        "UserList",
        "UserString",
        "Tkinter",
        "tkMessageBox",
        "anydbm",
        "dbhash",
        "whichdb",
        "md5",
        "sha",
        "sets",
        "exceptions",
        "new",
        "_winreg",
    ]
)
# What an npm package name can be (a specifier built at run time or a stray string is not).
_NPM_NAME = re.compile(r"^(?:@[a-z0-9][\w.~-]*/)?[a-z0-9_][\w.~-]*$", re.IGNORECASE)
_ASSET = re.compile(r"\.(?:json|css|scss|sass|less|svg|png|jpe?g|gif|html?|wasm|txt|md)$")
_NODE_BUILTINS = frozenset(
    [
        "assert",
        "async_hooks",
        "buffer",
        "child_process",
        "cluster",
        "console",
        "constants",
        "crypto",
        "dgram",
        "diagnostics_channel",
        "dns",
        "domain",
        "events",
        "fs",
        "http",
        "http2",
        "https",
        "inspector",
        "module",
        "net",
        "os",
        "path",
        "perf_hooks",
        "process",
        "punycode",
        "querystring",
        "readline",
        "repl",
        "stream",
        "string_decoder",
        "sys",
        "timers",
        "tls",
        "trace_events",
        "tty",
        "url",
        "util",
        "v8",
        "vm",
        "wasi",
        "worker_threads",
        "zlib",
        "test",
    ]
)


def _module_key(path: str) -> str:
    """``src/pkg/__init__.py`` → ``src/pkg``; ``src/pkg/mod.py`` → ``src/pkg/mod``."""
    key = path[: -len(".py")]
    return (
        key[: -len("/__init__")]
        if key.endswith("/__init__")
        else ("" if key == "__init__" else key)
    )


class PyResolver:
    """Resolve :class:`PyImport` targets of one repository's Python files."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.modules: dict[str, str] = {}
        packages: set[str] = set()
        for path in files:
            if path.endswith(".py"):
                key = _module_key(path)
                if path.endswith("__init__.py"):
                    packages.add(key)
                    self.modules[key] = path
                else:
                    self.modules.setdefault(key, path)  # a package beats a same-named module
        self.packages = packages
        roots: set[str] = {""}
        for pkg in packages:
            parent = posixpath.dirname(pkg)
            if parent not in packages:
                while True:  # the parent and its ancestors (namespace packages)
                    roots.add(parent)
                    if not parent:
                        break
                    parent = posixpath.dirname(parent)
        # Deepest first: ``src/`` beats the repository root when both would match.
        self.roots = sorted(roots, key=lambda r: (-r.count("/") - (1 if r else 0), r))

    def resolve(self, importer: str, imp: PyImport) -> tuple[list[str], str | None]:
        """The repository files ``imp`` (found in ``importer``) names, or else the top-level
        name of the external package it needs (``None`` for the standard library or for a
        relative import that leads nowhere)."""
        if imp.level:
            base = posixpath.dirname(importer)
            for _ in range(imp.level - 1):
                base = posixpath.dirname(base)
            head = posixpath.join(base, imp.module.replace(".", "/")) if imp.module else base
            return self._under(head, imp.names), None
        parts = imp.module.split(".")
        here = posixpath.dirname(importer)
        roots = self.roots if here in self.packages else [here, *self.roots]
        if parts[0] in _PY_STDLIB:  # the standard library wins, but for a script's sibling
            roots = [] if here in self.packages else [here]
        for n in range(len(parts), 0, -1):
            rel = "/".join(parts[:n])
            for root in roots:
                key = posixpath.join(root, rel) if root else rel
                if n == len(parts):
                    found = self._under(key, imp.names)  # a folder without __init__ counts too
                    if found:
                        return found, None
                elif key in self.modules:
                    return [self.modules[key]], None
        top = parts[0]
        return [], (None if top in _PY_STDLIB or not top else top)

    def parent_packages(self, paths: set[str]) -> set[str]:
        """The ``__init__.py`` of every package above ``paths`` (Python runs them on import)."""
        found: set[str] = set()
        for path in paths:
            key = posixpath.dirname(_module_key(path)) if path.endswith(".py") else ""
            while key in self.packages and self.modules[key] not in found:
                found.add(self.modules[key])
                key = posixpath.dirname(key)
        return found

    def _under(self, key: str, names: tuple[str, ...]) -> list[str]:
        """``from key import names``: the submodules among ``names``, else ``key`` itself."""
        found = [
            self.modules[k]
            for k in (f"{key}/{n}" if key else n for n in names)
            if k in self.modules
        ]
        if len(found) < len(names) or not names:
            own = self.modules.get(key)
            if own is not None:
                found.append(own)
        return found


def package_name(spec: str) -> str:
    """``@scope/pkg/sub`` → ``@scope/pkg``; ``lodash/fp`` → ``lodash``."""
    parts = spec.split("/")
    return "/".join(parts[:2]) if spec.startswith("@") and len(parts) > 1 else parts[0]


_JSON_SPECIAL = re.compile(r'"|//|/\*')
# The rest of a string after its opening quote; the two branches never match the same
# character, so a string left open fails in one pass.
_JSON_STRING_REST = re.compile(r'(?:\\.|[^"\\])*"')
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _loose_json(text: str) -> Any:
    """JSON with comments and trailing commas (tsconfig's dialect), or ``None``."""
    cleaned = _strip_json_comments(text)
    if cleaned is None:
        return None
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", cleaned))
    except (ValueError, RecursionError, MemoryError):
        return None  # not JSON, or nested past what the parser can hold: not a config


def _strip_json_comments(text: str) -> str | None:
    """``text`` without ``//`` and ``/* */`` comments outside strings; ``None`` when a string
    or a block comment is left open (not JSON either way).

    One pass with ``str.find``: a regex that tries ``/\\*[\\s\\S]*?\\*/`` at every ``/*`` of a
    file of unclosed comments rescans the rest of the file from each of them.
    """
    out: list[str] = []
    pos = 0
    while (m := _JSON_SPECIAL.search(text, pos)) is not None:
        out.append(text[pos : m.start()])
        token = m.group()
        if token == '"':
            rest = _JSON_STRING_REST.match(text, m.end())
            if rest is None:
                return None
            out.append(text[m.start() : rest.end()])
            pos = rest.end()
        elif token == "//":
            nl = text.find("\n", m.end())
            pos = len(text) if nl == -1 else nl
        else:
            close = text.find("*/", m.end())
            if close == -1:
                return None
            pos = close + 2
    out.append(text[pos:])
    return "".join(out)


class JsResolver:
    """Resolve module specifiers of one repository's JavaScript / TypeScript files."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = files
        # (config folder, baseUrl folder or None, [(alias prefix, suffix, [targets])]), deepest
        # folder first
        self.aliases: list[tuple[str, str | None, list[tuple[str, str, list[str]]]]] = []
        self.workspaces: dict[str, tuple[str, list[str]]] = {}  # name -> (dir, entry fields)
        self.mains: dict[str, list[str]] = {}  # folder -> its package.json entry fields
        for path, text in files.items():
            name = posixpath.basename(path)
            if "node_modules/" in path:
                continue
            if name == "package.json":
                self._add_workspace(path, text)
            elif (name.startswith("tsconfig") or name.startswith("jsconfig")) and name.endswith(
                ".json"
            ):
                self._add_config(path, text)
        self.aliases.sort(key=lambda a: -len(a[0]))

    def _add_workspace(self, path: str, text: str) -> None:
        data = _loose_json(text)
        if not isinstance(data, dict):
            return
        entries = [data[k] for k in ("source", "module", "main") if isinstance(data.get(k), str)]
        self.mains[posixpath.dirname(path)] = entries
        if isinstance(data.get("name"), str):
            self.workspaces.setdefault(data["name"], (posixpath.dirname(path), entries))

    def _add_config(self, path: str, text: str) -> None:
        data = _loose_json(text)
        options = data.get("compilerOptions") if isinstance(data, dict) else None
        if not isinstance(options, dict):
            return
        here = posixpath.dirname(path)
        base_url = options.get("baseUrl")
        base = (
            posixpath.normpath(posixpath.join(here, base_url))
            if isinstance(base_url, str)
            else None
        )
        rules: list[tuple[str, str, list[str]]] = []
        paths = options.get("paths")
        if isinstance(paths, dict):
            for pattern, targets in paths.items():
                if not isinstance(targets, list):
                    continue
                prefix, star, suffix = pattern.partition("*")
                rules.append(
                    (prefix, suffix if star else "\0", [t for t in targets if isinstance(t, str)])
                )
        if base is not None or rules:
            self.aliases.append((here, "" if base == "." else base, rules))

    def resolve(self, importer: str, spec: str) -> tuple[str | None, str | None]:
        """``(file, None)`` for a file of the repository, ``(None, package)`` for an external
        package, ``(None, None)`` for a Node built-in or a specifier that leads nowhere."""
        spec = spec.split("?", 1)[0]
        if spec.startswith((".", "/")):
            if spec.startswith("/"):
                return None, None
            return self._file(posixpath.join(posixpath.dirname(importer), spec)), None
        if ":" in spec or spec.startswith("#"):  # node:fs, virtual:…, https:…, #subpath imports
            return None, None
        for here, base, rules in self.aliases:
            if here and not importer.startswith(here + "/"):
                continue
            for prefix, suffix, targets in rules:
                if suffix == "\0":
                    matched = spec == prefix
                    star = ""
                else:
                    matched = (
                        spec.startswith(prefix)
                        and spec.endswith(suffix)
                        and len(spec) >= len(prefix) + len(suffix)
                    )
                    star = spec[len(prefix) : len(spec) - len(suffix)] if matched else ""
                if matched:
                    for target in targets:
                        folder = here if base is None else base  # paths are relative to baseUrl
                        hit = self._file(posixpath.join(folder, target.replace("*", star)))
                        if hit:
                            return hit, None
            if base is not None:
                hit = self._file(posixpath.join(base, spec))
                if hit:
                    return hit, None
        name = package_name(spec)
        workspace = self.workspaces.get(name)
        if workspace is not None:
            folder, entries = workspace
            rest = spec[len(name) :].lstrip("/")
            if rest:
                hit = self._file(posixpath.join(folder, rest)) or self._file(
                    posixpath.join(folder, "src", rest)
                )
            else:
                hit = next(
                    (h for e in entries if (h := self._file(posixpath.join(folder, e)))), None
                )
                hit = hit or self._file(posixpath.join(folder, "src/index")) or self._file(folder)
            if hit:
                return hit, None
            return None, None  # the repository's own package, built elsewhere
        if name in _NODE_BUILTINS or not _NPM_NAME.match(name) or _ASSET.search(name):
            return None, None
        return None, name

    def _file(self, target: str, depth: int = 0) -> str | None:
        """Node / bundler resolution of a path: as written, with an extension, as a folder."""
        target = posixpath.normpath(target)
        if target.startswith("../") or target == "..":
            return None
        if target == ".":
            target = ""
        files = self.files
        # A file that is no module (a stylesheet, JSON, a .d.ts) is still the repository's:
        # returned, it is neither an external package nor a node of the graph.
        ext = posixpath.splitext(target)[1]
        if target in files:
            return target
        for alt in _JS_TO_TS.get(ext, ()):
            candidate = target[: -len(ext)] + alt
            if candidate in files:
                return candidate
        for suffix in _JS_TRY:
            if target + suffix in files:
                return target + suffix
        for entry in self.mains.get(target, ()) if depth < 3 else ():  # a package.json's folder
            inner = posixpath.normpath(posixpath.join(target, entry))
            hit = self._file(inner, depth + 1) if inner not in (target, ".") else None
            if hit:
                return hit
        index = f"{target}/index" if target else "index"
        for suffix in _JS_TRY:
            if index + suffix in files:
                return index + suffix
        for declared in (target + ".d.ts", index + ".d.ts"):
            if declared in files:
                return declared
        return None
