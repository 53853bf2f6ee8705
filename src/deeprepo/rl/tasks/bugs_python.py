"""Planted bugs in Python (Flask + sqlite3): at least one variant per bug kind.

Each variant marks its sink (``⟦sink⟧``) and, where the defect spans lines,
the first and last line of the range (``⟦start⟧`` / ``⟦end⟧``). Cross-file
variants carry a ``source`` route whose ``⟦source⟧`` line reads the request.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet

_J = ("from flask import jsonify, request",)
_REPO_IMPORTS = ("from contextlib import closing",)
_REPO_NAMES = (("db", "get_connection"), ("model", "«Entity»"))
_AUTH = (("auth", "login_required"), ("auth", "require_role"))


def _src(
    key: str, code: str, *, imports: tuple[str, ...] = _J, names: tuple[tuple[str, str], ...] = ()
) -> Block:
    return Block(key, code, imports=imports, names=names, uses=("sink",))


def _bug(name: str, kind: str, host: str, block: Block, description: str, **kw: object) -> Snippet:
    return Snippet(name, kind, "python", host, block, description, **kw)  # type: ignore[arg-type]


SNIPPETS: tuple[Snippet, ...] = (
    # --- SQL injection ----------------------------------------------------------------------
    _bug(
        "py-sqli-search",
        "sql-injection",
        "repo",
        Block(
            "search_«entities»",
            """def search_«entities»(«selfp»term: str) -> list[«Entity»]:
    query = f"SELECT * FROM «table» WHERE «label» LIKE '%{term}%' ORDER BY id"  ⟦start⟧
    with closing(«conn») as conn:
        rows = conn.execute(query).fetchall()  ⟦sink⟧
    return [«Entity».from_row(row) for row in rows]""",
            imports=_REPO_IMPORTS,
            names=_REPO_NAMES,
        ),
        "`search_«entities»` puts the search term into the SQL text with an f-string, so a quote in "
        "the term rewrites the query (SQL injection).",
        source=_src(
            "search_«entities»_view",
            """@«bp».route("«rp»/search", methods=["GET"])
def search_«entities»_view():
    term = request.args.get("q", "")  ⟦source⟧
    results = «sink.»«sink_fn»(term)
    return jsonify([item.to_dict() for item in results])""",
        ),
    ),
    _bug(
        "py-sqli-order",
        "sql-injection",
        "repo",
        Block(
            "«r_list»_sorted",
            """def «r_list»_sorted(«selfp»sort: str = "id", direction: str = "ASC") -> list[«Entity»]:
    sql = "SELECT * FROM «table» ORDER BY {} {}".format(sort, direction)  ⟦start⟧
    with closing(«conn») as conn:
        rows = conn.execute(sql).fetchall()  ⟦sink⟧
    return [«Entity».from_row(row) for row in rows]""",
            imports=_REPO_IMPORTS,
            names=_REPO_NAMES,
        ),
        "`«r_list»_sorted` formats the ORDER BY column and direction into the SQL string; "
        "both come from the caller unchecked (SQL injection).",
        source=_src(
            "sorted_«entities»_view",
            """@«bp».route("«rp»/sorted", methods=["GET"])
def sorted_«entities»_view():
    sort = request.args.get("sort", "id")  ⟦source⟧
    direction = request.args.get("dir", "ASC")
    return jsonify([item.to_dict() for item in «sink.»«sink_fn»(sort, direction)])""",
        ),
    ),
    _bug(
        "py-sqli-route",
        "sql-injection",
        "routes",
        Block(
            "lookup_«entity»",
            """@«bp».route("«rp»/lookup", methods=["GET"])
def lookup_«entity»():
    «label» = request.args.get("«label»", "")  ⟦start⟧
    with closing(get_connection()) as conn:
        row = conn.execute("SELECT * FROM «table» WHERE «label» = '%s'" % «label»).fetchone()  ⟦sink⟧
    if row is None:
        return jsonify(error="not found"), 404
    return jsonify(dict(row))""",
            imports=(*_J, "from contextlib import closing"),
            names=(("db", "get_connection"),),
        ),
        "The lookup handler interpolates the `«label»` query parameter into the SQL string with `%` "
        "(SQL injection).",
    ),
    # --- command injection ------------------------------------------------------------------
    _bug(
        "py-cmd-archive",
        "command-injection",
        "exporter",
        Block(
            "archive_export",
            '''def archive_export(name: str) -> Path:
    """Pack an export directory into a tarball next to it."""
    target = Path(EXPORT_DIR) / name
    subprocess.run(f"tar -czf {target}.tar.gz -C {EXPORT_DIR} {name}", shell=True, check=True)  ⟦sink⟧
    return target.with_name(target.name + ".tar.gz")''',
            imports=("import subprocess", "from pathlib import Path"),
            names=(("config", "EXPORT_DIR"),),
        ),
        "`archive_export` runs a shell command built from `name` with `shell=True`; shell "
        "metacharacters in the name run arbitrary commands (command injection).",
        source=_src(
            "export_«entities»_archive",
            """@«bp».route("«rp»/export", methods=["POST"])
@login_required
def export_«entities»_archive():
    name = request.form.get("name", "«entities»")  ⟦source⟧
    archive = «sink.»«sink_fn»(name)
    return jsonify(archive=str(archive))""",
            names=_AUTH,
        ),
    ),
    _bug(
        "py-cmd-thumbnail",
        "command-injection",
        "routes",
        Block(
            "make_«entity»_thumbnail",
            """@«bp».route("«rp»/<int:«entity»_id>/thumbnail", methods=["POST"])
@login_required
def make_«entity»_thumbnail(«entity»_id: int):
    image = request.form.get("image", "")  ⟦start⟧
    status = os.system("convert " + image + " -resize 256x256 /tmp/«entity»-%d.png" % «entity»_id)  ⟦sink⟧
    return jsonify(ok=status == 0)""",
            imports=(*_J, "import os"),
            names=_AUTH,
        ),
        "The thumbnail handler concatenates the `image` form field into an `os.system` command "
        "(command injection).",
    ),
    # --- path traversal ---------------------------------------------------------------------
    _bug(
        "py-path-attachment",
        "path-traversal",
        "storage",
        Block(
            "open_attachment",
            """def open_attachment(name: str) -> bytes:
    path = os.path.join(UPLOAD_DIR, name)  ⟦start⟧
    with open(path, "rb") as fh:  ⟦sink⟧
        return fh.read()""",
            imports=("import os",),
            names=(("config", "UPLOAD_DIR"),),
        ),
        "`open_attachment` joins `name` onto the upload directory without normalising it, so "
        "`../` sequences read any file (path traversal).",
        source=_src(
            "«entity»_attachment",
            """@«bp».route("«rp»/attachments", methods=["GET"])
@login_required
def «entity»_attachment():
    name = request.args.get("file", "")  ⟦source⟧
    data = «sink.»«sink_fn»(name)
    return data, 200, {"Content-Type": "application/octet-stream"}""",
            names=_AUTH,
        ),
    ),
    _bug(
        "py-path-download",
        "path-traversal",
        "routes",
        Block(
            "download_«entity»_file",
            """@«bp».route("«rp»/files/<path:filename>", methods=["GET"])
def download_«entity»_file(filename: str):
    return send_file(os.path.join(UPLOAD_DIR, "«entities»", filename))  ⟦sink⟧""",
            imports=("import os", "from flask import send_file"),
            names=(("config", "UPLOAD_DIR"),),
        ),
        "The download handler passes the URL path straight to `send_file` via `os.path.join`; "
        "`..` segments escape the upload directory (path traversal).",
    ),
    # --- unsafe deserialization ---------------------------------------------------------------
    _bug(
        "py-deser-pickle",
        "unsafe-deserialization",
        "cache",
        Block(
            "load_preferences",
            '''def load_preferences(blob: str) -> dict[str, Any]:
    """Preferences travel in a cookie as a base64-encoded pickle."""
    return pickle.loads(base64.b64decode(blob))  ⟦sink⟧''',
            imports=("import base64", "import pickle", "from typing import Any"),
        ),
        "`load_preferences` unpickles data that arrives in a client cookie; a crafted pickle runs "
        "code on the server (unsafe deserialization).",
        source=_src(
            "«entity»_preferences",
            """@«bp».route("«rp»/preferences", methods=["GET"])
def «entity»_preferences():
    blob = request.cookies.get("prefs", "")  ⟦source⟧
    return jsonify(«sink.»«sink_fn»(blob) if blob else {})""",
        ),
    ),
    _bug(
        "py-deser-yaml",
        "unsafe-deserialization",
        "importer",
        Block(
            "load_manifest",
            '''def load_manifest(text: str) -> dict[str, Any]:
    """Parse an uploaded YAML manifest."""
    data = yaml.load(text, Loader=yaml.Loader)  ⟦sink⟧
    return dict(data or {})''',
            imports=("import yaml", "from typing import Any"),
        ),
        "`load_manifest` parses uploaded YAML with the full `yaml.Loader`, which builds arbitrary "
        "Python objects (unsafe deserialization); use `yaml.safe_load`.",
        source=_src(
            "import_«entities»_manifest",
            """@«bp».route("«rp»/import", methods=["POST"])
@login_required
def import_«entities»_manifest():
    text = request.get_data(as_text=True)  ⟦source⟧
    manifest = «sink.»«sink_fn»(text)
    return jsonify(keys=sorted(manifest))""",
            names=_AUTH,
        ),
    ),
    _bug(
        "py-deser-route",
        "unsafe-deserialization",
        "routes",
        Block(
            "restore_«entities»",
            """@«bp».route("«rp»/restore", methods=["POST"])
@require_role("admin")
def restore_«entities»():
    snapshot = pickle.loads(request.get_data())  ⟦sink⟧
    return jsonify(restored=len(snapshot))""",
            imports=(*_J, "import pickle"),
            names=_AUTH,
        ),
        "The restore handler unpickles the request body (unsafe deserialization); an admin token "
        "leak becomes remote code execution.",
    ),
    # --- XSS ----------------------------------------------------------------------------------
    _bug(
        "py-xss-route",
        "xss",
        "routes",
        Block(
            "preview_«entity»",
            """@«bp».route("«rp»/preview", methods=["GET"])
def preview_«entity»():
    title = request.args.get("title", "")  ⟦start⟧
    return f"<html><body><h1>Preview: {title}</h1></body></html>"  ⟦sink⟧""",
            imports=_J,
        ),
        "The preview handler writes the `title` query parameter into HTML without escaping "
        "(reflected XSS).",
    ),
    _bug(
        "py-xss-banner",
        "xss",
        "html",
        Block(
            "render_banner",
            """def render_banner(message: str, level: str = "info") -> str:
    return f'<div class="banner banner-{level}">{message}</div>'  ⟦sink⟧""",
        ),
        "`render_banner` puts `message` into HTML unescaped (XSS).",
        source=_src(
            "«entity»_banner",
            """@«bp».route("«rp»/banner", methods=["GET"])
def «entity»_banner():
    message = request.args.get("message", "")  ⟦source⟧
    return «sink.»«sink_fn»(message)""",
        ),
    ),
    # --- SSRF -----------------------------------------------------------------------------------
    _bug(
        "py-ssrf-preview",
        "ssrf",
        "webhooks",
        Block(
            "fetch_preview",
            '''def fetch_preview(url: str) -> str:
    """The first kilobyte of a page, for link previews."""
    response = requests.get(url, timeout=5)  ⟦sink⟧
    return response.text[:1024]''',
            imports=("import requests",),
        ),
        "`fetch_preview` requests any URL it is given; internal hosts and cloud metadata "
        "endpoints are reachable (SSRF).",
        source=_src(
            "«entity»_link_preview",
            """@«bp».route("«rp»/link-preview", methods=["POST"])
@login_required
def «entity»_link_preview():
    url = (request.get_json(silent=True) or {}).get("url", "")  ⟦source⟧
    return jsonify(preview=«sink.»«sink_fn»(url))""",
            names=_AUTH,
        ),
    ),
    _bug(
        "py-ssrf-route",
        "ssrf",
        "routes",
        Block(
            "test_«entity»_callback",
            """@«bp».route("«rp»/callback-test", methods=["POST"])
@login_required
def test_«entity»_callback():
    target = request.form.get("callback_url", "")  ⟦start⟧
    with urllib.request.urlopen(target, timeout=5) as response:  ⟦sink⟧
        return jsonify(status=response.status)""",
            imports=(*_J, "import urllib.request"),
            names=_AUTH,
        ),
        "The callback test opens whatever URL the client sends, from the server (SSRF).",
    ),
    # --- weak password hashing ----------------------------------------------------------------
    _bug(
        "py-hash-md5",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """def hash_password(password: str) -> str:
    return hashlib.md5(password.encode()).hexdigest()  ⟦sink⟧


def verify_password(password: str, stored: str) -> bool:
    return hmac.compare_digest(hash_password(password), stored)""",
            imports=("import hashlib", "import hmac"),
        ),
        "Passwords are hashed with unsalted MD5, which is fast to brute-force (weak password hashing).",
        replaces=True,
    ),
    _bug(
        "py-hash-sha1",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """PASSWORD_SALT = "«pkg_file»"


def hash_password(password: str) -> str:
    return hashlib.sha1((PASSWORD_SALT + password).encode()).hexdigest()  ⟦sink⟧


def verify_password(password: str, stored: str) -> bool:
    return hmac.compare_digest(hash_password(password), stored)""",
            imports=("import hashlib", "import hmac"),
        ),
        "Passwords are hashed with one round of SHA-1 and a fixed, shared salt (weak password hashing).",
        replaces=True,
    ),
    # --- hard-coded secrets ---------------------------------------------------------------------
    _bug(
        "py-secret-key",
        "hardcoded-secret",
        "config",
        Block("SECRET_KEY", 'SECRET_KEY = "«secret_hex»"  ⟦sink⟧'),
        "The session signing key is a literal in the source instead of coming from the environment "
        "(hard-coded secret).",
        replaces=True,
    ),
    _bug(
        "py-secret-api-key",
        "hardcoded-secret",
        "config",
        Block("PAYMENT_API_KEY", 'PAYMENT_API_KEY = "live_«secret_alnum»"  ⟦sink⟧'),
        "A live payment API key is committed in the configuration (hard-coded secret).",
    ),
    _bug(
        "py-secret-bearer",
        "hardcoded-secret",
        "webhooks",
        Block(
            "notify_partner",
            """def notify_partner(event: str) -> int:
    response = requests.post(
        "https://hooks.partner.example.com/v1/events",
        json={"event": event},
        headers={"Authorization": "Bearer «secret_alnum»"},  ⟦sink⟧
        timeout=5,
    )
    return response.status_code""",
            imports=("import requests",),
        ),
        "`notify_partner` sends a bearer token that is written into the source (hard-coded secret).",
    ),
    # --- missing authorisation --------------------------------------------------------------------
    _bug(
        "py-authz-delete",
        "missing-authorization",
        "routes",
        Block(
            "delete",
            """@«bp».route("«rp»/<int:«entity»_id>", methods=["DELETE"])  ⟦sink⟧
def delete_«entity»(«entity»_id: int):  ⟦end⟧
    «svc.»«s_delete»(«entity»_id)
    return "", 204""",
            uses=("svc",),
        ),
        "The DELETE handler for «entities» has neither `@login_required` nor `@require_role`, unlike "
        "the other mutating routes: anyone can delete records (missing authorisation).",
        replaces=True,
    ),
    _bug(
        "py-authz-adjust",
        "missing-authorization",
        "routes",
        Block(
            "adjust",
            """@«bp».route("«rp»/<int:«entity»_id>/«num_url»", methods=["POST"])  ⟦sink⟧
def adjust_«entity»_«num»(«entity»_id: int):  ⟦end⟧
    payload = request.get_json(silent=True) or {}
    delta = «num_type»(payload.get("delta", 0))
    return jsonify(«svc.»«s_adjust»(«entity»_id, delta))""",
            imports=_J,
            uses=("svc",),
        ),
        "The handler that changes a «entity»'s «num» is not protected by `@login_required` "
        "(missing authorisation).",
        replaces=True,
    ),
    # --- insecure randomness ----------------------------------------------------------------------
    _bug(
        "py-rand-token",
        "insecure-randomness",
        "auth",
        Block(
            "generate_token",
            '''def generate_token(nbytes: int = 32) -> str:
    """An opaque session or reset token."""
    alphabet = string.ascii_letters + string.digits
    return "".join(random.choice(alphabet) for _ in range(nbytes))  ⟦sink⟧''',
            imports=("import random", "import string"),
        ),
        "Session and reset tokens come from `random`, a predictable PRNG (insecure randomness).",
        replaces=True,
    ),
    _bug(
        "py-rand-code",
        "insecure-randomness",
        "svc",
        Block(
            "issue_«entity»_access_code",
            '''def issue_«entity»_access_code(«selfp»«entity»_id: int) -> str:
    """A one-time code that grants access to a «entity» for 15 minutes."""
    code = str(random.randint(100000, 999999))  ⟦sink⟧
    «cache.»cache_set(f"access:«entity»:{«entity»_id}", code, ttl=900)
    return code''',
            imports=("import random",),
            uses=("cache",),
        ),
        "One-time access codes are drawn from `random.randint`, which is predictable (insecure randomness).",
        needs=("cache",),
    ),
    # --- race conditions --------------------------------------------------------------------------
    _bug(
        "py-race-reserve",
        "race-condition",
        "svc",
        Block(
            "reserve_«entity»_«num»",
            """def reserve_«entity»_«num»(«selfp»«entity»_id: int, amount: «num_type») -> dict[str, Any]:
    item = «repo.»«r_get»(«entity»_id)  ⟦start⟧
    if item is None:
        raise NotFoundError(«nf_msg»)
    if item.«num» < amount:
        raise ValidationError("not enough «num»")
    «repo.»«r_set»(«entity»_id, item.«num» - amount)  ⟦sink⟧
    return «me.»«s_get»(«entity»_id)""",
            imports=("from typing import Any",),
            uses=("repo",),
            names=(("errors", "NotFoundError"), ("errors", "ValidationError")),
        ),
        "`reserve_«entity»_«num»` reads «num», checks it and writes back the difference in separate "
        "statements; concurrent requests both pass the check and oversell (race condition, check-then-act).",
    ),
    _bug(
        "py-race-stats",
        "race-condition",
        "jobs",
        Block(
            "record",
            """def record(outcome: str) -> None:
    # Called from every worker thread.
    count = _stats.get(outcome, 0)  ⟦start⟧
    _stats[outcome] = count + 1  ⟦sink⟧""",
        ),
        "`record` is called from the pool's threads and updates the shared `_stats` dict with an "
        "unlocked read-modify-write, losing counts (race condition).",
        replaces=True,
    ),
    # --- resource leaks ---------------------------------------------------------------------------
    _bug(
        "py-leak-open",
        "resource-leak",
        "storage",
        Block(
            "read_lines",
            """def read_lines(filename: str) -> list[str]:
    handle = open(upload_path(filename), encoding="utf-8")  ⟦sink⟧
    return handle.read().splitlines()""",
        ),
        "`read_lines` opens a file and never closes it; each call leaks a file descriptor (resource leak).",
    ),
    _bug(
        "py-leak-conn",
        "resource-leak",
        "repo",
        Block(
            "«entities»_by_ids",
            """def «entities»_by_ids(«selfp»ids: list[int]) -> list[«Entity»]:
    conn = «conn»  ⟦sink⟧
    rows = []
    for «entity»_id in ids:
        rows.extend(conn.execute("SELECT * FROM «table» WHERE id = ?", («entity»_id,)).fetchall())
    return [«Entity».from_row(row) for row in rows]  ⟦end⟧""",
            names=_REPO_NAMES,
        ),
        "`«entities»_by_ids` opens a database connection and never closes it (resource leak).",
    ),
    # --- off-by-one / calculation -----------------------------------------------------------------
    _bug(
        "py-obo-offset",
        "off-by-one",
        "pagination",
        Block(
            "page_bounds",
            '''def page_bounds(page: int, per_page: int) -> tuple[int, int]:
    """``(limit, offset)`` of a 1-based page."""
    page = max(page, 1)
    per_page = min(max(per_page, 1), MAX_PAGE_SIZE)
    return per_page, page * per_page  ⟦sink⟧''',
        ),
        "Pages are 1-based but the offset is `page * per_page`, so page 1 skips the first page of "
        "results (off-by-one).",
        replaces=True,
    ),
    _bug(
        "py-obo-count",
        "off-by-one",
        "pagination",
        Block(
            "page_count",
            """def page_count(total: int, per_page: int) -> int:
    if per_page <= 0:
        return 0
    return total // per_page  ⟦sink⟧""",
        ),
        "`page_count` floors the division, so a last, partial page is never reported (off-by-one).",
        replaces=True,
    ),
    _bug(
        "py-obo-top",
        "off-by-one",
        "svc",
        Block(
            "top_«entities»",
            """def top_«entities»(«selfp»limit: int = 10) -> list[dict[str, Any]]:
    items = sorted(«repo.»«r_list»(limit=500), key=lambda item: item.«num», reverse=True)
    return [item.to_dict() for item in items[: limit - 1]]  ⟦sink⟧""",
            imports=("from typing import Any",),
            uses=("repo",),
        ),
        "`top_«entities»` slices `[: limit - 1]` and returns one item fewer than asked (off-by-one).",
    ),
)
