"""The reflection example defined in Python; ``reflection.yaml`` defines exactly the same steps (equal specs and
content hashes, a test proves it). The round it repeats is the child workflow ``draft_and_critique.yaml``.

    orchestrator run workflows/reflection/reflection_py.py --input brief="a reusable steel water bottle"
"""

import reflection

from orchestrator import Workflow

wf = Workflow("reflection", version=1, output="publish",
              inputs={"brief": {"type": "string", "description": "what to write"}})

# a child run per round (improve#1, improve#2, ...) until the critic passes the draft, at most 3 rounds
wf.workflow_step(id="improve", agent="reflection", workflow="draft_and_critique.yaml",
                 inputs={"brief": "$inputs.brief", "previous": "$previous", "round": "$iteration"},
                 repeat={"until": "output.critique.passed", "max": 3},
                 gates=[{"gate": "required_fields", "fields": ["draft", "critique", "round"]}])

wf.step(id="publish", type="action", agent="publisher", inputs={"final": "improve"},
        gates=[{"gate": "required_fields", "fields": ["text", "rounds"]}])(reflection.publish)
