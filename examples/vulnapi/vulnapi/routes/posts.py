from flask import Blueprint, abort, g, jsonify, render_template

from .. import models
from ..auth import login_required
from ..render import render_byline, render_comments
from ..utils import pagination, require_json

bp = Blueprint("posts", __name__, url_prefix="/posts")


@bp.get("")
def index():
    limit, offset = pagination()
    return jsonify(models.list_posts(limit, offset))


@bp.post("")
@login_required
def create():
    data = require_json("title", "body")
    post_id = models.create_post(g.user["id"], data["title"].strip(), data["body"])
    return jsonify({"id": post_id}), 201


@bp.get("/<int:post_id>")
def show(post_id: int):
    post = models.get_post(post_id)
    if post is None:
        abort(404)
    comments = models.list_comments(post_id)
    return render_template(
        "post.html",
        post=post,
        byline=render_byline(post),
        comments_html=render_comments(comments),
    )


@bp.delete("/<int:post_id>")
@login_required
def delete(post_id: int):
    post = models.get_post(post_id)
    if post is None:
        abort(404)
    if post["author_id"] != g.user["id"] and not g.user["is_admin"]:
        abort(403)
    models.delete_post(post_id)
    return "", 204


@bp.post("/<int:post_id>/comments")
@login_required
def comment(post_id: int):
    if models.get_post(post_id) is None:
        abort(404)
    data = require_json("body")
    comment_id = models.add_comment(post_id, g.user["id"], data["body"])
    return jsonify({"id": comment_id}), 201
