"""The research example defined in Python; ``research.yaml`` defines exactly the same steps (equal specs
and content hashes, a test proves it).

    orchestrator run workflows/research/research_py.py
"""

import research

from orchestrator import Workflow

wf = Workflow("research-brief", version=1,
              description="A short cited brief on a topic, written from a local notes corpus by four agents.",
              inputs={"topic": {"type": "string", "default": "credit assignment in agentic workflows",
                                "description": "What the brief is about."}},
              output="publish")

wf.step(id="plan_questions", type="reasoning", agent="planner", inputs={"topic": "$inputs.topic"},
        description="Three sub-questions (definition, methods, pitfalls) and ranking keywords.",
        gates=[{"gate": "min_items", "count": 3, "field": "sub_questions"},
               {"gate": "not_empty", "field": "keywords"}])(research.plan_questions)

# one instance per sub-question: research[0], research[1], research[2]
wf.step(id="research", type="retrieval", agent="researcher", for_each="plan_questions.sub_questions",
        inputs={"plan": "plan_questions", "index": "$index"},
        needs="a sub-question with an aspect, and topic keywords", timeout=10,
        gates=[{"gate": "min_items", "name": "relevant_notes", "count": 2, "field": "findings",
                "score_field": "score", "threshold": 0.5},
               {"gate": "required_fields", "fields": ["question", "note_ids"]}])(research.research)

wf.step(id="write_draft", type="reasoning", agent="writer", inputs={"plan": "plan_questions", "parts": "research"},
        needs="per sub-question, findings with a note id and a one-sentence claim each",
        description="A markdown draft with one section per sub-question and [N-xx] citations.",
        retry={"attempts": 2, "backoff": 0.1},
        gates=[{"gate": "max_words", "limit": 400},
               {"gate": "regex", "pattern": r"\[N-\d{2}\]"},
               *({"gate": "evidence", "name": f"cites_{aspect}", "source": "research", "source_field": f"{i}.findings"}
                 for i, aspect in enumerate(("definition", "methods", "pitfalls")))])(research.write_draft)

wf.step(id="edit_review", type="critic", agent="editor", verifies=["write_draft", "research"],
        inputs={"draft": "write_draft", "plan": "plan_questions", "parts": "research"},
        gates=[{"gate": "required_fields", "fields": ["passed", "reason", "details.checks"]}])(research.edit_review)

wf.step(id="publish", type="action", agent="editor", inputs={"draft": "write_draft", "topic": "$inputs.topic"},
        after=["edit_review"],
        gates=[{"gate": "required_fields", "fields": ["topic", "text", "sources"]},
               {"gate": "min_items", "count": 3, "field": "sources"},
               {"gate": "similarity", "to": "write_draft", "field": "text", "threshold": 0.9}])(research.publish)
