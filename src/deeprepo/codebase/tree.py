"""The indented ``file_tree`` string the root model explores first."""

from __future__ import annotations

from collections.abc import Iterable

from deeprepo.base.textsafe import escape_name

#: Default line cap: a few thousand lines keep the tree useful without flooding the root's context.
DEFAULT_MAX_LINES = 5_000

_INDENT = "  "


class _Dir:
    """One directory while the tree is built."""

    __slots__ = ("dirs", "files")

    def __init__(self) -> None:
        self.dirs: dict[str, _Dir] = {}
        self.files: list[str] = []


def build_tree(paths: Iterable[str], *, root_name: str, max_lines: int = DEFAULT_MAX_LINES) -> str:
    """Render relative POSIX ``paths`` as an indented tree, directories first, each level sorted.

    The first line is ``root_name/``; each level indents two spaces and directories end in ``/``::

        repo/
          src/
            app.py
          README.md

    When the tree would pass ``max_lines`` lines it stops there and ends with a note
    saying how many entries were left out.

    Names are shown through :func:`~deeprepo.base.textsafe.escape_name`: a name holding a newline
    or an escape sequence stays one line of the tree (``evil\\n  forged.py``).
    """
    if max_lines < 1:
        raise ValueError("max_lines must be at least 1")
    root = _Dir()
    total = 0
    for path in paths:
        node = root
        *dirs, name = path.split("/")
        for d in dirs:
            child = node.dirs.get(d)
            if child is None:
                child = node.dirs[d] = _Dir()
                total += 1
            node = child
        node.files.append(name)
        total += 1

    lines = [f"{escape_name(root_name.rstrip('/'))}/"]
    # An explicit stack, not recursion: very deep trees must not hit the recursion limit.
    stack: list[tuple[str, int, _Dir | None]] = []
    _push_children(root, 1, stack)
    while stack and len(lines) < max_lines:
        label, depth, sub = stack.pop()
        lines.append(_INDENT * depth + label)
        if sub is not None:
            _push_children(sub, depth + 1, stack)
    shown = len(lines) - 1
    if shown < total:
        lines.append(
            f"... ({total - shown:,} more entries not shown; the tree is capped at "
            f"{max_lines:,} lines, `codebase` holds every path)"
        )
    return "\n".join(lines)


def _push_children(node: _Dir, depth: int, stack: list[tuple[str, int, _Dir | None]]) -> None:
    """Push a directory's children so they pop in display order: directories, then files."""
    entries: list[tuple[str, int, _Dir | None]] = [
        (f"{escape_name(name)}/", depth, node.dirs[name]) for name in sorted(node.dirs)
    ]
    entries.extend((escape_name(name), depth, None) for name in sorted(node.files))
    stack.extend(reversed(entries))
