"""The map-reduce example defined in Python; ``mapreduce.yaml`` defines exactly the same steps (equal specs
and content hashes, a test proves it).

    orchestrator run workflows/mapreduce/mapreduce_py.py --input question="which protective gear is replaced"
"""

import mapreduce

from orchestrator import Workflow

wf = Workflow("doc-digest", version=1, output="combine",
              inputs={"question": {"type": "string", "description": "what the digest is for"},
                      "max_docs": {"type": "integer", "default": 5}},
              llm={"provider": "local", "model": "smollm2", "temperature": 0, "max_tokens": 60})

wf.step(id="retrieve", type="retrieval", agent="retriever",
        inputs={"question": "$inputs.question", "max_docs": "$inputs.max_docs"},
        gates=[{"gate": "required_fields", "fields": ["docs"]}])(mapreduce.retrieve)

# one instance per document; the grounded gate judges each against its own document
wf.llm_step(id="summarize", agent="summarizer", for_each="retrieve.docs", max_parallel=2,
            inputs={"doc": "$item", "question": "$inputs.question"},
            system="You summarise documents in one sentence, using the document's own words.",
            prompt='Question: {{ question }}\nDocument "{{ doc.title }}": {{ doc.text }}\n'
                   "Summarise the document in one sentence.\n",
            inject_needs=False, gates=[{"gate": "mapreduce:grounded", "min_share": 0.5}])

wf.step(id="combine", type="reasoning", agent="editor", inputs={"docs": "retrieve", "summaries": "summarize"},
        gates=[{"gate": "not_empty"}])(mapreduce.combine)

wf.step(id="check", type="critic", agent="critic", verifies=["retrieve", "combine"],
        gates=[{"gate": "required_fields", "fields": ["passed", "reason"]}])(mapreduce.covers_every_document)
