"""`KeywordIndex`: BM25 over tool names, descriptions and parameters (SQLite FTS5)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

import anyio.to_thread

from ...core.tools import ToolDefinition
from .index import ToolIndex, document, words

_MAX_TERMS = 64

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could do does for from had has have how i if in
    into is it its me my of on or our please so than that the their them then there these
    they this to us was we were what when where which while who will with would you your""".split()
)


class KeywordIndex:
    """Ranks tools by BM25 over their name words, description and parameters.

    Uses SQLite's FTS5 from the standard library with the porter stemmer, so `forecasts`
    finds `forecast`. Names are split on `_`, `-`, `.` and camelCase before indexing;
    parameters are indexed with their descriptions and allowed (`enum`) values.
    A query is reduced to its words, each quoted as a literal FTS5 string and joined with
    OR: FTS5 operators typed by a model (`NEAR`, `OR`, `*`, quotes, parentheses) are
    searched as words, never parsed. A query with no words finds nothing.

    `weights` are the BM25 weights of the name, description and parameter fields.
    The index is built in a worker thread; searching takes a lock, so one built index
    may be shared by conversations on any thread.
    """

    def __init__(self, *, weights: tuple[float, float, float] = (2.0, 1.0, 0.5)) -> None:
        self.weights = weights
        self._names: tuple[str, ...] = ()
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KeywordIndex(tools={len(self._names)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new keyword index over `definitions` (built in a worker thread)."""
        built = KeywordIndex(weights=self.weights)
        await anyio.to_thread.run_sync(built._fill, tuple(definitions))
        return built

    def build_sync(self, definitions: Sequence[ToolDefinition]) -> KeywordIndex:
        """The same as `build`, on the calling thread (for benchmarks and scripts)."""
        built = KeywordIndex(weights=self.weights)
        built._fill(tuple(definitions))
        return built

    def _fill(self, definitions: tuple[ToolDefinition, ...]) -> None:
        db = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            db.execute(
                "CREATE VIRTUAL TABLE tools USING fts5(name, description, params, "
                "tokenize = 'porter unicode61 remove_diacritics 2')"
            )
        except sqlite3.OperationalError as exc:
            db.close()
            raise RuntimeError(
                "KeywordIndex needs SQLite with FTS5, which this Python's sqlite3 lacks"
            ) from exc
        db.executemany(
            "INSERT INTO tools (rowid, name, description, params) VALUES (?, ?, ?, ?)",
            ((i, *document(d)) for i, d in enumerate(definitions)),
        )
        db.commit()
        self._names = tuple(d.name for d in definitions)
        self._db = db

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` tool names for `query`, best BM25 score first."""
        return self.search_sync(query, k)

    def search_sync(self, query: str, k: int) -> list[str]:
        """The same as `search`, synchronously (a query takes well under a millisecond)."""
        expression = match_expression(query)
        if self._db is None or not expression or k < 1:
            return []
        name_w, description_w, params_w = self.weights
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, ?, ?, ?) LIMIT ?",
                (expression, name_w, description_w, params_w, k),
            ).fetchall()
        return [self._names[row[0]] for row in rows]


def match_expression(query: str) -> str:
    """An FTS5 query matching any word of `query`: every word a quoted literal, OR-joined.

    English function words are left out (they match nearly every tool and cost time,
    not ranking), unless the query has nothing else.
    """
    unique = list(dict.fromkeys(words(query)))
    content = [w for w in unique if w not in STOP_WORDS]
    unique = (content or unique)[:_MAX_TERMS]
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in unique)
