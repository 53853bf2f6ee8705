"""Queries for users, posts and comments."""

import sqlite3
from typing import Any

from .db import get_db

USER_COLUMNS = "id, username, email, is_admin, is_banned, created_at"


def _row(row: sqlite3.Row | None) -> dict[str, Any] | None:
    return dict(row) if row is not None else None


def get_user_by_id(user_id: int) -> dict[str, Any] | None:
    cursor = get_db().cursor()
    cursor.execute("SELECT id, username, email, is_admin, is_banned, created_at FROM users WHERE id = ?", (user_id,))
    return _row(cursor.fetchone())


def get_user_for_login(username: str) -> dict[str, Any] | None:
    cursor = get_db().cursor()
    cursor.execute(
        "SELECT id, username, password_hash, is_admin, is_banned FROM users WHERE username = ?",
        (username,),
    )
    return _row(cursor.fetchone())


def search_users(term: str, limit: int) -> list[dict[str, Any]]:
    cursor = get_db().cursor()
    cursor.execute(f"SELECT id, username, created_at FROM users WHERE username LIKE '%{term}%' ORDER BY username LIMIT {limit}")
    return [dict(row) for row in cursor.fetchall()]


def create_user(username: str, email: str, password_hash: str) -> int:
    conn = get_db()
    cursor = conn.execute(
        "INSERT INTO users (username, email, password_hash) VALUES (?, ?, ?)",
        (username, email, password_hash),
    )
    conn.commit()
    return int(cursor.lastrowid)


def list_users(limit: int, offset: int) -> list[dict[str, Any]]:
    rows = get_db().execute(
        "SELECT id, username, email, is_admin, is_banned, created_at FROM users "
        "ORDER BY id LIMIT ? OFFSET ?",
        (limit, offset),
    )
    return [dict(row) for row in rows]


def set_banned(user_id: int, banned: bool) -> bool:
    conn = get_db()
    cursor = conn.execute("UPDATE users SET is_banned = ? WHERE id = ?", (int(banned), user_id))
    conn.commit()
    return cursor.rowcount == 1


def list_posts(limit: int, offset: int) -> list[dict[str, Any]]:
    rows = get_db().execute(
        "SELECT posts.id, posts.title, posts.created_at, users.username AS author "
        "FROM posts JOIN users ON users.id = posts.author_id "
        "ORDER BY posts.created_at DESC LIMIT ? OFFSET ?",
        (limit, offset),
    )
    return [dict(row) for row in rows]


def get_post(post_id: int) -> dict[str, Any] | None:
    row = get_db().execute(
        "SELECT posts.id, posts.author_id, posts.title, posts.body, posts.created_at, "
        "users.username AS author FROM posts JOIN users ON users.id = posts.author_id "
        "WHERE posts.id = ?",
        (post_id,),
    ).fetchone()
    return _row(row)


def create_post(author_id: int, title: str, body: str) -> int:
    conn = get_db()
    cursor = conn.execute(
        "INSERT INTO posts (author_id, title, body) VALUES (?, ?, ?)",
        (author_id, title, body),
    )
    conn.commit()
    return int(cursor.lastrowid)


def delete_post(post_id: int) -> None:
    conn = get_db()
    conn.execute("DELETE FROM posts WHERE id = ?", (post_id,))
    conn.commit()


def list_comments(post_id: int) -> list[dict[str, Any]]:
    rows = get_db().execute(
        "SELECT comments.id, comments.body, comments.created_at, users.username AS author "
        "FROM comments JOIN users ON users.id = comments.author_id "
        "WHERE comments.post_id = ? ORDER BY comments.created_at",
        (post_id,),
    )
    return [dict(row) for row in rows]


def add_comment(post_id: int, author_id: int, body: str) -> int:
    conn = get_db()
    cursor = conn.execute(
        "INSERT INTO comments (post_id, author_id, body) VALUES (?, ?, ?)",
        (post_id, author_id, body),
    )
    conn.commit()
    return int(cursor.lastrowid)
