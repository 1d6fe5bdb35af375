"""A manual check of the traces against a real Arize Phoenix: what a run exports, as Phoenix reads it back.

Starts Phoenix (``pip install arize-phoenix``) on a free port unless ``--phoenix URL`` names a running
one, runs a small workflow on the embedded model (an LLM step with an ``llm_judge`` gate, an LLM
critic; needs the ``local-llm`` extra) with message content capture on, labels the run incorrect,
then asks Phoenix's GraphQL API for the spans it stored and prints one line per span: name,
OpenInference kind, duration, and whether its parent arrived. A dangling parent is reported.

    .venv/bin/python benchmarks/phoenix_check.py [--phoenix http://localhost:6006]

Exits 0 with a note when Phoenix is neither installed nor given.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = """
name: phoenix-check
llm: {provider: local, model: smollm2, temperature: 0, max_tokens: 60}
inputs:
  question: {type: string}
steps:
  - id: answer
    type: llm
    inputs: {question: $inputs.question}
    prompt: "Answer in one sentence: {{ question }}"
    gates:
      - {gate: llm_judge, rubric: "answers the question", threshold: 0.0}
  - id: check
    type: critic
    verifies: [answer]
    inputs: {answer: answer}
    prompt: "Is this a sentence? {{ answer }}"
output: answer
"""
SPANS_QUERY = """
query { projects { edges { node { name spans(first: 1000) { edges { node {
  name spanKind parentId startTime endTime context { traceId spanId } } } } } } } }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"Phoenix did not answer at {url}")


def start_phoenix(workdir: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    env = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_WORKING_DIR": str(workdir)}
    process = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url, time.monotonic() + 120)
    return url, process


def orchestrator(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=900)


def phoenix_spans(url: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": SPANS_QUERY}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)
    if answer.get("errors"):
        raise SystemExit(f"Phoenix's GraphQL API refused the query: {answer['errors']}")
    return [edge["node"] for project in answer["data"]["projects"]["edges"]
            for edge in project["node"]["spans"]["edges"]]


def seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phoenix", help="the URL of a running Phoenix (else one is started)")
    args = parser.parse_args()
    if args.phoenix is None and importlib.util.find_spec("phoenix") is None:
        print("Phoenix is not installed (pip install arize-phoenix) and --phoenix names none: nothing to check")
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        process = None
        url = args.phoenix
        if url is None:
            url, process = start_phoenix(work / "phoenix")
        try:
            env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{url}/v1/traces",
                   "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
                   "ORCHESTRATOR_DB": f"sqlite:///{work / 'runs.db'}"}
            workflow = work / "phoenix_check.yaml"
            workflow.write_text(WORKFLOW)
            ran = orchestrator("run", str(workflow), "--input", "question=What is the capital of France?", "--json",
                               env=env)
            run_id = json.loads(ran.stdout)["run_id"]
            print(f"run {run_id}: exit {ran.returncode}")
            orchestrator("label", run_id, "--incorrect", "--reason", "phoenix check", env=env)
            time.sleep(2)  # Phoenix ingests what it received in the background
            spans = phoenix_spans(url)
        finally:
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
    ids = {s["context"]["spanId"] for s in spans}
    print(f"{len(spans)} spans in {len({s['context']['traceId'] for s in spans})} trace(s):")
    for s in sorted(spans, key=lambda s: s["startTime"]):
        parent = "root" if not s["parentId"] else ("parent ok" if s["parentId"] in ids else "PARENT MISSING")
        print(f"  {s['name']:<28} {s['spanKind']:<10} {seconds(s['startTime'], s['endTime']):8.3f} s  {parent}")
    dangling = [s["name"] for s in spans if s["parentId"] and s["parentId"] not in ids]
    print("no dangling parents" if not dangling else f"dangling parents: {dangling}")


if __name__ == "__main__":
    main()
