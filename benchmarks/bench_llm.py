"""LLM step benchmark: what our machinery adds to a model call, and how fast the embedded model is.

Run it as ``.venv/bin/python benchmarks/bench_llm.py`` (about 1-2 minutes on 2 cores;
``--quick`` for ~30 s). Two parts, printed as markdown tables and written into
``benchmarks/RESULTS.md`` between this script's own markers:

1. **Per-call overhead beside a direct SDK call.** A fake OpenAI-compatible server
   (``tests/llm/fake_openai_server.py``, scripted to answer every request at once with one fixed
   JSON completion) runs in a child process on 127.0.0.1, so its work does not compete with the
   client for this process's GIL, as with a real endpoint. Its handler sets TCP_NODELAY, as real
   servers do: without it, a kept-alive connection waits ~40 ms per answer (Nagle's algorithm
   against delayed ACKs: headers and body are two writes). Sequential calls of the same prompt and
   JSON-schema ``response_format``, timed one by one:

   (a) ``AsyncOpenAI(...).chat.completions.create`` on one client reused in one event loop
       (what an application calling the SDK itself would do): the baseline of every ratio;
   (a') the same with a new client per call, which is what the ``openai`` provider does on
       purpose (pooled connections are bound to an event loop), and (a'') a new client in a new
       event loop per call, which is what ``start_run`` must pay (one ``anyio.run`` per run);
   (b) ``orchestrator.llm.call.run_llm``: prompt rendering, request building, cache key, the
       provider (limiter, tenacity retrier, error mapping), schema validation, the record;
   (c) a one-step ``type: llm`` workflow (a YAML written to a temp dir, ``load_workflow``) run
       end to end by ``orchestrator.service.runner.start_run`` on ``memory://`` and on a SQLite file;
   (f) floors with no request at all: constructing an ``AsyncOpenAI`` client, and the
       ``ssl.create_default_context()`` inside it (it reads the system CA store, ~20 ms here).

   The variants are interleaved in rounds (order rotated each round) so that load from other
   sessions on this shared machine hits them alike; medians of all calls are reported.

2. **The embedded model** (SmolLM2-135M through the ``local`` provider, temperature 0, one fixed
   prompt): a cold process's time to first answer (import llama.cpp + load + answer, in child
   processes), model load time, and per ``max_tokens`` setting the median latency, the usage
   counts from the returned record, prompt tokens/s (from ``max_tokens=1`` calls: prefill plus
   one sampled token) and output tokens/s. Before each call the model's KV cache is reset, since
   llama-cpp-python otherwise reuses the previous call's prompt prefix and a repeated prompt
   would cost almost nothing to read; one row shows that reuse separately. ``distinct`` counts
   the different answers over the repeats (temperature 0 should give 1).

Targets are this script's own, chosen from what the numbers are for: the machinery should add
well under 1% to a hosted model call (~0.5-2 s for a short structured answer), so at most 1 ms for
``run_llm`` and 5 ms for a persisted one-step run; the embedded model should answer a cold
``orchestrator run`` within 3 s and write faster than a person reads (>= 20 tokens/s).
Wall-clock numbers belong here, never in pytest.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN, END = "<!-- bench_llm:begin -->", "<!-- bench_llm:end -->"
SECTION = "## LLM steps (`benchmarks/bench_llm.py`)"

TARGET_RUN_LLM_ADDED_US = 1000.0
TARGET_WORKFLOW_ADDED_US = 5000.0
TARGET_FIRST_ANSWER_S = 3.0
TARGET_OUTPUT_TOKENS_PER_S = 20.0

# -- the call being measured (identical in every variant) ---------------------------------------

MODEL = "fake-model"
KEY_ENV = "ORCHESTRATOR_BENCH_LLM_NO_KEY"
"""A variable nobody sets: a local endpoint then gets a dummy key, so a real OPENAI_API_KEY never leaves."""
SYSTEM = "You route customer support tickets. Answer only with JSON."
PROMPT = "Ticket: {{ ticket }}\nWhich category is it (billing, account, shipping, bug, other), and is it urgent?"
TICKET = "I was charged twice for my order 42"
SCHEMA: dict[str, Any] = {
    "title": "Triage", "type": "object",
    "properties": {"category": {"type": "string", "enum": ["billing", "account", "shipping", "bug", "other"]},
                   "urgent": {"type": "boolean"}},
    "required": ["category", "urgent"]}
ANSWER = {"category": "billing", "urgent": False}
MESSAGES = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT.replace("{{ ticket }}", TICKET)}]
"""What (a) sends; checked at warm-up to equal what run_llm renders and records."""
SDK_ARGUMENTS: dict[str, Any] = {
    "model": MODEL, "messages": MESSAGES, "temperature": 0, "seed": 0, "timeout": 60,
    "response_format": {"type": "json_schema", "json_schema": {"name": "Triage", "schema": SCHEMA, "strict": False}}}

WORKFLOW_YAML = """\
name: bench-llm
inputs:
  ticket: {{type: string}}
llm: {{provider: openai, model: {model}, base_url: "{base_url}", api_key_env: {key_env}, temperature: 0}}
steps:
  - id: classify
    type: llm
    inputs: {{ticket: $inputs.ticket}}
    system: {system}
    prompt: {prompt}
    output_schema: {schema}
output: classify
"""

# The local model's fixed prompts: a short one that makes it write on, and a long one to read.
STORY = "Write a long story about a lighthouse keeper and a storm."
LONG_PROMPT = ("Summarise the following notes in one sentence.\n"
               + " ".join(f"Note {i}: the night shift checked pump {i}, logged the pressure and reported no leaks."
                          for i in range(1, 21)))


# -- the fake server (a child process) -----------------------------------------------------------

def serve() -> int:
    """Child process: the tests' fake server, answering every request with the same completion
    at once; prints its base URL, serves until stdin closes."""
    from http.server import BaseHTTPRequestHandler

    from tests.llm.fake_openai_server import FakeOpenAI, completion

    body = completion(json.dumps(ANSWER), prompt_tokens=40, completion_tokens=9, model=MODEL)

    class FixedAnswer(FakeOpenAI):
        """Unscripted: no queue to fill and no request log growing over thousands of calls."""

        def _next(self, request: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
            return 200, {}, body

        def _handler(self) -> type[BaseHTTPRequestHandler]:
            class NoDelay(super()._handler()):  # type: ignore[misc]
                disable_nagle_algorithm = True

            return NoDelay

    server = FixedAnswer().start()
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()
    return 0


class ServerProcess:
    """The fake server in a child process, stopped by closing its stdin (killed if it lingers)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.close()
            raise SystemExit(f"the fake server did not start (said {self.base_url!r})")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- part 1: the variants ------------------------------------------------------------------------

def check_answer(content: str | None) -> None:
    if json.loads(content or "null") != ANSWER:
        raise SystemExit(f"unexpected answer {content!r}")


class Variants:
    """Each variant runs ``n`` sequential calls and returns their durations in seconds."""

    def __init__(self, base_url: str, workdir: Path):
        from orchestrator.bind.loader import load_workflow
        from orchestrator.llm import LLMConfig
        from orchestrator.store import open_store

        self.base_url = base_url
        self.config = LLMConfig(provider="openai", model=MODEL, base_url=base_url, api_key_env=KEY_ENV)
        path = workdir / "bench_llm.yaml"
        path.write_text(WORKFLOW_YAML.format(model=MODEL, base_url=base_url, key_env=KEY_ENV,
                                             system=json.dumps(SYSTEM), prompt=json.dumps(PROMPT),
                                             schema=json.dumps(SCHEMA)), encoding="utf-8")
        self.workflow = load_workflow(path)
        self.memory = open_store("memory://")
        self.sqlite = open_store(f"sqlite:///{workdir / 'bench_llm.db'}")

    def close(self) -> None:
        self.memory.close()
        self.sqlite.close()

    def client(self) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(base_url=self.base_url, api_key="unused", max_retries=0)

    @staticmethod
    def _timed_loop(n: int, call: Callable[[], Awaitable[None]]) -> list[float]:
        async def loop() -> list[float]:
            times = []
            for _ in range(n):
                t = time.perf_counter()
                await call()
                times.append(time.perf_counter() - t)
            return times

        return anyio.run(loop)

    def sdk_shared(self, n: int) -> list[float]:
        """(a) One client, reused for every call of the batch, in one event loop."""
        async def loop() -> list[float]:
            times = []
            async with self.client() as client:
                for _ in range(n):
                    t = time.perf_counter()
                    completion = await client.chat.completions.create(**SDK_ARGUMENTS)
                    check_answer(completion.choices[0].message.content)
                    times.append(time.perf_counter() - t)
            return times

        return anyio.run(loop)

    def client_construction(self, n: int) -> list[float]:
        """Floor: building an ``AsyncOpenAI`` client, no request (the openai provider builds one per call)."""
        times = []
        for _ in range(n):
            t = time.perf_counter()
            self.client()
            times.append(time.perf_counter() - t)
        return times

    @staticmethod
    def ssl_context(n: int) -> list[float]:
        """Floor: ``ssl.create_default_context()``, which every new httpx client calls (the CA store is read)."""
        import ssl

        times = []
        for _ in range(n):
            t = time.perf_counter()
            ssl.create_default_context()
            times.append(time.perf_counter() - t)
        return times

    async def _sdk_fresh_call(self) -> None:
        async with self.client() as client:
            completion = await client.chat.completions.create(**SDK_ARGUMENTS)
        check_answer(completion.choices[0].message.content)

    def sdk_fresh_client(self, n: int) -> list[float]:
        """(a') A new client per call, in one event loop (as the openai provider does)."""
        return self._timed_loop(n, self._sdk_fresh_call)

    def sdk_fresh_loop(self, n: int) -> list[float]:
        """(a'') A new client in a new event loop per call (what every start_run pays)."""
        times = []
        for _ in range(n):
            t = time.perf_counter()
            anyio.run(self._sdk_fresh_call)
            times.append(time.perf_counter() - t)
        return times

    async def _run_llm_call(self) -> Any:
        from orchestrator.llm.call import run_llm

        outcome = await run_llm(config=self.config, prompt=PROMPT, system=SYSTEM, variables={"ticket": TICKET},
                                output_schema=SCHEMA)
        if outcome.output != ANSWER:
            raise SystemExit(f"run_llm answered {outcome.output!r}")
        return outcome

    def run_llm(self, n: int) -> list[float]:
        """(b) ``run_llm`` in one event loop."""
        async def call() -> None:
            await self._run_llm_call()

        return self._timed_loop(n, call)

    def _workflow(self, store: Any, n: int) -> list[float]:
        from orchestrator.service.runner import start_run

        times = []
        for _ in range(n):
            t = time.perf_counter()
            result = start_run(store, self.workflow, {"ticket": TICKET})
            times.append(time.perf_counter() - t)
            if result.status != "succeeded" or result.output != ANSWER:
                raise SystemExit(f"the workflow run ended {result.status}: {result.error or result.output!r}")
        return times

    def workflow_memory(self, n: int) -> list[float]:
        """(c) ``start_run`` of the one-step workflow on ``memory://``."""
        return self._workflow(self.memory, n)

    def workflow_sqlite(self, n: int) -> list[float]:
        """(c) ``start_run`` of the one-step workflow on a SQLite file (WAL, the store's pragmas)."""
        return self._workflow(self.sqlite, n)

    def check_same_request(self) -> None:
        """(a) and (b) must send the same messages, or the comparison is between different calls."""
        outcome = anyio.run(self._run_llm_call)
        if outcome.record.messages != MESSAGES:
            raise SystemExit(f"run_llm sent {outcome.record.messages!r}, the SDK variant sends {MESSAGES!r}")


@dataclass
class Series:
    label: str
    run: Callable[[int], list[float]]
    times: list[float] = field(default_factory=list)

    @property
    def median_us(self) -> float:
        return statistics.median(self.times) * 1e6

    @property
    def p90_us(self) -> float:
        return statistics.quantiles(self.times, n=10)[-1] * 1e6


def measure_overhead(calls: int, batch: int) -> list[Series]:
    """Interleaved rounds of every variant against one fake server."""
    from orchestrator.llm.registry import reset_providers

    with ServerProcess() as server, tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        os.environ.pop(KEY_ENV, None)
        reset_providers()
        variants = Variants(server.base_url, Path(tmp))
        try:
            variants.check_same_request()
            series = [Series("(a) direct SDK, one client reused", variants.sdk_shared),
                      Series("(a') direct SDK, new client per call", variants.sdk_fresh_client),
                      Series("(a'') direct SDK, new client + new event loop per call", variants.sdk_fresh_loop),
                      Series("(b) run_llm", variants.run_llm),
                      Series("(c) start_run one-step workflow, memory://", variants.workflow_memory),
                      Series("(c) start_run one-step workflow, SQLite file", variants.workflow_sqlite),
                      Series("(f) floor: AsyncOpenAI(...) construction, no request", variants.client_construction),
                      Series("(f) floor: ssl.create_default_context()", variants.ssl_context)]
            for s in series:  # warm-up: imports, connections, the SQLite schema and workflow row
                s.run(min(5, batch))
            rounds = max(1, -(-calls // batch))
            for r in range(rounds):
                size = min(batch, calls - r * batch)
                for s in series[r % len(series):] + series[:r % len(series)]:
                    gc.collect()
                    s.times += s.run(size)
        finally:
            variants.close()
            reset_providers()
    return series


# -- part 2: the embedded model ------------------------------------------------------------------

def local_config(max_tokens: int) -> Any:
    from orchestrator.llm import LLMConfig

    return LLMConfig(provider="local", model="smollm2", temperature=0, max_tokens=max_tokens)


def load_model() -> Any:
    """The bundled model through the provider's own loader (cached per process), as ``(llama, lock)``.

    The loader is private to the provider; the benchmark calls it to time loading apart from answering.
    """
    from orchestrator.llm.providers import local

    return local.load_model(local.bundled_model_path())


def unload_model() -> None:
    """Forget the loaded model, so that the next :func:`load_model` reads the file again."""
    from orchestrator.llm.providers import local

    local.close_models()


def reset_kv() -> None:
    """Empty the model's KV cache: the next call reads its whole prompt, as a new prompt would be."""
    llama, lock = load_model()
    with lock:
        llama.reset()


def first_answer() -> int:
    """Child process: a cold start of the embedded model, each phase timed, printed as one JSON line."""
    t0 = time.perf_counter()
    from orchestrator.llm.call import run_llm

    t1 = time.perf_counter()
    import llama_cpp.llama  # noqa: F401  (what the provider imports on first use)

    t2 = time.perf_counter()
    load_model()
    t3 = time.perf_counter()
    outcome = anyio.run(lambda: run_llm(config=local_config(16), prompt=STORY))
    t4 = time.perf_counter()
    print(json.dumps({"orchestrator_import": t1 - t0, "llama_import": t2 - t1, "load": t3 - t2, "answer": t4 - t3,
                      "total": t4 - t0, "output_tokens": outcome.record.usage.output_tokens}))
    return 0


@dataclass
class ColdStart:
    process: float  # the parent's view: interpreter start to exit
    phases: dict[str, float]


def cold_start() -> ColdStart:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--first-answer"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    elapsed = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"the cold-start child failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return ColdStart(elapsed, json.loads(done.stdout.strip().splitlines()[-1]))


@dataclass
class Setting:
    """One kind of model call, repeated; the records' latency and usage are kept."""

    label: str
    prompt: str
    max_tokens: int
    schema: dict[str, Any] | None = None
    reset: bool = True
    latency: list[float] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    async def once(self) -> None:
        from orchestrator.llm.call import run_llm
        from orchestrator.spec.llm_errors import LLMStepError

        if self.reset:
            reset_kv()
        try:
            record = (await run_llm(config=local_config(self.max_tokens), prompt=self.prompt,
                                    output_schema=self.schema, validation_retries=0)).record
        except LLMStepError as exc:  # a JSON answer cut off by max_tokens: its record is what we time
            record = exc.record
        self.latency.append(record.latency)
        self.input_tokens.append(record.usage.input_tokens)
        self.output_tokens.append(record.usage.output_tokens)
        self.answers.append(record.response)

    def clear(self) -> None:
        for samples in (self.latency, self.input_tokens, self.output_tokens, self.answers):
            samples.clear()

    @property
    def median_latency(self) -> float:
        return statistics.median(self.latency)


STORY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}


def model_settings(quick: bool) -> list[Setting]:
    settings = [Setting("short prompt, prefill + 1 token", STORY, 1),
                Setting("long prompt, prefill + 1 token", LONG_PROMPT, 1),
                Setting("short prompt", STORY, 32)]
    if not quick:
        settings += [Setting("short prompt", STORY, 128),
                     Setting("short prompt, JSON schema (grammar)", STORY, 64, schema=STORY_SCHEMA)]
    settings.append(Setting("short prompt, KV prefix reused (no reset)", STORY, 32, reset=False))
    return settings


def measure_model(settings: list[Setting], repeat: int, loads: int) -> list[float]:
    """Load times (seconds), then the settings interleaved ``repeat`` times."""
    load_times = []
    for _ in range(loads):
        unload_model()
        gc.collect()
        t = time.perf_counter()
        load_model()
        load_times.append(time.perf_counter() - t)

    async def all_settings() -> None:
        for s in settings:  # warm-up: the thread pool, the grammar code path
            await s.once()
            s.clear()
        for _ in range(repeat):
            for s in settings:
                await s.once()

    anyio.run(all_settings)
    return load_times


# -- the report ----------------------------------------------------------------------------------

def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def markdown(header: str, columns: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([header, "", line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(line(r) for r in rows)])


def overhead_table(series: list[Series], calls: int, batch: int) -> str:
    by = {s.label[: s.label.index(")") + 1]: s for s in series}
    base = by["(a)"].median_us
    floors = {"(b)": by["(a')"], "(c)": by["(a'')"]}
    rows = []
    for s in series:
        key = s.label[: s.label.index(")") + 1]
        added = s.median_us - base
        floor = floors.get(key)
        target, ok = "", ""
        if key == "(b)":
            target, ok = f"<= {TARGET_RUN_LLM_ADDED_US:.0f} µs added", verdict(added <= TARGET_RUN_LLM_ADDED_US)
        elif key == "(c)":
            target, ok = f"<= {TARGET_WORKFLOW_ADDED_US:.0f} µs added", verdict(added <= TARGET_WORKFLOW_ADDED_US)
        rows.append([s.label, f"{s.median_us:.0f} µs", f"{s.p90_us:.0f} µs", f"{s.median_us / base:.2f}x",
                     "" if key in ("(a)", "(f)") else f"{added:+.0f} µs",
                     f"{s.median_us / floor.median_us:.2f}x of {floor.label[:floor.label.index(')') + 1]}"
                     if floor else "", target, ok])
    header = (f"Per-call overhead against a local fake OpenAI-compatible server (child process): {calls} sequential "
              f"calls per variant in interleaved rounds of {batch}; median and p90 per call")
    return markdown(header, ["variant", "median", "p90", "ratio to (a)", "added to (a)", "ratio to its floor",
                             "target", "PASS/MISS"], rows)


def startup_table(colds: list[ColdStart], load_times: list[float]) -> str:
    def med(key: str) -> float:
        return statistics.median(c.phases[key] for c in colds)

    process = statistics.median(c.process for c in colds)
    first = med("total")
    rows = [["cold process: interpreter start to exit (parent's clock)", f"{process:.2f} s", "", ""],
            ["cold time to first answer (import + load + 16-token answer)", f"{first:.2f} s",
             f"<= {TARGET_FIRST_ANSWER_S:.0f} s", verdict(first <= TARGET_FIRST_ANSWER_S)],
            ["  import orchestrator.llm.call", f"{med('orchestrator_import') * 1e3:.0f} ms", "", ""],
            ["  import llama_cpp", f"{med('llama_import') * 1e3:.0f} ms", "", ""],
            ["  model load, cold process", f"{med('load') * 1e3:.0f} ms", "", ""],
            ["  first answer (16 tokens, run_llm)", f"{med('answer') * 1e3:.0f} ms", "", ""],
            [f"model load, warm file cache (median of {len(load_times)})",
             f"{statistics.median(load_times) * 1e3:.0f} ms", "", ""]]
    header = f"Embedded SmolLM2-135M (`local` provider): start-up, median of {len(colds)} cold processes"
    return markdown(header, ["metric", "value", "target", "PASS/MISS"], rows)


def throughput_table(settings: list[Setting], repeat: int) -> tuple[str, float | None]:
    """The table, and the decode rate of the longest plain-text setting (the target's figure)."""
    prefill = {s.prompt: s.median_latency for s in settings if s.max_tokens == 1 and s.reset}
    rows, decode_rate, longest = [], None, 0
    for s in settings:
        lat = s.median_latency
        n_in, n_out = statistics.median(s.input_tokens), statistics.median(s.output_tokens)
        prompt_rate = f"{n_in / lat:.0f}" if s.max_tokens == 1 else ""
        decode = ""
        if s.max_tokens > 1 and s.reset and s.prompt in prefill and lat > prefill[s.prompt] and n_out > 1:
            rate = (n_out - 1) / (lat - prefill[s.prompt])
            decode = f"{rate:.0f}"
            if s.schema is None and s.max_tokens > longest:
                decode_rate, longest = rate, s.max_tokens
        rows.append([s.label, str(s.max_tokens), f"{n_in:.0f}", f"{n_out:.0f}", f"{lat * 1e3:.0f} ms",
                     prompt_rate, f"{n_out / lat:.0f}", decode, str(len(set(s.answers)))])
    target = ("" if decode_rate is None else
              f"; decode {decode_rate:.0f} tok/s at max_tokens {longest}: target >= {TARGET_OUTPUT_TOKENS_PER_S:.0f}"
              f" tok/s {verdict(decode_rate >= TARGET_OUTPUT_TOKENS_PER_S)}")
    fresh = {(s.prompt, s.max_tokens): set(s.answers) for s in settings if s.reset and s.schema is None}
    reused = [s for s in settings if not s.reset and (s.prompt, s.max_tokens) in fresh]
    if reused:
        same = all(set(s.answers) == fresh[(s.prompt, s.max_tokens)] for s in reused)
        target += ("; with the prompt prefix reused the answer is " + ("the same as" if same else "NOT the same as")
                   + " after a reset (temperature 0)")
    llama, _ = load_model()
    header = (f"Embedded SmolLM2-135M throughput: temperature 0, KV cache reset before each call unless noted, "
              f"median of {repeat} (latency and token counts from the returned record); llama.cpp threads: "
              f"{llama.n_threads} decode, {llama.n_threads_batch} prefill{target}")
    table = markdown(header, ["call", "max_tokens", "in tok", "out tok", "latency", "prompt tok/s",
                              "out tok/s (incl. prefill)", "decode tok/s", "distinct answers"], rows)
    return table, decode_rate


def write_results(text: str) -> None:
    block = f"{BEGIN}\n{text}\n{END}"
    current = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    if BEGIN in current and END in current:
        head, rest = current.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        RESULTS.write_text(head + block + tail, encoding="utf-8")
    else:
        RESULTS.write_text(current.rstrip() + f"\n\n{SECTION}\n\n{block}\n", encoding="utf-8")


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("openai", "llama-cpp-python"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} absent")
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (~30 s): 60 calls per variant, 2 model repeats, fewer settings, 1 cold start")
    parser.add_argument("--calls", type=int, help="calls per overhead variant (default 300; quick 60)")
    parser.add_argument("--batch", type=int, help="calls per variant per interleaved round (default 25; quick 10)")
    parser.add_argument("--repeat", type=int, help="repeats of each model setting (default 5; quick 2)")
    parser.add_argument("--cold", type=int, help="cold processes timed to first answer (default 3; quick 1)")
    parser.add_argument("--skip-overhead", action="store_true", help="only the embedded model")
    parser.add_argument("--skip-model", action="store_true", help="only the per-call overhead")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the fake server's child process
    parser.add_argument("--first-answer", action="store_true", help=argparse.SUPPRESS)  # a cold-start child
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    if args.first_answer:
        return first_answer()
    calls = max(2, args.calls or (60 if args.quick else 300))
    batch = max(1, args.batch or (10 if args.quick else 25))
    repeat = max(1, args.repeat or (2 if args.quick else 5))
    cold = max(1, args.cold or (1 if args.quick else 3))
    t_all = time.perf_counter()

    tables = []
    if not args.skip_overhead:
        series = measure_overhead(calls, batch)
        tables.append(overhead_table(series, calls, batch))
    if not args.skip_model:
        try:
            load_model()
        except Exception as exc:  # the local-llm extra is optional: report why, measure the rest
            tables.append(f"Embedded model not measured: {exc}")
        else:
            unload_model()
            colds = [cold_start() for _ in range(cold)]
            settings = model_settings(args.quick)
            load_times = measure_model(settings, repeat, loads=max(3, repeat))
            tables.append(startup_table(colds, load_times))
            tables.append(throughput_table(settings, repeat)[0])

    header = (f"bench_llm: {_dt.date.today().isoformat()}, Python {platform.python_version()}, {versions()}, "
              f"{os.cpu_count()} CPUs, {platform.machine()}{', quick' if args.quick else ''}; "
              f"total {time.perf_counter() - t_all:.0f} s")
    text = "\n\n".join([header, *tables])
    print(text)
    if not args.no_write:
        write_results(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
