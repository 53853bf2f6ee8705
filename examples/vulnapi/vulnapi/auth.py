"""Password hashing, access tokens and the decorators that guard routes."""

import functools
import hashlib
import hmac
from datetime import datetime, timezone
from typing import Any, Callable

import jwt
from flask import abort, current_app, g, request

from . import models


def hash_password(password: str) -> str:
    return hashlib.md5(password.encode()).hexdigest()


def verify_password(password: str, password_hash: str) -> bool:
    return hmac.compare_digest(hash_password(password), password_hash)


def issue_token(user: dict[str, Any]) -> str:
    now = datetime.now(timezone.utc)
    payload = {
        "sub": str(user["id"]),
        "adm": bool(user["is_admin"]),
        "iat": now,
        "exp": now + current_app.config["JWT_LIFETIME"],
    }
    return jwt.encode(payload, current_app.config["JWT_SECRET"], algorithm=current_app.config["JWT_ALGORITHM"])


def _decode_token(token: str) -> dict[str, Any] | None:
    try:
        return jwt.decode(
            token,
            current_app.config["JWT_SECRET"],
            algorithms=[current_app.config["JWT_ALGORITHM"]],
        )
    except jwt.InvalidTokenError:
        return None


def current_user() -> dict[str, Any] | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    claims = _decode_token(token)
    if claims is None:
        return None
    user = models.get_user_by_id(int(claims["sub"]))
    if user is None or user["is_banned"]:
        return None
    return user


def login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        user = current_user()
        if user is None:
            abort(401)
        g.user = user
        return view(*args, **kwargs)

    return wrapped


def admin_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    @login_required
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not g.user["is_admin"]:
            abort(403)
        return view(*args, **kwargs)

    return wrapped
