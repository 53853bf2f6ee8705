import subprocess

from flask import Blueprint, abort, current_app, jsonify

from .. import models
from ..auth import admin_required
from ..utils import pagination, require_json

bp = Blueprint("admin", __name__, url_prefix="/admin")


@bp.get("/users")
@admin_required
def users():
    limit, offset = pagination()
    return jsonify(models.list_users(limit, offset))


@bp.post("/users/<int:user_id>/ban")
@admin_required
def ban(user_id: int):
    if not models.set_banned(user_id, True):
        abort(404)
    return jsonify({"id": user_id, "is_banned": True})


@bp.post("/diagnostics/ping")
@admin_required
def ping():
    host = require_json("host")["host"].strip()
    timeout = current_app.config["PING_TIMEOUT_SECONDS"]
    result = subprocess.run(f"ping -c 3 -W {timeout} {host}", shell=True, capture_output=True, text=True, timeout=timeout * 4)
    return jsonify({"host": host, "reachable": result.returncode == 0, "output": result.stdout[-2000:]})
