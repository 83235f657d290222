"""Durable turns: a chain's turns on a durable-execution engine (Temporal, DBOS).

- `ledger`: the effects-once ledger both engines use, so a tool with effects runs at most
  once per call whatever the engine retries.
"""

__all__: list[str] = []
