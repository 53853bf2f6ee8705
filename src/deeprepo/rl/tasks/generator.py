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
import shutil
from dataclasses import replace
from pathlib import Path

from deeprepo.base.errors import UsageError
from deeprepo.base.safefile import refuse_link, write_atomic
from deeprepo.rl.tasks.catalogue import util_modules
from deeprepo.rl.tasks.extras import add_code_extras, text_extras
from deeprepo.rl.tasks.flows import renamed
from deeprepo.rl.tasks.layout import choose_style
from deeprepo.rl.tasks.naming import DOMAINS, JS_SERVICE_NAMES, project_name, snake_to_kebab
from deeprepo.rl.tasks.planting import (
    Placed,
    needed_utils,
    place,
    place_twin,
    plan_snippets,
    portable,
)
from deeprepo.rl.tasks.project import Project, build_project
from deeprepo.rl.tasks.realtask import build_real
from deeprepo.rl.tasks.render import Mark, extract_marks
from deeprepo.rl.tasks.spec import (
    SIZES,
    GeneratedTask,
    GroundTruthEntry,
    Location,
    TaskInfo,
    check_size_lang,
    check_substrate,
    dumps,
)
from deeprepo.rl.tasks.sprinkle import mutate_comments, shuffle_constants, sprinkle_safe_uses
from deeprepo.rl.tasks.structure import Structure, fit_structure
from deeprepo.rl.tasks.taxonomy import BUG_KINDS

_BUGS = {"small": (1, 3), "medium": (4, 7), "large": (8, 14)}
_DECOYS = {"small": (1, 2), "medium": (2, 4), "large": (4, 7)}
_TWINS = {"small": 1, "medium": 3, "large": 6}  # clean copies of cross-file helpers (+0..1)
_ORIGIN = "a request value read by a route handler"


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
) -> tuple[Project, list[Placed]]:
    utpl = util_modules(lang)
    stems = {u: rng.choice(m.stems) for u, m in sorted(utpl.items())}
    title, pkg = project_name(rng, domains[0])
    if lang == "js" and root:
        title = f"{title.split('-')[0]}-{rng.choice(JS_SERVICE_NAMES)}"
    plan = plan_snippets(
        rng, lang, n_bugs, n_decoys, want_cross=size != "small" or rng.random() < 0.5
    )
    # Utility modules are there whether or not a snippet needs them: their presence is no tell.
    extra = {"small": 0.25, "medium": 0.5, "large": 0.7}[size]
    needs = needed_utils(plan, set(utpl)) | {u for u in sorted(utpl) if rng.random() < extra}
    st = None
    for layout in _layouts(size, budget, rng):
        style = choose_style(rng, lang, layout, root, pkg)
        trial_taken = set(taken)
        st = fit_structure(rng, style, budget, needs, domains, stems, trial_taken)
        if len(st.paths) <= budget:
            taken |= trial_taken
            break
    assert st is not None
    proj = build_project(rng, st, title, project_context(rng, st, title, pkg))
    add_code_extras(proj)
    shuffle_constants(rng, proj)
    placed: list[Placed] = []
    # Snippets tied to a role first: the portable ones' files are drawn to even out the
    # sizes of the files they took (``planting.by_file``).
    for i, snip in sorted(enumerate(plan), key=lambda t: portable(t[1])):
        p = place(rng, proj, renamed(snip, rng), f"{root or 'r'}{i}".replace("/", "_"))
        if p:
            placed.append(p)
    crossing = [p.snippet.name for p in placed if p.snippet.vulnerable and p.snippet.twin_args]
    for k in range(_TWINS[size] + rng.randint(0, 1)):
        place_twin(rng, proj, frozenset(crossing[k : k + 1]))
    sprinkle_safe_uses(rng, proj, tuple(p.snippet for p in placed))
    mutate_comments(rng, proj)
    return proj, placed


def project_context(rng: random.Random, st: Structure, title: str, pkg: str) -> dict[str, str]:
    """The project-wide values a project's templates are filled with (drawn from ``rng``)."""
    return {
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


def ground_truth_entry(p: Placed, marks: dict[str, Mark]) -> GroundTruthEntry:
    """The ground-truth entry (id still empty) of one placed snippet, from its marks."""
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


def generate_task(seed: int, size: str, lang: str, substrate: str = "synthetic") -> GeneratedTask:
    """One repository with planted bugs and decoys, in memory.

    ``substrate`` is ``synthetic`` (the generated Flask/Express projects, the tiers' default)
    or ``real`` (blocks planted into vendored open-source files, ``realtask``).
    """
    check_size_lang(size, lang)
    check_substrate(substrate)
    if substrate == "real":
        return _real_task(seed, size, lang)
    rng = random.Random(f"deeprepo-task/{seed}/{size}/{lang}")
    lo, hi = SIZES[size]
    domain = rng.choice(sorted(DOMAINS))
    others = sorted(d for d in DOMAINS if d != domain)
    rng.shuffle(others)
    domains = [domain, *others]
    bugs, decoys = rng.randint(*_BUGS[size]), rng.randint(*_DECOYS[size])
    taken: set[str] = set()
    subs: list[tuple[Project, list[Placed]]] = []
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
        files.update(text_extras(proj, code))
    entries = [ground_truth_entry(p, all_marks[p.tag]) for _, placed in subs for p in placed]
    return GeneratedTask(
        task_id=f"{size}-{lang}-{seed}",
        seed=seed,
        size=size,
        lang=lang,
        domain=domain,
        files=dict(sorted(files.items())),
        ground_truth=_numbered(entries),
    )


def _numbered(entries: list[GroundTruthEntry]) -> tuple[GroundTruthEntry, ...]:
    """Entries in a fixed order (bugs first, by file and line) with ids ``bug-001``, ``decoy-001`` …"""
    entries = sorted(entries, key=lambda e: (not e.vulnerable, e.file, e.start_line, e.kind))
    numbered: list[GroundTruthEntry] = []
    counters = {True: 0, False: 0}
    for e in entries:
        counters[e.vulnerable] += 1
        prefix = "bug" if e.vulnerable else "decoy"
        numbered.append(_with_id(e, f"{prefix}-{counters[e.vulnerable]:03d}"))
    return tuple(numbered)


def _real_task(seed: int, size: str, lang: str) -> GeneratedTask:
    rng = random.Random(f"deeprepo-task/{seed}/{size}/{lang}/real")
    bugs, decoys = rng.randint(*_BUGS[size]), rng.randint(*_DECOYS[size])
    files, placed, marks = build_real(rng, size, lang, SIZES[size], bugs, decoys)
    return GeneratedTask(
        task_id=f"{size}-{lang}-real-{seed}",
        seed=seed,
        size=size,
        lang=lang,
        domain="open-source",
        files=dict(sorted(files.items())),
        ground_truth=_numbered([ground_truth_entry(p, marks[p.tag]) for p in placed]),
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


def generate_tasks(
    out_dir: Path, *, seed: int, n: int, size: str, lang: str, substrate: str = "synthetic"
) -> list[TaskInfo]:
    """Write ``n`` tasks under ``out_dir`` (``<id>/repo``, ``<id>/ground_truth.json``) and ``index.json``."""
    if n < 1:
        raise UsageError(f"--n must be at least 1 (got {n})")
    check_size_lang(size, lang)
    check_substrate(substrate)
    out_dir.mkdir(parents=True, exist_ok=True)
    infos: list[TaskInfo] = []
    for task_seed in task_seeds(seed, n):
        task = generate_task(task_seed, size, lang, substrate)
        task_dir = out_dir / task.task_id
        _clear_task_dir(task_dir)
        task.write(task_dir)
        infos.append(task.info())
    write_atomic(out_dir / "index.json", dumps([i.to_dict() for i in infos]))
    return infos


def _clear_task_dir(task_dir: Path) -> None:
    """Make room for a task, refusing to delete anything the generator did not write."""
    refuse_link(task_dir)
    if not task_dir.exists():
        return
    if not (task_dir / "ground_truth.json").is_file():
        raise UsageError(f"{task_dir} exists and is not a generated task; choose an empty OUT_DIR")
    shutil.rmtree(task_dir)
