"""The compositional catalogue as the generator's records: every recipe of
:mod:`~deeprepo.rl.tasks.compose` as a planted snippet, every decoy recipe as a clean block."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from functools import cache

from deeprepo.rl.tasks.compose import (
    COMPOSED_HOST,
    Host,
    Recipe,
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


def _snippet(recipe: Recipe, r: RenderedBug) -> Snippet:
    lang = recipe.lang
    block = Block(
        r.name,
        _marked(r),
        imports=r.imports,
        exports=() if lang == "python" else (r.name,),
    )
    return Snippet(recipe.name, r.kind, lang, COMPOSED_HOST, block, r.description, r.vulnerable)


@cache
def composed_snippets(lang: str) -> tuple[Snippet, ...]:
    """Every recipe of ``lang`` as a planted snippet, rendered in the style its name seeds
    (the generator renders it afresh per placement: :func:`restyled`)."""
    return tuple(
        _snippet(r, render_marked(r, Host(lang), random.Random(f"compose/{r.name}"), None))
        for r in recipes(lang)
    )


@cache
def _recipe_named(lang: str) -> dict[str, Recipe]:
    return {r.name: r for r in recipes(lang)}


def restyled(snippet: Snippet, rng: random.Random) -> Snippet:
    """A composed snippet rendered afresh in a style drawn from ``rng``; any other unchanged.
    One fixed rendering per recipe would repeat its names in every task that draws it, and
    a learned detector reads those names as the label."""
    recipe = _recipe_named(snippet.lang).get(snippet.name)
    if recipe is None:
        return snippet
    return _snippet(recipe, render_marked(recipe, Host(snippet.lang), rng, None))


def is_composed(snippet: Snippet) -> bool:
    """Whether ``snippet`` is a recipe of the compositional catalogue."""
    return snippet.name in _recipe_named(snippet.lang)


def any_section_code(code: str, lang: str) -> str:
    """A composed snippet's function rewritten to fit a class as well as a module: the
    section's context then renders it as a method or a function. Planted bugs then go into
    class files too, as the sprinkled safe ways already do (``composed_safe_uses``)."""
    m = re.match(r"(?:async )?(?:def|function) (\w+)\(", code)
    return _methods(code, lang, m.group(1)) if m else code


def _any_section(code: str, lang: str) -> str:
    """A rendered module function rewritten to fit a class as well (``«selfp»``/``«fn»``)."""
    return _methods(code, lang, "«nm»")


def _methods(code: str, lang: str, name: str) -> str:
    """Every function of ``code`` (the composed one and its caller, if any) written for a
    class or a module, and the caller's call of ``name`` through ``«me.»``."""
    if lang == "python":
        code = re.sub(r"^((?:async )?def [^\s(]+\()\)", r"\1«self0»)", code, flags=re.M)
        code = re.sub(r"^((?:async )?def [^\s(]+\()(?!«self0»\))", r"\1«selfp»", code, flags=re.M)
    else:
        code = re.sub(r"^async function ([^\s(]+\()", r"«afn»\1", code, flags=re.M)
        code = re.sub(r"^function ([^\s(]+\()", r"«fn»\1", code, flags=re.M)
    call = re.compile(r"(return (?:await )?)" + re.escape(name) + r"\(")
    return call.sub(lambda m: m.group(1) + "«me.»" + name + "(", code)


@cache
def composed_safe_uses(lang: str) -> tuple[SafeUse, ...]:
    """One decoy recipe per safe way of writing each sink (each of its bodies, each guard or
    none, a trusted source or not; source and propagation drawn) as a clean block in a style
    of its own: sprinkled over clean code, they put the composed bugs' line shapes, sink lines
    included, outside any label. One per way, not every decoy: the pool is scanned for every
    section of every project, so its size is generation time."""
    out = []
    pools = parts(lang).style.pools
    ways: dict[tuple[str, bool, str, bool], list[Recipe]] = {}
    for recipe in recipes(lang):
        if not recipe.vulnerable:
            g = recipe.guard.id if recipe.guard else ""
            key = (recipe.sink.id, recipe.safe_sink, g, recipe.source.trusted)
            ways.setdefault(key, []).append(recipe)
    for key, options in ways.items():
        rng = random.Random(f"compose-safe/{'/'.join(map(str, key))}")
        recipe = rng.choice(options)
        n = len(recipe.sink.safe if recipe.safe_sink else recipe.sink.bodies)
        for body in range(n):
            use = _safe_use(recipe, rng, pools, body)
            same = tuple(o for o in options if o.sink is recipe.sink)
            _SAFE_WAYS[(lang, use.block.code)] = (same, body)
            out.append(use)
    return tuple(out)


# A sprinkled block's way (the recipes that write it, all with one sink, and the body).
_SAFE_WAYS: dict[tuple[str, str], tuple[tuple[Recipe, ...], int]] = {}


def is_composed_use(use: SafeUse, lang: str) -> bool:
    """Whether ``use`` is one of :func:`composed_safe_uses` (the composed bugs' shapes)."""
    return (lang, use.block.code) in _SAFE_WAYS


def restyled_use(use: SafeUse, lang: str, rng: random.Random) -> SafeUse:
    """A composed safe use rendered afresh (its recipe among those of its way, its names and
    values drawn from ``rng``); any other unchanged. Sprinkled as written, one rendering per way would
    repeat its exact lines in every task, a shape a learned detector reads as "clean"."""
    way = _SAFE_WAYS.get((lang, use.block.code))
    if way is None:
        return use
    options, body = way
    return _safe_use(rng.choice(options), rng, parts(lang).style.pools, body)


def echo_use(snippet: Snippet, rng: random.Random) -> SafeUse | None:
    """A clean rendering of the sink that the composed bug ``snippet`` uses: a decoy recipe of
    the same sink (its dangerous body behind a trusted source or a holding check, or one of its
    safe bodies), names and body drawn from ``rng``; ``None`` for any other snippet. Sprinkled
    next to each planted bug, it makes a bug's sink line, and the lines around it, no rarer in
    clean code than in bugs, whatever the task's mix of kinds."""
    recipe = _recipe_named(snippet.lang).get(snippet.name)
    if recipe is None or not recipe.vulnerable:
        return None
    options = [r for r in _decoys_of(snippet.lang) if r.sink is recipe.sink]
    if not options:
        return None
    decoy = rng.choice(options)
    n = len(decoy.sink.safe if decoy.safe_sink else decoy.sink.bodies)
    return _safe_use(decoy, rng, parts(snippet.lang).style.pools, rng.randrange(n))


@cache
def _decoys_of(lang: str) -> tuple[Recipe, ...]:
    return tuple(r for r in recipes(lang) if not r.vulnerable)


def _safe_use(
    recipe: Recipe, rng: random.Random, pools: Mapping[str, tuple[str, ...]], body: int
) -> SafeUse:
    lang = recipe.lang
    r = render_marked(recipe, Host(lang), rng, "«nm»", body)
    pairs = zip(rng.sample(pools["verbs"], 4), rng.sample(pools["nouns"], 4), strict=True)
    names = sorted({f"{v}_{n}" if lang == "python" else v + n for v, n in pairs})
    # A literal in a safe body (an ETag) is drawn per sprinkle, as a planted secret is per
    # placement: the same string in every task would mark the body as clean.
    code = _any_section(r.code, lang).replace("«secret_alnum»", "«alnum24»")
    block = Block(
        "«nm»",
        code,
        imports=r.imports,
        exports=() if lang == "python" else ("«nm»",),
    )
    return SafeUse(tuple(names), "fn", block)
