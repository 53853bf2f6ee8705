"""Clean JavaScript that uses risky APIs safely (see ``safe_python`` for why).

``«fn»``/``«afn»`` make a block a module function or a class method, so these blocks fit
any section; function-style sections export the name.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.safe_python import SafeUse

B = Block


def _u(where: str, choices: tuple[str, ...], code: str, *imports: str, **kw: object) -> SafeUse:
    exports = () if where in ("route", "tests") else ("«nm»",)
    return SafeUse(choices, where, B("«nm»", code, imports=imports, exports=exports, **kw))  # type: ignore[arg-type]


_ESC = ".replace(/[&<>\"']/g, (ch) => `&#${ch.charCodeAt(0)};`)"

POOL: tuple[SafeUse, ...] = (
    _u(
        "fn",
        ("etagFor", "payloadEtag", "responseEtag", "contentFingerprint"),
        """«fn»«nm»(payload) {
  // A weak validator for conditional GETs, not a security boundary.
  const body = JSON.stringify(payload);
  return crypto.createHash("md5").update(body).digest("hex");
}""",
        "crypto",
    ),
    _u(
        "fn",
        ("cacheKey", "memoKey", "lookupKey", "bucketKey"),
        """«fn»«nm»(...parts) {
  const raw = parts.map(String).join("|");
  return "k:" + crypto.createHash("sha1").update(raw).digest("hex").slice(0, 20);
}""",
        "crypto",
    ),
    _u(
        "fn",
        ("backoffDelay", "jitteredDelay", "retryAfterMs", "nextDelay"),
        """«fn»«nm»(attempt, baseMs = 250, capMs = 30000) {
  const delay = Math.min(capMs, baseMs * 2 ** attempt);
  return Math.floor(Math.random() * delay);
}""",
    ),
    _u(
        "fn",
        ("shouldSample", "sampled", "traceThisCall"),
        """«fn»«nm»(rate = 0.05) {
  if (rate >= 1) {
    return true;
  }
  return Math.random() < rate;
}""",
    ),
    _u(
        "fn",
        ("spreadHosts", "shuffledReplicas", "hostOrder"),
        """«fn»«nm»(hosts) {
  const order = [...hosts];
  for (let i = order.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}""",
    ),
    _u(
        "fn",
        ("mimeTypeOf", "sniffType", "detectMime"),
        """«fn»«nm»(filePath) {
  return new Promise((resolve, reject) => {
    execFile("file", ["--brief", "--mime-type", "--", filePath], (err, stdout) => {
      if (err) {
        reject(err);
      } else {
        resolve(stdout.trim());
      }
    });
  });
}""",
        "{execFile}=child_process",
    ),
    _u(
        "fn",
        ("buildRevision", "currentRevision", "gitRevision"),
        """«fn»«nm»() {
  return new Promise((resolve) => {
    exec("git rev-parse --short HEAD", (err, stdout) => resolve(err ? "unknown" : stdout.trim()));
  });
}""",
        "{exec}=child_process",
    ),
    _u(
        "fn",
        ("parseYaml", "yamlMapping", "settingsFromText"),
        """«fn»«nm»(text) {
  // js-yaml 4: load() only builds plain data (the default schema has no JS types).
  const data = yaml.load(text);
  if (data === null || typeof data !== "object") {
    throw new Error("expected a mapping");
  }
  return data;
}""",
        "yaml=js-yaml",
    ),
    _u(
        "fn",
        ("deepCopy", "snapshotOf", "frozenCopy"),
        """«fn»«nm»(value) {
  return JSON.parse(JSON.stringify(value));
}""",
    ),
    _u(
        "fn",
        ("signatureOk", "verifySignature", "validSignature"),
        """«fn»«nm»(body, signature, key) {
  const expected = crypto.createHmac("sha256", key).update(body).digest();
  const given = Buffer.from(String(signature), "hex");
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}""",
        "crypto",
    ),
    _u(
        "fn",
        ("reportPath", "snapshotPath", "draftPath"),
        """«fn»«nm»(name) {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
    throw new Error("invalid file name");
  }
  const file = `${name}.json`;
  return path.join(EXPORT_DIR, file);
}""",
        "path",
        names=(("config", "EXPORT_DIR"),),
    ),
    _u(
        "fn",
        ("readVersion", "packageVersion", "releaseName"),
        """«fn»«nm»() {
  try {
    return fs.readFileSync(path.join(__dirname, "VERSION"), "utf8").trim();
  } catch (err) {
    return "0.0.0";
  }
}""",
        "fs",
        "path",
    ),
    _u(
        "fn",
        ("upstreamHealthy", "statusPageOk", "providerUp"),
        """«afn»«nm»() {
  const url = "https://status.example.com/api/v2/status.json";
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(3000) });
    return response.ok;
  } catch (err) {
    return false;
  }
}""",
    ),
    _u(
        "fn",
        ("badgeHtml", "labelHtml", "chipMarkup"),
        """«fn»«nm»(label, count) {
  const safe = String(label)"""
        + _ESC
        + """;
  return `<span class="badge">${safe} (${Number(count)})</span>`;
}""",
    ),
    _u(
        "fn",
        ("rowCounts", "tableSizes", "countTables"),
        """«afn»«nm»() {
  const counts = {};
  for (const table of «table_names_js») {
    const { rows } = await «db.»query(`SELECT COUNT(*) AS n FROM ${table}`);
    counts[table] = Number(rows[0].n);
  }
  return counts;
}""",
        uses=("db",),
    ),
    _u(
        "repo",
        ("«entities»WithIds", "«entities»In", "many«Entities»"),
        """«afn»«nm»(ids) {
  if (!ids.length) {
    return [];
  }
  const marks = ids.map((_, i) => `$${i + 1}`).join(", ");
  const { rows } = await «dbq»(`SELECT * FROM «table» WHERE id IN (${marks}) ORDER BY id`, ids);
  return rows.map((row) => «Entity».fromRow(row));
}""",
        names=(("model", "«Entity»"),),
        uses=("db",),
    ),
    _u(
        "repo",
        ("recent«Entities»", "latest«Entities»", "newest«Entities»"),
        """«afn»«nm»(limit = 10) {
  const sql = "SELECT * FROM " + "«table»" + " ORDER BY created_at DESC LIMIT $1";
  const { rows } = await «dbq»(sql, [Number(limit)]);
  return rows.map((row) => «Entity».fromRow(row));
}""",
        names=(("model", "«Entity»"),),
        uses=("db",),
    ),
    _u(
        "repo",
        ("«entities»ByColumn", "«entities»Matching", "filter«Entities»"),
        """«afn»«nm»(column, value) {
  if (!["«label»", "«num»"].includes(column)) {
    throw new Error(`cannot filter on ${column}`);
  }
  const { rows } = await «dbq»(`SELECT * FROM «table» WHERE ${column} = $1 ORDER BY id`, [value]);
  return rows.map((row) => «Entity».fromRow(row));
}""",
        names=(("model", "«Entity»"),),
        uses=("db",),
    ),
    _u(
        "const",
        ("TOKEN_ALPHABET", "CODE_ALPHABET"),
        'const «nm» = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";',
    ),
    _u(
        "const",
        ("PASSWORD_RESET_PATH", "PASSWORD_CHANGE_URL"),
        'const «nm» = "/account/password-reset/confirm";',
    ),
    _u(
        "const",
        ("AUTH_COOKIE_NAME", "SESSION_TOKEN_COOKIE"),
        'const «nm» = "«pkg_file»_session_token";',
    ),
    _u(
        "const",
        ("SCHEMA_FINGERPRINT", "ASSETS_DIGEST", "FIXTURE_CHECKSUM"),
        'const «nm» = "«hex40»";',
    ),
    _u("const", ("PUBLIC_KEY_ID", "SIGNING_KEY_ID", "JWKS_KEY_ID"), 'const «nm» = "kid-«hex16»";'),
    _u("tests", ("TEST_API_KEY", "FAKE_API_KEY"), 'const «nm» = "test_«alnum24»";'),
    _u("tests", ("TEST_SECRET_KEY", "DUMMY_SECRET"), 'const «nm» = "not-a-real-secret-«hex16»";'),
    _u(
        "route",
        ("meta",),
        """router.get("«rp»/meta", (req, res) => {
  const payload = { resource: "«entities»", version: 1 };
  const etag = crypto.createHash("md5").update(JSON.stringify(payload)).digest("hex");
  if (req.get("if-none-match") === etag) {
    res.status(304).end();
    return;
  }
  res.set("ETag", etag).json(payload);
});""",
        "crypto",
    ),
    _u(
        "route",
        ("badge",),
        """router.get("«rp»/badge", (req, res) => {
  const label = String(req.query.label || "«entities»")"""
        + _ESC
        + """;
  res.type("html").send(`<span class="badge">${label}</span>`);
});""",
    ),
    _u(
        "route",
        ("sample",),
        """router.get("«rp»/sample", async (req, res, next) => {
  try {
    const size = Math.min(Number(req.query.size) || 5, 20);
    const { items } = await «svc.»«s_list»(1);
    const picked = [...items].sort(() => Math.random() - 0.5).slice(0, size);
    res.json(picked);
  } catch (err) {
    next(err);
  }
});""",
        uses=("svc",),
    ),
    # Lookalikes: the line shapes of planted bugs, in code that is safe.
    _u(
        "repo",
        ("latest«Entities»Page", "newest«Entities»Page", "recent«Entities»Rows"),
        """«afn»«nm»(limit = 20) {
  const result = await «dbq»("SELECT * FROM «table» ORDER BY id DESC LIMIT $1", [limit]);
  return result.rows.map((row) => «Entity».fromRow(row));
}""",
        names=(("model", "«Entity»"),),
        uses=("db",),
    ),
    _u(
        "fn",
        ("readPrefix", "fileHead", "peekFile"),
        """«fn»«nm»(filePath, bytes = 512) {
  const fd = fs.openSync(String(filePath), "r");
  try {
    const buffer = Buffer.alloc(bytes);
    const read = fs.readSync(fd, buffer, 0, bytes, 0);
    return buffer.subarray(0, read);
  } finally {
    fs.closeSync(fd);
  }
}""",
        "fs",
    ),
    _u(
        "fn",
        ("traceId", "requestTag", "cacheBuster"),
        """«fn»«nm»() {
  let suffix = "";
  suffix += Math.random().toString(36).slice(2).toUpperCase();
  return `req-${Date.now()}-${suffix}`;
}""",
    ),
    _u(
        "fn",
        ("pingUpstream", "probeProvider", "upstreamReachable"),
        """«afn»«nm»() {
  const target = "https://status.example.com/api/v2/summary.json";
  const response = await fetch(target, { method: "HEAD" });
  return response.ok;
}""",
    ),
    _u(
        "fn",
        ("storeNewFile", "writeOnce", "createUpload"),
        """«fn»«nm»(name, data) {
  const target = path.join(UPLOAD_DIR, path.basename(name));
  fs.writeFileSync(target, data, { flag: "wx" });
  return target;
}""",
        "fs",
        "path",
        names=(("config", "UPLOAD_DIR"),),
    ),
    _u(
        "fn",
        ("tally", "countKeys", "histogram"),
        """«fn»«nm»(items) {
  const counts = {};
  for (const key of items) {
    const current = counts[key] || 0;
    counts[key] = current + 1;
  }
  return counts;
}""",
    ),
    _u(
        "fn",
        ("shortId", "displaySuffix", "cacheSalt"),
        """«fn»«nm»() {
  let id = Date.now().toString(36);
  id += Math.random().toString(36).slice(2);
  return id;
}""",
    ),
)
