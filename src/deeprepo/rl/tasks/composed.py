"""The compositional catalogue as the generator's records: every recipe of
:mod:`~deeprepo.rl.tasks.compose` as a planted snippet, every decoy recipe as a clean block."""

from __future__ import annotations

import random
import re
from functools import cache

from deeprepo.rl.tasks.compose import (
    COMPOSED_HOST,
    Host,
    RenderedBug,
    parts,
    recipes,
    render_marked,
)
from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import SafeUse, Snippet


def _marked(r: RenderedBug) -> str:
    lines = r.code.split("\n")
    if r.start_line != r.sink_line:
        lines[r.start_line - 1] += "  ⟦start⟧"
    lines[r.sink_line - 1] += "  ⟦sink⟧"
    return "\n".join(lines)


@cache
def composed_snippets(lang: str) -> tuple[Snippet, ...]:
    """Every recipe of ``lang`` as a planted snippet, rendered in the style its name seeds."""
    out = []
    for recipe in recipes(lang):
        r = render_marked(recipe, Host(lang), random.Random(f"compose/{recipe.name}"), None)
        block = Block(
            r.name,
            _marked(r),
            imports=r.imports,
            exports=() if lang == "python" else (r.name,),
        )
        out.append(
            Snippet(recipe.name, r.kind, lang, COMPOSED_HOST, block, r.description, r.vulnerable)
        )
    return tuple(out)


def _any_section(code: str, lang: str) -> str:
    """A rendered module function rewritten to fit a class as well (``«selfp»``/``«fn»``)."""
    if lang == "python":
        return re.sub(r"^((?:async )?def «nm»\()", r"\1«selfp»", code, count=1)
    code = re.sub(r"^async function «nm»\(", "«afn»«nm»(", code, count=1)
    return re.sub(r"^function «nm»\(", "«fn»«nm»(", code, count=1)


@cache
def composed_safe_uses(lang: str) -> tuple[SafeUse, ...]:
    """Every decoy recipe as a clean block (a holding check or a safe sink, in a style of its
    own): sprinkled over clean code, they put the composed bugs' line shapes, sink lines
    included, outside any label as often as inside one."""
    out = []
    pools = parts(lang).style.pools
    for recipe in recipes(lang):
        if recipe.vulnerable:
            continue
        rng = random.Random(f"compose-safe/{recipe.name}")
        r = render_marked(recipe, Host(lang), rng, "«nm»")
        pairs = zip(rng.sample(pools["verbs"], 4), rng.sample(pools["nouns"], 4), strict=True)
        names = sorted({f"{v}_{n}" if lang == "python" else v + n for v, n in pairs})
        block = Block(
            "«nm»",
            _any_section(r.code, lang),
            imports=r.imports,
            exports=() if lang == "python" else ("«nm»",),
        )
        out.append(SafeUse(tuple(names), "fn", block))
    return tuple(out)
