"""`BM25Index`: plain Okapi BM25 over a definition's whole text, words unstemmed."""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from ...core.tools import ToolDefinition
from .index import MAX_QUERY_CHARS, ToolIndex, document_text

__all__ = ["BM25Index"]

_TOKEN = re.compile(r"\w+")
_INLINE = 200


def _numpy() -> Any:
    """The numpy module, or None without it."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


class BM25Index:
    """Okapi BM25 (`k1`, `b`) over `document_text(definition)`: its `\\w+` words,
    lowercased, with no stemming, no stop words and no fields.

    The plainest lexical ranking, the benchmarks' reference. It reads a request
    differently from `KeywordIndex` (exact word forms, every word, the whole text as one
    field), and `hybrid_index` fuses it as a fourth ranking: on requests needing several
    tools, where the stemmed, field-weighted keyword ranking falls below it, it lifts
    the fusion (benchmarks/README.md, issue 39). Every tool sharing a word with the
    query is scored (contributions are computed at build); ties keep catalog order.
    Catalogs of more than 200 definitions are built in a worker thread. With numpy
    installed (the `embeddings` extra has it), a search adds each query term's posting
    list as arrays (converted on the term's first lookup): at 10,000 tools a long
    request costs about a millisecond instead of tens.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0.0 <= b <= 1.0:
            raise ValueError("BM25Index needs k1 >= 0 and 0 <= b <= 1")
        self.k1 = k1
        self.b = b
        self._names: tuple[str, ...] = ()
        self._postings: dict[str, list[tuple[int, float]]] = {}
        self._arrays: dict[str, tuple[Any, Any]] = {}
        self._numpy: Any = None

    def __repr__(self) -> str:
        return f"BM25Index(tools={len(self._names)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new index over `definitions`."""
        catalog = tuple(definitions)
        if len(catalog) > _INLINE:
            return await anyio.to_thread.run_sync(self._built, catalog)
        return self._built(catalog)

    def _built(self, catalog: tuple[ToolDefinition, ...]) -> BM25Index:
        built = BM25Index(k1=self.k1, b=self.b)
        built._names = tuple(d.name for d in catalog)
        docs = [Counter(_TOKEN.findall(document_text(d).lower())) for d in catalog]
        lengths = [sum(doc.values()) for doc in docs]
        n = len(docs)
        average = (sum(lengths) / n) if n and sum(lengths) else 1.0
        frequency: Counter[str] = Counter()
        for doc in docs:
            frequency.update(doc.keys())
        idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in frequency.items()}
        k1, b = self.k1, self.b
        postings: dict[str, list[tuple[int, float]]] = {}
        for i, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
            norm = k1 * (1 - b + b * length / average)
            for term, f in doc.items():
                postings.setdefault(term, []).append((i, idf[term] * f * (k1 + 1) / (f + norm)))
        built._postings = postings
        built._numpy = _numpy()
        return built

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names by BM25 score (tools scoring 0 are not listed)."""
        if k < 1 or not self._names:
            return []
        terms = [
            t for t in set(_TOKEN.findall(query[:MAX_QUERY_CHARS].lower())) if t in self._postings
        ]
        if self._numpy is not None and terms:
            return self._search_numpy(terms, k)
        scores: dict[int, float] = {}
        for term in terms:
            for i, contribution in self._postings.get(term, ()):
                scores[i] = scores.get(i, 0.0) + contribution
        best = heapq.nsmallest(k, scores.items(), key=lambda item: (-item[1], item[0]))
        return [self._names[i] for i, _ in best]

    def _search_numpy(self, terms: list[str], k: int) -> list[str]:
        np = self._numpy
        scores = np.zeros(len(self._names))
        for term in terms:  # the same order of additions as the pure-Python path
            arrays = self._arrays.get(term)
            if arrays is None:
                rows = self._postings[term]
                arrays = (
                    np.fromiter((i for i, _ in rows), dtype=np.int64, count=len(rows)),
                    np.fromiter((c for _, c in rows), dtype=np.float64, count=len(rows)),
                )
                self._arrays[term] = arrays
            scores[arrays[0]] += arrays[1]
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:
            kth = -np.partition(-scores[hits], k - 1)[k - 1]
            hits = hits[scores[hits] >= kth]  # every tie at the boundary too
        order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), i))
        return [self._names[i] for i in order[:k]]
