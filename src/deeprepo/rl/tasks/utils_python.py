"""Clean Python utility modules (one section each), as block templates.

``UTILS`` maps a utility's section id to ``(module stem choices, docstring, blocks)``.
Bug and decoy snippets join these modules (``storage`` hosts path handling,
``webhooks`` outbound HTTP, ``exporter`` subprocesses …).
"""

from __future__ import annotations

from deeprepo.rl.tasks.render import Block

B = Block

PAGINATION = (
    B("MAX_PAGE_SIZE", "MAX_PAGE_SIZE = 100"),
    B(
        "page_bounds",
        '''def page_bounds(page: int, per_page: int) -> tuple[int, int]:
    """``(limit, offset)`` of a 1-based page."""
    page = max(page, 1)
    per_page = min(max(per_page, 1), MAX_PAGE_SIZE)
    return per_page, (page - 1) * per_page''',
    ),
    B(
        "page_count",
        """def page_count(total: int, per_page: int) -> int:
    if per_page <= 0:
        return 0
    return (total + per_page - 1) // per_page""",
    ),
)

STORAGE = (
    B(
        "upload_path",
        '''def upload_path(filename: str) -> Path:
    """The path of an upload, refusing names that escape the upload directory."""
    base = Path(UPLOAD_DIR).resolve()
    target = (base / filename).resolve()
    if not target.is_relative_to(base):
        raise ValueError(«bad_name_msg»)
    return target''',
        imports=("from pathlib import Path",),
        names=(("config", "UPLOAD_DIR"),),
    ),
    B(
        "save_upload",
        """def save_upload(filename: str, data: bytes) -> Path:
    path = upload_path(filename)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path""",
        imports=("from pathlib import Path",),
    ),
    B(
        "read_upload",
        """def read_upload(filename: str) -> bytes:
    return upload_path(filename).read_bytes()""",
    ),
    B(
        "delete_upload",
        """def delete_upload(filename: str) -> bool:
    path = upload_path(filename)
    if not path.exists():
        return False
    path.unlink()
    return True""",
    ),
)

WEBHOOKS = (
    B(
        "post_event",
        '''def post_event(event: str, payload: Mapping[str, Any]) -> int:
    """Send an event to the configured webhook; returns the HTTP status."""
    if not WEBHOOK_URL:
        return 0
    response = requests.post(
        WEBHOOK_URL, json={"event": event, "data": dict(payload)}, timeout=WEBHOOK_TIMEOUT
    )
    return response.status_code''',
        imports=(
            "import requests",
            "from typing import Any",
            "from collections.abc import Mapping",
        ),
        names=(("config", "WEBHOOK_URL"), ("config", "WEBHOOK_TIMEOUT")),
    ),
    B(
        "retry_delay",
        '''def retry_delay(attempt: int, base: float = 0.5) -> float:
    """Exponential backoff for webhook retries."""
    return base * (2 ** min(attempt, 6))''',
    ),
)

EXPORTER = (
    B(
        "export_csv",
        '''def export_csv(rows: Iterable[Mapping[str, Any]], name: str) -> Path:
    """Write rows to ``EXPORT_DIR/<name>.csv``."""
    rows = list(rows)
    path = Path(EXPORT_DIR) / (re.sub(r"[^A-Za-z0-9_-]", "_", name) + ".csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=sorted(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
    return path''',
        imports=(
            "import csv",
            "import re",
            "from pathlib import Path",
            "from typing import Any",
            "from collections.abc import Iterable, Mapping",
        ),
        names=(("config", "EXPORT_DIR"),),
    ),
    B(
        "compress_export",
        """def compress_export(path: Path) -> Path:
    subprocess.run(["gzip", "-kf", str(path)], check=True)
    return path.with_name(path.name + ".gz")""",
        imports=("import subprocess", "from pathlib import Path"),
    ),
)

CACHE = (
    B(
        "_store",
        """_store: dict[str, tuple[float, str]] = {}
_lock = threading.Lock()""",
        imports=("import threading",),
    ),
    B(
        "cache_get",
        """def cache_get(key: str) -> Any | None:
    with _lock:
        entry = _store.get(key)
    if entry is None or entry[0] < time.monotonic():
        return None
    return json.loads(entry[1])""",
        imports=("import json", "import time", "from typing import Any"),
    ),
    B(
        "cache_set",
        """def cache_set(key: str, value: Any, ttl: float = 60.0) -> None:
    with _lock:
        _store[key] = (time.monotonic() + ttl, json.dumps(value))""",
        imports=("import json", "import time", "from typing import Any"),
    ),
)

HTML = (
    B(
        "render_table",
        '''def render_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """An HTML table; every cell is escaped."""
    head = "".join(f"<th>{escape(col)}</th>" for col in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(row.get(col, '')))}</td>" for col in columns) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"''',
        imports=(
            "from html import escape",
            "from typing import Any",
            "from collections.abc import Iterable, Mapping, Sequence",
        ),
    ),
)

IMPORTER = (
    B(
        "parse_rows",
        '''def parse_rows(text: str) -> list[dict[str, Any]]:
    """Rows of an uploaded JSON export."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of rows")
    return [dict(row) for row in data if isinstance(row, dict)]''',
        imports=("import json", "from typing import Any"),
    ),
)

JOBS = (
    B(
        "_stats",
        """_stats: dict[str, int] = {}
_stats_lock = threading.Lock()""",
        imports=("import threading",),
    ),
    B(
        "record",
        """def record(outcome: str) -> None:
    with _stats_lock:
        _stats[outcome] = _stats.get(outcome, 0) + 1""",
        imports=("import threading",),
    ),
    B(
        "run_batch",
        '''def run_batch(items: Iterable[Any], handler: Callable[[Any], bool], workers: int = 4) -> dict[str, int]:
    """Run ``handler`` over ``items`` on a thread pool and count the outcomes."""

    def run_one(item: Any) -> None:
        record("ok" if handler(item) else "failed")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run_one, items))
    with _stats_lock:
        return dict(_stats)''',
        imports=(
            "from concurrent.futures import ThreadPoolExecutor",
            "from typing import Any",
            "from collections.abc import Callable, Iterable",
        ),
    ),
)

VALIDATORS = (
    B(
        "EMAIL_RE",
        'EMAIL_RE = re.compile(r"^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$", re.IGNORECASE)',
        imports=("import re",),
    ),
    B(
        "is_email",
        """def is_email(value: str) -> bool:
    return bool(EMAIL_RE.match(value.strip()))""",
    ),
    B(
        "require_positive",
        """def require_positive(value: float, field: str) -> float:
    if value <= 0:
        raise ValueError(f"{field} must be positive")
    return value""",
    ),
)

TEXT = (
    B(
        "slugify",
        """def slugify(value: str) -> str:
    value = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")""",
        imports=("import re", "import unicodedata"),
    ),
    B(
        "truncate",
        """def truncate(value: str, length: int = 80, suffix: str = "...") -> str:
    if len(value) <= length:
        return value
    return value[: max(length - len(suffix), 0)].rstrip() + suffix""",
    ),
)

DATES = (
    B(
        "parse_date",
        '''def parse_date(value: str) -> date:
    """Parse ``YYYY-MM-DD``; raises ValueError on anything else."""
    return datetime.strptime(value, "%Y-%m-%d").date()''',
        imports=("from datetime import date, datetime",),
    ),
    B(
        "days_between",
        """def days_between(start: date, end: date) -> int:
    return (end - start).days""",
        imports=("from datetime import date",),
    ),
    B(
        "utc_now",
        """def utc_now() -> datetime:
    return datetime.now(timezone.utc)""",
        imports=("from datetime import datetime, timezone",),
    ),
)

MONEY = (
    B(
        "to_cents",
        """def to_cents(amount: str | float | Decimal) -> int:
    value = Decimal(str(amount)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return int(value * 100)""",
        imports=("from decimal import ROUND_HALF_UP, Decimal",),
    ),
    B(
        "format_money",
        '''def format_money(cents: int, currency: str = "«currency»") -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d} {currency}"''',
    ),
)

LOGS = (
    B(
        "configure_logging",
        """def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )""",
        imports=("import logging",),
    ),
    B(
        "get_logger",
        """def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)""",
        imports=("import logging",),
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
        ("webhooks", "http_client", "outbound"),
        "Outbound HTTP: webhooks and link previews.",
        WEBHOOKS,
    ),
    "exporter": (("exporter", "reports", "exports"), "CSV exports and their archives.", EXPORTER),
    "cache": (("cache", "memo"), "A small in-process cache with expiry.", CACHE),
    "html": (("html_render", "views", "markup"), "Server-side HTML fragments.", HTML),
    "importer": (("importer", "imports", "bulk_load"), "Bulk import of uploaded data.", IMPORTER),
    "jobs": (("jobs", "worker", "tasks"), "Background batch jobs on a thread pool.", JOBS),
    "validators": (("validators", "checks"), "Input validation helpers.", VALIDATORS),
    "text": (("text_utils", "strings"), "Text helpers.", TEXT),
    "dates": (("dates", "timeutil"), "Date helpers.", DATES),
    "money": (("money", "currency"), "Money arithmetic in integer cents.", MONEY),
    "logs": (("logging_setup", "log"), "Logging configuration.", LOGS),
}
"""Utility section id → (module stems to choose from, module docstring, blocks)."""
