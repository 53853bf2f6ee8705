"""Tasks on the real-code substrate: catalogue blocks planted into open-source files.

A repository is a draw of vendored packages (``realcode``): some or all of each package's
files under their own paths, plus ``THIRD_PARTY_LICENSES.txt`` with the licence of every
package used. Every code file then gets exactly one top-level block from the catalogue: a
bug, a decoy or a clean helper (the catalogue's safe uses), at an anchor drawn uniformly from
the file's top-level statement boundaries (``realplant``). So which files hold a bug, and
where in a file, is independent of the file's size, its position in the tree and its name:
every file grows by one block, and only what the block does tells a bug from a clean helper.

Only the catalogue's self-contained snippets are planted here (module-level helpers that need
no entity, route or project section); cross-file flows stay with the synthetic tiers.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from deeprepo.rl.tasks.catalogue import safe_pool, snippets
from deeprepo.rl.tasks.mutate import Shape, mutate_block
from deeprepo.rl.tasks.naming import secret_token
from deeprepo.rl.tasks.planting import Placed
from deeprepo.rl.tasks.realcode import RealCodeError, RealFile, corpus, licence_text, packages
from deeprepo.rl.tasks.realplant import (
    HostStyle,
    adapt,
    add_imports,
    host_style,
    import_lines,
    insert,
    js_import_names,
    top_level_names,
)
from deeprepo.rl.tasks.render import Block, Mark, extract_marks, fill
from deeprepo.rl.tasks.snippets import ENTITY_HOSTS, SafeUse, Snippet

NOTICES = "THIRD_PARTY_LICENSES.txt"
_PLACEHOLDERS = frozenset(
    {"selfp", "self0", "me.", "fn", "afn", "nm", "hex40", "hex16", "alnum24"}
    | {"secret_hex", "secret_alnum", "pkg_file", "currency", "bad_name_msg"}
)
_HEX = "0123456789abcdef"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _self_contained(block: Block) -> bool:
    ph = set(re.findall(r"«([\w.:]+)»", block.code))
    return (
        not block.uses
        and ph <= _PLACEHOLDERS
        and all(sec == "config" and name.endswith("_DIR") for sec, name in block.names)
    )


def plantable(lang: str) -> tuple[Snippet, ...]:
    """The catalogue snippets of ``lang`` that stand alone in any module."""
    return tuple(
        s
        for s in snippets(lang)
        if s.host not in ENTITY_HOSTS
        and not (s.replaces or s.needs or s.pinned)
        and _self_contained(s.block)
        and set(re.findall(r"«([\w.:]+)»", s.description)) <= _PLACEHOLDERS
    )


def fillers(lang: str) -> tuple[SafeUse, ...]:
    """The catalogue's clean module-level helpers and constants that stand alone."""
    return tuple(
        u for u in safe_pool(lang) if u.where in ("fn", "const") and _self_contained(u.block)
    )


@dataclass
class _Host:
    file: RealFile
    style: HostStyle
    names: set[str]
    lines: list[str]
    text: str = ""  # the file with its planted block (and marks), once placed
    imports: tuple[str, ...] = ()


def _plan(rng: random.Random, lang: str, n_bugs: int, n_decoys: int) -> list[Snippet]:
    """Bugs of distinct kinds (then repeats), then decoys; never the same snippet twice."""
    cat = plantable(lang)
    chosen: list[Snippet] = []
    for vulnerable, count in ((True, n_bugs), (False, n_decoys)):
        kinds = sorted({s.kind for s in cat if s.vulnerable == vulnerable})
        rng.shuffle(kinds)
        for i in range(len(kinds) * 3):
            if sum(s.vulnerable == vulnerable for s in chosen) >= count:
                break
            variants = [
                s for s in cat if s.kind == kinds[i % len(kinds)] and s.vulnerable == vulnerable
            ]
            variants = [s for s in variants if s not in chosen]
            if variants:
                chosen.append(rng.choice(variants))
    return chosen


def _ctx(rng: random.Random, host: _Host, name: str) -> dict[str, str]:
    pkg = re.sub(r"\W", "_", host.file.package)
    return {
        "selfp": "",
        "self0": "",
        "me.": "",
        "fn": "function ",
        "afn": "async function ",
        "nm": name,
        "hex40": secret_token(rng, 40, _HEX),
        "hex16": secret_token(rng, 16, _HEX),
        "alnum24": secret_token(rng, 24, _ALNUM),
        "secret_hex": secret_token(rng, 40, _HEX),
        "secret_alnum": secret_token(rng, 24, _ALNUM),
        "pkg_file": pkg,
        "currency": rng.choice(("EUR", "USD", "GBP")),
        "bad_name_msg": '"file name escapes the upload directory"',
    }


def _render(rng: random.Random, host: _Host, block: Block, ctx: dict[str, str]) -> Block | None:
    """The block filled and shaped for ``host``; ``None`` when it would clash with the host's names."""
    st, lang = host.style, host.file.lang
    shape = Shape(
        0, not st.typed, False, host.file.text.count("let ") > host.file.text.count("const "), 0.0
    )
    block = mutate_block(rng, block, lang, True, 0.0, shape)
    code = fill(block.code, {**ctx, **block.ctx})
    consts = []
    for _, name in block.names:
        leaf = name.removesuffix("_DIR").lower()
        value = f'"/var/lib/{ctx["pkg_file"]}/{leaf}"'
        consts.append(f"{name} = {value}" if lang == "python" else f"const {name} = {value};")
    if consts:
        code = "\n".join(consts) + "\n" * (st.blank + 1) + code
    key = fill(block.key, {**ctx, **block.ctx})
    new_names = {key, *(n for _, n in block.names)}
    if lang == "python":
        present = set(host.lines)
        clash = {n for imp in block.imports if imp not in present for n in _py_bound(imp)}
    else:
        clash = {
            n
            for spec in block.imports
            if not _js_requires(host.file.text, spec.rpartition("=")[2])
            for n in js_import_names(spec)
        }
    clash &= host.names
    if clash or any(re.search(rf"\b{re.escape(n)}\b", host.file.text) for n in new_names):
        return None
    return replace(block, key=key, code=adapt(code, lang, st))


def _py_bound(imp: str) -> set[str]:
    """Names a Python import line binds: ``import a.b`` → a, ``from x import y as z`` → z."""
    if imp.startswith("from "):
        names = imp.split(" import ", 1)[1].split(",")
    else:
        names = [n.split(".")[0] if " as " not in n else n for n in imp[7:].split(",")]
    return {n.split(" as ")[-1].strip() for n in names}


def _js_requires(text: str, module: str) -> bool:
    """Whether the host already loads ``module`` (so a name it binds means the same)."""
    q = re.escape(module)
    return re.search(rf"require\(\s*['\"]{q}['\"]\s*\)|from\s+['\"]{q}['\"]", text) is not None


def _anchor(rng: random.Random, f: RealFile) -> int:
    """The anchor nearest a uniformly drawn line, so a block lands near a random line of the
    file rather than where small top-level statements crowd (imports, constants)."""
    line = rng.randint(1, f.text.count("\n") + 1)
    return min(f.anchors, key=lambda a: (abs(a - line), a))


def _compose(rng: random.Random, host: _Host, block: Block) -> str:
    lines = list(host.lines)
    insert(lines, _anchor(rng, host.file), block.code, host.style)
    add_imports(lines, host.file.import_after, import_lines(host.file, block.imports, host.style))
    return "\n".join(lines)


def _parses(path: str, text: str) -> bool:
    if not path.endswith(".py"):
        return True  # JS is checked by the tests with node (decision: real-code substrate)
    try:
        ast.parse(extract_marks(path, text)[0])
    except SyntaxError:
        return False
    return True


def _put(rng: random.Random, host: _Host, block: Block, ctx: dict[str, str]) -> bool:
    """Render ``block`` into ``host`` (kept in ``host.text``); ``False`` when it does not fit."""
    state = rng.getstate()
    shaped = _render(rng, host, block, ctx)
    if shaped is None:
        return False
    text = _compose(rng, host, shaped)
    if not _parses(host.file.path, text):
        # The host's style made the block invalid (a quote inside a string …): plain instead.
        rng.setstate(state)
        plain = replace(host, style=replace(host.style, single_quotes=False))
        shaped = _render(rng, plain, block, ctx)
        assert shaped is not None
        text = _compose(rng, plain, shaped)
        if not _parses(host.file.path, text):
            raise RealCodeError(f"planting {block.key} into {host.file.path} broke its syntax")
    host.text = text
    return True


def _pick_files(
    rng: random.Random, pool: Sequence[RealFile], count: int, whole: bool
) -> list[RealFile]:
    by_pkg: dict[str, list[RealFile]] = {}
    for f in pool:
        by_pkg.setdefault(f.package, []).append(f)
    order = sorted(by_pkg)
    rng.shuffle(order)
    out: list[RealFile] = []
    for pkg in order:
        if len(out) >= count:
            break
        files = list(by_pkg[pkg])
        rng.shuffle(files)
        take = len(files) if whole else rng.randint(2, max(2, min(len(files), 8)))
        out.extend(files[: min(take, count - len(out))])
    return out


def build_real(
    rng: random.Random, size: str, lang: str, band: tuple[int, int], n_bugs: int, n_decoys: int
) -> tuple[dict[str, str], list[Placed], dict[str, dict[str, Mark]]]:
    """Files, placed snippets and their marks of one real-substrate repository."""
    langs = ("python", "js") if lang == "mixed" else (lang,)
    pools = {lg: corpus(lg) for lg in langs}
    room = sum(len(p) for p in pools.values()) + 1
    total = rng.randint(min(band[0], room), min(band[1], room))
    code = total - 1
    shares = (
        {"python": code} if lang != "mixed" else {"python": round(code * rng.uniform(0.5, 0.65))}
    )
    if lang != "python":
        shares["js"] = code - shares.get("python", 0) if lang == "mixed" else code
    files: list[RealFile] = []
    for lg in langs:
        files += _pick_files(rng, pools[lg], shares[lg], whole=size == "large")
    files.sort(key=lambda f: f.path)
    hosts = [_Host(f, host_style(f), top_level_names(f), f.text.split("\n")) for f in files]
    order = list(hosts)
    rng.shuffle(order)
    plan: list[tuple[Snippet, str]] = []
    for lg in langs:
        mine = sum(h.file.lang == lg for h in hosts)
        share = mine / len(hosts)
        bugs = max(1, round(n_bugs * share)) if lang == "mixed" else n_bugs
        decoys = round(n_decoys * share) if lang == "mixed" else n_decoys
        decoys = max(0, min(decoys, mine - bugs))
        plan += [(s, lg) for s in _plan(rng, lg, min(bugs, mine), decoys)]
    placed: list[Placed] = []
    for i, (snip, lg) in enumerate(plan):
        tag = f"r{i}"
        block = snip.block.tagged(tag)
        for host in (h for h in order if not h.text and h.file.lang == lg):
            ctx = _ctx(rng, host, "")
            if _put(rng, host, block, ctx):
                key = fill(snip.block.key, ctx)
                placed.append(Placed(tag, snip, fill(snip.description, {**ctx, **block.ctx}), key))
                break
    for host in order:
        pool = fillers(host.file.lang)
        for _ in range(12):
            if host.text:
                break
            use = rng.choice(pool)
            _put(rng, host, use.block, _ctx(rng, host, rng.choice(use.names)))
    out: dict[str, str] = {}
    marks: dict[str, dict[str, Mark]] = {}
    for host in hosts:
        text, found = extract_marks(host.file.path, host.text or host.file.text)
        out[host.file.path] = text
        for m in found:
            marks.setdefault(m.tag, {})[m.name] = m
    used = {h.file.package for h in hosts}
    out[NOTICES] = "".join(
        f"{'=' * 78}\n{p.name} {p.version} ({p.licence}), {p.source}\n{'=' * 78}\n\n"
        f"{licence_text(p).rstrip()}\n\n"
        for p in packages()
        if p.name in used
    )
    return out, placed, marks
