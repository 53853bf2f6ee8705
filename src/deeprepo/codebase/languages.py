"""What a file is, judged from its name (and for entry points its text).

Mostly data tables (extension → language, binary extensions, junk directories, entry-point
names) so that adding a language is a one-line change, plus the small functions that read them.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: Lower-case extension (with the dot) → language name.
EXTENSION_LANGUAGES: dict[str, str] = {
    ".py": "Python",
    ".pyi": "Python",
    ".pyx": "Cython",
    ".ipynb": "Jupyter Notebook",
    ".js": "JavaScript",
    ".mjs": "JavaScript",
    ".cjs": "JavaScript",
    ".jsx": "JavaScript",
    ".ts": "TypeScript",
    ".mts": "TypeScript",
    ".cts": "TypeScript",
    ".tsx": "TypeScript",
    ".vue": "Vue",
    ".svelte": "Svelte",
    ".go": "Go",
    ".rs": "Rust",
    ".java": "Java",
    ".kt": "Kotlin",
    ".kts": "Kotlin",
    ".scala": "Scala",
    ".groovy": "Groovy",
    ".gradle": "Groovy",
    ".c": "C",
    ".h": "C",
    ".cc": "C++",
    ".cpp": "C++",
    ".cxx": "C++",
    ".hh": "C++",
    ".hpp": "C++",
    ".hxx": "C++",
    ".cu": "CUDA",
    ".cs": "C#",
    ".fs": "F#",
    ".m": "Objective-C",
    ".mm": "Objective-C++",
    ".swift": "Swift",
    ".rb": "Ruby",
    ".erb": "Ruby",
    ".php": "PHP",
    ".pl": "Perl",
    ".pm": "Perl",
    ".lua": "Lua",
    ".r": "R",
    ".jl": "Julia",
    ".dart": "Dart",
    ".ex": "Elixir",
    ".exs": "Elixir",
    ".erl": "Erlang",
    ".hs": "Haskell",
    ".ml": "OCaml",
    ".clj": "Clojure",
    ".zig": "Zig",
    ".nim": "Nim",
    ".sol": "Solidity",
    ".sh": "Shell",
    ".bash": "Shell",
    ".zsh": "Shell",
    ".fish": "Shell",
    ".ps1": "PowerShell",
    ".bat": "Batch",
    ".cmd": "Batch",
    ".sql": "SQL",
    ".graphql": "GraphQL",
    ".proto": "Protocol Buffers",
    ".html": "HTML",
    ".htm": "HTML",
    ".jinja": "Jinja",
    ".j2": "Jinja",
    ".css": "CSS",
    ".scss": "SCSS",
    ".sass": "Sass",
    ".less": "Less",
    ".md": "Markdown",
    ".markdown": "Markdown",
    ".rst": "reStructuredText",
    ".txt": "Text",
    ".json": "JSON",
    ".jsonc": "JSON",
    ".yaml": "YAML",
    ".yml": "YAML",
    ".toml": "TOML",
    ".ini": "INI",
    ".cfg": "INI",
    ".xml": "XML",
    ".tf": "HCL",
    ".hcl": "HCL",
    ".nix": "Nix",
    ".cmake": "CMake",
}

#: Exact file names (no extension rule fits them) → language name.
FILENAME_LANGUAGES: dict[str, str] = {
    "Dockerfile": "Dockerfile",
    "Containerfile": "Dockerfile",
    "Makefile": "Makefile",
    "GNUmakefile": "Makefile",
    "CMakeLists.txt": "CMake",
    "Rakefile": "Ruby",
    "Gemfile": "Ruby",
    "Jenkinsfile": "Groovy",
    "Vagrantfile": "Ruby",
}

#: Extensions whose files are binary whatever their first bytes say; skipped without reading.
BINARY_EXTENSIONS: frozenset[str] = frozenset(
    {
        # images
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".icns", ".webp", ".tif", ".tiff",
        ".psd", ".heic", ".avif",
        # audio / video
        ".mp3", ".mp4", ".m4a", ".wav", ".ogg", ".flac", ".avi", ".mov", ".mkv", ".webm",
        # archives and packages
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war",
        ".ear", ".whl", ".egg", ".deb", ".rpm", ".apk", ".dmg", ".iso", ".nupkg",
        # compiled code and objects
        ".pyc", ".pyo", ".pyd", ".so", ".dylib", ".dll", ".exe", ".o", ".a", ".lib", ".obj",
        ".class", ".wasm", ".bin", ".dat",
        # documents and fonts
        ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".woff", ".woff2",
        ".ttf", ".otf", ".eot",
        # data and model blobs
        ".db", ".sqlite", ".sqlite3", ".pkl", ".pickle", ".npy", ".npz", ".h5", ".hdf5",
        ".parquet", ".feather", ".pt", ".pth", ".onnx", ".safetensors", ".ckpt", ".tfrecord",
    }
)  # fmt: skip

#: Directory names never descended into; each is listed once in ``metadata.skipped``.
JUNK_DIRS: frozenset[str] = frozenset(
    {
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "dist",
        "build",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".eggs",
    }
)

#: Version-control metadata: skipped silently (every repository has one, it is not content).
VCS_DIRS: frozenset[str] = frozenset({".git", ".hg", ".svn"})

#: File names that are entry points by convention, wherever they sit.
ENTRY_POINT_NAMES: frozenset[str] = frozenset(
    {
        "__main__.py",
        "main.py",
        "app.py",
        "manage.py",
        "wsgi.py",
        "asgi.py",
        "server.js",
        "server.ts",
        "index.js",
        "index.ts",
        "main.go",
        "main.rs",
    }
)


def extension(path: str) -> str:
    """Lower-case extension of a POSIX path's last part, as ``posixpath.splitext`` finds it.

    Written out because the loader asks for every file and ``splitext`` costs several times more.
    """
    start = path.rfind("/") + 1
    dot = path.rfind(".")
    if dot <= start:  # no dot in the name, or only the one that starts it
        return ""
    if path[start] == "." and not path[start:dot].strip("."):
        return ""  # leading dots start no extension (``..bashrc``)
    return path[dot:].lower()


def language_of(path: str) -> str | None:
    """The language of a relative POSIX path, or ``None`` when the table does not know it."""
    by_name = FILENAME_LANGUAGES.get(path[path.rfind("/") + 1 :])
    if by_name is not None:
        return by_name
    return EXTENSION_LANGUAGES.get(extension(path))


def has_binary_extension(path: str) -> bool:
    """True when the file name's extension marks a binary format."""
    return extension(path) in BINARY_EXTENSIONS


# `if __name__ == "__main__":` in either operand order, at the start of a line.
_MAIN_GUARD = re.compile(
    r"""^if\s+(?:__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__)\s*:""",
    re.MULTILINE,
)


def find_entry_points(files: Mapping[str, str], not_parsed: list[str] | None = None) -> list[str]:
    """Paths in ``files`` that start a program, sorted.

    Heuristics: conventional names (``__main__.py``, ``main.py``, ``index.ts``, ...), Python
    files with a ``__main__`` guard, ``package.json`` ``main``/``bin`` and ``pyproject.toml``
    ``[project.scripts]`` / ``[tool.poetry.scripts]`` targets that exist in ``files``.

    The manifests are repository text: one that is too large or nested too deep for the
    parser (a ``RecursionError`` from ``[[[[...``) is not parsed, and a note naming it is
    appended to ``not_parsed`` when given; the other files are still read.
    """
    notes: list[str] = [] if not_parsed is None else not_parsed
    found: set[str] = set()
    for path, text in files.items():
        name = path[path.rfind("/") + 1 :]
        if name in ENTRY_POINT_NAMES or (
            name.endswith(".py") and "__main__" in text and _MAIN_GUARD.search(text)
        ):
            found.add(path)
        if name == "package.json":
            found.update(_package_json_targets(path, text, files, notes))
        elif name == "pyproject.toml":
            found.update(_pyproject_targets(path, text, files, notes))
    return sorted(found)


#: Manifests larger than this are not parsed: real ones are a few kilobytes.
MAX_MANIFEST_CHARS = 1_000_000


def _parse_manifest(
    path: str, text: str, parse: Callable[[str], Any], syntax: type[Exception], notes: list[str]
) -> Any:
    """``parse(text)``, or ``None`` with a note when the manifest cannot be read safely.

    A syntax error is the author's business (no note: the file is still audited as text);
    a manifest past the size bound or nested past the parser's recursion is named, since
    it reads as an attempt to stop the run.
    """
    if len(text) > MAX_MANIFEST_CHARS:
        notes.append(
            f"{path}: not parsed for entry points (over {MAX_MANIFEST_CHARS:,} characters)"
        )
        return None
    try:
        return parse(text)
    except syntax:
        return None
    except (RecursionError, MemoryError) as exc:
        notes.append(f"{path}: not parsed for entry points (nested too deep: {type(exc).__name__})")
        return None


def _package_json_targets(
    path: str, text: str, files: Mapping[str, str], notes: list[str]
) -> Iterable[str]:
    data = _parse_manifest(path, text, json.loads, ValueError, notes)
    if not isinstance(data, dict):
        return []
    values: list[Any] = [data.get("main")]
    binaries = data.get("bin")
    values.extend(binaries.values() if isinstance(binaries, dict) else [binaries])
    base = posixpath.dirname(path)
    found: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value:
            continue
        target = posixpath.normpath(posixpath.join(base, value))
        # Node's resolution: the exact file, then with .js, then a directory's index.js.
        for candidate in (target, target + ".js", target + "/index.js"):
            if candidate in files:
                found.append(candidate)
                break
    return found


def _pyproject_targets(
    path: str, text: str, files: Mapping[str, str], notes: list[str]
) -> Iterable[str]:
    data = _parse_manifest(path, text, tomllib.loads, tomllib.TOMLDecodeError, notes)
    if not isinstance(data, dict):
        return []
    scripts: list[Any] = []
    project = data.get("project")
    if isinstance(project, dict) and isinstance(project.get("scripts"), dict):
        scripts.extend(project["scripts"].values())
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(poetry, dict) and isinstance(poetry.get("scripts"), dict):
        for value in poetry["scripts"].values():
            scripts.append(value.get("reference") if isinstance(value, dict) else value)
    base = posixpath.dirname(path)
    found: list[str] = []
    for value in scripts:
        if not isinstance(value, str) or ":" not in value:
            continue
        module = value.split(":", 1)[0].strip().replace(".", "/")
        candidates = [
            posixpath.join(base, layout, module + suffix)
            for layout in ("", "src")
            for suffix in (".py", "/__init__.py")
        ]
        found.extend(c for c in (posixpath.normpath(c) for c in candidates) if c in files)
    return found
