"""The kernel's loop: reads the parent's messages, has the main thread run each cell, sends results.

Kernel side, stdlib only. The child (``child.py``) runs this module as a private copy,
links it to the private copies of the modules it names below, and starts :func:`serve` in
a thread of its own. Once a cell has run, this thread must never run code a cell wrote, or
the cell could climb from that code's frame to the loop's objects and rewrite every later
cell. So after the first cell the loop

- calls only what it captured before: C functions and its private modules' functions,
  never a public module's attribute looked up again (``os.path``, ``types``, ``os.waitid``);
- reads what the runner hands back only as exact ``str``/``int``/``bool``/``tuple``
  values, and never compares, hashes or formats a cell's object;
- never drops the last reference to anything a cell can reach: the runner's arguments go
  back to the main thread, which frees them (a finalizer of the cell's runs there);
- runs with the cyclic garbage collector off (the runner turns it on for the cell and off
  after), so no cycle of the cell's is collected, and finalized, in this thread.
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeprepo.base import prompts
    from deeprepo.sandbox import guard, harden, outcome, protocol, runner, scaffold
else:  # private copies, linked by child.py when it loads this module: nothing is imported here
    prompts = guard = harden = outcome = protocol = runner = scaffold = None


class KernelLoop:
    """The loop's state. Only :func:`serve` (in a private copy of this module) makes one."""

    def __init__(self, rfd: int, wfd: int, submit: Any) -> None:
        import _json
        import _thread
        import ast
        import gc
        import itertools
        import json.decoder
        import linecache
        import operator

        reader = io.open(rfd, "rb")  # noqa: SIM115, UP020 - C objects
        writer = io.open(wfd, "wb")  # noqa: SIM115, UP020
        # Their bound methods, captured now: a cell reaches the file objects (through the
        # scaffold) and can shadow a method with an instance attribute.
        self.readline, self.read = reader.readline, reader.read
        self.write, self.flush = writer.write, writer.flush
        self.scan = _json.make_scanner(json.decoder.JSONDecoder())  # type: ignore[arg-type]
        self.encode_str = _json.encode_basestring_ascii
        encode_str = self.encode_str

        def encode_escaped(text: str) -> str:  # protocol.escape_brackets, inlined
            return (
                encode_str(text)
                .replace("[", "\\u005b")
                .replace("]", "\\u005d")
                .replace("{", "\\u007b")
                .replace("}", "\\u007d")
            )

        self.encoder = _json.make_encoder(
            None, _unencodable, encode_escaped, None, ":", ",", False, False, True
        )
        self.submit = submit  # hands ((function, args), ...) to the main thread, which runs cells
        # What the cell before could reach: handed back to the main thread with the next
        # cell (its first runner empties it), so it is freed there, never here.
        self.graveyard: tuple[Any, ...] = ()
        self.new_lock = _thread.allocate_lock
        self.new_function = types.FunctionType
        self.getpid = os.getpid
        self.write_fd = os.write
        self.pid = os.getpid()
        self.process = (os.getpid, self.pid, os._exit)
        self.parse = (ast.Expr, ast.Expression, linecache.cache)
        self.unfrozen = guard.freeze(
            guard.kernel_classes()
        )  # for the restore plan: none on CPython
        self.gc = (gc.enable, gc.disable, gc.isenabled)
        self.gc_on = True  # what the cell wants; the loop itself runs with the gc off
        self.reap = harden.reaper()
        self.repeat, self.is_not, self.count = itertools.repeat, operator.is_not, itertools.count
        self.chain, self.values_of = itertools.chain, operator.methodcaller("values")
        self.new_dict, self.dict_update = dict.__new__, dict.update
        # The code each runner is made of (the runner itself first), over fresh globals per cell.
        self.runner_parts = tuple(
            tuple((f.__code__, f.__name__, f.__defaults__) for f in functions)
            for functions in (
                (
                    runner.run_cell,
                    protocol.format_syntax_error,
                    protocol.syntax_hint,
                    protocol.cut_middle,
                    protocol.cut_note,
                ),
                (
                    runner.finish_cell,
                    runner.plain_finding,
                    guard.restore_plan,
                    guard.internals_note,
                ),
            )
        )
        self.hide = (runner.__file__, scaffold.__file__, guard.__file__, __file__)
        self.missing = guard.MISSING
        self.read_only: Any = None
        self.files: dict[str, str] = {}
        self.output_limit = 8192
        self.scaffold: tuple[tuple[str, Any], ...] = ()
        self.plan: tuple[Any, ...] = ()
        self.ns: dict[str, Any] = {}
        self.findings: list[tuple[Any, ...]] = []
        self.pristine_builtins = dict(builtins.__dict__)
        self.restore_answer: str | None = None
        self.format_exception: Any = None
        self.stdout_class: Any = None
        self.stdout_target: list[Any] = [None]

    # -- transport (C functions only)

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(self._line(message))

    def send_line(self, line: bytes) -> None:
        self.write(line)
        self.flush()

    def _line(self, message: dict[str, Any]) -> bytes:
        return "".join(self.encoder(message, 0)).encode("ascii") + b"\n"

    def recv(self) -> dict[str, Any] | None:
        """The next well-formed message, or None at end of input (the parent is gone)."""
        while True:
            line = self.readline()
            if not line:
                return None
            try:
                msg, _end = self.scan(line.decode("ascii"), 0)
            except Exception:
                continue
            if type(msg) is not dict or type(msg.get("type")) is not str:
                continue
            if msg["type"] == "init" and type(msg.get("blob_bytes")) is int:
                msg["blob"] = self.read(msg["blob_bytes"])  # the file texts, raw UTF-8
            return msg

    # -- set-up (before any cell)

    def init(self, msg: dict[str, Any]) -> int:
        """Make the kernel's scaffold, namespace and restore plan from an ``init`` message,
        then install the audit hook; the number of files."""
        import _thread
        import threading

        options = msg.get("options") or {}
        harden.apply_limits(options.get("limits") or {})
        max_prompt_chars = int(options.get("max_prompt_chars", 1_000_000))
        self.output_limit = int(options.get("output_limit", 8192))
        payload = msg.get("payload") or {}
        files = protocol.decode_files(msg)
        rebind = guard.rebind
        # The scaffold looks builtins up in the builtins module, which is restored after each cell.
        g: dict[str, Any] = {"__builtins__": builtins.__dict__, "__name__": "deeprepo_scaffold"}
        for name in ("ERROR_PREFIX", "LLM_CHUNK_BYTES", "MAX_REQUEST_ITEMS", "MAX_LINE_BYTES"):
            g[name] = getattr(protocol, name)
        for name in scaffold.FROM_PROTOCOL:
            g[name] = rebind(getattr(protocol, name), g)
        for fn in scaffold.PUBLIC_FUNCTIONS:
            g[fn.__name__] = rebind(fn, g)
        prompt_g: dict[str, Any] = {
            "__builtins__": g["__builtins__"],
            "__name__": "deeprepo_prompts",
        }
        for name, value in vars(prompts).items():
            if isinstance(value, str) and name.isupper():
                prompt_g[name] = value
        for name in ("number_lines", "quote_path", "render_file_block", "file_audit_prompt"):
            prompt_g[name] = rebind(getattr(prompts, name), prompt_g)
        g["_TextIOBase"] = io.TextIOBase.__mro__[1]  # _io._TextIOBase: a C type
        read_only, stdout_class = g["_scaffold_classes"]()
        codebase = read_only(files)
        g.update(
            _findings=self.findings,
            _files=types.MappingProxyType(files),
            _readline=self.readline,
            _write=self.write,
            _flush=self.flush,
            _lock=threading.Lock(),
            _ids=self.count(1),
            _calls=self.count(1),
            _pid=self.pid,
            _max_prompt_chars=max_prompt_chars,
            _stdout_target=self.stdout_target,
            _encode_str=self.encode_str,
            _scan=self.scan,
            _audit_prompt=prompt_g["file_audit_prompt"],
            os_getpid=self.getpid,
            os_exit=self.process[2],
        )
        self.stdout_class = stdout_class
        self.read_only, self.files = read_only, files
        scaffold_objects = {
            "llm_query": g["llm_query"],
            "llm_batch": g["llm_batch"],
            "add_finding": g["add_finding"],
            "set_answer": g["set_answer"],
            "file_audit_prompt": g["file_audit_prompt"],
            "codebase": codebase,
            "file_tree": str(payload.get("file_tree") or ""),
            "metadata": payload.get("metadata") or {},
        }
        self.scaffold = tuple(scaffold_objects.items())
        self.ns = {"__name__": "__main__", "__builtins__": builtins, **scaffold_objects}
        self.ns["answer"] = {"content": "", "ready": False}
        g["_ns"] = self.ns
        fe_g: dict[str, Any] = {
            "__builtins__": g["__builtins__"],
            "traceback": sys.modules["traceback"],
        }
        fe_g.update(
            os=os, __file__=protocol.__file__, _drop_frames=rebind(protocol._drop_frames, fe_g)
        )
        self.format_exception = rebind(protocol.format_exception, fe_g)
        self.plan, protected = guard.make_plan(
            [("scaffold", g), ("prompts", prompt_g), ("traceback", fe_g)],
            [("codebase", read_only), ("sys.stdout", stdout_class), *self.unfrozen],
        )
        protected.add(id(self.format_exception))
        # Last: from here on the hook refuses new hooks, and it keeps a frozen copy of the ids.
        hook = self.new_function(
            guard.audit_hook.__code__,
            {
                "__builtins__": dict(self.pristine_builtins),
                "BLOCKED_EVENTS": guard.BLOCKED_EVENTS,
                "FRAME_ATTRS": guard.FRAME_ATTRS,
            },
        )
        sys.addaudithook(hook(_thread.get_ident(), _thread.get_ident, frozenset(protected)))
        return len(codebase)

    # -- cells

    def run_cell(self, cell_id: int, code: str) -> bytes:
        """Have the main thread run one cell, then finish it; the result line.

        Both runners are handed over at once, and the main thread takes the second only once
        the first has returned: the cell cannot reach the queue or the pair (they live on the
        main thread's value stack, not in any frame's locals), so it never sees the second
        runner, its globals or its lock, and this thread waits for that lock alone.
        """
        run, finish = self._runner(self.runner_parts[0]), self._runner(self.runner_parts[1])
        box1: list[Any] = []
        box2: list[Any] = []
        done = self.new_lock()
        done.acquire()
        # Each cell gets a fresh copy of ``codebase`` (a dict copy, C-level: no class method
        # runs): a copy one cell changed through dict.__setitem__ is not what the next sees.
        codebase = self.new_dict(self.read_only)
        self.dict_update(codebase, self.files)
        scaffold_objects = tuple((n, codebase if n == "codebase" else o) for n, o in self.scaffold)
        sink: tuple[Any, ...] = (
            self.stdout_class, self.output_limit, [], [], [0, 0, 0], self.findings,
        )  # fmt: skip
        env1 = (
            sink, self.stdout_target, self.restore_answer, self.process, self.format_exception,
            self.hide, codebase, self.parse, (self.gc_on, self.gc[0]),
        )  # fmt: skip
        kept: list[Any] = []  # what the finishing runner replaces: freed after the next cell
        env2 = (
            scaffold_objects, sink, self.stdout_target, outcome.MAX_FINDINGS_PER_CELL,
            self.gc[1:], kept,
        )  # fmt: skip
        source = (code, f"<cell-{cell_id}>")
        # The cell before's objects go in a list the main thread empties: the loop's own
        # reference to them must not be the last (the batch may be gone before this returns).
        graveyard, self.graveyard = [self.graveyard], ()
        first = (run, (self.ns, source, box1, env1, graveyard))
        second = (finish, (self.plan, self.ns, box2, done, env2))
        self.submit((first, second))
        done.acquire()
        self.gc[1]()  # off, even if something of the cell's turned it on again
        items = [*box1, *box2]
        self.graveyard = (run, finish, box1, box2, env1, env2, second, items)
        result, syntax, self.gc_on = outcome.read(cell_id, items)
        if not syntax:
            self.restore_answer = None  # the cell ran: it was put back in its namespace
        try:
            self.write_fd(1, protocol.CELL_END_MARK % cell_id)
        except OSError:
            result["mark"] = False
        return outcome.fit(result, self._line)

    def _runner(self, parts: tuple[tuple[Any, ...], ...]) -> Any:
        """A runner made afresh over globals of its own, and the functions it calls."""
        g: dict[str, Any] = {
            "__builtins__": dict(self.pristine_builtins),
            "MISSING": self.missing,
            "sys": sys,
            "is_not": self.is_not,
            "repeat": self.repeat,
            "chain": self.chain,
            "values_of": self.values_of,
        }
        for code_obj, name, defaults in parts:
            g[name] = self.new_function(code_obj, g, name, defaults)
        return g[parts[0][1]]


def _unencodable(value: object) -> Any:
    raise TypeError("the kernel only sends plain values")


def serve(rfd: int, wfd: int, submit: Any) -> None:
    """The kernel's message loop, in a thread of its own (call it from a private copy of this
    module); the main thread runs each ``(function, args)`` of the tuples it is handed through
    ``submit``, in order. ``None`` ends it."""
    try:
        _serve(rfd, wfd, submit)
    finally:
        submit(None)


def _serve(rfd: int, wfd: int, submit: Any) -> None:
    import gc

    gc.disable()  # the runner turns it on for each cell, and off before this thread goes on
    kernel = KernelLoop(rfd, wfd, submit)
    close = os.close

    def after_fork() -> None:
        # A forked copy of the kernel must never speak on the parent's pipes.
        for fd in (rfd, wfd):
            try:
                close(fd)
            except OSError:
                pass

    os.register_at_fork(after_in_child=after_fork)
    kernel.send({"type": "ready", "pid": kernel.pid})
    while True:
        msg = kernel.recv()
        if msg is None or msg["type"] == "shutdown":
            return
        kind = msg["type"]
        if kind == "init":
            try:
                files = kernel.init(msg)
            except MemoryError:
                kernel.send(
                    {
                        "type": "init_error",
                        "message": "the codebase does not fit in memory_limit_mb",
                    }
                )
                continue
            kernel.send({"type": "init_ok", "files": files})
        elif kind == "exec":
            code, cell_id = msg.get("code"), msg.get("id")
            if type(code) is str and type(cell_id) is int:
                kernel.reap()  # zombies of the processes the parent stopped after the last cell
                # The leading newline ends whatever partial line the cell left on the pipe.
                kernel.send_line(b"\n" + kernel.run_cell(cell_id, code))
        elif kind == "restore_answer":
            # A restarted kernel keeps the answer text the previous one had.
            content = msg.get("content")
            if type(content) is str:
                kernel.restore_answer = content
