"""Making labels depend on reading: safe risky-API uses everywhere, shuffled order, comments.

Applied to a project after its bugs and decoys are planted:

* :func:`shuffle_constants` reorders the module-level constants of the config section, so
  a slot (``SECRET_KEY``) has no fixed line;
* :func:`sprinkle_safe_uses` inserts clean blocks from the safe-use pool (``[[safe]]`` in
  ``data/<lang>/safe.toml`` and ``logic.toml``) at random places in most code sections, so
  risky APIs are common in clean code;
* :func:`mutate_comments` runs every block through :func:`mutate.mutate_block`.
"""

from __future__ import annotations

import random
import re

from deeprepo.rl.tasks.catalogue import safe_pool
from deeprepo.rl.tasks.composed import echo_use, is_composed_use, restyled_use
from deeprepo.rl.tasks.mutate import choose_shape, mutate_block
from deeprepo.rl.tasks.naming import secret_token
from deeprepo.rl.tasks.planting import NO_FUNCTION_ROLES, declared_names, insert_block, role_of
from deeprepo.rl.tasks.project import Project
from deeprepo.rl.tasks.render import Block, Section, TemplateError, fill
from deeprepo.rl.tasks.snippets import SafeUse, Snippet

_HEX = "0123456789abcdef"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def shuffle_constants(rng: random.Random, proj: Project) -> None:
    """Independent module-level settings: any order is valid."""
    for sec in proj.sections("config"):
        rng.shuffle(sec.blocks)


def _fits(use: SafeUse, sec: Section) -> bool:
    role = role_of(sec)
    if use.where == "fn":
        return role not in NO_FUNCTION_ROLES
    if use.where == "const":
        return sec.class_name is None and role not in ("app", "tests", "routes")
    if use.where == "route":
        return role == "routes"
    if use.where == "repo":
        return role == "repo"
    return role == use.where


_SINK_LIKE = re.compile(
    r"shell=True|subprocess|\bexec\(|execFile|requests\.get|fetch\(|pickle|yaml\.load|"
    r"md5|sha1|createHash|\.execute\(|query\(|open\(|readFile|send_file"
)


_WEIGHTS: dict[int, float] = {}


def _weight(use: SafeUse) -> float:
    """Uses that look like the sinks of planted bugs are drawn three times as often."""
    w = _WEIGHTS.get(id(use))
    if w is None:
        w = _WEIGHTS[id(use)] = 3.0 if _SINK_LIKE.search(use.block.code) else 1.0
    return w


def _filled(key: str, ctx: dict[str, str]) -> str | None:
    try:
        return fill(key, ctx)
    except TemplateError:
        return None


# Clean renderings of each planted composed bug's sink sprinkled per bug (``echo_use``).
ECHOES_PER_BUG = 4


def sprinkle_safe_uses(rng: random.Random, proj: Project, planted: tuple[Snippet, ...] = ()) -> int:
    """Add clean risky-API blocks to each code file; returns how many were added.

    Counts are drawn per file, not per section, so a file with many sections (a compact
    ``services.py``) does not collect more of them, and every file that can hold a function
    but holds no planted block gets one more, drawn from the composed safe ways first: then
    a planted-looking block, and the lines it adds, are in every such file whether or not it
    holds a bug (the real substrate's one block per file, ``realtask``). Each composed bug in
    ``planted`` turns up to :data:`ECHOES_PER_BUG` of those sprinkled blocks, drawn uniformly,
    into clean renderings of its own sink: a task's bug kinds are drawn per task, so without
    them the sink lines of the kinds a task plants would be commoner inside its bugs than
    anywhere else in it."""
    pool = safe_pool(proj.lang)
    tables = sorted(e.plural for e, _ in proj.structure.entities)
    quoted = ", ".join(f'"{t}"' for t in tables)
    table_ctx = {
        "table_names": f"({quoted}{',' if len(tables) == 1 else ''})",
        "table_names_js": f"[{quoted}]",
    }
    added = 0
    in_file: dict[str, set[str]] = {}
    by_file: dict[str, list[Section]] = {}
    for _sid, (f, sec) in proj.registry.items():
        keys = in_file.setdefault(f.path, set())
        by_file.setdefault(f.path, []).append(sec)
        for b in sec.blocks:
            keys |= declared_names(b, sec, proj)
    slots: list[tuple[str, list[Section], bool]] = []  # (file, hosts, lookalike)
    for path, secs in by_file.items():
        r = rng.random()
        want = 0 if r < 0.3 else (1 if r < 0.75 else 2)
        if all(role_of(sec) == "config" for sec in secs):
            want = rng.randint(0, 2)  # constants only
        hosts = [sec for sec in secs if any(_fits(u, sec) for u in pool)]
        if not hosts:
            continue
        fill_in = any(u.where == "fn" and _fits(u, sec) for sec in hosts for u in pool) and not any(
            b.tag for sec in secs for b in sec.blocks
        )
        slots += [(path, hosts, fill_in and n == 0) for n in range(want + fill_in)]
    echoes = _echo_slots(rng, slots, planted)
    # What fits a section depends on its role and on whether it is a class; scanning the pool
    # once per kind of section, not per block, keeps a larger pool cheap.
    fitting: dict[tuple[str, bool, bool], tuple[list[SafeUse], list[float]]] = {}
    for slot, (path, hosts, lookalike) in enumerate(slots):
        echo = echoes.get(slot)
        if echo is None:
            sec = rng.choice(hosts)
            key = (role_of(sec), sec.class_name is None, lookalike)
            if key not in fitting:
                fitting[key] = _fitting(pool, sec, lookalike, proj.lang)
            uses, inv = fitting[key]
        else:
            sec = rng.choice([h for h in hosts if _fits(echo, h)])
            uses, inv = [echo], [1.0 / _weight(echo)]
        added += _sprinkle_one(rng, proj, sec, uses, inv, in_file[path], table_ctx)
    return added


def _fitting(
    pool: tuple[SafeUse, ...], sec: Section, lookalike: bool, lang: str
) -> tuple[list[SafeUse], list[float]]:
    """The uses of ``pool`` that fit ``sec`` (composed safe ways only when ``lookalike``, if
    any fit), with the inverse of each one's weight."""
    fits = [u for u in pool if _fits(u, sec)]
    if lookalike:
        fits = [u for u in fits if is_composed_use(u, lang)] or fits
    return fits, [1.0 / _weight(u) for u in fits]


def _echo_slots(
    rng: random.Random, slots: list[tuple[str, list[Section], bool]], planted: tuple[Snippet, ...]
) -> dict[int, SafeUse]:
    """Which sprinkle slots carry an echo of a planted bug's sink (``echo_use``), drawn
    uniformly among the slots a function can take: the echoes change what clean code holds,
    not how much of it there is."""
    free = [
        k
        for k, (_p, hosts, lookalike) in enumerate(slots)
        if not lookalike and any(role_of(h) not in NO_FUNCTION_ROLES for h in hosts)
    ]
    uses = [u for s in planted for _ in range(ECHOES_PER_BUG) if (u := echo_use(s, rng))]
    return dict(zip(rng.sample(free, min(len(free), len(uses))), uses, strict=False))


def _sprinkle_one(
    rng: random.Random,
    proj: Project,
    sec: Section,
    fits: list[SafeUse],
    inv_weights: list[float],
    taken: set[str],
    table_ctx: dict[str, str],
) -> int:
    """One clean block of ``fits`` into ``sec``; 1 if it went in."""
    # Weighted order without replacement (Efraimidis–Spirakis): sink-like uses come first.
    keys = [rng.random() ** w for w in inv_weights]
    order = sorted(range(len(fits)), key=lambda k: -keys[k])
    base = {**proj.ctx, **sec.ctx}
    for k in order:  # module-level names must be unique in their file (``taken``)
        use = restyled_use(fits[k], proj.lang, rng)
        name = rng.choice(use.names)
        key = _filled(name, base)
        if key is None or key in taken:
            continue
        ctx = {**table_ctx, "nm": key}
        for ph, n, alphabet in (
            ("hex40", 40, _HEX),
            ("hex16", 16, _HEX),
            ("alnum24", 24, _ALNUM),
        ):
            if f"«{ph}»" in use.block.code:
                ctx[ph] = secret_token(rng, n, alphabet)
        block = Block(
            key,
            use.block.code,
            imports=use.block.imports,
            names=use.block.names,
            uses=use.block.uses,
            exports=use.block.exports,
            ctx=ctx,
        )
        insert_block(rng, sec, block, proj.lang)
        taken.add(key)
        return 1
    return 0


def mutate_comments(rng: random.Random, proj: Project, rate: float = 0.3) -> None:
    """One shape per project, the same comment treatment for clean, planted and decoy blocks:
    their own comments dropped, pool comments added (see ``mutate``)."""
    shape = choose_shape(rng)
    for _sid, (f, sec) in proj.registry.items():
        if f.lang not in ("python", "js"):
            continue
        method = sec.class_name is not None
        # Every block's own comments go, clean ones too: else the only comments planted code
        # has (pool comments) would be rarer in clean code than in planted code.
        sec.blocks = [mutate_block(rng, b, f.lang, True, rate, shape, method) for b in sec.blocks]
