"""The module graph of a repository's source files, folded into components.

A *component* is a folder or a module at the first level that splits the code: starting at
the repository root, a folder that holds at least :data:`DOMINANT_SHARE` of the code (by
characters) is opened and its children become components, the others stay whole. So
``src/deeprepo/sandbox/`` is the component ``sandbox``, a flat package like flask's
``src/flask/`` gives one component per module, a monorepo's ``packages/*`` one per package,
and ``benchmarks/`` beside ``src/`` stays one component.

Only ``source`` files are nodes. Test and example files are importers only: they say which
modules (and, through the modules those import, which components) are exercised by tests.
"""

from __future__ import annotations

import posixpath
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DOMINANT_SHARE",
    "Architecture",
    "Component",
    "Edge",
    "EntryPoint",
    "ExternalDependency",
    "assign_components",
    "strongly_connected",
]

#: A folder with at least this share of the code (by characters) is opened into its children.
DOMINANT_SHARE = 0.75


@dataclass(frozen=True)
class Component:
    name: str  # short, unique label: "sandbox", "app", "flask/__init__"
    path: str  # folder ("src/deeprepo/sandbox/") or file ("src/flask/app.py")
    files: int
    lines: int
    tested: bool  # some test imports one of its modules, directly or through other modules


@dataclass(frozen=True)
class Edge:
    source: str  # component names
    target: str
    imports: int  # (importing file, imported file) pairs from source to target


@dataclass(frozen=True)
class EntryPoint:
    path: str
    component: str
    tests: int  # test files that import it directly
    examples: int  # example files that import it directly
    reached: bool  # imported by tests directly or through the modules they import


@dataclass(frozen=True)
class ExternalDependency:
    name: str
    ecosystem: str  # "python" or "npm"
    files: int  # source files that import it


@dataclass(frozen=True)
class Architecture:
    """What :func:`deeprepo.architecture.analyze_architecture` finds; ``to_dict`` for JSON."""

    modules: int  # source files of an analysed language (the graph's nodes)
    languages: dict[str, int]
    components: list[Component]
    edges: list[Edge]  # between components, most imports first
    internal_imports: int  # (file, file) import pairs between source modules
    component_cycles: list[list[str]]  # strongly connected groups of components
    module_cycles: list[list[str]]  # strongly connected groups of modules, smallest first
    fan_in: list[tuple[str, int]]  # most imported source modules: (path, importing modules)
    entry_points: list[EntryPoint]
    external: list[ExternalDependency]  # imported by source files, most used first
    test_only_external: list[ExternalDependency]  # imported by tests or examples only
    unresolved: int  # relative imports in source files that name no file of the repository
    test_files: int = 0  # test files of an analysed language (importers only)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def untested_components(self) -> list[str]:
        return [c.name for c in self.components if not c.tested]

    @property
    def untested_entry_points(self) -> list[EntryPoint]:
        return [e for e in self.entry_points if not e.reached]

    def to_dict(self, limit: int = 500) -> dict[str, Any]:
        """JSON-able, each list cut to ``limit`` items (``truncated`` says which were)."""
        lists: dict[str, list[Any]] = {
            "components": [c.__dict__ for c in self.components],
            "edges": [e.__dict__ for e in self.edges],
            "component_cycles": self.component_cycles,
            "module_cycles": self.module_cycles,
            "fan_in": [{"module": m, "imported_by": n} for m, n in self.fan_in],
            "entry_points": [e.__dict__ for e in self.entry_points],
            "external": [d.__dict__ for d in self.external],
            "test_only_external": [d.__dict__ for d in self.test_only_external],
        }
        truncated = {k: len(v) for k, v in lists.items() if len(v) > limit}
        out: dict[str, Any] = {
            "modules": self.modules,
            "languages": self.languages,
            "internal_imports": self.internal_imports,
            "unresolved_relative_imports": self.unresolved,
            "test_files": self.test_files,
        }
        out.update(
            {
                k: [dict(x) if isinstance(x, dict) else x for x in v[:limit]]
                for k, v in lists.items()
            }
        )
        out["untested_components"] = self.untested_components
        out["untested_entry_points"] = [e.path for e in self.untested_entry_points]
        out["truncated"] = truncated
        out["seconds"] = round(self.seconds, 3)
        out["notes"] = self.notes
        return out


def assign_components(sizes: Mapping[str, int]) -> dict[str, str]:
    """File → component path (a folder ending in ``/`` or the file itself), see the module doc."""
    out: dict[str, str] = {}
    stack: list[tuple[str, list[str]]] = [("", sorted(sizes))]
    while stack:
        prefix, paths = stack.pop()
        groups: dict[str, list[str]] = defaultdict(list)
        for path in paths:
            rest = path[len(prefix) :]
            head, slash, _ = rest.partition("/")
            groups[head + slash].append(path)
        total = sum(sizes[p] for p in paths)
        dominant = next(
            (
                g
                for g, members in groups.items()
                if g.endswith("/")
                and total
                and sum(sizes[p] for p in members) >= DOMINANT_SHARE * total
            ),
            None,
        )
        for group, members in groups.items():
            if group == dominant:
                stack.append((prefix + group, members))
            else:
                for path in members:
                    out[path] = prefix + group
    return out


def component_labels(paths: Iterable[str]) -> dict[str, str]:
    """Component path → the shortest unique label made of its last path parts."""

    def parts(path: str) -> list[str]:
        segments = path.rstrip("/").split("/")
        if not path.endswith("/"):
            stem = posixpath.splitext(segments[-1])[0]
            segments[-1] = stem
        return segments

    split = {p: parts(p) for p in paths}
    depth = dict.fromkeys(split, 1)
    while True:
        labels = {p: "/".join(s[-depth[p] :]) for p, s in split.items()}
        seen = Counter(labels.values())
        clash = [p for p, label in labels.items() if seen[label] > 1 and depth[p] < len(split[p])]
        # `__init__` and `index` say little alone: show their folder too.
        vague = [
            p
            for p, s in split.items()
            if depth[p] == 1 and s[-1] in ("__init__", "index", "mod", "main") and len(s) > 1
        ]
        if not clash and not vague:
            # Only ``a/b/`` and ``a/b.py`` can still clash: show those in full.
            return {p: (p if seen[label] > 1 else label) for p, label in labels.items()}
        for p in {*clash, *vague}:
            depth[p] += 1


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Any]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found
