"""HTML fragments for the post pages."""

from markupsafe import Markup, escape


def render_comment(comment: dict) -> Markup:
    author = escape(comment["author"])
    return Markup(f'<li class="comment"><span class="author">{author}</span> {comment["body"]}</li>')


def render_comments(comments: list[dict]) -> Markup:
    if not comments:
        return Markup('<p class="empty">No comments yet.</p>')
    items = Markup("").join(render_comment(c) for c in comments)
    return Markup('<ul class="comments">') + items + Markup("</ul>")


def render_byline(post: dict) -> Markup:
    return Markup("<p class=\"byline\">by {} on {}</p>").format(post["author"], post["created_at"])
