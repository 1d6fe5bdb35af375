"""The hello example defined in Python; ``hello.yaml`` defines exactly the same steps.

    orchestrator run workflows/hello/hello.py --input name=Ada
    orchestrator run workflows/hello/hello.yaml --input name=Ada   # same spec, same result
"""

import hello_steps

from orchestrator import Workflow

wf = Workflow("hello", version=1, inputs={"name": "string"}, output="sign_off")

# `name` matches a workflow input, so the inputs are inferred: {name: $inputs.name}.
wf.step(type="retrieval", description="A greeting with a `text` field.",
        gates=[{"gate": "required_fields", "fields": ["text"]}])(hello_steps.greet)

wf.step(inputs={"greeting": "greet.text"}, needs="a short greeting",
        gates=[{"gate": "not_empty"}, {"gate": "max_words", "limit": 10}])(hello_steps.shout)

wf.step(type="verification", inputs={"text": "shout"},
        gates=[{"gate": "range", "field": "words", "min": 1, "max": 10},
               {"gate": "one_of", "field": "loud", "values": [True]}])(hello_steps.measure)

wf.step(type="action", inputs={"text": "shout", "stats": "measure"}, needs="the shout and its word count",
        gates=[{"gate": "max_words", "field": "message", "limit": 20}])(hello_steps.sign_off)
