"""`SplitQueryIndex`: a request that names several tasks, searched task by task."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.tools import ToolDefinition
from .hybrid import fuse
from .index import MAX_QUERY_CHARS, ToolIndex, words
from .keyword import STOP_WORDS

MAX_PARTS = 8
"""A query is split into at most this many parts (the rest stays in the last part)."""

# Clause boundaries: sentence ends, semicolons, and the conjunctions that chain tasks
# ("..., and then ...", "... and also ...", "... then ...", "..., and ...").
_BOUNDARY = re.compile(
    r"[.;!?\n]+\s*"
    r"|,\s*(?:and\s+)?(?:then\s+|also\s+|after\s+that\s+|afterwards\s+|finally\s+)?"
    r"|\s+(?:and\s+then|and\s+also|then|after\s+that|afterwards|as\s+well\s+as|plus|and)\s+",
    re.IGNORECASE,
)


def split_intents(query: str) -> list[str]:
    """The parts of a query that each name a task, in order; one part if it names one.

    Splits at sentence ends, semicolons, commas and chaining conjunctions (`and`,
    `then`, `also`, `after that`); parts without a content word (`please`, `it`) are
    joined to the part before them. Never more than `MAX_PARTS` parts.
    """
    pieces = [p.strip() for p in _BOUNDARY.split(query[:MAX_QUERY_CHARS]) if p and p.strip()]
    parts: list[str] = []
    for piece in pieces:
        if parts and not any(w not in STOP_WORDS for w in words(piece)):
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    if len(parts) > MAX_PARTS:
        parts = [*parts[: MAX_PARTS - 1], " ".join(parts[MAX_PARTS - 1 :])]
    return parts or ([query] if query.strip() else [])


class SplitQueryIndex:
    """Searches the whole query and each of its task parts, and fuses the rankings.

    A request like "book a flight to Rome and then email the itinerary to Ann" names two
    tasks; one ranking of the whole text tends to fill its first places with one task's
    tools. This wrapper asks `index` for the whole query and for every part of
    `split_intents(query)`, each `depth` deep, and fuses them by reciprocal rank (the
    whole query weighted `whole_weight`, each part 1, `rrf_k` as in `HybridIndex`), so
    the first places hold each task's best tools. `whole_weight=2` was chosen on half of
    BFCL's parallel-multiple requests (`benchmarks/tool_search/quality.py`), where the
    wrapper still ranked below the whole query alone. A query of one part is passed
    through. Refusals (`QueryRejected`) of the inner index propagate unchanged.
    """

    def __init__(
        self, index: ToolIndex, *, depth: int = 30, rrf_k: int = 5, whole_weight: float = 2.0
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self.index = index
        self.depth = depth
        self.rrf_k = rrf_k
        self.whole_weight = whole_weight

    def __repr__(self) -> str:
        return f"SplitQueryIndex({self.index!r})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new wrapper over the inner index built over `definitions`."""
        built = await self.index.build(definitions)
        return SplitQueryIndex(
            built, depth=self.depth, rrf_k=self.rrf_k, whole_weight=self.whole_weight
        )

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names, the fused best of the whole query and of each part."""
        parts = split_intents(query)
        if len(parts) <= 1:
            return await self.index.search(query, k)
        depth = max(k, self.depth)
        rankings = [await self.index.search(query, depth)]
        for part in parts:
            rankings.append(await self.index.search(part, depth))
        weights = [self.whole_weight, *([1.0] * len(parts))]
        return fuse(rankings, weights, self.rrf_k)[:k]


__all__ = ["MAX_PARTS", "SplitQueryIndex", "split_intents"]
