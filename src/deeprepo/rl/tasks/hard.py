"""The hard tier: big repositories, a sub-call budget too small to read them all, logic bugs.

``generate_hard_task(seed, lang)`` builds one repository of 100–500 files: one to three
services side by side (``services/<name>/``), each a project of the ordinary generator
(``structure``, ``project``, ``planting``, ``sprinkle``, ``render``) with

* more bugs and decoys, about half of them logic and authorisation defects (a missing
  ownership check, an inverted or wrong role test, an off-by-one limit, a check-then-act
  race) that no sink grep finds, some of them split across a route and the helper it asks
  (``hard_flows``: the owner compared with the wrong field, the wrong role compared, a
  quota off by one), with correct helpers of the same shape as decoys;
* cross-file flows that span two to four modules: the route that reads the request value,
  zero to two thin helpers in other modules that pass it on, and the sink;
* a **sub-call budget** (:func:`sub_call_budget`): fewer worker calls than the task has
  files, and too few to show every line at a worker's attention span, so a root must
  choose what to read. The environment enforces it as the run's ``max_sub_calls``.

The ground truth is read from the rendered text (``render.extract_marks``), as the
ordinary generator does, so it stays exact.
"""

from __future__ import annotations

import math
import random
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from deeprepo.base.errors import UsageError
from deeprepo.base.safefile import refuse_link, write_atomic
from deeprepo.rl.tasks.catalogue import snippets, util_modules
from deeprepo.rl.tasks.extras import add_code_extras, text_extras
from deeprepo.rl.tasks.flows import renamed
from deeprepo.rl.tasks.generator import ground_truth_entry, project_context, task_seeds
from deeprepo.rl.tasks.hard_flows import authz_flows
from deeprepo.rl.tasks.hard_spec import BUDGET_KEY, HARD_LANGS, HARD_SIZE, TASK_FILE
from deeprepo.rl.tasks.layout import choose_style
from deeprepo.rl.tasks.naming import DOMAINS, project_name, snake_to_kebab
from deeprepo.rl.tasks.planting import (
    Placed,
    insert_block,
    needed_utils,
    pass_through,
    place,
    place_twin,
)
from deeprepo.rl.tasks.project import Project, build_project
from deeprepo.rl.tasks.render import Block, Mark, Section, extract_marks, fill
from deeprepo.rl.tasks.snippets import ENTITY_HOSTS, Snippet
from deeprepo.rl.tasks.spec import GeneratedTask, GroundTruthEntry, TaskInfo, dumps
from deeprepo.rl.tasks.sprinkle import mutate_comments, shuffle_constants, sprinkle_safe_uses
from deeprepo.rl.tasks.structure import fit_structure

__all__ = [
    "HARD_FILES",
    "HARD_LANGS",
    "HARD_SIZE",
    "LINES_PER_CALL",
    "HardTask",
    "code_lines",
    "generate_hard_task",
    "generate_hard_tasks",
    "sub_call_budget",
]

HARD_FILES = (100, 500)
"""Inclusive band of the tier's file counts (the repository's extras included)."""
LINES_PER_CALL = 2000
"""Code lines a budget of one call stands for: 2.5 times the 800 lines a worker (the oracle,
and most models) reads with full attention, so even packed prompts cannot show a worker every
line at full attention and the root must choose what to read."""

_SERVICE_FILES = 230  # the most files one service holds; a bigger task holds several
_BUGS_PER_100 = (3, 5)  # bugs per 100 files, drawn once per task
_DECOYS_PER_100 = (2, 3)
_LOGIC_KINDS = frozenset({"missing-authorization", "off-by-one", "race-condition"})
_LOGIC_SHARE = 0.5  # of the bugs, drawn among the logic kinds
_HOPS = (0, 1, 1, 2, 2)  # helpers between a route and its sink: a flow spans 2-4 modules
_HOP_PREFIXES = {
    "python": ("forward_", "run_", "queue_", "dispatch_"),
    "js": ("forward", "run", "queue", "dispatch"),
}
_ROOTS = ("services/", "apps/", "svc/")


@dataclass(frozen=True)
class HardTask:
    """A generated hard task and the sub-call budget its runs are held to."""

    task: GeneratedTask
    sub_call_budget: int

    def info(self) -> dict[str, object]:
        """One line of ``index.json``: the task's info and its budget."""
        return {**self.task.info().to_dict(), BUDGET_KEY: self.sub_call_budget}

    def write(self, task_dir: Path) -> None:
        """``repo/``, ``ground_truth.json`` and ``task.json`` (the budget), byte-stable."""
        self.task.write(task_dir)
        write_atomic(task_dir / TASK_FILE, dumps({BUDGET_KEY: self.sub_call_budget}))


def code_lines(files: dict[str, str]) -> int:
    """Non-empty lines of the code files (Python and JavaScript) of a repository."""
    return sum(
        sum(1 for ln in text.splitlines() if ln.strip())
        for path, text in files.items()
        if path.endswith((".py", ".js"))
    )


def sub_call_budget(files: dict[str, str]) -> int:
    """The worker calls a hard task allows: one per :data:`LINES_PER_CALL` code lines (at
    least 3), and always fewer than a quarter of its files."""
    by_lines = max(3, math.ceil(code_lines(files) / LINES_PER_CALL))
    return min(by_lines, len(files) // 4 - 1)


def _claim(s: Snippet) -> tuple[str, str] | None:
    return (s.host, s.block.key) if s.replaces and s.host not in ENTITY_HOSTS else None


def _plan(rng: random.Random, lang: str, n_bugs: int, n_decoys: int) -> list[Snippet]:
    """Bugs (half logic, a part of them authorisation flows across a route and a helper
    module; the rest cross-file flows first), then decoys; no slot taken twice."""
    cat = list(snippets(lang))
    authz = authz_flows(lang)
    pools = {
        "authz": [s for s in authz if s.vulnerable],
        "authz-decoy": [s for s in authz if not s.vulnerable],
        "logic": [s for s in cat if s.vulnerable and s.kind in _LOGIC_KINDS],
        "flow": [s for s in cat if s.vulnerable and s.source is not None],
        "other": [s for s in cat if s.vulnerable and s.kind not in _LOGIC_KINDS],
        "decoy": [s for s in cat if not s.vulnerable],
    }
    claims: set[tuple[str, str]] = set()
    chosen: list[Snippet] = []
    n_logic = round(n_bugs * _LOGIC_SHARE)
    n_authz = max(1, n_logic // 2)  # the logic bugs that span a route and a helper module
    n_flow = (n_bugs - n_logic + 1) // 2
    n_authz_decoys = max(1, n_decoys // 3)
    wanted = [("authz", n_authz), ("logic", n_logic - n_authz), ("flow", n_flow)]
    wanted += [("other", n_bugs - n_logic - n_flow), ("authz-decoy", n_authz_decoys)]
    wanted += [("decoy", n_decoys - n_authz_decoys)]
    for pool, count in wanted:
        picked = 0
        for _ in range(count * 4):
            if picked >= count:
                break
            fresh = [s for s in pools[pool] if s not in chosen] or pools[pool]
            s = rng.choice(fresh)
            c = _claim(s)
            if c is not None and c in claims:
                continue
            if c is not None:
                claims.add(c)
            chosen.append(s)
            picked += 1
    return chosen


def _sink_section(proj: Project, tag: str) -> Section | None:
    for _f, sec in proj.registry.values():
        if any(b.tag == tag for b in sec.blocks):
            return sec
    return None


def _hop(
    rng: random.Random, proj: Project, callee: Section, fn: str, args: str, avoid: set[str]
) -> tuple[Section, str] | None:
    """A thin function in a module not in ``avoid`` that passes ``args`` on to ``fn``."""
    prefix = rng.choice(_HOP_PREFIXES[proj.lang])
    name = prefix + (fn if proj.lang == "python" else fn[:1].upper() + fn[1:])
    hop = pass_through(
        rng,
        proj,
        name,
        callee,
        fn,
        args,
        lambda sec: proj.registry[sec.id][0].path not in avoid,
    )
    return (hop, name) if hop is not None else None


def _place_flow(rng: random.Random, proj: Project, snippet: Snippet, tag: str) -> Placed | None:
    """The sink, then zero to two helpers in other modules, then the route that feeds them."""
    assert snippet.source is not None
    # The sink goes to its own role's module (a cache, an exporter, a repository), never a
    # route file, so the route and the sink are always two modules; anywhere if none fits.
    placed = place(rng, proj, replace(snippet, source=None, pinned=True), tag)
    if placed is None:
        placed = place(rng, proj, replace(snippet, source=None), tag)
    sink = _sink_section(proj, tag) if placed else None
    if placed is None or sink is None:
        return placed
    source = snippet.source
    target, fn = sink, placed.sink_fn
    m = re.search(r"«sink\.»«sink_fn»\(([\w, ]*)\)", source.code)
    if m is not None and "«" not in fn:
        used = {proj.registry[sink.id][0].path}
        for _ in range(rng.choice(_HOPS)):
            hop = _hop(rng, proj, target, fn, m.group(1), used)
            if hop is None:
                break
            target, fn = hop
            used.add(proj.registry[target.id][0].path)
    block = Block(
        source.key,
        source.code.replace("«sink.»", f"«{target.id}.»"),
        imports=source.imports,
        names=source.names,
        uses=tuple(target.id if u == "sink" else u for u in source.uses),
        ctx={"sink_fn": fn},
    )
    routes = proj.sections("routes")
    if sink.entity is not None:
        routes = [r for r in routes if r.entity == sink.entity] or routes
    rng.shuffle(routes)
    for sec in routes:
        key = fill(block.key, {**proj.ctx, **sec.ctx, **block.ctx})
        if any(fill(b.key, {**proj.ctx, **sec.ctx, **b.ctx}) == key for b in sec.blocks):
            continue
        insert_block(rng, sec, block.tagged(tag), proj.lang)
        break
    return placed


def _service(
    rng: random.Random, lang: str, budget: int, root: str, domains: list[str], taken: set[str]
) -> tuple[Project, list[Placed]]:
    utpl = util_modules(lang)
    stems = {u: rng.choice(m.stems) for u, m in sorted(utpl.items())}
    title, pkg = project_name(rng, domains[0])
    per = budget / 100
    plan = _plan(
        rng,
        lang,
        max(3, round(per * rng.uniform(*_BUGS_PER_100))),
        max(2, round(per * rng.uniform(*_DECOYS_PER_100))),
    )
    needs = needed_utils(plan, set(utpl)) | {u for u in sorted(utpl) if rng.random() < 0.7}
    style = choose_style(rng, lang, rng.choice(("modular", "layered")), root, pkg)
    st = fit_structure(rng, style, budget, needs, domains, stems, taken)
    proj = build_project(rng, st, title, project_context(rng, st, title, pkg))
    add_code_extras(proj)
    shuffle_constants(rng, proj)
    placed: list[Placed] = []
    for i, snip in enumerate(plan):
        tag = f"{root or 'r'}{i}".replace("/", "_")
        snip = renamed(snip, rng)
        p = _place_flow(rng, proj, snip, tag) if snip.source else place(rng, proj, snip, tag)
        if p:
            placed.append(p)
    for _ in range(max(2, budget // 40)):
        place_twin(rng, proj)
    sprinkle_safe_uses(rng, proj)
    mutate_comments(rng, proj)
    return proj, placed


def generate_hard_task(seed: int, lang: str = "python") -> HardTask:
    """One hard repository (100–500 files) with its ground truth and sub-call budget."""
    if lang not in HARD_LANGS:
        raise UsageError(f"the hard tier is generated in {' or '.join(HARD_LANGS)}, not {lang!r}")
    rng = random.Random(f"deeprepo-hard/{seed}/{lang}")
    total = rng.randint(HARD_FILES[0] + 10, HARD_FILES[1] - 20)
    n_services = math.ceil(total / _SERVICE_FILES)
    domains = sorted(DOMAINS)
    rng.shuffle(domains)
    prefix = rng.choice(_ROOTS)
    taken: set[str] = set()
    files: dict[str, str] = {}
    entries: list[GroundTruthEntry] = []
    names: list[str] = []
    for k in range(n_services):
        budget = (total - 2) // n_services
        title, _ = project_name(rng, domains[k % len(domains)])
        name = snake_to_kebab(title.split("-")[0]) + (
            "" if title.split("-")[0] not in names else f"-{k}"
        )
        names.append(name)
        root = f"{prefix}{name}/" if n_services > 1 else ""
        order = domains[k:] + domains[:k]
        proj, placed = _service(rng, lang, budget, root, order, taken)
        renderer = proj.renderer()
        marks: dict[str, dict[str, Mark]] = {}
        code: dict[str, str] = {}
        for path, f in proj.files.items():
            text, found = extract_marks(path, renderer.render(f))
            code[path] = text
            for m in found:
                marks.setdefault(m.tag, {})[m.name] = m
        files.update(code)
        files.update(text_extras(proj, code))
        entries += [
            ground_truth_entry(p, marks[p.tag]) for p in placed if "sink" in marks.get(p.tag, {})
        ]
    if n_services > 1:
        files["README.md"] = "# Platform\n\nServices:\n\n" + "".join(
            f"- `{prefix}{n}/`\n" for n in names
        )
        files["docker-compose.yml"] = "services:\n" + "".join(
            f"  {n}:\n    build: ./{prefix}{n}\n" for n in names
        )
    entries.sort(key=lambda e: (not e.vulnerable, e.file, e.start_line, e.kind))
    counters = {True: 0, False: 0}
    numbered = []
    for e in entries:
        counters[e.vulnerable] += 1
        label = "bug" if e.vulnerable else "decoy"
        numbered.append(replace(e, id=f"{label}-{counters[e.vulnerable]:03d}"))
    task = GeneratedTask(
        task_id=f"{HARD_SIZE}-{lang}-{seed}",
        seed=seed,
        size=HARD_SIZE,
        lang=lang,
        domain=domains[0],
        files=dict(sorted(files.items())),
        ground_truth=tuple(numbered),
    )
    return HardTask(task, sub_call_budget(task.files))


def generate_hard_tasks(out_dir: Path, *, seed: int, n: int, lang: str) -> list[TaskInfo]:
    """Write ``n`` hard tasks under ``out_dir`` (as ``generator.generate_tasks`` does, plus
    each task's ``task.json``) and ``index.json``, whose lines carry ``sub_call_budget``."""
    if n < 1:
        raise UsageError(f"--n must be at least 1 (got {n})")
    out_dir.mkdir(parents=True, exist_ok=True)
    infos: list[TaskInfo] = []
    lines: list[dict[str, object]] = []
    for task_seed in task_seeds(seed, n):
        hard = generate_hard_task(task_seed, lang)
        task_dir = out_dir / hard.task.task_id
        refuse_link(task_dir)
        if task_dir.exists():
            if not (task_dir / "ground_truth.json").is_file():
                raise UsageError(
                    f"{task_dir} exists and is not a generated task; choose an empty OUT_DIR"
                )
            shutil.rmtree(task_dir)
        hard.write(task_dir)
        infos.append(hard.task.info())
        lines.append(hard.info())
    write_atomic(out_dir / "index.json", dumps(lines))
    return infos
