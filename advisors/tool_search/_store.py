"""`KeyedBlobs`: a SQLite file of values by key that never fails its reader.

The persistent caches of tool search (`EmbeddingCache`, `ExampleCache`) keep one value
per key in such a file. A file that cannot be opened, read or written is treated as
empty: a cache is an optimization, never an error of the search.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

_CHUNK = 500  # keys per SELECT, under SQLite's limit of bound parameters


class KeyedBlobs:
    """Values by key in `table` (columns `key` and `column`) of the SQLite file at
    `path`, created on first use.

    Safe to share between threads (one lock around the connection) and processes
    (SQLite's locking, waiting up to 10 s for another writer)."""

    def __init__(self, path: Path, table: str, column: str = "value") -> None:
        if not (table.isidentifier() and column.isidentifier()):
            raise ValueError("table and column must be identifiers")
        self.path = path
        self.table = table
        self.column = column
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes] | None:
        """The stored values of those `keys` that have one; None if the file is unusable."""
        found: dict[str, bytes] = {}
        with self._lock:
            db = self._open()
            if db is None:
                return None
            try:
                for start in range(0, len(keys), _CHUNK):
                    chunk = keys[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = db.execute(
                        f"SELECT key, {self.column} FROM {self.table} WHERE key IN ({marks})", chunk
                    ).fetchall()
                    # a row another writer left: only a blob is a value (`bytes(n)` of
                    # a stored integer would allocate n bytes)
                    found.update(
                        (key, value)
                        for key, value in rows
                        if isinstance(key, str) and isinstance(value, bytes)
                    )
            except sqlite3.Error:
                return None
        return found

    def put_many(self, rows: Iterable[tuple[str, bytes]]) -> None:
        """Store `(key, value)` rows, replacing older values (nothing if unusable)."""
        rows = list(rows)
        with self._lock:
            db = self._open()
            if db is None:
                return
            try:
                with db:
                    db.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?)", rows)
            except sqlite3.Error:
                pass  # a read-only or full disk: the search works without the cache

    def _open(self) -> sqlite3.Connection | None:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
                db.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} "
                    f"(key TEXT PRIMARY KEY, {self.column} BLOB)"
                )
                db.commit()
            except (OSError, sqlite3.Error):
                return None
            self._db = db
        return self._db


__all__ = ["KeyedBlobs"]
