"""The *scope* of a file: what part of a project it is (DESIGN §6).

Reports lead with the code a project ships and keep the rest apart: a weak hash in a test
fixture or an ``eval`` in a vendored, minified bundle is rarely what a reader came for. Each
file gets one scope from path conventions first and its content second:

========== ==============================================================================
scope      what lands there
========== ==============================================================================
vendored   ``vendor/``, ``third_party/``, ``node_modules/``, ``site-packages/`` …
generated  minified or bundled assets, protobuf/grpc stubs, migrations, files that say
           "Code generated … DO NOT EDIT" or ``@generated`` near their top
test       ``tests/``, ``__tests__/``, ``spec/``, ``fixtures/``, ``test_*.py``,
           ``*_test.go``, ``*.test.ts``, ``*.spec.js``, ``conftest.py`` …
example    ``examples/``, ``samples/``, ``demo/``, ``tutorial/``, ``docs_src/`` …
docs       ``docs/``, ``doc/`` and prose files (``.md``, ``.rst``, ``.txt`` …)
config     data and settings files (``.json``, ``.yaml``, ``.toml``, ``.ini``, ``.env``,
           ``Dockerfile``, CI workflows …)
source     everything else
========== ==============================================================================

The first row that matches wins, so ``tests/fixtures/vendor/x.js`` is *vendored* and
``examples/tests/test_app.py`` is a *test*. :data:`HEADLINE_SCOPES` are the scopes whose
findings count in a report's headline; the rest are listed apart, with their counts.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping
from typing import Final, Literal

from deeprepo.codebase.languages import extension

__all__ = [
    "HEADLINE_SCOPES",
    "SCOPES",
    "Scope",
    "classify_scope",
    "count_scopes",
    "is_minified",
]

Scope = Literal["source", "test", "example", "docs", "vendored", "generated", "config"]
#: Every scope, in the order reports list them.
SCOPES: Final[tuple[Scope, ...]] = (
    "source",
    "config",
    "test",
    "example",
    "docs",
    "generated",
    "vendored",
)
#: Findings in these scopes are the run's headline: code and configuration the project ships.
HEADLINE_SCOPES: Final[frozenset[str]] = frozenset({"source", "config"})

_VENDORED_DIRS = frozenset(
    {
        "vendor",
        "vendors",
        "vendored",
        "_vendor",
        "third_party",
        "third-party",
        "thirdparty",
        "3rdparty",
        "extern",
        "external",
        "externals",
        "node_modules",
        "bower_components",
        "jspm_packages",
        "site-packages",
        "dist-packages",
        "pods",
    }
)
_GENERATED_DIRS = frozenset({"dist", "generated", "__generated__", "migrations"})
# Build output folders, only at the top: ``src/build/`` is often hand-written tooling.
_GENERATED_TOP_DIRS = frozenset({"build", "out", "target", "coverage", "htmlcov", "site"})
_TEST_DIRS = frozenset(
    {
        "test",
        "tests",
        "testing",
        "__tests__",
        "__test__",
        "spec",
        "specs",
        "e2e",
        "integration_tests",
        "unit_tests",
        "testdata",
        "test_data",
        "test-data",
        "fixtures",
        "__fixtures__",
        "__mocks__",
        "mocks",
        "testsuite",
        "cypress",
        "playwright",
    }
)
_EXAMPLE_DIRS = frozenset(
    {
        "example",
        "examples",
        "sample",
        "samples",
        "demo",
        "demos",
        "tutorial",
        "tutorials",
        "docs_src",
        "cookbook",
        "playground",
    }
)
_DOCS_DIRS = frozenset({"doc", "docs", "documentation"})

_GENERATED_NAME = re.compile(
    r"(?:\.min\.(?:js|mjs|cjs|css)|[.-]bundle\.(?:js|mjs)|\.chunk\.js|\.map"
    r"|_pb2(?:_grpc)?\.pyi?|\.pb\.(?:go|cc|h)|\.pb\.gw\.go|_grpc\.pb\.go|\.g\.dart"
    r"|\.generated\.\w+|\.gen\.\w+|\.designer\.cs|-lock\.json|\.lock)$",
    re.IGNORECASE,
)
# What follows the last dot of every name _GENERATED_NAME matches (lower-cased, ASCII), but
# for its ``.generated.*`` and ``.gen.*`` rows, with what the name must then also hold (the
# rows' own text, which no case folding changes), or "" when the regex must decide: a name
# that fails this is not searched (the search cost more than the rest of a file's path rules).
# A tail that is not ASCII is searched anyway: the regex's case folding matches "ſ" as "s"
# and "ı" as "i".
_GENERATED_NAME_TAILS: Final[dict[str, str]] = {
    ".py": "_pb2",
    ".pyi": "_pb2",
    ".go": ".pb.",
    ".cc": ".pb.",
    ".h": ".pb.",
    **dict.fromkeys((".js", ".mjs", ".cjs", ".css", ".map", ".dart", ".cs", ".json", ".lock"), ""),
}
_GENERATED_FILES = frozenset({"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock"})
_TEST_NAME = re.compile(
    r"(?:^test_.*\.py$|^tests?\.py$|_tests?\.py$|^conftest\.py$|_test\.go$|_test\.rb$|_spec\.rb$"
    r"|\.(?:test|spec|e2e)\.[cm]?[jt]sx?$|Tests?\.(?:java|kt|cs|php|swift)$|_test\.(?:c|cc|cpp|rs)$)"
)
_DOCS_EXTS = frozenset(
    {".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".rdoc", ".org", ".tex"}
)
_CONFIG_EXTS = frozenset(
    {
        ".json",
        ".jsonc",
        ".json5",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".config",
        ".properties",
        ".env",
        ".xml",
        ".plist",
        ".tf",
        ".tfvars",
        ".hcl",
        ".lock",
    }
)
_CONFIG_FILES = frozenset(
    {
        "dockerfile",
        "containerfile",
        "makefile",
        "procfile",
        "vagrantfile",
        "jenkinsfile",
        ".env",
        ".npmrc",
        ".pypirc",
        ".gitattributes",
        ".gitignore",
        ".dockerignore",
        ".editorconfig",
        "requirements.txt",
        "constraints.txt",
    }
)
_CONFIG_DIRS = frozenset({".github", ".circleci", ".gitlab", ".devcontainer", ".vscode", ".idea"})
# Markers generators write near the top of what they emit.
_GENERATED_MARK = re.compile(
    r"(?:code generated .{0,80}do not edit|@generated\b|auto-?generated (?:file|code|by)"
    r"|this file (?:was|is) (?:automatically )?generated|generated by the protocol buffer"
    r"|do not edit(?: this file)?[,.!]? (?:it was|it is|this file is) (?:auto|generated))",
    re.IGNORECASE,
)
_GENERATED_HEAD_CHARS = 2048
# Every marker above holds one of these words, so a head without them cannot match: a plain
# substring test (a few µs) spares the case-insensitive regex (~100x slower) on the files
# that are not generated, which is nearly all of them. "do not ed" stops before the "i",
# which the regex's case folding also matches as "ı" or "İ"; the longer the word, the
# further each miss lets the search jump. Two plain tests, not a loop: this runs once a file.
_GENERATED_WORD = "generated"
_DO_NOT_EDIT_WORD = "do not ed"


def _has_generated_mark(text: str) -> bool:
    head = text[:_GENERATED_HEAD_CHARS]
    folded = head.lower()
    if _GENERATED_WORD not in folded and _DO_NOT_EDIT_WORD not in folded:
        return False
    return _GENERATED_MARK.search(head) is not None


# A browser library copied into a project's asset folder keeps its release banner
# (``/*! jQuery v3.7.1 | (c) OpenJS Foundation``): a preserved comment naming a version,
# a copyright or a licence. Project files under the same folders rarely open that way.
_ASSET_DIRS = frozenset(
    {"static", "assets", "public", "www", "wwwroot", "lib", "libs", "js", "css"}
)
_LIBRARY_BANNER = re.compile(
    r"\A\s*/\*[!*].{0,400}?(?:@license|\bv?\d+\.\d+\.\d+\b|\(c\)|copyright|licen[sc]ed under)",
    re.IGNORECASE | re.DOTALL,
)
_MINIFIABLE_EXTS = frozenset({".js", ".mjs", ".cjs", ".css"})
# A hand-written file rarely averages over 200 characters a line or holds a 1,000+ one.
_MINIFIED_MEAN_LINE = 200
_MINIFIED_LONG_LINE = 1000


def is_minified(text: str) -> bool:
    """Long lines with little else: a minified or bundled asset."""
    if len(text) < 500:
        return False
    lines = text.count("\n") + 1
    if len(text) / lines > _MINIFIED_MEAN_LINE:
        return True
    long_lines = sum(1 for line in text.split("\n", 200)[:200] if len(line) > _MINIFIED_LONG_LINE)
    return long_lines * 10 >= min(lines, 200)


def _may_be_generated_name(name: str) -> bool:
    """False when the lower-cased ``name`` cannot match :data:`_GENERATED_NAME`."""
    dot = name.rfind(".")
    if dot < 0:  # every row holds a dot
        return False
    tail = name[dot:]
    needs = _GENERATED_NAME_TAILS.get(tail)
    if needs is not None:
        return needs in name
    return not tail.isascii() or ".gen" in name


# What a file's directories say, as bits: the same for every file of a directory, so worked
# out once a directory (a set lookup per part of the path was most of the cost of a scope).
_IN_VENDORED = 1
_IN_ASSETS = 2
_IN_GENERATED = 4
_IN_TEST = 8
_IN_EXAMPLE = 16
_IN_DOCS = 32
_IN_CONFIG = 64


@functools.lru_cache(maxsize=4096)
def _dir_flags(dir_path: str) -> int:
    """The bits of the directory part ``dir_path`` of a path (``""``: the top)."""
    if not dir_path:
        return 0
    dirs = dir_path.lower().split("/")
    flags = 0
    for bit, names in (
        (_IN_VENDORED, _VENDORED_DIRS),
        (_IN_ASSETS, _ASSET_DIRS),
        (_IN_GENERATED, _GENERATED_DIRS),
        (_IN_TEST, _TEST_DIRS),
        (_IN_EXAMPLE, _EXAMPLE_DIRS),
        (_IN_DOCS, _DOCS_DIRS),
    ):
        if not names.isdisjoint(dirs):
            flags |= bit
    if dirs[0] in _GENERATED_TOP_DIRS:
        flags |= _IN_GENERATED
    if dirs[0] in _CONFIG_DIRS:
        flags |= _IN_CONFIG
    return flags


def classify_scope(path: str, text: str = "") -> Scope:
    """The scope of the file at relative POSIX ``path`` with content ``text``.

    With no text (a path the model named, a deleted file), only the path decides.
    """
    cut = path.rfind("/")
    real_name = path[cut + 1 :]
    # Lower-casing the parts one by one gives what lower-casing the path gives: "/" is cased
    # by nothing and breaks every case context (a final sigma's included).
    name = real_name.lower()
    flags = _dir_flags(path[:cut]) if cut >= 0 else 0
    ext = extension(real_name)
    if flags & _IN_VENDORED:
        return "vendored"
    minifiable = bool(text) and ext in _MINIFIABLE_EXTS
    if minifiable and flags & _IN_ASSETS and _LIBRARY_BANNER.match(text):
        return "vendored"
    if (
        flags & _IN_GENERATED
        or name in _GENERATED_FILES
        or (_may_be_generated_name(name) and _GENERATED_NAME.search(name))
        or (text and _has_generated_mark(text))
        or (minifiable and is_minified(text))
    ):
        return "generated"
    if flags & _IN_TEST or _TEST_NAME.search(real_name):
        return "test"
    if flags & _IN_EXAMPLE:
        return "example"
    if flags & _IN_DOCS or (ext in _DOCS_EXTS and name not in _CONFIG_FILES):
        return "docs"
    if (
        flags & _IN_CONFIG
        or ext in _CONFIG_EXTS
        or name in _CONFIG_FILES
        or name.startswith((".env", "dockerfile"))
    ):
        return "config"
    return "source"


def count_scopes(scopes: Mapping[str, str]) -> dict[str, int]:
    """Files per scope, in :data:`SCOPES` order, scopes with no file left out."""
    counts = Counter(scopes.values())
    return {s: counts[s] for s in SCOPES if counts[s]}
