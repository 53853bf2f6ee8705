"""What keeps a cell from patching the kernel for later cells: the restore plan and the audit hook.

Kernel side, stdlib only: the child (``child.py``) runs this module as a private copy and the
loop (``loop.py``) calls it while it sets a kernel up, before any cell runs. The plan is what
the runner (``runner.py``) puts back after every cell; the audit hook refuses what no restore
could undo (a function's code, a class's bases, frames of the loop's thread).
"""

from __future__ import annotations

import sys
import types
from itertools import chain, repeat
from operator import is_not, methodcaller
from typing import Any

MISSING = object()  # "no such key": shared by the scaffold, the runner and the plan
values_of = methodcaller("values")
WATCHED_MODULES = (
    "builtins",
    "json",
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "traceback",
    "linecache",
)
# Audit events no cell may raise: routes to the loop's objects (frames, every thread's
# exception, the gc's object walks), code run on another frame's behalf (trace and profile
# functions, which may rewrite a frame's locals; sys.monitoring callbacks, in every thread),
# and new audit hooks.
BLOCKED_EVENTS = frozenset(
    {
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys._settraceallthreads",
        "sys._setprofileallthreads",
        "sys.monitoring.register_callback",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.addaudithook",
    }
)
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})


def rebind(fn: Any, g: dict[str, Any]) -> Any:
    """``fn``'s code as a new function over the globals ``g`` (nothing of ``fn``'s own)."""
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    return new


def kernel_classes() -> list[tuple[str, type]]:
    """The patchable classes the kernel's own code calls into: every ``ast`` node class (the
    runner parses each cell with them: a property on ``ast.Module.body`` would rewrite every
    later cell) and ``_json``'s scanner and encoder (the loop reads and writes every message
    with them: a ``__call__`` a cell put there would run in the loop's thread)."""
    import _ast
    import _json

    classes = [
        (f"ast.{name}", value)
        for name, value in sorted(vars(_ast).items())
        if isinstance(value, type) and issubclass(value, _ast.AST)
    ]
    return [
        *classes,
        ("_json.make_scanner", _json.make_scanner),
        ("_json.make_encoder", _json.make_encoder),
    ]


def freeze(classes: list[tuple[str, type]]) -> list[tuple[str, type]]:
    """Make ``classes`` immutable, as CPython marks its own built-in types
    (``Py_TPFLAGS_IMMUTABLETYPE``): setting or deleting an attribute of one then raises
    ``TypeError``, so nothing needs restoring after each cell (~100 us a cell for the 125
    ``ast`` classes). Returns those it could not freeze, for the restore plan (none on
    CPython 3.11 to 3.14, where the flags sit where ``__flags__`` reads them)."""
    import ctypes

    if ctypes.sizeof(ctypes.c_ulong) != 8:
        return classes

    def word(cls: type, offset: int) -> Any:
        return ctypes.c_ulong.from_address(id(cls) + offset)

    probes = [int, type, dict, *(cls for _, cls in classes)]
    for offset in range(0, 256, 8):  # tp_flags: 168 on 64-bit CPython
        if all(word(cls, offset).value == cls.__flags__ for cls in probes):
            break
    else:
        return classes
    for _, cls in classes:
        word(cls, offset).value = cls.__flags__ | (1 << 8)  # Py_TPFLAGS_IMMUTABLETYPE
    return [(label, cls) for label, cls in classes if not cls.__flags__ & (1 << 8)]


def make_plan(
    dicts: list[tuple[str, dict[str, Any]]], classes: list[tuple[str, type]]
) -> tuple[tuple[Any, ...], set[int]]:
    """What the runner restores after each cell (these dicts, the watched modules,
    the classes found in them, as they are now), and the ids of the functions and classes
    whose code, defaults, bases or class the audit hook keeps from being changed."""
    plan: list[tuple[Any, ...]] = []
    protected: set[int] = set()
    all_dicts = list(dicts)
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            plan.append(("module", f"sys.modules[{name!r}]", name, module, sys.modules))
            all_dicts.append((name, vars(module)))
    found = list(classes)

    def protect(label: str, f: object) -> None:
        f = getattr(f, "__func__", f)
        if isinstance(f, types.FunctionType) and id(f) not in protected:
            protected.add(id(f))
            if f.__kwdefaults__:
                plan.append(
                    (
                        "kwdefaults",
                        f"{label}.__kwdefaults__",
                        f.__kwdefaults__,
                        tuple(f.__kwdefaults__.items()),
                    )
                )

    for label, d in all_dicts:
        plan.append(("dict", label, d, tuple(d), tuple(d.values())))
        for key, value in list(d.items()):
            protect(f"{label}.{key}", value)
            if (
                isinstance(value, type)
                and value.__flags__ & (1 << 9)  # a heap type (Py_TPFLAGS_HEAPTYPE): patchable
                and getattr(value, "__module__", None) in (label, d.get("__name__"))
            ):
                found.append((f"{label}.{key}", value))
    for label, cls in found:
        if id(cls) in protected:
            continue
        protected.add(id(cls))
        members = cls.__dict__
        plan.append(("class", label, cls, tuple(members), tuple(members.values())))
        for key, value in members.items():
            protect(f"{label}.{key}", value)
            if isinstance(value, property):
                for accessor in (value.fget, value.fset, value.fdel):
                    protect(f"{label}.{key}", accessor)
    limit = sys.getrecursionlimit()
    plan.append(
        ("limit", "sys.setrecursionlimit", sys.getrecursionlimit, sys.setrecursionlimit, limit)
    )
    return _fast_plan(plan, limit), protected


def _fast_plan(entries: list[tuple[Any, ...]], limit: int) -> tuple[Any, ...]:
    """The plan with what "nothing changed" needs first, so the check is a few C loops over
    all of it: every dict (or class dict) and its size, last key and values in order."""
    containers: list[Any] = []
    sizes: list[int] = []
    lasts: list[Any] = []
    values: list[Any] = []
    lookups: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
    for entry in entries:
        kind = entry[0]
        if kind in ("dict", "class"):
            container = entry[2] if kind == "dict" else entry[2].__dict__
            keys, vals = entry[3], entry[4]
        elif kind == "kwdefaults":
            container = entry[2]
            keys, vals = tuple(k for k, _ in entry[3]), tuple(v for _, v in entry[3])
        elif kind == "module":
            lookups[0].append(entry[4])
            lookups[1].append(entry[2])
            lookups[2].append(entry[3])
            continue
        else:
            continue
        containers.append(container)
        sizes.append(len(keys))
        lasts.append(keys[-1] if keys else MISSING)
        values.extend(vals)
    fast = (tuple(containers), tuple(sizes), tuple(lasts), tuple(values))
    return (fast, tuple(map(tuple, lookups)), (sys.getrecursionlimit, limit), tuple(entries))


# ---------------------------------------------------------------- run by the runner, per cell


def restore_plan(plan: tuple[Any, ...]) -> list[str]:
    """Put back every object of ``plan`` as it was before the first cell; what changed.

    The runner runs this over globals of its own (``MISSING``, ``is_not``, ``repeat``,
    ``chain``, ``values_of``)."""
    (containers, sizes, lasts, values), lookups, limit, entries = plan
    # Nothing changed, the common case: every size, last key and value as it was, by
    # identity, in C (no __eq__ of the cell's runs), then the modules and the limit.
    if (
        tuple(map(len, containers)) == sizes
        and not any(map(is_not, map(next, map(reversed, containers), repeat(MISSING)), lasts))
        and not any(map(is_not, chain.from_iterable(map(values_of, containers)), values))
        and not any(map(is_not, map(dict.get, *lookups[:2], repeat(MISSING)), lookups[2]))
        and limit[0]() == limit[1]
    ):
        return []
    changed: list[str] = []
    for entry in entries:
        kind = entry[0]
        if kind == "dict":
            _, label, d, keys, values = entry
            if len(d) != len(keys) or any(map(is_not, map(d.get, keys, repeat(MISSING)), values)):
                key_set = set(keys)
                for k in [k for k in d if type(k) is not str or k not in key_set]:
                    del d[k]
                    changed.append(f"{label}.{k}" if type(k) is str else label)
                for k, v in zip(keys, values, strict=True):
                    if d.get(k, MISSING) is not v:
                        d[k] = v
                        changed.append(f"{label}.{k}")
        elif kind == "class":
            _, label, cls, keys, values = entry
            d = cls.__dict__
            if len(d) != len(keys) or any(map(is_not, map(d.get, keys, repeat(MISSING)), values)):
                key_set = set(keys)
                for k in [k for k in d if k not in key_set]:
                    delattr(cls, k)
                for k, v in zip(keys, values, strict=True):
                    if d.get(k, MISSING) is not v:
                        setattr(cls, k, v)
                changed.append(label)
        elif kind == "kwdefaults":
            _, label, d, items = entry
            same = len(d) == len(items) and all(
                k in d and dict.get(d, k, MISSING) is v for k, v in items
            )
            if not same:
                d.clear()
                d.update(items)
                changed.append(label)
        elif kind == "module":
            _, label, name, module, modules = entry
            if modules.get(name) is not module:
                modules[name] = module
                changed.append(label)
        elif kind == "limit":
            _, label, get, set_, value = entry
            if get() != value:
                set_(value)
                changed.append(label)
    return list(dict.fromkeys(changed))


def internals_note(names: list[str]) -> str:
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return (
        f"[deeprepo] this cell changed kernel internals ({shown}); they were put back as they "
        "were, so later cells run with the originals.\n"
    )


# ---------------------------------------------------------------- the audit hook


def audit_hook(loop_thread: int, get_ident: Any, protected: frozenset[int]) -> Any:
    """The kernel's audit hook (make it over globals of its own). A refusal's traceback shows
    its frame, so everything it uses is a default argument (a local of each call, not a
    global or closure cell a cell could rebind) and immutable; a cell's objects are never
    hashed, compared or formatted, only exact ``str``s."""

    def hook(
        event: str,
        args: tuple[Any, ...],
        blocked: frozenset[str] = BLOCKED_EVENTS,
        frame_attrs: frozenset[str] = FRAME_ATTRS,
        loop_thread: int = loop_thread,
        get_ident: Any = get_ident,
        protected: frozenset[int] = protected,
        len: Any = len,
        type: Any = type,
        id: Any = id,
        str: Any = str,
        RuntimeError: Any = RuntimeError,
    ) -> None:
        if event in blocked:
            raise RuntimeError(f"{event} is not available in the deeprepo kernel")
        if event == "object.__getattr__":
            if get_ident() == loop_thread:
                name = args[1] if len(args) > 1 else None
                if type(name) is not str or name in frame_attrs:
                    raise RuntimeError("frames are not available here")
        elif event in ("object.__setattr__", "object.__delattr__"):
            if len(args) > 1 and id(args[0]) in protected:
                name = args[1] if type(args[1]) is str else "this attribute"
                raise RuntimeError(
                    f"{name} of the kernel's scaffold cannot be changed; wrap it in a function of your own"
                )
        elif event == "sys._getframe" and get_ident() == loop_thread:
            raise RuntimeError("frames are not available here")

    return hook
