"""Clean Python (Flask + sqlite3) code the generated projects are made of, as block templates.

Everything here is meant to be correct and safe: planted bugs and decoys
(``bugs_python``) replace or join these blocks. Placeholders are filled from
the project, file, section and entity contexts built by ``project``.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block

B = Block

# --- models -------------------------------------------------------------------------------------

MODEL = B(
    "model",
    '''@dataclass
class «Entity»:
    """One row of the «table» table."""

    id: int
    «field_decls»
    created_at: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "«Entity»":
        known = cls.__dataclass_fields__
        return cls(**{key: row[key] for key in row.keys() if key in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)''',
    imports=(
        "from dataclasses import asdict, dataclass",
        "from typing import Any",
        "from collections.abc import Mapping",
    ),
)

# --- repositories -------------------------------------------------------------------------------

_REPO_NAMES = (("db", "get_connection"), ("model", "«Entity»"))
_REPO_IMPORTS = ("from contextlib import closing",)

REPO_INIT = B(
    "__init__",
    """def __init__(self, db_path: str | None = None) -> None:
    self.db_path = db_path""",
)

REPO = (
    B(
        "r_list",
        """def «r_list»(«selfp»limit: int = 50, offset: int = 0) -> list[«Entity»]:
    with closing(«conn») as conn:
        rows = conn.execute(
            "SELECT * FROM «table» ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
        ).fetchall()
    return [«Entity».from_row(row) for row in rows]""",
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
    B(
        "r_get",
        """def «r_get»(«selfp»«entity»_id: int) -> «Entity» | None:
    with closing(«conn») as conn:
        row = conn.execute("SELECT * FROM «table» WHERE id = ?", («entity»_id,)).fetchone()
    return «Entity».from_row(row) if row else None""",
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
    B(
        "r_create",
        """def «r_create»(«selfp»«label»: str, «num»: «num_type») -> int:
    with closing(«conn») as conn, conn:
        cursor = conn.execute(
            "INSERT INTO «table» («label», «num») VALUES (?, ?)", («label», «num»)
        )
        return int(cursor.lastrowid or 0)""",
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
    B(
        "r_update",
        '''def «r_update»(«selfp»«entity»_id: int, delta: «num_type») -> bool:
    """Add ``delta`` in one statement so concurrent updates cannot interleave."""
    with closing(«conn») as conn, conn:
        cursor = conn.execute(
            "UPDATE «table» SET «num» = «num» + ? WHERE id = ? AND «num» + ? >= 0",
            (delta, «entity»_id, delta),
        )
        return cursor.rowcount > 0''',
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
    B(
        "r_set",
        """def «r_set»(«selfp»«entity»_id: int, value: «num_type») -> None:
    with closing(«conn») as conn, conn:
        conn.execute("UPDATE «table» SET «num» = ? WHERE id = ?", (value, «entity»_id))""",
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
    B(
        "r_delete",
        """def «r_delete»(«selfp»«entity»_id: int) -> bool:
    with closing(«conn») as conn, conn:
        cursor = conn.execute("DELETE FROM «table» WHERE id = ?", («entity»_id,))
        return cursor.rowcount > 0""",
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
    B(
        "r_count",
        """def «r_count»(«self0») -> int:
    with closing(«conn») as conn:
        (total,) = conn.execute("SELECT COUNT(*) FROM «table»").fetchone()
    return int(total)""",
        imports=_REPO_IMPORTS,
        names=_REPO_NAMES,
    ),
)

# --- services -----------------------------------------------------------------------------------

_SVC_NAMES = (("errors", "NotFoundError"), ("errors", "ValidationError"))

SVC = (
    B(
        "s_list",
        """def «s_list»(«selfp»page: int = 1, per_page: int = «page_size») -> dict[str, Any]:
    limit, offset = «pagination.»page_bounds(page, per_page)
    items = «repo.»«r_list»(limit=limit, offset=offset)
    total = «repo.»«r_count»()
    return {
        "items": [item.to_dict() for item in items],
        "page": page,
        "pages": «pagination.»page_count(total, limit),
    }""",
        imports=("from typing import Any",),
        uses=("repo", "pagination"),
    ),
    B(
        "s_get",
        """def «s_get»(«selfp»«entity»_id: int) -> dict[str, Any]:
    item = «repo.»«r_get»(«entity»_id)
    if item is None:
        raise NotFoundError(«nf_msg»)
    return item.to_dict()""",
        imports=("from typing import Any",),
        uses=("repo",),
        names=_SVC_NAMES,
    ),
    B(
        "s_create",
        """def «s_create»(«selfp»payload: Mapping[str, Any]) -> dict[str, Any]:
    «label» = str(payload.get("«label»", "")).strip()
    if not «label»:
        raise ValidationError("«label» is required")
    «num» = «num_type»(payload.get("«num»", 0))
    if «num» < 0:
        raise ValidationError("«num» must not be negative")
    new_id = «repo.»«r_create»(«label», «num»)
    return «me.»«s_get»(new_id)""",
        imports=("from typing import Any", "from collections.abc import Mapping"),
        uses=("repo",),
        names=_SVC_NAMES,
    ),
    B(
        "s_adjust",
        """def «s_adjust»(«selfp»«entity»_id: int, delta: «num_type») -> dict[str, Any]:
    if not «repo.»«r_update»(«entity»_id, delta):
        raise ValidationError(«adjust_msg»)
    return «me.»«s_get»(«entity»_id)""",
        imports=("from typing import Any",),
        uses=("repo",),
        names=_SVC_NAMES,
    ),
    B(
        "s_delete",
        """def «s_delete»(«selfp»«entity»_id: int) -> None:
    if not «repo.»«r_delete»(«entity»_id):
        raise NotFoundError(«nf_msg»)""",
        uses=("repo",),
        names=_SVC_NAMES,
    ),
)

# --- schemas (validation) -----------------------------------------------------------------------

SCHEMA = B(
    "schema",
    '''def validate_«entity»(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Check a «entity» payload and return the cleaned fields."""
    errors: dict[str, str] = {}
    «label» = str(payload.get("«label»", "")).strip()
    if not «label»:
        errors["«label»"] = "required"
    elif len(«label») > 200:
        errors["«label»"] = "too long"
    try:
        «num» = «num_type»(payload.get("«num»", 0))
    except (TypeError, ValueError):
        errors["«num»"] = "must be a number"
        «num» = «num_type»(0)
    if errors:
        raise ValidationError(«schema_msg»)
    return {"«label»": «label», "«num»": «num»}''',
    imports=("from typing import Any", "from collections.abc import Mapping"),
    names=(("errors", "ValidationError"),),
)

# --- routes -------------------------------------------------------------------------------------

_ROUTE_IMPORTS = ("from flask import jsonify, request",)
_AUTH_NAMES = (("auth", "login_required"), ("auth", "require_role"))

BLUEPRINT = B(
    "blueprint",
    '«bp» = Blueprint("«bp_name»", __name__, url_prefix="«bp_prefix»")',
    imports=("from flask import Blueprint",),
)

ROUTES = (
    B(
        "list",
        """@«bp».route("«rp_list»", methods=["GET"])
def list_«entities»():
    page = request.args.get("page", 1, type=int)
    return jsonify(«svc.»«s_list»(page=page))""",
        imports=_ROUTE_IMPORTS,
        uses=("svc",),
    ),
    B(
        "get",
        """@«bp».route("«rp»/<int:«entity»_id>", methods=["GET"])
def get_«entity»(«entity»_id: int):
    return jsonify(«svc.»«s_get»(«entity»_id))""",
        imports=_ROUTE_IMPORTS,
        uses=("svc",),
    ),
    B(
        "create",
        """@«bp».route("«rp_list»", methods=["POST"])
@login_required
def create_«entity»():
    payload = request.get_json(silent=True) or {}
    return jsonify(«svc.»«s_create»(payload)), 201""",
        imports=_ROUTE_IMPORTS,
        uses=("svc",),
        names=_AUTH_NAMES,
    ),
    B(
        "adjust",
        """@«bp».route("«rp»/<int:«entity»_id>/«num_url»", methods=["POST"])
@login_required
def adjust_«entity»_«num»(«entity»_id: int):
    payload = request.get_json(silent=True) or {}
    delta = «num_type»(payload.get("delta", 0))
    return jsonify(«svc.»«s_adjust»(«entity»_id, delta))""",
        imports=_ROUTE_IMPORTS,
        uses=("svc",),
        names=_AUTH_NAMES,
    ),
    B(
        "delete",
        """@«bp».route("«rp»/<int:«entity»_id>", methods=["DELETE"])
@require_role("admin")
def delete_«entity»(«entity»_id: int):
    «svc.»«s_delete»(«entity»_id)
    return "", 204""",
        imports=_ROUTE_IMPORTS,
        uses=("svc",),
        names=_AUTH_NAMES,
    ),
)

# --- tests --------------------------------------------------------------------------------------

TESTS = (
    B(
        "t_list",
        """def test_list_«entities»_returns_a_page(client) -> None:
    response = client.get("«api_prefix»/«url»")
    assert response.status_code == 200
    assert response.get_json()["page"] == 1""",
    ),
    B(
        "t_missing",
        """def test_unknown_«entity»_is_404(client) -> None:
    response = client.get("«api_prefix»/«url»/987654")
    assert response.status_code == 404""",
    ),
    B(
        "t_auth",
        """def test_create_«entity»_requires_login(client) -> None:
    response = client.post("«api_prefix»/«url»", json={"«label»": "sample"})
    assert response.status_code == 401""",
    ),
)

CLIENT_FIXTURE = B(
    "client",
    """@pytest.fixture
def client(tmp_path):
    database = str(tmp_path / "test.sqlite3")
    init_db(database)
    app = create_app({"TESTING": True, "DATABASE": database})
    return app.test_client()""",
    imports=("import pytest",),
    names=(("app", "create_app"), ("db", "init_db")),
)

# --- project-wide modules -----------------------------------------------------------------------

ERRORS = (
    B(
        "AppError",
        '''class AppError(Exception):
    """Base class of the errors the API turns into JSON responses."""

    status_code = 500''',
    ),
    B(
        "NotFoundError",
        """class NotFoundError(AppError):
    status_code = 404""",
    ),
    B(
        "ValidationError",
        """class ValidationError(AppError):
    status_code = 400""",
    ),
)

CONFIG = (
    B("DEBUG", 'DEBUG = os.environ.get("«env_prefix»_DEBUG", "0") == "1"', imports=("import os",)),
    B(
        "DATABASE",
        'DATABASE = os.environ.get("DATABASE_PATH", "«pkg_file».sqlite3")',
        imports=("import os",),
    ),
    B("SECRET_KEY", 'SECRET_KEY = os.environ["SECRET_KEY"]', imports=("import os",)),
    B(
        "UPLOAD_DIR",
        'UPLOAD_DIR = os.environ.get("UPLOAD_DIR", "/var/lib/«pkg_file»/uploads")',
        imports=("import os",),
    ),
    B(
        "EXPORT_DIR",
        'EXPORT_DIR = os.environ.get("EXPORT_DIR", "/var/lib/«pkg_file»/exports")',
        imports=("import os",),
    ),
    B(
        "STATIC_DIR",
        'STATIC_DIR = os.environ.get("STATIC_DIR", "/srv/«pkg_file»/static")',
        imports=("import os",),
    ),
    B("WEBHOOK_URL", 'WEBHOOK_URL = os.environ.get("WEBHOOK_URL", "")', imports=("import os",)),
    B(
        "WEBHOOK_TIMEOUT",
        'WEBHOOK_TIMEOUT = float(os.environ.get("WEBHOOK_TIMEOUT", "5"))',
        imports=("import os",),
    ),
    B("SESSION_MAX_AGE", "SESSION_MAX_AGE = 8 * 3600"),
    B("PAGE_SIZE", "PAGE_SIZE = «page_size»"),
)

DB = (
    B(
        "SCHEMA",
        '''SCHEMA = """
«schema_sql»
"""''',
    ),
    B(
        "get_connection",
        '''def get_connection(path: str | None = None) -> sqlite3.Connection:
    """A new connection; callers close it (``with closing(get_connection()) as conn``)."""
    conn = sqlite3.connect(path or DATABASE)
    conn.row_factory = sqlite3.Row
    return conn''',
        imports=("import sqlite3",),
        names=(("config", "DATABASE"),),
    ),
    B(
        "init_db",
        """def init_db(path: str | None = None) -> None:
    with closing(get_connection(path)) as conn, conn:
        conn.executescript(SCHEMA)""",
        imports=("from contextlib import closing",),
    ),
)

AUTH = (
    B(
        "password_hashing",
        """def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 600_000)
    return salt.hex() + "$" + digest.hex()


def verify_password(password: str, stored: str) -> bool:
    salt_hex, digest_hex = stored.split("$", 1)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt_hex), 600_000)
    return hmac.compare_digest(digest.hex(), digest_hex)""",
        imports=("import hashlib", "import hmac", "import os"),
    ),
    B(
        "generate_token",
        '''def generate_token(nbytes: int = 32) -> str:
    """An opaque session or reset token."""
    return secrets.token_urlsafe(nbytes)''',
        imports=("import secrets",),
    ),
    B(
        "load_current_user",
        '''def load_current_user() -> None:
    """Put the user of a valid bearer token (see ``issue_session``) in ``g.user``."""
    g.user = None
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        serializer = URLSafeTimedSerializer(current_app.config["SECRET_KEY"])
        try:
            g.user = serializer.loads(header[7:], max_age=SESSION_MAX_AGE)
        except BadSignature:
            g.user = None


def issue_session(user: Mapping[str, Any]) -> str:
    serializer = URLSafeTimedSerializer(current_app.config["SECRET_KEY"])
    return serializer.dumps(dict(user))''',
        imports=(
            "from typing import Any",
            "from collections.abc import Mapping",
            "from flask import current_app, g, request",
            "from itsdangerous import BadSignature, URLSafeTimedSerializer",
        ),
        names=(("config", "SESSION_MAX_AGE"),),
    ),
    B(
        "login_required",
        """def login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(g, "user", None) is None:
            abort(401)
        return view(*args, **kwargs)

    return wrapper""",
        imports=(
            "from functools import wraps",
            "from typing import Any",
            "from collections.abc import Callable",
            "from flask import abort, g",
        ),
    ),
    B(
        "require_role",
        """def require_role(role: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            user = getattr(g, "user", None)
            if user is None:
                abort(401)
            if role not in user.get("roles", ()):
                abort(403)
            return view(*args, **kwargs)

        return wrapper

    return decorator""",
        imports=(
            "from functools import wraps",
            "from typing import Any",
            "from collections.abc import Callable",
            "from flask import abort, g",
        ),
    ),
)

APP = B(
    "create_app",
    '''def create_app(overrides: Mapping[str, Any] | None = None) -> Flask:
    """Application factory: configuration, blueprints and JSON error handlers."""
    app = Flask(__name__)
    app.config.from_object("«config_module»")
    if overrides:
        app.config.update(overrides)
    app.before_request(load_current_user)
    «register_blueprints»

    @app.errorhandler(AppError)
    def handle_app_error(exc: AppError):
        return jsonify(error=str(exc)), exc.status_code

    return app''',
    imports=(
        "from typing import Any",
        "from collections.abc import Mapping",
        "from flask import Flask, jsonify",
    ),
    names=(("errors", "AppError"), ("auth", "load_current_user")),
)

WSGI = B(
    "wsgi",
    """app = create_app()

if __name__ == "__main__":
    app.run(host="127.0.0.1", port=«port»)""",
    names=(("app", "create_app"),),
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
