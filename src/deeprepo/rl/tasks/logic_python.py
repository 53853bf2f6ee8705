"""Python bugs no sink grep finds, and the safe code that reads almost the same.

Logic and authorisation defects (a missing ownership check, an inverted role test, an
off-by-one limit, a check-then-act on the file system) and portable variants of kinds that
used to live in one module only (weak password hashing, insecure tokens). Each bug has a
near-identical safe form, here as a decoy and in ``SAFE`` as clean code the generator
sprinkles, so the shape of the code does not give the label away.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.safe_python import SafeUse
from deeprepo.rl.tasks.snippets import Snippet

_J = ("from flask import abort, g, jsonify",)
_AUTH = (("auth", "login_required"),)


def _s(
    name: str, kind: str, host: str, code: str, description: str, *imports: str, **kw: object
) -> Snippet:
    vulnerable = not name.startswith("py-decoy-")
    block = Block(
        kw.pop("key"),  # type: ignore[arg-type]
        code,
        imports=imports,
        names=kw.pop("names", ()),  # type: ignore[arg-type]
        uses=kw.pop("uses", ()),  # type: ignore[arg-type]
    )
    return Snippet(name, kind, "python", host, block, description, vulnerable=vulnerable, **kw)  # type: ignore[arg-type]


_OWNER_ROUTE = """@«bp».route("«rp»/<int:«entity»_id>/{word}", methods=["GET"])  ⟦start⟧
@login_required
def «entity»_{word}(«entity»_id: int):
    item = «svc.»«s_get»(«entity»_id)
{check}    return jsonify(item)  ⟦sink⟧"""
_OWNER_CHECK = """    if item.get("owner_id") != g.user.get("id") and "admin" not in g.user.get("roles", ()):
        abort(403)
"""
_ROLE_ROUTE = """@«bp».route("«rp»/<int:«entity»_id>/archive", methods=["POST"])
@login_required
def archive_«entity»(«entity»_id: int):
    if "{role}" {op} g.user.get("roles", ()):  ⟦sink⟧
        abort(403)
    «svc.»«s_delete»(«entity»_id)
    return "", 204"""
_TAGS = """def add_tag(«selfp»tags: list[str], tag: str) -> list[str]:
    if len(tags) {op}:  ⟦sink⟧
        raise ValueError("at most 10 tags")
    return [*tags, tag.strip().lower()]"""
_RETRY = """def deliver(«selfp»send: Callable[[], bool], max_tries: int = 3) -> bool:
    for attempt in range({lo}, max_tries):  ⟦sink⟧
        if send():
            return True
        time.sleep(0.2 * (attempt + {hi}))
    return False"""
_STORE = """def store_new_file(name: str, data: bytes) -> str:
    path = os.path.join(UPLOAD_DIR, os.path.basename(name))  ⟦start⟧
{body}    return path"""
_STORE_RACY = """    if os.path.exists(path):
        raise FileExistsError(name)
    with open(path, "wb") as fh:  ⟦sink⟧
        fh.write(data)
"""
_STORE_ATOMIC = """    with open(path, "xb") as fh:  ⟦sink⟧
        fh.write(data)
"""
_HASH = """def {fn}(«selfp»value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()  ⟦sink⟧"""

SNIPPETS: tuple[Snippet, ...] = (
    _s(
        "py-authz-owner",
        "missing-authorization",
        "routes",
        _OWNER_ROUTE.format(check="", word="history"),
        "The history endpoint returns any «entity» to any logged-in user: it never checks that "
        "the caller owns the record (missing authorisation, IDOR).",
        *_J,
        key="«entity»_history",
        names=_AUTH,
        uses=("svc",),
    ),
    _s(
        "py-decoy-authz-owner",
        "missing-authorization",
        "routes",
        _OWNER_ROUTE.format(check=_OWNER_CHECK, word="activity"),
        "Safe: the handler checks that the caller owns the record or is an admin.",
        *_J,
        key="«entity»_activity",
        names=_AUTH,
        uses=("svc",),
    ),
    _s(
        "py-authz-inverted",
        "missing-authorization",
        "routes",
        _ROLE_ROUTE.format(op="in", role="admin"),
        "The archive endpoint's role test is inverted: it refuses admins and lets every other "
        "logged-in user delete «entities» (broken authorisation).",
        *_J,
        key="archive_«entity»",
        names=_AUTH,
        uses=("svc",),
    ),
    _s(
        "py-obo-tags",
        "off-by-one",
        "validators",
        _TAGS.format(op="> 10"),
        "`add_tag` checks `len(tags) > 10` before appending, so a record can reach 11 tags "
        "(off-by-one).",
        key="add_tag",
    ),
    _s(
        "py-decoy-obo-tags",
        "off-by-one",
        "validators",
        _TAGS.format(op="> 9"),
        "Safe: `> 9` before appending keeps at most 10 tags.",
        key="add_tag",
    ),
    _s(
        "py-obo-retry",
        "off-by-one",
        "webhooks",
        _RETRY.format(lo=1, hi=0),
        "`deliver` loops over `range(1, max_tries)` and so tries one time fewer than asked "
        "(off-by-one).",
        "import time",
        "from collections.abc import Callable",
        key="deliver",
    ),
    _s(
        "py-decoy-obo-retry",
        "off-by-one",
        "webhooks",
        _RETRY.format(lo=0, hi=1),
        "Safe: `range(0, max_tries)` makes exactly `max_tries` attempts.",
        "import time",
        "from collections.abc import Callable",
        key="deliver",
    ),
    _s(
        "py-race-toctou",
        "race-condition",
        "storage",
        _STORE.format(body=_STORE_RACY),
        "`store_new_file` checks that the file does not exist and then opens it for writing; "
        "between the two another request can create it (TOCTOU race).",
        "import os",
        key="store_new_file",
        names=(("config", "UPLOAD_DIR"),),
    ),
    _s(
        "py-decoy-race-toctou",
        "race-condition",
        "storage",
        _STORE.format(body=_STORE_ATOMIC),
        "Safe: mode `xb` creates the file atomically and fails if it exists.",
        "import os",
        key="store_new_file",
        names=(("config", "UPLOAD_DIR"),),
    ),
    _s(
        "py-hash-pin",
        "weak-password-hash",
        "validators",
        _HASH.format(fn="hash_pin"),
        "`hash_pin` stores PINs as one unsalted SHA-256; a 4–6 digit PIN is recovered instantly "
        "(weak password hashing).",
        "import hashlib",
        key="hash_pin",
    ),
    _s(
        "py-hash-member",
        "weak-password-hash",
        "validators",
        _HASH.format(fn="hash_member_password"),
        "`hash_member_password` hashes passwords with one fast, unsalted SHA-256 (weak password "
        "hashing).",
        "import hashlib",
        key="hash_member_password",
    ),
    _s(
        "py-decoy-hash-apikey",
        "weak-password-hash",
        "validators",
        _HASH.format(fn="api_key_digest"),
        "Safe: API keys are 256-bit random values, so a fast hash is enough to look them up.",
        "import hashlib",
        key="api_key_digest",
    ),
    _s(
        "py-rand-invite",
        "insecure-randomness",
        "validators",
        """def invite_code(length: int = 12) -> str:
    alphabet = string.ascii_uppercase + string.digits
    return "".join(random.choices(alphabet, k=length))  ⟦sink⟧""",
        "Invitation codes, which grant access, are drawn with `random.choices`, a predictable "
        "PRNG (insecure randomness).",
        "import random",
        "import string",
        key="invite_code",
    ),
    _s(
        "py-rand-reset",
        "insecure-randomness",
        "validators",
        """def password_reset_token() -> str:
    return "%032x" % random.getrandbits(128)  ⟦sink⟧""",
        "Password-reset tokens come from `random.getrandbits`, whose state can be recovered from "
        "outputs (insecure randomness).",
        "import random",
        key="password_reset_token",
    ),
    _s(
        "py-decoy-rand-variant",
        "insecure-randomness",
        "validators",
        """def pick_variant(variants: list[str], weights: list[float]) -> str:
    return random.choices(variants, weights=weights, k=1)[0]  ⟦sink⟧""",
        "Safe: `random` only splits traffic between A/B variants; nothing secret depends on it.",
        "import random",
        key="pick_variant",
    ),
)
"""Bugs and decoys (decoy names start with ``py-decoy-``)."""


def _safe(where: str, choices: tuple[str, ...], code: str, *imports: str, **kw: object) -> SafeUse:
    return SafeUse(choices, where, Block("«nm»", code, imports=imports, **kw))  # type: ignore[arg-type]


SAFE: tuple[SafeUse, ...] = (
    *(
        _safe(
            "route",
            (f"«entity»_{word}",),
            _OWNER_ROUTE.format(check=_OWNER_CHECK, word=word),
            *_J,
            names=_AUTH,
            uses=("svc",),
        )
        for word in ("history", "activity")
    ),
    _safe(
        "route",
        ("archive_«entity»",),
        _ROLE_ROUTE.format(op="in", role="viewer").replace("archive_«entity»(", "«nm»("),
        *_J,
        names=_AUTH,
        uses=("svc",),
    ),
    _safe("fn", ("add_tag", "append_label"), _TAGS.format(op="> 9").replace("add_tag(", "«nm»(")),
    _safe(
        "fn",
        ("deliver", "send_with_retries"),
        _RETRY.format(lo=0, hi=1).replace("deliver(", "«nm»("),
        "import time",
        "from collections.abc import Callable",
    ),
    _safe(
        "fn",
        ("api_key_digest", "token_fingerprint", "lookup_digest"),
        _HASH.format(fn="«nm»"),
        "import hashlib",
    ),
    _safe(
        "fn",
        ("pick_variant", "choose_bucket"),
        """def «nm»(«selfp»variants: list[str], weights: list[float]) -> str:
    return random.choices(variants, weights=weights, k=1)[0]""",
        "import random",
    ),
)
"""Clean forms of the same code, sprinkled like ``safe_python.POOL``."""
