"""Read a page back as a browser's parser would: its elements, attributes and visible text."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

#: Every element the viewer writes; anything else on a page was injected.
VIEWER_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h4", "p", "span",
    "section", "table", "tbody", "tr", "th", "td", "code", "pre", "details", "summary", "ul", "li", "b",
    "br", "div", "svg", "line", "text", "polyline",
}  # fmt: skip
#: Attributes the viewer writes.
VIEWER_ATTRS = {
    "lang", "charset", "http-equiv", "content", "name", "class", "id", "open", "xmlns",
    "viewbox", "width", "height", "role", "aria-label", "x1", "x2", "y1", "y2", "stroke", "x",
    "y", "text-anchor", "fill", "stroke-width", "stroke-dasharray", "points",
}  # fmt: skip


@dataclass
class Page:
    tags: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    title: str = ""

    def count(self, tag: str, cls: str | None = None) -> int:
        return sum(
            1
            for t, a in self.tags
            if t == tag and (cls is None or cls in (a.get("class") or "").split())
        )

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.tags if a.get("id")}

    @property
    def all_text(self) -> str:
        return "".join(self.text)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        self.page.text.append(data)
        if self._in_title:
            self.page.title += data


def parse(html: str) -> Page:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.page


def injected(page: Page) -> list[str]:
    """Elements or attributes the viewer never writes, and any script-like attribute value."""
    bad = []
    for tag, attrs in page.tags:
        if tag not in VIEWER_TAGS:
            bad.append(f"<{tag}>")
        for name, value in attrs.items():
            if name not in VIEWER_ATTRS or name.startswith("on"):
                bad.append(f"<{tag} {name}=...>")
            if "javascript:" in value.lower() and name != "content":
                bad.append(f"<{tag} {name}={value!r}>")
    return bad
