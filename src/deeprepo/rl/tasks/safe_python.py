"""Clean Python that uses risky APIs safely: the everyday uses a grep for sinks also hits.

Real services hash with MD5 for ETags, use ``random`` for jitter, run subprocesses with
argument lists, build SQL with f-strings over constant table names and bound parameters,
parse YAML with the safe loader and fetch fixed URLs. The generator sprinkles these blocks
over every project (``where`` says which sections may hold one), so a risky API on a line
says little about whether the line is a planted bug.
"""

from __future__ import annotations

from dataclasses import dataclass

from deeprepo.rl.tasks.render import Block

B = Block


@dataclass(frozen=True)
class SafeUse:
    """A clean block whose name (``«nm»``) is drawn per placement from ``names``."""

    names: tuple[str, ...]
    where: str  # fn: any code section | const: module level | route | repo | tests
    block: Block


def _u(where: str, choices: tuple[str, ...], code: str, *imports: str, **kw: object) -> SafeUse:
    return SafeUse(choices, where, B("«nm»", code, imports=imports, **kw))  # type: ignore[arg-type]


POOL: tuple[SafeUse, ...] = (
    _u(
        "fn",
        ("etag_for", "payload_etag", "response_etag", "content_fingerprint"),
        '''def «nm»(«selfp»payload: Any) -> str:
    """A weak validator for conditional GETs (not a security boundary)."""
    body = json.dumps(payload, sort_keys=True, default=str).encode("utf-8")
    return hashlib.md5(body).hexdigest()''',
        "import hashlib",
        "import json",
        "from typing import Any",
    ),
    _u(
        "fn",
        ("cache_key", "memo_key", "lookup_key", "bucket_key"),
        """def «nm»(«selfp»*parts: object) -> str:
    raw = "|".join(str(part) for part in parts)
    return "k:" + hashlib.sha1(raw.encode("utf-8")).hexdigest()[:20]""",
        "import hashlib",
    ),
    _u(
        "fn",
        ("shard_for", "partition_of", "bucket_for"),
        """def «nm»(«selfp»key: str, shards: int = 16) -> int:
    digest = hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big") % shards""",
        "import hashlib",
    ),
    _u(
        "fn",
        ("backoff_delay", "jittered_delay", "retry_after", "next_delay"),
        '''def «nm»(«selfp»attempt: int, base: float = 0.25, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter, so retries do not stampede."""
    delay = min(cap, base * 2**attempt)
    return random.uniform(0, delay)''',
        "import random",
    ),
    _u(
        "fn",
        ("should_sample", "sampled", "trace_this_call", "keep_sample"),
        """def «nm»(«selfp»rate: float = 0.05) -> bool:
    if rate >= 1:
        return True
    return random.random() < rate""",
        "import random",
    ),
    _u(
        "fn",
        ("spread_hosts", "shuffled_replicas", "host_order"),
        """def «nm»(«selfp»hosts: Sequence[str]) -> list[str]:
    order = list(hosts)
    random.shuffle(order)
    return order""",
        "import random",
        "from collections.abc import Sequence",
    ),
    _u(
        "fn",
        ("preview_sample", "pick_examples", "sample_rows"),
        """def «nm»(«selfp»rows: Sequence[Any], k: int = 5) -> list[Any]:
    if len(rows) <= k:
        return list(rows)
    return random.sample(list(rows), k)""",
        "import random",
        "from typing import Any",
        "from collections.abc import Sequence",
    ),
    _u(
        "fn",
        ("mime_type_of", "sniff_type", "detect_mime"),
        """def «nm»(«selfp»path: str) -> str:
    result = subprocess.run(
        ["file", "--brief", "--mime-type", "--", path], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()""",
        "import subprocess",
    ),
    _u(
        "fn",
        ("build_revision", "current_revision", "git_revision"),
        """def «nm»(«selfp») -> str:
    result = subprocess.run(
        "git rev-parse --short HEAD", shell=True, capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or "unknown\"""",
        "import subprocess",
    ),
    _u(
        "fn",
        ("disk_free", "free_space", "volume_usage"),
        """def «nm»(«selfp»mount: str = "/") -> str:
    output = subprocess.check_output(["df", "-h", "--output=avail", mount], text=True)
    return output.splitlines()[-1].strip()""",
        "import subprocess",
    ),
    _u(
        "fn",
        ("load_yaml_file", "read_settings_yaml", "load_fixture"),
        """def «nm»(«selfp»path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=yaml.SafeLoader)
    return dict(data or {})""",
        "import yaml",
        "from typing import Any",
    ),
    _u(
        "fn",
        ("parse_yaml", "yaml_mapping", "settings_from_text"),
        """def «nm»(«selfp»text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("expected a mapping")
    return data""",
        "import yaml",
        "from typing import Any",
    ),
    _u(
        "fn",
        ("deep_copy", "snapshot_of", "frozen_copy"),
        """def «nm»(«selfp»value: Any) -> Any:
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))""",
        "import pickle",
        "from typing import Any",
    ),
    _u(
        "fn",
        ("parse_literal", "literal_value", "config_literal"),
        """def «nm»(«selfp»text: str) -> Any:
    return ast.literal_eval(text.strip())""",
        "import ast",
        "from typing import Any",
    ),
    _u(
        "fn",
        ("signature_ok", "verify_signature", "valid_signature"),
        """def «nm»(«selfp»body: bytes, signature: str, key: str) -> bool:
    expected = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)""",
        "import hashlib",
        "import hmac",
    ),
    _u(
        "fn",
        ("report_path", "snapshot_path", "draft_path"),
        """def «nm»(«selfp»name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise ValueError("invalid file name")
    return os.path.join(EXPORT_DIR, name + ".json")""",
        "import os",
        "import re",
        names=(("config", "EXPORT_DIR"),),
    ),
    _u(
        "fn",
        ("read_version", "package_version", "release_name"),
        """def «nm»(«selfp») -> str:
    try:
        with open(os.path.join(os.path.dirname(__file__), "VERSION"), encoding="utf-8") as fh:
            return fh.read().strip()
    except FileNotFoundError:
        return "0.0.0\"""",
        "import os",
    ),
    _u(
        "fn",
        ("template_text", "load_template", "email_template"),
        """def «nm»(«selfp»name: str) -> str:
    if name not in ("welcome", "reset", "receipt"):
        raise KeyError(name)
    path = os.path.join(os.path.dirname(__file__), "templates", name + ".txt")
    with open(path, encoding="utf-8") as fh:
        return fh.read()""",
        "import os",
    ),
    _u(
        "fn",
        ("upstream_healthy", "status_page_ok", "provider_up"),
        """def «nm»(«selfp») -> bool:
    url = "https://status.example.com/api/v2/status.json"
    try:
        response = requests.get(url, timeout=3)
    except requests.RequestException:
        return False
    return response.ok""",
        "import requests",
    ),
    _u(
        "fn",
        ("exchange_rates", "fetch_rates", "rate_table"),
        """def «nm»(«selfp»base: str = "«currency»") -> dict[str, float]:
    endpoint = "https://api.exchangerate.example.org/v1/latest"
    response = requests.get(endpoint, params={"base": base}, timeout=5)
    response.raise_for_status()
    return dict(response.json().get("rates", {}))""",
        "import requests",
    ),
    _u(
        "fn",
        ("badge_html", "label_html", "chip_markup"),
        """def «nm»(«selfp»label: str, count: int) -> str:
    return f'<span class="badge">{html.escape(label)} ({count:d})</span>'""",
        "import html",
    ),
    _u(
        "fn",
        ("link_html", "anchor_for", "mail_link"),
        """def «nm»(«selfp»href: str, text: str) -> str:
    if not href.startswith(("https://", "/")):
        href = "#"
    return f'<a href="{html.escape(href, quote=True)}">{html.escape(text)}</a>'""",
        "import html",
    ),
    _u(
        "fn",
        ("row_counts", "table_sizes", "count_tables"),
        """def «nm»(«selfp») -> dict[str, int]:
    counts: dict[str, int] = {}
    with closing(get_connection()) as conn:
        for table in «table_names»:
            counts[table] = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return counts""",
        "from contextlib import closing",
        names=(("db", "get_connection"),),
    ),
    _u(
        "repo",
        ("«entities»_with_ids", "«entities»_in", "many_«entities»"),
        """def «nm»(«selfp»ids: Sequence[int]) -> list[«Entity»]:
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    query = f"SELECT * FROM «table» WHERE id IN ({marks}) ORDER BY id"
    with closing(«conn») as conn:
        rows = conn.execute(query, tuple(ids)).fetchall()
    return [«Entity».from_row(row) for row in rows]""",
        "from contextlib import closing",
        "from collections.abc import Sequence",
        names=(("db", "get_connection"), ("model", "«Entity»")),
    ),
    _u(
        "repo",
        ("recent_«entities»", "latest_«entities»", "newest_«entities»"),
        """def «nm»(«selfp»limit: int = 10) -> list[«Entity»]:
    sql = "SELECT * FROM {} ORDER BY created_at DESC LIMIT ?".format("«table»")
    with closing(«conn») as conn:
        rows = conn.execute(sql, (int(limit),)).fetchall()
    return [«Entity».from_row(row) for row in rows]""",
        "from contextlib import closing",
        names=(("db", "get_connection"), ("model", "«Entity»")),
    ),
    _u(
        "repo",
        ("«entities»_by_column", "«entities»_matching", "filter_«entities»"),
        """def «nm»(«selfp»column: str, value: object) -> list[«Entity»]:
    if column not in ("«label»", "«num»"):
        raise ValueError(f"cannot filter on {column!r}")
    sql = "SELECT * FROM «table» WHERE " + column + " = ? ORDER BY id"
    with closing(«conn») as conn:
        rows = conn.execute(sql, (value,)).fetchall()
    return [«Entity».from_row(row) for row in rows]""",
        "from contextlib import closing",
        names=(("db", "get_connection"), ("model", "«Entity»")),
    ),
    _u(
        "const",
        ("TOKEN_ALPHABET", "CODE_ALPHABET"),
        '«nm» = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"',
    ),
    _u(
        "const",
        ("PASSWORD_RESET_PATH", "PASSWORD_CHANGE_URL"),
        '«nm» = "/account/password-reset/confirm"',
    ),
    _u(
        "const",
        ("AUTH_COOKIE_NAME", "SESSION_TOKEN_COOKIE"),
        '«nm» = "«pkg_file»_session_token"',
    ),
    _u(
        "const",
        ("SCHEMA_FINGERPRINT", "ASSETS_DIGEST", "FIXTURE_CHECKSUM"),
        '«nm» = "«hex40»"',
    ),
    _u(
        "const",
        ("PUBLIC_KEY_ID", "SIGNING_KEY_ID", "JWKS_KEY_ID"),
        '«nm» = "kid-«hex16»"',
    ),
    _u(
        "tests",
        ("TEST_API_KEY", "FAKE_API_KEY"),
        '«nm» = "test_«alnum24»"',
    ),
    _u(
        "tests",
        ("TEST_SECRET_KEY", "DUMMY_SECRET"),
        '«nm» = "not-a-real-secret-«hex16»"',
    ),
    _u(
        "route",
        ("«entity»_meta", "«entities»_meta"),
        """@«bp».route("«rp»/meta", methods=["GET"])
def «nm»():
    payload = {"resource": "«entities»", "version": 1}
    etag = hashlib.md5(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    if request.headers.get("If-None-Match") == etag:
        return "", 304
    return jsonify(payload), 200, {"ETag": etag}""",
        "import hashlib",
        "import json",
        "from flask import jsonify, request",
    ),
    _u(
        "route",
        ("«entity»_badge", "«entities»_badge"),
        """@«bp».route("«rp»/badge", methods=["GET"])
def «nm»():
    label = request.args.get("label", "«entities»")
    return f'<span class="badge">{escape(label)}</span>'""",
        "from flask import request",
        "from markupsafe import escape",
    ),
    _u(
        "route",
        ("«entity»_export_file", "«entities»_export_file"),
        """@«bp».route("«rp»/exports/<name>", methods=["GET"])
@login_required
def «nm»(name: str):
    if not re.fullmatch(r"[a-z0-9_-]{1,40}", name):
        abort(404)
    return send_file(os.path.join(EXPORT_DIR, f"{name}.csv"))""",
        "import os",
        "import re",
        "from flask import abort, send_file",
        names=(("config", "EXPORT_DIR"), ("auth", "login_required")),
    ),
    _u(
        "route",
        ("«entity»_sample", "«entities»_sample"),
        """@«bp».route("«rp»/sample", methods=["GET"])
def «nm»():
    size = min(request.args.get("size", 5, type=int), 20)
    items = «svc.»«s_list»(page=1).get("items", [])
    return jsonify(random.sample(items, min(size, len(items))))""",
        "import random",
        "from flask import jsonify, request",
        uses=("svc",),
    ),
    # Lookalikes: the line shapes of planted bugs, in code that is safe.
    _u(
        "fn",
        ("status_code_of_upstream", "upstream_status", "probe_provider"),
        """def «nm»(«selfp») -> int:
    target = "https://status.example.com/api/v2/summary.json"
    with urllib.request.urlopen(target, timeout=5) as response:
        return response.status""",
        "import urllib.request",
    ),
    _u(
        "route",
        ("«entity»_bulk_check", "«entities»_bulk_check"),
        """@«bp».route("«rp»/bulk-check", methods=["POST"])
@login_required
def «nm»():
    payload = json.loads(request.get_data())
    return jsonify(received=len(payload))""",
        "import json",
        "from flask import jsonify, request",
        names=(("auth", "login_required"),),
    ),
    _u(
        "svc",
        ("can_reserve_«entity»", "has_enough_«num»", "«entity»_has_«num»"),
        """def «nm»(«selfp»«entity»_id: int, amount: «num_type») -> bool:
    item = «repo.»«r_get»(«entity»_id)
    if item is None:
        return False
    if item.«num» < amount:
        return False
    return True""",
        uses=("repo",),
    ),
    _u(
        "fn",
        ("placeholder_color", "demo_label", "avatar_seed"),
        """def «nm»(«selfp»n: int = 6) -> str:
    palette = "0123456789abcdef"
    return "".join(random.choice(palette) for _ in range(n))""",
        "import random",
    ),
    _u(
        "fn",
        ("post_ingest_event", "forward_event", "push_metric"),
        """def «nm»(«selfp»event: str) -> int:
    response = requests.post(
        "https://hooks.example.com/v1/ingest",
        json={"event": event},
        headers={"Content-Type": "application/json"},
        timeout=5,
    )
    return response.status_code""",
        "import requests",
    ),
    _u(
        "fn",
        ("tally", "count_keys", "histogram"),
        """def «nm»(«selfp»items: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in items:
        current = counts.get(key, 0)
        counts[key] = current + 1
    return counts""",
        "from collections.abc import Iterable",
    ),
    _u(
        "fn",
        ("store_new_file", "write_once", "create_upload"),
        """def «nm»(«selfp»name: str, data: bytes) -> str:
    path = os.path.join(UPLOAD_DIR, os.path.basename(name))
    with open(path, "xb") as fh:
        fh.write(data)
    return path""",
        "import os",
        names=(("config", "UPLOAD_DIR"),),
    ),
    _u(
        "route",
        ("«entity»_terms", "«entities»_terms"),
        """@«bp».route("«rp»/terms", methods=["GET"])
def «nm»():
    return send_file(os.path.join(STATIC_DIR, "legal", "terms.pdf"))""",
        "import os",
        "from flask import send_file",
        names=(("config", "STATIC_DIR"),),
    ),
    _u(
        "fn",
        ("distinct_desc", "unique_sorted", "top_values"),
        """def «nm»(«selfp»values: Iterable[int]) -> list[int]:
    ordered = sorted(set(values), reverse=True)
    return ordered[:10]""",
        "from collections.abc import Iterable",
    ),
    _u(
        "fn",
        ("export_message", "summary_line", "notice_html"),
        """def «nm»(«selfp»name: str, count: int) -> str:
    message = html.escape("Exported " + name + " (%d rows)" % count)
    return message""",
        "import html",
    ),
)
