"""The kernel's child process: runs root-model code in one persistent namespace.

Started by the parent (``isolation.child_command``) as ``python -s -P -S -c BOOTSTRAP ROOT
RFD WFD ...``: the bootstrap appends ROOT (the directory that holds the ``deeprepo``
package) to ``sys.path``, after the standard library, and runs this module by name as
``__main__``. The environment is an allow-list (no site-packages, nothing of the parent's
``PYTHON*``); RFD/WFD are the RPC pipes (see ``protocol.py``); fd 0 is /dev/null and fds
1/2 go to a pipe the parent drains, so nothing the cell writes can reach the RPC stream.
The child trusts its parent and nothing else: the limits are applied before any cell
runs, and every message it sends is checked again by the parent.

Integrity. A cell reaches every object its namespace holds and all those objects reach:
a function's ``__globals__``, closure and defaults, a class's dict, every module through
``sys.modules``, every frame of its own thread. So three worlds are kept apart:

- the *loop* (``loop.py``: reading messages, building results) runs in a thread of its
  own, from *private copies* of the kernel's modules (:data:`KERNEL_MODULES`): each is
  found by name through the import system like any import, but run into a module object
  that ``sys.modules`` does not list, with a copy of the builtins of its own, and linked
  only to the other private copies. It calls C functions captured before any cell ran
  and never runs code a cell wrote (see ``loop.py`` for how);
- the *scaffold* (``scaffold.py``: ``llm_query``, ``llm_batch``, ``add_finding``,
  ``set_answer``, ``file_audit_prompt``, the ``codebase`` and ``sys.stdout`` classes) is
  plain functions and classes over globals of their own;
- each cell runs in the main thread, whose stack holds nothing of the loop's, through
  *runners* made afresh for it (``runner.py``): one runs the cell, and one the cell never
  saw puts back, as they were before the first cell, every scaffold object (code,
  defaults, globals, class dicts), the builtins, the ``json``, ``traceback`` and
  ``linecache`` modules and the recursion limit, naming what it
  restored (``guard.py``).

Everything the kernel imports by name is imported here, before the isolation is applied
and before any cell runs: nothing a cell does to ``sys.path``, ``sys.meta_path``, the
importer caches or ``sys.modules`` reaches the loop, and a restarted kernel is a fresh
interpreter. After loading, ``sys.modules`` lists only the light modules the import needs
(``deeprepo``, ``deeprepo.base``, ``deeprepo.base.version``, ``deeprepo.sandbox``) and this
one as ``__main__``, and ROOT is taken off ``sys.path`` again.

An audit hook refuses the routes from a cell to the loop's objects (``sys._current_frames``,
the ``gc`` referrer walks, frames seen from the loop's thread, trace and profile functions)
and new audit hooks. What stays open (ctypes, ``/proc/self/mem``, code a cell leaves running
past its end) is in docs/security.md; what any message claims is bounded again by the parent.
"""

from __future__ import annotations

import builtins
import faulthandler
import os
import sys
import types
from collections.abc import Iterator
from itertools import chain
from typing import Any

#: The kernel's own modules, found by name and run as private copies, in this order (each
#: one stdlib only; linked to each other as LINKS says).
KERNEL_MODULES = (
    "deeprepo.sandbox.harden",
    "deeprepo.sandbox.protocol",
    "deeprepo.base.prompts",
    "deeprepo.sandbox.scaffold",
    "deeprepo.sandbox.guard",
    "deeprepo.sandbox.runner",
    "deeprepo.sandbox.outcome",
    "deeprepo.sandbox.loop",
)
#: Which private copies each kernel module refers to (module-level names, set after loading).
LINKS = {
    "outcome": ("protocol", "runner", "scaffold"),
    "loop": ("harden", "protocol", "prompts", "scaffold", "guard", "runner", "outcome"),
}


def private_copy(name: str, builtins_dict: dict[str, Any]) -> types.ModuleType:
    """A fresh copy of module ``name``, found by name through the import system like any
    import, that ``sys.modules`` does not list and that looks builtins up in ``builtins_dict``."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"the sandbox kernel cannot find its module {name}")
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__builtins__"] = builtins_dict
    spec.loader.exec_module(module)
    return module


def load_kernel() -> dict[str, types.ModuleType]:
    """The kernel's modules as private copies sharing one copy of the builtins, linked to
    each other as :data:`LINKS` says (``loop.protocol`` is the private protocol, and so on)."""
    private_builtins = dict(builtins.__dict__)
    modules = {
        name.rpartition(".")[2]: private_copy(name, private_builtins) for name in KERNEL_MODULES
    }
    for key, names in LINKS.items():
        for name in names:
            modules[key].__dict__[name] = modules[name]
    return modules


def main(argv: list[str]) -> int:
    # Each item is (function, args); the iterator lives only on this frame's value stack,
    # so a cell that looks down its stack finds no way to the queue the loop hands work on,
    # nor to the items after the one that runs it.
    for fn, args in _start(argv):
        try:
            fn(*args)
        except BaseException:  # the runners report their own failures; the kernel goes on
            pass
    return 0


def _start(argv: list[str]) -> Iterator[tuple[Any, Any]]:
    """Load the kernel, apply the isolation the parent asked for, start the loop's thread;
    the work the main thread is handed. Its frame, which held the private copies, is gone
    before any cell runs."""
    import _thread
    from queue import SimpleQueue

    modules = load_kernel()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root in sys.path:
        sys.path.remove(root)  # a cell's imports see the standard library only
    # Isolation comes first (harden.py: cgroup, giving up root, seccomp, Landlock): after it,
    # the kernel reads no file of deeprepo's. Then the parent-death signal, which a change
    # of uid clears.
    argv = list(modules["harden"].apply(argv))
    rfd, wfd = int(argv[1]), int(argv[2])
    # The fixed hash seed is the parent's choice for this interpreter only (reproducible
    # output); the cell's code and its subprocesses see the plain allow-listed environment.
    os.environ.pop("PYTHONHASHSEED", None)
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)  # subprocesses and os.system() must not get the pipes
    _die_with_parent()
    faulthandler.enable()  # a crash dumps the cell's stack to fd 2, which the parent shows
    # Loaded now, so the modules the kernel watches are there from the start.
    import json.decoder
    import json.encoder  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401

    work: SimpleQueue[tuple[tuple[Any, Any], ...] | None] = SimpleQueue()
    _thread.start_new_thread(modules["loop"].serve, (rfd, wfd, work.put))
    return chain.from_iterable(iter(work.get, None))


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so a kernel never outlives deeprepo."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
