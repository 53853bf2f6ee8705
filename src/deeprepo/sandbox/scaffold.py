"""The scaffold: what a cell calls and reaches (the public world of the kernel).

``llm_query``, ``llm_batch``, ``add_finding``, ``set_answer``, ``file_audit_prompt`` and
the classes of ``codebase`` and ``sys.stdout``. Kernel side, stdlib only: the child
(``child.py``) runs this module as a private copy, and the loop (``loop.py``) makes each
kernel's scaffold from these functions' *code* over a globals dict of that kernel's own,
which the runner (``runner.py``) puts back after every cell. Nothing here imports
another deeprepo module; the module-level names below are placeholders.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

#: The names the scaffold owns in a cell's namespace (``answer`` aside).
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

# ---------------------------------------------------------------- placeholders
#
# These functions run with a globals dict of their own (the loop's ``Kernel.init``); the
# names below are set there per kernel. At module level they are placeholders, so the
# code type-checks and the classes can be imported by tests.

_findings: list[tuple[Any, ...]] = []
_files: Any = {}
_ns: dict[str, Any] = {}
_readline: Any = None  # the pipes' bound methods (a cell can shadow the files' own)
_write: Any = None
_flush: Any = None
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
LLM_CHUNK_BYTES = 4 * 1024 * 1024
MAX_REQUEST_ITEMS = 10_000
MAX_LINE_BYTES = 8 * 1024 * 1024


def _escaped(text: str) -> bytes:
    """``text`` as the child sends it: JSON, ASCII, brackets escaped (protocol.escape_brackets)."""
    encoded: str = _encode_str(text)
    return (
        encoded.replace("[", "\\u005b")
        .replace("]", "\\u005d")
        .replace("{", "\\u007b")
        .replace("}", "\\u007d")
        .encode("ascii")
    )


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
            b"null" if system is None else _escaped(system),
        )
        _write(head + b",".join(prompts) + b"]}\n")
        _flush()
        while True:
            line = _readline()
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
                text = _escaped(str.__str__(items[i]))
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
#: What each kernel's scaffold is made of: these functions' code over its own globals.
PUBLIC_FUNCTIONS = (
    _escaped,
    _rpc,
    _batch,
    llm_batch,
    llm_query,
    add_finding,
    set_answer,
    file_audit_prompt,
    _scaffold_classes,
)
#: The protocol's helpers the scaffold calls (rebound into its globals the same way).
FROM_PROTOCOL = (
    "prompt_error",
    "system_error",
    "oversized_error",
    "chunk_by_size",
    "cut_middle",
    "cut_note",
)
