"""Where a value goes in Python source: whether a bandit hit is used the way that makes it a bug.

bandit matches a call or a literal; whether it matters depends on what the program does with
it. :func:`used_as_flagged` answers for the tests whose meaning is in the use:

- ``B311`` (``random``): a bug when the value becomes a token, password, key, session id,
  cookie, nonce or one-time code (named so, put in a cookie, returned by a function named so),
  not when it jitters a retry or samples data;
- ``B108`` (``/tmp/...``): when the path is opened, written or created, not when a string is
  compared with it or a setting names it;
- ``B104`` (``"0.0.0.0"``): when a server binds to it, not when a check names it;
- ``B308``/``B703``/``B704`` (``mark_safe``, ``Markup``): when the argument can carry data,
  not when it is a constant, a translated constant or already escaped.

A value is followed through names assigned from it (and parameters defaulting to it) within
its function, two steps deep: enough for ``token = random...; resp.set_cookie("t", token)``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

__all__ = ["JUDGED_TESTS", "SourceIndex", "identifier_words", "names_a_secret_use"]

#: bandit tests whose findings :func:`SourceIndex.used_as_flagged` decides.
JUDGED_TESTS = frozenset({"B104", "B108", "B308", "B311", "B703", "B704"})
_FOLLOW_DEPTH = 2
_MAX_FOLLOW = 32  # reads (or assignments) of one name followed, at most
# ``(child, parent) -> bool``: whether the value, reaching ``parent`` as ``child``, is used the
# flagged way.
_Use = Callable[[ast.AST, ast.AST], bool]
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Words of a name that say its value must be unguessable: a word starting with one of
# the prefixes, or one of the words.
_SECRET_WORD_PREFIXES = (
    "token", "secret", "passw", "passcode", "passphrase", "nonce", "csrf", "xsrf", "session",
    "sessid", "cookie", "apikey", "credential", "captcha", "verif",
)  # fmt: skip
# Not ``salt``: a salt must be unique, not secret, and random's values are unique enough.
_SECRET_WORDS = frozenset({"pwd", "otp", "pin", "auth", "sid", "authtoken", "mfa", "totp"})
# ``key`` is a secret's name unless the word before it says it indexes something.
_PUBLIC_KEY_WORDS = frozenset(
    {"cache", "sort", "dict", "lookup", "group", "shard", "partition", "bucket", "map", "index",
     "hash", "redis", "row", "column", "col", "field", "attr", "attribute", "setting", "config",
     "prefix", "primary", "foreign", "idempotency", "dedup", "order", "public", "object"}
)  # fmt: skip
# Calls that put their argument where a client or an attacker sees it as a credential.
_SECRET_SINKS = frozenset({"set_cookie", "cookie", "set_signed_cookie"})
_RANDOM_MODULES = frozenset({"random"})
# random calls that pick an item of a collection rather than make new random material.
_SELECTIONS = frozenset({"choice", "sample", "shuffle"})
# Calls that bind a server socket to the address they are given.
_BIND_CALLS = frozenset(
    {"bind", "run", "listen", "serve", "run_simple", "make_server", "HTTPServer",
     "ThreadingHTTPServer", "TCPServer", "UDPServer", "ThreadingTCPServer", "ThreadingUDPServer",
     "ForkingTCPServer", "create_server", "start_server", "WSGIServer", "run_app", "Server",
     "Config", "create_datagram_endpoint", "TCPSite", "serve_forever"}
)  # fmt: skip
_BIND_KEYWORDS = frozenset(
    {"host", "hostname", "bind", "address", "addr", "listen", "interface", "ip", "bind_address",
     "listen_address", "server_address", "local_addr"}
)  # fmt: skip
# Calls that open, create or write the path they are given (or are called on).
_FILE_CALLS = frozenset(
    {"open", "makedirs", "mkdir", "mkfifo", "mknod", "write_text", "write_bytes", "touch",
     "save", "savefig", "to_csv", "to_excel", "to_parquet", "to_pickle", "to_json", "to_hdf",
     "FileHandler", "RotatingFileHandler", "TimedRotatingFileHandler", "WatchedFileHandler",
     "copy", "copyfile", "copy2", "copytree", "move", "rename", "symlink", "link",
     "chmod", "chown", "connect", "ZipFile", "TarFile", "urlretrieve", "extractall", "extract",
     "savez", "savetxt", "unlink", "rmtree", "check_call", "check_output", "Popen", "system",
     "popen", "read_text", "read_bytes", "glob", "iglob", "rglob", "iterdir", "listdir",
     "scandir", "load_cert_chain", "load_verify_locations"}
)  # fmt: skip
_FILE_KEYWORDS = frozenset(
    {"filename", "file", "filepath", "file_path", "path", "outfile", "logfile", "log_file",
     "dest", "destination", "output", "out", "ssl_context", "certfile", "keyfile", "cafile",
     "ca_certs", "cert_file", "key_file", "cert", "socket_path", "unix_socket"}
)  # fmt: skip
_SAFE_MARKERS = frozenset({"mark_safe", "Markup", "SafeString", "SafeText"})
# Calls whose result is escaped (or constant) text: marking it safe adds nothing a user controls.
_ESCAPERS = frozenset(
    {"escape", "conditional_escape", "format_html", "format_html_join", "strip_tags", "clean",
     "render_to_string", "json_script", "urlencode", "quote", "quote_plus", "escapejs",
     "escape_uri_path", "iri_to_uri", "render", "render_template", "get_template", "linebreaks",
     "urlize", "intcomma", "static", "reverse", "url_for", "csrf_input", "int", "len"}
)  # fmt: skip
_STR_METHODS = frozenset(
    {"format", "replace", "strip", "lstrip", "rstrip", "lower", "upper", "title", "capitalize"}
)
_TRANSLATORS = frozenset(
    {"_", "gettext", "gettext_lazy", "ugettext", "ugettext_lazy", "pgettext", "pgettext_lazy",
     "ngettext", "ngettext_lazy", "lazy_gettext", "_l"}
)  # fmt: skip


class _ScopeNames(NamedTuple):
    """One function's (or the module's) names: reads, assigned values, and names whose
    value comes from outside the source (parameters, loop variables)."""

    loads: dict[str, list[ast.Name]]
    values: dict[str, list[ast.expr]]
    unknown: set[str]


def identifier_words(name: str) -> list[str]:
    """``resetToken`` / ``RESET_TOKEN`` / ``reset-token`` -> ``["reset", "token"]``."""
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub("_", name)) if w]


def names_a_secret_use(name: str, *, generated: bool = False) -> bool:
    """Whether an identifier (or a dict key, a cookie name) names a value that must be unguessable.

    A bare ``key`` is as often a dict or cache key picked at random as a secret: it counts
    only for a ``generated`` value (random bits or characters, not an item chosen from a
    collection).
    """
    words = identifier_words(name)
    for i, word in enumerate(words):
        if word in _SECRET_WORDS or word.startswith(_SECRET_WORD_PREFIXES):
            return True
        if word in {"key", "keys"} and (
            (i > 0 and words[i - 1] not in _PUBLIC_KEY_WORDS) or (generated and len(words) == 1)
        ):
            return True
    return False


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _target_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Attribute):
        yield target.attr
    elif isinstance(target, ast.Subscript):
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            yield key.value
        yield from _target_names(target.value)
    elif isinstance(target, ast.Tuple | ast.List):
        for elt in target.elts:
            yield from _target_names(elt)


class SourceIndex:
    """One parsed module with parent links, asked about the use of values at given lines."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self._parent: dict[ast.AST, ast.AST] = {}
        self._by_line: dict[int, list[ast.AST]] = {}
        self._random_names: set[str] = set()
        self._scopes: dict[int, _ScopeNames] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self._parent[child] = node
            line = getattr(node, "lineno", None)
            if line is not None:
                self._by_line.setdefault(line, []).append(node)
            if isinstance(node, ast.ImportFrom) and node.module in _RANDOM_MODULES:
                self._random_names.update(a.asname or a.name for a in node.names)

    def used_as_flagged(self, test_id: str, start: int, end: int) -> bool:
        """Whether bandit's ``test_id`` hit on lines ``start..end`` is used the way it flags.

        When the flagged node cannot be found the hit is kept: this only ever removes what it
        has read.
        """
        nodes = [n for line in range(start, end + 1) for n in self._by_line.get(line, [])]
        if test_id == "B311":
            hits: list[ast.AST] = [n for n in nodes if self._is_random_call(n)]
            return not hits or any(self._flows(n, self._secret_use) for n in hits)
        if test_id == "B108":
            hits = [n for n in nodes if (_str_value(n) or "").startswith(_TMP_PREFIXES)]
            return not hits or any(self._flows(n, self._file_use) for n in hits)
        if test_id == "B104":
            hits = [n for n in nodes if _str_value(n) == "0.0.0.0"]
            return not hits or any(self._flows(n, self._bind_use) for n in hits)
        calls = [n for n in nodes if isinstance(n, ast.Call) and _callee(n) in _SAFE_MARKERS]
        return not calls or any(not self._inert(c.args[0], 0) for c in calls if c.args)

    # --- following a value -------------------------------------------------------------

    def _flows(self, node: ast.AST, use: _Use, depth: int = 0) -> bool:
        """Whether ``node``'s value reaches a place ``use`` accepts, through its expression,
        the statement it is assigned in, and the names that hold it."""
        cur = node
        while True:
            parent = self._parent.get(cur)
            if parent is None or (
                isinstance(parent, ast.stmt) and not isinstance(parent, ast.Expr)
            ):
                break
            if use(cur, parent):
                return True
            if isinstance(parent, ast.arguments):
                return self._follow_parameter(cur, parent, use, depth)
            if isinstance(parent, ast.Expr):
                return False
            cur = parent
        if parent is None:
            return False
        if use(cur, parent):
            return True
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign) and depth < _FOLLOW_DEPTH:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            return any(
                self._flows(n, use, depth + 1) for n in self._loads(parent, names) if n is not cur
            )
        return False

    def _follow_parameter(
        self, default: ast.AST, args: ast.arguments, use: _Use, depth: int
    ) -> bool:
        positional = [*args.posonlyargs, *args.args]
        name = None
        if default in args.defaults:
            name = positional[
                len(positional) - len(args.defaults) + args.defaults.index(default)
            ].arg
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            if kw_default is default:
                name = arg.arg
        function = self._parent.get(args)
        if name is None or function is None or depth >= _FOLLOW_DEPTH:
            return False
        return any(self._flows(n, use, depth + 1) for n in self._loads_in(function, {name}))

    def _loads(self, statement: ast.AST, names: set[str]) -> list[ast.Name]:
        scope = self._scope_of(statement)
        after = getattr(statement, "lineno", 0)
        return [n for n in self._loads_in(scope, names) if n.lineno >= after]

    def _loads_in(self, scope: ast.AST, names: set[str]) -> list[ast.Name]:
        # The repository is untrusted: a name read thousands of times is followed through
        # its first reads only, so following stays linear in the file's size.
        loads = self._names(scope).loads
        return [n for name in sorted(names) for n in loads.get(name, [])][:_MAX_FOLLOW]

    def _names(self, scope: ast.AST) -> _ScopeNames:
        """Where each name of ``scope`` is read and assigned (one walk per scope)."""
        known = self._scopes.get(id(scope))
        if known is not None:
            return known
        found = _ScopeNames({}, {}, set())
        for node in ast.walk(scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                found.loads.setdefault(node.id, []).append(node)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and node.value is not None:
                        found.values.setdefault(t.id, []).append(node.value)
            elif isinstance(node, ast.arg):
                found.unknown.add(node.arg)  # a parameter: whatever the caller passes
            elif isinstance(node, ast.For | ast.comprehension):
                found.unknown.update(t.id for t in ast.walk(node.target) if isinstance(t, ast.Name))
        self._scopes[id(scope)] = found
        return found

    def _scope_of(self, node: ast.AST) -> ast.AST:
        cur = self._parent.get(node)
        while cur is not None and not isinstance(
            cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module
        ):
            cur = self._parent.get(cur)
        return cur if cur is not None else self.tree

    # --- the uses each test flags ------------------------------------------------------

    def _secret_use(self, child: ast.AST, parent: ast.AST) -> bool:
        if isinstance(parent, ast.keyword):
            return parent.arg is not None and names_a_secret_use(parent.arg)
        if (
            isinstance(parent, ast.Call)
            and child is not parent.func
            and _callee(parent) != "format"
        ):
            return _callee(parent) in _SECRET_SINKS
        if isinstance(parent, ast.Dict) and child in parent.values:
            key = _str_value(parent.keys[parent.values.index(child)])
            return key is not None and names_a_secret_use(key)
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            generated = not (isinstance(child, ast.Call) and _callee(child) in _SELECTIONS)
            return any(
                names_a_secret_use(n, generated=generated)
                for t in targets
                for n in _target_names(t)
            )
        if isinstance(parent, ast.BinOp | ast.JoinedStr) or (
            isinstance(parent, ast.Call) and _callee(parent) == "format"
        ):
            # Formatted into text that names it: "SESSIONID=%s", f"token={value}".
            return any(names_a_secret_use(text) for text in _literals_of(parent))
        if isinstance(parent, ast.Return | ast.FunctionDef | ast.AsyncFunctionDef):
            function = parent if not isinstance(parent, ast.Return) else self._scope_of(parent)
            name = getattr(function, "name", "")
            return bool(name) and names_a_secret_use(name)
        return False

    def _bind_use(self, child: ast.AST, parent: ast.AST) -> bool:
        if isinstance(parent, ast.keyword):
            return parent.arg in _BIND_KEYWORDS
        if isinstance(parent, ast.Call) and child is not parent.func:
            return _callee(parent) in _BIND_CALLS
        return False

    def _file_use(self, child: ast.AST, parent: ast.AST) -> bool:
        if isinstance(parent, ast.keyword):
            call = self._parent.get(parent)
            return parent.arg in _FILE_KEYWORDS and isinstance(call, ast.Call)
        if isinstance(parent, ast.Call):
            if child is parent.func:
                return False
            return _callee(parent) in _FILE_CALLS
        if isinstance(parent, ast.Attribute):  # Path("/tmp/x").write_text(...)
            call = self._parent.get(parent)
            return isinstance(call, ast.Call) and call.func is parent and parent.attr in _FILE_CALLS
        return isinstance(parent, ast.withitem)

    def _is_random_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id in _RANDOM_MODULES:
                return True
            # random.Random().choice / SystemRandom is not flagged by bandit; numpy's is
            return isinstance(base, ast.Attribute) and base.attr == "random"
        return isinstance(func, ast.Name) and func.id in self._random_names

    def _inert(self, expr: ast.expr, depth: int) -> bool:
        """Whether ``expr`` is text no user controls: constants, translations of constants,
        escaped values, and names only ever assigned such text."""
        if isinstance(expr, ast.Constant):
            return True
        if isinstance(expr, ast.JoinedStr):
            return all(self._inert(v, depth) for v in expr.values)
        if isinstance(expr, ast.FormattedValue):
            return self._inert(expr.value, depth)
        if isinstance(expr, ast.BinOp):
            return self._inert(expr.left, depth) and self._inert(expr.right, depth)
        if isinstance(expr, ast.Tuple | ast.List):
            return all(self._inert(e, depth) for e in expr.elts)
        if isinstance(expr, ast.Call):
            name = _callee(expr)
            if name in _ESCAPERS:
                return True
            if name in _TRANSLATORS:  # _("... %(name)s", name=value) formats its keywords in
                return all(isinstance(a, ast.Constant) for a in expr.args) and all(
                    self._inert(k.value, depth) for k in expr.keywords
                )
            if name in _STR_METHODS and isinstance(expr.func, ast.Attribute):
                # escape(s).replace(".", "<span>.</span>"): text methods of inert text
                parts = [expr.func.value, *expr.args, *(k.value for k in expr.keywords)]
                return all(self._inert(p, depth) for p in parts)
            return False
        if isinstance(expr, ast.Name) and depth < _FOLLOW_DEPTH:
            values = self._assigned(expr)
            return bool(values) and all(self._inert(v, depth + 1) for v in values)
        return False

    def _assigned(self, name: ast.Name) -> list[ast.expr]:
        """The values ``name`` is assigned in its scope; none when it is a parameter or a
        loop variable (its value is not in the source)."""
        names = self._names(self._scope_of(name))
        return [] if name.id in names.unknown else names.values.get(name.id, [])[:_MAX_FOLLOW]


_TMP_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm")  # bandit's B108 list


def _literals_of(node: ast.AST) -> list[str]:
    """The string constants an expression formats its values into."""
    parts: list[ast.AST] = []
    if isinstance(node, ast.BinOp):
        parts = [node.left, node.right]
    elif isinstance(node, ast.JoinedStr):
        parts = list(node.values)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        parts = [node.func.value]
    return [text for text in map(_str_value, parts) if text is not None]


def _str_value(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
