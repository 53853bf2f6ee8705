"""The generator's catalogues, read from the data files under ``data/<lang>/``.

Six TOML files per language, each in one schema for Python and JavaScript:

* ``bugs.toml``, ``logic.toml``, ``decoys.toml``: ``[[snippet]]``, the planted bugs and
  decoys (:class:`~deeprepo.rl.tasks.snippets.Snippet`), a cross-file bug with its
  ``[snippet.source]`` route and ``[snippet.guard]``;
* ``safe.toml``, ``logic.toml``: ``[[safe]]``, clean blocks sprinkled over every project;
* ``clean.toml``: ``[[entity.<role>]]``, ``[[core.<role>]]`` and ``[part.<name>]``, the
  clean code every project is built from;
* ``utils.toml``: ``[util.<id>]`` with its ``[[util.<id>.block]]``;
* ``compose.toml``: the parts of the compositional catalogue (``compose``), whose every
  combination joins the snippets and whose safe ways of writing a sink join the safe pool.

A block (every kind of table above) has ``key``, ``code`` and optionally ``imports``,
``names`` (``[section, name]`` pairs), ``uses`` and ``exports``. Each file is parsed once
and checked as it is read: a missing or unknown key, a value of the wrong type, an
unknown ``«placeholder»``, an ``«alias.»`` the block does not ``use``, a snippet without
its ``⟦sink⟧``, a host or replaced slot that no project has — each is a
:class:`~deeprepo.rl.tasks.datafile.CatalogueError` naming the file and the entry.
Filling templates, choosing names and rendering stay code (``render``, ``planting``,
``sprinkle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from deeprepo.rl.tasks.composed import composed_safe_uses, composed_snippets
from deeprepo.rl.tasks.datafile import (
    CATALOGUE_LANGS,
    CatalogueError,
    Entry,
    check_template,
    document,
    marks,
)
from deeprepo.rl.tasks.flows import guarded_decoys
from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import (
    ENTITY_HOSTS,
    CleanCode,
    Guard,
    SafeUse,
    Snippet,
    UtilModule,
)
from deeprepo.rl.tasks.taxonomy import BUG_KINDS

PLACEHOLDERS = frozenset(
    {
        # an entity (naming.Entity.ctx, contexts.entity_context)
        *("entity", "entities", "Entity", "Entities", "entityC", "entitiesC", "table", "url"),
        *("label", "labelC", "num", "numC", "num_type", "num_url", "NumP", "domain"),
        *("r_list", "r_get", "r_create", "r_update", "r_set", "r_delete", "r_count"),
        *("s_list", "s_get", "s_create", "s_adjust", "s_delete"),
        *("field_decls", "field_assigns", "json_fields", "nf_msg", "adjust_msg", "schema_msg"),
        # how a section is written (contexts.style_context)
        *("selfp", "self0", "me.", "conn", "afn", "fn", "dbq", "dbpool"),
        # the project (generator._subproject, project.build_project) and its wiring (project)
        *("pkg_file", "pkg_name", "app_title", "api_prefix", "page_size", "env_prefix", "port"),
        *("currency", "bad_name_msg", "schema_sql", "config_module", "register_blueprints"),
        *("bp", "bp_name", "bp_prefix", "rp", "rp_list", "mount_routes", "app_rel"),
        # drawn when a block is placed: planted secrets and the called helper (generator),
        # a sprinkled block's name, tokens and table list (sprinkle)
        *("secret_hex", "secret_alnum", "sink_fn"),
        *("nm", "hex40", "hex16", "alnum24", "table_names", "table_names_js"),
    }
)
"""Every ``«name»`` a template may use; ``«alias.»`` call prefixes come from ``uses``."""
ENTITY_ROLES = ("model", "repo", "svc", "schema", "routes", "tests")
CORE_ROLES = ("config", "errors", "db", "auth")
PARTS = {
    "python": ("repo_init", "blueprint", "client_fixture", "app", "wsgi"),
    "js": ("repo_init", "router", "router_export", "app", "error_handler", "app_export", "server"),
}
"""Single clean blocks the project builder wires by name: Flask and Express apps are put
together differently, so these names are the one part of ``clean.toml`` that is per language."""
WHERES = frozenset({"fn", "const", "route", "repo", "svc", "tests"})
_TABLES = {
    "bugs": ("snippet",),
    "logic": ("snippet", "safe"),
    "decoys": ("snippet",),
    "safe": ("safe",),
    "clean": ("entity", "core", "part"),
    "utils": ("util",),
}
_SNIPPET_FILES = ("bugs", "logic", "decoys")
_SAFE_FILES = ("safe", "logic")


def _root(lang: str, name: str) -> Entry:
    root = Entry(document(lang, name), f"{lang}/{name}.toml")
    unknown = sorted(set(root.data) - set(_TABLES[name]))
    if unknown:
        root.fail(f"unknown table {unknown[0]!r} (this file holds: {', '.join(_TABLES[name])})")
    return root


# --- blocks ----------------------------------------------------------------------------------------


def _block(e: Entry, key: str | None = None, uses: tuple[str, ...] | None = None) -> Block:
    """The block of ``e`` (``key``/``uses`` given: fixed by the table kind, not read)."""
    block = Block(
        e.text("key") if key is None else key,
        e.text("code"),
        imports=e.texts("imports"),
        names=e.pairs("names"),
        uses=e.texts("uses") if uses is None else uses,
        exports=e.texts("exports"),
    )
    fields = [("key", block.key), ("code", block.code)]
    fields += [("imports", s) for s in block.imports]
    fields += [("names", n) for _, n in block.names]
    fields += [("exports", s) for s in block.exports]
    for field, template in fields:
        for alias in check_template(e, field, template, PLACEHOLDERS):
            if alias not in block.uses:
                e.fail(f"{field!r} calls «{alias}.» but 'uses' does not list {alias!r}")
    if ("«dbq»" in block.code or "«dbpool»" in block.code) and "db" not in block.uses:
        e.fail("'code' queries through «dbq»/«dbpool», so 'uses' must list 'db'")
    return block


def _blocks(e: Entry, key: str, label: str) -> tuple[Block, ...]:
    out = []
    for b in e.tables(key, label, required=True):
        out.append(_block(b))
        b.close()
    return tuple(out)


# --- planted snippets ------------------------------------------------------------------------------


def _host_slots(lang: str) -> dict[str, set[str]]:
    """Each host role a snippet may name → the keys of the clean blocks it has."""
    clean, utils = clean_code(lang), util_modules(lang)
    out = {role: {b.key for b in clean.entity[role]} for role in sorted(ENTITY_HOSTS)}
    out |= {role: {b.key for b in blocks} for role, blocks in clean.core.items()}
    out |= {uid: {b.key for b in m.blocks} for uid, m in utils.items()}
    return out


def _snippet(e: Entry, lang: str, slots: Mapping[str, set[str]]) -> Snippet:
    name, kind, host = e.text("name"), e.text("kind"), e.text("host")
    vulnerable = e.required_flag("vulnerable")
    if kind not in BUG_KINDS:
        e.fail(f"unknown kind {kind!r} (known: {', '.join(sorted(BUG_KINDS))})")
    if vulnerable == ("-decoy-" in name):
        e.fail("a decoy's name contains '-decoy-' and has vulnerable = false; a bug's neither")
    if host not in slots:
        e.fail(f"unknown host {host!r} (known: {', '.join(sorted(slots))})")
    needs = e.texts("needs")
    if bad := [n for n in needs if n not in slots or n in ENTITY_HOSTS]:
        e.fail(f"'needs' names {bad[0]!r}, which is not a project-wide section")
    replaces, pinned = e.flag("replaces"), e.flag("pinned")
    block = _block(e)
    if replaces and block.key not in slots[host]:
        e.fail(f"replaces {block.key!r}, but {host!r} has no such block")
    found = marks(e, "code", block.code)
    if found.count("sink") != 1 or set(found) - {"start", "sink", "end"}:
        e.fail(f"'code' needs one ⟦sink⟧ and may mark ⟦start⟧/⟦end⟧ (found {found})")
    description = e.text("description")
    check_template(e, "description", description, PLACEHOLDERS)
    source = _source(e)
    guard = _guard(e, source)
    if vulnerable and source is not None and guard is None:
        e.fail("a cross-file bug needs a [snippet.guard]: its guarded decoy is a test of reading")
    twin_args = e.text("twin_args", "")
    if twin_args and (source is None or not vulnerable):
        e.fail("only a cross-file bug has 'twin_args' (a clean caller of its helper)")
    e.close()
    return Snippet(
        name,
        kind,
        lang,
        host,
        block,
        description,
        vulnerable=vulnerable,
        replaces=replaces,
        source=source,
        needs=needs,
        pinned=pinned,
        guard=guard,
        twin_args=twin_args,
    )


def _source(e: Entry) -> Block | None:
    s = e.table("source", "[snippet.source]")
    if s is None:
        return None
    block = _block(s, uses=("sink",))
    if marks(s, "code", block.code) != ["source"]:
        s.fail("'code' needs exactly one mark, ⟦source⟧ on the line that reads the request")
    if "«sink.»«sink_fn»(" not in block.code:
        s.fail("'code' must call the helper as «sink.»«sink_fn»(...)")
    s.close()
    return block


def _guard(e: Entry, source: Block | None) -> Guard | None:
    g = e.table("guard", "[snippet.guard]")
    if g is None:
        return None
    if source is None:
        g.fail("only a snippet with a [snippet.source] route has a guard")
    code, imports, what = g.text("code"), g.texts("imports"), g.text("what")
    check_template(g, "code", code, PLACEHOLDERS)
    if marks(g, "code", code):
        g.fail("'code' may not hold marks: the guard is inserted into the marked route")
    rebind = g.texts("rebind")
    if rebind and (len(rebind) != 2 or f"«sink_fn»({rebind[0]})" not in source.code):
        g.fail("'rebind' is [old, new] where the route calls «sink_fn»(old)")
    g.close()
    return Guard(code, imports, what, (rebind[0], rebind[1]) if rebind else None)


@cache
def snippets(lang: str) -> tuple[Snippet, ...]:
    """The bugs and decoys of ``lang``: ``bugs``, ``logic`` and ``decoys`` in file order, a
    guarded decoy for each cross-file bug (``flows.guarded_decoys``), then every combination
    of the compositional catalogue (``composed.composed_snippets``)."""
    slots = _host_slots(lang)
    planted = tuple(
        _snippet(e, lang, slots)
        for name in _SNIPPET_FILES
        for e in _root(lang, name).tables("snippet", "[[snippet]]", required=True)
    )
    out = (*planted, *guarded_decoys(planted), *composed_snippets(lang))
    seen: set[str] = set()
    for s in out:
        if s.name in seen:
            raise CatalogueError(f"two snippets of {lang} are named {s.name!r}; rename one")
        seen.add(s.name)
    return out


@cache
def catalogue() -> tuple[Snippet, ...]:
    """Every snippet, bugs and decoys, Python then JavaScript."""
    return tuple(s for lang in CATALOGUE_LANGS for s in snippets(lang))


# --- clean code ------------------------------------------------------------------------------------


def _safe(e: Entry) -> SafeUse:
    where = e.text("where")
    if where not in WHERES:
        e.fail(f"unknown 'where' {where!r} (known: {', '.join(sorted(WHERES))})")
    choices = e.texts("choices", required=True)
    for c in choices:
        check_template(e, "choices", c, PLACEHOLDERS)
    block = _block(e, key="«nm»")
    e.close()
    return SafeUse(choices, where, block)


@cache
def safe_pool(lang: str) -> tuple[SafeUse, ...]:
    """The clean blocks sprinkled over ``lang``'s projects: ``safe``, then ``logic``, then the
    safe ways to write each composed sink (``composed.composed_safe_uses``)."""
    listed = tuple(
        _safe(e)
        for name in _SAFE_FILES
        for e in _root(lang, name).tables("safe", "[[safe]]", required=True)
    )
    return (*listed, *composed_safe_uses(lang))


def _roles(root: Entry, key: str, roles: tuple[str, ...]) -> dict[str, tuple[Block, ...]]:
    table = root.table(key, f"[{key}]", required=True)
    assert table is not None
    out = {role: _blocks(table, role, f"[[{key}.{role}]]") for role in roles}
    table.close()
    return out


@cache
def clean_code(lang: str) -> CleanCode:
    """The clean blocks of ``lang``'s projects (``clean.toml``)."""
    root = _root(lang, "clean")
    entity = _roles(root, "entity", ENTITY_ROLES)
    core = _roles(root, "core", CORE_ROLES)
    table = root.table("part", "[part]", required=True)
    assert table is not None
    parts = {}
    for name in PARTS[lang]:
        part = table.table(name, f"[part.{name}]", required=True)
        assert part is not None
        parts[name] = _block(part)
        part.close()
    table.close()
    return CleanCode(entity, core, parts)


@cache
def util_modules(lang: str) -> Mapping[str, UtilModule]:
    """Utility id → module of ``lang`` (``utils.toml``), in file order."""
    table = _root(lang, "utils").table("util", "[util]", required=True)
    assert table is not None
    out = {}
    for uid in list(table.data):
        u = table.table(uid, f"[util.{uid}]")
        assert u is not None
        out[uid] = UtilModule(
            u.texts("stems", required=True),
            u.text("doc"),
            _blocks(u, "block", f"[[util.{uid}.block]]"),
        )
        u.close()
    return out
