"""The loopback server's HTTP side: a threaded server on 127.0.0.1 whose handler reads
each POST, asks its :class:`Responder` what to do, waits as told, then answers or drops
the connection (a reset, as a crashed provider would)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple, Protocol

__all__ = ["HTTPServer", "Responder", "Response"]


class Response(NamedTuple):
    """What to do with one request: wait ``wait_s`` (cut short, with a reset, when the
    server stops), then send ``data`` as JSON, or reset the connection when it is None."""

    status: int = 200
    data: bytes | None = None
    headers: Mapping[str, str] = {}
    wait_s: float = 0.0


class Responder(Protocol):
    """The scripted side a handler asks (``LoopbackServer``)."""

    def respond(self, path: str, raw: bytes, headers: dict[str, str]) -> Response:
        """Record the request and decide its answer."""
        ...

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds; True when the server stopped meanwhile."""
        ...


class HTTPServer(ThreadingHTTPServer):
    """Serves :class:`_Handler` for ``responder`` on ``address``."""

    daemon_threads = True
    # Benchmarks open dozens of connections at once; the default backlog of 5 drops SYNs.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], responder: Responder) -> None:
        super().__init__(address, _Handler)
        self.responder = responder


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one write (flushed after each request), and Nagle is
    # off: a split reply otherwise waits ~40 ms on the client's delayed ACK.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: HTTPServer

    def log_message(self, format: str, *args: object) -> None:
        """Silence per-request logging."""

    def do_POST(self) -> None:
        responder = self.server.responder
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        r = responder.respond(self.path.split("?", 1)[0], raw, headers)
        if (r.wait_s > 0 and responder.wait_stopped(r.wait_s)) or r.data is None:
            self._reset()
            return
        try:
            self.send_response(r.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(r.data)))
            for k, v in r.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(r.data)
        except OSError:
            self.close_connection = True  # the client hung up first

    def _reset(self) -> None:
        """Close the connection without a reply (RST, not a graceful FIN)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
