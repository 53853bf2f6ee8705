"""The hard tier's authorisation flows: a route in one module asks a helper in another
whether the caller may act, and in the bugs the helper's test is wrong.

The flows are data (``data/<lang>/hard.toml``), read here into :class:`Snippet` records the
hard tier plants like the catalogue's cross-file bugs (``hard._place_flow``): the helper is
the sink (``⟦sink⟧`` on its faulty line), the route is its source (``⟦source⟧`` on the call
that hands the helper the caller). They are kept out of ``catalogue.snippets`` so the
ordinary tiers' draws do not change.
"""

from __future__ import annotations

from functools import cache

from deeprepo.rl.tasks.catalogue import PLACEHOLDERS
from deeprepo.rl.tasks.datafile import Entry, check_template, document, marks
from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet
from deeprepo.rl.tasks.taxonomy import BUG_KINDS

__all__ = ["HELPER_HOST", "authz_flows"]

HELPER_HOST = "validators"
"""The utility module role the helpers are written for (placed like any portable helper)."""


def _route(root: Entry) -> Block:
    e = root.table("route", "[route]", required=True)
    assert e is not None
    code = e.text("code")
    block = Block(
        e.text("key"),
        code,
        imports=e.texts("imports"),
        names=e.pairs("names"),
        uses=("sink", "svc"),
    )
    check_template(e, "code", code, PLACEHOLDERS)
    if marks(e, "code", code) != ["source"] or "«sink.»«sink_fn»(" not in code:
        e.fail("'code' needs one ⟦source⟧ and calls the helper as «sink.»«sink_fn»(...)")
    e.close()
    return block


@cache
def authz_flows(lang: str) -> tuple[Snippet, ...]:
    """The authorisation flows of ``lang`` (bugs and decoys), each with the shared route."""
    where = f"{lang}/hard.toml"
    root = Entry(document(lang, "hard"), where)
    route = _route(root)
    out: list[Snippet] = []
    for e in root.tables("flow", "[[flow]]", required=True):
        name, kind, key, code = e.text("name"), e.text("kind"), e.text("key"), e.text("code")
        if kind not in BUG_KINDS:
            e.fail(f"unknown kind {kind!r} (known: {', '.join(sorted(BUG_KINDS))})")
        check_template(e, "code", code, PLACEHOLDERS)
        if marks(e, "code", code) != ["sink"]:
            e.fail("'code' needs exactly one mark, ⟦sink⟧ on the helper's deciding line")
        exports = (key,) if lang == "js" else ()
        out.append(
            Snippet(
                name,
                kind,
                lang,
                HELPER_HOST,
                Block(key, code, exports=exports),
                e.text("description"),
                vulnerable=e.required_flag("vulnerable"),
                source=route,
            )
        )
        e.close()
    root.close()
    return tuple(out)
