"""llama-cpp-python's own OpenAI-compatible server on 127.0.0.1, serving the embedded SmolLM2 GGUF.

Started as a real subprocess (``python -m llama_cpp.server``); its access log is kept, so a test
counts the requests the server answered, and with which status, from outside the process.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

STARTUP_DEADLINE = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    def __init__(self, log: Path) -> None:
        pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python[server] (the local-llm extra)")
        from orchestrator.llm.providers.local import model_path

        self.port = free_port()
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path("smollm2")), "--model_alias",
             "smollm2", "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048"],
            stdout=log.open("w"), stderr=subprocess.STDOUT)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("llama_cpp.server did not answer within the deadline")

    def statuses(self) -> list[int]:
        """The status of every chat completion the server answered, in order (from its access log)."""
        return [int(m) for m in re.findall(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', self.log.read_text())]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
