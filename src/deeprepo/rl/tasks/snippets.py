"""The record of a planted snippet (bug or decoy) and the catalogue of all of them.

A snippet is a block of code with marks (``⟦start⟧``, ``⟦sink⟧``, ``⟦end⟧``)
that the generator places in a host section: an entity's repository,
service or routes, or a project-wide module (``auth``, ``config``, a utility).
A cross-file snippet also has a ``source``: a route handler, placed in the
routes of an entity, that reads untrusted input (``⟦source⟧``) and passes it
to the sink through ``«sink.»«sink_fn»(...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from deeprepo.rl.tasks.render import Block

ENTITY_HOSTS = frozenset({"repo", "svc", "routes"})


@dataclass(frozen=True)
class Snippet:
    """One way to plant a bug kind (or its decoy) in one language."""

    name: str  # unique, e.g. "py-sqli-search"
    kind: str  # a key of taxonomy.BUG_KINDS
    lang: str  # python | js
    host: str  # section role: repo | svc | routes | auth | config | db | a utility id
    block: Block  # its key is the function name (a template) or, with ``replaces``, the slot
    description: str  # template filled with the block's context
    vulnerable: bool = True
    replaces: bool = False  # replace the host's block with the same key instead of adding one
    source: Block | None = None  # cross-file: the route that feeds the sink
    needs: tuple[str, ...] = ()  # other project sections the code uses (e.g. "cache")


@cache
def catalogue() -> tuple[Snippet, ...]:
    """Every snippet, bugs and decoys, both languages (imported lazily: big data modules).

    Cross-file bugs also yield a decoy each: the same helper behind a caller that checks
    the value (``flows.guarded_decoys``).
    """
    from deeprepo.rl.tasks import (
        bugs_js,
        bugs_python,
        decoys_js,
        decoys_python,
        logic_js,
        logic_python,
    )
    from deeprepo.rl.tasks.flows import guarded_decoys

    bugs = (*bugs_python.SNIPPETS, *bugs_js.SNIPPETS)
    return (
        *bugs,
        *logic_python.SNIPPETS,
        *logic_js.SNIPPETS,
        *decoys_python.SNIPPETS,
        *decoys_js.SNIPPETS,
        *guarded_decoys(bugs),
    )
