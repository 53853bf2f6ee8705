"""The compositional catalogue: a bug is a source × a propagation × a sink × a guard.

``data/<lang>/compose.toml`` holds the parts; this module puts one of each together into a
function and renders it in a style drawn from a seed: the function and variable names, sync
or async, a comment or none, how a failed check ends. The guard decides the label: none, or a
check that does not stop the attack (``safe = false``), gives a bug; a check that does
(``safe = true``), or a sink written safely (a sink's ``safe`` bodies), gives a decoy. Bugs
and decoys are drawn from the same parts, so the shape of a line says little about its label.

Two faces:

* :func:`render_bug` renders one :class:`Recipe` into a host's context (indentation, a method
  or a module function, names the host already uses) and returns a :class:`RenderedBug` with
  its ground-truth lines — for planting into code nobody here wrote;
* ``composed.composed_snippets`` and ``composed.composed_safe_uses`` turn every recipe into
  the generator's records (``catalogue.snippets`` and ``catalogue.safe_pool`` include them).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from deeprepo.rl.tasks.datafile import CatalogueError, Entry, document
from deeprepo.rl.tasks.mutate import COMMENTS
from deeprepo.rl.tasks.naming import secret_token
from deeprepo.rl.tasks.taxonomy import BUG_KINDS

_SLOT = re.compile(r"@(\w+)")
_WORD = re.compile(r"[A-Za-z_]\w*")
_MARK = re.compile(r"\s*⟦(start|sink)⟧\s*$")
COMPOSED_HOST = "validators"
"""The utility a composed snippet names as its host; it is portable, so the generator places
it in any function-style module (``planting.host_sections``)."""


@dataclass(frozen=True)
class Part:
    """One source, propagation or guard: a code template and what it does to the value."""

    id: str
    code: str  # template lines; "" for none
    params: tuple[str, ...] = ()  # sources: the parameters they read from
    rebind: bool = False  # the code binds @v2, which the later steps use as the value
    opens: bool = False  # the code opens a block: the later steps are nested inside it
    safe: bool = False  # guards: the check stops the attack
    trusted: bool = False  # sources: the value is a constant, not input
    stale: bool = False  # guards: binds @v2, but the later steps keep using @v (a bug)
    kinds: tuple[str, ...] = ()  # guards: the bug kinds it applies to
    imports: tuple[str, ...] = ()
    what: str = ""  # guards: what the check does, for the description
    # Sources: what a caller after the function passes ("" none; @constant: the sink's), and its
    # own parameters. Trusted with a caller: a decoy whose safety is in its caller, not local.
    caller: str = ""
    caller_params: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sink:
    """Where a tainted value does harm: alternative bodies, and safe bodies for decoys."""

    kind: str
    id: str
    bodies: tuple[str, ...]
    safe: tuple[str, ...]
    params: tuple[str, ...]
    imports: tuple[str, ...]
    safe_imports: tuple[str, ...]
    what: str
    tainted: bool = True  # False: the defect is in the sink alone (a secret, a leak), so
    # neither the source nor a guard changes the label
    constant: str = '"@const"'  # what a caller that passes no input gives the function


@dataclass(frozen=True)
class Recipe:
    """One combination: the label follows from the parts — a safe sink, a trusted source or a
    holding guard each make it a decoy (the last two only where the sink is ``tainted``)."""

    lang: str
    kind: str
    source: Part
    propagation: Part
    sink: Sink
    guard: Part | None  # None: no check
    safe_sink: bool = False  # a decoy written with one of the sink's safe bodies

    @property
    def vulnerable(self) -> bool:
        if self.safe_sink:
            return False
        held = self.source.trusted or (self.guard is not None and self.guard.safe)
        return not (self.sink.tainted and held)

    @property
    def name(self) -> str:
        g = (self.guard.id if self.guard else "none") + ("-safe-sink" if self.safe_sink else "")
        parts = (self.kind, self.sink.id, self.source.id, self.propagation.id, g)
        return f"{'py' if self.lang == 'python' else 'js'}-c-{'-'.join(parts)}" + (
            "" if self.vulnerable else "-decoy"
        )


@dataclass(frozen=True)
class Host:
    """Where a rendered bug goes: the context :func:`render_bug` fits it into."""

    lang: str
    indent: str = ""  # prefixed to every line (a method inside a class: one level)
    method: bool = False  # Python: ``self`` first; JS: a class method (no ``function``)
    taken: frozenset[str] = frozenset()  # names the host already uses (kept free)


@dataclass(frozen=True)
class RenderedBug:
    """One recipe rendered: the code and its ground truth, lines counted from 1 in ``code``."""

    code: str
    name: str  # the function's name
    imports: tuple[str, ...]  # Python statements; JS "module" / "{a, b}=module" specs
    kind: str
    vulnerable: bool
    start_line: int
    sink_line: int
    description: str
    recipe: str


@dataclass(frozen=True)
class _Style:
    indent: str
    pools: Mapping[str, tuple[str, ...]]
    header: str
    async_header: str
    comment: str
    close_block: str


@dataclass(frozen=True)
class Parts:
    """The compositional catalogue of one language."""

    style: _Style
    sources: tuple[Part, ...]
    propagations: tuple[Part, ...]
    sinks: tuple[Sink, ...]
    guards: tuple[Part, ...]


def _strs(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    return Entry(d, where.split(" ", 1)[0], where).texts(key)


def _str(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    return Entry(d, where.split(" ", 1)[0], where).text(key, default)


_POOLS = ("verbs", "nouns", "values", "renamed", "mappings", "keys", "tables", "columns")
_POOLS_MORE = ("hosts", "bases", "fails", "consts")


def _part(d: Mapping[str, Any], where: str) -> Part:
    return Part(
        _str(d, "id", where),
        _str(d, "code", where, "").strip("\n"),
        params=_strs(d, "params", where),
        **{f: bool(d.get(f, False)) for f in ("rebind", "opens", "safe", "trusted", "stale")},
        kinds=_strs(d, "kinds", where),
        imports=_strs(d, "imports", where),
        what=_str(d, "what", where, ""),
        caller=_str(d, "caller", where, ""),
        caller_params=_strs(d, "caller_params", where),
    )


@cache
def parts(lang: str) -> Parts:
    """The parsed ``data/<lang>/compose.toml``; a wrong entry is a ``CatalogueError``."""
    doc = document(lang, "compose")
    where = f"{lang}/compose.toml"
    st = doc.get("style", {})
    pools = {k: _strs(st, k, f"{where} [style]") for k in (*_POOLS, *_POOLS_MORE)}
    if empty := [k for k, v in pools.items() if not v]:
        raise CatalogueError(f"{where} [style]: {empty[0]!r} needs at least one name")
    style = _Style(
        _str(st, "indent", where),
        pools,
        _str(st, "header", where),
        _str(st, "async_header", where),
        _str(st, "comment", where),
        _str(st, "close_block", where, ""),
    )
    sinks = []
    for k, s in enumerate(doc.get("sink", [])):
        w = f"{where} [[sink]] #{k + 1}"
        kind = _str(s, "kind", w)
        if kind not in BUG_KINDS:
            raise CatalogueError(f"{w}: unknown kind {kind!r}")
        bodies = tuple(b.strip("\n") for b in _strs(s, "bodies", w))
        safe = tuple(b.strip("\n") for b in _strs(s, "safe", w))
        for b in (*bodies, *safe):
            if len(re.findall("⟦sink⟧", b)) != 1:
                raise CatalogueError(f"{w}: every body needs exactly one ⟦sink⟧")
        if not bodies:
            raise CatalogueError(f"{w}: 'bodies' needs at least one body")
        sinks.append(
            Sink(
                kind,
                _str(s, "id", w),
                bodies,
                safe,
                _strs(s, "params", w),
                _strs(s, "imports", w),
                _strs(s, "safe_imports", w),
                _str(s, "what", w),
                bool(s.get("tainted", True)),
                _str(s, "constant", w, '"@const"'),
            )
        )
    guards = tuple(_part(g, f"{where} [[guard]] #{k + 1}") for k, g in enumerate(doc["guard"]))
    for g in guards:
        if bad := [k for k in g.kinds if k not in BUG_KINDS]:
            raise CatalogueError(f"{where} guard {g.id!r}: unknown kind {bad[0]!r}")
    return Parts(
        style,
        tuple(_part(s, f"{where} [[source]]") for s in doc["source"]),
        tuple(_part(p, f"{where} [[propagation]]") for p in doc["propagation"]),
        tuple(sinks),
        guards,
    )


@cache
def recipes(lang: str) -> tuple[Recipe, ...]:
    """Every combination of ``lang``, in data order: for each sink, its dangerous bodies and
    (where it has them) its safe bodies, each with no guard and each guard of its kind, each
    with every source × propagation. A check in front of a safe sink, holding or not, is then
    as common in decoys as in bugs. Sources with a caller go only with ``tainted`` sinks,
    where the caller decides the label."""
    p = parts(lang)
    out = []
    for sink in p.sinks:
        guards: list[Part | None] = [None, *(g for g in p.guards if sink.kind in g.kinds)]
        sources = [s for s in p.sources if sink.tainted or not s.caller]
        for safe_sink in (False, True) if sink.safe else (False,):
            for g in guards:
                for src in sources:
                    for prop in p.propagations:
                        out.append(Recipe(lang, sink.kind, src, prop, sink, g, safe_sink))
    return tuple(out)


def draw_recipe(
    rng: random.Random, lang: str, kind: str | None = None, vulnerable: bool | None = None
) -> Recipe:
    """One recipe of ``lang`` drawn uniformly, optionally of one ``kind`` and label."""
    pool = [
        r
        for r in recipes(lang)
        if (kind is None or r.kind == kind) and (vulnerable is None or r.vulnerable == vulnerable)
    ]
    if not pool:
        raise CatalogueError(f"no {lang} recipe of kind {kind!r} with vulnerable={vulnerable}")
    return rng.choice(pool)


# --- rendering -------------------------------------------------------------------------------------


def _pick(rng: random.Random, pool: Iterable[str], taken: set[str]) -> str:
    free = [x for x in pool if x not in taken]
    out = rng.choice(free) if free else rng.choice(list(pool)) + str(len(taken))
    taken.add(out)
    return out


def _fill(template: str, slots: Mapping[str, str]) -> str:
    return _SLOT.sub(lambda m: slots.get(m.group(1), m.group(0)), template)


def render_bug(
    recipe: Recipe, host: Host, rng: random.Random, name: str | None = None
) -> RenderedBug:
    """Render ``recipe`` as one function for ``host``, its style drawn from ``rng``.

    The code carries no marks; ``start_line`` and ``sink_line`` (1-based in ``code``) are the
    ground truth. ``name`` fixes the function's name (otherwise drawn, avoiding
    ``host.taken``); Python ``imports`` are statements, JS ones the generator's specs
    (``"fs"``, ``"{execSync}=child_process"``). A planted secret is drawn from ``rng``."""
    r = render_marked(recipe, host, rng, name)
    if _SECRET in r.code:
        token = secret_token(rng, 24, _ALNUM)
        r = replace(r, code=r.code.replace(_SECRET, token))
    return r


_SECRET = "«secret_alnum»"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def render_marked(
    recipe: Recipe, host: Host, rng: random.Random, name: str | None, body: int | None = None
) -> RenderedBug:
    """:func:`render_bug` with a planted secret left as ``«secret_alnum»`` (the generator
    draws it per placement, so no token repeats across tasks); ``body`` fixes which of the
    sink's bodies (dangerous or safe, as the recipe says) is used."""
    if recipe.lang != host.lang:
        raise CatalogueError(f"a {recipe.lang} recipe cannot go into a {host.lang} host")
    p = parts(recipe.lang)
    st, pools = p.style, p.style.pools
    taken = set(host.taken)
    py = recipe.lang == "python"
    if name is None:
        verb, noun = rng.choice(pools["verbs"]), rng.choice(pools["nouns"])
        name = f"{verb}_{noun}" if py else verb + noun
        if name in taken:
            name += "_v2" if py else "V2"
    taken.add(name)
    choices = recipe.sink.safe if recipe.safe_sink else recipe.sink.bodies
    text = rng.choice(choices) if body is None else choices[body]
    # The templates' own locals ("sql", "text", "fh") are not free for the drawn names.
    steps = (recipe.source, recipe.propagation, recipe.guard)
    literal = " ".join([text, *(s.code for s in steps if s is not None), *pools["fails"]])
    taken |= set(_WORD.findall(_SLOT.sub(" ", literal)))
    v = _pick(rng, pools["values"], taken)
    slots = {
        "v": v,
        "m": _pick(rng, pools["mappings"], taken),
        "key": rng.choice(pools["keys"]),
        "table": rng.choice(pools["tables"]),
        "col": rng.choice(pools["columns"]),
        "host": rng.choice(pools["hosts"]),
        "base": rng.choice(pools["bases"]),
        "what": v,
        "const": rng.choice(pools["consts"]),
    }
    fail = rng.choice(pools["fails"])
    params = [*recipe.sink.params, *(_fill(x, slots) for x in recipe.source.params)]
    lines: list[tuple[int, str]] = []  # (depth, text with marks)
    depth, closes = 1, 0

    def add(template: str, d: int) -> None:
        for ln in template.split("\n"):
            stripped = ln.lstrip(" ")
            rel = (len(ln) - len(stripped)) // (4 if py else 2)
            lines.append((d + rel, _fill(stripped, slots)))

    if rng.random() < 0.35:
        lines.append((depth, st.comment.replace("@text", rng.choice(COMMENTS))))
    for step in (recipe.source, recipe.propagation, recipe.guard):
        if step is None or not step.code:
            continue
        if step.rebind:
            slots["v2"] = _pick(rng, pools["renamed"], taken)
        add(step.code.replace("@fail", fail), depth)
        if step.rebind and not step.stale:
            slots["v"] = slots["v2"]
        if step.opens:
            depth += 1
            if not py:
                closes += 1
    add(text, depth)
    for d in range(depth - 1, depth - 1 - closes, -1):
        lines.append((d, st.close_block))
    text = "\n".join(t for _, t in lines)
    is_async = (not py and "await " in text) or rng.random() < 0.3
    header = st.async_header if is_async else st.header
    if py and host.method:
        params.insert(0, "self")
    if not py:
        header = header.replace("«afn»", "async " if host.method else "async function ")
        header = header.replace("«fn»", "" if host.method else "function ")
    out = [host.indent + _fill(header, {"fn": name, "params": ", ".join(params)})]
    start = sink = 0
    for d, t in lines:
        m = _MARK.search(t)
        if m:
            t = t[: m.start()]
            if m.group(1) == "sink":
                sink = len(out) + 1
            elif not start:
                start = len(out) + 1
        out.append(host.indent + st.indent * d + t)
    if not py:
        out.append(host.indent + "}")
    if recipe.source.caller:
        out += _caller(recipe, host, name, slots, is_async and py, rng)
    guard = recipe.guard
    imports = [*recipe.sink.imports, *(guard.imports if guard else ())]
    if recipe.safe_sink:
        imports += recipe.sink.safe_imports
    return RenderedBug(
        "\n".join(out),
        name,
        tuple(dict.fromkeys(imports)),
        recipe.kind,
        recipe.vulnerable,
        min(start or sink, sink),
        sink,
        _describe(recipe, name, slots),
        recipe.name,
    )


_CALLER_PREFIXES = ("nightly", "default", "scheduled", "preview", "sync", "batch")


def _caller(
    recipe: Recipe, host: Host, name: str, slots: dict[str, str], aw: bool, rng: random.Random
) -> list[str]:
    """The function's one caller, after it, passing ``source.caller`` and the sink's params."""
    py = recipe.lang == "python"
    slots = {**slots, "constant": _fill(recipe.sink.constant, slots)}
    outer = [*recipe.sink.params, *(_fill(x, slots) for x in recipe.source.caller_params)]
    args = ", ".join([*recipe.sink.params, _fill(recipe.source.caller, slots)])
    prefix = rng.choice(_CALLER_PREFIXES)
    me = ("self." if py else "this.") if host.method else ""
    i, ind = host.indent, parts(recipe.lang).style.indent
    if py:
        fn = ("async def " if aw else "def ") + f"{prefix}_{name}"
        call = f"return {'await ' if aw else ''}{me}{name}({args})"
        return ["", "", f"{i}{fn}({', '.join(['self'] * host.method + outer)}):", i + ind + call]
    cname = name + prefix.capitalize()  # a suffix: the name may still be a «placeholder»
    head = ("" if host.method else "function ") + f"{cname}({', '.join(outer)}) {{"
    return ["", i + head, i + ind + f"return {me}{name}({args});", i + "}"]


def _describe(recipe: Recipe, name: str, slots: Mapping[str, str]) -> str:
    what = _fill(recipe.sink.what, slots)
    title = BUG_KINDS[recipe.kind].title
    if recipe.safe_sink:
        return f"Safe: `{name}` looks like a {title.lower()} sink, but does it safely."
    if not recipe.vulnerable and recipe.source.trusted:
        src = (
            "its only caller passes a constant"
            if recipe.source.caller
            else "the value is a constant"
        )
        return f"Safe: `{name}` {what}, but {src}, not input."
    g = recipe.guard
    if g is None or not recipe.sink.tainted:
        return f"`{name}` {what} with no check ({title})."
    gw = _fill(g.what, slots)
    if g.safe:
        return f"Safe: `{name}` {what}, but only after a check that holds: {gw}."
    return f"`{name}` {what}; its check does not stop the attack: {gw} ({title})."
