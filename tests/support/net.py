"""Local ports for servers a test starts (SMTP, Prometheus), and a stub HTTP server in a thread
for the outbound client's tests (redirects, answers too large, no series)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


# What a stub answers: status, headers, and a body (bytes, or chunks sent until the client
# hangs up).
StubAnswer = tuple[int, dict[str, str], bytes | Iterable[bytes]]


class StubHttpServer:
    """An HTTP server on 127.0.0.1 in a thread, for clients under test: ``respond`` answers
    each request; every request is kept in ``seen`` and the body bytes written in ``sent``."""

    def __init__(self, respond: Callable[[SeenRequest], StubAnswer]):
        self.respond = respond
        self.seen: list[SeenRequest] = []
        self.sent = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StubHttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = SeenRequest(
                    self.command, self.path, dict(self.headers.items()), self.rfile.read(length)
                )
                stub.seen.append(seen)
                status, headers, body = stub.respond(seen)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                chunks = [body] if isinstance(body, bytes) else body
                try:
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        stub.sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = do_POST = _answer

        return Handler
