"""Generating repositories with planted bugs, decoys and exact ground truth.

``generate_task(seed, size, lang)`` builds one repository in memory;
``generate_tasks(out_dir, ...)`` writes N of them plus ``index.json``. Every
choice comes from one ``random.Random`` seeded by the arguments, every
iteration is in a fixed order and nothing reads the clock, so the same
arguments give byte-identical output. Line numbers in the ground truth are
read from the generated text (``render.extract_marks``), never counted by hand.
"""

from __future__ import annotations

import random
import re
import shutil
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from deeprepo.base.errors import UsageError
from deeprepo.rl.tasks import utils_js, utils_python
from deeprepo.rl.tasks.extras import text_extras
from deeprepo.rl.tasks.flows import TWIN_ARGS, renamed, twin_caller
from deeprepo.rl.tasks.layout import choose_style
from deeprepo.rl.tasks.mutate import strip_comments
from deeprepo.rl.tasks.naming import (
    DOMAINS,
    JS_SERVICE_NAMES,
    project_name,
    secret_token,
    snake_to_kebab,
)
from deeprepo.rl.tasks.project import Project, build_project
from deeprepo.rl.tasks.render import Block, Mark, Section, extract_marks, fill
from deeprepo.rl.tasks.snippets import ENTITY_HOSTS, Snippet, catalogue
from deeprepo.rl.tasks.spec import (
    SIZES,
    GeneratedTask,
    GroundTruthEntry,
    Location,
    TaskInfo,
    check_size_lang,
    dumps,
)
from deeprepo.rl.tasks.sprinkle import mutate_comments, shuffle_constants, sprinkle_safe_uses
from deeprepo.rl.tasks.structure import filler_path, fit_structure
from deeprepo.rl.tasks.taxonomy import BUG_KINDS

# Snippets that call a helper of their host module unqualified, so they stay in it.
_PINNED = frozenset(
    {
        "py-leak-open",
        "py-decoy-leak-with",
        "py-decoy-rand-jitter",
        "js-leak-fd",
        "js-decoy-rand-jitter",
    }
)
_BUGS = {"small": (1, 3), "medium": (4, 7), "large": (8, 14)}
_DECOYS = {"small": (1, 2), "medium": (2, 4), "large": (4, 7)}
_TWINS = {"small": 1, "medium": 3, "large": 6}  # clean copies of cross-file helpers (+0..1)
_ORIGIN = "a request value read by a route handler"


@dataclass
class _Placed:
    tag: str
    snippet: Snippet
    description: str
    sink_fn: str


# --- planning --------------------------------------------------------------------------------------


def _claim(s: Snippet) -> tuple[str, str] | None:
    """Project-wide slot a replacing snippet takes (entity-level slots are settled at placement)."""
    return (s.host, s.block.key) if s.replaces and s.host not in ENTITY_HOSTS else None


def plan_snippets(
    rng: random.Random, lang: str, n_bugs: int, n_decoys: int, want_cross: bool
) -> list[Snippet]:
    """Bugs of distinct kinds (then repeats), then decoys, with no two taking the same slot."""
    cat = [s for s in catalogue() if s.lang == lang]
    claims: set[tuple[str, str]] = set()
    chosen: list[Snippet] = []
    for vulnerable, count in ((True, n_bugs), (False, n_decoys)):
        kinds = sorted({s.kind for s in cat if s.vulnerable == vulnerable})
        rng.shuffle(kinds)
        picked = 0
        for i in range(len(kinds) * 3):
            if picked >= count:
                break
            kind = kinds[i % len(kinds)]
            variants = [
                s for s in cat if s.kind == kind and s.vulnerable == vulnerable and s not in chosen
            ]
            rng.shuffle(variants)
            if vulnerable and want_cross and not any(c.source for c in chosen):
                variants.sort(key=lambda s: s.source is None)
            for v in variants:
                c = _claim(v)
                if c is None or c not in claims:
                    if c:
                        claims.add(c)
                    chosen.append(v)
                    picked += 1
                    break
    return chosen


def _needs(plan: list[Snippet], util_ids: set[str]) -> set[str]:
    out = set()
    for s in plan:
        for n in (s.host, *s.needs):
            if n in util_ids:
                out.add(n)
    return out


# --- placement -------------------------------------------------------------------------------------


def _filled_key(block: Block, sec: Section, proj: Project) -> str:
    return fill(block.key, {**proj.ctx, **sec.ctx})


def _insert(rng: random.Random, sec: Section, block: Block, lang: str) -> None:
    # Never first: modules open with constants and classes with their constructor.
    hi = len(sec.blocks)
    if lang == "js" and sec.id.startswith("routes:"):
        # Express matches in registration order: a static path must come before "/:id".
        hi = next((i for i, b in enumerate(sec.blocks) if b.key == "get"), hi)
    sec.blocks.insert(rng.randint(min(1, hi), hi), block)


_ANY_HELPER = Snippet("any-helper", "off-by-one", "python", "validators", Block("_", ""), "")


def portable(snippet: Snippet) -> bool:
    """A module-level helper or constant that reads the same in any module of the project."""
    return not (
        snippet.replaces
        or snippet.host in ENTITY_HOSTS
        or snippet.host == "auth"
        or snippet.name in _PINNED
    )


def host_sections(proj: Project, snippet: Snippet) -> list[Section]:
    """Where ``snippet`` may go: its host role, or for a portable one any function-style module
    (so the file that holds a bug kind is not fixed by the kind)."""
    if not portable(snippet):
        return proj.sections(snippet.host)
    # A module alias two sections share (product.model.js and product.validator.js are both
    # "product") would import the wrong one in a caller.
    handles = Counter(
        h
        for h, _ in {
            (sec.handle, f.path) for f, sec in proj.registry.values() if not sec.class_name
        }
    )
    return [
        sec
        for sid, (f, sec) in proj.registry.items()
        if sec.class_name is None
        and handles[sec.handle] == 1
        and sid.split(":")[0] not in ("app", "tests")
        and (proj.lang == "python" or (f.exports == "functions" and sec.handle.isidentifier()))
    ]


def _file_keys(proj: Project, sec: Section) -> set[str]:
    f = proj.registry[sec.id][0]
    return {
        _filled_key(b, s, proj) for _, (g, s) in proj.registry.items() if g is f for b in s.blocks
    }


def place(rng: random.Random, proj: Project, snippet: Snippet, tag: str) -> _Placed | None:
    """Put ``snippet`` (and its source route) into the project; ``None`` if no host fits."""
    hosts = host_sections(proj, snippet)
    rng.shuffle(hosts)
    secrets = {}
    if "«secret_hex»" in snippet.block.code:
        secrets["secret_hex"] = secret_token(rng, 40, "0123456789abcdef")
    if "«secret_alnum»" in snippet.block.code:
        secrets["secret_alnum"] = secret_token(
            rng, 24, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        )
    for sec in hosts:
        key = _filled_key(snippet.block, sec, proj)
        if snippet.replaces:
            present = any(_filled_key(b, sec, proj) == key for b in sec.blocks)
        else:  # a new module-level name must be new to the whole file
            present = key in _file_keys(proj, sec)
        if snippet.replaces != present or any(
            b.tag and b.key == snippet.block.key for b in sec.blocks
        ):
            continue
        block = snippet.block.tagged(tag, **secrets)
        if snippet.replaces:
            idx = next(i for i, b in enumerate(sec.blocks) if b.key == snippet.block.key)
            sec.blocks[idx] = block
        else:
            _insert(rng, sec, block, proj.lang)
        ctx = {**proj.ctx, **sec.ctx, **block.ctx}
        placed = _Placed(tag, snippet, fill(snippet.description, ctx), key)
        if snippet.source is not None:
            _place_source(rng, proj, snippet.source, sec, key, tag)
        return placed
    return None


def _place_source(
    rng: random.Random, proj: Project, source: Block, sink: Section, sink_fn: str, tag: str
) -> None:
    routes = proj.sections("routes")
    if sink.entity is not None:
        routes = [r for r in routes if r.entity == sink.entity]
    else:
        rng.shuffle(routes)
    target, fn = sink.id, sink_fn
    hop = _place_hop(rng, proj, source, sink, sink_fn) if rng.random() < _HOP_RATE else None
    if hop is not None:
        target, fn = hop
    code = source.code.replace("«sink.»", f"«{target}.»")
    block = Block(
        source.key,
        code,
        imports=source.imports,
        names=source.names,
        uses=tuple(target if u == "sink" else u for u in source.uses),
        ctx={"sink_fn": fn},
    )
    for sec in routes:
        key = _filled_key(block, sec, proj)
        if any(_filled_key(b, sec, proj) == key for b in sec.blocks):
            continue
        _insert(rng, sec, block.tagged(tag), proj.lang)
        return


_HOP_RATE = 0.4
_HOP_PREFIXES = {
    "python": ("process_", "handle_", "run_", "do_"),
    "js": ("process", "handle", "run", "do"),
}


def _place_hop(
    rng: random.Random, proj: Project, source: Block, sink: Section, sink_fn: str
) -> tuple[str, str] | None:
    """A thin function in another module between the route and the sink, so the flow spans
    two calls: route → hop → sink. Returns the hop's section id and name."""
    m = re.search(r"«sink\.»«sink_fn»\(([\w, ]*)\)", source.code)
    if m is None:
        return None
    args = m.group(1)
    prefix = rng.choice(_HOP_PREFIXES[proj.lang])
    name = prefix + (sink_fn if proj.lang == "python" else sink_fn[:1].upper() + sink_fn[1:])
    if "«" in name:
        return None
    cands = [
        sec
        for sec in host_sections(proj, _ANY_HELPER)
        if sec is not sink and sec.id.split(":")[0] != "routes"
    ]
    rng.shuffle(cands)
    for sec in cands:
        if name in _file_keys(proj, sec):
            continue
        if proj.lang == "python":
            code = f"def {name}(«selfp»{args}):\n    return «{sink.id}.»{sink_fn}({args})"
            block = Block(name, code, uses=(sink.id,))
        else:
            code = f"«afn»{name}({args}) {{\n  return «{sink.id}.»{sink_fn}({args});\n}}"
            block = Block(name, code, uses=(sink.id,), exports=(name,))
        _insert(rng, sec, block, proj.lang)
        return sec.id, name
    return None


def place_twin(rng: random.Random, proj: Project) -> bool:
    """A cross-file bug's helper as clean code: same text, called with constant arguments."""
    cands = [
        s
        for s in catalogue()
        if s.lang == proj.lang and s.vulnerable and s.source is not None and s.name in TWIN_ARGS
    ]
    snippet = renamed(rng.choice(cands), rng)
    hosts = host_sections(proj, snippet)
    rng.shuffle(hosts)
    for sec in hosts:
        key = _filled_key(snippet.block, sec, proj)
        if key in _file_keys(proj, sec):
            continue
        code = strip_comments(snippet.block.code, proj.lang)
        _insert(rng, sec, replace(snippet.block, code=code), proj.lang)
        callers = [
            s
            for sid, (_f, s) in proj.registry.items()
            if sid.split(":")[0] not in ("app", "tests", "config")
        ]
        rng.shuffle(callers)
        for csec in callers:
            caller = twin_caller(snippet, rng, sec.id, key)
            if _filled_key(caller, csec, proj) not in _file_keys(proj, csec):
                _insert(rng, csec, caller, proj.lang)
                return True
        return True
    return False


# --- assembling ------------------------------------------------------------------------------------


def _layouts(size: str, budget: int, rng: random.Random) -> list[str]:
    if size == "small":
        return ["flat", "compact"] if budget >= 11 else ["compact"]
    if size == "medium":
        return (["modular", "layered"] if budget >= 45 and rng.random() < 0.35 else ["layered"]) + [
            "flat",
            "compact",
        ]
    return ["modular", "layered"]


def _subproject(
    rng: random.Random,
    size: str,
    lang: str,
    budget: int,
    root: str,
    domains: list[str],
    taken: set[str],
    n_bugs: int,
    n_decoys: int,
) -> tuple[Project, list[_Placed]]:
    utpl = utils_python.UTILS if lang == "python" else utils_js.UTILS
    stems = {u: rng.choice(spec[0]) for u, spec in sorted(utpl.items())}
    title, pkg = project_name(rng, domains[0])
    if lang == "js" and root:
        title = f"{title.split('-')[0]}-{rng.choice(JS_SERVICE_NAMES)}"
    plan = plan_snippets(
        rng, lang, n_bugs, n_decoys, want_cross=size != "small" or rng.random() < 0.5
    )
    # Utility modules are there whether or not a snippet needs them: their presence is no tell.
    extra = {"small": 0.25, "medium": 0.5, "large": 0.7}[size]
    needs = _needs(plan, set(utpl)) | {u for u in sorted(utpl) if rng.random() < extra}
    st = None
    for layout in _layouts(size, budget, rng):
        style = choose_style(rng, lang, layout, root, pkg)
        trial_taken = set(taken)
        st = fit_structure(rng, style, budget, needs, domains, stems, trial_taken)
        if len(st.paths) <= budget:
            taken |= trial_taken
            break
    assert st is not None
    pctx = {
        "pkg_file": pkg,
        "pkg_name": title,
        "app_title": title,
        "api_prefix": st.style.api_prefix,
        "page_size": str(rng.choice((20, 25, 50))),
        "env_prefix": pkg.upper(),
        "port": str(rng.choice((3000, 5000, 8000, 8080))),
        "currency": rng.choice(("EUR", "USD", "GBP")),
        "bad_name_msg": '"file name escapes the upload directory"',
    }
    proj = build_project(rng, st, title, pctx)
    shuffle_constants(rng, proj)
    placed: list[_Placed] = []
    for i, snip in enumerate(plan):
        p = place(rng, proj, renamed(snip, rng), f"{root or 'r'}{i}".replace("/", "_"))
        if p:
            placed.append(p)
    for _ in range(_TWINS[size] + rng.randint(0, 1)):
        place_twin(rng, proj)
    sprinkle_safe_uses(rng, proj, _insert)
    mutate_comments(rng, proj)
    return proj, placed


def _entry(p: _Placed, marks: dict[str, Mark]) -> GroundTruthEntry:
    kind = BUG_KINDS[p.snippet.kind]
    sink = marks["sink"]
    start = marks.get("start", sink).line
    end = marks.get("end", sink).line
    source = marks.get("source")
    related = (Location(source.file, source.line),) if source else ()
    cross = bool(source and source.file != sink.file)
    desc = p.description
    if source and p.snippet.vulnerable:
        desc += (
            f" Cross-file: untrusted input enters in `{source.file}` line {source.line} ({_ORIGIN}) "
            f"and reaches this sink through `{p.sink_fn}`."
        )
    elif source:
        desc += (
            f" The value enters in `{source.file}` line {source.line} and is checked there before "
            f"it reaches `{p.sink_fn}`."
        )
    return GroundTruthEntry(
        id="",
        file=sink.file,
        start_line=min(start, sink.line),
        end_line=max(end, sink.line),
        cwe=kind.cwe,
        acceptable_cwes=kind.acceptable_cwes,
        kind=kind.key,
        severity=kind.severity if p.snippet.vulnerable else "info",
        description=desc,
        vulnerable=p.snippet.vulnerable,
        cross_file=cross,
        related=related,
        sink_line=sink.line,
    )


def _mixed_files(projects: list[Project], title: str) -> dict[str, str]:
    names = [p.style.root.rstrip("/") for p in projects]
    readme = (
        f"# {title}\n\nTwo services in one repository:\n\n"
        + "".join(
            f"- `{n}/`: {'Python (Flask)' if p.lang == 'python' else 'Node.js (Express)'} — {p.title}\n"
            for n, p in zip(names, projects, strict=True)
        )
        + "\nRun both with `docker compose up`.\n"
    )
    services = "".join(
        f"  {snake_to_kebab(n.replace('/', '-'))}:\n    build: ./{n}\n    env_file: ./{n}/.env\n    ports:\n"
        f'      - "{p.ctx["port"]}:{p.ctx["port"]}"\n'
        for n, p in zip(names, projects, strict=True)
    )
    return {"README.md": readme, "docker-compose.yml": f"services:\n{services}"}


def generate_task(seed: int, size: str, lang: str) -> GeneratedTask:
    """One repository with planted bugs and decoys, in memory."""
    check_size_lang(size, lang)
    rng = random.Random(f"deeprepo-task/{seed}/{size}/{lang}")
    lo, hi = SIZES[size]
    domain = rng.choice(sorted(DOMAINS))
    others = sorted(d for d in DOMAINS if d != domain)
    rng.shuffle(others)
    domains = [domain, *others]
    bugs, decoys = rng.randint(*_BUGS[size]), rng.randint(*_DECOYS[size])
    taken: set[str] = set()
    subs: list[tuple[Project, list[_Placed]]] = []
    extra: dict[str, str] = {}
    if lang == "mixed":
        total = rng.randint(max(lo, 12), hi)
        py_budget = round((total - 2) * rng.uniform(0.5, 0.65))
        js_budget = total - 2 - py_budget
        py_root = rng.choice(("backend/", "api/", "services/api/"))
        js_root = rng.choice(("gateway/", "web/", "services/gateway/"))
        py_bugs = max(1, round(bugs * py_budget / (total - 2)))
        py_decoys = max(1, round(decoys * py_budget / (total - 2))) if decoys > 1 else decoys
        subs.append(
            _subproject(rng, size, "python", py_budget, py_root, domains, taken, py_bugs, py_decoys)
        )
        subs.append(
            _subproject(
                rng,
                size,
                "js",
                js_budget,
                js_root,
                domains,
                taken,
                max(1, bugs - py_bugs),
                max(0, decoys - py_decoys),
            )
        )
        extra = _mixed_files([p for p, _ in subs], subs[0][0].title.split("-")[0] + "-platform")
    else:
        total = rng.randint(lo, hi)
        subs.append(_subproject(rng, size, lang, total, "", domains, taken, bugs, decoys))
    files: dict[str, str] = dict(extra)
    all_marks: dict[str, dict[str, Mark]] = {}
    for proj, _ in subs:
        renderer = proj.renderer()
        code: dict[str, str] = {}
        for path, f in proj.files.items():
            text, marks = extract_marks(path, renderer.render(f))
            code[path] = text
            for m in marks:
                all_marks.setdefault(m.tag, {})[m.name] = m
        files.update(code)
        files.update(text_extras(proj, code, filler_path))
    entries = [_entry(p, all_marks[p.tag]) for _, placed in subs for p in placed]
    entries.sort(key=lambda e: (not e.vulnerable, e.file, e.start_line, e.kind))
    numbered: list[GroundTruthEntry] = []
    counters = {True: 0, False: 0}
    for e in entries:
        counters[e.vulnerable] += 1
        prefix = "bug" if e.vulnerable else "decoy"
        numbered.append(_with_id(e, f"{prefix}-{counters[e.vulnerable]:03d}"))
    return GeneratedTask(
        task_id=f"{size}-{lang}-{seed}",
        seed=seed,
        size=size,
        lang=lang,
        domain=domain,
        files=dict(sorted(files.items())),
        ground_truth=tuple(numbered),
    )


def _with_id(e: GroundTruthEntry, new_id: str) -> GroundTruthEntry:
    return replace(e, id=new_id)


def task_seeds(seed: int, n: int) -> list[int]:
    """The per-task seeds ``generate_tasks`` uses: the first ``n`` draws of ``Random(seed)``."""
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < n:
        s = rng.getrandbits(31)
        if s not in out:  # two equal seeds would be one task written twice
            out.append(s)
    return out


def generate_tasks(out_dir: Path, *, seed: int, n: int, size: str, lang: str) -> list[TaskInfo]:
    """Write ``n`` tasks under ``out_dir`` (``<id>/repo``, ``<id>/ground_truth.json``) and ``index.json``."""
    if n < 1:
        raise UsageError(f"--n must be at least 1 (got {n})")
    check_size_lang(size, lang)
    out_dir.mkdir(parents=True, exist_ok=True)
    infos: list[TaskInfo] = []
    for task_seed in task_seeds(seed, n):
        task = generate_task(task_seed, size, lang)
        task_dir = out_dir / task.task_id
        _clear_task_dir(task_dir)
        task.write(task_dir)
        infos.append(task.info())
    (out_dir / "index.json").write_bytes(dumps([i.to_dict() for i in infos]).encode("utf-8"))
    return infos


def _clear_task_dir(task_dir: Path) -> None:
    """Make room for a task, refusing to delete anything the generator did not write."""
    if not task_dir.exists():
        return
    if not (task_dir / "ground_truth.json").is_file():
        raise UsageError(f"{task_dir} exists and is not a generated task; choose an empty OUT_DIR")
    shutil.rmtree(task_dir)
