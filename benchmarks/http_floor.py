"""Floors for ``bench_llm_batch.py --floor``: what the same batch costs with no deeprepo code.

``aiohttp``: one ``ClientSession`` posting the same request bodies, pre-serialised, and
``json.loads`` of each reply: the least the fast client (``providers/fast_http.py``)
could cost while it stands on aiohttp. ``raw``: a minimal keep-alive HTTP/1.1 client on
``asyncio.Protocol`` (plain HTTP, ``Content-Length`` replies only, no TLS, proxies,
chunking, compression or error handling): a measuring stick for how much of aiohttp's
cost an own transport could save, not a client to use. Both bound concurrency with a
semaphore as the metered wrapper does; each lane quacks like a ``SubDispatcher`` (its
``batch``) and a model (its ``aclose``) for the benchmark's rounds.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

PATH = "/v1/chat/completions"


def bodies(prompts: list[str]) -> list[bytes]:
    """The requests' JSON bodies, as the fast client would send them for ``prompts``."""
    return [
        json.dumps(
            {
                "model": "minimax/minimax-m2.5",
                "messages": [{"role": "user", "content": p}],
                "max_tokens": 4096,
                "usage": {"include": True},
            }
        ).encode("utf-8")
        for p in prompts
    ]


HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "User-Agent": "deeprepo-bench",
    "Authorization": "Bearer bench",
}


class AiohttpFloor:
    """``session.post`` + ``json.loads``, nothing else."""

    def __init__(self, port: int, concurrency: int) -> None:
        self.url = f"http://127.0.0.1:{port}{PATH}"
        self.concurrency = concurrency
        self.session: aiohttp.ClientSession | None = None

    async def batch(self, prompts: list[str]) -> list[str]:
        if self.session is None:
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0)
            self.session = aiohttp.ClientSession(connector=connector, headers=HEADERS)
        session, sem = self.session, asyncio.Semaphore(self.concurrency)

        async def one(body: bytes) -> str:
            async with sem, session.post(self.url, data=body) as resp:
                return answer(resp.status, await resp.read())

        return list(await asyncio.gather(*(one(b) for b in bodies(prompts))))

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None
        self.reply: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = bytes(self.buf[:end]).split(b"\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        reply, self.reply = self.reply, None
        if reply is not None:
            reply.set_result((int(lines[0].split(b" ", 2)[1]), body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(ConnectionError("closed"))


class RawFloor:
    """One request at a time per kept-alive connection, written with one ``write``."""

    def __init__(self, port: int, concurrency: int) -> None:
        self.port = port
        self.concurrency = concurrency
        self.idle: list[_Conn] = []
        head = f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
        self.head = (head + "Accept-Encoding: gzip, deflate\r\nContent-Length: ").encode()

    async def batch(self, prompts: list[str]) -> list[str]:
        loop, sem = asyncio.get_running_loop(), asyncio.Semaphore(self.concurrency)

        async def one(body: bytes) -> str:
            async with sem:
                if self.idle:
                    conn = self.idle.pop()
                else:
                    _, conn = await loop.create_connection(_Conn, "127.0.0.1", self.port)
                conn.reply = loop.create_future()
                conn.transport.write(self.head + b"%d\r\n\r\n" % len(body) + body)
                status, raw = await conn.reply
                self.idle.append(conn)
                return answer(status, raw)

        return list(await asyncio.gather(*(one(b) for b in bodies(prompts))))

    async def aclose(self) -> None:
        for conn in self.idle:
            conn.transport.close()
        self.idle.clear()


def answer(status: int, raw: bytes) -> str:
    """The reply's text, or an error string as the dispatcher would put it."""
    data = json.loads(raw)
    if status >= 400:
        return f"[llm error] HTTP {status}"
    return str(data["choices"][0]["message"]["content"])
