"""Python decoys: safe code that looks like a bug (``vulnerable: false`` in ground truth).

A finding on a decoy is a false positive, so each one resembles a planted bug
closely (an f-string near SQL, ``shell=True``, ``random``, a route without a
decorator) while being correct for a stated reason.
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet

_J = ("from flask import jsonify, request",)
_REPO_IMPORTS = ("from contextlib import closing",)
_REPO_NAMES = (("db", "get_connection"), ("model", "«Entity»"))


def _decoy(
    name: str, kind: str, host: str, block: Block, description: str, **kw: object
) -> Snippet:
    return Snippet(name, kind, "python", host, block, description, vulnerable=False, **kw)  # type: ignore[arg-type]


SNIPPETS: tuple[Snippet, ...] = (
    _decoy(
        "py-decoy-sqli-order",
        "sql-injection",
        "repo",
        Block(
            "«r_list»_ordered",
            """def «r_list»_ordered(«selfp»column: str = "id") -> list[«Entity»]:
    if column not in ("id", "«label»", "«num»", "created_at"):  ⟦start⟧
        raise ValueError(f"cannot sort by {column!r}")
    with closing(«conn») as conn:
        rows = conn.execute(f"SELECT * FROM «table» ORDER BY {column}").fetchall()  ⟦sink⟧
    return [«Entity».from_row(row) for row in rows]""",
            imports=_REPO_IMPORTS,
            names=_REPO_NAMES,
        ),
        "Safe: the f-string only inserts a column name that was checked against a fixed allow-list.",
    ),
    _decoy(
        "py-decoy-sqli-like",
        "sql-injection",
        "repo",
        Block(
            "find_«entities»_like",
            """def find_«entities»_like(«selfp»term: str) -> list[«Entity»]:
    pattern = f"%{term}%"  ⟦start⟧
    with closing(«conn») as conn:
        rows = conn.execute(
            "SELECT * FROM «table» WHERE «label» LIKE ? ORDER BY id", (pattern,)  ⟦sink⟧
        ).fetchall()
    return [«Entity».from_row(row) for row in rows]""",
            imports=_REPO_IMPORTS,
            names=_REPO_NAMES,
        ),
        "Safe: the f-string builds a LIKE pattern that is passed as a bound parameter.",
    ),
    _decoy(
        "py-decoy-cmd-list",
        "command-injection",
        "exporter",
        Block(
            "archive_exports",
            """def archive_exports(name: str) -> Path:
    archive = Path(EXPORT_DIR) / f"{name}.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", EXPORT_DIR, "--", name], check=True)  ⟦sink⟧
    return archive""",
            imports=("import subprocess", "from pathlib import Path"),
            names=(("config", "EXPORT_DIR"),),
        ),
        "Safe: the command is an argument list without a shell, and `--` ends option parsing.",
    ),
    _decoy(
        "py-decoy-cmd-quote",
        "command-injection",
        "exporter",
        Block(
            "disk_usage",
            """def disk_usage(folder: str) -> str:
    command = f"du -sh {shlex.quote(folder)}"  ⟦start⟧
    result = subprocess.run(command, shell=True, check=True, capture_output=True, text=True)  ⟦sink⟧
    return result.stdout.split()[0]""",
            imports=("import shlex", "import subprocess"),
        ),
        "Safe: `shell=True`, but the only interpolated value is escaped with `shlex.quote`.",
    ),
    _decoy(
        "py-decoy-path-contained",
        "path-traversal",
        "storage",
        Block(
            "attachment_bytes",
            """def attachment_bytes(name: str) -> bytes:
    base = os.path.realpath(UPLOAD_DIR)
    path = os.path.realpath(os.path.join(base, name))  ⟦start⟧
    if os.path.commonpath([base, path]) != base:
        raise PermissionError(«bad_name_msg»)
    with open(path, "rb") as fh:  ⟦sink⟧
        return fh.read()""",
            imports=("import os",),
            names=(("config", "UPLOAD_DIR"),),
        ),
        "Safe: the joined path is resolved and must stay inside the upload directory.",
    ),
    _decoy(
        "py-decoy-yaml-safe",
        "unsafe-deserialization",
        "importer",
        Block(
            "load_settings_file",
            """def load_settings_file(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)  ⟦sink⟧
    if not isinstance(data, dict):
        raise ValueError("settings must be a mapping")
    return data""",
            imports=("import yaml", "from typing import Any"),
        ),
        "Safe: `yaml.safe_load` only builds plain data types.",
    ),
    _decoy(
        "py-decoy-xss-escaped",
        "xss",
        "routes",
        Block(
            "«entity»_title_card",
            """@«bp».route("«rp»/card", methods=["GET"])
def «entity»_title_card():
    title = request.args.get("title", "")
    return f"<div class=\\"card\\"><h2>{escape(title)}</h2></div>"  ⟦sink⟧""",
            imports=(*_J, "from markupsafe import escape"),
        ),
        "Safe: the query parameter is HTML-escaped before it is written into the markup.",
    ),
    _decoy(
        "py-decoy-ssrf-allowlist",
        "ssrf",
        "webhooks",
        Block(
            "fetch_partner_page",
            """PARTNER_HOSTS = frozenset({"partners.example.com", "cdn.example.com"})


def fetch_partner_page(url: str) -> str:
    parsed = urlparse(url)  ⟦start⟧
    if parsed.scheme != "https" or parsed.hostname not in PARTNER_HOSTS:
        raise ValueError("only partner pages can be previewed")
    response = requests.get(url, timeout=5, allow_redirects=False)  ⟦sink⟧
    return response.text[:1024]""",
            imports=("import requests", "from urllib.parse import urlparse"),
        ),
        "Safe: only HTTPS URLs on a fixed host allow-list are fetched, and redirects are not followed.",
    ),
    _decoy(
        "py-decoy-hash-bcrypt",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """def hash_password(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12)).decode()  ⟦sink⟧


def verify_password(password: str, stored: str) -> bool:
    return bcrypt.checkpw(password.encode(), stored.encode())""",
            imports=("import bcrypt",),
        ),
        "Safe: bcrypt with a per-password salt and cost 12.",
        replaces=True,
    ),
    _decoy(
        "py-decoy-hash-argon2",
        "weak-password-hash",
        "auth",
        Block(
            "password_hashing",
            """_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    return _hasher.hash(password)  ⟦sink⟧


def verify_password(password: str, stored: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except VerifyMismatchError:
        return False""",
            imports=(
                "from argon2 import PasswordHasher",
                "from argon2.exceptions import VerifyMismatchError",
            ),
        ),
        "Safe: argon2id with the library's default parameters.",
        replaces=True,
    ),
    _decoy(
        "py-decoy-secret-env",
        "hardcoded-secret",
        "config",
        Block(
            "PAYMENT_API_KEY",
            'PAYMENT_API_KEY = os.environ["PAYMENT_API_KEY"]  ⟦sink⟧',
            imports=("import os",),
        ),
        "Safe: the API key is read from the environment.",
    ),
    _decoy(
        "py-decoy-authz-inline",
        "missing-authorization",
        "routes",
        Block(
            "delete",
            """@«bp».route("«rp»/<int:«entity»_id>", methods=["DELETE"])  ⟦sink⟧
def delete_«entity»(«entity»_id: int):  ⟦end⟧
    user = getattr(g, "user", None)
    if user is None or "admin" not in user.get("roles", ()):
        abort(403)
    «svc.»«s_delete»(«entity»_id)
    return "", 204""",
            imports=("from flask import abort, g",),
            uses=("svc",),
        ),
        "Safe: no decorator, but the handler checks the admin role itself before deleting.",
        replaces=True,
    ),
    _decoy(
        "py-decoy-rand-secrets",
        "insecure-randomness",
        "auth",
        Block(
            "generate_token",
            '''def generate_token(nbytes: int = 32) -> str:
    """An opaque session or reset token."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(nbytes))  ⟦sink⟧''',
            imports=("import secrets", "import string"),
        ),
        "Safe: characters are drawn with `secrets.choice`, a CSPRNG.",
        replaces=True,
    ),
    _decoy(
        "py-decoy-rand-jitter",
        "insecure-randomness",
        "webhooks",
        Block(
            "retry_delay_jitter",
            """def retry_delay_jitter(attempt: int) -> float:
    return retry_delay(attempt) * random.uniform(0.5, 1.5)  ⟦sink⟧""",
            imports=("import random",),
        ),
        "Safe: `random` only spreads out retry timing; nothing secret depends on it.",
    ),
    _decoy(
        "py-decoy-race-atomic",
        "race-condition",
        "svc",
        Block(
            "reserve_«entity»_«num»",
            """def reserve_«entity»_«num»(«selfp»«entity»_id: int, amount: «num_type») -> dict[str, Any]:
    # A single conditional UPDATE: the check and the write cannot interleave.
    if not «repo.»«r_update»(«entity»_id, -amount):  ⟦sink⟧
        raise ValidationError("not enough «num»")
    return «me.»«s_get»(«entity»_id)""",
            imports=("from typing import Any",),
            uses=("repo",),
            names=(("errors", "ValidationError"),),
        ),
        "Safe: the reservation is one conditional UPDATE in the repository.",
    ),
    _decoy(
        "py-decoy-race-locked",
        "race-condition",
        "jobs",
        Block(
            "record",
            """def record(outcome: str) -> None:
    with _stats_lock:
        count = _stats.get(outcome, 0)
        _stats[outcome] = count + 1  ⟦sink⟧""",
        ),
        "Safe: the read-modify-write of the shared dict happens under a lock.",
        replaces=True,
    ),
    _decoy(
        "py-decoy-leak-with",
        "resource-leak",
        "storage",
        Block(
            "read_lines",
            """def read_lines(filename: str) -> list[str]:
    with open(upload_path(filename), encoding="utf-8") as handle:  ⟦sink⟧
        return handle.read().splitlines()""",
        ),
        "Safe: the file is closed by the with-statement.",
    ),
    _decoy(
        "py-decoy-obo-pairs",
        "off-by-one",
        "pagination",
        Block(
            "window_deltas",
            '''def window_deltas(values: Sequence[float]) -> list[float]:
    """Differences between consecutive values."""
    return [values[i + 1] - values[i] for i in range(len(values) - 1)]  ⟦sink⟧''',
            imports=("from collections.abc import Sequence",),
        ),
        "Safe: `len(values) - 1` is right: there is one difference per adjacent pair.",
    ),
    _decoy(
        "py-decoy-obo-ceil",
        "off-by-one",
        "pagination",
        Block(
            "page_count",
            """def page_count(total: int, per_page: int) -> int:
    if per_page <= 0:
        return 0
    return -(-total // per_page)  ⟦sink⟧""",
        ),
        "Safe: `-(-a // b)` is ceiling division, so the partial last page is counted.",
        replaces=True,
    ),
)
