"""SQL plumbing shared by the memory and approval stores.

- `identifiers`: the check that a table name or prefix is a plain SQL identifier (table
  names cannot be bound as parameters, so they are checked before they reach a query).
- `sqlite`: a pool of `sqlite3` connections to one file (WAL, busy timeout, `BEGIN
  IMMEDIATE` for writes); one connection for `":memory:"`.
- `postgres_pool`: a pool of blocking psycopg 3 connections (the `postgres` extra).
- `threads`: the worker-thread runner both stores' async methods go through: blocking
  work in `anyio.to_thread`, after a one-time setup (creating tables).
"""

__all__: list[str] = []
