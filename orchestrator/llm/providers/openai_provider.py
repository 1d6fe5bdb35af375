"""Any OpenAI-compatible chat API (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio...).

Uses the official ``openai`` SDK with its own retries switched off: retries are done here with
tenacity so they honour ``Retry-After``, are capped, and release the concurrency slot while
waiting. One :class:`anyio.CapacityLimiter` per endpoint (per event loop) caps concurrent requests across all
steps of a run, because rate limits are per endpoint and key, not per step.

Errors a user must fix (no key, wrong URL, unknown model, rejected key) become one
:class:`~orchestrator.spec.llm_errors.LLMError` line naming the endpoint and model.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import re
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from orchestrator.llm.providers.base import ChatRequest, ChatResponse, TextSink
from orchestrator.spec.llm_errors import LLMError
from orchestrator.spec.llm_records import ToolCallInfo

if TYPE_CHECKING:
    import anyio
    from openai import AsyncOpenAI
    from tenacity import RetryCallState

#: Longest wait between two attempts, whatever ``Retry-After`` says: a step should fail
#: visibly rather than sleep for an hour.
MAX_RETRY_WAIT = 60.0
_RETRY_STATUS = frozenset({408, 409, 429})
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_NO_LOOP = object()


@functools.cache
def _ssl_context() -> Any:
    """One default SSL context per process, shared by every client (it is immutable once built)."""
    import ssl

    return ssl.create_default_context()


def is_local_url(base_url: str) -> bool:
    """An endpoint on this machine (a local server needs no real key)."""
    host = urlparse(base_url).hostname or ""
    return host in _LOCAL_HOSTS or host.startswith("127.")


def resolve_api_key(base_url: str, api_key_env: str) -> str:
    """The key from ``$api_key_env``; a dummy for local servers; else an error naming the variable."""
    key = os.environ.get(api_key_env)
    if key:
        return key
    if is_local_url(base_url):
        return "unused"
    raise LLMError(f"no API key for the LLM endpoint {base_url}: set the environment variable {api_key_env}")


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``Retry-After`` in seconds)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
            return float(value) * scale
    return None


_INVALID_REQUEST = re.compile(r"validation error|Input should be|Field required|Extra inputs are not permitted|"
                              r"invalid_request|Unrecognized request argument", re.IGNORECASE)
"""What a server says when it rejects the request itself: retrying the same request cannot help, even
when it answers with a 5xx (llama-cpp-python's server answers a request it cannot parse with 500)."""
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "tool_choice", "tools")
"""A rejected request naming one of these refused the structured-output format it was asked for."""

MODE_FALLBACK = {"json_schema": "json_object", "json_object": "tools", "tools": "prompt"}
"""``structured_output: auto``: the next format to try when a server refuses one."""
OUTPUT_TOOL = "final_answer"
"""The function a ``tools``-mode request asks the model to call with its answer as the arguments."""


def is_invalid_request(exc: BaseException) -> bool:
    """The server refused the request as invalid (a 4xx other than a rate limit, or a 5xx saying so)."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return False
    if 400 <= exc.status_code < 500:
        return exc.status_code not in _RETRY_STATUS
    return bool(_INVALID_REQUEST.search(str(exc.message)))


def refused_format(exc: BaseException) -> bool:
    """An invalid request whose message names the structured-output format it asked for."""
    return is_invalid_request(exc) and any(word in str(getattr(exc, "message", "")) for word in _FORMAT_WORDS)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, dropped connections; never a request the
    server called invalid."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return not is_invalid_request(exc) and (exc.status_code in _RETRY_STATUS or exc.status_code >= 500)
    return False


def schema_instruction(schema: dict[str, Any]) -> str:
    """The output schema told in words, with the shape of an answer (small models copy a schema otherwise)."""
    shape = {name: f"<{spec.get('type', 'value')}>" if isinstance(spec, dict) else "<value>"
             for name, spec in (schema.get("properties") or {}).items()}
    return ("Answer with only a JSON object, no other text, shaped like " + json.dumps(shape)
            + ", that matches this JSON Schema: " + json.dumps(schema, separators=(",", ":")))


def with_instruction(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The messages with ``text`` appended to the last user message (a new user message if there is none)."""
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        if out[index].get("role") == "user" and isinstance(out[index].get("content"), str):
            out[index] = {**out[index], "content": f"{out[index]['content'].rstrip()}\n\n{text}"}
            return out
    return [*out, {"role": "user", "content": text}]


class FormatRefused(Exception):
    """The server refused the structured-output format of the request (``auto`` tries the next one)."""

    def __init__(self, error: LLMError) -> None:
        super().__init__(str(error))
        self.error = error


def retry_wait(state: RetryCallState) -> float:
    """``Retry-After`` when the server sent one, else exponential backoff with jitter; capped."""
    exc = state.outcome.exception() if state.outcome else None
    delay = _retry_after(exc) if exc is not None else None
    if delay is None:
        delay = min(0.5 * 2 ** (state.attempt_number - 1), 16.0) * (0.5 + random.random())
    return min(delay, MAX_RETRY_WAIT)


def _schema_name(schema: dict[str, Any]) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "output"))[:64]
    return name or "output"


class OpenAIProvider:
    """Chat completions against one OpenAI-compatible endpoint."""

    name = "openai"

    def __init__(self, *, base_url: str, api_key_env: str = "OPENAI_API_KEY", max_concurrency: int = 4):
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self._api_key = resolve_api_key(base_url, api_key_env)
        # A limiter belongs to one event loop, and a process may run several loops in turn.
        self._limiters: weakref.WeakKeyDictionary[Any, anyio.CapacityLimiter] = weakref.WeakKeyDictionary()
        self._fallback: dict[object, anyio.CapacityLimiter] = {}
        self.formats: dict[str, str] = {}
        """``structured_output: auto``: per model, the format this endpoint last accepted."""

    def _limiter(self) -> anyio.CapacityLimiter:
        import anyio

        try:
            loop: Any = asyncio.get_running_loop()
            store: Any = self._limiters
        except RuntimeError:  # trio
            loop, store = _NO_LOOP, self._fallback
        limiter: anyio.CapacityLimiter | None = store.get(loop)
        if limiter is None:
            limiter = store[loop] = anyio.CapacityLimiter(self.max_concurrency)
        return limiter

    def _client(self) -> AsyncOpenAI:
        """A client for one connection (closed after it), its chat resource loaded.

        Pooled connections are bound to the event loop that opened them, and a client dropped
        after its loop closed fails while being garbage-collected in the next one; a model call
        takes far longer than the connection setup a shared client would save. The first one in a
        process imports the SDK (1-3 s) and its lazily loaded parts (~0.5 s more).
        """
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        # the SSL context is what costs (~20 ms reading the certificate store): build it once
        http = DefaultAsyncHttpxClient(verify=_ssl_context())
        client = AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0, http_client=http)
        client.chat.completions  # noqa: B018 -- loaded on first use: here, not in a timed call
        return client

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[OpenAIConnection]:
        """A client for the calls of one attempt, made in a worker thread (imports block whoever makes it)
        before any of them is timed; closed after the attempt."""
        import anyio.to_thread

        client = await anyio.to_thread.run_sync(self._client)
        async with client:
            yield OpenAIConnection(self, client)

    def _arguments(self, request: ChatRequest, mode: str | None) -> dict[str, Any]:
        """The SDK call's arguments; ``mode`` says how the output schema is asked for (None: no schema)."""
        messages = request.messages
        tools = list(request.tools or [])
        kwargs: dict[str, Any] = {"model": request.model, "temperature": request.temperature,
                                  "timeout": request.timeout}
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.seed is not None:
            kwargs["seed"] = request.seed
        schema = request.response_format
        if schema is not None and mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": _schema_name(schema), "schema": schema, "strict": False}}
        elif schema is not None and mode == "json_object":
            # servers that constrain JSON by a schema (llama.cpp, vLLM) read it here; the prompt says it for the rest
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
            messages = with_instruction(messages, schema_instruction(schema))
        elif schema is not None and mode == "tools":
            tools.append({"type": "function", "function": {
                "name": OUTPUT_TOOL, "description": "Give your final answer as the arguments.", "parameters": schema}})
            if len(tools) == 1:  # nothing else to call: the answer must come as this call
                kwargs["tool_choice"] = {"type": "function", "function": {"name": OUTPUT_TOOL}}
        elif schema is not None and mode == "prompt":
            messages = with_instruction(messages, schema_instruction(schema))
        kwargs["messages"] = messages
        if tools:
            kwargs["tools"] = tools
            if request.tools and request.tool_choice == "required" and "tool_choice" not in kwargs:
                kwargs["tool_choice"] = "required"
        if request.extra_body:
            kwargs["extra_body"] = request.extra_body
        if request.headers:
            kwargs["extra_headers"] = request.headers
        return kwargs

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """One answer, on a connection of its own."""
        async with self.connect() as connection:
            return await connection.complete(request)

    async def stream(self, request: ChatRequest, on_text: TextSink) -> ChatResponse:
        """One answer streamed to ``on_text``, on a connection of its own."""
        async with self.connect() as connection:
            return await connection.stream(request, on_text)

    async def complete_with(self, client: AsyncOpenAI, request: ChatRequest,
                            on_text: TextSink | None = None) -> ChatResponse:
        """One answer through ``client`` (streamed to ``on_text`` when given). With an output schema under
        ``structured_output: auto``, a server that refuses a format is asked again in the next (json_schema,
        json_object, tools, prompt), and the format it accepted is used first from then on."""
        if request.response_format is None:
            return await self._complete(client, request, None, fallback=False, on_text=on_text)
        if request.structured_output != "auto":
            return await self._complete(client, request, request.structured_output, fallback=False, on_text=on_text)
        mode: str | None = self.formats.get(request.model, "json_schema")
        while True:
            assert mode is not None
            try:
                response = await self._complete(client, request, mode, fallback=mode in MODE_FALLBACK,
                                                on_text=on_text)
            except FormatRefused:
                mode = MODE_FALLBACK[mode]
                continue
            self.formats[request.model] = mode
            return response

    async def _complete(self, client: AsyncOpenAI, request: ChatRequest, mode: str | None, *,
                        fallback: bool, on_text: TextSink | None = None) -> ChatResponse:
        import anyio
        import openai
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        limiter = self._limiter()
        kwargs = self._arguments(request, mode)
        tools_mode = mode == "tools"
        streamed = None if on_text is None else StreamedAnswer(on_text, tools_mode=tools_mode)

        def retryable(exc: BaseException) -> bool:
            # a stream that already handed out text is not asked again: its listener would get the text twice
            return is_transient(exc) and (streamed is None or not streamed.started)

        retrying = AsyncRetrying(retry=retry_if_exception(retryable), wait=retry_wait, sleep=anyio.sleep,
                                 stop=stop_after_attempt(request.max_retries + 1), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    async with limiter:
                        if streamed is None:
                            completion = await client.chat.completions.create(**kwargs)
                        else:
                            streamed.reset()
                            await self._read_stream(client, kwargs, streamed, request)
        except openai.OpenAIError as exc:
            error = self._error(exc, request)
            if fallback and refused_format(exc):
                raise FormatRefused(error) from None
            raise error from None
        if streamed is not None:
            return streamed.response(self.base_url, request)
        return self._response(completion, request, tools_mode=tools_mode)

    async def _read_stream(self, client: AsyncOpenAI, kwargs: dict[str, Any], streamed: StreamedAnswer,
                           request: ChatRequest) -> None:
        """Ask for the answer as server-sent events and feed each chunk to ``streamed``; the token counts
        come from the chunk that carries ``usage`` (the last one, asked for with ``include_usage``). A connection
        that breaks before any text was handed out is retried as any request is; after, the call fails."""
        import openai

        chunks = await client.chat.completions.create(**kwargs, stream=True,
                                                      stream_options={"include_usage": True})
        try:
            async with chunks:
                async for chunk in chunks:
                    streamed.add(chunk)
        except openai.APIConnectionError as exc:
            if not streamed.started:
                raise
            cause = exc.__cause__ or exc
            raise LLMError(f"the LLM endpoint {self.base_url} (model {request.model!r}) stopped streaming its "
                           f"answer midway: {_one_line(cause) or type(cause).__name__}") from None

    def _error(self, exc: Exception, request: ChatRequest) -> LLMError:
        import openai

        where = f"the LLM endpoint {self.base_url} (model {request.model!r})"
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(f"{where} did not answer within {request.timeout:g}s "
                            f"({request.max_retries + 1} attempts)")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return LLMError(f"cannot reach {where}: {_one_line(cause) or type(cause).__name__}")
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return LLMError(f"{where} rejected the API key (HTTP {exc.status_code}): check ${self.api_key_env}")
        if isinstance(exc, openai.NotFoundError):
            return LLMError(f"{where}: model or endpoint not found (HTTP 404): {_one_line(exc.message)}")
        if isinstance(exc, openai.APIStatusError):
            return LLMError(f"{where} failed with HTTP {exc.status_code}: {_one_line(exc.message)}")
        return LLMError(f"{where} failed: {_one_line(exc)}")

    def _response(self, completion: Any, request: ChatRequest, *, tools_mode: bool = False) -> ChatResponse:
        if not getattr(completion, "choices", None):
            raise LLMError(f"the LLM endpoint {self.base_url} (model {request.model!r}) returned no choices")
        choice = completion.choices[0]
        message = choice.message
        calls = [ToolCallInfo(id=call.id, name=call.function.name, arguments=call.function.arguments or "{}")
                 for call in (message.tool_calls or []) if getattr(call, "function", None) is not None]
        return answer_of(message.content or "", calls, choice.finish_reason, completion.usage,
                         getattr(completion, "model", None), tools_mode=tools_mode)


def answer_of(text: str, calls: list[ToolCallInfo], finish: str | None, usage: Any, model: str | None, *,
              tools_mode: bool) -> ChatResponse:
    """The response of a completion, whole or streamed: in ``tools`` mode the answer is the output function's
    arguments."""
    answer = next((c for c in calls if c.name == OUTPUT_TOOL), None) if tools_mode else None
    if answer is not None:  # the answer came as the output function's arguments
        text, finish = answer.arguments, "stop"
        calls = [c for c in calls if c.name != OUTPUT_TOOL]
    return ChatResponse(text=text, tool_calls=calls, finish_reason=finish,
                        input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                        output_tokens=getattr(usage, "completion_tokens", 0) or 0, model=model)


class StreamedAnswer:
    """The chunks of one streamed completion put back together: the text handed to the listener as it
    arrives, the tool calls accumulated from their argument deltas (by index), the finish reason, the usage.

    In ``tools`` mode the answer comes as the output function's arguments, so their deltas are what the
    listener gets; the deltas of other tool calls are not text and are only accumulated."""

    def __init__(self, on_text: TextSink, *, tools_mode: bool) -> None:
        self.on_text = on_text
        self.tools_mode = tools_mode
        self.reset()

    def reset(self) -> None:
        """Forget a stream that broke before it handed out anything (it is asked again)."""
        self.started = False
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.model: str | None = None

    def add(self, chunk: Any) -> None:
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:
            if choice.index != 0:
                continue
            self.finish = choice.finish_reason or self.finish
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                self.text.append(delta.content)
                self.hand_out(delta.content)
            for part in delta.tool_calls or []:
                call = self.calls.setdefault(part.index, {"id": "", "name": "", "arguments": []})
                function = part.function
                call["id"] = part.id or call["id"]
                if function is not None:
                    call["name"] = function.name or call["name"]
                    if function.arguments:
                        call["arguments"].append(function.arguments)
                        if self.tools_mode and call["name"] == OUTPUT_TOOL:
                            self.hand_out(function.arguments)

    def hand_out(self, text: str) -> None:
        self.started = True
        self.on_text(text)

    def response(self, base_url: str, request: ChatRequest) -> ChatResponse:
        if not self.text and not self.calls and self.finish is None:
            raise LLMError(f"the LLM endpoint {base_url} (model {request.model!r}) streamed no choices")
        calls = [ToolCallInfo(id=c["id"], name=c["name"], arguments="".join(c["arguments"]) or "{}")
                 for _, c in sorted(self.calls.items()) if c["name"]]
        return answer_of("".join(self.text), calls, self.finish, self.usage, self.model, tools_mode=self.tools_mode)


class OpenAIConnection:
    """The calls of one attempt on one client of an :class:`OpenAIProvider` (see :meth:`OpenAIProvider.connect`)."""

    name = "openai"

    def __init__(self, provider: OpenAIProvider, client: AsyncOpenAI) -> None:
        self.provider = provider
        self.client = client

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return await self.provider.complete_with(self.client, request)

    async def stream(self, request: ChatRequest, on_text: TextSink) -> ChatResponse:
        return await self.provider.complete_with(self.client, request, on_text)
