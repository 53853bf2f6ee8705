"""From a codebase's texts to its :class:`Architecture`: parse, resolve, fold, count."""

from __future__ import annotations

import posixpath
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from deeprepo.architecture.graph import (
    Architecture,
    Component,
    Edge,
    EntryPoint,
    ExternalDependency,
    assign_components,
    component_labels,
    strongly_connected,
)
from deeprepo.architecture.imports import js_imports, python_imports
from deeprepo.architecture.resolve import JS_EXTENSIONS, JsResolver, PyResolver
from deeprepo.codebase.model import Codebase
from deeprepo.codebase.scope import classify_scope

__all__ = ["analyze_architecture", "architecture_of"]

#: How many most-imported modules are kept.
FAN_IN_TOP = 15
_IMPORTER_SCOPES = ("test", "example")


def _language(path: str) -> str | None:
    if path.endswith(".py"):
        return "Python"
    dot = path.rfind(".")
    ext = path[dot:] if dot > path.rfind("/") else ""
    if ext in JS_EXTENSIONS and not path.endswith(".d.ts"):
        return "TypeScript" if ext in (".ts", ".tsx", ".mts", ".cts") else "JavaScript"
    return None


def analyze_architecture(
    files: Mapping[str, str],
    scopes: Mapping[str, str] | None = None,
    entry_points: Iterable[str] = (),
) -> Architecture:
    """The import graph of ``files`` (path → text) folded into components.

    ``scopes`` (path → scope, :mod:`deeprepo.codebase.scope`) decides which files are nodes
    (``source``) and which only import (``test``, ``example``); a missing one is judged from
    the path and text. ``entry_points`` are checked for tests; those outside ``source`` or of
    a language the graph does not read are left out.
    """
    started = time.perf_counter()
    scope = dict(scopes or {})
    langs: dict[str, str] = {}
    for path in files:
        lang = _language(path)
        if lang is not None:
            langs[path] = lang
            if path not in scope:
                scope[path] = classify_scope(path, files[path])
    py = PyResolver(files) if any(v == "Python" for v in langs.values()) else None
    js = JsResolver(files) if any(v != "Python" for v in langs.values()) else None

    source = {p for p in langs if scope[p] == "source"}
    deps: dict[str, set[str]] = {p: set() for p in source}  # source file -> source files
    imported_by_scope: dict[str, dict[str, set[str]]] = {
        s: defaultdict(set) for s in _IMPORTER_SCOPES
    }
    external: dict[tuple[str, str], set[str]] = defaultdict(set)
    test_external: dict[tuple[str, str], set[str]] = defaultdict(set)
    unresolved = 0
    for path, lang in langs.items():
        kind = scope[path]
        if kind != "source" and kind not in _IMPORTER_SCOPES:
            continue
        targets: set[str] = set()
        needs: set[tuple[str, str]] = set()
        if lang == "Python":
            assert py is not None
            for imp in python_imports(files[path]):
                found, package = py.resolve(path, imp)
                targets.update(found)
                if package:
                    needs.add((package, "python"))
                elif imp.level and not found:
                    unresolved += kind == "source"
        else:
            assert js is not None
            for spec in js_imports(files[path]):
                hit, package = js.resolve(path, spec)
                if hit:
                    targets.add(hit)
                elif package:
                    needs.add((package, "npm"))
                elif spec.startswith(".") and (
                    _language(spec) is not None or "." not in spec.rsplit("/", 1)[-1]
                ):
                    unresolved += kind == "source"  # a module that is not there (not an asset)
        targets.discard(path)
        if kind == "source":
            deps[path] = {t for t in targets if t in source}
            for need in needs:
                external[need].add(path)
        else:
            if lang == "Python":
                assert py is not None
                targets |= py.parent_packages(targets)  # importing a.b.c runs a/ and a/b/ too
            for t in targets:
                if t in source:
                    imported_by_scope[kind][t].add(path)
            for need in needs:
                test_external[need].add(path)

    # Components and the edges between them.
    comp_of_path = assign_components({p: len(files[p]) or 1 for p in source})
    labels = component_labels(set(comp_of_path.values()))
    comp = {p: labels[c] for p, c in comp_of_path.items()}
    edge_counts: Counter[tuple[str, str]] = Counter()
    for src, targets in deps.items():
        for t in targets:
            if comp[src] != comp[t]:
                edge_counts[comp[src], comp[t]] += 1
    comp_graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edge_counts:
        comp_graph[a].add(b)

    # What tests reach: the modules they import and everything those import.
    tested_direct = set(imported_by_scope["test"])
    reached = set(tested_direct)
    frontier = list(tested_direct)
    while frontier:
        for t in deps.get(frontier.pop(), ()):
            if t not in reached:
                reached.add(t)
                frontier.append(t)
    members: dict[str, list[str]] = defaultdict(list)
    for p, c in comp.items():
        members[c].append(p)
    path_of = {label: path for path, label in labels.items()}
    components = sorted(
        (
            Component(
                name=c,
                path=path_of[c],
                files=len(ps),
                lines=sum(files[p].count("\n") + 1 for p in ps),
                tested=any(p in reached for p in ps),
            )
            for c, ps in members.items()
        ),
        key=lambda c: (-c.lines, c.name),
    )

    fan_in_counts: Counter[str] = Counter()
    for targets in deps.values():
        fan_in_counts.update(targets)
    fan_in = sorted(fan_in_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:FAN_IN_TOP]

    entries = [
        EntryPoint(
            path=e,
            component=comp[e],
            tests=len(imported_by_scope["test"].get(e, ())),
            examples=len(imported_by_scope["example"].get(e, ())),
            reached=e in reached,
        )
        for e in sorted(set(entry_points))
        if e in source
    ]

    # Tests put fixture folders on sys.path and import their modules by bare name.
    local_names = {
        posixpath.basename(posixpath.dirname(p)) if p.endswith("__init__.py") else p[:-3]
        for p, lang in langs.items()
        if lang == "Python"
    }
    local_names = {posixpath.basename(n) for n in local_names}

    def deps_list(
        table: Mapping[tuple[str, str], set[str]], skip: set[str]
    ) -> list[ExternalDependency]:
        rows = [
            ExternalDependency(n, eco, len(fs)) for (n, eco), fs in table.items() if n not in skip
        ]
        return sorted(rows, key=lambda d: (-d.files, d.name))

    ext = deps_list(external, set())
    module_cycles = sorted(strongly_connected(deps), key=lambda g: (len(g), g))
    notes: list[str] = []
    skipped = Counter(langs[p] for p in langs if scope[p] not in ("source", *_IMPORTER_SCOPES))
    if skipped:
        notes.append(
            "not in the graph (vendored, generated, config or docs): "
            + ", ".join(f"{n} {lang}" for lang, n in sorted(skipped.items()))
        )
    return Architecture(
        modules=len(source),
        languages=dict(Counter(langs[p] for p in source).most_common()),
        components=components,
        edges=[
            Edge(a, b, n)
            for (a, b), n in sorted(edge_counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        internal_imports=sum(len(t) for t in deps.values()),
        component_cycles=sorted(strongly_connected(comp_graph), key=lambda g: (-len(g), g)),
        module_cycles=module_cycles,
        fan_in=fan_in,
        entry_points=entries,
        external=ext,
        test_only_external=deps_list(test_external, {d.name for d in ext} | local_names),
        unresolved=unresolved,
        test_files=sum(1 for p in langs if scope[p] == "test"),
        seconds=time.perf_counter() - started,
        notes=notes,
    )


# One analysis per Codebase object: the first message, the REPL and the report share it.
_CACHE: dict[int, Architecture] = {}


def architecture_of(codebase: Codebase) -> Architecture:
    """:func:`analyze_architecture` of ``codebase``, computed once per object."""
    key = id(codebase)
    found = _CACHE.get(key)
    if found is None:
        found = analyze_architecture(
            codebase.files, codebase.scopes, codebase.metadata.entry_points
        )
        _CACHE[key] = found
        weakref.finalize(codebase, _CACHE.pop, key, None)
    return found
