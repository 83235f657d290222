"""BM25 impacts per (term, tool) and an exact top-k search over them.

`Impacts.build` inverts each tool's weighted term frequencies into posting lists ordered
by tool; the first lookup of a term turns its list into one score per tool, the tool's
BM25 contribution for that term (`LazyPostings`).
A query's score of a tool is the sum of its terms' impacts, as SQLite FTS5's `bm25()`
sums its phrases. `Impacts.top` finds the best `k` tools without scoring every tool
that shares a word with the query: terms are visited from the one that can add most;
once the `k`-th best partial score exceeds what the remaining terms could add to any
tool, no new tool can enter and the remaining long, low-weight lists are only looked
up for the candidates left (term-at-a-time with max-score pruning). The result is the
same as scoring every tool.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict, deque
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple

K1 = 1.2
B = 0.75

# Relative slack on the pruning bounds: partial sums are added in another order than
# the final scores, so they may differ in the last bits.
_SLACK = 1e-9
# Below this many candidates the k-th best partial score is recomputed after each
# term (it only grows, so an older one is still a valid bound).
_RESORT = 2048


class Postings(NamedTuple):
    """The tools holding one term, ascending, and the term's impact in each (a named
    tuple: a catalog has tens of thousands, made in a few milliseconds)."""

    tools: array[int]
    impacts: array[float]
    bound: float

    def impact(self, tool: int) -> float:
        """The term's impact in `tool` (0.0 if the tool lacks the term)."""
        i = bisect_left(self.tools, tool)
        if i < len(self.tools) and self.tools[i] == tool:
            return self.impacts[i]
        return 0.0


class Impacts:
    """Posting lists of BM25 impacts over a catalog of `size` tools."""

    def __init__(self, postings: Mapping[str, Postings], size: int) -> None:
        self.postings = postings
        self.size = size

    @classmethod
    def build(
        cls,
        frequencies: Sequence[Mapping[str, float]],
        lengths: Sequence[int],
        scale: float = 1.0,
    ) -> Impacts:
        """Impacts from each tool's term frequencies and length, scored as FTS5's `bm25()`.

        `frequencies[i][term] * scale` is the weighted count of `term` in tool `i` (each
        field's count times the field's weight, summed), `lengths[i]` its number of terms
        in all fields; `idf = log((N - n + 0.5) / (n + 0.5))`, at least 1e-6; `k1 = 1.2`,
        `b = 0.75`. A (term, tool) pair of count 0 (a term only in fields of weight 0)
        counts in `n` and gets no posting.

        The build only inverts the frequencies into each term's tools and counts; a
        term's impacts are computed the first time it is looked up (`LazyPostings`),
        so a catalog's many terms no query reads cost no arithmetic.
        """
        size = len(frequencies)
        average = sum(lengths) / size if size else 1.0
        norms = [K1 * (1 - B + B * length / average) for length in lengths]
        tools_of: defaultdict[str, list[int]] = defaultdict(list)
        counts_of: defaultdict[str, list[float]] = defaultdict(list)
        tools_slot, counts_slot = tools_of.__getitem__, counts_of.__getitem__
        append, consume = list.append, deque[object](maxlen=0).extend
        for tool, frequency in enumerate(frequencies):
            # Two appends per (term, tool) pair, looped in C: keys and values of a
            # mapping iterate in the same order.
            consume(map(append, map(tools_slot, frequency), repeat(tool)))
            consume(map(append, map(counts_slot, frequency), frequency.values()))
        tools_of.default_factory = counts_of.default_factory = None  # plain mappings now
        return cls(LazyPostings(tools_of, counts_of, norms, scale), size)

    def score(self, terms: Sequence[str], tool: int) -> float:
        """The score of one tool for `terms` (summed in their order, as FTS5 does)."""
        return _score(self.postings, terms, tool)

    def top(self, terms: Sequence[str], k: int) -> list[int]:
        """The `k` best tools for `terms` (a term may repeat: it counts each time),
        best score first, ties by catalog position; tools scoring 0 are left out."""
        found = {t: p for t in dict.fromkeys(terms) if (p := self.postings.get(t)) is not None}
        known = [t for t in terms if t in found]
        if not known or k < 1:
            return []
        repeats = Counter(known)
        bounds = {t: found[t].bound * repeats[t] * (1 + _SLACK) for t in repeats}
        order = sorted(repeats, key=lambda t: -bounds[t])
        rest = [0.0] * (len(order) + 1)  # rest[i]: the most terms order[i:] can add
        for i in range(len(order) - 1, -1, -1):
            rest[i] = rest[i + 1] + bounds[order[i]]
        scores: dict[int, float] = {}
        growing = True
        floor = 0.0  # a lower bound of the final k-th best score
        check_below = math.inf
        for i, term in enumerate(order):
            postings = found[term]
            times = repeats[term]
            if growing and len(scores) >= k and rest[i] <= check_below:
                floor = _kth(scores, k)
                if floor > rest[i]:
                    growing = False  # a tool not yet seen cannot reach the k best
                else:
                    check_below = rest[i] * 0.7
            if growing:
                get = scores.get
                for tool, impact in zip(postings.tools, postings.impacts, strict=True):
                    scores[tool] = get(tool, 0.0) + times * impact
                continue
            if len(postings.tools) < len(scores):
                for tool, impact in zip(postings.tools, postings.impacts, strict=True):
                    if tool in scores:
                        scores[tool] += times * impact
            else:
                for tool in scores:
                    scores[tool] += times * postings.impact(tool)
            if len(scores) > k:
                if len(scores) <= _RESORT:
                    floor = max(floor, _kth(scores, k))
                least = floor - rest[i + 1]
                scores = {t: s for t, s in scores.items() if s >= least}
        # The final order from scores summed in the query's order, like FTS5's.
        cut = _kth(scores, k) * (1 - _SLACK) if len(scores) > k else 0.0
        near = [t for t, s in scores.items() if s >= cut]
        best = heapq.nsmallest(k, ((-_score(found, known, t), t) for t in near))
        return [tool for _, tool in best]


class LazyPostings(Mapping[str, Postings]):
    """Each term's `Postings`, computed from its tools and counts on first lookup.

    Safe to share between threads: two threads looking up a new term at once both
    compute the same postings, and either result is kept. A term all of whose counts
    are 0 has no postings (it is not in the mapping). Once scored, a term's tools and
    counts are let go: the lists of a fully read index take what eager scoring took.
    """

    def __init__(
        self,
        tools_of: dict[str, list[int]],
        counts_of: dict[str, list[float]],
        norms: Sequence[float],
        scale: float,
    ) -> None:
        self._terms = tuple(tools_of)
        self._tools_of = tools_of  # each term's tools and counts until it is scored
        self._counts_of = counts_of
        self._norms = norms
        self._scale = scale
        self._ready: dict[str, Postings | None] = {}  # only terms of the catalog

    def __getitem__(self, term: str) -> Postings:
        postings = self._lookup(term)
        if postings is None:
            raise KeyError(term)
        return postings

    def get(self, term: str, default: Any = None) -> Any:
        """The postings of `term`, or `default` if no tool holds it."""
        postings = self._lookup(term)
        return default if postings is None else postings

    def _lookup(self, term: str) -> Postings | None:
        try:
            return self._ready[term]
        except KeyError:
            pass
        tools = self._tools_of.get(term)
        counts = self._counts_of.get(term)
        if tools is None or counts is None:  # not in the catalog, or scored meanwhile
            return self._ready.get(term)  # words not in the catalog are not remembered
        postings = self._ready[term] = self._computed(tools, counts)
        # The raw lists go once the scores are kept (a thread that read them first
        # computes the same postings; one that finds either gone finds the scores kept).
        self._tools_of.pop(term, None)
        self._counts_of.pop(term, None)
        return postings

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self._lookup(term) is not None

    def __iter__(self) -> Iterator[str]:
        return (term for term in self._terms if term in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _computed(self, tools: list[int], counts: list[float]) -> Postings | None:
        size, n = len(self._norms), len(tools)
        idf = math.log((size - n + 0.5) / (n + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        norms, scale, k1_1 = self._norms, self._scale, K1 + 1.0
        weighted = map(scale.__mul__, counts) if scale != 1.0 else counts
        impacts = [
            idf * ((f * k1_1) / (f + norm))
            for f, norm in zip(weighted, map(norms.__getitem__, tools), strict=True)
        ]
        if 0 in counts:
            kept = [(t, v) for t, v in zip(tools, impacts, strict=True) if v > 0.0]
            if not kept:
                return None
            tools, impacts = [t for t, _ in kept], [v for _, v in kept]
        return Postings(array("i", tools), array("d", impacts), max(impacts))


def _score(found: Mapping[str, Postings], terms: Sequence[str], tool: int) -> float:
    total = 0.0
    for term in terms:
        postings = found.get(term)
        if postings is not None:
            total += postings.impact(tool)
    return total


def _kth(scores: Mapping[int, float], k: int) -> float:
    return sorted(scores.values(), reverse=True)[k - 1]


__all__ = ["B", "K1", "Impacts", "LazyPostings", "Postings"]
