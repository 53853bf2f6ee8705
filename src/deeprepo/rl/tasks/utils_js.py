"""Clean JavaScript utility modules (one section each), as block templates.

``UTILS`` maps a utility's section id to ``(module stem choices, doc comment, blocks)``;
the ids match ``utils_python.UTILS`` so a bug kind finds its host in either language.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block

B = Block

PAGINATION = (
    B("MAX_PAGE_SIZE", "const MAX_PAGE_SIZE = 100;"),
    B(
        "page_bounds",
        """// Pages are 1-based in the API.
function pageBounds(page, perPage) {
  const safePage = Math.max(Number(page) || 1, 1);
  const limit = Math.min(Math.max(Number(perPage) || 1, 1), MAX_PAGE_SIZE);
  return { limit, offset: (safePage - 1) * limit };
}""",
        exports=("pageBounds",),
    ),
    B(
        "page_count",
        """function pageCount(total, perPage) {
  if (perPage <= 0) {
    return 0;
  }
  return Math.ceil(total / perPage);
}""",
        exports=("pageCount",),
    ),
)

STORAGE = (
    B(
        "upload_path",
        """function uploadPath(filename) {
  const base = path.resolve(UPLOAD_DIR);
  const target = path.resolve(base, filename);
  if (!target.startsWith(base + path.sep)) {
    throw new Error(«bad_name_msg»);
  }
  return target;
}""",
        imports=("path",),
        names=(("config", "UPLOAD_DIR"),),
        exports=("uploadPath",),
    ),
    B(
        "save_upload",
        """async function saveUpload(filename, data) {
  const target = uploadPath(filename);
  await fs.promises.mkdir(path.dirname(target), { recursive: true });
  await fs.promises.writeFile(target, data);
  return target;
}""",
        imports=("fs", "path"),
        exports=("saveUpload",),
    ),
    B(
        "read_upload",
        """async function readUpload(filename) {
  return fs.promises.readFile(uploadPath(filename));
}""",
        imports=("fs",),
        exports=("readUpload",),
    ),
    B(
        "delete_upload",
        """async function deleteUpload(filename) {
  try {
    await fs.promises.unlink(uploadPath(filename));
    return true;
  } catch (err) {
    if (err.code === "ENOENT") {
      return false;
    }
    throw err;
  }
}""",
        imports=("fs",),
        exports=("deleteUpload",),
    ),
)

WEBHOOKS = (
    B(
        "post_event",
        """async function postEvent(event, payload) {
  if (!WEBHOOK_URL) {
    return 0;
  }
  const response = await fetch(WEBHOOK_URL, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ event, data: payload }),
    signal: AbortSignal.timeout(5000),
  });
  return response.status;
}""",
        names=(("config", "WEBHOOK_URL"),),
        exports=("postEvent",),
    ),
    B(
        "retry_delay",
        """function retryDelay(attempt, baseMs = 500) {
  return baseMs * 2 ** Math.min(attempt, 6);
}""",
        exports=("retryDelay",),
    ),
)

EXPORTER = (
    B(
        "export_csv",
        """async function exportCsv(rows, name) {
  const safeName = String(name).replace(/[^A-Za-z0-9_-]/g, "_");
  const target = path.join(EXPORT_DIR, `${safeName}.csv`);
  const columns = rows.length ? Object.keys(rows[0]).sort() : [];
  const lines = [columns.join(",")].concat(
    rows.map((row) => columns.map((col) => JSON.stringify(row[col] ?? "")).join(",")),
  );
  await fs.promises.mkdir(EXPORT_DIR, { recursive: true });
  await fs.promises.writeFile(target, lines.join("\\n"));
  return target;
}""",
        imports=("fs", "path"),
        names=(("config", "EXPORT_DIR"),),
        exports=("exportCsv",),
    ),
    B(
        "compress_export",
        """function compressExport(target) {
  return new Promise((resolve, reject) => {
    execFile("gzip", ["-kf", target], (err) => (err ? reject(err) : resolve(`${target}.gz`)));
  });
}""",
        imports=("{execFile}=child_process",),
        exports=("compressExport",),
    ),
)

CACHE = (
    B("_store", "const store = new Map();"),
    B(
        "cache_get",
        """function cacheGet(key) {
  const entry = store.get(key);
  if (!entry || entry.expires < Date.now()) {
    store.delete(key);
    return undefined;
  }
  return entry.value;
}""",
        exports=("cacheGet",),
    ),
    B(
        "cache_set",
        """function cacheSet(key, value, ttlMs = 60000) {
  store.set(key, { value, expires: Date.now() + ttlMs });
}""",
        exports=("cacheSet",),
    ),
)

HTML = (
    B(
        "escape_html",
        """const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (ch) => HTML_ESCAPES[ch]);
}""",
        exports=("escapeHtml",),
    ),
    B(
        "render_table",
        """function renderTable(rows, columns) {
  const head = columns.map((col) => `<th>${escapeHtml(col)}</th>`).join("");
  const body = rows
    .map((row) => `<tr>${columns.map((col) => `<td>${escapeHtml(row[col] ?? "")}</td>`).join("")}</tr>`)
    .join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}""",
        exports=("renderTable",),
    ),
)

IMPORTER = (
    B(
        "parse_rows",
        """function parseRows(text) {
  const data = JSON.parse(text);
  if (!Array.isArray(data)) {
    throw new Error("expected a JSON array of rows");
  }
  return data.filter((row) => row && typeof row === "object");
}""",
        exports=("parseRows",),
    ),
)

JOBS = (
    B("_stats", "const stats = { ok: 0, failed: 0 };"),
    B(
        "run_batch",
        """async function runBatch(items, handler, concurrency = 4) {
  const queue = [...items];
  async function worker() {
    while (queue.length > 0) {
      const item = queue.shift();
      const ok = await handler(item).catch(() => false);
      stats[ok ? "ok" : "failed"] += 1;
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ...stats };
}""",
        exports=("runBatch",),
    ),
)

VALIDATORS = (
    B("EMAIL_RE", "const EMAIL_RE = /^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$/i;"),
    B(
        "is_email",
        """function isEmail(value) {
  return EMAIL_RE.test(String(value).trim());
}""",
        exports=("isEmail",),
    ),
    B(
        "require_positive",
        """function requirePositive(value, field) {
  if (!(Number(value) > 0)) {
    throw new Error(`${field} must be positive`);
  }
  return Number(value);
}""",
        exports=("requirePositive",),
    ),
)

TEXT = (
    B(
        "slugify",
        """function slugify(value) {
  return String(value)
    .normalize("NFKD")
    .replace(/[\\u0300-\\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}""",
        exports=("slugify",),
    ),
    B(
        "truncate",
        """function truncate(value, length = 80, suffix = "...") {
  const text = String(value);
  return text.length <= length ? text : text.slice(0, Math.max(length - suffix.length, 0)).trimEnd() + suffix;
}""",
        exports=("truncate",),
    ),
)

DATES = (
    B(
        "parse_date",
        """function parseDate(value) {
  if (!/^\\d{4}-\\d{2}-\\d{2}$/.test(value)) {
    throw new Error(`not a date: ${value}`);
  }
  return new Date(`${value}T00:00:00Z`);
}""",
        exports=("parseDate",),
    ),
    B(
        "days_between",
        """function daysBetween(start, end) {
  return Math.round((end.getTime() - start.getTime()) / 86400000);
}""",
        exports=("daysBetween",),
    ),
)

MONEY = (
    B(
        "to_cents",
        """function toCents(amount) {
  return Math.round(Number(amount) * 100);
}""",
        exports=("toCents",),
    ),
    B(
        "format_money",
        """function formatMoney(cents, currency = "«currency»") {
  const sign = cents < 0 ? "-" : "";
  const abs = Math.abs(cents);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, "0")} ${currency}`;
}""",
        exports=("formatMoney",),
    ),
)

LOGS = (
    B("LEVELS", 'const LEVELS = ["debug", "info", "warn", "error"];'),
    B(
        "logger",
        """function createLogger(name, level = process.env.LOG_LEVEL || "info") {
  const threshold = LEVELS.indexOf(level);
  const log = (lvl) => (...args) => {
    if (LEVELS.indexOf(lvl) >= threshold) {
      console.log(`[${lvl}] ${name}:`, ...args);
    }
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}""",
        exports=("createLogger",),
    ),
)

UTILS: dict[str, tuple[tuple[str, ...], str, tuple[Block, ...]]] = {
    "pagination": (
        ("pagination", "paging"),
        "Page arithmetic shared by the list endpoints.",
        PAGINATION,
    ),
    "storage": (("storage", "files", "uploads"), "Uploaded files on local disk.", STORAGE),
    "webhooks": (
        ("webhooks", "httpClient", "outbound"),
        "Outbound HTTP: webhooks and link previews.",
        WEBHOOKS,
    ),
    "exporter": (("exporter", "reports", "csvExport"), "CSV exports and their archives.", EXPORTER),
    "cache": (("cache", "memo"), "A small in-process cache with expiry.", CACHE),
    "html": (("html", "views", "markup"), "Server-side HTML fragments.", HTML),
    "importer": (("importer", "bulkLoad"), "Bulk import of uploaded data.", IMPORTER),
    "jobs": (("jobs", "worker", "queue"), "Background batch jobs.", JOBS),
    "validators": (("validators", "checks"), "Input validation helpers.", VALIDATORS),
    "text": (("text", "strings"), "Text helpers.", TEXT),
    "dates": (("dates", "time"), "Date helpers.", DATES),
    "money": (("money", "currency"), "Money arithmetic in integer cents.", MONEY),
    "logs": (("logger", "log"), "Logging.", LOGS),
}
"""Utility section id → (module stems to choose from, doc comment, blocks)."""
