"""Durable turns: a conversation that outlives its worker, every effect once.

`steps` is the engine-neutral seam (step names, versioned payloads, the workflow-side
`durable_chain` and the worker-side `StepExecutor`; `search` makes tool search's embeddings
steps); `temporal` runs it on Temporal (extra
`temporal`), `dbos` on DBOS (extra `dbos`). `ledger` is the effects-once ledger both
engines use, so a tool with effects runs at most once per call whatever the engine
retries. See docs/durable.md.
"""

__all__: list[str] = []
