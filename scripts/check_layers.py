"""The import contract: deeprepo's rooms, their layers, and the rules between them.

Run it (``python scripts/check_layers.py``) or let ``tests/test_layers.py`` run it. It reads
every module under ``src/deeprepo`` with :mod:`ast` (module-level and function-level
imports, ``TYPE_CHECKING`` blocks and ``importlib.import_module("deeprepo...")`` strings
all count) and checks:

1. **Imports only go down.** Each room sits on one layer of :data:`LAYERS`; a module may
   import its own room or a room on a lower layer, never a room on its own layer or above.
   So there are no package cycles either.
2. **No file circles.** Modules import each other in no cycle (``from pkg import mod`` is an
   edge to ``pkg.mod``, not to ``pkg``).
3. **No module loaded by path.** Nothing calls ``spec_from_file_location``,
   ``SourceFileLoader``, ``runpy.run_path``, or ``exec``/``compile`` on a file it opened;
   the sandbox child finds its modules by name.
4. **Modules fit in a head:** at most :data:`MAX_LINES` lines each.
5. **Users of the library use its faces.** The benchmarks and the verifiers environment
   (:data:`FACE_USERS`) import only ``deeprepo``, ``deeprepo.rl`` and the test
   infrastructure ``deeprepo.testing``.

docs/architecture.md draws the same layers; change both together.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
#: Folders of code that uses deeprepo as a library, through its faces only.
FACE_USERS = ("benchmarks", "environments")
FACES = ("deeprepo", "deeprepo.rl", "deeprepo.testing")

#: Bottom to top. Rooms on one layer are siblings: neither may import the other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("codebase", "findings", "providers", "sandbox"),
    ("architecture", "builtin", "local"),
    ("orchestrator",),
    ("report",),
    ("runlog",),
    ("run",),
    # the research stack: the core above never imports it
    ("rl.tasks", "rl.plots", "rl.policies"),
    ("rl.env",),
    ("rl.evals",),
    ("rl.bench", "rl.train"),
    ("rl",),  # deeprepo.rl's own face (its __init__)
    # the command line, and the test infrastructure (loopback server, run folders)
    ("cli", "testing"),
    ("deeprepo",),  # the library's face (deeprepo/__init__.py) and __main__
)
RESEARCH = "rl"
MAX_LINES = 450
#: Modules over MAX_LINES that are data, not logic (none yet).
LONG_OK: frozenset[str] = frozenset()
_PATH_LOADERS = ("spec_from_file_location", "SourceFileLoader", "run_path", "load_source")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str:
    """``deeprepo.rl.env.reward`` → ``rl.env``; ``deeprepo.sandbox.child`` → ``sandbox``."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "deeprepo"
    if parts[1] == RESEARCH and len(parts) > 2:
        return f"{RESEARCH}.{parts[2]}"
    return parts[1]


def layer_of(room: str) -> int:
    for i, rooms in enumerate(LAYERS):
        if room in rooms:
            return i
    raise KeyError(room)


def imports(path: Path, module: str, known: set[str]) -> Iterator[tuple[str, int]]:
    """Every deeprepo module ``path`` imports, with the line: the most specific known module
    (``from a import b`` names ``a.b`` when that is a module)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            if len(subs) == len(node.names):
                for sub in subs:
                    yield sub, node.lineno
            else:
                yield target, node.lineno
                for sub in subs:
                    yield sub, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def _known(target: str, known: set[str]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def path_loads(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text("utf-8"), str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _PATH_LOADERS:
            yield node.lineno, f"{name}(...)"
        elif name in ("exec", "compile") and any(
            isinstance(n, ast.Call)
            and (getattr(n.func, "attr", None) or getattr(n.func, "id", None))
            in ("open", "read", "read_text", "read_bytes")
            for n in ast.walk(node)
        ):
            yield node.lineno, f"{name}() of a file's text"


def check() -> list[str]:
    files = {module_name(p): p for p in sorted((SRC / "deeprepo").rglob("*.py"))}
    known = set(files)
    problems: list[str] = []
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        room = room_of(module)
        try:
            mine = layer_of(room)
        except KeyError:
            problems.append(f"{module}: room {room!r} is on no layer (add it to LAYERS)")
            continue
        for raw, line in imports(path, module, known):
            if not raw.startswith("deeprepo"):
                continue
            target = _known(raw, known)
            if target is None:
                problems.append(f"{module}:{line} imports {raw}, which does not exist")
                continue
            if target != module:
                graph[module].add(target)
            other = room_of(target)
            if other == room:
                continue
            theirs = layer_of(other)
            if theirs >= mine:
                where = "sideways to" if theirs == mine else "up to"
                problems.append(f"{module}:{line} imports {target}: {room} → {other} goes {where}")
        for line, how in path_loads(path):
            problems.append(f"{module}:{line} loads a module by path: {how}")
        lines = path.read_text("utf-8").count("\n")
        if lines > MAX_LINES and module not in LONG_OK:
            problems.append(f"{module}: {lines} lines (split it below {MAX_LINES})")
    for cycle in _cycles(graph):
        problems.append("file circle: " + " → ".join([*cycle, cycle[0]]))
    problems += face_problems()
    return problems


def face_problems() -> list[str]:
    """Imports of deeprepo's insides from :data:`FACE_USERS`."""
    problems = []
    for folder in FACE_USERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT)
            for raw, line in imports(path, path.stem, set()):
                face = raw in FACES or raw.startswith("deeprepo.testing.")
                if raw.startswith("deeprepo.") and not face:
                    problems.append(f"{where}:{line} imports {raw}; use the face deeprepo or deeprepo.rl")
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    problems = check()
    for p in problems:
        print(p)
    if problems:
        print(f"\n{len(problems)} problem(s) with the import contract (scripts/check_layers.py)")
        return 1
    print("import contract holds: imports only go down, no circles, nothing loaded by path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
