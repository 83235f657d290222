"""Durable turns: a conversation that outlives its worker, every effect once.

`steps` is the engine-neutral seam (step names, versioned payloads, the workflow-side
`durable_chain` and the worker-side `StepExecutor`); `temporal` runs it on Temporal (extra
`temporal`), `dbos` on DBOS (extra `dbos`). See docs/durable.md.
"""

__all__: list[str] = []
