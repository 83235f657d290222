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
    installed (the `embeddings` extra has it), the posting lists are slices of two arrays
    made at build, and a search adds each query term's slice: at 10,000 tools a long
    request costs about a millisecond instead of tens.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0.0 <= b <= 1.0:
            raise ValueError("BM25Index needs k1 >= 0 and 0 <= b <= 1")
        self.k1 = k1
        self.b = b
        self._names: tuple[str, ...] = ()
        self._postings: dict[str, list[tuple[int, float]]] = {}
        self._slices: dict[str, tuple[int, int]] = {}
        self._rows: Any = None
        self._contributions: Any = None
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
        numpy = _numpy()
        term_ids: dict[str, int] = {}
        rows: list[int] = []
        terms: list[int] = []
        contributions: list[float] = []
        for i, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
            norm = k1 * (1 - b + b * length / average)
            for term, f in doc.items():
                rows.append(i)
                terms.append(term_ids.setdefault(term, len(term_ids)))
                contributions.append(idf[term] * f * (k1 + 1) / (f + norm))
        if numpy is None:
            postings: dict[str, list[tuple[int, float]]] = {t: [] for t in term_ids}
            names = list(term_ids)
            for i, t, c in zip(rows, terms, contributions, strict=True):
                postings[names[t]].append((i, c))
            built._postings = postings
            return built
        # One array of rows and one of contributions, grouped by term (rows in catalog
        # order within a term); a term's posting list is a slice of both.
        order = numpy.argsort(numpy.array(terms, dtype=numpy.int64), kind="stable")
        built._rows = numpy.array(rows, dtype=numpy.int64)[order]
        built._contributions = numpy.array(contributions, dtype=numpy.float64)[order]
        ends = numpy.cumsum(numpy.bincount(numpy.array(terms, dtype=numpy.int64))).tolist()
        built._slices = {term: (ends[t - 1] if t else 0, ends[t]) for term, t in term_ids.items()}
        built._numpy = numpy
        return built

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names by BM25 score (tools scoring 0 are not listed)."""
        if k < 1 or not self._names:
            return []
        words = set(_TOKEN.findall(query[:MAX_QUERY_CHARS].lower()))
        if self._numpy is not None:
            return self._search_numpy([w for w in words if w in self._slices], k)
        scores: dict[int, float] = {}
        for term in words:
            for i, contribution in self._postings.get(term, ()):
                scores[i] = scores.get(i, 0.0) + contribution
        best = heapq.nsmallest(k, scores.items(), key=lambda item: (-item[1], item[0]))
        return [self._names[i] for i, _ in best]

    def _search_numpy(self, terms: list[str], k: int) -> list[str]:
        if not terms:
            return []
        np = self._numpy
        scores = np.zeros(len(self._names))
        for term in terms:  # the same order of additions as the pure-Python path
            start, end = self._slices[term]
            scores[self._rows[start:end]] += self._contributions[start:end]
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:
            kth = -np.partition(-scores[hits], k - 1)[k - 1]
            hits = hits[scores[hits] >= kth]  # every tie at the boundary too
        order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), i))
        return [self._names[i] for i in order[:k]]
