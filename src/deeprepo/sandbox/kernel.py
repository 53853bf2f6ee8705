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
import time
from types import TracebackType
from typing import Any

from deeprepo.base.errors import SandboxError
from deeprepo.sandbox import cgroup, protocol
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.connection import TIMEOUT, Connection
from deeprepo.sandbox.isolation import resolve_mode
from deeprepo.sandbox.pool import KernelPool, pool_key
from deeprepo.sandbox.results import (
    ERRORS,
    MAX_FINDINGS_PER_CELL,
    NOTES_SLACK,
    RESTORABLE,
    ExecResult,
    as_list,
    classify_exit,
    clean_answer,
    clean_finding,
    clean_names,
    compose,
    plain_text,
    restart_note,
)
from deeprepo.sandbox.rpc import CallLog, Capacity, LlmCall, LlmHandler, serve_request
from deeprepo.sandbox.spawn import start_child_async

__all__ = ["ExecResult", "Kernel", "LlmCall", "LlmHandler"]

_MARK_WAIT_S = 0.5
_REPLY_BACKLOG = 1 << 20  # reply bytes queued for a kernel that does not read them: stop serving


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
            notes.append(restart_note(reason, lost))
        conn = self._conn
        assert conn is not None
        self._cell_id += 1
        cell_id = self._cell_id
        dropped_before = conn.lines.dropped
        malformed = 0
        llm_calls = 0
        refused = 0
        calls = CallLog()
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
                    reply, count, not_served = await serve_request(
                        msg, self._handler, self._capacity, self.config.max_prompt_chars
                    )
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
            return await self._finish(
                conn, outcome, notes, restarted, lost, (llm_calls, calls), started
            )
        return await self._fail(conn, outcome, notes, lost, (llm_calls, calls), started)

    async def _finish(
        self,
        conn: Connection,
        msg: dict[str, Any],
        notes: list[str],
        restarted: bool,
        lost: list[str],
        calls: tuple[int, CallLog],  # prompts served, and the calls that sent them
        started: float,
    ) -> ExecResult:
        # The message may be forged (a cell can write on the pipe): everything is bounded here.
        raw = msg.get("output")
        output = raw if isinstance(raw, str) else ""
        if len(output) > self.config.output_limit + NOTES_SLACK:  # a forgery is not cut yet
            output = protocol.cut_middle(output, self.config.output_limit)
        output = plain_text(output)
        error = (
            msg.get("error")
            if isinstance(msg.get("error"), str) and msg["error"] in ERRORS
            else None
        )
        restored = [
            n for n in as_list(msg.get("restored")) if isinstance(n, str) and n in RESTORABLE
        ]
        restored = list(dict.fromkeys(restored))
        self._user_vars = clean_names(as_list(msg.get("user_vars")))
        self._answer = clean_answer(msg.get("answer"))
        if msg.get("mark") is True:
            stray = await conn.raw_output(int(msg["id"]), _MARK_WAIT_S)
        else:
            stray = conn.stray.take_all()
        sent = [f for f in as_list(msg.get("findings")) if isinstance(f, dict)]
        reported_cut = msg.get("findings_cut")
        # A forged count can only make the run incomplete, which the cell could do anyway.
        cut_in_child = min(reported_cut, 10**9) if type(reported_cut) is int else 0
        cut_in_child = max(0, cut_in_child)
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
            output=compose(str(output), stray, notes),
            error=error,
            answer=dict(self._answer),
            new_findings=[clean_finding(f) for f in sent[:MAX_FINDINGS_PER_CELL]],
            findings_cut=cut_in_child + max(0, len(sent) - MAX_FINDINGS_PER_CELL),
            restored=restored,
            restarted=restarted,
            lost_variables=lost,
            llm_calls=calls[0],
            calls=calls[1].calls(),
            seconds=time.perf_counter() - started,
        )

    async def _fail(
        self,
        conn: Connection,
        outcome: str,
        notes: list[str],
        lost_before: list[str],
        calls: tuple[int, CallLog],  # prompts served, and the calls that sent them
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
            error, how = classify_exit(rc, self.mode)
            reason = f"The kernel died while running this cell ({how})"
        lost = await self._restart()
        notes.append(restart_note(reason, lost))
        return ExecResult(
            output=compose("", stray, notes),
            error=error,
            answer=dict(self._answer),
            new_findings=[],
            restored=[],
            restarted=True,
            lost_variables=sorted({*lost_before, *lost}),
            llm_calls=calls[0],
            calls=calls[1].calls(),
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
