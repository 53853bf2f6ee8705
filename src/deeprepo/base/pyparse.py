"""Parsing Python source in deeprepo's own process, one parse at a time.

On CPython before 3.12, ``ast.parse`` is not safe to run from two threads at once: the
conversion of the parse tree to ``ast`` objects keeps its recursion depth in state every
thread shares, and a parse that overlaps another fails with ``SystemError: AST constructor
recursion depth mismatch`` (CPython gh-106905). The static worker analyses files in worker
threads (bandit parses inside them too) while the episode parses import graphs, so every
parse deeprepo makes goes through :func:`parse_python` or holds :data:`PARSE_LOCK`.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["PARSE_LOCK", "parse_python"]

#: Held by every ``ast.parse`` in this process (and around bandit, which parses inside).
PARSE_LOCK = threading.RLock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, serialised with every other parse in the process."""
    with PARSE_LOCK:
        return ast.parse(source)
