"""Step functions of the multi-agent research example.

Four agents: a ``planner`` splits the topic into three sub-questions, one mapped step of the
``researcher`` agent answers each in parallel from a local notes corpus (``notes.json``;
``for_each: plan_questions.sub_questions``, instances ``research[0..2]``), a ``writer`` merges
the list of findings into a cited draft (fan-in), and an ``editor`` critic checks
that every citation comes from the research and every sub-question is answered before the
``editor`` publishes. Offline and deterministic.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.spec.model import GateResult

if TYPE_CHECKING:
    from orchestrator.spec.context import StepContext

HERE = Path(__file__).resolve().parent
NOTES: list[dict[str, Any]] = json.loads((HERE / "notes.json").read_text(encoding="utf-8"))["notes"]
NOTES_BY_ID = {n["id"]: n for n in NOTES}

ASPECTS: list[tuple[str, str]] = [
    ("definition", "What is {topic}?"),
    ("methods", "Which methods address {topic}?"),
    ("pitfalls", "What goes wrong with {topic} in practice?"),
]
STOPWORDS = {"in", "of", "the", "a", "an", "for", "and", "on", "to", "with", "how", "what"}
MIN_SCORE = 0.25
MAX_FINDINGS = 3
CITATION = re.compile(r"\[(N-\d{2})\]")


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def plan_questions(topic: str) -> dict[str, Any]:
    """Planner: one sub-question per aspect, plus the keywords researchers rank notes by."""
    topic = " ".join(topic.split())
    keywords = [_stem(w) for w in re.findall(r"[a-z0-9-]+", topic.lower()) if w not in STOPWORDS]
    subs = [{"id": aspect, "aspect": aspect, "question": template.format(topic=topic)}
            for aspect, template in ASPECTS]
    return {"topic": topic, "keywords": keywords, "sub_questions": subs}


def _score(note: dict[str, Any], keywords: list[str]) -> float:
    if not keywords:
        return 0.0
    text = " ".join([note["title"], note["text"], *note["tags"]]).lower()
    return round(sum(k in text for k in keywords) / len(keywords), 3)


def research(plan: dict[str, Any], index: int, ctx: StepContext | None = None) -> dict[str, Any]:
    """Researcher: answer sub-question ``index`` with the best-matching notes of its aspect."""
    sub = plan["sub_questions"][index]
    scored = [(n, _score(n, plan["keywords"])) for n in NOTES if n["aspect"] == sub["aspect"]]
    scored = sorted(((n, s) for n, s in scored if s >= MIN_SCORE), key=lambda p: (-p[1], p[0]["id"]))
    findings = [{"id": n["id"], "title": n["title"], "text": n["text"], "score": s}
                for n, s in scored[:MAX_FINDINGS]]
    out: dict[str, Any] = {"question_id": sub["id"], "question": sub["question"], "findings": findings,
                           "note_ids": [f["id"] for f in findings]}
    if ctx is not None and ctx.next_needs:
        out["for_next"] = [need.to_json() for need in ctx.next_needs]
    return out


def _first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return match.group(1) if match else text


def write_draft(plan: dict[str, Any], parts: list[dict[str, Any]]) -> str:
    """Writer (fan-in): one section per sub-question, one cited sentence per finding."""
    lines = [f"# {plan['topic'][:1].upper()}{plan['topic'][1:]}", ""]
    for part in parts:
        lines.append(f"## {part['question']}")
        for f in part["findings"]:
            lines.append(f"- {_first_sentence(f['text'])} [{f['id']}]")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def edit_review(draft: str, plan: dict[str, Any], parts: list[dict[str, Any]]) -> GateResult:
    """Editor (critic): every citation must come from the research; every question must be answered."""
    researched = {i for part in parts for i in part["note_ids"]}
    cited = CITATION.findall(draft)
    unknown = sorted(set(cited) - researched)
    sections = re.split(r"^## ", draft, flags=re.M)[1:]
    answered = {s.splitlines()[0].strip(): bool(CITATION.search(s)) for s in sections}
    unanswered = [q["question"] for q in plan["sub_questions"] if not answered.get(q["question"])]
    checks = {"citations_known": not unknown, "all_questions_answered": not unanswered,
              "has_citations": bool(cited)}
    details = {"cited": sorted(set(cited)), "unknown": unknown, "unanswered": unanswered, "checks": checks}
    score = round(sum(checks.values()) / len(checks), 3)
    if all(checks.values()):
        return GateResult(True, score, f"draft cites {len(set(cited))} researched notes and answers all "
                                       f"{len(plan['sub_questions'])} questions", details)
    problems = []
    if unknown:
        problems.append(f"cites notes nobody researched: {', '.join(unknown)}")
    if unanswered:
        problems.append(f"unanswered: {'; '.join(unanswered)}")
    if not cited:
        problems.append("no citations")
    return GateResult(False, score, "draft rejected: " + "; ".join(problems), details)


def publish(draft: str, topic: str) -> dict[str, Any]:
    """Editor: the published piece with its source list."""
    cited = list(dict.fromkeys(CITATION.findall(draft)))
    sources = [{"id": i, "title": NOTES_BY_ID[i]["title"]} for i in cited if i in NOTES_BY_ID]
    return {"topic": topic, "text": draft, "sources": sources, "word_count": len(draft.split())}
