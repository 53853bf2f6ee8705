"""The parent's side of the kernel's streams: bounded buffers, lines, and cells.

``LineSplitter`` cuts the RPC pipe into lines, dropping one longer than the limit;
``MarkedOutput`` keeps the child's raw fd 1/2 output, bounded, split per cell by the
mark the child writes after each cell (``protocol.CELL_END_MARK``). Memory stays bounded
whatever the child writes.
"""

from __future__ import annotations

from typing import AnyStr, Generic

from deeprepo.sandbox.protocol import CELL_END_MARK, cut_note


class _HeadTail(Generic[AnyStr]):
    """Keeps the first and last ``limit // 2`` items written; memory and time stay bounded."""

    def __init__(self, limit: int, empty: AnyStr) -> None:
        self.head_cap = max(0, limit) // 2
        self.tail_cap = max(0, limit) - self.head_cap
        self._empty: AnyStr = empty
        self._head: list[AnyStr] = []
        self._head_len = 0
        self._tail: list[AnyStr] = []
        self._tail_len = 0
        self.total = 0

    def write(self, data: AnyStr) -> int:
        n = len(data)
        self.total += n
        if self._head_len < self.head_cap:
            take = data[: self.head_cap - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            data = data[len(take) :]
            if not data:
                return n
        if not self.tail_cap:
            return n
        if len(data) >= self.tail_cap:
            self._tail = [data[-self.tail_cap :]]
            self._tail_len = self.tail_cap
            return n
        self._tail.append(data)
        self._tail_len += len(data)
        if self._tail_len > 2 * self.tail_cap or len(self._tail) > 4096:
            joined = self._empty.join(self._tail)[-self.tail_cap :]
            self._tail = [joined]
            self._tail_len = len(joined)
        return n

    @property
    def cut(self) -> int:
        """How much was written but not kept."""
        return self.total - self._head_len - min(self._tail_len, self.tail_cap)

    def parts(self) -> tuple[AnyStr, int, AnyStr]:
        """``(head, cut, tail)``."""
        head = self._empty.join(self._head)
        tail = self._empty.join(self._tail)[-self.tail_cap :] if self.tail_cap else self._empty
        return head, self.total - len(head) - len(tail), tail


class HeadTailBuffer(_HeadTail[str]):
    """A text sink that keeps the head and the tail of what was written.

    Printing 10^8 chars keeps ``limit`` of them and counts the rest.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit, "")

    def getvalue(self) -> str:
        head, cut, tail = self.parts()
        return head + cut_note(cut) + tail if cut else head + tail


class ByteHeadTail(_HeadTail[bytes]):
    """The same for raw bytes, decoded (with replacement) only when read."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit, b"")

    def getvalue(self) -> str:
        head, cut, tail = self.parts()
        text = head.decode("utf-8", "replace")
        if cut:
            text += f"\n[... {cut:,} bytes cut ...]\n"
        return text + tail.decode("utf-8", "replace")


class LineSplitter:
    """Splits a byte stream into lines; a line over ``max_line`` bytes is dropped and counted.

    Memory stays bounded by ``max_line`` whatever the child writes.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.dropped = 0
        self._buf = bytearray()
        self._scanned = 0
        self._dropping = False

    def feed(self, data: bytes) -> list[bytes]:
        """The complete lines ``data`` finishes, without their newlines."""
        buf = self._buf
        buf += data
        lines: list[bytes] = []
        start = 0
        while True:
            i = buf.find(b"\n", max(start, self._scanned))
            if i < 0:
                break
            if self._dropping:
                self._dropping = False  # the end of a dropped line
            else:
                lines.append(bytes(buf[start:i]))
            start = i + 1
        del buf[:start]
        self._scanned = len(buf)
        if len(buf) > self.max_line:
            buf.clear()
            self._scanned = 0
            if not self._dropping:
                self.dropped += 1
                self._dropping = True
        return lines


class MarkedOutput:
    """The child's raw fd 1/2 stream, bounded, split per cell by ``CELL_END_MARK``."""

    _PREFIX = CELL_END_MARK.split(b"%d")[0]
    _MAX_MARK = len(_PREFIX) + 21

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = ByteHeadTail(limit)
        self._pending = b""
        self._done: dict[int, str] = {}

    def feed(self, data: bytes) -> bool:
        """Take more bytes; True when a cell's end mark was among them."""
        data = self._pending + data
        self._pending = b""
        marked = False
        while data:
            i = data.find(self._PREFIX)
            if i < 0:
                # Hold back a tail that may be the start of a mark split by the read.
                j = data.rfind(b"\x00", max(0, len(data) - len(self._PREFIX)))
                cut = j if j >= 0 and self._PREFIX.startswith(data[j:]) else len(data)
                self._write(data[:cut])
                self._pending = data[cut:]
                break
            end = data.find(b"\x00", i + len(self._PREFIX))
            if end < 0 and len(data) - i < self._MAX_MARK:
                self._write(data[:i])
                self._pending = data[i:]
                break
            digits = data[i + len(self._PREFIX) : end] if end >= 0 else b""
            if end >= 0 and digits.isdigit() and len(digits) < 20:
                self._write(data[:i])
                self._close_cell(int(digits))
                marked = True
                data = data[end + 1 :]
            else:  # not a mark after all: plain output
                stop = end + 1 if end >= 0 else len(data)
                self._write(data[:stop])
                data = data[stop:]
        return marked

    def _write(self, chunk: bytes) -> None:
        if chunk:  # kept as bytes: a flood costs a slice, not a decode
            self._buffer.write(chunk)

    def _close_cell(self, cell_id: int) -> None:
        self._done = {k: v for k, v in self._done.items() if k > cell_id - 8}
        self._done[cell_id] = self._buffer.getvalue()
        self._buffer = ByteHeadTail(self.limit)

    def has(self, cell_id: int) -> bool:
        return cell_id in self._done

    def take(self, cell_id: int) -> str:
        """Output up to cell ``cell_id``'s mark, or everything so far if the mark never came."""
        if cell_id not in self._done:
            return self.take_all()
        texts = [self._done.pop(k) for k in sorted(self._done) if k <= cell_id]
        return "".join(texts)

    def take_all(self) -> str:
        """Everything not yet taken, and reset."""
        self._write(self._pending)
        self._pending = b""
        texts = [self._done.pop(k) for k in sorted(self._done)]
        texts.append(self._buffer.getvalue())
        self._buffer = ByteHeadTail(self.limit)
        return "".join(texts)
