"""SQLite FTS5's tokenizer as a function: text chunks in, stemmed terms out.

`KeywordIndex` scores in Python but keeps FTS5's tokenization (`unicode61` with
diacritics removed, then the porter stemmer), so a chunk is split, folded and stemmed
exactly as an FTS5 table would index it. Chunks are inserted into an in-memory FTS5
table inside a transaction, their terms read back from an `fts5vocab` table, and the
transaction rolled back: nothing stays in the table.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

TOKENIZE = "porter unicode61 remove_diacritics 2"

_MAX_REMEMBERED = 4096


class Fts5Terms:
    """Terms of text chunks, as FTS5 with `TOKENIZE` makes them.

    `terms(chunks)` returns each chunk's terms in order (a chunk of punctuation has
    none). `cached(words)` does the same for query words and remembers the last
    `_MAX_REMEMBERED` of them (least recently used out first). Safe to share between
    threads (one lock around the connection and the memory).
    Raises `RuntimeError` when this Python's SQLite has no FTS5.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = _connect()
        self._remembered: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def terms(self, chunks: Sequence[str]) -> list[tuple[str, ...]]:
        """The terms of every chunk, in the chunks' order."""
        if not chunks:
            return []
        found: list[list[tuple[int, str]]] = [[] for _ in chunks]
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                db.executemany("INSERT INTO chunks (rowid, text) VALUES (?, ?)", enumerate(chunks))
                for doc, offset, term in db.execute("SELECT doc, offset, term FROM chunk_terms"):
                    found[doc].append((offset, term))
            finally:
                db.execute("ROLLBACK")
        return [tuple(t for _, t in (sorted(f) if len(f) > 1 else f)) for f in found]

    def stems(self, tokens: Sequence[str]) -> list[str] | None:
        """The one term of each token, for tokens FTS5 reads as one token each (ASCII
        letters and digits): all are inserted as one row, so FTS5 pays its cost per row
        once. None if the row did not give one term per token."""
        if not tokens:
            return []
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                db.execute("INSERT INTO chunks (rowid, text) VALUES (0, ?)", (" ".join(tokens),))
                found = db.execute("SELECT offset, term FROM chunk_terms").fetchall()
            finally:
                db.execute("ROLLBACK")
        found.sort()
        if [offset for offset, _ in found] != list(range(len(tokens))):
            return None
        return [term for _, term in found]

    def cached(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The terms of each word, from the remembered ones where possible."""
        out: dict[str, tuple[str, ...]] = {}
        missing: list[str] = []
        with self._lock:
            for word in words:
                known = self._remembered.get(word)
                if known is None:
                    missing.append(word)
                else:
                    self._remembered.move_to_end(word)
                    out[word] = known
        if missing:
            fresh = dict(zip(missing, self.terms(missing), strict=True))
            out.update(fresh)
            with self._lock:
                self._remembered.update(fresh)
                while len(self._remembered) > _MAX_REMEMBERED:
                    self._remembered.popitem(last=False)
        return out


def _connect() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    try:
        db.execute(f"CREATE VIRTUAL TABLE chunks USING fts5(text, tokenize = '{TOKENIZE}')")
        db.execute("CREATE VIRTUAL TABLE chunk_terms USING fts5vocab(chunks, instance)")
    except sqlite3.OperationalError as exc:
        db.close()
        raise RuntimeError(
            "KeywordIndex needs SQLite with FTS5, which this Python's sqlite3 lacks"
        ) from exc
    return db


_SHARED: Fts5Terms | None = None
_SHARED_LOCK = threading.Lock()


def shared_terms() -> Fts5Terms:
    """The process's one `Fts5Terms` (created on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Fts5Terms()
        return _SHARED


__all__ = ["TOKENIZE", "Fts5Terms", "shared_terms"]
