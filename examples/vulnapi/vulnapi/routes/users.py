import sqlite3

from flask import Blueprint, abort, g, jsonify, request

from .. import models
from ..auth import hash_password, issue_token, login_required, verify_password
from ..utils import pagination, public_user, require_json

bp = Blueprint("users", __name__, url_prefix="/users")


@bp.post("/register")
def register():
    data = require_json("username", "password", "email")
    username = data["username"].strip()
    if len(data["password"]) < 10:
        abort(400, description="password must be at least 10 characters")
    try:
        user_id = models.create_user(username, data["email"].strip(), hash_password(data["password"]))
    except sqlite3.IntegrityError:
        abort(409, description="username already taken")
    return jsonify({"id": user_id, "username": username}), 201


@bp.post("/login")
def login():
    data = require_json("username", "password")
    user = models.get_user_for_login(data["username"])
    if user is None or user["is_banned"] or not verify_password(data["password"], user["password_hash"]):
        abort(401, description="invalid username or password")
    return jsonify({"token": issue_token(user)})


@bp.get("/me")
@login_required
def me():
    return jsonify(public_user(g.user) | {"email": g.user["email"], "is_admin": bool(g.user["is_admin"])})


@bp.get("/search")
@login_required
def search():
    term = request.args.get("q", "").strip()
    if not term:
        return jsonify([])
    limit, _ = pagination()
    return jsonify([public_user(u) for u in models.search_users(term, limit)])


@bp.get("/<int:user_id>")
@login_required
def profile(user_id: int):
    user = models.get_user_by_id(user_id)
    if user is None:
        abort(404)
    return jsonify(public_user(user))
