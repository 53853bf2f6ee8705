"""The kernel's child process: runs root-model code in one persistent namespace.

Started by the parent as ``python -s -P -S child.py RFD WFD`` with an allow-listed
environment (stdlib only, no site-packages, no deeprepo import): RFD/WFD are the RPC
pipes (see ``protocol.py``); fd 0 is /dev/null and fds 1/2 go to a pipe the parent drains, so
nothing the cell writes can reach the RPC stream. The child trusts its parent and
nothing else: the limits are applied before any cell runs, and every message it
sends is checked again by the parent.

Integrity. A cell reaches every object its namespace holds and all those objects reach:
a function's ``__globals__``, closure and defaults, a class's dict, every module through
``sys.modules``. So three worlds are kept apart:

- the *loop* (reading messages, building results) runs from a private copy of this file:
  its globals are a dict nothing public refers to, with its own copy of the builtins, and
  it calls C functions captured before any cell ran (JSON, pipe I/O), in a thread of its
  own. It never calls code a cell wrote on its way: every cell runs in the main thread,
  whose stack holds nothing of the loop's, through a *runner* made afresh for that cell,
  which hands the loop plain ``str``/``int``/``tuple`` values only;
- the *scaffold* (``llm_query``, ``llm_batch``, ``add_finding``, ``set_answer``,
  ``file_audit_prompt``, the ``codebase`` and ``sys.stdout`` classes) is plain functions
  and classes over globals of their own;
- after every cell the runner puts back, as they were before the first cell, every
  scaffold object (code, defaults, globals, class dicts), the builtins, the ``json``,
  ``traceback`` and ``linecache`` modules, and the recursion limit, naming what it restored.

An audit hook refuses the routes from a cell to the loop's objects (``sys._current_frames``,
the ``gc`` referrer walks, frames seen from the loop's thread) and new audit hooks. What
stays open (ctypes, ``/proc/self/mem``, a thread a cell leaves running) is in
docs/security.md; what any message claims is bounded again by the parent.
"""

from __future__ import annotations

import builtins
import faulthandler
import io
import os
import sys
import types
from collections.abc import Iterable
from itertools import repeat
from operator import is_not
from typing import TYPE_CHECKING, Any

_HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL_PATH = os.path.join(_HERE, "protocol.py")
PROMPTS_PATH = os.path.join(os.path.dirname(_HERE), "base", "prompts.py")
HARDEN_PATH = os.path.join(_HERE, "harden.py")  # process isolation: cgroup, nobody, seccomp
SCAFFOLD = (
    "llm_query",
    "llm_batch",
    "add_finding",
    "set_answer",
    "file_audit_prompt",
    "codebase",
    "file_tree",
    "metadata",
)
MAX_NAME_CHARS = 80  # a variable name in a result (a cell can make names of megabytes)
MAX_FINDINGS_PER_CELL = 2000  # the parent keeps 1,000 a cell; a message stays under MAX_CONTAINERS
_WATCHED_MODULES = (
    "builtins",
    "json",
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "traceback",
    "linecache",
)


def load_source(path: str, name: str, builtins_dict: dict[str, Any]) -> types.ModuleType:
    """Run one file as a module that ``sys.modules`` does not list (a cell cannot find it)."""
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = builtins_dict
    module.__dict__["__file__"] = path
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    exec(code, module.__dict__)
    return module


if TYPE_CHECKING:
    from deeprepo.sandbox import protocol
else:
    protocol = None  # the loop's private copy, loaded by serve()


# ---------------------------------------------------------------- the scaffold (public world)
#
# These functions run with a globals dict of their own (``_scaffold_globals``); the names
# below the line are set there per kernel. At module level they are placeholders, so the
# code type-checks and the classes can be imported by tests.

_MISSING = object()
_findings: list[tuple[Any, ...]] = []
_files: Any = {}
_ns: dict[str, Any] = {}
_reader: Any = None
_writer: Any = None
_lock: Any = None
_ids: Any = None
_calls: Any = None  # numbers llm_query/llm_batch calls: a call's requests share its number
_pid = 0
_max_prompt_chars = 1_000_000
_stdout_target: list[Any] = []
_encode_str: Any = None
_scan: Any = None
_audit_prompt: Any = None
_TextIOBase = io.TextIOBase  # the scaffold gets _io._TextIOBase, a C type a cell cannot patch
ERROR_PREFIX = "[llm error]"
BRACKETS: tuple[str, ...] = ()
LLM_CHUNK_BYTES = 4 * 1024 * 1024
MAX_REQUEST_ITEMS = 10_000
MAX_LINE_BYTES = 8 * 1024 * 1024


def prompt_error(index: int, item: object, max_chars: int) -> str | None:  # rebound from protocol
    raise NotImplementedError


def system_error(system: object, max_chars: int) -> str | None:  # rebound from protocol
    raise NotImplementedError


def oversized_error(index: int, size: int, max_bytes: int) -> str:  # rebound from protocol
    raise NotImplementedError


def chunk_by_size(sizes: list[int], max_size: int, max_items: int = 0) -> list[list[int]]:
    raise NotImplementedError  # rebound from protocol


def _rpc(
    prompts: list[bytes], system: str | None, call: tuple[str, int, int]
) -> tuple[list[str], int, str]:
    """Send one request; ``(answers, refused, error)`` from the parent's reply. ``call`` is
    ``(api, number, size)`` of the llm_query/llm_batch call it serves (behaviour metrics)."""
    if os_getpid() != _pid:
        raise RuntimeError(
            "llm_query/llm_batch work only in the kernel process, not in a forked child"
        )
    with _lock:
        call_id = next(_ids)
        # The leading newline ends whatever partial line a cell left on the pipe.
        head = b'\n{"type":"llm","id":%d,"api":"%s","call":%d,"size":%d,"system":%s,"prompts":[' % (
            call_id,
            b"query" if call[0] == "query" else b"batch",
            call[1],
            call[2],
            b"null" if system is None else _encode_str(system).translate(BRACKETS).encode("ascii"),
        )
        _writer.write(head + b",".join(prompts) + b"]}\n")
        _writer.flush()
        while True:
            line = _reader.readline()
            if not line:
                os_exit(0)
            try:
                msg, _end = _scan(line.decode("ascii", "replace"), 0)
            except Exception:
                continue
            if type(msg) is not dict or msg.get("type") != "llm_result" or msg.get("id") != call_id:
                continue
            results = msg.get("results")
            refused = msg.get("refused")
            error = msg.get("error")
            if type(results) is not list or len(results) + (
                refused if type(refused) is int else 0
            ) != len(prompts):
                bad = f"{ERROR_PREFIX} the parent sent a malformed reply"
                return [bad] * len(prompts), 0, bad
            return (
                [r if type(r) is str else str(r) for r in results],
                refused if type(refused) is int else 0,
                error if type(error) is str else f"{ERROR_PREFIX} not sent",
            )


def llm_batch(prompts: Iterable[str], system: str | None = None) -> list[str]:
    """Ask sub-LLM workers, in parallel, one answer per prompt; a failed item is an error string."""
    return _batch(prompts, system, "batch")


def _batch(prompts: Iterable[str], system: str | None, api: str) -> list[str]:
    if isinstance(prompts, (str, bytes)):
        raise TypeError(
            "llm_batch takes a list of prompts; for a single prompt use llm_query(prompt)"
        )
    try:
        items = list(prompts)
    except TypeError:
        raise TypeError(
            f"llm_batch takes a list of prompt strings, not {type(prompts).__name__}"
        ) from None
    bad_system = system_error(system, _max_prompt_chars)
    if bad_system is not None:
        return [bad_system] * len(items)
    # Prompts are checked and encoded one request at a time: once the parent refuses a
    # request (the sub-call budget is spent), the rest would be refused too, so they are
    # neither encoded nor sent, and a batch of millions ends in the time of one request.
    results: list[str | None] = [None] * len(items)
    call = (api, next(_calls), len(items))
    limit = MAX_LINE_BYTES - 4096 - (0 if system is None else 6 * len(system))
    refused_total = 0
    refusal = ""
    idx: list[int] = []
    encoded: list[bytes] = []
    size = 0
    i = 0
    while i < len(items) or idx:
        if i < len(items) and len(idx) < MAX_REQUEST_ITEMS:
            error = prompt_error(i, items[i], _max_prompt_chars)
            if error is None:
                text = _encode_str(str.__str__(items[i])).translate(BRACKETS).encode("ascii")
                if len(text) > limit:
                    error = oversized_error(i, len(text), limit)
                elif not idx or size + len(text) + 1 <= LLM_CHUNK_BYTES:
                    idx.append(i)
                    encoded.append(text)
                    size += len(text) + 1
                    i += 1
                    continue
                else:  # this prompt starts the next request
                    error = None
            if error is not None:
                results[i] = error
                i += 1
                continue
        answers, refused, error = _rpc(encoded, system, call)
        for j, answer in zip(idx, answers, strict=False):
            results[j] = answer
        if refused:
            refusal = error
            rest = idx[len(answers) :] + [j for j in range(i, len(items))]
            for j in rest:
                results[j] = refusal
            refused_total = len(rest)
            break
        idx, encoded, size = [], [], 0
    if refused_total:
        _stdout_target[0].write(
            f"[deeprepo] llm_batch: {refused_total:,} of {len(items):,} prompts were not sent; "
            f"their results hold this error: {refusal}\n"
        )
    return [r if r is not None else "" for r in results]


def llm_query(prompt: str, *, system: str | None = None) -> str:
    """Ask one sub-LLM worker; returns its answer (or an error string)."""
    return _batch([prompt], system, "query")[0]


def add_finding(
    file: str,
    line: int,
    kind: str,
    severity: str,
    title: str,
    detail: str = "",
    fix: str = "",
    cwe: str | None = None,
    end_line: int | None = None,
) -> None:
    """Record one finding: file, 1-based line (and optional end_line), kind, severity,
    title, detail, fix, CWE."""
    try:
        line_no = int(line)
        end_no = line_no if end_line is None else max(line_no, int(end_line))
    except (TypeError, ValueError):
        raise ValueError(
            f"add_finding: line and end_line must be ints, not {line!r}, {end_line!r}"
        ) from None
    file_s = str.__str__(str(file)).removeprefix("./")
    if file_s not in _files:
        _stdout_target[0].write(
            f"[deeprepo] note: add_finding: {file_s[:200]!r} is not a file in codebase (recorded anyway)\n"
        )
    fields = (str(kind), str(severity), str(title), str(detail), str(fix))
    _findings.append(
        (
            file_s,
            int.__index__(line_no),
            int.__index__(end_no),
            *(str.__str__(f) for f in fields),
            None if cwe is None else str.__str__(str(cwe)),
        )
    )


def set_answer(text: str) -> None:
    """Set the final report and mark it ready: the run ends after this cell."""
    answer = _ns.get("answer")
    if type(answer) is not dict:
        answer = _ns["answer"] = {}
    answer["content"] = str.__str__(text if isinstance(text, str) else str(text))
    answer["ready"] = True


def file_audit_prompt(path: str, start_line: int = 1, end_line: int | None = None) -> str:
    """The standard worker prompt for ``codebase[path]`` (or lines start_line..end_line)."""
    if path not in _files:
        raise KeyError(
            f"file_audit_prompt: {path!r} is not in codebase; see file_tree or list(codebase)"
        )
    content = _files[path]
    if start_line != 1 or end_line is not None:
        start_line = max(1, int(start_line))
        lines = content.split("\n")
        content = "\n".join(lines[start_line - 1 : None if end_line is None else int(end_line)])
    result: str = _audit_prompt(path, content, start_line)
    return result


def os_getpid() -> int:  # the kernel's os.getpid, captured before any cell ran
    raise NotImplementedError


def os_exit(code: int) -> None:  # the kernel's os._exit
    raise NotImplementedError


def _scaffold_classes() -> tuple[type[dict[str, str]], type[Any]]:
    """The two classes a cell reaches (``type(codebase)``, ``type(sys.stdout)``)."""

    class ReadOnlyDict(dict[str, str]):
        """``codebase``: a real dict (json, isinstance work) that refuses in-place changes."""

        def _refuse(self, *args: object, **kwargs: object) -> Any:
            raise TypeError(
                "codebase is read-only (it is the repository as loaded); copy it first: files = dict(codebase)"
            )

        __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

        def copy(self) -> dict[str, str]:
            return dict(self)

        def __copy__(self) -> dict[str, str]:
            return dict(self)

        def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, str]:
            return dict(self)

        def __reduce__(self) -> tuple[Any, ...]:
            return (dict, (dict(self),))

    class Stdout(_TextIOBase):
        """sys.stdout and sys.stderr in a cell: keeps the head and the tail of what is written,
        in lists the kernel reads itself."""

        def __init__(self, limit: int, head: list[str], tail: list[str], counts: list[int]) -> None:
            super().__init__()
            self._half = max(0, limit) // 2
            self._tail_cap = max(0, limit) - self._half
            self._head, self._tail, self._counts = head, tail, counts  # total, head, tail

        def writable(self) -> bool:
            return True

        def isatty(self) -> bool:
            return False

        @property
        def encoding(self) -> str:  # type: ignore[override]
            return "utf-8"

        def write(self, s: str) -> int:
            if not isinstance(s, str):
                raise TypeError(f"write() argument must be str, not {type(s).__name__}")
            s = str.__str__(s)
            n = len(s)
            counts = self._counts
            counts[0] += n
            room = self._half - counts[1]
            if room > 0:
                take = s[:room]
                self._head.append(take)
                counts[1] += len(take)
                s = s[len(take) :]
                if not s:
                    return n
            cap = self._tail_cap
            if cap <= 0:
                return n
            if len(s) >= cap:
                self._tail[:] = [s[-cap:]]
                counts[2] = cap
                return n
            self._tail.append(s)
            counts[2] += len(s)
            if counts[2] > 2 * cap or len(self._tail) > 4096:
                joined = "".join(self._tail)[-cap:]
                self._tail[:] = [joined]
                counts[2] = len(joined)
            return n

    return ReadOnlyDict, Stdout


ReadOnlyDict, _Stdout = _scaffold_classes()
_PUBLIC_FUNCTIONS = (
    _rpc,
    _batch,
    llm_batch,
    llm_query,
    add_finding,
    set_answer,
    file_audit_prompt,
    _scaffold_classes,
)
_FROM_PROTOCOL = (
    "prompt_error",
    "system_error",
    "oversized_error",
    "chunk_by_size",
    "cut_middle",
    "cut_note",
)


# ---------------------------------------------------------------- the runner (one per cell)


def _run_cell(
    plan: tuple[Any, ...],
    ns: dict[str, Any],
    code: Any,
    last: Any,
    box: list[Any],
    done: Any,
    env: tuple[Any, ...],
) -> None:
    """Runs in the cell's thread, made afresh for each cell: restore, run, collect.

    Everything that touches objects the cell made happens here, so the loop's thread
    does not run the cell's code (a ``__repr__``, ``__eq__``) on its way.
    """
    (
        scaffold,
        sink,
        target,
        restore_answer,
        getpid,
        pid,
        exit_,
        format_exception,
        hide,
        codebase,
    ) = env
    try:
        ns["codebase"] = codebase
        stdout = sink[0](*sink[1:])
        target[0] = stdout
        sys.stdout = sys.stderr = stdout
        if restore_answer is not None:
            ns["answer"] = {"content": restore_answer, "ready": False}
        error = None
        try:
            exec(code, ns)
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
        sys.stdout = sys.stderr = stdout
        changed = _restore_plan(plan)
        if changed:
            stdout.write(_internals_note(changed))
        restored: list[str] = []
        for name, obj in scaffold:
            if ns.get(name, _MISSING) is not obj:
                ns[name] = obj
                restored.append(name)
        answer = ns.get("answer", _MISSING)
        content: object = ""
        ready = False
        if type(answer) is dict:
            content = dict.get(answer, "content", _MISSING)
            flag = dict.get(answer, "ready", _MISSING)
            ready = flag is True or (type(flag) is int and flag != 0)
            if content is _MISSING or flag is _MISSING:
                ns["answer"] = {"content": content if type(content) is str else "", "ready": False}
                restored.append("answer")
                ready = False
        else:
            if isinstance(answer, dict):
                content = dict.get(answer, "content", "")
            elif type(answer) is str:
                content = answer
            ns["answer"] = {"content": content if type(content) is str else "", "ready": False}
            restored.append("answer")
        if type(content) is not str:
            content = "" if content is None or content is _MISSING else str.__str__(str(content))
        user_vars = tuple(
            k for k in ns if type(k) is str and not (k.startswith("__") and k.endswith("__"))
        )
        box.append(("ok", error, tuple(restored), (content, ready is True), user_vars))
    except BaseException as exc:
        box.append(
            (
                "error",
                f"[deeprepo] the kernel could not read the cell's state: {type(exc).__name__}\n",
            )
        )
    finally:
        done.release()


def _internals_note(names: list[str]) -> str:
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return (
        f"[deeprepo] this cell changed kernel internals ({shown}); they were put back as they "
        "were, so later cells run with the originals.\n"
    )


def _restore_plan(plan: tuple[Any, ...]) -> list[str]:
    """Put back every object of ``plan`` as it was before the first cell; what changed."""
    fast, lookups, limit, entries = plan
    for d, size, last, values in fast:
        if len(d) != size or next(reversed(d), _MISSING) is not last:
            break
        if any(map(is_not, d.values(), values)):  # identity, in C: no __eq__ of the cell's runs
            break
    else:
        modules_same = not any(
            map(is_not, map(dict.get, *lookups[:2], repeat(_MISSING)), lookups[2])
        )
        if modules_same and limit[0]() == limit[1]:
            return []  # nothing changed: the common case
    changed: list[str] = []
    for entry in entries:
        kind = entry[0]
        if kind == "dict":
            _, label, d, keys, values = entry
            if len(d) != len(keys) or any(map(is_not, map(d.get, keys, repeat(_MISSING)), values)):
                key_set = set(keys)
                for k in [k for k in d if type(k) is not str or k not in key_set]:
                    del d[k]
                    changed.append(f"{label}.{k}" if type(k) is str else label)
                for k, v in zip(keys, values, strict=True):
                    if d.get(k, _MISSING) is not v:
                        d[k] = v
                        changed.append(f"{label}.{k}")
        elif kind == "class":
            _, label, cls, keys, values = entry
            d = cls.__dict__
            if len(d) != len(keys) or any(map(is_not, map(d.get, keys, repeat(_MISSING)), values)):
                key_set = set(keys)
                for k in [k for k in d if k not in key_set]:
                    delattr(cls, k)
                for k, v in zip(keys, values, strict=True):
                    if d.get(k, _MISSING) is not v:
                        setattr(cls, k, v)
                changed.append(label)
        elif kind == "kwdefaults":
            _, label, d, items = entry
            same = len(d) == len(items) and all(
                k in d and dict.get(d, k, _MISSING) is v for k, v in items
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


# ---------------------------------------------------------------- the loop (private world)


class _Kernel:
    """The loop's state. Only ``serve`` (run from a private copy of this file) makes one."""

    def __init__(self, rfd: int, wfd: int, submit: Any) -> None:
        import _json
        import _thread
        import ast
        import itertools
        import json.decoder
        import linecache
        import operator

        self.reader = io.open(rfd, "rb")  # noqa: SIM115, UP020 - C objects: nothing a cell can patch
        self.writer = io.open(wfd, "wb")  # noqa: SIM115, UP020
        self.scan = _json.make_scanner(json.decoder.JSONDecoder())  # type: ignore[arg-type]
        self.encode_str = _json.encode_basestring_ascii
        brackets = protocol.BRACKETS
        encode_str = self.encode_str

        def encode_escaped(text: str) -> str:
            return encode_str(text).translate(brackets)

        self.encoder = _json.make_encoder(
            None, _unencodable, encode_escaped, None, ":", ",", False, False, True
        )
        self.submit = submit  # hands (function, args) to the main thread, which runs cells
        self.new_lock = _thread.allocate_lock
        self.getpid = os.getpid
        self.exit = os._exit
        self.write_fd = os.write
        self.pid = os.getpid()
        self.ast_expr, self.ast_expression = ast.Expr, ast.Expression
        self.line_cache = linecache.cache
        self.repeat, self.is_not, self.count = itertools.repeat, operator.is_not, itertools.count
        self.new_dict, self.dict_update = dict.__new__, dict.update
        self.read_only: Any = None
        self.files: dict[str, str] = {}
        self.output_limit = 8192
        self.scaffold: tuple[tuple[str, Any], ...] = ()
        self.plan: tuple[Any, ...] = ()
        self.protected: set[int] = set()
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
        self.writer.write(line)
        self.writer.flush()

    def _line(self, message: dict[str, Any]) -> bytes:
        return "".join(self.encoder(message, 0)).encode("ascii") + b"\n"

    def recv(self) -> dict[str, Any] | None:
        """The next well-formed message, or None at end of input (the parent is gone)."""
        while True:
            line = self.reader.readline()
            if not line:
                return None
            try:
                msg, _end = self.scan(line.decode("ascii"), 0)
            except Exception:
                continue
            if type(msg) is not dict or type(msg.get("type")) is not str:
                continue
            if msg["type"] == "init" and type(msg.get("blob_bytes")) is int:
                msg["blob"] = self.reader.read(msg["blob_bytes"])  # the file texts, raw UTF-8
            return msg

    # -- set-up

    def init(self, msg: dict[str, Any], prompts: types.ModuleType) -> int:
        import threading

        options = msg.get("options") or {}
        apply_limits(options.get("limits") or {})
        max_prompt_chars = int(options.get("max_prompt_chars", 1_000_000))
        self.output_limit = int(options.get("output_limit", 8192))
        payload = msg.get("payload") or {}
        files = protocol.decode_files(msg)
        # The scaffold looks builtins up in the builtins module, which is restored after each cell.
        g: dict[str, Any] = {"__builtins__": builtins.__dict__, "__name__": "deeprepo_scaffold"}
        for name in (
            "ERROR_PREFIX",
            "LLM_CHUNK_BYTES",
            "MAX_REQUEST_ITEMS",
            "MAX_LINE_BYTES",
            "BRACKETS",
        ):
            g[name] = getattr(protocol, name)
        for name in _FROM_PROTOCOL:
            g[name] = _rebind(getattr(protocol, name), g)
        for fn in _PUBLIC_FUNCTIONS:
            g[fn.__name__] = _rebind(fn, g)
        prompt_g: dict[str, Any] = {
            "__builtins__": g["__builtins__"],
            "__name__": "deeprepo_prompts",
        }
        for name, value in vars(prompts).items():
            if isinstance(value, str) and name.isupper():
                prompt_g[name] = value
        for name in ("number_lines", "render_file_block", "file_audit_prompt"):
            prompt_g[name] = _rebind(getattr(prompts, name), prompt_g)
        g["_TextIOBase"] = io.TextIOBase.__mro__[1]  # _io._TextIOBase: a C type
        read_only, stdout_class = g["_scaffold_classes"]()
        codebase = read_only(files)
        g.update(
            _MISSING=_MISSING,
            _findings=self.findings,
            _files=types.MappingProxyType(files),
            _reader=self.reader,
            _writer=self.writer,
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
            os_exit=self.exit,
        )
        self.stdout_class = stdout_class
        self.read_only, self.files = read_only, files
        scaffold = {
            "llm_query": g["llm_query"],
            "llm_batch": g["llm_batch"],
            "add_finding": g["add_finding"],
            "set_answer": g["set_answer"],
            "file_audit_prompt": g["file_audit_prompt"],
            "codebase": codebase,
            "file_tree": str(payload.get("file_tree") or ""),
            "metadata": payload.get("metadata") or {},
        }
        self.scaffold = tuple(scaffold.items())
        self.ns = {"__name__": "__main__", "__builtins__": builtins, **scaffold}
        self.ns["answer"] = {"content": "", "ready": False}
        g["_ns"] = self.ns
        fe_g: dict[str, Any] = {
            "__builtins__": g["__builtins__"],
            "traceback": sys.modules["traceback"],
        }
        fe_g.update(
            os=os, __file__=PROTOCOL_PATH, _drop_frames=_rebind(protocol._drop_frames, fe_g)
        )
        self.format_exception = _rebind(protocol.format_exception, fe_g)
        self.plan, protected = _make_plan(
            [("scaffold", g), ("prompts", prompt_g), ("traceback", fe_g)],
            [("codebase", read_only), ("sys.stdout", stdout_class)],
        )
        self.protected.update(protected, (id(self.format_exception),))
        return len(codebase)

    # -- cells

    def run_cell(self, cell_id: int, code: str) -> bytes:
        """Run one cell; the result message as a line."""
        head: list[str] = []
        tail: list[str] = []
        counts = [0, 0, 0]
        notes: list[str] = []
        self.findings.clear()
        filename = f"<cell-{cell_id}>"
        error: str | None = None
        state: tuple[Any, ...] = ()
        try:
            tree: Any = compile(code, filename, "exec", 0x400)  # ast.PyCF_ONLY_AST
        except (SyntaxError, ValueError) as exc:
            head.append(
                protocol.cut_middle(protocol.format_syntax_error(exc, code), self.output_limit)
            )
            counts[:] = [len(head[0])] * 2 + [0]
            error = "syntax"
        except (RecursionError, MemoryError) as exc:  # absurdly nested code
            head.append(
                f"SyntaxError: the cell is too deeply nested to parse ({type(exc).__name__})\n"
            )
            counts[:] = [len(head[0])] * 2 + [0]
            error = "syntax"
        else:
            self.line_cache[filename] = (len(code), None, code.splitlines(True), filename)
            last = None
            if tree.body and type(tree.body[-1]) is self.ast_expr:
                # Like a notebook, the value of a final expression is shown.
                last = compile(self.ast_expression(tree.body.pop().value), filename, "eval")
            body = compile(tree, filename, "exec")
            state = self._run(
                body, last, (self.stdout_class, self.output_limit, head, tail, counts), notes
            )
            if state:
                error = state[1] if state[1] == "exception" else None
        mark = True
        try:
            self.write_fd(1, protocol.CELL_END_MARK % cell_id)
        except OSError:
            mark = False
        return self._result(cell_id, error, state, (head, tail, counts), notes, mark)

    def _run(
        self, body: Any, last: Any, sink: tuple[Any, ...], notes: list[str]
    ) -> tuple[Any, ...]:
        """Run the cell in a thread of its own, through a runner made for it; its state."""
        g: dict[str, Any] = {
            "__builtins__": dict(self.pristine_builtins),
            "_MISSING": _MISSING,
            "sys": sys,
        }
        g.update(is_not=self.is_not, repeat=self.repeat)
        for fn in (_restore_plan, _internals_note):
            g[fn.__name__] = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__)
        runner = types.FunctionType(_run_cell.__code__, g)
        box: list[Any] = []
        done = self.new_lock()
        done.acquire()
        # Each cell gets a fresh copy of ``codebase`` (a dict copy, C-level: no class method
        # runs): a copy one cell changed through dict.__setitem__ is not what the next sees.
        codebase = self.new_dict(self.read_only)
        self.dict_update(codebase, self.files)
        scaffold = tuple((n, codebase if n == "codebase" else o) for n, o in self.scaffold)
        env = (
            scaffold, sink, self.stdout_target, self.restore_answer, self.getpid, self.pid,
            self.exit, self.format_exception, (os.path.abspath(__file__),), codebase,
        )  # fmt: skip
        self.restore_answer = None
        self.submit((runner, (self.plan, self.ns, body, last, box, done, env)))
        done.acquire()
        state: tuple[Any, ...] = ()
        for item in list(box):
            if type(item) is not tuple or not item:
                continue
            if item[0] == "ok" and len(item) == 5 and not state:
                state = item
            elif item[0] == "error" and len(item) == 2 and type(item[1]) is str:
                notes.append(item[1][:500])
        return state

    def _result(
        self,
        cell_id: int,
        error: str | None,
        state: tuple[Any, ...],
        sink: tuple[list[str], list[str], list[int]],
        notes: list[str],
        mark: bool,
    ) -> bytes:
        head, tail, counts = sink
        limit = self.output_limit
        half, tail_cap = limit // 2, limit - limit // 2
        head_text = "".join([s for s in list(head) if type(s) is str])[:half]
        tail_text = (
            "".join([s for s in list(tail) if type(s) is str])[-tail_cap:] if tail_cap else ""
        )
        total = counts[0] if counts and type(counts[0]) is int else 0
        cut = total - len(head_text) - len(tail_text)
        output = (
            head_text + protocol.cut_note(cut) + tail_text if cut > 0 else head_text + tail_text
        )
        output += "".join(notes)
        restored: list[str] = []
        answer = {"content": "", "ready": False}
        user_vars: list[str] = []
        if state:
            restored = [n for n in state[2] if type(n) is str and (n in SCAFFOLD or n == "answer")]
            pair = state[3]
            if type(pair) is tuple and len(pair) == 2 and type(pair[0]) is str:
                answer = {"content": pair[0], "ready": pair[1] is True}
            names = sorted(
                n[:MAX_NAME_CHARS]
                for n in (state[4] if type(state[4]) is tuple else ())
                if type(n) is str and n not in SCAFFOLD and n != "answer"
            )
            if len(names) > protocol.MAX_USER_VARS:
                more = len(names) - protocol.MAX_USER_VARS
                names = [*names[: protocol.MAX_USER_VARS], f"... and {more} more"]
            user_vars = names
        recorded = list(self.findings)
        self.findings.clear()
        findings = [f for f in map(_finding, recorded[:MAX_FINDINGS_PER_CELL]) if f is not None]
        if len(recorded) > MAX_FINDINGS_PER_CELL:
            output += (
                f"[deeprepo] this cell recorded {len(recorded):,} findings; only the first "
                f"{MAX_FINDINGS_PER_CELL:,} were kept.\n"
            )
        result = {
            "type": "result",
            "id": cell_id,
            "output": output,
            "error": error,
            "answer": answer,
            "findings": findings,
            "restored": restored,
            "user_vars": user_vars,
            "mark": mark,
        }
        return self._fit(result)

    def _fit(self, result: dict[str, Any]) -> bytes:
        """The result as one line the parent accepts: findings, then the answer's end and the
        output's middle dropped while it is too long, with a note."""
        max_bytes = protocol.MAX_LINE_BYTES // 2
        line = self._line(result)
        if len(line) <= max_bytes:
            return line
        notes: list[str] = []
        findings = list(result["findings"])
        while len(line) > max_bytes and findings:
            keep = len(findings) // 2
            notes.append(f"{len(findings) - keep} findings")
            findings = findings[:keep]
            line = self._line({**result, "findings": findings})
        answer = dict(result["answer"])
        if len(line) > max_bytes and len(answer["content"]) > max_bytes // 16:
            answer["content"] = answer["content"][: max_bytes // 16]
            notes.append("the end of the answer")
        output = result["output"]
        if len(line) > max_bytes and len(output) > max_bytes // 16:
            output = protocol.cut_middle(output, max_bytes // 16)
            notes.append("the middle of the output")
        output += f"[deeprepo] the cell's result was too large; dropped: {', '.join(notes)}.\n"
        return self._line({**result, "findings": findings, "answer": answer, "output": output})


def _finding(f: object) -> dict[str, Any] | None:
    """One recorded finding as plain values, or None if it is not what add_finding records."""
    if type(f) is not tuple or len(f) != 9:
        return None
    file, line, end_line, kind, severity, title, detail, fix, cwe = f
    if not all(type(s) is str for s in (file, kind, severity, title, detail, fix)):
        return None
    if type(line) is not int or type(end_line) is not int or not (cwe is None or type(cwe) is str):
        return None
    return {
        "file": file, "line": line, "end_line": end_line, "kind": kind, "severity": severity,
        "title": title, "detail": detail, "fix": fix, "cwe": cwe,
    }  # fmt: skip


def _unencodable(value: object) -> Any:
    raise TypeError("the kernel only sends plain values")


def _rebind(fn: Any, g: dict[str, Any]) -> Any:
    """``fn``'s code as a new function over the globals ``g`` (nothing of ``fn``'s own)."""
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    return new


def _make_plan(
    dicts: list[tuple[str, dict[str, Any]]], classes: list[tuple[str, type]]
) -> tuple[tuple[Any, ...], set[int]]:
    """What the runner restores after each cell (these dicts, the watched modules,
    the classes found in them, as they are now), and the ids of the functions and classes
    whose code, defaults, bases or class the audit hook keeps from being changed."""
    plan: list[tuple[Any, ...]] = []
    protected: set[int] = set()
    all_dicts = list(dicts)
    for name in _WATCHED_MODULES:
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
    """The plan with what "nothing changed" needs first: each dict (or class dict) with its
    size, last key and values in order, so the check is a C loop over each."""
    fast: list[tuple[Any, ...]] = []
    lookups: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
    for entry in entries:
        kind = entry[0]
        if kind in ("dict", "class"):
            container = entry[2] if kind == "dict" else entry[2].__dict__
            keys, values = entry[3], entry[4]
        elif kind == "kwdefaults":
            container = entry[2]
            keys, values = tuple(k for k, _ in entry[3]), tuple(v for _, v in entry[3])
        elif kind == "module":
            lookups[0].append(entry[4])
            lookups[1].append(entry[2])
            lookups[2].append(entry[3])
            continue
        else:
            continue
        fast.append((container, len(keys), keys[-1] if keys else _MISSING, values))
    return (tuple(fast), tuple(map(tuple, lookups)), (sys.getrecursionlimit, limit), tuple(entries))


def _audit_hook(loop_thread: int, get_ident: Any, protected: set[int]) -> Any:
    """The kernel's audit hook (made over globals of its own; nothing refers to it)."""
    blocked = frozenset(
        {
            "sys._current_frames",
            "gc.get_objects",
            "gc.get_referrers",
            "gc.get_referents",
            "sys.addaudithook",
        }
    )
    frame_attrs = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in blocked:
            raise RuntimeError(f"{event} is not available in the deeprepo kernel")
        if event == "object.__getattr__":
            if args[1] in frame_attrs and get_ident() == loop_thread:
                raise RuntimeError("frames are not available here")
        elif event in ("object.__setattr__", "object.__delattr__"):
            if id(args[0]) in protected:
                raise RuntimeError(
                    f"{args[1]} of the kernel's scaffold cannot be changed; wrap it in a function of your own"
                )
        elif event == "sys._getframe" and get_ident() == loop_thread:
            raise RuntimeError("frames are not available here")

    return hook


def serve(rfd: int, wfd: int, submit: Any) -> None:
    """The kernel's message loop, in a thread of its own (call it from a private copy of this
    file); the main thread runs what it is handed through ``submit``. ``(None, None)`` ends it."""
    try:
        _serve(rfd, wfd, submit)
    finally:
        submit((None, None))


def _serve(rfd: int, wfd: int, submit: Any) -> None:
    global protocol
    import _thread

    private_builtins = globals()["__builtins__"]
    protocol = load_source(PROTOCOL_PATH, "_deeprepo_sandbox_protocol", private_builtins)
    prompts = load_source(PROMPTS_PATH, "_deeprepo_prompts", private_builtins)
    kernel = _Kernel(rfd, wfd, submit)
    # Zombies of the processes the parent stopped after a cell are reaped before the next.
    reap = load_source(HARDEN_PATH, "_deeprepo_sandbox_harden", private_builtins).reap_zombies
    close = os.close

    def after_fork() -> None:
        # A forked copy of the kernel must never speak on the parent's pipes.
        for fd in (rfd, wfd):
            try:
                close(fd)
            except OSError:
                pass

    os.register_at_fork(after_in_child=after_fork)
    hook_factory = types.FunctionType(
        _audit_hook.__code__, {"__builtins__": dict(kernel.pristine_builtins)}
    )
    sys.addaudithook(hook_factory(_thread.get_ident(), _thread.get_ident, kernel.protected))
    kernel.send({"type": "ready", "pid": kernel.pid})
    while True:
        msg = kernel.recv()
        if msg is None or msg["type"] == "shutdown":
            return
        kind = msg["type"]
        if kind == "init":
            try:
                files = kernel.init(msg, prompts)
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
                reap()
                # The leading newline ends whatever partial line the cell left on the pipe.
                kernel.send_line(b"\n" + kernel.run_cell(cell_id, code))
        elif kind == "restore_answer":
            # A restarted kernel keeps the answer text the previous one had.
            content = msg.get("content")
            if type(content) is str:
                kernel.restore_answer = content


def apply_limits(limits: dict[str, int]) -> None:
    """Lower this process's resource limits (never above the current hard limit)."""
    import resource

    mb = 1024 * 1024
    wanted: list[tuple[int, int | None]] = [
        (resource.RLIMIT_AS, limits.get("memory_mb", 0) * mb),
        (resource.RLIMIT_CPU, limits.get("cpu_seconds", 0)),
        (resource.RLIMIT_NOFILE, limits.get("open_files", 0)),
        (resource.RLIMIT_NPROC, limits.get("processes", 0)),
        (resource.RLIMIT_FSIZE, limits.get("file_size_mb", 0) * mb),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in wanted:
        if value is None or (value <= 0 and which != resource.RLIMIT_CORE):
            continue
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        # CPU: the soft limit sends SIGXCPU, the hard one a second later SIGKILL.
        new_hard = value + 1 if which == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            new_hard = min(new_hard, hard)
        try:
            resource.setrlimit(which, (value, new_hard))
        except (ValueError, OSError):
            resource.setrlimit(which, (value, hard))


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so a kernel never outlives deeprepo."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    argv = _harden(argv)
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

    return _work(_start_loop(rfd, wfd))


def _harden(argv: list[str]) -> list[str]:
    """Isolation the parent asked for in ``argv`` (``harden.py``: cgroup, giving up root,
    seccomp, Landlock) comes first, and before the parent-death
    signal, which a change of uid clears; the arguments that are not its own."""
    harden = load_source(HARDEN_PATH, "_deeprepo_sandbox_harden", dict(builtins.__dict__))
    return list(harden.apply(argv))


def _start_loop(rfd: int, wfd: int) -> Any:
    """Start the message loop in a thread, from a copy of this file that no module, function
    or class a cell can reach refers to, with builtins of its own; what hands work over."""
    import _thread
    from queue import SimpleQueue

    private: dict[str, Any] = {
        "__name__": "_deeprepo_kernel",
        "__builtins__": dict(builtins.__dict__),
    }
    private["__file__"] = __file__
    with open(__file__, encoding="utf-8") as f:
        exec(compile(f.read(), __file__, "exec"), private)
    work: SimpleQueue[Any] = SimpleQueue()
    _thread.start_new_thread(private["serve"], (rfd, wfd, work.put))
    return work.get


def _work(take: Any) -> int:
    """The main thread: run each cell it is handed (signals and forks behave as in a script).
    Its frames hold nothing of the loop's, so a cell looking up its stack finds nothing."""
    while True:
        fn, args = take()
        if fn is None:
            return 0
        try:
            fn(*args)
        except BaseException:  # the runner reports its own failures; the kernel goes on
            pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
