"""Hard-coded framework signing keys in Python: Flask, Django, JWT, itsdangerous.

A framework's signing key (Flask ``app.secret_key`` / ``SECRET_KEY``, Django ``SECRET_KEY``,
a JWT secret, an itsdangerous signer's key) signs the session cookies, CSRF tokens and
tokens of every user: whoever reads it in the source forges them. Any literal there is
the bug, including a short or word-like one (``"dev"``, ``"my-secret-key"``) that the
general secret judgement (:func:`~.secrets.looks_like_secret`) rightly ignores elsewhere, and
Django's ``django-insecure-`` keys.

Not reported, on purpose:

- a value read from the environment or a config loader, even with a literal fallback
  (``os.environ.get("SECRET_KEY", "dev")``, ``env("SECRET_KEY", default=...)``, ``... or
  "dev"``): the deployment sets the key; the fallback serves unconfigured local runs, and
  flagging it would fire on nearly every project template while the deployed key is safe;
- obvious placeholders (``"change-me"``, ``"<your key>"``, ``"${SECRET}"``, ``""``): text meant
  to be replaced, which a deployment cannot run with unnoticed;
- keys set for tests: in a ``test_*`` function, a ``Test*`` class, or next to ``TESTING=True``.
"""

from __future__ import annotations

import ast
import re

from deeprepo.builtin.analyzers.findings import WorkerFinding
from deeprepo.builtin.analyzers.secrets import SECRET_FIX

__all__ = ["HINT", "signing_key_findings"]

#: A file without any of these words has no signing key to find (checked before parsing).
HINT = re.compile(r"secret|jwt|signing|Signer|Serializer", re.IGNORECASE)
_KEY_NAME = re.compile(
    r"^(?:\w*_)?(?:secret_key|jwt_secret(?:_key)?|signing_key|session_secret|cookie_secret"
    r"|secret_key_base|csrf_secret(?:_key)?|token_secret)$",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(
    r"^\s*$|change[-_ ]?me|changeit|replace[-_ ]?(?:me|this|with)|^your[-_ ]|^<.*>$|\$\{|\{\{"
    r"|^x{4,}$|^\*+$|^\.+$|^(?:none|null|todo|fixme|tbd)$",
    re.IGNORECASE,
)
# Calls whose second argument (or ``key=``) is the signing key.
_JWT_CALLS = frozenset({"encode", "decode"})
# itsdangerous: the first argument (or ``secret_key=``) is the key.
_SIGNERS = frozenset(
    {"URLSafeTimedSerializer", "URLSafeSerializer", "TimedSerializer", "Serializer",
     "TimestampSigner", "Signer", "TimedJSONWebSignatureSerializer", "JSONWebSignatureSerializer"}
)  # fmt: skip
_TITLE = "Hardcoded framework signing key"
_DETAIL = (
    "The key that signs sessions, CSRF tokens or JWTs is a literal in the source: anyone who "
    "can read the code or its history can forge a session or a token for any user."
)


def signing_key_findings(tree: ast.Module, offset: int = 0) -> list[WorkerFinding]:
    """One finding per literal signing key in ``tree``; lines shifted by ``offset``."""
    out: list[WorkerFinding] = []
    constants = _module_constants(tree)
    seen: set[int] = set()
    for node, context in _walk(tree, ()):
        literal = _key_literal(node, constants)
        if literal is None or _for_tests(node, context) or literal.lineno in seen:
            continue
        seen.add(literal.lineno)
        out.append(
            WorkerFinding(
                line=literal.lineno + offset,
                end_line=(literal.end_lineno or literal.lineno) + offset,
                kind="hardcoded-secret",
                cwe="CWE-798",
                severity="high",
                title=_TITLE,
                detail=f"{_DETAIL} [deeprepo signing-key]",
                fix=SECRET_FIX,
                tool="deeprepo:signing-key",
            )
        )
    return out


def _walk(node: ast.AST, context: tuple[str, ...]) -> list[tuple[ast.AST, tuple[str, ...]]]:
    """Every node with the names of the functions and classes around it."""
    out: list[tuple[ast.AST, tuple[str, ...]]] = []
    stack = [(node, context)]
    while stack:
        cur, ctx = stack.pop()
        out.append((cur, ctx))
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            ctx = (*ctx, cur.name)
        stack.extend((child, ctx) for child in ast.iter_child_nodes(cur))
    return out


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = value``: a key passed by name is often defined at the top."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value
    return out


def _key_literal(node: ast.AST, constants: dict[str, ast.expr]) -> ast.Constant | None:
    """The literal key ``node`` sets, if it sets one (a key argument may name a module constant)."""
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(_KEY_NAME.match(name) for t in targets for name in _names(t)):
            return _literal(node.value)
    elif isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg is not None and _KEY_NAME.match(kw.arg):
                return _literal(kw.value)
        name = _callee(node)
        if name in _JWT_CALLS and "jwt" in _receiver(node).lower():
            key = node.args[1] if len(node.args) > 1 else _keyword(node, "key")
            return _literal(_resolve(key, constants))
        if name in _SIGNERS:
            key = node.args[0] if node.args else _keyword(node, "secret_key")
            return _literal(_resolve(key, constants))
    elif isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if (
                isinstance(k, ast.Constant)
                and isinstance(k.value, str)
                and _KEY_NAME.match(k.value)
            ):
                return _literal(v)
    return None


def _resolve(value: ast.expr | None, constants: dict[str, ast.expr]) -> ast.expr | None:
    return constants.get(value.id) if isinstance(value, ast.Name) else value


def _literal(value: ast.AST | None) -> ast.Constant | None:
    if not isinstance(value, ast.Constant) or not isinstance(value.value, str | bytes):
        return None
    text = value.value.decode("latin-1") if isinstance(value.value, bytes) else value.value
    return None if _PLACEHOLDER.search(text) else value


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute):
        return [target.attr]
    if isinstance(target, ast.Subscript):
        key = target.slice
        return [key.value] if isinstance(key, ast.Constant) and isinstance(key.value, str) else []
    return []


def _callee(call: ast.Call) -> str:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else ""


def _receiver(call: ast.Call) -> str:
    func = call.func
    return ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _for_tests(node: ast.AST, context: tuple[str, ...]) -> bool:
    if any(n.lower().startswith("test") for n in context):
        return True
    pairs: list[tuple[str | None, ast.AST | None]] = []
    if isinstance(node, ast.Call):
        pairs = [(kw.arg, kw.value) for kw in node.keywords]
    elif isinstance(node, ast.Dict):
        pairs = [
            (k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None, v)
            for k, v in zip(node.keys, node.values, strict=True)
        ]
    return any(
        name == "TESTING" and isinstance(v, ast.Constant) and v.value is True for name, v in pairs
    )
