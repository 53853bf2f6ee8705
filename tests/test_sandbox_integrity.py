"""How the kernel loads its own modules, and that no cell reaches them.

The child starts by module name and runs its modules as private copies found through the
import system (``sandbox/child.py``). These tests check the command line and what bwrap
binds, what a cell sees of the loading (``sys.modules``, ``sys.path``, the environment),
that planting modules or import hooks changes nothing the kernel does, and that none of
the routes that once let a cell's code run in the loop's thread (and climb from there to
the loop's state) works any more.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from deeprepo.base import prompts
from deeprepo.sandbox import isolation
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import bwrap_problem
from deeprepo.sandbox.kernel import Kernel

PAYLOAD: dict[str, Any] = {
    "codebase": {"app.py": "import os\nx = 1\n"},
    "file_tree": "app.py",
    "metadata": {"files": 1},
}
BWRAP = bwrap_problem()
MODES = [
    "process",
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP is not None, reason=f"needs bwrap: {BWRAP}")
    ),
]
LIGHT = ["deeprepo", "deeprepo.base", "deeprepo.base.version", "deeprepo.sandbox"]


async def answer(batch: list[str], system: str | None) -> list[str]:
    return [f"answer:{p}" for p in batch]


async def start(mode: str) -> Kernel:
    config = SandboxConfig(mode=mode, cell_timeout_s=20)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # process mode says what it gives up
        return await Kernel.start(PAYLOAD, answer, config)


@pytest.fixture
async def kernel() -> AsyncIterator[Kernel]:
    async with await start("process") as k:
        yield k


async def usable(k: Kernel) -> None:
    r = await k.exec(
        "print(llm_query('q'), len(codebase), file_audit_prompt('app.py') == EXPECTED, repr(1))\n"
        "add_finding('app.py', 1, 'bug', 'low', 'real')"
    )
    assert (r.error, r.output) == (None, "answer:q 1 True 1\n"), r.output
    assert [f["title"] for f in r.new_findings] == ["real"]


def _expected() -> str:
    return f"EXPECTED = {prompts.file_audit_prompt('app.py', PAYLOAD['codebase']['app.py'])!r}"


# ---------------------------------------------------------------- the command line


def test_the_child_starts_by_module_name_with_the_root_after_the_stdlib() -> None:
    cmd = isolation.child_command("process", 5, 6)
    assert cmd[1:5] == ["-s", "-P", "-S", "-c"]
    bootstrap, root, rfd, wfd = cmd[5:9]
    assert (root, rfd, wfd) == (isolation.PACKAGE_ROOT, "5", "6")
    assert "sys.path.append(sys.argv.pop(1))" in bootstrap  # after the standard library
    assert "runpy.run_module('deeprepo.sandbox.child', run_name='__main__'" in bootstrap
    assert not [a for a in cmd if a.endswith(".py")]  # no module given by path
    assert "PYTHONPATH" not in isolation.child_env("/tmp/x")
    assert Path(root, "deeprepo", "sandbox", "child.py").is_file()


def test_bwrap_binds_only_what_the_child_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # deeprepo installed into a site-packages next to other packages: none of them is bound.
    site = tmp_path / "venv" / "lib" / "site-packages"
    for part in (
        "deeprepo/base",
        "deeprepo/sandbox",
        "deeprepo/run",
        "openai",
        "deeprepo-0.1.dist-info",
    ):
        (site / part).mkdir(parents=True)
    for name in ("deeprepo/__init__.py", "deeprepo/__main__.py", "typing.py", "six.py"):
        (site / name).write_text("")
    monkeypatch.setattr(isolation, "PACKAGE_ROOT", str(site))
    argv = isolation.bwrap_argv("bwrap", "/usr/bin/python3", 8, ["python"], as_root=False)
    binds = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a in ("--ro-bind", "--ro-bind-try")]
    mine = [src for src, dest in binds if src.startswith(str(tmp_path))]
    assert mine == [
        str(site / "deeprepo" / "__init__.py"),
        str(site / "deeprepo" / "base"),
        str(site / "deeprepo" / "sandbox"),
    ]
    assert all(src == dest for src, dest in binds)
    dirs = [argv[i + 1] for i, a in enumerate(argv) if a == "--dir"]
    assert str(site) in dirs and str(site / "deeprepo") in dirs  # made, not bound
    assert argv.index(str(site / "deeprepo")) < argv.index(str(site / "deeprepo" / "__init__.py"))
    # Landlock needs nothing of deeprepo: the child has read its modules before.
    assert not [
        p for p in isolation.child_readable_paths("/usr/bin/python3") if p.startswith(str(tmp_path))
    ]


# ---------------------------------------------------------------- what a cell sees

SEES = (
    "import os, sys\n"
    "mine = sorted(n for n in sys.modules if n.startswith('deeprepo'))\n"
    "files = sorted(n for n, m in list(sys.modules.items()) if 'deeprepo' in str(getattr(m, '__file__', '')))\n"
    "root = {root!r}\n"
    "print(mine)\nprint(files)\n"
    "print(root in sys.path, root in sys.argv, 'PYTHONPATH' in os.environ, 'PYTHONHASHSEED' in os.environ)\n"
    "print(sys.modules['__main__'].__spec__.name, [p for p in sys.path if 'deeprepo' in p])"
)


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
async def test_a_cell_sees_only_the_light_modules_and_a_clean_path(mode: str) -> None:
    async with await start(mode) as k:
        r = await k.exec(SEES.format(root=isolation.PACKAGE_ROOT))
        lines = r.output.splitlines()
        assert lines[0] == str(LIGHT), r.output
        # by file: the same packages, and this kernel's startup module as __main__
        assert lines[1] == str(sorted(["__main__", *LIGHT])), r.output
        assert lines[2] == "False False False False"
        assert lines[3] == "deeprepo.sandbox.child []"


@pytest.mark.e2e
async def test_the_loops_modules_are_in_no_module_a_cell_reaches(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import sys, gc\n"
        "names = ('deeprepo.sandbox.loop', 'deeprepo.sandbox.protocol', 'deeprepo.sandbox.scaffold',\n"
        "         'deeprepo.sandbox.runner', 'deeprepo.sandbox.guard', 'deeprepo.sandbox.harden',\n"
        "         'deeprepo.sandbox.outcome', 'deeprepo.base.prompts')\n"
        "print([n for n in names if n in sys.modules])\n"
        "found = set()\n"
        "for m in list(sys.modules.values()):\n"
        "    for v in list(vars(m).values()) if hasattr(m, '__dict__') else ():\n"
        "        if type(v).__name__ == 'module' and getattr(v, '__name__', '') in names:\n"
        "            found.add(v.__name__)\n"
        "print(sorted(found))\n"
        "g = llm_batch.__globals__\n"
        "print(sorted(k for k, v in g.items() if type(v).__name__ == 'module'))\n"
        "try:\n    gc.get_referrers(llm_batch)\nexcept RuntimeError as e:\n    print('refused')"
    )
    assert r.output == "[]\n[]\n[]\nrefused\n", r.output


# ---------------------------------------------------------------- planted modules and hooks


@pytest.mark.e2e
async def test_planted_modules_do_not_change_what_the_scaffold_uses(kernel: Kernel) -> None:
    await kernel.exec(_expected())
    r = await kernel.exec(
        "import sys, types\n"
        "fake = types.ModuleType('deeprepo.base.prompts')\n"
        "fake.file_audit_prompt = lambda *a, **k: 'FORGED'\n"
        "fake.FILE_AUDIT_INSTRUCTIONS = 'FORGED'\n"
        "fake.number_lines = fake.render_file_block = fake.file_audit_prompt\n"
        "sys.modules['deeprepo.base.prompts'] = fake\n"
        "import deeprepo.base\ndeeprepo.base.prompts = fake\n"
        "for name in ('deeprepo.sandbox.protocol', 'deeprepo.sandbox.scaffold', 'deeprepo.sandbox.loop'):\n"
        "    forged = types.ModuleType(name)\n"
        "    forged.cut_middle = forged.prompt_error = forged.system_error = lambda *a, **k: 'FORGED'\n"
        "    sys.modules[name] = forged\n"
        "print(file_audit_prompt('app.py') == EXPECTED, llm_query('q'))"
    )
    assert r.output == "True answer:q\n", r.output
    await usable(kernel)


@pytest.mark.e2e
async def test_import_hooks_and_paths_a_cell_plants_never_run_for_the_kernel(
    kernel: Kernel,
) -> None:
    await kernel.exec(_expected())
    r = await kernel.exec(
        "import os, sys, importlib.abc\n"
        "calls = []\n"
        "class Finder(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        calls.append(name)\n"
        "        raise ImportError('planted finder')\n"
        "os.makedirs('deeprepo/sandbox', exist_ok=True)\n"
        "for f in ('deeprepo/__init__.py', 'deeprepo/sandbox/__init__.py', 'deeprepo/sandbox/protocol.py'):\n"
        '    open(f, \'w\').write(\'open("PLANTED", "w").write("ran")\\n\')\n'
        "sys.path.insert(0, os.getcwd())\nsys.meta_path.insert(0, Finder())\n"
        "sys.path_importer_cache.clear()\nsys.path_hooks.clear()\n"
        "for n in [n for n in sys.modules if n.startswith('deeprepo')]:\n"
        "    del sys.modules[n]\n"
        "print('planted')"
    )
    assert r.output == "planted\n", r.output
    await usable(kernel)
    r = await kernel.exec("print(calls, os.path.exists('PLANTED'))")
    assert r.output == "[] False\n", r.output  # the kernel imported nothing since
    # A restarted kernel is a fresh interpreter: nothing planted in the last one reaches it.
    r = await kernel.exec("import os\nos._exit(3)")
    assert r.restarted
    await kernel.exec(_expected())
    await usable(kernel)
    r = await kernel.exec(
        "import sys\nprint(sorted(n for n in sys.modules if n.startswith('deeprepo')), len(sys.meta_path))"
    )
    assert r.output == f"{LIGHT} 3\n", r.output


# ---------------------------------------------------------------- no cell code in the loop's thread

# Each attack once ran its code in the loop's thread (or kept the loop's state reachable),
# and kept the exception of that code in ``saved``; CLIMB walks up from it looking for the
# loop's state. Each ran in the main thread instead, or not at all.
GRAB = "    try:\n        raise ValueError('x')\n    except ValueError as e:\n        saved.append(e)\n"
LOOP_ATTACKS = {
    "the pipes' methods": (
        "saved = []\ng = llm_batch.__globals__\n"
        "names = ('_readline', '_write', '_reader', '_writer')\n"
        "files = [getattr(g[k], '__self__', g[k]) for k in names if k in g]\n"
        "def shadow(f, name):\n"
        "    real = getattr(f, name)\n"
        "    def evil(*a):\n"
        "        try:\n            raise ValueError('x')\n"
        "        except ValueError as e:\n            saved.append(e)\n"
        "        return real(*a)\n"
        "    setattr(f, name, evil)\n"
        "for f in files:\n"
        "    for name in ('readline', 'read', 'write', 'flush'):\n"
        "        shadow(f, name)\n"
        "print(llm_query('p'))"
    ),
    "_json's encoder": (
        "import _json\nsaved = []\nreal = _json.make_encoder.__call__\n"
        "def evil(self, *a):\n" + GRAB + "    return real(self, *a)\n"
        "try:\n    _json.make_encoder.__call__ = evil\nexcept TypeError:\n    pass"
    ),
    "_json's scanner": (
        "import _json\nsaved = []\nreal = _json.make_scanner.__call__\n"
        "def evil(self, *a):\n" + GRAB + "    return real(self, *a)\n"
        "try:\n    _json.make_scanner.__call__ = evil\nexcept TypeError:\n    pass\n"
        "print(llm_query('p'))"
    ),
    "os.waitid": (
        "import os, subprocess\nsaved = []\nreal = os.waitid\n"
        "class E(ChildProcessError): pass\n"
        "def evil(*a):\n    os.waitid = real\n    e = E()\n    saved.append(e)\n    raise e\n"
        "os.waitid = evil\nsubprocess.Popen(['sleep', '30'])"
    ),
    "os.path.abspath": (
        "import os\nsaved = []\nreal = os.path.abspath\n"
        "def evil(p):\n" + GRAB + "    return real(p)\nos.path.abspath = evil"
    ),
    "types.FunctionType": (
        "import types\nsaved = []\nreal = types.FunctionType\n"
        "def evil(*a):\n" + GRAB + "    return real(*a)\ntypes.FunctionType = evil"
    ),
    "a forged report's __eq__": (
        "import sys\nsaved = []\nf = sys._getframe(0)\n"
        "while f is not None and 'box' not in f.f_locals:\n    f = f.f_back\n"
        "class Evil:\n    def __eq__(self, other):\n    "
        + GRAB.replace("\n    ", "\n        ")
        + "        return False\nf.f_locals['box'].append((Evil(), 1))"
    ),
    "a linecache key's __eq__": (
        "import linecache\nsaved = []\n"
        "class K:\n    def __init__(self, h):\n        self.h = h\n    def __hash__(self):\n        return self.h\n"
        "    def __eq__(self, other):\n    "
        + GRAB.replace("\n    ", "\n        ")
        + "        return False\n"
        "for i in range(2, 8):\n    linecache.cache[K(hash('<cell-%d>' % i))] = (0, None, [], '')"
    ),
    "a finalizer in _findings": (
        "saved = []\nclass Evil:\n    def __del__(self):\n    "
        + GRAB.replace("\n    ", "\n        ")
        + "add_finding.__globals__['_findings'].append(Evil())"
    ),
    "cyclic garbage with a finalizer": (
        "import gc, threading\nsaved = []\nmain = threading.main_thread().ident\n"
        "gc.set_threshold(1)\n"
        "class Evil:\n    def __del__(self):\n"
        "        if threading.get_ident() == main:  # not yet: leave a new cycle behind\n"
        "            again = Evil()\n            again.me = again\n            return\n"
        "    "
        + GRAB.replace("\n    ", "\n        ")
        + "for i in range(20):\n    a = Evil()\n    a.me = a\ndel a"
    ),
}
CLIMB = (
    "out = []\n"
    "for e in saved[-400:]:\n"
    "    f = e.__traceback__.tb_frame\n"
    "    while f is not None:\n"
    "        if type(f.f_locals.get('self', f.f_locals.get('kernel'))).__name__ in ('KernelLoop', '_Kernel'):\n"
    "            out.append(f.f_code.co_name)\n"
    "        f = f.f_back\n"
    "print('loop reached' if out else 'not reached', out)"
)


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(LOOP_ATTACKS))
async def test_no_cell_code_runs_in_the_loops_thread(name: str, kernel: Kernel) -> None:
    await kernel.exec(_expected())
    r = await kernel.exec(LOOP_ATTACKS[name])
    assert not r.restarted, r.output
    await kernel.exec("x = [1, 2, 3]")  # the loop handles another cell
    r = await kernel.exec(CLIMB)
    assert r.output.startswith("not reached"), r.output
    r = await kernel.exec("import gc\ngc.set_threshold(700, 10, 10)")
    await usable(kernel)


@pytest.mark.e2e
async def test_the_audit_hooks_refusal_shows_nothing_a_cell_can_change(kernel: Kernel) -> None:
    r = await kernel.exec(
        "try:\n    llm_batch.__code__ = (lambda ps, system=None: ['forged']).__code__\n"
        "except RuntimeError as e:\n    tb = e.__traceback__\n"
        "    while tb.tb_next is not None:\n        tb = tb.tb_next\n"
        "    frame = tb.tb_frame\n"
        "    print(sorted(type(v).__name__ for v in frame.f_locals.values() if isinstance(v, (set, dict, list))))\n"
        "    frame.f_globals.clear()\n"
        "try:\n    llm_batch.__code__ = (lambda ps, system=None: ['forged']).__code__\n"
        "except RuntimeError:\n    print('still refused', llm_batch(['a']))"
    )
    assert r.output == "[]\nstill refused ['answer:a']\n", r.output


@pytest.mark.e2e
async def test_a_cell_cannot_turn_off_its_runners_restore(kernel: Kernel) -> None:
    await kernel.exec(_expected())
    r = await kernel.exec(
        "import sys, builtins\n"
        "f = sys._getframe(1)\n"
        "f.f_globals['restore_plan'] = f.f_globals['_restore_plan'] = lambda plan: []\n"
        "builtins.repr = lambda o: 'FORGED'"
    )
    assert "this cell changed kernel internals (builtins.repr)" in r.output, r.output
    await usable(kernel)


@pytest.mark.e2e
async def test_what_a_cell_leaves_behind_is_freed_only_after_the_next_cell_ran(
    kernel: Kernel,
) -> None:
    # A finalizer that re-patches the kernel, in an object the finishing runner drops: it
    # must not run between the restore and the next cell.
    await kernel.exec(_expected())
    await kernel.exec(
        "class Late:\n    def __del__(self):\n        import builtins\n"
        "        builtins.repr = lambda o: 'FORGED'\n"
        "add_finding.__globals__['_findings'].append(Late())\n"
        "answer = Late()\ndel Late"
    )
    r = await kernel.exec("print(repr(1))")
    assert r.output.startswith("1\n"), r.output  # it ran with the real repr
    assert "changed kernel internals (builtins.repr)" in r.output  # and what ran after, undone
    await usable(kernel)


@pytest.mark.e2e
async def test_a_cell_cannot_patch_the_ast_classes_later_cells_are_parsed_with(
    kernel: Kernel,
) -> None:
    # A property on ast.Module.body would rewrite every later cell as the runner parses it.
    await kernel.exec(_expected())
    r = await kernel.exec("import ast\nast.Module.body = property(lambda self: [])")
    assert r.error == "exception" and "immutable type 'Module'" in r.output, r.output
    r = await kernel.exec(
        "import ast\nclass V(ast.NodeVisitor):\n    pass\n"
        "tree = ast.parse(codebase['app.py'])\ntree.extra = 1\nV().visit(tree)\nlen(tree.body)"
    )
    assert r.output == "2\n", r.output  # the model's own use of ast still works
    await usable(kernel)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "code", ["import sys\nsys.settrace(lambda *a: None)", "import sys\nsys.setprofile(print)"]
)
async def test_trace_and_profile_functions_are_refused(code: str, kernel: Kernel) -> None:
    r = await kernel.exec(code)
    assert r.error == "exception" and "is not available in the deeprepo kernel" in r.output, (
        r.output
    )
    await kernel.exec(_expected())
    await usable(kernel)


def test_nothing_in_the_sandbox_is_loaded_by_path() -> None:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, str(root / "scripts" / "check_layers.py")],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert not [line for line in out.splitlines() if line.startswith("deeprepo.sandbox")], out
