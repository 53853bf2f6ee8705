"""The kernel's child process: runs root-model code in one persistent namespace.

Started by the parent as ``python -s -P -S child.py RFD WFD`` with an allow-listed
environment (stdlib only, no site-packages, no deeprepo import): RFD/WFD are the RPC
pipes (see ``protocol.py``); fd 0 is /dev/null and fds 1/2 go to a pipe the parent drains, so
nothing the cell writes can reach the RPC stream. The child trusts its parent and
nothing else: the limits are applied before any cell runs, and every message it
sends is checked again by the parent.
"""

from __future__ import annotations

import ast
import builtins
import faulthandler
import importlib.util
import io
import linecache
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

_HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS_PATH = os.path.join(os.path.dirname(_HERE), "orchestrator", "prompts.py")
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
_MISSING = object()


def load_by_path(path: str, name: str) -> types.ModuleType:
    """Import one file as module ``name`` without touching ``sys.path``."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and friends look their module up here
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from deeprepo.sandbox import protocol
else:
    protocol = load_by_path(os.path.join(_HERE, "protocol.py"), "_deeprepo_sandbox_protocol")


# ---------------------------------------------------------------- namespace objects


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


class _Stdout(io.TextIOBase):
    """sys.stdout and sys.stderr of the child: everything goes to the current cell's buffer."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.target = protocol.HeadTailBuffer(limit)

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        return self.target.write(s)

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def take(self) -> protocol.HeadTailBuffer:
        """The buffer so far; later writes (e.g. from threads between cells) go to a new one."""
        buf, self.target = self.target, protocol.HeadTailBuffer(self.limit)
        return buf


# ---------------------------------------------------------------- the session


class Session:
    """The child's state: the pipes, the namespace, the scaffold functions."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.pid = os.getpid()
        self._rfd, self._wfd = rfd, wfd
        self._rfile = os.fdopen(rfd, "rb")
        self._wfile = os.fdopen(wfd, "wb")
        self._rpc_lock = threading.Lock()
        self._llm_id = 0
        self._findings: list[dict[str, Any]] = []
        self.max_prompt_chars = 1_000_000
        self.ns: dict[str, Any] = {}
        self.scaffold: dict[str, Any] = {}
        self.stdout = _Stdout(8192)
        self.prompts: types.ModuleType | None = None
        os.register_at_fork(after_in_child=self._after_fork)

    # -- transport

    def _after_fork(self) -> None:
        # A forked copy of the kernel must never speak on the parent's pipes.
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(protocol.encode(message))

    def send_line(self, line: bytes) -> None:
        self._wfile.write(line)
        self._wfile.flush()

    def recv(self) -> dict[str, Any] | None:
        """The next well-formed message, or None at end of input (the parent is gone)."""
        while True:
            line = self._rfile.readline()
            if not line:
                return None
            msg = protocol.decode(line)
            if msg is None:
                continue
            if msg["type"] == "init" and isinstance(msg.get("blob_bytes"), int):
                msg["blob"] = self._rfile.read(msg["blob_bytes"])  # the file texts, raw UTF-8
            return msg

    def _rpc(self, prompts: list[str], system: str | None) -> list[str]:
        if os.getpid() != self.pid:
            raise RuntimeError(
                "llm_query/llm_batch work only in the kernel process, not in a forked child"
            )
        with self._rpc_lock:
            self._llm_id += 1
            call_id = self._llm_id
            self.send({"type": "llm", "id": call_id, "prompts": prompts, "system": system})
            while True:
                msg = self.recv()
                if msg is None:
                    os._exit(0)
                if msg["type"] == "llm_result" and msg.get("id") == call_id:
                    results = msg.get("results")
                    if isinstance(results, list) and len(results) == len(prompts):
                        return [r if isinstance(r, str) else str(r) for r in results]
                    return [f"{protocol.ERROR_PREFIX} the parent sent a malformed reply"] * len(
                        prompts
                    )

    # -- scaffold functions (closures over the session, so rebinding names cannot break them)

    def llm_batch(self, prompts: Iterable[str], system: str | None = None) -> list[str]:
        """Ask sub-LLM workers, in parallel, one answer per prompt; a failed item is an error string."""
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
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system must be a str or None, not {type(system).__name__}")
        results: list[str | None] = [
            protocol.prompt_error(i, p, self.max_prompt_chars) for i, p in enumerate(items)
        ]
        todo = [i for i, r in enumerate(results) if r is None]
        for chunk in protocol.chunk_by_size(
            [len(items[i]) for i in todo], protocol.LLM_CHUNK_CHARS
        ):
            idx = [todo[j] for j in chunk]
            for i, answer in zip(idx, self._rpc([items[i] for i in idx], system), strict=True):
                results[i] = answer
        return [r if r is not None else "" for r in results]

    def llm_query(self, prompt: str, *, system: str | None = None) -> str:
        """Ask one sub-LLM worker; returns its answer (or an error string)."""
        return self.llm_batch([prompt], system)[0]

    def add_finding(
        self,
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
            raise ValueError(f"add_finding: line and end_line must be ints, not {line!r}, {end_line!r}") from None
        file_s = str(file).removeprefix("./")
        codebase = self.scaffold.get("codebase", {})
        if file_s not in codebase:
            self.stdout.write(
                f"[deeprepo] note: add_finding: {file_s!r} is not a file in codebase (recorded anyway)\n"
            )
        self._findings.append(
            {
                "file": file_s,
                "line": line_no,
                "end_line": end_no,
                "kind": str(kind),
                "severity": str(severity),
                "title": str(title),
                "detail": str(detail),
                "fix": str(fix),
                "cwe": None if cwe is None else str(cwe),
            }
        )

    def set_answer(self, text: str) -> None:
        """Set the final report and mark it ready: the run ends after this cell."""
        answer = self.ns.get("answer")
        if not isinstance(answer, dict):
            answer = self.ns["answer"] = {}
        answer["content"] = text if isinstance(text, str) else str(text)
        answer["ready"] = True

    def file_audit_prompt(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """The standard worker prompt for ``codebase[path]`` (or lines start_line..end_line)."""
        codebase = self.scaffold["codebase"]
        if path not in codebase:
            raise KeyError(
                f"file_audit_prompt: {path!r} is not in codebase; see file_tree or list(codebase)"
            )
        content = codebase[path]
        if start_line != 1 or end_line is not None:
            start_line = max(1, int(start_line))
            lines = content.split("\n")
            content = "\n".join(lines[start_line - 1 : None if end_line is None else int(end_line)])
        assert self.prompts is not None
        result: str = self.prompts.file_audit_prompt(path, content, start_line)
        return result

    # -- lifecycle

    def init(self, msg: dict[str, Any]) -> int:
        options = msg.get("options") or {}
        apply_limits(options.get("limits") or {})
        self.max_prompt_chars = int(options.get("max_prompt_chars", 1_000_000))
        self.stdout = _Stdout(int(options.get("output_limit", 8192)))
        payload = msg.get("payload") or {}
        codebase = ReadOnlyDict(protocol.decode_files(msg))
        self.scaffold = {
            "llm_query": self.llm_query,
            "llm_batch": self.llm_batch,
            "add_finding": self.add_finding,
            "set_answer": self.set_answer,
            "file_audit_prompt": self.file_audit_prompt,
            "codebase": codebase,
            "file_tree": str(payload.get("file_tree") or ""),
            "metadata": payload.get("metadata") or {},
        }
        self.ns = {"__name__": "__main__", "__builtins__": builtins, **self.scaffold}
        self.ns["answer"] = {"content": "", "ready": False}
        return len(codebase)

    def run_cell(self, cell_id: int, code: str) -> dict[str, Any]:
        """Run one cell; the result message (output, error, answer, findings, …)."""
        sys.stdout = sys.stderr = self.stdout
        error: str | None = None
        filename = f"<cell-{cell_id}>"
        try:
            tree = ast.parse(code, filename)
        except (SyntaxError, ValueError) as exc:
            self.stdout.write(protocol.format_syntax_error(exc, code))
            error = "syntax"
        except (RecursionError, MemoryError) as exc:  # absurdly nested code
            self.stdout.write(f"SyntaxError: the cell is too deeply nested to parse ({exc!r})\n")
            error = "syntax"
        else:
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            error = self._execute(tree, filename)
        if os.getpid() != self.pid:
            os._exit(0)  # a fork made by the cell has finished the cell's code: it stops here
        sys.stdout = sys.stderr = self.stdout
        out = self.stdout.take()
        restored = self._restore_scaffold()
        findings, self._findings = self._findings, []
        user_vars = sorted(
            k for k in self.ns if k not in self.scaffold and k != "answer" and not _dunder(k)
        )
        if len(user_vars) > protocol.MAX_USER_VARS:
            more = len(user_vars) - protocol.MAX_USER_VARS
            user_vars = [*user_vars[: protocol.MAX_USER_VARS], f"... and {more} more"]
        mark = True
        try:
            os.write(1, protocol.CELL_END_MARK % cell_id)
        except OSError:
            mark = False
        return {
            "type": "result",
            "id": cell_id,
            "output": out.getvalue(),
            "error": error,
            "answer": self._answer_snapshot(),
            "findings": findings,
            "restored": restored,
            "user_vars": user_vars,
            "mark": mark,
        }

    def _execute(self, tree: ast.Module, filename: str) -> str | None:
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            # Like a notebook, the value of a final expression is shown.
            last = tree.body.pop().value  # type: ignore[attr-defined]
        try:
            exec(compile(tree, filename, "exec"), self.ns)
            if last is not None:
                value = eval(compile(ast.Expression(last), filename, "eval"), self.ns)
                if value is not None:
                    self.stdout.write(repr(value) + "\n")
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the kernel goes on
            if os.getpid() != self.pid:
                os._exit(1)
            # Written to our sink directly: the cell may have replaced sys.stdout.
            self.stdout.write(protocol.format_exception(exc, (os.path.abspath(__file__),)))
            return "exception"
        return None

    def _restore_scaffold(self) -> list[str]:
        restored = [
            name for name, obj in self.scaffold.items() if self.ns.get(name, _MISSING) is not obj
        ]
        for name in restored:
            self.ns[name] = self.scaffold[name]
        answer = self.ns.get("answer", _MISSING)
        if not (isinstance(answer, dict) and "content" in answer and "ready" in answer):
            content: object = answer if isinstance(answer, str) else ""
            if isinstance(answer, dict) and isinstance(answer.get("content"), str):
                content = answer["content"]
            self.ns["answer"] = {"content": content, "ready": False}
            restored.append("answer")
        return restored

    def _answer_snapshot(self) -> dict[str, Any]:
        answer = self.ns.get("answer")
        assert isinstance(answer, dict)
        content = answer.get("content")
        ready = answer.get("ready")
        return {
            "content": content
            if isinstance(content, str)
            else ("" if content is None else str(content)),
            "ready": bool(ready) if isinstance(ready, (bool, int)) else False,
        }


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


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
    # Isolation the parent asked for (cgroup, giving up root, seccomp, Landlock) comes first,
    # and before the parent-death signal, which a change of uid clears.
    harden = load_by_path(os.path.join(_HERE, "harden.py"), "_deeprepo_sandbox_harden")
    argv = harden.apply(argv)
    rfd, wfd = int(argv[1]), int(argv[2])
    # The fixed hash seed is the parent's choice for this interpreter only (reproducible
    # output); the cell's code and its subprocesses see the plain allow-listed environment.
    os.environ.pop("PYTHONHASHSEED", None)
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)  # subprocesses and os.system() must not get the pipes
    _die_with_parent()
    faulthandler.enable()  # a crash dumps the cell's stack to fd 2, which the parent shows
    session = Session(rfd, wfd)
    session.prompts = load_by_path(PROMPTS_PATH, "_deeprepo_prompts")
    session.send({"type": "ready", "pid": os.getpid()})
    handlers: dict[str, Callable[[dict[str, Any]], None]] = {}

    def on_init(msg: dict[str, Any]) -> None:
        try:
            files = session.init(msg)
        except MemoryError:
            session.send(
                {"type": "init_error", "message": "the codebase does not fit in memory_limit_mb"}
            )
            return
        session.send({"type": "init_ok", "files": files})

    def on_exec(msg: dict[str, Any]) -> None:
        code = msg.get("code")
        cell_id = msg.get("id")
        if isinstance(code, str) and isinstance(cell_id, int):
            harden.reap_zombies()  # of the processes the parent stopped after the last cell
            session.send_line(protocol.encode_result(session.run_cell(cell_id, code)))

    def on_restore_answer(msg: dict[str, Any]) -> None:
        # A restarted kernel keeps the answer text the previous one had.
        content = msg.get("content")
        if isinstance(content, str):
            session.ns["answer"] = {"content": content, "ready": False}

    handlers["init"] = on_init
    handlers["restore_answer"] = on_restore_answer
    handlers["exec"] = on_exec
    while True:
        msg = session.recv()
        if msg is None or msg["type"] == "shutdown":
            return 0
        handler = handlers.get(msg["type"])
        if handler is not None:
            handler(msg)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
