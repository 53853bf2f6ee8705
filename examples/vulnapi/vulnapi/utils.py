"""Small helpers shared by the blueprints."""

from typing import Any

from flask import abort, current_app, request


def pagination() -> tuple[int, int]:
    """Read ``page`` and ``per_page`` from the query string, clamped to sane values."""
    try:
        page = max(1, int(request.args.get("page", 1)))
        per_page = int(request.args.get("per_page", current_app.config["PAGE_SIZE"]))
    except ValueError:
        abort(400, description="page and per_page must be integers")
    per_page = min(max(1, per_page), current_app.config["MAX_PAGE_SIZE"])
    return per_page, (page - 1) * per_page


def require_json(*fields: str) -> dict[str, Any]:
    """Return the JSON body, or answer 400 when it is missing or lacks a field."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        abort(400, description="expected a JSON object")
    missing = [f for f in fields if not isinstance(data.get(f), str) or not data[f].strip()]
    if missing:
        abort(400, description=f"missing fields: {', '.join(missing)}")
    return data


def public_user(user: dict[str, Any]) -> dict[str, Any]:
    return {k: user[k] for k in ("id", "username", "created_at") if k in user}
