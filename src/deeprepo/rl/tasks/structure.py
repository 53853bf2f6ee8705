"""Choosing what a (sub)project contains so that its file count hits the budget exactly.

The count includes everything a layout implies (``__init__.py`` files, shared
modules, ``README.md`` …). Entities are added while they fit; the remainder is
filled one file at a time with optional files (docs, migrations, scripts,
extra tests and utilities), so a budget inside the size band is met.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from deeprepo.rl.tasks.layout import Style, init_files, role_path
from deeprepo.rl.tasks.naming import ENTITIES, Entity

CORE_ROLES = ("config", "errors", "db", "auth", "app")
OPTIONAL_UTILS = ("validators", "text", "dates", "money", "logs", "cache", "html", "webhooks")
_DOCS = ("architecture", "api", "deployment", "development", "security", "runbook")
_TEXT_FILLERS = (
    "dockerfile",
    "env",
    "gitignore",
    "changelog",
    "editorconfig",
    "license",
    "contributing",
)
_MIGRATION_NAMES = (
    "initial_schema",
    "add_indexes",
    "add_audit_columns",
    "add_status_columns",
    "backfill_defaults",
)


@dataclass
class Structure:
    """What one (sub)project holds; ``paths`` is the exact file list it renders to."""

    style: Style
    entities: list[tuple[Entity, str]]  # (entity, module)
    utils: dict[str, str]  # utility id → module stem
    fillers: list[str]
    use_schemas: bool
    paths: set[str]


def entity_roles(style: Style, use_schemas: bool) -> tuple[str, ...]:
    roles: tuple[str, ...] = ("model", "repo", "svc", "routes")
    if style.layout != "compact":
        roles += ("tests",)
    if use_schemas and style.layout in ("layered", "modular"):
        roles += ("schema",)
    return roles


def fixed_paths(style: Style, split_tests: bool) -> set[str]:
    r = style.root
    if style.lang == "python":
        out = {r + "requirements.txt"}
        if style.layout != "compact":
            out.add(r + "README.md")
        if split_tests:
            out.add(r + "tests/conftest.py")
        return out
    out = {r + "package.json"}
    if style.layout != "compact":
        out |= {r + "README.md", style.base + "server.js"}
    return out


def filler_path(style: Style, key: str, utils_stems: dict[str, str]) -> str | None:
    """Path of an optional file, ``None`` when it does not fit this layout."""
    r, py = style.root, style.lang == "python"
    kind, _, arg = key.partition(":")
    if kind == "util":
        if style.layout == "compact" or (style.layout == "flat" and not style.utils_pkg):
            return None  # utilities share one module there: no new file
        return role_path(style, "util", stem=utils_stems[arg])
    simple = {
        "readme": "README.md",
        "dockerfile": "Dockerfile",
        "env": ".env.example",
        "gitignore": ".gitignore",
        "changelog": "CHANGELOG.md",
        "editorconfig": ".editorconfig",
        "license": "LICENSE",
        "contributing": "CONTRIBUTING.md",
        "makefile": "Makefile",
        "pyproject": "pyproject.toml",
        "eslintrc": ".eslintrc.json",
        "prettierrc": ".prettierrc",
        "nvmrc": ".nvmrc",
    }
    if kind in simple:
        return r + simple[kind]
    if kind == "docs":
        return f"{r}docs/{arg}.md"
    if kind == "migration":
        n = int(arg)
        return f"{r}migrations/{n + 1:04d}_{_MIGRATION_NAMES[n % len(_MIGRATION_NAMES)]}.sql"
    if kind == "script":
        return r + ("scripts/seed_data.py" if py else "scripts/seed.js")
    if kind == "test":
        return r + (f"tests/test_{arg}.py" if py else f"{style.test_dir}/{arg}.test.js")
    if kind == "wsgi":
        return (
            style.base + "wsgi.py"
            if py
            else (style.base + "server.js" if style.layout == "compact" else None)
        )
    raise ValueError(f"unknown filler {key!r}")


def filler_candidates(style: Style) -> list[str]:
    py = style.lang == "python"
    keys = ["readme", "wsgi", "script:seed", "test:auth", "test:pagination", *_TEXT_FILLERS]
    keys += ["makefile", "pyproject"] if py else ["eslintrc", "prettierrc", "nvmrc"]
    keys += [f"docs:{d}" for d in _DOCS]
    keys += [f"migration:{i}" for i in range(len(_MIGRATION_NAMES))]
    keys += [f"util:{u}" for u in OPTIONAL_UTILS]
    return keys


class _Counter:
    """Computes the file set of a candidate structure (per-entity paths cached: fitting asks often)."""

    def __init__(self, style: Style, use_schemas: bool, utils: dict[str, str]):
        self.style = style
        self.roles = entity_roles(style, use_schemas)
        self.utils = utils
        split = style.layout in ("layered", "modular") or (
            style.layout == "flat" and style.split_tests
        )
        self.fixed = fixed_paths(style, split) | {
            p for r in CORE_ROLES if (p := role_path(style, r))
        }
        self._entity: dict[tuple[str, str], set[str]] = {}

    def grow(self, current: set[str], paths: set[str]) -> set[str]:
        """Files ``paths`` add to ``current``, package ``__init__.py`` files included."""
        new = paths - current
        return (new | init_files(self.style, new)) - current

    def entity_paths(self, e: Entity, module: str) -> set[str]:
        key = (e.name, module)
        if key not in self._entity:
            self._entity[key] = {
                p for r in self.roles if (p := role_path(self.style, r, e, module))
            }
        return self._entity[key]

    def paths(self, entities: list[tuple[Entity, str]], fillers: list[str]) -> set[str]:
        s = self.style
        out = set(self.fixed)
        out.update(p for stem in self.utils.values() if (p := role_path(s, "util", stem=stem)))
        for e, module in entities:
            out |= self.entity_paths(e, module)
        out.update(p for key in fillers if (p := filler_path(s, key, self.utils)))
        return out | init_files(s, out)


def fit_structure(
    rng: random.Random,
    style: Style,
    budget: int,
    needs: set[str],
    domains: list[str],
    util_stems: dict[str, str],
    taken: set[str],
) -> Structure:
    """Pick entities, utilities and fillers so the file count is ``budget`` (or as close as the layout allows)."""
    use_schemas = rng.random() < 0.5
    utils = {u: util_stems[u] for u in sorted(needs | {"pagination"})}
    counter = _Counter(style, use_schemas, utils)
    pool: list[tuple[Entity, str]] = []
    seen = set(taken)
    for d in domains:
        chosen = [e for e in ENTITIES[d] if not {e.name, e.plural} & seen]
        rng.shuffle(chosen)
        for e in chosen:
            if not {e.name, e.plural} & seen:  # domains share some entities (rooms, members …)
                seen.update((e.name, e.plural))
                pool.append((e, d if style.layout == "modular" else ""))
    entities: list[tuple[Entity, str]] = []
    current = counter.paths([], [])
    # Entities share files in compact/flat layouts, so there their number is a style choice.
    limit = {"compact": rng.randint(1, 2), "flat": rng.randint(2, 4)}.get(style.layout, len(pool))
    for e, m in pool:
        if len(entities) >= limit:
            break
        new = counter.grow(current, counter.entity_paths(e, m))
        if len(current) + len(new) <= budget or not entities:
            entities.append((e, m))
            current |= new
    for e, _ in entities:
        taken.update((e.name, e.plural))
    fillers: list[str] = []
    candidates = filler_candidates(style)
    rng.shuffle(candidates)
    for key in candidates:
        if len(current) >= budget:
            break
        if key.startswith("util:") and key[5:] in utils:
            continue
        if key.startswith("migration:"):  # numbered in the order they are added: 0001, 0002 …
            key = f"migration:{sum(f.startswith('migration:') for f in fillers)}"
        path = filler_path(style, key, util_stems)
        if path is None or key in fillers:
            continue
        new = counter.grow(current, {path})
        if len(new) == 1:  # exactly one more file: no new package folder
            fillers.append(key)
            current |= new
            if key.startswith("util:"):
                utils[key[5:]] = util_stems[key[5:]]
    return Structure(style, entities, utils, fillers, use_schemas, current)
