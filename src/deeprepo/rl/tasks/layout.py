"""Where each kind of code lives: the project styles and the role → path mapping.

Four layouts, by size: ``compact`` (four or five files), ``flat`` (one module
per layer), ``layered`` (one file per entity and layer) and ``modular``
(per-domain packages, each layered). A role is what a section does (``repo``,
``svc``, ``routes``, ``config``, a utility …); several roles may share a file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from deeprepo.rl.tasks.naming import Entity, snake_to_camel, snake_to_kebab

ROLE_ORDER = (
    "config",
    "errors",
    "db",
    "auth",
    "model",
    "repo",
    "util",
    "svc",
    "schema",
    "routes",
    "app",
    "tests",
)
"""Order of sections inside a shared file: definitions come before their (import-time) users."""


@dataclass(frozen=True)
class Style:
    """How one (sub)project is written; drawn once per project from the seed."""

    lang: str  # python | js
    layout: str  # compact | flat | layered | modular
    classes: bool  # repositories and services as classes with a module-level instance
    fmt: str  # message formatting: f | format | percent (python) / template | concat (js)
    verbs: int  # naming scheme of repository and service functions
    api_prefix: str  # "/api", "/api/v1" …
    root: str  # the subproject's folder in the repository: "" or "backend/"
    src: str  # python: "src/" or ""; js: "src/", "lib/" …
    pkg: str  # python package name ("" = top-level modules); js: the package name
    routes_dir: str
    svc_dir: str
    repo_dir: str
    models_dir: str
    schemas_dir: str
    split_repo: bool  # flat: repositories in their own module
    utils_pkg: bool  # flat: one module per utility instead of utils.py
    split_tests: bool  # flat: one test file per entity
    js_dotted: bool  # js layered/modular: feature folders with product.service.js names
    strict: bool  # js: "use strict"
    test_dir: str  # js: test | tests | __tests__

    @property
    def base(self) -> str:
        """Folder holding the code: ``backend/src/shelfwise/``, ``gateway/lib/`` …"""
        if self.lang == "python":
            return self.root + self.src + (self.pkg + "/" if self.pkg else "")
        return self.root + self.src

    @property
    def import_root(self) -> str:
        """Folder that Python imports are relative to."""
        return self.root + self.src


def choose_style(rng: random.Random, lang: str, layout: str, root: str, pkg: str) -> Style:
    """Draw every stylistic choice of a (sub)project (a fixed number of draws, in a fixed order)."""
    py = lang == "python"
    no_pkg = py and layout in ("compact", "flat") and rng.random() < 0.4
    return Style(
        lang=lang,
        layout=layout,
        classes=rng.random() < 0.5,
        fmt=rng.choice(("f", "format", "percent") if py else ("template", "concat")),
        verbs=rng.randrange(3),
        api_prefix=rng.choice(("/api", "/api/v1", "/v1", "/api/v2")),
        root=root,
        src=(
            rng.choice(("src/", ""))
            if py and not no_pkg
            else rng.choice(("src/", "lib/", "server/"))
            if not py
            else ""
        ),
        pkg="" if no_pkg else pkg,
        routes_dir=rng.choice(
            ("routes", "api", "views", "handlers") if py else ("routes", "controllers", "handlers")
        ),
        svc_dir=rng.choice(("services", "domain")),
        repo_dir=rng.choice(("repositories", "repos", "dal")),
        models_dir=rng.choice(("models", "entities")),
        schemas_dir=rng.choice(("schemas", "validation") if py else ("validators", "schemas")),
        split_repo=rng.random() < 0.5,
        utils_pkg=rng.random() < 0.5,
        split_tests=rng.random() < 0.5,
        js_dotted=rng.random() < 0.5,
        strict=rng.random() < 0.4,
        test_dir=rng.choice(("test", "tests", "__tests__")),
    )


def _py_path(s: Style, role: str, e: Entity | None, module: str, stem: str) -> str | None:
    b = s.base
    if s.layout == "compact":
        return {
            "config": b + "config.py",
            "db": b + "models.py",
            "errors": b + "models.py",
            "model": b + "models.py",
            "repo": b + "models.py",
            "util": b + "services.py",
            "svc": b + "services.py",
            "auth": b + "app.py",
            "routes": b + "app.py",
            "app": b + "app.py",
        }.get(role)
    if s.layout == "flat":
        routes_file = {
            "routes": "routes.py",
            "api": "api.py",
            "views": "views.py",
            "handlers": "handlers.py",
        }[s.routes_dir]
        return {
            "config": b + "config.py",
            "errors": b + "base/errors.py",
            "db": b + "db.py",
            "auth": b + "auth.py",
            "model": b + "models.py",
            "repo": b + ("repository.py" if s.split_repo else "services.py"),
            "svc": b + "services.py",
            "routes": b + routes_file,
            "app": b + "app.py",
            "util": b + (f"utils/{stem}.py" if s.utils_pkg else "utils.py"),
            "tests": s.root
            + (f"tests/test_{e.plural}.py" if s.split_tests and e else "tests/test_api.py"),
        }.get(role)
    m = b + (module + "/" if s.layout == "modular" else "")
    if e is not None:
        per_entity = {
            "model": f"{m}{s.models_dir}/{e.name}.py",
            "repo": f"{m}{s.repo_dir}/{e.name}.py",
            "svc": f"{m}{s.svc_dir}/{e.name}.py",
            "routes": f"{m}{s.routes_dir}/{e.plural}.py",
            "schema": f"{m}{s.schemas_dir}/{e.name}.py",
            "tests": s.root
            + "tests/"
            + (module + "/" if s.layout == "modular" else "")
            + f"test_{e.plural}.py",
        }
        if role in per_entity:
            return per_entity[role]
    return {
        "config": b + "config.py",
        "errors": b + "base/errors.py",
        "db": b + "db.py",
        "auth": b + "auth.py",
        "app": b + "app.py",
        "util": b + ("common" if s.layout == "modular" else "utils") + f"/{stem}.py",
    }.get(role)


def _js_path(s: Style, role: str, e: Entity | None, module: str, stem: str) -> str | None:
    b = s.base
    if s.layout == "compact":
        return {
            "config": b + "db.js",
            "db": b + "db.js",
            "errors": b + "models.js",
            "model": b + "models.js",
            "repo": b + "models.js",
            "util": b + "services.js",
            "svc": b + "services.js",
            "auth": b + "app.js",
            "routes": b + "app.js",
            "app": b + "app.js",
        }.get(role)
    tests = s.root + s.test_dir + "/"
    if s.layout == "flat":
        return {
            "config": b + "config.js",
            "errors": b + "errors.js",
            "db": b + "db.js",
            "auth": b + ("middleware/auth.js" if s.split_repo else "auth.js"),
            "model": b + "models.js",
            "repo": b + ("repository.js" if s.split_repo else "models.js"),
            "svc": b + "services.js",
            "routes": b + "routes.js",
            "app": b + "app.js",
            "util": b + (f"utils/{stem}.js" if s.utils_pkg else "utils.js"),
            "tests": tests
            + (f"{snake_to_kebab(e.plural)}.test.js" if s.split_tests and e else "api.test.js"),
        }.get(role)
    m = b + (f"modules/{module}/" if s.layout == "modular" else "")
    if e is not None:
        c, url = snake_to_camel(e.name), snake_to_kebab(e.plural)
        kebab = snake_to_kebab(e.name)
        if s.js_dotted:
            per_entity = {
                r: f"{m}{url}/{kebab}.{suffix}.js"
                for r, suffix in (
                    ("model", "model"),
                    ("repo", "repository"),
                    ("svc", "service"),
                    ("routes", "routes"),
                    ("schema", "validator"),
                )
            }
        else:
            per_entity = {
                "model": f"{m}{s.models_dir}/{c}.js",
                "repo": f"{m}{s.repo_dir}/{c}Repository.js",
                "svc": f"{m}{s.svc_dir}/{c}Service.js",
                "routes": f"{m}{s.routes_dir}/{url}.js",
                "schema": f"{m}{s.schemas_dir}/{c}.js",
            }
        per_entity["tests"] = (
            tests + (module + "/" if s.layout == "modular" else "") + f"{url}.test.js"
        )
        if role in per_entity:
            return per_entity[role]
    return {
        "config": b + "config.js",
        "errors": b + "errors.js",
        "db": b + "db.js",
        "auth": b + "middleware/auth.js",
        "app": b + "app.js",
        "util": b + ("shared" if s.layout == "modular" else "utils") + f"/{stem}.js",
    }.get(role)


def role_path(
    s: Style, role: str, entity: Entity | None = None, module: str = "", stem: str = ""
) -> str | None:
    """The file a section of ``role`` goes to, or ``None`` when the layout has no such file."""
    if s.layout == "compact" and role in ("tests", "schema"):
        return None
    if s.layout == "flat" and role == "schema":
        return None
    return (_py_path if s.lang == "python" else _js_path)(s, role, entity, module, stem)


def python_module(s: Style, path: str) -> str:
    """Dotted module of a Python file (``src/shelfwise/routes/products.py`` → ``shelfwise.routes.products``)."""
    rel = path[len(s.import_root) :] if path.startswith(s.import_root) else path
    mod = rel.removesuffix(".py").replace("/", ".")
    return mod.removesuffix(".__init__")


def init_files(s: Style, paths: set[str]) -> set[str]:
    """The ``__init__.py`` files a Python package layout needs for ``paths``."""
    if s.lang != "python" or not s.pkg:
        return set()
    top = s.import_root + s.pkg
    out: set[str] = set()
    for p in paths:
        if not p.endswith(".py") or not p.startswith(top + "/"):
            continue
        d = p.rsplit("/", 1)[0]
        while d == top or d.startswith(top + "/"):
            out.add(d + "/__init__.py")
            d = d.rsplit("/", 1)[0] if "/" in d else ""
    return out
