"""The ticket-queue example defined in Python; ``tickets.yaml`` defines exactly the same steps (equal specs and
content hashes, a test proves it). Each ticket runs the child workflow ``triage.yaml``.

    orchestrator run workflows/tickets/tickets_py.py
"""

import tickets

from orchestrator import Workflow

wf = Workflow("ticket-queue", version=1, output="report",
              inputs={"queue": {"type": "string", "default": "tickets.json",
                                "description": "a JSON list of tickets, next to this file"}})

wf.step(id="load", type="retrieval", agent="inbox", inputs={"queue": "$inputs.queue"},
        gates=[{"gate": "required_fields", "fields": ["tickets"]}])(tickets.load_queue)

# one child run per ticket: per_ticket[0], per_ticket[1], ... (a pause inside one leaves the others going)
wf.workflow_step(id="per_ticket", agent="triage", workflow="triage.yaml", for_each="load.tickets", max_parallel=2,
                 inputs={"ticket": "$item"}, gates=[{"gate": "required_fields", "fields": ["route", "policy", "text"]}])

wf.step(id="report", type="reasoning", agent="lead", inputs={"answers": "per_ticket"},
        gates=[{"gate": "required_fields", "fields": ["tickets", "by_route", "policies"]}])(tickets.report)
