"""The Python twin of triage.yaml: the same LLM steps written with ``@wf.llm`` and ``wf.llm_step``."""

import triage_tools

from orchestrator import Workflow

wf = Workflow("llm-triage", inputs={"ticket": {"type": "string"}}, output="reply",
              llm={"provider": "openai", "model": "gpt-4o-mini", "temperature": 0})

wf.llm_step(id="classify", agent="classifier", inputs={"ticket": "$inputs.ticket"},
            system="You route support tickets.",
            prompt="Ticket:\n{{ ticket }}\nAnswer with the category.\n",
            output_schema=triage_tools.Category, retry=2,
            gates=[{"gate": "one_of", "field": "category", "values": ["billing", "bug", "other"]}],
            on_gate_fail="pause")

wf.llm(id="reply", agent="writer", inputs={"category": "classify.category", "ticket": "$inputs.ticket"},
       needs="the ticket's category, one of billing, bug or other",
       prompt="Write a one-line reply to a {{ category }} ticket: {{ ticket }}",
       tools=[triage_tools.lookup_order], max_turns=3)(triage_tools.sign)
