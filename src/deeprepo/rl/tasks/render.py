"""Turning blocks of template code into files, and reading planted lines back out.

Templates use two kinds of marks that never occur in real code:

* ``«name»`` is a placeholder filled from a context dict. A value with newlines
  is indented like the line the placeholder sits on. ``«alias.»`` is the call
  prefix of another section (``product_repo.``, ``this.`` …) and adds the
  import that makes it valid.
* ``⟦name⟧`` at the end of a line marks a line of interest (``start``,
  ``sink``, ``end``, ``source``). Planted blocks get their marks renamed to
  ``⟦tag:name⟧``; :func:`extract_marks` strips them from the finished text and
  returns their line numbers, so ground truth is read from the generated text
  and never counted by hand.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from deeprepo.rl.tasks.naming import Entity

_PLACEHOLDER_RE = re.compile(r"«([\w.:]+)»")
_MARK_RE = re.compile(r"[ \t]*⟦([\w:.-]+)⟧")
_PY_FROM_RE = re.compile(r"^from (\S+) import (.+)$")
_JS_SPEC_RE = re.compile(r"^(?:\{([\w, ]+)\}|(\w+))=(\S+)$")
ENTITY_ALIASES = frozenset({"model", "repo", "svc", "schema", "routes"})
_STDLIB = frozenset(sys.stdlib_module_names)
_NODE_BUILTINS = frozenset(
    [
        "assert",
        "child_process",
        "crypto",
        "events",
        "fs",
        "http",
        "https",
        "os",
        "path",
        "querystring",
        "stream",
        "url",
        "util",
        "vm",
        "zlib",
    ]
)


def js_relpath(src: str, dst: str) -> str:
    """The ``require`` path of file ``dst`` from file ``src`` (``./db``, ``../services/x``)."""
    rel = posixpath.relpath(posixpath.splitext(dst)[0], posixpath.dirname(src) or ".")
    return rel if rel.startswith("../") else "./" + rel


class TemplateError(KeyError):
    """A template names a placeholder its context lacks (a bug in the generator's data)."""


def fill(template: str, ctx: Mapping[str, str], _depth: int = 0) -> str:
    """Replace ``«name»`` placeholders; multi-line values keep the line's indentation."""
    if "«" not in template:
        return template
    out: list[str] = []
    for line in template.split("\n"):
        if "«" not in line:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]

        def sub(m: re.Match[str], indent: str = indent, line: str = line) -> str:
            try:
                value = ctx[m.group(1)]
            except KeyError:
                raise TemplateError(
                    f"placeholder «{m.group(1)}» has no value in: {line.strip()!r}"
                ) from None
            return value.replace("\n", "\n" + indent) if "\n" in value else value

        out.append(_PLACEHOLDER_RE.sub(sub, line))
    text = "\n".join(out)
    # Context values may name other placeholders (e.g. «dbq» → «db.»query): one more pass.
    return fill(text, ctx, 1) if "«" in text and _depth == 0 else text


def indent_text(text: str, prefix: str) -> str:
    return "\n".join(prefix + ln if ln.strip() else "" for ln in text.split("\n"))


@dataclass(frozen=True)
class Block:
    """A function, method, class or statement group, as a template plus what it needs."""

    key: str  # unique within its section; a planted block with the same key replaces it
    code: str
    imports: tuple[
        str, ...
    ] = ()  # python: "import os" / "from x import y"; js: "fs", "jwt=jsonwebtoken", "{exec}=child_process"
    names: tuple[tuple[str, str], ...] = ()  # (section alias, name) imported by name
    uses: tuple[str, ...] = ()  # section aliases used as «alias.» call prefixes
    exports: tuple[str, ...] = ()  # js names this block adds to module.exports (templates)
    ctx: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""  # set on planted blocks: marks become ⟦tag:name⟧

    def tagged(self, tag: str, **ctx: str) -> Block:
        """A copy whose marks carry ``tag`` and whose context adds ``ctx``."""
        return replace(
            self, tag=tag, code=self.code.replace("⟦", f"⟦{tag}:"), ctx={**self.ctx, **ctx}
        )


@dataclass
class Section:
    """Blocks that belong together: module-level functions, or the methods of one class."""

    id: str  # "repo:product", "storage", "auth" …
    blocks: list[Block]
    entity: Entity | None = None
    class_name: str | None = None  # set: blocks are methods of this class, with a singleton
    instance: str = ""  # the singleton's variable name (class style)
    handle: str = ""  # the module alias callers use (function style)
    doc: str = ""
    gap: int = 2  # blank lines between blocks
    ctx: dict[str, str] = field(default_factory=dict)


@dataclass
class SourceFile:
    """One file of the generated repository."""

    path: str
    lang: str  # python | js | text
    doc: str = ""
    module: str = ""  # python dotted module, "" for js/text
    preamble: list[Block] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    epilogue: list[Block] = field(default_factory=list)
    ctx: dict[str, str] = field(default_factory=dict)
    text: str = ""  # whole content of text files
    exports: str = "functions"  # js: functions | none
    strict: bool = False  # js: start with "use strict"


Registry = dict[str, tuple[SourceFile, Section]]


def resolve_alias(alias: str, entity: Entity | None) -> str:
    """Section id an alias means inside a block: entity roles are scoped to the block's entity."""
    if alias in ENTITY_ALIASES:
        if entity is None:
            raise TemplateError(f"alias {alias!r} used outside an entity section")
        return f"{alias}:{entity.name}"
    return alias


class _Imports:
    """Collects the imports of one file and renders them in the usual groups."""

    def __init__(self, lang: str, local_roots: frozenset[str]):
        self.lang = lang
        self.local_roots = local_roots
        self.plain: set[str] = set()
        self.froms: dict[str, set[str]] = {}

    def add_literal(self, spec: str) -> None:
        if self.lang == "python":
            m = _PY_FROM_RE.match(spec)
            if m:
                self.froms.setdefault(m.group(1), set()).update(
                    n.strip() for n in m.group(2).split(",")
                )
            else:
                self.plain.add(spec)
            return
        m = _JS_SPEC_RE.match(spec)
        if m is None:  # bare module: namespace import named after it
            self.plain.add(f'const {spec} = require("{spec}");')
        elif m.group(1):
            self.froms.setdefault(m.group(3), set()).update(
                n.strip() for n in m.group(1).split(",")
            )
        else:
            self.plain.add(f'const {m.group(2)} = require("{m.group(3)}");')

    def add_from(self, module: str, name: str) -> None:
        self.froms.setdefault(module, set()).add(name)

    def _group(self, module: str) -> int:
        if self.lang == "python":
            root = module.split(".")[0]
            return 2 if root in self.local_roots else (0 if root in _STDLIB else 1)
        if module.startswith("."):
            return 2
        return 0 if module in _NODE_BUILTINS else 1

    def render(self) -> list[str]:
        groups: dict[int, list[tuple[str, str]]] = {0: [], 1: [], 2: []}
        if self.lang == "python":  # isort order: "import x" lines, then "from x import y" lines
            for line in self.plain:
                mod = line.split()[1]
                groups[self._group(mod)].append(("0" + mod, line))
            for mod, names in self.froms.items():
                groups[self._group(mod)].append(
                    ("1" + mod, f"from {mod} import {', '.join(sorted(names))}")
                )
        else:
            for line in self.plain:
                mod = line.split('require("', 1)[1].split('"', 1)[0]
                groups[self._group(mod)].append((mod, line))
            for mod, names in self.froms.items():
                groups[self._group(mod)].append(
                    (mod + " ~", f'const {{ {", ".join(sorted(names))} }} = require("{mod}");')
                )
        out: list[str] = []
        for g in (0, 1, 2):
            if groups[g]:
                if out:
                    out.append("")
                out.extend(line for _, line in sorted(groups[g]))
        return out


class Renderer:
    """Renders the files of one (sub)project, resolving cross-file references."""

    def __init__(self, registry: Registry, local_roots: frozenset[str]):
        self.registry = registry
        self.local_roots = local_roots

    def _target(self, alias: str, entity: Entity | None) -> tuple[SourceFile, Section]:
        sid = resolve_alias(alias, entity)
        try:
            return self.registry[sid]
        except KeyError:
            raise TemplateError(f"section {sid!r} does not exist in this project") from None

    def _js_rel(self, src: SourceFile, dst: SourceFile) -> str:
        return js_relpath(src.path, dst.path)

    def _prefix(self, f: SourceFile, alias: str, entity: Entity | None, imports: _Imports) -> str:
        tf, ts = self._target(alias, entity)
        if tf is f:
            return f"{ts.instance}." if ts.class_name else ""
        if ts.class_name:
            self._import_name(f, tf, ts.instance, imports)
            return f"{ts.instance}."
        if f.lang == "python":
            parent, _, leaf = tf.module.rpartition(".")
            alias_part = "" if leaf == ts.handle else f" as {ts.handle}"
            imports.add_literal(
                f"from {parent} import {leaf}{alias_part}"
                if parent
                else f"import {leaf}{alias_part}"
            )
        else:
            imports.plain.add(f'const {ts.handle} = require("{self._js_rel(f, tf)}");')
        return f"{ts.handle}."

    def _import_name(self, f: SourceFile, tf: SourceFile, name: str, imports: _Imports) -> None:
        if tf is f:
            return
        if f.lang == "python":
            imports.add_from(tf.module, name)
        else:
            imports.add_from(self._js_rel(f, tf), name)

    def _render_block(
        self,
        f: SourceFile,
        b: Block,
        base: Mapping[str, str],
        entity: Entity | None,
        imports: _Imports,
    ) -> tuple[str, list[str]]:
        ctx = {**base, **b.ctx}
        for alias in b.uses:
            ctx[alias + "."] = self._prefix(f, alias, entity, imports)
        for spec in b.imports:
            imports.add_literal(fill(spec, ctx))
        for alias, name in b.names:
            tf, _ = self._target(alias, entity)
            self._import_name(f, tf, fill(name, ctx), imports)
        return fill(b.code, ctx), [fill(e, ctx) for e in b.exports]

    def render(self, f: SourceFile) -> str:
        """The full text of ``f`` (marks still in place)."""
        if f.lang == "text":
            return f.text if f.text.endswith("\n") else f.text + "\n"
        py = f.lang == "python"
        imports = _Imports(f.lang, self.local_roots)
        exports: list[str] = []
        pre = [self._render_block(f, b, f.ctx, None, imports)[0] for b in f.preamble]
        body: list[str] = []
        for s in f.sections:
            base = {**f.ctx, **s.ctx}
            codes: list[str] = []
            for b in s.blocks:
                code, ex = self._render_block(f, b, base, s.entity, imports)
                codes.append(code)
                if not s.class_name:  # a class exports itself and its instance, not its methods
                    exports.extend(ex)
            body.append(self._section_text(s, codes, py))
            if s.class_name:
                exports.extend((s.class_name, s.instance))
        post = [self._render_block(f, b, f.ctx, None, imports)[0] for b in f.epilogue]
        if not py and f.exports == "functions" and exports:
            post.append(_js_exports(exports))
        parts: list[str] = []
        if py:
            if f.doc:
                parts.append(f'"""{f.doc}"""')
        else:
            if f.strict:
                parts.append('"use strict";')
            if f.doc:
                parts.append(f"/**\n * {f.doc}\n */")
        head = imports.render()
        if head:
            parts.append("\n".join(head))
        sep = "\n\n\n" if py else "\n\n"
        chunks = [c for c in (*pre, *body, *post) if c.strip()]
        text = "\n\n".join(parts)
        if chunks:
            text = (text + sep if text else "") + sep.join(chunks)
        return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n") + "\n"

    @staticmethod
    def _section_text(s: Section, codes: list[str], py: bool) -> str:
        gap = "\n" * (s.gap + 1)
        if not s.class_name:
            return gap.join(codes)
        if py:
            doc = f'    """{s.doc}"""\n\n' if s.doc else ""
            inner = "\n\n".join(indent_text(c, "    ") for c in codes)
            return f"class {s.class_name}:\n{doc}{inner}\n\n\n{s.instance} = {s.class_name}()"
        doc = f"/** {s.doc} */\n" if s.doc else ""
        inner = "\n\n".join(indent_text(c, "  ") for c in codes)
        return f"{doc}class {s.class_name} {{\n{inner}\n}}\n\nconst {s.instance} = new {s.class_name}();"


def _js_exports(names: list[str]) -> str:
    uniq = list(dict.fromkeys(names))
    one = f"module.exports = {{ {', '.join(uniq)} }};"
    if len(one) <= 100:
        return one
    return "module.exports = {\n" + "".join(f"  {n},\n" for n in uniq) + "};"


@dataclass(frozen=True)
class Mark:
    tag: str
    name: str
    file: str
    line: int


def extract_marks(path: str, text: str) -> tuple[str, list[Mark]]:
    """Strip ``⟦tag:name⟧`` marks from ``text``; return the clean text and each mark's line."""
    if "⟦" not in text:
        return text, []
    marks: list[Mark] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if "⟦" not in line:
            continue
        for m in _MARK_RE.finditer(line):
            tag, _, name = m.group(1).rpartition(":")
            if tag:  # untagged marks belong to clean templates and mean nothing
                marks.append(Mark(tag, name, path, i + 1))
        lines[i] = _MARK_RE.sub("", line).rstrip()
    return "\n".join(lines), marks
