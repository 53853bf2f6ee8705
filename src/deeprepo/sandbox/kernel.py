"""The parent side of the sandbox: start a child kernel, run cells, serve its sub-LLM calls.

The root model's code never runs in this process. It runs in a child (see
``child.py``) that holds the codebase as data; the child's ``llm_query`` /
``llm_batch`` send requests over a pipe and this side answers them through the
``handler`` it was given, which owns keys, clients and budgets. A cell that runs
too long, or a child that dies, is reported as an error and replaced by a fresh
kernel with the codebase loaded again.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Literal, NamedTuple

from deeprepo.base.errors import SandboxError
from deeprepo.sandbox import cgroup, protocol
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import resolve_mode
from deeprepo.sandbox.pool import (
    TIMEOUT,
    Connection,
    KernelPool,
    pool_key,
    start_child_async,
)

__all__ = ["ExecResult", "Kernel", "LlmCall", "LlmHandler"]

LlmHandler = Callable[[list[str], str | None], Awaitable[list[str]]]
"""A batch of prompts (and an optional system prompt) -> one answer per prompt; errors as strings."""
Capacity = Callable[[], int | None]
"""How many more sub-calls the budget allows (None: no sub-call limit)."""

_ERRORS = ("syntax", "exception", "timeout", "killed", "crashed")
_SCAFFOLD = ("llm_query", "llm_batch", "add_finding", "set_answer", "file_audit_prompt")
_RESTORABLE = (*_SCAFFOLD, "codebase", "file_tree", "metadata", "answer")
_FINDING_KEYS = ("file", "line", "end_line", "kind", "severity", "title", "detail", "fix", "cwe")
_MARK_WAIT_S = 0.5
_REPLY_BACKLOG = 1 << 20  # reply bytes queued for a kernel that does not read them: stop serving
_MAX_FINDINGS_PER_CELL = (
    1000  # a result (forged or not) carries no more; the episode bounds turns and runs
)
_FIELD_CHARS = {
    "file": 1000,
    "kind": 200,
    "severity": 50,
    "title": 1000,
    "detail": 20_000,
    "fix": 20_000,
}
_NOTES_SLACK = 2048  # the child's own notes after the cut output (a cut, a dropped finding count)
_MAX_NAMES_SHOWN = 30  # lost variable names in a restart note
_MAX_NAME_CHARS = 80


class LlmCall(NamedTuple):
    """One ``llm_query`` / ``llm_batch`` call of a cell, however many requests carried it."""

    api: Literal["query", "batch"]
    size: int  # prompts the call asked for (refused ones included)


@dataclass(frozen=True)
class ExecResult:
    """What one cell did, as the orchestrator needs it."""

    output: str  # stdout+stderr+traceback cut to output_limit (head and tail kept), then notes
    error: str | None  # None, "syntax", "exception", "timeout", "killed", "crashed"
    answer: dict[str, Any]  # {"content": str, "ready": bool}, read from the namespace
    new_findings: list[dict[str, Any]]  # add_finding calls of this cell
    restored: list[str]  # scaffold names the code overwrote, now restored
    restarted: bool  # the kernel died (or was stopped) and a fresh one was started
    lost_variables: list[str]  # user variable names lost in that restart
    llm_calls: int  # sub-LLM prompts requested during this cell
    seconds: float
    calls: tuple[LlmCall, ...] = ()  # the cell's llm_query / llm_batch calls, in order


class Kernel:
    """One sandboxed REPL for one episode. Use ``await Kernel.start(...)``, then ``exec``.

    One cell runs at a time; ``handler`` is called only while a cell runs, never
    concurrently with another call of the same kernel.
    """

    def __init__(
        self,
        init_line: bytes,
        handler: LlmHandler,
        config: SandboxConfig,
        mode: str,
        pool: KernelPool | None,
        capacity: Capacity | None = None,
    ) -> None:
        self.mode = mode
        self.config = config
        self._init_line = init_line
        self._handler = handler
        self._capacity = capacity
        self._pool = pool
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()
        self._cell_id = 0
        self._user_vars: list[str] = []
        self._answer: dict[str, Any] = {"content": "", "ready": False}
        self._stopped_reason: str | None = None
        self._closed = False

    @classmethod
    async def start(
        cls,
        payload: dict[str, Any],
        handler: LlmHandler,
        config: SandboxConfig | None = None,
        *,
        pool: KernelPool | None = None,
        capacity: Capacity | None = None,
    ) -> Kernel:
        """Start a kernel holding ``payload`` (``Codebase.payload()``).

        With a ``pool`` whose setup matches ``config``, a pre-started child is used
        and only the payload is sent. ``capacity`` tells how many sub-calls are left:
        one request is served for at most that many prompts (plus a small margin), the
        rest refused with one error. Raises :class:`SandboxError` if no kernel starts.
        """
        config = config or SandboxConfig()
        isolation = resolve_mode(config.mode)
        if pool is not None and pool.key() != pool_key(isolation.mode, config):
            pool = None  # its children run another setup: start ours directly
        options = config.child_options(tree_limited=cgroup.problem() is None)
        init = protocol.encode_init(payload, options)
        kernel = cls(init, handler, config, isolation.mode, pool, capacity)
        await kernel._boot()
        return kernel

    @property
    def pid(self) -> int | None:
        """The pid of the child (in bwrap mode, of the bwrap process around it)."""
        return self._conn.child.pid if self._conn is not None else None

    # ------------------------------------------------------------------ lifecycle

    async def _boot(self) -> None:
        spawned = self._pool.take() if self._pool is not None else None
        from_pool = spawned is not None
        for attempt in (0, 1):
            if spawned is None:
                spawned = await start_child_async(
                    self.mode, self.config.tmp_size_mb, self.config.cgroup_limits()
                )
            conn = Connection(spawned, max(256, self.config.output_limit // 4))
            try:
                await conn.attach()
                conn.send(self._init_line)
                if self._answer["content"]:
                    conn.send(
                        protocol.encode(
                            {"type": "restore_answer", "content": self._answer["content"]}
                        )
                    )
                await self._await_init(conn)
                spawned.note_kernel()  # before any cell: the kernel is its sandbox's only process
            except BaseException as exc:
                conn.kill()
                await conn.close()
                if attempt == 0 and from_pool and isinstance(exc, SandboxError):
                    spawned = None  # a pooled child may have gone bad: one fresh try
                    continue
                raise
            self._conn = conn
            return

    async def _await_init(self, conn: Connection) -> None:
        deadline = asyncio.get_running_loop().time() + self.config.start_timeout_s
        while True:
            line = await conn.next_line(deadline - asyncio.get_running_loop().time())
            if line is TIMEOUT:
                raise SandboxError(
                    f"the sandbox kernel did not start within {self.config.start_timeout_s:g}s; "
                    "the machine may be overloaded, or try --sandbox process"
                )
            if line is None:
                rc = await conn.reap()
                detail = conn.stray.take_all().strip()[-800:]
                raise SandboxError(
                    f"the sandbox kernel exited while starting (exit code {rc}): {detail or 'no message'}. "
                    "Check that bubblewrap works here, or try --sandbox process."
                )
            assert isinstance(line, bytes)
            msg = protocol.decode(line)
            if msg is None or msg["type"] == "ready":
                continue
            if msg["type"] == "init_ok":
                return
            if msg["type"] == "init_error":
                raise SandboxError(
                    f"the sandbox kernel could not load the codebase: {msg.get('message')}. "
                    "Raise the kernel memory limit or analyse a smaller path."
                )

    async def close(self) -> None:
        """Kill the child and free its pipes and temp dir. Safe to call twice."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.kill()
            await conn.close()

    async def __aenter__(self) -> Kernel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ cells

    async def exec(self, code: str) -> ExecResult:
        """Run one cell in the kernel and report what it did.

        Never raises for anything the code does (errors, timeouts, crashes are in
        the result); raises :class:`SandboxError` if the kernel is closed or a
        fresh one cannot be started.
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        async with self._lock:
            if self._closed:
                raise SandboxError("this kernel is closed; start a new one with Kernel.start()")
            return await self._exec(code)

    async def _exec(self, code: str) -> ExecResult:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        notes: list[str] = []
        restarted = False
        lost: list[str] = []
        if self._conn is None or not self._conn.child.alive():
            reason = self._stopped_reason or "The kernel had stopped between cells"
            lost = await self._restart()
            restarted = True
            notes.append(_restart_note(reason, lost))
        conn = self._conn
        assert conn is not None
        self._cell_id += 1
        cell_id = self._cell_id
        dropped_before = conn.lines.dropped
        malformed = 0
        llm_calls = 0
        refused = 0
        calls = _CallLog()
        conn.send(protocol.encode({"type": "exec", "id": cell_id, "code": code}))
        deadline = loop.time() + self.config.cell_timeout_s
        outcome: dict[str, Any] | str
        try:
            while True:
                line = await conn.next_line(deadline - loop.time())
                if line is TIMEOUT:
                    outcome = "timeout"
                    break
                if line is None:
                    outcome = "died"
                    break
                assert isinstance(line, bytes)
                if not line:
                    continue  # the child starts its messages on a fresh line
                msg = protocol.decode(line)
                if msg is None:
                    malformed += 1
                elif msg["type"] == "llm":
                    waited = loop.time()
                    reply, count, not_served = await self._serve_llm(msg)
                    calls.add(msg)
                    llm_calls += count
                    refused += not_served
                    deadline += loop.time() - waited  # waiting on workers is not the cell's time
                    conn.send(reply)
                    # One request at a time, and none while the kernel leaves its replies
                    # unread: the parent never holds more than one reply for it.
                    while conn.backlog() > _REPLY_BACKLOG and loop.time() < deadline:
                        await asyncio.sleep(0.002)
                elif (
                    msg["type"] == "result" and type(msg.get("id")) is int and msg["id"] == cell_id
                ):
                    outcome = msg
                    break
                else:
                    malformed += 1
        except asyncio.CancelledError:
            # The cell's state is unknown: stop the kernel, the next exec starts a fresh one.
            self._stopped_reason = "The previous cell was cancelled, so its kernel was stopped"
            conn.kill()
            self._conn = None
            await conn.close()
            raise
        malformed += conn.lines.dropped - dropped_before
        if malformed:
            notes.append(
                f"[deeprepo] ignored {malformed} malformed message(s) on the kernel's private pipe "
                "(something in the cell wrote to it directly)."
            )
        if refused:
            notes.append(
                f"[deeprepo] {refused:,} prompt(s) were refused without being sent: the requests "
                "asked for more than the sub-call budget had left (see the error in their results)."
            )
        if isinstance(outcome, dict):
            result = await self._finish(conn, outcome, notes, restarted, lost, llm_calls, started)
        else:
            result = await self._fail(conn, outcome, notes, lost, llm_calls, started)
        return replace(result, calls=calls.calls())

    async def _finish(
        self,
        conn: Connection,
        msg: dict[str, Any],
        notes: list[str],
        restarted: bool,
        lost: list[str],
        llm_calls: int,
        started: float,
    ) -> ExecResult:
        # The message may be forged (a cell can write on the pipe): everything is bounded here.
        raw = msg.get("output")
        output = raw if isinstance(raw, str) else ""
        if len(output) > self.config.output_limit + _NOTES_SLACK:  # a forgery is not cut yet
            output = protocol.cut_middle(output, self.config.output_limit)
        output = _text(output)
        error = (
            msg.get("error")
            if isinstance(msg.get("error"), str) and msg["error"] in _ERRORS
            else None
        )
        restored = [
            n for n in _as_list(msg.get("restored")) if isinstance(n, str) and n in _RESTORABLE
        ]
        restored = list(dict.fromkeys(restored))
        self._user_vars = _clean_names(_as_list(msg.get("user_vars")))
        self._answer = _clean_answer(msg.get("answer"))
        if msg.get("mark") is True:
            stray = await conn.raw_output(int(msg["id"]), _MARK_WAIT_S)
        else:
            stray = conn.stray.take_all()
        leftovers = conn.child.stop_leftovers()  # a cell's processes end with the cell
        if leftovers:
            notes.append(
                f"[deeprepo] stopped {leftovers} process(es) this cell left running; processes "
                "do not outlive the cell that started them."
            )
        if restored:
            notes.append(
                "[deeprepo] "
                + ", ".join(f"`{n}`" for n in restored)
                + " belong(s) to the REPL scaffold and were restored; use other names for your variables."
            )
        return ExecResult(
            output=_compose(str(output), stray, notes),
            error=error,
            answer=dict(self._answer),
            new_findings=[
                _clean_finding(f)
                for f in _as_list(msg.get("findings"))[:_MAX_FINDINGS_PER_CELL]
                if isinstance(f, dict)
            ],
            restored=restored,
            restarted=restarted,
            lost_variables=lost,
            llm_calls=llm_calls,
            seconds=time.perf_counter() - started,
        )

    async def _fail(
        self,
        conn: Connection,
        outcome: str,
        notes: list[str],
        lost_before: list[str],
        llm_calls: int,
        started: float,
    ) -> ExecResult:
        if outcome == "timeout":
            conn.kill()
        rc = await conn.reap(timeout=1.0)  # a dying child first reports how it died
        if rc is None:  # it closed its pipe but goes on running
            conn.kill()
            await conn.reap()
        stray = conn.stray.take_all()
        if outcome == "timeout":
            error = "timeout"
            reason = f"The cell ran longer than the {self.config.cell_timeout_s:g}s limit and was stopped"
        elif rc is None:
            error = "crashed"
            reason = "The kernel closed its connection to deeprepo during this cell and was stopped"
        else:
            error, how = _classify_exit(rc, self.mode)
            reason = f"The kernel died while running this cell ({how})"
        lost = await self._restart()
        notes.append(_restart_note(reason, lost))
        return ExecResult(
            output=_compose("", stray, notes),
            error=error,
            answer=dict(self._answer),
            new_findings=[],
            restored=[],
            restarted=True,
            lost_variables=sorted({*lost_before, *lost}),
            llm_calls=llm_calls,
            seconds=time.perf_counter() - started,
        )

    async def _restart(self) -> list[str]:
        """Replace the child by a fresh one with the codebase reloaded; the variables lost."""
        if self._closed:
            raise SandboxError("the kernel was closed while a cell was running")
        lost, self._user_vars = self._user_vars, []
        old, self._conn = self._conn, None
        if old is not None:
            old.kill()
            await old.close()
        self._stopped_reason = None
        await self._boot()
        return lost

    async def _serve_llm(self, msg: dict[str, Any]) -> tuple[bytes, int, int]:
        """Answer one ``llm`` request: ``(reply, prompts served, prompts refused)``.

        Every served item gets a string, failures included. Past what the sub-call budget
        has left (plus a margin), and past ``MAX_REQUEST_ITEMS``, prompts are refused
        with one error for all of them, so a request of millions costs no more than the
        prompts it may send.
        """
        prompts = msg.get("prompts")
        call_id = msg.get("id") if type(msg.get("id")) is int else None
        items: list[object] = prompts if isinstance(prompts, list) else []
        left = self._capacity() if self._capacity is not None else None
        allowed = protocol.MAX_REQUEST_ITEMS
        if left is not None:
            allowed = min(allowed, left + protocol.REQUEST_MARGIN) if left > 0 else 0
        served = items[:allowed]
        refused = len(items) - len(served)
        system = msg.get("system")
        limit = self.config.max_prompt_chars
        bad_system = protocol.system_error(system, limit)
        if bad_system is not None:
            results: list[str | None] = [bad_system] * len(served)
        else:
            results = [protocol.prompt_error(i, p, limit) for i, p in enumerate(served)]
        todo = [i for i, r in enumerate(results) if r is None]
        if todo:
            batch = [str(served[i]) for i in todo]
            answers = await self._call_handler(batch, system if isinstance(system, str) else None)
            for i, answer in zip(todo, answers, strict=True):
                results[i] = answer
        reply: dict[str, Any] = {"type": "llm_result", "id": call_id, "results": results}
        if refused:
            reply["refused"] = refused
            reply["error"] = protocol.refusal_error(len(items), len(served), left)
        return protocol.encode(reply), len(served), refused

    async def _call_handler(self, batch: list[str], system: str | None) -> list[str]:
        try:
            answers = await self._handler(batch, system)
        except Exception as exc:  # a failing handler fails the items, never the kernel
            return [f"{protocol.ERROR_PREFIX} {type(exc).__name__}: {exc}"] * len(batch)
        out = [
            a if isinstance(a, str) else str(a)
            for a in (answers if isinstance(answers, list) else [])
        ]
        missing = len(batch) - len(out)
        if missing > 0:
            out += [f"{protocol.ERROR_PREFIX} no answer came back for this prompt"] * missing
        return out[: len(batch)]


class _CallLog:
    """Groups a cell's ``llm`` requests into the calls that sent them. The child tags each
    request with ``api``, a call number shared by a call's requests (a large batch goes in
    several) and the call's size; a request without tags (a forged line) is a call of its own."""

    def __init__(self) -> None:
        self._calls: list[LlmCall] = []
        self._last: int | None = None  # the call number of the last request
        self._seen = 0  # prompts the last call's requests carried so far

    def add(self, msg: dict[str, Any]) -> None:
        items = msg.get("prompts")
        seen = len(items) if isinstance(items, list) else 0
        api: Literal["query", "batch"] = "query" if msg.get("api") == "query" else "batch"
        number, size = msg.get("call"), msg.get("size")
        declared = size if type(size) is int and size >= 0 else 0
        if type(number) is int and number == self._last and self._calls:
            self._seen += seen
            prev = self._calls[-1]
            self._calls[-1] = prev._replace(size=max(prev.size, declared, self._seen))
            return
        if not max(seen, declared):  # a (forged) request of no prompts is no call
            return
        self._last = number if type(number) is int else None
        self._seen = seen
        self._calls.append(LlmCall(api, max(seen, declared)))

    def calls(self) -> tuple[LlmCall, ...]:
        return tuple(self._calls)


def _as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (a cell can print one) becomes ``?``, so
    the run log, the report and the next request can be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _clean_answer(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {"content": "", "ready": False}
    content = value.get("content")
    return {
        "content": _text(content) if isinstance(content, str) else "",
        "ready": value.get("ready") is True,
    }


def _clean_names(names: list[Any]) -> list[str]:
    """Variable names from a result, each cut to a readable length, at most MAX_USER_VARS."""
    out = [
        _text(n if len(n) <= _MAX_NAME_CHARS else n[: _MAX_NAME_CHARS - 1] + "…")
        for n in names
        if isinstance(n, str)
    ]
    return out[: protocol.MAX_USER_VARS + 1]


def _clean_finding(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: raw.get(k) for k in _FINDING_KEYS}
    for key in ("file", "kind", "severity", "title", "detail", "fix"):
        text = "" if out[key] is None else str(out[key])
        cap = _FIELD_CHARS[key]
        out[key] = _text(text if len(text) <= cap else text[: cap - 1] + "…")
    if out["cwe"] is not None:
        out["cwe"] = _text(str(out["cwe"])[:50])
    line = out["line"]
    if not isinstance(line, int) or isinstance(line, bool) or not 0 < line < 10**9:
        out["line"] = line = 1
    end = out["end_line"]
    if not isinstance(end, int) or isinstance(end, bool) or not line <= end < 10**9:
        out["end_line"] = line
    return out


def _compose(output: str, stray: str, notes: list[str]) -> str:
    parts = [output.rstrip("\n")] if output.strip() else []
    if stray.strip():
        parts.append(
            "[written directly to fd 1/2, e.g. by a subprocess or a crash]\n" + stray.rstrip("\n")
        )
    parts += notes
    return "\n".join(parts) + ("\n" if parts else "")


def _classify_exit(rc: int | None, mode: str) -> tuple[str, str]:
    """("killed" | "crashed", how it ended) from the child's (or bwrap's) exit status."""
    if rc is None:
        return "crashed", "it stopped answering"
    sig = -rc if rc < 0 else (rc - 128 if mode == "bwrap" and rc > 128 else 0)
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig in (signal.SIGKILL, signal.SIGXCPU):
            return "killed", f"killed by {name}: a memory or CPU limit, or the code killed itself"
        return "crashed", f"killed by {name}"
    return "crashed", f"exit code {rc}"


def _restart_note(reason: str, lost: list[str]) -> str:
    shown = _clean_names(lost)[:_MAX_NAMES_SHOWN]
    names = ", ".join(shown) if shown else "none"
    if len(lost) > len(shown):
        names += f" and {len(lost) - len(shown):,} more"
    return (
        f"[deeprepo] {reason}. A fresh kernel was started: codebase, file_tree, metadata and the "
        f"scaffold functions are loaded again and answer keeps its content, but your variables are "
        f"gone ({names}) and so are files in the temp dir. Re-create what you need, and split "
        "long work into smaller cells."
    )
