"""The routed support agent defined in Python; ``routing.yaml`` defines exactly the same steps (equal specs
and content hashes, a test proves it). The refund route's condition is a function, the others expressions.

    orchestrator run workflows/routing/routing_py.py --input ticket="I was charged twice for my order"
"""

import routing

from orchestrator import Workflow

HANDLER_GATES = [{"gate": "required_fields", "fields": ["policy", "advice"]}]

wf = Workflow("support-router", version=1, output="reply",
              inputs={"ticket": {"type": "string", "description": "the customer's message"}},
              llm={"provider": "local", "model": "smollm2", "temperature": 0, "max_tokens": 120})

wf.llm_step(id="classify", agent="router", system="You route customer support tickets. Answer only with JSON.",
            prompt="Ticket: {{ ticket }}\nIs it about a refund (money charged back), a technical problem (an error in "
                   "the app), or other?\n",
            output_schema={"type": "object", "properties": {"category": {"enum": ["refund", "technical", "other"]}},
                           "required": ["category"]},
            retry=2, gates=[{"gate": "one_of", "field": "category", "values": ["refund", "technical", "other"]}])

wf.step(id="refund", agent="billing", when=routing.is_refund, gates=HANDLER_GATES)(routing.refund_policy)
wf.step(id="technical", agent="engineer", when="classify.category == 'technical'",
        gates=HANDLER_GATES)(routing.tech_lookup)
wf.step(id="other", agent="desk", when="classify.category == 'other'", gates=HANDLER_GATES)(routing.general_help)

wf.llm_step(id="reply", agent="writer", join="any",
            inputs={"ticket": "$inputs.ticket", "refund": "refund", "technical": "technical", "other": "other"},
            system="You are a polite support agent. Reply in two sentences.",
            prompt="Customer ticket: {{ ticket }}\n"
                   "{% set handled = refund or technical or other %}Policy to apply ({{ handled.route }}): "
                   "{{ handled.advice }}\nWrite the reply to the customer.\n",
            gates=[{"gate": "llm_judge",
                    "rubric": "The reply applies the policy to the customer's problem and is polite.",
                    "threshold": 0.7},
                   {"gate": "max_words", "limit": 120}])
