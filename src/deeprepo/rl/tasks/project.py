"""Assembling a (sub)project: files, sections of clean blocks, and the placeholder contexts.

:func:`build_project` turns a :class:`~deeprepo.rl.tasks.structure.Structure`
into :class:`SourceFile` objects whose sections hold clean template blocks,
plus the registry that resolves cross-file references. Code files outside the
section layout are added by ``extras.add_code_extras``; planting happens in
``planting`` and rendering in ``generator``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from deeprepo.rl.tasks.catalogue import clean_code, util_modules
from deeprepo.rl.tasks.contexts import entity_context, schema_sql, style_context
from deeprepo.rl.tasks.layout import ROLE_ORDER, Style, python_module, role_path
from deeprepo.rl.tasks.naming import Entity, snake_to_camel, snake_to_kebab, snake_to_pascal
from deeprepo.rl.tasks.render import Block, Registry, Renderer, Section, SourceFile, js_relpath
from deeprepo.rl.tasks.structure import Structure, entity_roles


@dataclass
class Project:
    """A (sub)project ready for planting: its files, sections and contexts."""

    style: Style
    structure: Structure
    title: str
    files: dict[str, SourceFile]
    registry: Registry
    ctx: dict[str, str]
    entity_ctx: dict[str, dict[str, str]] = field(default_factory=dict)
    # Each code file's size quartile, taken before planting (``planting.size_bins``).
    size_bins: dict[str, int] = field(default_factory=dict)

    @property
    def lang(self) -> str:
        return self.style.lang

    def local_modules(self) -> frozenset[str]:
        """Top-level names this project's Python imports resolve to (its package or modules)."""
        if self.style.pkg:
            return frozenset({self.style.pkg})
        return frozenset(f.module.split(".")[0] for f in self.files.values() if f.module)

    def renderer(self) -> Renderer:
        return Renderer(self.registry, self.local_modules())

    def sections(self, prefix: str) -> list[Section]:
        """Sections whose id is ``prefix`` or starts with ``prefix:``, in file order."""
        return [
            sec
            for sid, (_, sec) in self.registry.items()
            if sid == prefix or sid.startswith(prefix + ":")
        ]


_DOCS = {
    "config": "Settings, read from the environment.",
    "errors": "Errors the API turns into HTTP responses.",
    "db": "Database access.",
    "auth": "Password hashing, tokens and access control.",
    "app": "The web application.",
    "model": "Records of {entities}.",
    "repo": "Data access for {entities}.",
    "svc": "Business rules for {entities}.",
    "routes": "HTTP endpoints for {entities}.",
    "schema": "Validation of {entity} payloads.",
    "tests": "API tests for {entities}.",
}
_GENERIC = {
    "model": "Domain records.",
    "repo": "Data access.",
    "svc": "Business rules.",
    "routes": "HTTP endpoints.",
    "tests": "API tests.",
    "schema": "Payload validation.",
}
_SHARED_DOCS = {
    "models": "Records, database access and domain errors.",
    "services": "Business rules and helpers.",
    "app": "The web application: endpoints, access control and the app factory.",
    "utils": "Shared helpers.",
    "db": "Settings and the database pool.",
}


class _Builder:
    def __init__(self, rng: random.Random, st: Structure, title: str, pctx: dict[str, str]):
        self.rng, self.st, self.s = rng, st, st.style
        self.py = self.s.lang == "python"
        self.clean = clean_code(self.s.lang)
        self.files: dict[str, SourceFile] = {}
        self.registry: Registry = {}
        self.pctx = pctx
        self.title = title
        self.ectx = {e.name: entity_context(e, self.s) for e, _ in st.entities}

    def _doc(self, path: str, role: str, e: Entity | None, util_doc: str) -> str:
        stem = path.rsplit("/", 1)[-1].split(".")[0]
        if self.s.layout == "compact":
            return _SHARED_DOCS.get(stem) or _DOCS.get(role, "")
        if role == "util":
            return util_doc if stem != "utils" else _SHARED_DOCS["utils"]
        if e is not None and self.s.layout in ("layered", "modular"):
            return _DOCS[role].format(
                entities=e.plural.replace("_", " "), entity=e.name.replace("_", " ")
            )
        return _GENERIC.get(role) or _DOCS[role]

    def file(self, path: str, role: str, e: Entity | None = None, util_doc: str = "") -> SourceFile:
        f = self.files.get(path)
        if f is None:
            f = SourceFile(
                path,
                self.s.lang,
                doc=self._doc(path, role, e, util_doc),
                ctx=dict(self.pctx),
                strict=self.s.strict,
            )
            if self.py:
                f.module = python_module(self.s, path)
            self.files[path] = f
        return f

    def section(
        self,
        sid: str,
        role: str,
        blocks: list[Block],
        e: Entity | None = None,
        module: str = "",
        stem: str = "",
        util_doc: str = "",
    ) -> Section:
        path = role_path(self.s, role, e, module, stem)
        assert path is not None, (role, sid)
        f = self.file(path, role, e, util_doc)
        ctx = {**(self.ectx[e.name] if e else {}), **style_context(self.s, role)}
        sec = Section(
            sid,
            list(blocks),
            entity=e,
            ctx=ctx,
            gap=0 if role == "config" else (2 if self.py else 1),
        )
        per_entity_file = (
            e is not None
            and sum(1 for x in f.sections if x.entity is not None) == 0
            and self.s.layout in ("layered", "modular")
        )
        stem_name = path.rsplit("/", 1)[-1].split(".")[0]
        if e is not None and role in ("repo", "svc"):
            suffix = {"repo": "repository", "svc": "service"}[role]
            pascal = snake_to_pascal(e.name) + suffix.capitalize()
            inst = f"{e.name}_{suffix}" if self.py else snake_to_camel(e.name) + suffix.capitalize()
            if self.s.classes:
                sec.class_name, sec.instance = pascal, inst
                sec.doc = _DOCS[role].format(entities=e.plural.replace("_", " "))
                if role == "repo":
                    sec.blocks.insert(0, self.clean.parts["repo_init"])
            sec.handle = inst if per_entity_file else stem_name
        else:
            sec.handle = stem_name
        f.sections.append(sec)
        self.registry[sid] = (f, sec)
        return sec

    def build(self) -> None:
        s, st = self.s, self.st
        utils = util_modules(s.lang)
        specs: list[tuple[int, int, str, str, Entity | None, str, str]] = []
        order = {r: i for i, r in enumerate(ROLE_ORDER)}
        for i, role in enumerate(("config", "errors", "db", "auth", "app")):
            specs.append((order[role], i, role, role, None, "", ""))
        for i, u in enumerate(st.utils):
            specs.append((order["util"], i, u, "util", None, "", u))
        first, module = st.entities[0]
        roles = [r for r in entity_roles(s, st.use_schemas) if role_path(s, r, first, module)]
        for i, (ent, mod) in enumerate(st.entities):
            for role in roles:
                specs.append((order[role], i, f"{role}:{ent.name}", role, ent, mod, ""))
        specs.sort(key=lambda t: (t[0], t[1]))
        for _, _, sid, role, e, m, util in specs:
            if role == "util":
                umod = utils[util]
                self.section(sid, role, list(umod.blocks), stem=st.utils[util], util_doc=umod.doc)
            elif e is None:
                self.section(sid, role, list(self.clean.core.get(role, ())))
            else:
                self.section(sid, role, list(self.clean.entity[role]), e, m)
        self._wire_routes_and_app()
        self._wire_tests()

    def _wire_tests(self) -> None:
        tests = [(f, sec) for sid, (f, sec) in self.registry.items() if sid.startswith("tests:")]
        if not tests:
            return
        if self.py:
            if len({f.path for f, _ in tests}) == 1 and not any(
                p.endswith("conftest.py") for p in self.st.paths
            ):
                tests[0][1].blocks.insert(0, self.clean.parts["client_fixture"])
            return
        app_path = self.registry["app"][0].path
        for f, _ in tests:
            if not f.preamble:
                f.ctx["app_rel"] = js_relpath(f.path, app_path)
                f.preamble.append(
                    Block("test_imports", "", imports=("request=supertest", "app=«app_rel»"))
                )
                f.exports = "none"

    def _wire_routes_and_app(self) -> None:
        s, py = self.s, self.py
        app_file, app_sec = self.registry["app"]
        routes = [(f, sec) for sid, (f, sec) in self.registry.items() if sid.startswith("routes:")]
        shared = len({f.path for f, _ in routes}) == 1 and s.layout in ("compact", "flat")
        mounts: list[str] = []
        names: list[tuple[str, str]] = []
        imports: list[str] = []
        for f, sec in routes:
            e = sec.entity
            assert e is not None
            url = snake_to_kebab(e.plural)
            sec.ctx.update(
                {
                    "rp": f"/{url}" if shared else "",
                    "rp_list": f"/{url}" if shared else ("" if py else "/"),
                }
            )
            first = not f.preamble
            if py and first:
                var = "api" if shared else "bp"
                f.ctx.update(
                    {
                        "bp": var,
                        "bp_name": "api" if shared else e.plural,
                        "bp_prefix": s.api_prefix if shared else f"{s.api_prefix}/{url}",
                    }
                )
                f.preamble.append(self.clean.parts["blueprint"])
                alias = var if shared else f"{e.plural}_bp"
                names.append((sec.id, var if alias == var else f"{var} as {alias}"))
                mounts.append(f"app.register_blueprint({alias})")
            elif not py and first:
                f.preamble.append(self.clean.parts["router"])
                if f is app_file:
                    mounts.append(f'app.use("{s.api_prefix}", router);')
                else:
                    f.epilogue.append(self.clean.parts["router_export"])
                    f.exports = "none"
                    var = "routes" if shared else snake_to_camel(e.plural) + "Router"
                    rel = js_relpath(app_file.path, f.path)
                    imports.append(f"{var}={rel}")
                    mounts.append(f'app.use("{s.api_prefix}{"" if shared else "/" + url}", {var});')
        parts = self.clean.parts
        if py:
            app_sec.blocks.append(replace(parts["app"], names=(*parts["app"].names, *names)))
            app_sec.ctx.update(
                {
                    "register_blueprints": "\n".join(mounts),
                    "config_module": self.registry["config"][0].module,
                }
            )
        else:
            app_sec.blocks.extend((parts["app"], parts["error_handler"]))
            app_sec.blocks[0] = replace(
                app_sec.blocks[0], imports=(*app_sec.blocks[0].imports, *imports)
            )
            app_sec.ctx["mount_routes"] = "\n".join(mounts)
            app_file.epilogue.append(parts["app_export"])
            app_file.exports = "none"


def build_project(rng: random.Random, st: Structure, title: str, pctx: dict[str, str]) -> Project:
    """Files and sections of clean code for ``st`` (no bugs yet)."""
    pctx["schema_sql"] = schema_sql(st.entities, st.style.lang)
    b = _Builder(rng, st, title, pctx)
    b.build()
    for path in sorted(st.paths):
        if path.endswith("/__init__.py") and path not in b.files:
            b.files[path] = _package_init(b, path, title)
    b.files = dict(sorted(b.files.items()))
    return Project(st.style, st, title, b.files, b.registry, pctx, b.ectx)


_PACKAGE_DOCS = {
    "models": "Domain records.",
    "entities": "Domain records.",
    "repositories": "Data access.",
    "repos": "Data access.",
    "dal": "Data access layer.",
    "services": "Business rules.",
    "domain": "Business rules.",
    "routes": "HTTP endpoints.",
    "api": "HTTP endpoints.",
    "views": "HTTP endpoints.",
    "handlers": "HTTP endpoints.",
    "schemas": "Payload validation.",
    "validation": "Payload validation.",
    "utils": "Shared helpers.",
    "common": "Helpers shared by the modules.",
}


def _package_init(b: _Builder, path: str, title: str) -> SourceFile:
    """A package's ``__init__.py``: its docstring and one (empty) function section. Planting
    and sprinkling treat it as any helper module, so it holds a block as often as other
    files do: a file that is always near-empty and never holds a bug would be a size and
    name tell (issue 19)."""
    s = b.s
    f = SourceFile(
        path,
        s.lang,
        doc=_package_doc(path, s, title),
        ctx=dict(b.pctx),
        module=python_module(s, path),
    )
    sid = f"pkg:{f.module}"
    sec = Section(sid, [], ctx=style_context(s, "pkg"), handle=f.module.rsplit(".", 1)[-1])
    f.sections.append(sec)
    b.registry[sid] = (f, sec)
    return f


def _package_doc(path: str, style: Style, title: str) -> str:
    name = path.rsplit("/", 2)[-2]
    if name == style.pkg:
        return f"{title}."
    return _PACKAGE_DOCS.get(name) or f"The {name.replace('_', ' ')} module."
