"""A spawned child attached to the running event loop: lines in, lines out, raw output.

Reading the child's messages pauses while too much is queued, so a flooding child
cannot fill the parent's memory; its raw fd 1/2 output is kept bounded, per cell.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable

from deeprepo.sandbox import protocol
from deeprepo.sandbox.framing import LineSplitter, MarkedOutput
from deeprepo.sandbox.spawn import SpawnedChild

TIMEOUT = object()  # what Connection.next_line returns when the time is up
_HIGH_WATER = 16 * 1024 * 1024  # queued bytes at which reading the child's messages pauses
_LINE_COST = 64  # what a queued line costs beyond its bytes (a flood of empty lines is not free)


class _Pipe(asyncio.Protocol):
    """Hands a read pipe's bytes and its end to callbacks."""

    def __init__(self, on_data: Callable[[bytes], None], on_end: Callable[[], None]) -> None:
        self.on_data = on_data
        self.on_end = on_end
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_end()


def _time_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Connection:
    """A spawned child attached to the running event loop: send lines, read lines and raw output."""

    def __init__(self, child: SpawnedChild, stray_limit: int) -> None:
        self.child = child
        self.lines = LineSplitter(protocol.MAX_LINE_BYTES)
        self.stray = MarkedOutput(stray_limit)
        # A deque and one future to wake the reader, not an asyncio.Queue read through
        # asyncio.wait_for: that made a task, a future and a timer per line (~40 us a cell).
        self._queue: deque[bytes | None] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._queued = 0
        self._paused = False
        self._stray_changed = asyncio.Event()
        self._rpc = _Pipe(self._on_rpc, self._on_end)
        self._raw = _Pipe(self._on_raw, self._stray_changed.set)
        self._transports: list[asyncio.BaseTransport] = []
        self._writer: asyncio.WriteTransport | None = None

    async def attach(self) -> None:
        """Connect the child's pipes to the running loop (the transports own the fds from here)."""
        loop = asyncio.get_running_loop()
        child = self.child
        rpc_in = os.fdopen(child.rpc_read, "rb", buffering=0)
        child.rpc_read = -1
        transport, _ = await loop.connect_read_pipe(lambda: self._rpc, rpc_in)
        self._transports.append(transport)
        raw_in = os.fdopen(child.stray_read, "rb", buffering=0)
        child.stray_read = -1
        transport, _ = await loop.connect_read_pipe(lambda: self._raw, raw_in)
        self._transports.append(transport)
        rpc_out = os.fdopen(child.rpc_write, "wb", buffering=0)
        child.rpc_write = -1
        writer, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, rpc_out)
        self._transports.append(writer)
        self._writer = writer

    def _on_rpc(self, data: bytes) -> None:
        lines = self.lines.feed(data)
        for line in lines:
            self._queue.append(line)
            self._queued += len(line) + _LINE_COST
        if lines:
            self._wake()
        if self._queued > _HIGH_WATER and not self._paused and self._rpc.transport is not None:
            self._paused = True  # a flooding child must not fill the parent's memory
            self._rpc.transport.pause_reading()

    def _on_end(self) -> None:
        self._queue.append(None)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_raw(self, data: bytes) -> None:
        if self.stray.feed(data):
            self._stray_changed.set()

    def send(self, line: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(line)

    def backlog(self) -> int:
        """Bytes sent to the child that it has not read yet (beyond what the pipe holds)."""
        return self._writer.get_write_buffer_size() if self._writer is not None else 0

    async def next_line(self, timeout: float) -> bytes | object | None:
        """The next line, None at end of stream, or ``TIMEOUT``."""
        queue = self._queue
        if not queue:
            if timeout <= 0:
                return TIMEOUT
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            timer = loop.call_later(timeout, _time_up, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
            if not queue:
                return TIMEOUT
        line = queue[0]
        if line is None:
            return None  # stay at end of stream
        queue.popleft()
        self._queued -= len(line) + _LINE_COST
        if self._paused and self._queued < _HIGH_WATER // 2 and self._rpc.transport is not None:
            self._paused = False
            self._rpc.transport.resume_reading()
        return line

    async def raw_output(self, cell_id: int, timeout: float) -> str:
        """The raw fd 1/2 output of cell ``cell_id``, once its end mark is in (or the wait is over)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.stray.has(cell_id):
            self._stray_changed.clear()
            try:
                await asyncio.wait_for(self._stray_changed.wait(), deadline - loop.time())
            except TimeoutError:
                break
        return self.stray.take(cell_id)

    def kill(self) -> None:
        self.child.kill()

    async def reap(self, timeout: float = 5.0) -> int | None:
        """Wait for the child to exit; its return code, or None if it would not."""
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while self.child.proc.poll() is None:
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.child.proc.returncode

    async def close(self) -> None:
        """Close the pipes, reap the child and remove its temp dir."""
        for transport in self._transports:
            transport.close()
        self._transports.clear()
        self._writer = None
        await self.reap()
        self.child.release()
