"""The runner: what runs one cell, in the kernel's main thread, made afresh for each cell.

Kernel side, stdlib only, a private copy in the child (``child.py``). For every cell the
loop (``loop.py``) makes two new functions from this module's code, over globals of
their own, and hands them to the main thread together:

- :func:`run_cell` parses the source (never in the loop's thread: a cell's code could run
  there through a patched class) and runs it. The cell can reach this function's frame,
  so it does nothing after the cell but show the cell's exception;
- :func:`finish_cell` runs once ``run_cell`` has returned, taken from the main thread's
  queue, which no frame refers to: so the cell never saw its frame, globals or arguments.
  It reads the answer, the namespace, the output and the findings, puts back the
  scaffold, then, last, the restore plan; everything it replaces or drops it keeps in
  ``kept``, which the next cell's ``run_cell`` frees once that cell has run, so no
  finalizer of the cell's runs between the restore and the next cell.

The loop gets back plain ``str``/``int``/``bool``/``tuple`` values only, and never calls,
compares, hashes or frees an object of the cell's.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the loop puts these in each runner's globals (nothing is imported here)
    from deeprepo.sandbox.guard import MISSING, internals_note, restore_plan
    from deeprepo.sandbox.protocol import cut_middle, format_syntax_error


def run_cell(
    ns: dict[str, Any],
    source: tuple[str, str],
    box: list[Any],
    env: tuple[Any, ...],
    graveyard: list[Any],
) -> None:
    """Parse and run one cell; ``box`` gets ``("syntax",)`` or ``("ran", error)``.

    ``graveyard`` holds what the cell before could reach, which the loop must not free:
    this empties it once the cell has run (before ``finish_cell`` restores)."""
    sink, target, restore_answer, process, format_exception, hide, codebase, parse, gc = env
    stdout_class, limit, head, tail, counts, findings = sink
    getpid, pid, exit_ = process
    ast_expr, ast_expression, line_cache = parse
    gc_on, gc_enable = gc
    code, filename = source
    try:
        findings.clear()
        # Fast path: a cell whose last top-level statement is an expression (shown like a
        # notebook's) on lines of its own from column 0 compiles as two pieces of source,
        # without the Python AST, which costs 2-3x the compile (a 20k-char cell: ~20 ms of
        # a rollout's kernel). Exact: the head compiles alone only if it ends outside any
        # string, bracket or continuation, so the cell tokenizes the same way whole. Any
        # other cell (or one with line breaks other than \n) takes the AST path below.
        body = last = None
        lines = code.splitlines(True)
        if len(lines) == code.count("\n") + (not code.endswith("\n")):
            i = len(lines) - 1
            while i >= 0 and lines[i][:1] in ("", " ", "\t", "#", "\n"):
                i -= 1
            # A line that starts as a plain assignment (`name = ...`, `a.b, c = ...`) is no
            # expression: the AST path at once, without a failed eval compile (~10 us, a
            # SyntaxError made and dropped). Only a shortcut: the AST path reads any cell.
            lhs, eq, rhs = lines[i].partition("=") if i >= 0 else ("", "", "")
            plain = lhs.replace(" ", "").replace(".", "").replace(",", "").replace("_", "a")
            if i >= 0 and not (eq and rhs[:1] != "=" and plain.isalnum()):
                try:
                    last = compile("\n" * i + "".join(lines[i:]), filename, "eval")
                    body = compile("".join(lines[:i]), filename, "exec")
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    body = last = None
        if body is None:
            last = None
            try:
                tree: Any = compile(code, filename, "exec", 0x400)  # ast.PyCF_ONLY_AST
            except (SyntaxError, ValueError) as exc:
                text = cut_middle(format_syntax_error(exc, code), limit)
                head.append(text)
                counts[:] = [len(text)] * 2 + [0]
                box.append(("syntax",))
                return
            except (RecursionError, MemoryError) as exc:  # absurdly nested code
                text = (
                    f"SyntaxError: the cell is too deeply nested to parse ({type(exc).__name__})\n"
                )
                head.append(text)
                counts[:] = [len(text)] * 2 + [0]
                box.append(("syntax",))
                return
            if tree.body and type(tree.body[-1]) is ast_expr:
                # Like a notebook, the value of a final expression is shown.
                last = compile(ast_expression(tree.body.pop().value), filename, "eval")
            body = compile(tree, filename, "exec")
            del tree
        line_cache[filename] = (len(code), None, lines, filename)
        ns["codebase"] = codebase
        stdout = stdout_class(limit, head, tail, counts)
        target[0] = stdout
        sys.stdout = sys.stderr = stdout
        if restore_answer is not None:
            ns["answer"] = {"content": restore_answer, "ready": False}
        error = None
        if gc_on:
            gc_enable()  # the cell's own choice; the loop runs with the cyclic gc off
        try:
            exec(body, ns)
            if last is not None:
                value = eval(last, ns)
                if value is not None:
                    stdout.write(repr(value) + "\n")
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the kernel goes on
            if getpid() != pid:
                exit_(1)
            error = "exception"
            try:
                stdout.write(format_exception(exc, hide))
            except BaseException:
                box.append(
                    ("error", "[deeprepo] the cell raised an exception that cannot be shown\n")
                )
        if getpid() != pid:
            exit_(0)  # a fork made by the cell has finished the cell's code: it stops here
        box.append(("ran", error))
    except BaseException as exc:  # finish_cell still runs
        box.append(
            ("error", f"[deeprepo] the kernel could not run the cell: {type(exc).__name__}\n")
        )
    finally:
        while graveyard:  # a finalizer it runs may put more there
            graveyard.clear()


def finish_cell(
    plan: tuple[Any, ...], ns: dict[str, Any], box: list[Any], done: Any, env: tuple[Any, ...]
) -> None:
    """Read what the cell did, then put back what it changed.

    ``box`` gets ``("ok", restored, (content, ready), user_vars)`` (which the loop ignores
    after a syntax error), notes as ``("error", text)``, and last ``("out", head, total,
    tail, findings, recorded, gc_on)``.
    """
    scaffold, sink, target, max_findings, gc, kept = env
    stdout_class, limit, head, tail, counts, findings = sink
    gc_disable, gc_isenabled = gc
    try:
        # What the cell wants of the gc is read first: the cell's own objects may run code
        # (a __del__, an __eq__) while the scaffold and its answer are read, never after
        # the restore at the end.
        gc_on = gc_isenabled()
        gc_disable()
        restored: list[str] = []
        for name, obj in scaffold:
            old = ns.get(name, MISSING)
            if old is not obj:
                kept.append(old)
                ns[name] = obj
                restored.append(name)
        answer = ns.get("answer", MISSING)
        content: object = ""
        ready = False
        if type(answer) is dict:
            content = dict.get(answer, "content", MISSING)
            flag = dict.get(answer, "ready", MISSING)
            ready = flag is True or (type(flag) is int and flag != 0)
            if content is MISSING or flag is MISSING:
                kept.append(answer)
                ns["answer"] = {"content": content if type(content) is str else "", "ready": False}
                restored.append("answer")
                ready = False
        else:
            if isinstance(answer, dict):
                content = dict.get(answer, "content", "")
            elif type(answer) is str:
                content = answer
            kept.append(answer)
            ns["answer"] = {"content": content if type(content) is str else "", "ready": False}
            restored.append("answer")
        if type(content) is not str:
            kept.append(content)
            content = "" if content is None or content is MISSING else str.__str__(str(content))
        user_vars = tuple(
            k for k in ns if type(k) is str and not (k.startswith("__") and k.endswith("__"))
        )
        box.append(("ok", tuple(restored), (content, ready is True), user_vars))
    except BaseException as exc:
        gc_on = True
        box.append(
            (
                "error",
                f"[deeprepo] the kernel could not read the cell's state: {type(exc).__name__}\n",
            )
        )
    finally:
        try:
            recorded = list(findings)
            findings.clear()
            kept.append(recorded)
            kept.extend((sys.stdout, sys.stderr, target[0]))
            stdout = stdout_class(limit, head, tail, counts)
            target[0] = stdout
            sys.stdout = sys.stderr = stdout
            changed = restore_plan(plan)
            if changed:
                stdout.write(internals_note(changed))
            findings_kept = tuple(
                f for f in map(plain_finding, recorded[:max_findings]) if f is not None
            )
            half = max(0, limit) // 2
            tail_cap = max(0, limit) - half
            box.append(
                (
                    "out",
                    "".join([s for s in list(head) if type(s) is str])[:half],
                    counts[0] if counts and type(counts[0]) is int else 0,
                    "".join([s for s in list(tail) if type(s) is str])[-tail_cap:]
                    if tail_cap
                    else "",
                    findings_kept,
                    len(recorded),
                    gc_on is True,
                )
            )
        finally:
            gc_disable()  # the loop goes on with the gc off: no cycle of the cell's is freed there
            done.release()


def plain_finding(f: object) -> tuple[Any, ...] | None:
    """One recorded finding as a tuple of plain values, or None if it is not what
    ``add_finding`` records."""
    if type(f) is not tuple or len(f) != 9:
        return None
    file, line, end_line, kind, severity, title, detail, fix, cwe = f
    if not all(type(s) is str for s in (file, kind, severity, title, detail, fix)):
        return None
    if type(line) is not int or type(end_line) is not int or not (cwe is None or type(cwe) is str):
        return None
    return (file, line, end_line, kind, severity, title, detail, fix, cwe)
