"""JavaScript bugs no sink grep finds, and their near-identical safe forms (see ``logic_python``)."""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.safe_python import SafeUse
from deeprepo.rl.tasks.snippets import Snippet


def _s(
    name: str, kind: str, host: str, code: str, description: str, *imports: str, **kw: object
) -> Snippet:
    vulnerable = not name.startswith("js-decoy-")
    key = str(kw.pop("key"))
    block = Block(
        key,
        code,
        imports=imports,
        names=kw.pop("names", ()),  # type: ignore[arg-type]
        uses=kw.pop("uses", ()),  # type: ignore[arg-type]
        exports=() if host == "routes" else (key,),
    )
    return Snippet(name, kind, "js", host, block, description, vulnerable=vulnerable, **kw)  # type: ignore[arg-type]


def _f(template: str, **values: str) -> str:
    """``str.format`` for templates full of JavaScript braces: only ``{name}`` tokens change."""
    for k, v in values.items():
        template = template.replace("{" + k + "}", v)
    return template


_AUTH = (("auth", "requireAuth"),)
_OWNER_ROUTE = """router.get("«rp»/:id/{word}", requireAuth, async (req, res, next) => {  ⟦start⟧
  try {
    const item = await «svc.»«s_get»(Number(req.params.id));
{check}    res.json(item);  ⟦sink⟧
  } catch (err) {
    next(err);
  }
});"""
_OWNER_CHECK = """    if (item.ownerId !== req.user.id && !(req.user.roles || []).includes("admin")) {
      res.status(403).json({ error: "forbidden" });
      return;
    }
"""
_ROLE_ROUTE = """router.post("«rp»/:id/archive", requireAuth, async (req, res, next) => {
  try {
    if ((req.user.roles || []).includes("{role}")) {  ⟦sink⟧
      res.status(403).json({ error: "forbidden" });
      return;
    }
    await «svc.»«s_delete»(Number(req.params.id));
    res.status(204).end();
  } catch (err) {
    next(err);
  }
});"""
_TAGS = """«fn»{fn}(tags, tag) {
  if (tags.length {op}) {  ⟦sink⟧
    throw new Error("at most 10 tags");
  }
  return [...tags, String(tag).trim().toLowerCase()];
}"""
_RETRY = """«afn»{fn}(send, maxTries = 3) {
  for (let attempt = {lo}; attempt < maxTries; attempt += 1) {  ⟦sink⟧
    if (await send()) {
      return true;
    }
    await new Promise((resolve) => setTimeout(resolve, 200 * (attempt + {hi})));
  }
  return false;
}"""
_STORE = """«fn»storeNewFile(name, data) {
  const target = path.join(UPLOAD_DIR, path.basename(name));  ⟦start⟧
{body}  return target;
}"""
_STORE_RACY = """  if (fs.existsSync(target)) {
    throw new Error(`${name} already exists`);
  }
  fs.writeFileSync(target, data);  ⟦sink⟧
"""
_STORE_ATOMIC = """  fs.writeFileSync(target, data, { flag: "wx" });  ⟦sink⟧
"""
_HASH = """«fn»{fn}(value) {
  return crypto.createHash("sha256").update(String(value)).digest("hex");  ⟦sink⟧
}"""

SNIPPETS: tuple[Snippet, ...] = (
    _s(
        "js-authz-owner",
        "missing-authorization",
        "routes",
        _f(_OWNER_ROUTE, check="", word="history"),
        "The history route returns any «entity» to any signed-in user: it never checks that the "
        "caller owns the record (missing authorisation, IDOR).",
        key="route_history",
        names=_AUTH,
        uses=("svc",),
    ),
    _s(
        "js-decoy-authz-owner",
        "missing-authorization",
        "routes",
        _f(_OWNER_ROUTE, check=_OWNER_CHECK, word="activity"),
        "Safe: the route checks that the caller owns the record or is an admin.",
        key="route_activity",
        names=_AUTH,
        uses=("svc",),
    ),
    _s(
        "js-authz-inverted",
        "missing-authorization",
        "routes",
        _f(_ROLE_ROUTE, role="admin"),
        "The archive route's role test is inverted: it refuses admins and lets every other "
        "signed-in user delete «entities» (broken authorisation).",
        key="route_archive",
        names=_AUTH,
        uses=("svc",),
    ),
    _s(
        "js-obo-tags",
        "off-by-one",
        "validators",
        _f(_TAGS, fn="addTag", op="> 10"),
        "`addTag` checks `tags.length > 10` before appending, so a record can reach 11 tags "
        "(off-by-one).",
        key="addTag",
    ),
    _s(
        "js-decoy-obo-tags",
        "off-by-one",
        "validators",
        _f(_TAGS, fn="addTag", op="> 9"),
        "Safe: `> 9` before appending keeps at most 10 tags.",
        key="addTag",
    ),
    _s(
        "js-obo-retry",
        "off-by-one",
        "webhooks",
        _f(_RETRY, fn="deliver", lo="1", hi="0"),
        "`deliver` counts attempts from 1 while `attempt < maxTries`, so it tries one time fewer "
        "than asked (off-by-one).",
        key="deliver",
    ),
    _s(
        "js-decoy-obo-retry",
        "off-by-one",
        "webhooks",
        _f(_RETRY, fn="deliver", lo="0", hi="1"),
        "Safe: counting from 0 while `attempt < maxTries` makes exactly `maxTries` attempts.",
        key="deliver",
    ),
    _s(
        "js-race-toctou",
        "race-condition",
        "storage",
        _f(_STORE, body=_STORE_RACY),
        "`storeNewFile` checks that the file does not exist and then writes it; between the two "
        "another request can create it (TOCTOU race).",
        "fs",
        "path",
        key="storeNewFile",
        names=(("config", "UPLOAD_DIR"),),
    ),
    _s(
        "js-decoy-race-toctou",
        "race-condition",
        "storage",
        _f(_STORE, body=_STORE_ATOMIC),
        "Safe: the `wx` flag creates the file atomically and fails if it exists.",
        "fs",
        "path",
        key="storeNewFile",
        names=(("config", "UPLOAD_DIR"),),
    ),
    _s(
        "js-hash-pin",
        "weak-password-hash",
        "validators",
        _f(_HASH, fn="hashPin"),
        "`hashPin` stores PINs as one unsalted SHA-256; a short PIN is recovered instantly "
        "(weak password hashing).",
        "crypto",
        key="hashPin",
    ),
    _s(
        "js-hash-member",
        "weak-password-hash",
        "validators",
        _f(_HASH, fn="hashMemberPassword"),
        "`hashMemberPassword` hashes passwords with one fast, unsalted SHA-256 (weak password "
        "hashing).",
        "crypto",
        key="hashMemberPassword",
    ),
    _s(
        "js-decoy-hash-apikey",
        "weak-password-hash",
        "validators",
        _f(_HASH, fn="apiKeyDigest"),
        "Safe: API keys are 256-bit random values, so a fast hash is enough to look them up.",
        "crypto",
        key="apiKeyDigest",
    ),
    _s(
        "js-rand-invite",
        "insecure-randomness",
        "validators",
        """«fn»inviteCode(length = 12) {
  let code = "";
  while (code.length < length) {
    code += Math.random().toString(36).slice(2).toUpperCase();  ⟦sink⟧
  }
  return code.slice(0, length);
}""",
        "Invitation codes, which grant access, are built from `Math.random()`, a predictable "
        "PRNG (insecure randomness).",
        key="inviteCode",
    ),
    _s(
        "js-decoy-rand-variant",
        "insecure-randomness",
        "validators",
        """«fn»pickVariant(variants) {
  return variants[Math.floor(Math.random() * variants.length)];  ⟦sink⟧
}""",
        "Safe: `Math.random` only splits traffic between A/B variants; nothing secret depends on it.",
        key="pickVariant",
    ),
)
"""Bugs and decoys (decoy names start with ``js-decoy-``)."""


def _safe(where: str, choices: tuple[str, ...], code: str, *imports: str, **kw: object) -> SafeUse:
    exports = () if where == "route" else ("«nm»",)
    return SafeUse(choices, where, Block("«nm»", code, imports=imports, exports=exports, **kw))  # type: ignore[arg-type]


SAFE: tuple[SafeUse, ...] = (
    *(
        _safe(
            "route",
            (f"route_{word}",),
            _f(_OWNER_ROUTE, check=_OWNER_CHECK, word=word),
            names=_AUTH,
            uses=("svc",),
        )
        for word in ("history", "activity")
    ),
    _safe("route", ("route_archive",), _f(_ROLE_ROUTE, role="viewer"), names=_AUTH, uses=("svc",)),
    _safe("fn", ("addTag", "appendLabel"), _f(_TAGS, fn="«nm»", op="> 9")),
    _safe("fn", ("deliver", "sendWithRetries"), _f(_RETRY, fn="«nm»", lo="0", hi="1")),
    _safe(
        "fn", ("apiKeyDigest", "tokenFingerprint", "lookupDigest"), _f(_HASH, fn="«nm»"), "crypto"
    ),
    _safe(
        "fn",
        ("pickVariant", "chooseBucket"),
        """«fn»«nm»(variants) {
  return variants[Math.floor(Math.random() * variants.length)];
}""",
    ),
)
"""Clean forms of the same code, sprinkled like ``safe_js.POOL``."""
