"""Planting: choosing the snippets of a project and putting them into its sections.

:func:`plan_snippets` draws the bugs and decoys of a (sub)project; :func:`place` puts one
into a host section (and its source route into the routes of an entity, sometimes through
a thin hop function in a third module); :func:`place_twin` adds a cross-file bug's helper as
clean code with a clean caller. :func:`insert_block` is the one way a block joins a section,
for planted and sprinkled blocks alike.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from deeprepo.rl.tasks.catalogue import snippets
from deeprepo.rl.tasks.composed import any_section_code, is_composed
from deeprepo.rl.tasks.flows import renamed, twin_caller
from deeprepo.rl.tasks.mutate import strip_comments
from deeprepo.rl.tasks.naming import secret_token
from deeprepo.rl.tasks.project import Project
from deeprepo.rl.tasks.render import Block, Section, TemplateError, fill
from deeprepo.rl.tasks.snippets import ENTITY_HOSTS, Snippet


@dataclass
class Placed:
    """A snippet placed in a project: its tag (marks read back as ``⟦tag:name⟧``) and text."""

    tag: str
    snippet: Snippet
    description: str
    sink_fn: str


# --- planning --------------------------------------------------------------------------------------


def _claim(s: Snippet) -> tuple[str, str] | None:
    """Project-wide slot a replacing snippet takes (entity-level slots are settled at placement)."""
    return (s.host, s.block.key) if s.replaces and s.host not in ENTITY_HOSTS else None


def plan_snippets(
    rng: random.Random, lang: str, n_bugs: int, n_decoys: int, want_cross: bool
) -> list[Snippet]:
    """Bugs of distinct kinds (then repeats), then decoys, with no two taking the same slot."""
    cat = list(snippets(lang))
    claims: set[tuple[str, str]] = set()
    chosen: list[Snippet] = []
    for vulnerable, count in ((True, n_bugs), (False, n_decoys)):
        kinds = sorted({s.kind for s in cat if s.vulnerable == vulnerable})
        rng.shuffle(kinds)
        picked = 0
        for i in range(len(kinds) * 3):
            if picked >= count:
                break
            kind = kinds[i % len(kinds)]
            # One cross-file helper is planted once: its bug and its guarded decoy share the
            # helper's name and their routes' names, so the second would find no free route.
            helpers = {c.block.key for c in chosen if c.source}
            variants = [
                s
                for s in cat
                if s.kind == kind
                and s.vulnerable == vulnerable
                and s not in chosen
                and not (s.source and s.block.key in helpers)
            ]
            rng.shuffle(variants)
            # A task with a cross-file bug gets a cross-file decoy too (a hand-written helper
            # whose caller checks first): else the helpers' lines, diluted among the composed
            # decoys, would sit in bugs far more often than in decoys.
            if want_cross and not any(c.source for c in chosen if c.vulnerable == vulnerable):
                variants.sort(key=lambda s: s.source is None)
            for v in variants:
                c = _claim(v)
                if c is None or c not in claims:
                    if c:
                        claims.add(c)
                    chosen.append(v)
                    picked += 1
                    break
    return chosen


def needed_utils(plan: list[Snippet], util_ids: set[str]) -> set[str]:
    """The utility modules the planned snippets are hosted in or use."""
    out = set()
    for s in plan:
        for n in (s.host, *s.needs):
            if n in util_ids:
                out.add(n)
    return out


# --- placement -------------------------------------------------------------------------------------


def _filled_key(block: Block, sec: Section, proj: Project) -> str:
    return fill(block.key, {**proj.ctx, **sec.ctx})


def insert_block(rng: random.Random, sec: Section, block: Block, lang: str) -> None:
    """Put ``block`` at a random place in ``sec`` (never first, and JS routes before ``/:id``)."""
    # Never first: modules open with constants and classes with their constructor.
    hi = len(sec.blocks)
    if lang == "js" and sec.id.startswith("routes:"):
        # Express matches in registration order: a static path must come before "/:id".
        hi = next((i for i, b in enumerate(sec.blocks) if b.key == "get"), hi)
    sec.blocks.insert(rng.randint(min(1, hi), hi), block)


_ANY_HELPER = Snippet("any-helper", "off-by-one", "python", "validators", Block("_", ""), "")


def portable(snippet: Snippet) -> bool:
    """A module-level helper or constant that reads the same in any module of the project."""
    return not (
        snippet.replaces or snippet.host in ENTITY_HOSTS or snippet.host == "auth" or snippet.pinned
    )


def host_sections(proj: Project, snippet: Snippet) -> list[Section]:
    """Where ``snippet`` may go: its host role, or for a portable one any function-style module
    (so the file that holds a bug kind is not fixed by the kind), and for a composed one the
    classes as well (``composed.any_section_code``)."""
    if not portable(snippet):
        return proj.sections(snippet.host)
    # The config module holds constants: a function there, glued between settings, would be
    # planted code only (sprinkling puts none there, ``NO_FUNCTION_ROLES``).
    mods = [
        sec
        for sec in _function_modules(proj)
        if snippet.block.key.isupper() or role_of(sec) not in NO_FUNCTION_ROLES
    ]
    if is_composed(snippet):
        # Classes and the app module too: a composed snippet needs no caller, so no export.
        more = [
            sec
            for sid, (_f, sec) in proj.registry.items()
            if (sec.class_name is not None or sid == "app") and role_of(sec) != "tests"
        ]
        return mods + more
    return mods


def _function_modules(proj: Project) -> list[Section]:
    # A module alias two sections share (product.model.js and product.validator.js are both
    # "product") would import the wrong one in a caller.
    handles = Counter(
        h
        for h, _ in {
            (sec.handle, f.path) for f, sec in proj.registry.values() if not sec.class_name
        }
    )
    return [
        sec
        for sid, (f, sec) in proj.registry.items()
        if sec.class_name is None
        and handles[sec.handle] == 1
        and sid.split(":")[0] not in ("app", "tests")
        and (proj.lang == "python" or (f.exports == "functions" and sec.handle.isidentifier()))
    ]


_SIZE_BINS = 4
# The roles that take no function, planted or sprinkled (``sprinkle`` shares them).
NO_FUNCTION_ROLES = frozenset({"tests", "config"})


def role_of(sec: Section) -> str:
    """The role a section was made for (``routes``, ``svc``, ``tests`` …): its id's head."""
    return sec.id.split(":", 1)[0]


def size_bins(proj: Project) -> dict[str, int]:
    """Each code file's size quartile among the project's files that can hold a function
    (tests and config never do), by its rendered length (each of them ends up with one
    planted or look-alike block, which moves none of them in the ranking). Ranked among all
    code files, the smallest quartile was mostly tests
    and config, and its share of the bugs fell on the few small modules that can host (the
    utilities, ``db``, ``errors``): their names marked the bugs. Taken once, before the
    first snippet goes in, and kept: re-ranked after each placement, a file that took a
    block would change quartile and the draw would chase it."""
    if not proj.size_bins:
        gets_block = {
            f.path for f, sec in proj.registry.values() if role_of(sec) not in NO_FUNCTION_ROLES
        }
        renderer = proj.renderer()
        code = sorted(
            ((renderer.render(f) if f.lang != "text" else f.text).count("\n"), path)
            for path, f in proj.files.items()
            if (f.lang != "text" or path.endswith(_CODE_EXT)) and path in gets_block
        )
        proj.size_bins = {path: i * _SIZE_BINS // len(code) for i, (_, path) in enumerate(code)}
    return proj.size_bins


def by_file(rng: random.Random, proj: Project, hosts: list[Section]) -> list[Section]:
    """``hosts`` in an order that draws the file first, then a section in it.

    The file is drawn so that the project's planted blocks fall in each size quartile of its
    host files (:func:`size_bins`) as often as files drawn from all of them would: a
    quartile's weight is what it lacks of its share of the blocks planted so far, this one
    included (a quartile with no host gives its share to the nearest one with hosts), spread
    evenly over its host files. Host roles (helpers, routes, classes) are larger than the
    files that never host (tests, entry points), and the snippets tied to a role (routes,
    auth, entity classes) go to large files whatever the draw, so a uniform draw over hosts
    put most bugs in the larger half (issue 19); the portable snippets, placed after them,
    make up for it. Files that already hold a planted block come last: a clean file gets
    one look-alike block (``sprinkle``), so a file with two planted blocks would stand out
    by size."""
    quartile = size_bins(proj)
    paths = sorted({proj.registry[sec.id][0].path for sec in hosts})
    hosting = Counter(quartile.get(p, 0) for p in paths)
    share = dict.fromkeys(hosting, 0.0)
    for q, count in Counter(quartile.values()).items():
        share[min(hosting, key=lambda h: (abs(h - q), -h))] += count / len(quartile)
    planted = {f.path for f, sec in proj.registry.values() if any(b.tag for b in sec.blocks)}
    placed = Counter(quartile[p] for p in planted if p in quartile)
    lacking = {q: share[q] * (len(planted) + 1) - placed[q] for q in hosting}

    def key(path: str) -> tuple[bool, float]:
        q = quartile.get(path, 0)
        # Every quartile with hosts keeps some chance: the draw is not a schedule.
        weight = max(lacking[q], _FLOOR * share[q]) / hosting[q]
        # Efraimidis–Spirakis: sorting by u ** (1 / w) is a weighted draw without replacement.
        return (path in planted, -(rng.random() ** (1.0 / weight)))

    rank = {p: i for i, p in enumerate(sorted(paths, key=key))}
    rng.shuffle(hosts)
    return sorted(hosts, key=lambda sec: rank[proj.registry[sec.id][0].path])


_FLOOR = 0.1
_CODE_EXT = (".py", ".js", ".cjs", ".mjs")


def file_keys(proj: Project, sec: Section) -> set[str]:
    """The filled keys and exported names of every block in ``sec``'s file (names already
    taken there: a block's key is not always the name it declares, ``run_batch`` declares
    ``runBatch``)."""
    f = proj.registry[sec.id][0]
    out: set[str] = set()
    for _, (g, s) in proj.registry.items():
        if g is f:
            for b in s.blocks:
                out |= declared_names(b, s, proj)
    return out


def declared_names(block: Block, sec: Section, proj: Project) -> set[str]:
    """The names ``block`` declares in ``sec``'s file: its key and (JS) what it exports, which
    is not always its key (``run_batch`` declares ``runBatch``). A name its template cannot
    fill here declares nothing."""
    ctx = {**proj.ctx, **sec.ctx, **block.ctx}
    out: set[str] = set()
    for name in (block.key, *block.exports):
        try:
            out.add(fill(name, ctx))
        except TemplateError:
            pass
    return out


def place(rng: random.Random, proj: Project, snippet: Snippet, tag: str) -> Placed | None:
    """Put ``snippet`` (and its source route) into the project; ``None`` if no host fits."""
    hosts = by_file(rng, proj, host_sections(proj, snippet))
    secrets = {}
    if "«secret_hex»" in snippet.block.code:
        secrets["secret_hex"] = secret_token(rng, 40, "0123456789abcdef")
    if "«secret_alnum»" in snippet.block.code:
        secrets["secret_alnum"] = secret_token(
            rng, 24, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        )
    for sec in hosts:
        key = _filled_key(snippet.block, sec, proj)
        if snippet.replaces:
            present = any(_filled_key(b, sec, proj) == key for b in sec.blocks)
        else:  # a new module-level name must be new to the whole file
            present = key in file_keys(proj, sec)
        if snippet.replaces != present or any(
            b.tag and b.key == snippet.block.key for b in sec.blocks
        ):
            continue
        block = snippet.block.tagged(tag, **secrets)
        if is_composed(snippet):
            block = replace(block, code=any_section_code(block.code, proj.lang))
        if snippet.replaces:
            idx = next(i for i, b in enumerate(sec.blocks) if b.key == snippet.block.key)
            sec.blocks[idx] = block
        else:
            insert_block(rng, sec, block, proj.lang)
        ctx = {**proj.ctx, **sec.ctx, **block.ctx}
        placed = Placed(tag, snippet, fill(snippet.description, ctx), key)
        if snippet.source is not None:
            _place_source(rng, proj, snippet.source, sec, key, tag)
        return placed
    return None


def _place_source(
    rng: random.Random, proj: Project, source: Block, sink: Section, sink_fn: str, tag: str
) -> None:
    routes = proj.sections("routes")
    if sink.entity is not None:
        routes = [r for r in routes if r.entity == sink.entity]
    else:
        rng.shuffle(routes)
    target, fn = sink.id, sink_fn
    hop = _place_hop(rng, proj, source, sink, sink_fn) if rng.random() < _HOP_RATE else None
    if hop is not None:
        target, fn = hop
    code = source.code.replace("«sink.»", f"«{target}.»")
    block = Block(
        source.key,
        code,
        imports=source.imports,
        names=source.names,
        uses=tuple(target if u == "sink" else u for u in source.uses),
        ctx={"sink_fn": fn},
    )
    for sec in routes:
        key = _filled_key(block, sec, proj)
        if any(_filled_key(b, sec, proj) == key for b in sec.blocks):
            continue
        insert_block(rng, sec, block.tagged(tag), proj.lang)
        return


_HOP_RATE = 0.4
_HOP_PREFIXES = {
    "python": ("process_", "handle_", "run_", "do_"),
    "js": ("process", "handle", "run", "do"),
}


def _place_hop(
    rng: random.Random, proj: Project, source: Block, sink: Section, sink_fn: str
) -> tuple[str, str] | None:
    """A thin function in another module between the route and the sink, so the flow spans
    two calls: route → hop → sink. Returns the hop's section id and name."""
    m = re.search(r"«sink\.»«sink_fn»\(([\w, ]*)\)", source.code)
    if m is None:
        return None
    args = m.group(1)
    prefix = rng.choice(_HOP_PREFIXES[proj.lang])
    name = prefix + (sink_fn if proj.lang == "python" else sink_fn[:1].upper() + sink_fn[1:])
    if "«" in name:
        return None
    hop = pass_through(rng, proj, name, sink, sink_fn, args, lambda sec: sec is not sink)
    return (hop.id, name) if hop is not None else None


def pass_through(
    rng: random.Random,
    proj: Project,
    name: str,
    callee: Section,
    fn: str,
    args: str,
    keep: Callable[[Section], bool],
) -> Section | None:
    """Put a thin function ``name(args)`` that returns ``callee``'s ``fn(args)`` into a
    helper module's section that ``keep`` accepts (never a route, never a file that already
    has the name); the section it went into, or ``None``."""
    cands = [
        sec
        for sec in host_sections(proj, _ANY_HELPER)
        if keep(sec) and sec.id.split(":")[0] != "routes"
    ]
    rng.shuffle(cands)
    for sec in cands:
        if name in file_keys(proj, sec):
            continue
        if proj.lang == "python":
            code = f"def {name}(«selfp»{args}):\n    return «{callee.id}.»{fn}({args})"
            block = Block(name, code, uses=(callee.id,))
        else:
            code = f"«afn»{name}({args}) {{\n  return «{callee.id}.»{fn}({args});\n}}"
            block = Block(name, code, uses=(callee.id,), exports=(name,))
        insert_block(rng, sec, block, proj.lang)
        return sec
    return None


def place_twin(rng: random.Random, proj: Project, names: frozenset[str] = frozenset()) -> bool:
    """A cross-file bug's helper as clean code: same text, called with constant arguments;
    one of the helpers ``names`` when any is one (the task's own cross-file bugs: else the
    helpers it plants would be rarer in its clean code than in its bugs)."""
    cands = [s for s in snippets(proj.lang) if s.vulnerable and s.twin_args]
    cands = [s for s in cands if s.name in names] or cands
    snippet = renamed(rng.choice(cands), rng)
    hosts = host_sections(proj, snippet)
    rng.shuffle(hosts)
    for sec in hosts:
        key = _filled_key(snippet.block, sec, proj)
        if key in file_keys(proj, sec):
            continue
        code = strip_comments(snippet.block.code, proj.lang)
        insert_block(rng, sec, replace(snippet.block, code=code), proj.lang)
        callers = [
            s
            for sid, (_f, s) in proj.registry.items()
            if sid.split(":")[0] not in ("app", "tests", "config")
        ]
        rng.shuffle(callers)
        for csec in callers:
            caller = twin_caller(snippet, rng, sec.id, key)
            if _filled_key(caller, csec, proj) not in file_keys(proj, csec):
                insert_block(rng, csec, caller, proj.lang)
                return True
        return True
    return False
