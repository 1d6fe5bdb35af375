"""A scripted OpenAI-compatible server on 127.0.0.1 for the provider tests.

Each test queues the responses (status, headers, JSON body) that ``POST /v1/chat/completions``
returns in order, and reads back the JSON body of every request the SDK sent. A request with
``stream: true`` gets its scripted completion as server-sent events (``data: {chunk}`` ... ``data: [DONE]``):
the content in pieces of four characters, each tool call's arguments in pieces of five, the finish
reason, and the usage in a last chunk of its own when ``stream_options.include_usage`` asked for it;
:meth:`FakeOpenAI.respond_stream` scripts the chunks themselves.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(content: str | None = None, *, tool_calls: list[dict[str, Any]] | None = None,
               finish_reason: str = "stop", prompt_tokens: int = 11, completion_tokens: int = 7,
               model: str = "fake-model") -> dict[str, Any]:
    """A chat.completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


CONTENT_PIECE = 4
ARGUMENTS_PIECE = 5


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def stream_chunks(body: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """A chat.completion body as the chunks a server streams for it."""
    choice = body["choices"][0]
    message = choice["message"]
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": 0, "model": body["model"]}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces(message.get("content") or "", CONTENT_PIECE)]
    for i, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                   for piece in pieces(call["function"]["arguments"], ARGUMENTS_PIECE)]
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": body["usage"]})
    return chunks


class FakeOpenAI:
    """The server, its script and what it received."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str], dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.delay = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()
        self.stream_held_after: int | None = None
        self._stream_open = threading.Event()
        self._stream_open.set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def respond(self, body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.script.append((status, headers or {}, body))

    def respond_stream(self, chunks: list[dict[str, Any]]) -> None:
        """Answer the next (streaming) request with exactly these chunks, then ``[DONE]``."""
        self.script.append((200, {}, {"__chunks__": chunks}))

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._open.set()  # a held request is answered (to nobody) rather than keeping a thread
        self._stream_open.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def hold(self) -> None:
        """Requests from now on are counted as they arrive but answered only after :meth:`release`
        (a test kills the client while its request waits)."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def hold_stream_after(self, events: int) -> None:
        """A streamed answer stops after its first ``events`` server-sent events until :meth:`release_stream`
        (a test looks at what the client shows while the answer is half written)."""
        self.stream_held_after = events
        self._stream_open.clear()

    def release_stream(self) -> None:
        self._stream_open.set()

    def _next(self, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
        self._open.wait(timeout=120)
        with self._lock:
            if not self.script:
                return 500, {}, {"error": {"message": "the test scripted no more responses", "type": "server_error"}}
            return self.script.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.request_headers.append({k.lower(): v for k, v in self.headers.items()})
                headers: dict[str, str]
                if self.path.rstrip("/") != "/v1/chat/completions":
                    status, headers, answer = 404, {}, {"error": {"message": f"no route {self.path}"}}
                    fake.requests.append(body)
                else:
                    with fake._lock:
                        fake.in_flight += 1
                        fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                    try:
                        if fake.delay:
                            time.sleep(fake.delay)
                        status, headers, answer = fake._next(body)
                    finally:
                        with fake._lock:
                            fake.in_flight -= 1
                if body.get("stream") and status == 200 and ("choices" in answer or "__chunks__" in answer):
                    usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    chunks = answer.get("__chunks__") or stream_chunks(answer, include_usage=usage)
                    self.send_events(chunks, headers)
                    return
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def send_events(self, chunks: list[dict[str, Any]], headers: dict[str, str]) -> None:
                events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(sum(len(e) for e in events)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for sent, event in enumerate(events):  # one write per event, as a server that generates them would
                    if sent == fake.stream_held_after:
                        fake._stream_open.wait(timeout=120)
                    self.wfile.write(event)
                    self.wfile.flush()

        return Handler
