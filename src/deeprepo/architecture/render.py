"""An :class:`Architecture` for readers: a report.md section with a Mermaid diagram, and the
few lines the root model starts from."""

from __future__ import annotations

from collections import Counter

from deeprepo.architecture.graph import Architecture, Edge
from deeprepo.base.textsafe import escape_name, md_code, md_text, mermaid_label

__all__ = ["architecture_markdown", "architecture_summary", "mermaid"]

#: The diagram keeps this many components (the most connected) and edges (the heaviest).
MAX_NODES = 20
MAX_EDGES = 40
#: The written list keeps this many components.
MAX_LISTED = 30


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} " + (word if count == 1 else plural or word + "s")


def _cycle_members(arch: Architecture) -> set[str]:
    return {c for group in arch.component_cycles for c in group}


def mermaid(arch: Architecture) -> tuple[list[str], str]:
    """A ``flowchart LR`` of the most connected components (lines of the fenced block's
    body) and a sentence saying what was left out (empty when nothing was)."""
    weight: Counter[str] = Counter()
    for e in arch.edges:
        weight[e.source] += e.imports
        weight[e.target] += e.imports
    lines = {c.name: c.lines for c in arch.components}
    ranked = sorted(weight, key=lambda c: (-weight[c], -lines.get(c, 0), c))
    nodes = ranked[:MAX_NODES]
    keep = set(nodes)
    edges = [e for e in arch.edges if e.source in keep and e.target in keep][:MAX_EDGES]
    ids = {name: f"c{i}" for i, name in enumerate(nodes)}
    body = ["flowchart LR"]
    for name in nodes:
        # Names come from the repository: quoted as Mermaid entities, never as syntax.
        body.append(f'  {ids[name]}["{mermaid_label(name)}<br/>{lines.get(name, 0):,} lines"]')
    for e in edges:
        body.append(f"  {ids[e.source]} -->|{e.imports}| {ids[e.target]}")
    cyclic = _cycle_members(arch)
    in_cycle = [ids[c] for c in nodes if c in cyclic]
    if in_cycle:
        body.append("  classDef cycle stroke:#d33,stroke-width:2px")
        body.append(f"  class {','.join(in_cycle)} cycle")
    cut: list[str] = []
    linked = len(weight)
    if len(nodes) < linked:
        cut.append(f"the {len(nodes)} most connected of {linked} linked components")
    if len(edges) < len(arch.edges):
        cut.append(f"{len(edges)} of {len(arch.edges)} edges")
    isolated = len(arch.components) - linked
    note = ("Shown: " + " and ".join(cut) + ". ") if cut else ""
    if isolated > 0:
        note += f"{_n(isolated, 'component')} with no import to or from another left out. "
    if note:
        note += "metrics.json (`architecture`) holds them all."
    return body, note


def _edge_text(edges: list[Edge], side: str) -> str:
    return ", ".join(f"{md_text(getattr(e, side))} ({e.imports})" for e in edges)


def architecture_markdown(arch: Architecture) -> list[str]:
    """The ``## Architecture from imports`` section of report.md, as lines."""
    out = ["## Architecture from imports", ""]
    if not arch.modules:
        return [*out, "No Python, JavaScript or TypeScript source files: no import graph.", ""]
    langs = ", ".join(f"{lang} {n:,}" for lang, n in arch.languages.items())
    between = sum(e.imports for e in arch.edges)
    out += [
        f"From the imports of {_n(arch.modules, 'source module')} ({langs}); no code was run. "
        f"{_n(len(arch.components), 'component')}; {arch.internal_imports:,} imports between "
        f"modules, {between:,} of them between components; "
        + (
            f"{_n(len(arch.component_cycles), 'group')} of components in an import cycle "
            f"({len(_cycle_members(arch))} components); "
            if arch.component_cycles
            else "no import cycle between components; "
        )
        + _n(len(arch.external), "external dependency", "external dependencies")
        + ".",
        "",
    ]
    if arch.edges:
        body, note = mermaid(arch)
        out += ["```mermaid", *body, "```", ""]
        if note:
            out += [f"_{note}_", ""]
    outgoing: dict[str, list[Edge]] = {}
    incoming: dict[str, list[Edge]] = {}
    for e in arch.edges:
        outgoing.setdefault(e.source, []).append(e)
        incoming.setdefault(e.target, []).append(e)
    out += [
        "**Components** (largest first; → imports from, ← imported by; counts are imports):",
        "",
    ]
    any_tested = any(c.tested for c in arch.components)
    for c in arch.components[:MAX_LISTED]:
        parts = [
            f"- **{md_text(c.name)}** ({md_code(c.path)}, {_n(c.files, 'file')}, {c.lines:,} lines)"
        ]
        if c.name in outgoing:
            parts.append("→ " + _edge_text(outgoing[c.name][:8], "target"))
        if c.name in incoming:
            parts.append("← " + _edge_text(incoming[c.name][:8], "source"))
        if not c.tested:
            parts.append("· no test reaches it" if any_tested else "")
        out.append(" ".join(parts).rstrip())
    if len(arch.components) > MAX_LISTED:
        out.append(f"- … and {len(arch.components) - MAX_LISTED} smaller components (metrics.json)")
    out.append("")
    if arch.component_cycles:
        out += [
            "**Cycles between components** (each group's members import each other, directly or "
            "in a ring; the lightest edges inside are usually the ones to cut):",
            "",
        ]
        for group in arch.component_cycles[:10]:
            members = set(group)
            inner = sorted(
                (e for e in arch.edges if e.source in members and e.target in members),
                key=lambda e: (e.imports, e.source, e.target),
            )
            edges = ", ".join(
                f"{md_text(e.source)} → {md_text(e.target)} ({e.imports})" for e in inner[:10]
            )
            more = f", … {len(inner) - 10} more" if len(inner) > 10 else ""
            out.append(f"- {', '.join(map(md_text, group))}: lightest edges first: {edges}{more}")
        out.append("")
    if arch.module_cycles:
        sizes = sum(len(g) for g in arch.module_cycles)
        shown = "; ".join(
            " ⇄ ".join(md_code(m) for m in g[:6]) + (" …" if len(g) > 6 else "")
            for g in arch.module_cycles[:5]
        )
        out += [
            f"**Module import cycles**: {_n(len(arch.module_cycles), 'group')} of modules that import "
            f"each other ({sizes:,} modules in all), smallest first: {shown}",
            "",
        ]
    if arch.fan_in:
        shown = ", ".join(f"{md_code(m)} ({n})" for m, n in arch.fan_in[:10])
        out += [f"**Most depended-on modules** (source modules importing each): {shown}", ""]
    if arch.entry_points:
        out += ["**Entry points** (those no test imports first):", ""]
        # Those no test reaches first: they are what a reader looks for here.
        ordered = sorted(arch.entry_points, key=lambda e: (e.reached, e.tests > 0, e.path))
        for ep in ordered[:20]:
            if ep.tests:
                status = f"imported by {_n(ep.tests, 'test file')}"
            elif ep.reached:
                status = "reached by tests only through other modules"
            else:
                status = "**no test imports it**"
            if ep.examples:
                status += f"; used by {_n(ep.examples, 'example')}"
            out.append(f"- {md_code(ep.path)} ({md_text(ep.component)}): {status}")
        if len(arch.entry_points) > 20:
            out.append(f"- … and {len(arch.entry_points) - 20} more (metrics.json)")
        out.append("")
    untested = arch.untested_components
    if not any_tested:
        out += [
            f"**Tests**: no test imports a source module ({_n(arch.test_files, 'test file')} "
            "of these languages found).",
            "",
        ]
    elif untested:
        out += [
            f"**Components no test reaches** (no test imports them, directly or through other "
            f"modules): {', '.join(map(md_text, untested[:30]))}"
            + (" …" if len(untested) > 30 else ""),
            "",
        ]
    if arch.external or arch.test_only_external:
        text = ", ".join(f"{md_text(d.name)} ({d.files})" for d in arch.external[:25]) or "none"
        if len(arch.external) > 25:
            text += f", … {len(arch.external) - 25} more"
        line = f"**External dependencies** (source files importing each): {text}"
        if arch.test_only_external:
            line += "; in tests and examples only: " + ", ".join(
                md_text(d.name) for d in arch.test_only_external[:15]
            )
            if len(arch.test_only_external) > 15:
                line += " …"
        out += [line, ""]
    if arch.unresolved:
        out += [f"_{_n(arch.unresolved, 'relative import')} named no file of the repository._", ""]
    return out


def architecture_summary(arch: Architecture, max_chars: int = 1500) -> str:
    """A few lines (at most ``max_chars``) for the root model's first message."""
    if not arch.modules:
        return "- architecture: no Python/JS/TS source modules, no import graph"

    def clip(items: list[str], budget: int) -> str:
        text = ""
        for i, item in enumerate(items):
            nxt = (text + ", " if text else "") + item
            if len(nxt) > budget:
                return text + f", … {len(items) - i} more"
            text = nxt
        return text or "none"

    # Names from the repository reach the root model on one line each, escaped.
    comps = [f"{escape_name(c.name)} ({c.lines:,} lines)" for c in arch.components]
    edges = [f"{escape_name(e.source)}→{escape_name(e.target)} ({e.imports})" for e in arch.edges]
    lines = [
        f"- architecture (from imports; all of it in metadata['architecture']): "
        f"{_n(arch.modules, 'source module')} in {_n(len(arch.components), 'component')}: {clip(comps, 250)}",
        f"- component imports, heaviest first: {clip(edges, 300)}",
    ]
    if arch.component_cycles:
        lines.append(
            "- component cycles: "
            + clip([" ⇄ ".join(map(escape_name, g)) for g in arch.component_cycles], 200)
        )
    if arch.fan_in:
        lines.append(
            "- most imported modules: "
            + clip([f"{escape_name(m)} ({n})" for m, n in arch.fan_in], 200)
        )
    if not any(c.tested for c in arch.components):
        lines.append(f"- tests: none imports a source module ({_n(arch.test_files, 'test file')})")
    else:
        untested = [escape_name(e.path) for e in arch.untested_entry_points]
        if untested:
            lines.append("- entry points no test imports: " + clip(untested, 140))
        if arch.untested_components:
            lines.append(
                "- components no test reaches: "
                + clip(list(map(escape_name, arch.untested_components)), 120)
            )
    if arch.external:
        lines.append(
            "- external dependencies: " + clip([escape_name(d.name) for d in arch.external], 200)
        )
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
