"""BM25 impacts per (term, tool) and an exact top-k search over them.

`Impacts.build` turns each tool's weighted term frequencies into one score per (term,
tool), the tool's BM25 contribution for that term, kept in posting lists ordered by tool.
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
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain
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
        `b = 0.75`. Posting lists are arrays of machine numbers (12 bytes a posting).
        """
        size = len(frequencies)
        holding = Counter(chain.from_iterable(frequencies))  # n of every term
        average = sum(lengths) / size if size else 1.0
        norms = [K1 * (1 - B + B * length / average) for length in lengths]
        k1_1 = K1 + 1.0
        # Per term: its tools' and impacts' appenders, its idf, the two arrays.
        slots: dict[str, tuple[Any, Any, float, array[int], array[float]]] = {}
        for term, n in holding.items():
            idf = math.log((size - n + 0.5) / (n + 0.5))
            tools, values = array("i"), array("d")
            slots[term] = (tools.append, values.append, idf if idf > 0.0 else 1e-6, tools, values)
        for tool, frequency in enumerate(frequencies):
            norm = norms[tool]
            for term, count in frequency.items():
                f = count * scale
                add_tool, add_value, idf, _, _ = slots[term]
                add_tool(tool)
                add_value(idf * ((f * k1_1) / (f + norm)))
        postings = {t: Postings(s[3], s[4], max(s[4])) for t, s in slots.items()}
        return cls(postings, size)

    def score(self, terms: Sequence[str], tool: int) -> float:
        """The score of one tool for `terms` (summed in their order, as FTS5 does)."""
        total = 0.0
        for term in terms:
            postings = self.postings.get(term)
            if postings is not None:
                total += postings.impact(tool)
        return total

    def top(self, terms: Sequence[str], k: int) -> list[int]:
        """The `k` best tools for `terms` (a term may repeat: it counts each time),
        best score first, ties by catalog position; tools scoring 0 are left out."""
        known = [t for t in terms if t in self.postings]
        if not known or k < 1:
            return []
        repeats = Counter(known)
        bounds = {t: self.postings[t].bound * repeats[t] * (1 + _SLACK) for t in repeats}
        order = sorted(repeats, key=lambda t: -bounds[t])
        rest = [0.0] * (len(order) + 1)  # rest[i]: the most terms order[i:] can add
        for i in range(len(order) - 1, -1, -1):
            rest[i] = rest[i + 1] + bounds[order[i]]
        scores: dict[int, float] = {}
        growing = True
        floor = 0.0  # a lower bound of the final k-th best score
        check_below = math.inf
        for i, term in enumerate(order):
            postings = self.postings[term]
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
        best = heapq.nsmallest(k, ((-self.score(known, t), t) for t in near))
        return [tool for _, tool in best]


def _kth(scores: Mapping[int, float], k: int) -> float:
    return sorted(scores.values(), reverse=True)[k - 1]
