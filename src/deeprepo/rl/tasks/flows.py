"""Sinks whose label depends on where their input comes from.

Every cross-file bug is a helper (the sink) plus a route that feeds it request input. The
same helper, byte for byte, also appears

* as a **decoy**, fed by a route that checks the value first (:func:`guarded_decoys`, with
  the snippet's ``guard``): the sink line and the helper are identical to the bug's, only
  the caller differs;
* as **clean code**, called with a constant (:func:`twin_caller`, with its ``twin_args``).

Helpers are renamed at random (:func:`renamed`) in all three roles alike, so a name does not
say which one a helper is. A reader has to follow the value from the route to the sink.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from deeprepo.rl.tasks.composed import restyled
from deeprepo.rl.tasks.render import Block
from deeprepo.rl.tasks.snippets import Snippet

_PY_SUFFIXES = (
    "_now",
    "_batch",
    "_for_report",
    "_job",
    "_all",
    "_quick",
    "_v2",
    "_direct",
    "_task",
)
_JS_SUFFIXES = ("Now", "Batch", "ForReport", "Job", "All", "Quick", "V2", "Direct", "Task")
_PY_CALLER_PREFIXES = ("nightly_", "prefetch_", "default_", "scheduled_", "demo_", "warm_")
_JS_CALLER_PREFIXES = ("nightly", "prefetch", "default", "scheduled", "demo", "warm")


def _insert_guard(code: str, guard: str) -> str:
    lines = code.split("\n")
    i = next(k for k, ln in enumerate(lines) if "⟦source⟧" in ln)
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i + 1 : i + 1] = [indent + g if g else g for g in guard.split("\n")]
    return "\n".join(lines)


def guarded_decoys(snippets: tuple[Snippet, ...]) -> tuple[Snippet, ...]:
    """A decoy for each cross-file bug: the same helper, fed by a route that checks the value."""
    out: list[Snippet] = []
    for s in snippets:
        if not s.vulnerable or s.source is None or s.guard is None:
            continue
        guard = s.guard
        code = _insert_guard(s.source.code, guard.code)
        if guard.rebind is not None:
            old, new = guard.rebind
            code = code.replace(f"«sink_fn»({old})", f"«sink_fn»({new})")
        source = replace(s.source, code=code, imports=(*s.source.imports, *guard.imports))
        out.append(
            replace(
                s,
                name=s.name + "-guarded",
                vulnerable=False,
                source=source,
                description=f"Safe: the helper looks like the bug of its kind, but its only caller "
                f"checks the input first: {guard.what}.",
                guard=None,
                twin_args="",
            )
        )
    return tuple(out)


def renamed(snippet: Snippet, rng: random.Random) -> Snippet:
    """The snippet with its helper renamed by a neutral suffix (half of the time); a composed
    snippet rendered afresh, names and style drawn from ``rng`` (``composed.restyled``)."""
    fresh = restyled(snippet, rng)  # draws from rng only for a composed snippet
    if fresh is not snippet:
        return fresh
    if snippet.source is None or rng.random() < 0.5:
        return snippet
    suffix = rng.choice(_PY_SUFFIXES if snippet.lang == "python" else _JS_SUFFIXES)
    return replace(snippet, block=rename_block(snippet.block, snippet.block.key + suffix))


def rename_block(block: Block, new: str) -> Block:
    old = block.key
    code = re.sub(re.escape(old) + r"(?=\()", new, block.code)
    exports = tuple(new if e == old else e for e in block.exports)
    return replace(block, key=new, code=code, exports=exports)


def twin_caller(snippet: Snippet, rng: random.Random, sink_id: str, sink_fn: str) -> Block:
    """A clean function that calls the helper with constant arguments (``twin_args``)."""
    args = snippet.twin_args
    if snippet.lang == "python":
        name = rng.choice(_PY_CALLER_PREFIXES) + re.sub(r"\W", "", sink_fn).lower()
        code = f"def {name}(«self0»):\n    return «{sink_id}.»{sink_fn}({args})"
        return Block(name, code, uses=(sink_id,))
    name = rng.choice(_JS_CALLER_PREFIXES) + sink_fn[:1].upper() + sink_fn[1:]
    code = f"«afn»{name}() {{\n  return «{sink_id}.»{sink_fn}({args});\n}}"
    return Block(name, code, uses=(sink_id,), exports=(name,))
