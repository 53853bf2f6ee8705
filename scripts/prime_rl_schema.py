"""Extract prime-rl's config schema (which keys exist where) from its source, as JSON.

prime-rl's config models (``packages/prime-rl-configs``) need Python 3.12, verifiers and
its renderers, so deeprepo cannot import them to validate ``environments/*prime-rl*.toml``.
This script reads their source with ``ast`` instead and writes, for every config class,
its bases and, for each field, the config classes (or type aliases) its annotation names.
``tests/test_gpu_recipes.py`` walks a recipe's keys through it. Rerun it when prime-rl
moves (the commit is recorded in the output)::

    python scripts/prime_rl_schema.py PRIME_RL_GIT_DIR > tests/data/prime_rl_schema.json
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any

PACKAGE = "packages/prime-rl-configs/src/prime_rl"


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True
    ).stdout


def _names(node: ast.AST) -> list[str]:
    """Names an annotation refers to (``a.B`` as ``a.B``), outside call arguments."""
    out: list[str] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, ast.Call):
            return  # Field(...), discriminators: not types
        if (
            isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Name)
            and n.value.id == "Literal"
        ):
            out.append("Literal")  # its strings are values, not forward references
            return
        if isinstance(n, ast.Name):
            out.append(n.id)
            return
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            out.append(f"{n.value.id}.{n.attr}")
            return
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip():
            # a forward reference: "VLMConfig | None"
            try:
                visit(ast.parse(n.value, mode="eval").body)
            except SyntaxError:
                pass
            return
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return out


def extract(git_dir: str, commit: str = "HEAD") -> dict[str, Any]:
    sha = _git(git_dir, "rev-parse", commit).strip()
    files = [
        f
        for f in _git(git_dir, "ls-tree", "-r", "--name-only", sha, PACKAGE).split()
        if f.endswith(".py")
    ]
    modules: dict[str, dict[str, Any]] = {}
    for path in files:
        module = path.removeprefix(PACKAGE.rsplit("/", 1)[0] + "/").removesuffix(".py")
        module = module.replace("/", ".")
        tree = ast.parse(_git(git_dir, "show", f"{sha}:{path}"))
        imports: dict[str, str] = {}
        classes: dict[str, Any] = {}
        aliases: dict[str, list[str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    imports[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.ClassDef):
                fields = {
                    stmt.target.id: _names(stmt.annotation)
                    for stmt in node.body
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                }
                classes[node.name] = {
                    "bases": [n for b in node.bases for n in _names(b)],
                    "fields": fields,
                }
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None and _names(node.annotation) == ["TypeAlias"]:
                    aliases[node.target.id] = _names(node.value)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and isinstance(node.value, ast.Subscript):
                    aliases[target.id] = _names(node.value)
        modules[module] = {"imports": imports, "classes": classes, "aliases": aliases}
    return {
        "source": "github.com/PrimeIntellect-ai/prime-rl " + PACKAGE,
        "commit": sha,
        "root": "prime_rl.configs.rl.RLConfig",
        "modules": modules,
    }


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: prime_rl_schema.py PRIME_RL_GIT_DIR [COMMIT] > schema.json")
    print(json.dumps(extract(*sys.argv[1:]), indent=1, sort_keys=True))
