"""An HTTP receiver on 127.0.0.1 for notification tests: records every request, answers from a script.

``answers`` is a list of status codes used in order (200 once it is empty). With ``hold`` set, the first
request is recorded and then held unanswered until ``release()`` (a sender killed mid-delivery).
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


class Receiver:
    def __init__(self, *, answers: list[int] | None = None, hold: bool = False, port: int = 0) -> None:
        self.requests: list[Received] = []
        self.answers = list(answers or [])
        self.hold = hold
        self.arrived = threading.Event()
        self.released = threading.Event()
        self.port = port
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server protocol)
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                first = not receiver.requests
                receiver.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
                receiver.arrived.set()
                if receiver.hold and first:
                    receiver.released.wait(30)
                    return  # never answered: the sender that made it is gone
                code = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def release(self) -> None:
        self.released.set()

    def stop(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def refusing_port() -> tuple[socket.socket, int]:
    """A port on 127.0.0.1 that is bound but not listening: connecting to it is refused, as to a receiver
    that is down, and nobody else takes the port until the socket is closed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, sock.getsockname()[1]
