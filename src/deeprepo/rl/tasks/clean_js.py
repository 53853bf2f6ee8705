"""Clean JavaScript (Express + pg, CommonJS) code the generated projects are made of.

The counterpart of ``clean_python``: correct, safe block templates that planted
bugs and decoys (``bugs_js``) replace or join. Indentation is two spaces.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block

B = Block

MODEL = B(
    "model",
    """class «Entity» {
  constructor(row) {
    this.id = row.id;
    «field_assigns»
    this.createdAt = row.created_at || null;
  }

  static fromRow(row) {
    return new «Entity»(row);
  }

  toJSON() {
    return { id: this.id, «json_fields», createdAt: this.createdAt };
  }
}""",
    exports=("«Entity»",),
)

_RN = (("model", "«Entity»"),)

REPO_INIT = B(
    "constructor",
    """constructor(database = db) {
  this.db = database;
}""",
    uses=("db",),
)

REPO = (
    B(
        "r_list",
        """«afn»«r_list»(limit = 50, offset = 0) {
  const { rows } = await «dbq»("SELECT * FROM «table» ORDER BY id LIMIT $1 OFFSET $2", [
    limit,
    offset,
  ]);
  return rows.map((row) => «Entity».fromRow(row));
}""",
        names=_RN,
        uses=("db",),
        exports=("«r_list»",),
    ),
    B(
        "r_get",
        """«afn»«r_get»(id) {
  const { rows } = await «dbq»("SELECT * FROM «table» WHERE id = $1", [id]);
  return rows.length ? «Entity».fromRow(rows[0]) : null;
}""",
        names=_RN,
        uses=("db",),
        exports=("«r_get»",),
    ),
    B(
        "r_create",
        """«afn»«r_create»(«labelC», «numC») {
  const { rows } = await «dbq»(
    "INSERT INTO «table» («label», «num») VALUES ($1, $2) RETURNING id",
    [«labelC», «numC»],
  );
  return rows[0].id;
}""",
        uses=("db",),
        exports=("«r_create»",),
    ),
    B(
        "r_update",
        """// One statement, so concurrent adjustments cannot interleave.
«afn»«r_update»(id, delta) {
  const { rowCount } = await «dbq»(
    "UPDATE «table» SET «num» = «num» + $1 WHERE id = $2 AND «num» + $1 >= 0",
    [delta, id],
  );
  return rowCount > 0;
}""",
        uses=("db",),
        exports=("«r_update»",),
    ),
    B(
        "r_set",
        """«afn»«r_set»(id, value) {
  await «dbq»("UPDATE «table» SET «num» = $1 WHERE id = $2", [value, id]);
}""",
        uses=("db",),
        exports=("«r_set»",),
    ),
    B(
        "r_delete",
        """«afn»«r_delete»(id) {
  const { rowCount } = await «dbq»("DELETE FROM «table» WHERE id = $1", [id]);
  return rowCount > 0;
}""",
        uses=("db",),
        exports=("«r_delete»",),
    ),
    B(
        "r_count",
        """«afn»«r_count»() {
  const { rows } = await «dbq»("SELECT COUNT(*) AS total FROM «table»");
  return Number(rows[0].total);
}""",
        uses=("db",),
        exports=("«r_count»",),
    ),
)

_SN = (("errors", "NotFoundError"), ("errors", "ValidationError"))

SVC = (
    B(
        "s_list",
        """«afn»«s_list»(page = 1, perPage = «page_size») {
  const { limit, offset } = «pagination.»pageBounds(page, perPage);
  const [items, total] = await Promise.all([
    «repo.»«r_list»(limit, offset),
    «repo.»«r_count»(),
  ]);
  return { items, page, pages: «pagination.»pageCount(total, limit) };
}""",
        uses=("repo", "pagination"),
        exports=("«s_list»",),
    ),
    B(
        "s_get",
        """«afn»«s_get»(id) {
  const item = await «repo.»«r_get»(id);
  if (!item) {
    throw new NotFoundError(«nf_msg»);
  }
  return item;
}""",
        uses=("repo",),
        names=_SN,
        exports=("«s_get»",),
    ),
    B(
        "s_create",
        """«afn»«s_create»(payload) {
  const «labelC» = String(payload.«labelC» || "").trim();
  if (!«labelC») {
    throw new ValidationError("«labelC» is required");
  }
  const «numC» = Number(payload.«numC» || 0);
  if (Number.isNaN(«numC») || «numC» < 0) {
    throw new ValidationError("«numC» must be a non-negative number");
  }
  const id = await «repo.»«r_create»(«labelC», «numC»);
  return «me.»«s_get»(id);
}""",
        uses=("repo",),
        names=_SN,
        exports=("«s_create»",),
    ),
    B(
        "s_adjust",
        """«afn»«s_adjust»(id, delta) {
  const updated = await «repo.»«r_update»(id, delta);
  if (!updated) {
    throw new ValidationError(«adjust_msg»);
  }
  return «me.»«s_get»(id);
}""",
        uses=("repo",),
        names=_SN,
        exports=("«s_adjust»",),
    ),
    B(
        "s_delete",
        """«afn»«s_delete»(id) {
  const removed = await «repo.»«r_delete»(id);
  if (!removed) {
    throw new NotFoundError(«nf_msg»);
  }
}""",
        uses=("repo",),
        names=_SN,
        exports=("«s_delete»",),
    ),
)

SCHEMA = B(
    "schema",
    """function validate«Entity»(input) {
  const errors = {};
  const «labelC» = typeof input.«labelC» === "string" ? input.«labelC».trim() : "";
  if (!«labelC») {
    errors.«labelC» = "required";
  } else if («labelC».length > 200) {
    errors.«labelC» = "too long";
  }
  const «numC» = Number(input.«numC» ?? 0);
  if (Number.isNaN(«numC»)) {
    errors.«numC» = "must be a number";
  }
  if (Object.keys(errors).length > 0) {
    throw new ValidationError(«schema_msg»);
  }
  return { «labelC», «numC» };
}""",
    names=(("errors", "ValidationError"),),
    exports=("validate«Entity»",),
)

_AUTH = (("auth", "requireAuth"), ("auth", "requireRole"))

ROUTER = B("router", "const router = express.Router();", imports=("express",))
ROUTER_EXPORT = B("router_export", "module.exports = router;")

ROUTES = (
    B(
        "list",
        """router.get("«rp_list»", async (req, res, next) => {
  try {
    const page = Number.parseInt(req.query.page || "1", 10);
    res.json(await «svc.»«s_list»(page));
  } catch (err) {
    next(err);
  }
});""",
        uses=("svc",),
    ),
    B(
        "get",
        """router.get("«rp»/:id", async (req, res, next) => {
  try {
    res.json(await «svc.»«s_get»(Number(req.params.id)));
  } catch (err) {
    next(err);
  }
});""",
        uses=("svc",),
    ),
    B(
        "create",
        """router.post("«rp_list»", requireAuth, async (req, res, next) => {
  try {
    res.status(201).json(await «svc.»«s_create»(req.body || {}));
  } catch (err) {
    next(err);
  }
});""",
        uses=("svc",),
        names=_AUTH,
    ),
    B(
        "adjust",
        """router.post("«rp»/:id/«num_url»", requireAuth, async (req, res, next) => {
  try {
    const delta = Number((req.body || {}).delta || 0);
    res.json(await «svc.»«s_adjust»(Number(req.params.id), delta));
  } catch (err) {
    next(err);
  }
});""",
        uses=("svc",),
        names=_AUTH,
    ),
    B(
        "delete",
        """router.delete("«rp»/:id", requireAuth, requireRole("admin"), async (req, res, next) => {
  try {
    await «svc.»«s_delete»(Number(req.params.id));
    res.status(204).end();
  } catch (err) {
    next(err);
  }
});""",
        uses=("svc",),
        names=_AUTH,
    ),
)

TESTS = (
    B(
        "t_list",
        """test("lists «entities»", async () => {
  const res = await request(app).get("«api_prefix»/«url»");
  expect(res.status).toBe(200);
  expect(res.body.page).toBe(1);
});""",
    ),
    B(
        "t_missing",
        """test("answers 404 for an unknown «entity»", async () => {
  const res = await request(app).get("«api_prefix»/«url»/987654");
  expect(res.status).toBe(404);
});""",
    ),
    B(
        "t_auth",
        """test("requires a token to create «entities»", async () => {
  const res = await request(app).post("«api_prefix»/«url»").send({ «labelC»: "sample" });
  expect(res.status).toBe(401);
});""",
    ),
)

ERRORS = (
    B(
        "AppError",
        """class AppError extends Error {
  constructor(message, status = 500) {
    super(message);
    this.name = this.constructor.name;
    this.status = status;
  }
}""",
        exports=("AppError",),
    ),
    B(
        "NotFoundError",
        """class NotFoundError extends AppError {
  constructor(message) {
    super(message, 404);
  }
}""",
        exports=("NotFoundError",),
    ),
    B(
        "ValidationError",
        """class ValidationError extends AppError {
  constructor(message) {
    super(message, 400);
  }
}""",
        exports=("ValidationError",),
    ),
)

CONFIG = (
    B("PORT", "const PORT = Number(process.env.PORT || «port»);", exports=("PORT",)),
    B(
        "DATABASE_URL",
        'const DATABASE_URL = process.env.DATABASE_URL || "postgres://localhost:5432/«pkg_file»";',
        exports=("DATABASE_URL",),
    ),
    B("JWT_SECRET", "const JWT_SECRET = process.env.JWT_SECRET;", exports=("JWT_SECRET",)),
    B(
        "UPLOAD_DIR",
        'const UPLOAD_DIR = process.env.UPLOAD_DIR || "/var/lib/«pkg_file»/uploads";',
        exports=("UPLOAD_DIR",),
    ),
    B(
        "EXPORT_DIR",
        'const EXPORT_DIR = process.env.EXPORT_DIR || "/var/lib/«pkg_file»/exports";',
        exports=("EXPORT_DIR",),
    ),
    B(
        "WEBHOOK_URL",
        'const WEBHOOK_URL = process.env.WEBHOOK_URL || "";',
        exports=("WEBHOOK_URL",),
    ),
    B("PAGE_SIZE", "const PAGE_SIZE = «page_size»;", exports=("PAGE_SIZE",)),
)

DB = (
    B(
        "pool",
        "const pool = new Pool({ connectionString: DATABASE_URL, max: 10 });",
        imports=("{Pool}=pg",),
        names=(("config", "DATABASE_URL"),),
        exports=("pool",),
    ),
    B(
        "query",
        """function query(text, params = []) {
  return pool.query(text, params);
}""",
        exports=("query",),
    ),
    B(
        "withClient",
        """async function withClient(fn) {
  const client = await pool.connect();
  try {
    return await fn(client);
  } finally {
    client.release();
  }
}""",
        exports=("withClient",),
    ),
)

AUTH = (
    B("scrypt", "const scrypt = promisify(crypto.scrypt);", imports=("crypto", "{promisify}=util")),
    B(
        "password_hashing",
        """async function hashPassword(password) {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, 64);
  return `${salt.toString("hex")}:${hash.toString("hex")}`;
}

async function verifyPassword(password, stored) {
  const [saltHex, hashHex] = stored.split(":");
  const hash = await scrypt(password, Buffer.from(saltHex, "hex"), 64);
  return crypto.timingSafeEqual(hash, Buffer.from(hashHex, "hex"));
}""",
        imports=("crypto",),
        exports=("hashPassword", "verifyPassword"),
    ),
    B(
        "generate_token",
        """function generateToken(bytes = 32) {
  return crypto.randomBytes(bytes).toString("base64url");
}""",
        imports=("crypto",),
        exports=("generateToken",),
    ),
    B(
        "requireAuth",
        """function requireAuth(req, res, next) {
  const header = req.get("authorization") || "";
  const token = header.startsWith("Bearer ") ? header.slice(7) : null;
  if (!token) {
    return res.status(401).json({ error: "authentication required" });
  }
  try {
    req.user = jwt.verify(token, JWT_SECRET);
    return next();
  } catch (err) {
    return res.status(401).json({ error: "invalid token" });
  }
}""",
        imports=("jwt=jsonwebtoken",),
        names=(("config", "JWT_SECRET"),),
        exports=("requireAuth",),
    ),
    B(
        "requireRole",
        """function requireRole(role) {
  return (req, res, next) => {
    if (!req.user || !(req.user.roles || []).includes(role)) {
      return res.status(403).json({ error: "forbidden" });
    }
    return next();
  };
}""",
        exports=("requireRole",),
    ),
)

APP = (
    B(
        "app",
        """const app = express();
app.use(express.json({ limit: "1mb" }));
«mount_routes»""",
        imports=("express",),
    ),
    B(
        "error_handler",
        """// Express recognises an error handler by its four parameters.
app.use((err, req, res, _next) => {
  const status = err.status || 500;
  res.status(status).json({ error: status === 500 ? "internal error" : err.message });
});""",
        names=(),
    ),
    B("app_export", "module.exports = app;"),
)

SERVER = B(
    "server",
    """app.listen(PORT, () => {
  console.log(`«app_title» listening on port ${PORT}`);
});""",
    imports=("app=./app",),
    names=(("config", "PORT"),),
)

ENTITY_BLOCKS: dict[str, tuple[Block, ...]] = {
    "model": (MODEL,),
    "repo": REPO,
    "svc": SVC,
    "schema": (SCHEMA,),
    "routes": ROUTES,
    "tests": TESTS,
}
"""Clean blocks of each per-entity role."""
CORE_BLOCKS: dict[str, tuple[Block, ...]] = {
    "config": CONFIG,
    "errors": ERRORS,
    "db": DB,
    "auth": AUTH,
}
"""Clean blocks of the project-wide roles (the app section is wired separately)."""
