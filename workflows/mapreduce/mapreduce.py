"""Step functions and checks of the map-reduce example.

``retrieve`` picks the documents of the local corpus (``corpus/*.md``) that share words with the
question, so how many there are is known only at run time; ``summarize`` (an LLM step with
``for_each: retrieve.docs``) summarises each one, and its ``grounded`` gate checks each summary
against its own document (a failing one pauses that instance only); ``combine`` joins the summaries
in document order and the ``covers_every_document`` critic checks the digest against the retrieval.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.spec.model import GateResult

CORPUS = Path(__file__).with_name("corpus")
STOPWORDS = {"what", "which", "when", "with", "from", "that", "this", "they", "there", "about", "have", "does"}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3 and w not in STOPWORDS}


def retrieve(question: str, max_docs: int = 5) -> dict[str, Any]:
    """The documents sharing at least one word with the question, most shared words first (ties by file
    name), at most ``max_docs``: ``{"docs": [{"id", "title", "text", "overlap"}]}``."""
    wanted = _words(question)
    found = []
    for path in sorted(CORPUS.glob("*.md")):
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        title, text = lines[0].lstrip("# ").strip(), " ".join(line.strip() for line in lines[1:]).strip()
        overlap = len(wanted & _words(title + " " + text))
        if overlap:
            found.append({"id": path.stem, "title": title, "text": text, "overlap": overlap})
    found.sort(key=lambda d: (-d["overlap"], d["id"]))
    return {"docs": found[:max_docs]}


def grounded(output: Any, ctx: Any, min_share: float = 0.5) -> GateResult:
    """Per instance: the share of the summary's words that come from its own document (``ctx.inputs['doc']``)."""
    doc = (ctx.inputs or {}).get("doc") or {}
    said, source = _words(str(output)), _words(f"{doc.get('title', '')} {doc.get('text', '')}")
    if not said:
        return GateResult(False, 0.0, "the summary is empty")
    share = len(said & source) / len(said)
    reason = f"{len(said & source)} of {len(said)} words come from {doc.get('id', 'its document')}"
    return GateResult(share >= min_share, round(share, 3), reason, {"document": doc.get("id")})


def combine(docs: dict[str, Any], summaries: list[Any]) -> str:
    """The digest: one line per document, in retrieval order, with its summary."""
    return "\n".join(f"- {doc['title']}: {' '.join(str(summary).split())}"
                     for doc, summary in zip(docs["docs"], summaries, strict=True) if summary is not None)


def covers_every_document(retrieve: dict[str, Any], combine: str) -> GateResult:
    """Critic: every retrieved document has its line in the digest (checks step N against step N+2)."""
    missing = [d["title"] for d in retrieve["docs"] if f"- {d['title']}:" not in combine]
    if missing:
        return GateResult(False, 0.0, f"the digest leaves out {', '.join(missing)}", {"missing": missing})
    return GateResult(True, 1.0, f"the digest covers all {len(retrieve['docs'])} retrieved documents")
