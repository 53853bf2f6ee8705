"""Planted bugs in JavaScript (Express + pg, CommonJS): at least one variant per bug kind.

Same conventions as ``bugs_python``: ``⟦sink⟧`` on the sink, ``⟦start⟧`` /
``⟦end⟧`` around a multi-line defect, ``⟦source⟧`` in a cross-file route.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet

_AUTH = (("auth", "requireAuth"), ("auth", "requireRole"))


def _src(key: str, code: str, *, names: tuple[tuple[str, str], ...] = ()) -> Block:
    return Block(key, code, names=names, uses=("sink",))


def _bug(name: str, kind: str, host: str, block: Block, description: str, **kw: object) -> Snippet:
    return Snippet(name, kind, "js", host, block, description, **kw)  # type: ignore[arg-type]


def _route(method: str, path: str, body: str, middleware: str = "") -> str:
    """An async Express handler with the usual try/catch → next(err)."""
    inner = "\n".join("    " + ln if ln else "" for ln in body.split("\n"))
    return (
        f'router.{method}("{path}", {middleware}async (req, res, next) => {{\n  try {{\n{inner}\n'
        "  } catch (err) {\n    next(err);\n  }\n});"
    )


SNIPPETS: tuple[Snippet, ...] = (
    # --- SQL injection ----------------------------------------------------------------------
    _bug(
        "js-sqli-search",
        "sql-injection",
        "repo",
        Block(
            "search«Entities»",
            """«afn»search«Entities»(term) {
  const sql = `SELECT * FROM «table» WHERE «label» ILIKE '%${term}%' ORDER BY id`;  ⟦start⟧
  const { rows } = await «dbq»(sql);  ⟦sink⟧
  return rows.map((row) => «Entity».fromRow(row));
}""",
            names=(("model", "«Entity»"),),
            uses=("db",),
            exports=("search«Entities»",),
        ),
        "`search«Entities»` builds its SQL with a template literal around `term` (SQL injection).",
        source=_src(
            "route_search",
            _route(
                "get",
                "«rp»/search",
                """const term = String(req.query.q || "");  ⟦source⟧
res.json(await «sink.»«sink_fn»(term));""",
            ),
        ),
    ),
    _bug(
        "js-sqli-order",
        "sql-injection",
        "repo",
        Block(
            "«r_list»Sorted",
            """«afn»«r_list»Sorted(sort = "id", direction = "ASC") {
  const sql = "SELECT * FROM «table» ORDER BY " + sort + " " + direction;  ⟦start⟧
  const { rows } = await «dbq»(sql);  ⟦sink⟧
  return rows.map((row) => «Entity».fromRow(row));
}""",
            names=(("model", "«Entity»"),),
            uses=("db",),
            exports=("«r_list»Sorted",),
        ),
        "`«r_list»Sorted` concatenates the sort column and direction into the SQL (SQL injection).",
        source=_src(
            "route_sorted",
            _route(
                "get",
                "«rp»/sorted",
                """const sort = String(req.query.sort || "id");  ⟦source⟧
const direction = String(req.query.dir || "ASC");
res.json(await «sink.»«sink_fn»(sort, direction));""",
            ),
        ),
    ),
    _bug(
        "js-sqli-route",
        "sql-injection",
        "routes",
        Block(
            "route_lookup",
            _route(
                "get",
                "«rp»/lookup/:value",
                """const { rows } = await «db.»query(  ⟦start⟧
  "SELECT * FROM «table» WHERE «label» = '" + req.params.value + "'",  ⟦sink⟧
);  ⟦end⟧
res.json(rows);""",
            ),
            uses=("db",),
        ),
        "The lookup route concatenates a URL parameter into the SQL string (SQL injection).",
    ),
    # --- command injection ------------------------------------------------------------------
    _bug(
        "js-cmd-archive",
        "command-injection",
        "exporter",
        Block(
            "archiveExport",
            """function archiveExport(name) {
  const target = path.join(EXPORT_DIR, name);
  return new Promise((resolve, reject) => {
    exec(`tar -czf ${target}.tar.gz -C ${EXPORT_DIR} ${name}`, (err) => {  ⟦sink⟧
      if (err) {
        reject(err);
      } else {
        resolve(`${target}.tar.gz`);
      }
    });
  });
}""",
            imports=("path", "{exec}=child_process"),
            names=(("config", "EXPORT_DIR"),),
            exports=("archiveExport",),
        ),
        "`archiveExport` runs a shell command built from `name` with `exec` (command injection).",
        source=_src(
            "route_export",
            _route(
                "post",
                "«rp»/export",
                """const name = String((req.body || {}).name || "«entities»");  ⟦source⟧
res.json({ archive: await «sink.»«sink_fn»(name) });""",
                "requireAuth, ",
            ),
            names=_AUTH,
        ),
    ),
    _bug(
        "js-cmd-thumbnail",
        "command-injection",
        "routes",
        Block(
            "route_thumbnail",
            """router.post("«rp»/:id/thumbnail", requireAuth, (req, res) => {
  const image = String((req.body || {}).image || "");  ⟦start⟧
  execSync("convert " + image + " -resize 256x256 /tmp/«entity»-" + Number(req.params.id) + ".png");  ⟦sink⟧
  res.json({ ok: true });
});""",
            imports=("{execSync}=child_process",),
            names=_AUTH,
        ),
        "The thumbnail route concatenates the `image` body field into an `execSync` shell command "
        "(command injection).",
    ),
    # --- path traversal ---------------------------------------------------------------------
    _bug(
        "js-path-attachment",
        "path-traversal",
        "storage",
        Block(
            "openAttachment",
            """async function openAttachment(name) {
  const target = path.join(UPLOAD_DIR, name);  ⟦start⟧
  return fs.promises.readFile(target);  ⟦sink⟧
}""",
            imports=("fs", "path"),
            names=(("config", "UPLOAD_DIR"),),
            exports=("openAttachment",),
        ),
        "`openAttachment` joins `name` onto the upload directory without a containment check; "
        "`../` reads any file (path traversal).",
        source=_src(
            "route_attachment",
            _route(
                "get",
                "«rp»/attachments",
                """const name = String(req.query.file || "");  ⟦source⟧
res.type("application/octet-stream").send(await «sink.»«sink_fn»(name));""",
                "requireAuth, ",
            ),
            names=_AUTH,
        ),
    ),
    _bug(
        "js-path-download",
        "path-traversal",
        "routes",
        Block(
            "route_download",
            """router.get("«rp»/files/:name", (req, res) => {
  res.sendFile(path.join(UPLOAD_DIR, "«entities»", req.params.name));  ⟦sink⟧
});""",
            imports=("path",),
            names=(("config", "UPLOAD_DIR"),),
        ),
        "The download route joins the URL parameter onto the upload directory and sends the file; "
        "an encoded `..%2f` escapes it (path traversal).",
    ),
    # --- unsafe deserialization ---------------------------------------------------------------
    _bug(
        "js-deser-cookie",
        "unsafe-deserialization",
        "cache",
        Block(
            "loadPreferences",
            """function loadPreferences(blob) {
  // Preferences travel in a cookie, serialised with node-serialize.
  return serialize.unserialize(Buffer.from(blob, "base64").toString("utf8"));  ⟦sink⟧
}""",
            imports=("serialize=node-serialize",),
            exports=("loadPreferences",),
        ),
        "`loadPreferences` unserialises a client cookie with node-serialize, which can execute "
        "embedded functions (unsafe deserialization).",
        source=_src(
            "route_preferences",
            _route(
                "get",
                "«rp»/preferences",
                """const blob = String(req.get("x-preferences") || "");  ⟦source⟧
res.json(blob ? «sink.»«sink_fn»(blob) : {});""",
            ),
        ),
    ),
    _bug(
        "js-deser-vm",
        "unsafe-deserialization",
        "importer",
        Block(
            "parseManifest",
            """function parseManifest(text) {
  // Manifests are written by hand, so accept relaxed JSON (comments, trailing commas).
  return vm.runInNewContext(`(${text})`);  ⟦sink⟧
}""",
            imports=("vm",),
            exports=("parseManifest",),
        ),
        "`parseManifest` evaluates uploaded text as JavaScript with `vm.runInNewContext`, which is "
        "not a security boundary (code injection through deserialization).",
        source=_src(
            "route_import",
            _route(
                "post",
                "«rp»/import",
                """const text = String((req.body || {}).manifest || "");  ⟦source⟧
res.json({ keys: Object.keys(«sink.»«sink_fn»(text)) });""",
                "requireAuth, ",
            ),
            names=_AUTH,
        ),
    ),
    # --- XSS ----------------------------------------------------------------------------------
    _bug(
        "js-xss-route",
        "xss",
        "routes",
        Block(
            "route_preview",
            """router.get("«rp»/preview", (req, res) => {
  const title = String(req.query.title || "");  ⟦start⟧
  res.send(`<html><body><h1>Preview: ${title}</h1></body></html>`);  ⟦sink⟧
});""",
        ),
        "The preview route writes the `title` query parameter into HTML unescaped (reflected XSS).",
    ),
    _bug(
        "js-xss-banner",
        "xss",
        "html",
        Block(
            "renderBanner",
            """function renderBanner(message, level = "info") {
  return `<div class="banner banner-${level}">${message}</div>`;  ⟦sink⟧
}""",
            exports=("renderBanner",),
        ),
        "`renderBanner` puts `message` into HTML without escaping it (XSS).",
        source=_src(
            "route_banner",
            """router.get("«rp»/banner", (req, res) => {
  const message = String(req.query.message || "");  ⟦source⟧
  res.type("html").send(«sink.»«sink_fn»(message));
});""",
        ),
    ),
    # --- SSRF -----------------------------------------------------------------------------------
    _bug(
        "js-ssrf-preview",
        "ssrf",
        "webhooks",
        Block(
            "fetchPreview",
            """async function fetchPreview(url) {
  const response = await fetch(url, { signal: AbortSignal.timeout(5000) });  ⟦sink⟧
  return (await response.text()).slice(0, 1024);
}""",
            exports=("fetchPreview",),
        ),
        "`fetchPreview` fetches any URL it is given, from the server (SSRF).",
        source=_src(
            "route_link_preview",
            _route(
                "post",
                "«rp»/link-preview",
                """const url = String((req.body || {}).url || "");  ⟦source⟧
res.json({ preview: await «sink.»«sink_fn»(url) });""",
                "requireAuth, ",
            ),
            names=_AUTH,
        ),
    ),
    _bug(
        "js-ssrf-route",
        "ssrf",
        "routes",
        Block(
            "route_callback_test",
            _route(
                "post",
                "«rp»/callback-test",
                """const target = String((req.body || {}).callbackUrl || "");  ⟦start⟧
const response = await fetch(target, { method: "POST" });  ⟦sink⟧
res.json({ status: response.status });""",
                "requireAuth, ",
            ),
            names=_AUTH,
        ),
        "The callback test route makes the server POST to any URL the client names (SSRF).",
    ),
    # --- weak password hashing ----------------------------------------------------------------
    _bug(
        "js-hash-md5",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """function hashPassword(password) {
  return crypto.createHash("md5").update(password).digest("hex");  ⟦sink⟧
}

function verifyPassword(password, stored) {
  return hashPassword(password) === stored;
}""",
            imports=("crypto",),
            exports=("hashPassword", "verifyPassword"),
        ),
        "Passwords are hashed with unsalted MD5 (weak password hashing).",
        replaces=True,
    ),
    _bug(
        "js-hash-sha1",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """const PASSWORD_SALT = "«pkg_file»";

function hashPassword(password) {
  return crypto.createHash("sha1").update(PASSWORD_SALT + password).digest("hex");  ⟦sink⟧
}

function verifyPassword(password, stored) {
  return hashPassword(password) === stored;
}""",
            imports=("crypto",),
            exports=("hashPassword", "verifyPassword"),
        ),
        "Passwords are hashed with one round of SHA-1 and a fixed salt (weak password hashing).",
        replaces=True,
    ),
    # --- hard-coded secrets ---------------------------------------------------------------------
    _bug(
        "js-secret-jwt",
        "hardcoded-secret",
        "config",
        Block(
            "JWT_SECRET",
            'const JWT_SECRET = process.env.JWT_SECRET || "«secret_hex»";  ⟦sink⟧',
            exports=("JWT_SECRET",),
        ),
        "The JWT signing secret falls back to a literal in the source, so tokens can be forged "
        "wherever the variable is unset (hard-coded secret).",
        replaces=True,
    ),
    _bug(
        "js-secret-api-key",
        "hardcoded-secret",
        "config",
        Block(
            "STRIPE_API_KEY",
            'const STRIPE_API_KEY = "live_«secret_alnum»";  ⟦sink⟧',
            exports=("STRIPE_API_KEY",),
        ),
        "A live payment API key is committed in the configuration (hard-coded secret).",
    ),
    # --- missing authorisation --------------------------------------------------------------------
    _bug(
        "js-authz-delete",
        "missing-authorization",
        "routes",
        Block(
            "delete",
            """router.delete("«rp»/:id", async (req, res, next) => {  ⟦sink⟧
  try {
    await «svc.»«s_delete»(Number(req.params.id));
    res.status(204).end();
  } catch (err) {
    next(err);
  }
});""",
            uses=("svc",),
        ),
        "The DELETE route for «entities» has no `requireAuth`/`requireRole` middleware, unlike the "
        "other mutating routes (missing authorisation).",
        replaces=True,
    ),
    _bug(
        "js-authz-adjust",
        "missing-authorization",
        "routes",
        Block(
            "adjust",
            """router.post("«rp»/:id/«num_url»", async (req, res, next) => {  ⟦sink⟧
  try {
    const delta = Number((req.body || {}).delta || 0);
    res.json(await «svc.»«s_adjust»(Number(req.params.id), delta));
  } catch (err) {
    next(err);
  }
});""",
            uses=("svc",),
        ),
        "The route that changes a «entity»'s «num» lacks `requireAuth` (missing authorisation).",
        replaces=True,
    ),
    # --- insecure randomness ----------------------------------------------------------------------
    _bug(
        "js-rand-token",
        "insecure-randomness",
        "auth",
        Block(
            "generate_token",
            """function generateToken(length = 32) {
  let token = "";
  while (token.length < length) {
    token += Math.random().toString(36).slice(2);  ⟦sink⟧
  }
  return token.slice(0, length);
}""",
            exports=("generateToken",),
        ),
        "Tokens are built from `Math.random()`, which is predictable (insecure randomness).",
        replaces=True,
    ),
    _bug(
        "js-rand-code",
        "insecure-randomness",
        "svc",
        Block(
            "issue«Entity»AccessCode",
            """«fn»issue«Entity»AccessCode(id) {
  const code = String(Math.floor(100000 + Math.random() * 900000));  ⟦sink⟧
  «cache.»cacheSet(`access:«entity»:${id}`, code, 15 * 60 * 1000);
  return code;
}""",
            uses=("cache",),
            exports=("issue«Entity»AccessCode",),
        ),
        "One-time access codes come from `Math.random()` (insecure randomness).",
        needs=("cache",),
    ),
    # --- race conditions --------------------------------------------------------------------------
    _bug(
        "js-race-reserve",
        "race-condition",
        "svc",
        Block(
            "reserve«Entity»«NumP»",
            """«afn»reserve«Entity»«NumP»(id, amount) {
  const item = await «repo.»«r_get»(id);  ⟦start⟧
  if (!item) {
    throw new NotFoundError(«nf_msg»);
  }
  if (item.«numC» < amount) {
    throw new ValidationError("not enough «numC»");
  }
  await «repo.»«r_set»(id, item.«numC» - amount);  ⟦sink⟧
  return «me.»«s_get»(id);
}""",
            uses=("repo",),
            names=(("errors", "NotFoundError"), ("errors", "ValidationError")),
            exports=("reserve«Entity»«NumP»",),
        ),
        "`reserve«Entity»«NumP»` reads «numC», checks it and writes the difference back across `await`s; "
        "concurrent requests interleave and oversell (race condition).",
    ),
    # --- resource leaks ---------------------------------------------------------------------------
    _bug(
        "js-leak-client",
        "resource-leak",
        "repo",
        Block(
            "«entitiesC»ByIds",
            """«afn»«entitiesC»ByIds(ids) {
  const client = await «dbpool».connect();  ⟦sink⟧
  const result = await client.query("SELECT * FROM «table» WHERE id = ANY($1)", [ids]);
  return result.rows.map((row) => «Entity».fromRow(row));  ⟦end⟧
}""",
            names=(("model", "«Entity»"),),
            uses=("db",),
            exports=("«entitiesC»ByIds",),
        ),
        "`«entitiesC»ByIds` checks a client out of the pool and never releases it; the pool runs dry "
        "(resource leak).",
    ),
    _bug(
        "js-leak-fd",
        "resource-leak",
        "storage",
        Block(
            "readHeader",
            """function readHeader(filename, bytes = 512) {
  const fd = fs.openSync(uploadPath(filename), "r");  ⟦sink⟧
  const buffer = Buffer.alloc(bytes);
  const read = fs.readSync(fd, buffer, 0, bytes, 0);
  return buffer.subarray(0, read);  ⟦end⟧
}""",
            imports=("fs",),
            exports=("readHeader",),
        ),
        "`readHeader` opens a file descriptor and never closes it (resource leak).",
    ),
    # --- off-by-one / calculation -----------------------------------------------------------------
    _bug(
        "js-obo-offset",
        "off-by-one",
        "pagination",
        Block(
            "page_bounds",
            """// Pages are 1-based in the API.
function pageBounds(page, perPage) {
  const safePage = Math.max(Number(page) || 1, 1);
  const limit = Math.min(Math.max(Number(perPage) || 1, 1), MAX_PAGE_SIZE);
  return { limit, offset: safePage * limit };  ⟦sink⟧
}""",
            exports=("pageBounds",),
        ),
        "Pages are 1-based but the offset is `page * limit`, so page 1 skips the first page (off-by-one).",
        replaces=True,
    ),
    _bug(
        "js-obo-count",
        "off-by-one",
        "pagination",
        Block(
            "page_count",
            """function pageCount(total, perPage) {
  if (perPage <= 0) {
    return 0;
  }
  return Math.floor(total / perPage);  ⟦sink⟧
}""",
            exports=("pageCount",),
        ),
        "`pageCount` floors the division, so the last, partial page is never reported (off-by-one).",
        replaces=True,
    ),
    _bug(
        "js-obo-top",
        "off-by-one",
        "svc",
        Block(
            "top«Entities»",
            """«afn»top«Entities»(limit = 10) {
  const items = await «repo.»«r_list»(500, 0);
  items.sort((a, b) => b.«numC» - a.«numC»);
  return items.slice(0, limit - 1);  ⟦sink⟧
}""",
            uses=("repo",),
            exports=("top«Entities»",),
        ),
        "`top«Entities»` returns `slice(0, limit - 1)`, one item fewer than asked (off-by-one).",
    ),
)
