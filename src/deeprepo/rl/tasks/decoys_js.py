"""JavaScript decoys: safe code that looks like a bug (``vulnerable: false`` in ground truth)."""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet


def _decoy(
    name: str, kind: str, host: str, block: Block, description: str, **kw: object
) -> Snippet:
    return Snippet(name, kind, "js", host, block, description, vulnerable=False, **kw)  # type: ignore[arg-type]


SNIPPETS: tuple[Snippet, ...] = (
    _decoy(
        "js-decoy-sqli-order",
        "sql-injection",
        "repo",
        Block(
            "«r_list»Ordered",
            """«afn»«r_list»Ordered(column = "id") {
  if (!["id", "«label»", "«num»", "created_at"].includes(column)) {  ⟦start⟧
    throw new Error(`cannot sort by ${column}`);
  }
  const { rows } = await «dbq»(`SELECT * FROM «table» ORDER BY ${column}`);  ⟦sink⟧
  return rows.map((row) => «Entity».fromRow(row));
}""",
            names=(("model", "«Entity»"),),
            uses=("db",),
            exports=("«r_list»Ordered",),
        ),
        "Safe: the template literal only inserts a column name checked against a fixed allow-list.",
    ),
    _decoy(
        "js-decoy-sqli-like",
        "sql-injection",
        "repo",
        Block(
            "find«Entities»Like",
            """«afn»find«Entities»Like(term) {
  const pattern = `%${term}%`;  ⟦start⟧
  const { rows } = await «dbq»("SELECT * FROM «table» WHERE «label» ILIKE $1 ORDER BY id", [pattern]);  ⟦sink⟧
  return rows.map((row) => «Entity».fromRow(row));
}""",
            names=(("model", "«Entity»"),),
            uses=("db",),
            exports=("find«Entities»Like",),
        ),
        "Safe: the template literal builds a LIKE pattern that is sent as a bound parameter.",
    ),
    _decoy(
        "js-decoy-cmd-execfile",
        "command-injection",
        "exporter",
        Block(
            "archiveExports",
            """function archiveExports(name) {
  const archive = path.join(EXPORT_DIR, `${name}.tar.gz`);
  return new Promise((resolve, reject) => {
    execFile("tar", ["-czf", archive, "-C", EXPORT_DIR, "--", name], (err) => {  ⟦sink⟧
      if (err) {
        reject(err);
      } else {
        resolve(archive);
      }
    });
  });
}""",
            imports=("path", "{execFile}=child_process"),
            names=(("config", "EXPORT_DIR"),),
            exports=("archiveExports",),
        ),
        "Safe: `execFile` with an argument array runs no shell, and `--` ends option parsing.",
    ),
    _decoy(
        "js-decoy-path-contained",
        "path-traversal",
        "storage",
        Block(
            "attachmentBytes",
            """async function attachmentBytes(name) {
  const base = path.resolve(UPLOAD_DIR);
  const target = path.resolve(base, name);  ⟦start⟧
  if (!target.startsWith(base + path.sep)) {
    throw new Error(«bad_name_msg»);
  }
  return fs.promises.readFile(target);  ⟦sink⟧
}""",
            imports=("fs", "path"),
            names=(("config", "UPLOAD_DIR"),),
            exports=("attachmentBytes",),
        ),
        "Safe: the resolved path must stay inside the upload directory.",
    ),
    _decoy(
        "js-decoy-yaml-json-schema",
        "unsafe-deserialization",
        "importer",
        Block(
            "loadSettingsFile",
            """function loadSettingsFile(text) {
  const data = yaml.load(text, { schema: yaml.JSON_SCHEMA });  ⟦sink⟧
  if (!data || typeof data !== "object") {
    throw new Error("settings must be a mapping");
  }
  return data;
}""",
            imports=("yaml=js-yaml",),
            exports=("loadSettingsFile",),
        ),
        "Safe: js-yaml with the JSON schema only builds plain data.",
    ),
    _decoy(
        "js-decoy-xss-escaped",
        "xss",
        "routes",
        Block(
            "route_card",
            """router.get("«rp»/card", (req, res) => {
  const title = String(req.query.title || "");
  res.send(`<div class="card"><h2>${«html.»escapeHtml(title)}</h2></div>`);  ⟦sink⟧
});""",
            uses=("html",),
        ),
        "Safe: the query parameter is HTML-escaped before it is written into the markup.",
        needs=("html",),
    ),
    _decoy(
        "js-decoy-ssrf-allowlist",
        "ssrf",
        "webhooks",
        Block(
            "fetchPartnerPage",
            """const PARTNER_HOSTS = new Set(["partners.example.com", "cdn.example.com"]);

async function fetchPartnerPage(url) {
  const parsed = new URL(url);  ⟦start⟧
  if (parsed.protocol !== "https:" || !PARTNER_HOSTS.has(parsed.hostname)) {
    throw new Error("only partner pages can be previewed");
  }
  const response = await fetch(parsed, { redirect: "error", signal: AbortSignal.timeout(5000) });  ⟦sink⟧
  return (await response.text()).slice(0, 1024);
}""",
            exports=("fetchPartnerPage",),
        ),
        "Safe: only HTTPS URLs on a fixed host allow-list are fetched, and redirects are refused.",
    ),
    _decoy(
        "js-decoy-hash-bcrypt",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """async function hashPassword(password) {
  return bcrypt.hash(password, 12);  ⟦sink⟧
}

async function verifyPassword(password, stored) {
  return bcrypt.compare(password, stored);
}""",
            imports=("bcrypt",),
            exports=("hashPassword", "verifyPassword"),
        ),
        "Safe: bcrypt with cost 12.",
        replaces=True,
    ),
    _decoy(
        "js-decoy-secret-env",
        "hardcoded-secret",
        "config",
        Block(
            "STRIPE_API_KEY",
            "const STRIPE_API_KEY = process.env.STRIPE_API_KEY;  ⟦sink⟧",
            exports=("STRIPE_API_KEY",),
        ),
        "Safe: the API key is read from the environment.",
    ),
    _decoy(
        "js-decoy-authz-inline",
        "missing-authorization",
        "routes",
        Block(
            "delete",
            """router.delete("«rp»/:id", requireAuth, async (req, res, next) => {  ⟦sink⟧
  if (!(req.user.roles || []).includes("admin")) {
    return res.status(403).json({ error: "forbidden" });
  }
  try {
    await «svc.»«s_delete»(Number(req.params.id));
    return res.status(204).end();
  } catch (err) {
    return next(err);
  }
});""",
            uses=("svc",),
            names=(("auth", "requireAuth"),),
        ),
        "Safe: no `requireRole` middleware, but the handler checks the admin role itself.",
        replaces=True,
    ),
    _decoy(
        "js-decoy-rand-crypto",
        "insecure-randomness",
        "svc",
        Block(
            "issue«Entity»AccessCode",
            """«fn»issue«Entity»AccessCode(id) {
  const code = String(crypto.randomInt(100000, 1000000));  ⟦sink⟧
  «cache.»cacheSet(`access:«entity»:${id}`, code, 15 * 60 * 1000);
  return code;
}""",
            imports=("crypto",),
            uses=("cache",),
            exports=("issue«Entity»AccessCode",),
        ),
        "Safe: `crypto.randomInt` is a CSPRNG.",
        needs=("cache",),
    ),
    _decoy(
        "js-decoy-rand-jitter",
        "insecure-randomness",
        "webhooks",
        Block(
            "retryDelayJitter",
            """function retryDelayJitter(attempt) {
  return retryDelay(attempt) * (0.5 + Math.random());  ⟦sink⟧
}""",
            exports=("retryDelayJitter",),
        ),
        "Safe: `Math.random` only spreads out retry timing; nothing secret depends on it.",
    ),
    _decoy(
        "js-decoy-race-atomic",
        "race-condition",
        "svc",
        Block(
            "reserve«Entity»«NumP»",
            """«afn»reserve«Entity»«NumP»(id, amount) {
  // A single conditional UPDATE: the check and the write cannot interleave.
  const reserved = await «repo.»«r_update»(id, -amount);  ⟦sink⟧
  if (!reserved) {
    throw new ValidationError("not enough «numC»");
  }
  return «me.»«s_get»(id);
}""",
            uses=("repo",),
            names=(("errors", "ValidationError"),),
            exports=("reserve«Entity»«NumP»",),
        ),
        "Safe: the reservation is one conditional UPDATE in the repository.",
    ),
    _decoy(
        "js-decoy-leak-release",
        "resource-leak",
        "repo",
        Block(
            "«entitiesC»ByIds",
            """«afn»«entitiesC»ByIds(ids) {
  const client = await «dbpool».connect();  ⟦sink⟧
  try {
    const result = await client.query("SELECT * FROM «table» WHERE id = ANY($1)", [ids]);
    return result.rows.map((row) => «Entity».fromRow(row));
  } finally {
    client.release();  ⟦end⟧
  }
}""",
            names=(("model", "«Entity»"),),
            uses=("db",),
            exports=("«entitiesC»ByIds",),
        ),
        "Safe: the pooled client is released in `finally`.",
    ),
    _decoy(
        "js-decoy-obo-pairs",
        "off-by-one",
        "pagination",
        Block(
            "windowDeltas",
            """function windowDeltas(values) {
  const deltas = [];
  for (let i = 0; i < values.length - 1; i += 1) {  ⟦sink⟧
    deltas.push(values[i + 1] - values[i]);
  }
  return deltas;
}""",
            exports=("windowDeltas",),
        ),
        "Safe: `values.length - 1` is right: there is one difference per adjacent pair.",
    ),
)
