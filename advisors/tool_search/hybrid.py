"""`HybridIndex`: several indexes fused by reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from ...core.tools import ToolDefinition
from .embedding import EmbeddingIndex
from .index import QueryRejected, ToolIndex

__all__ = ["Agreement", "HybridIndex", "agreement_weights", "fuse"]


@dataclass(frozen=True)
class Agreement:
    """Per-query weights: a list is trusted as far as it agrees with the anchor lists.

    For every query, each ranking not in `anchors` (indexes of the `HybridIndex`'s
    parts) is compared with the anchors': `overlap` is the share of its first `top`
    names that are among the anchors' first `top` names. Its weight is multiplied by
    `min(1, overlap / full)`: a list that shares nothing with the anchors is left out
    of the fusion for that query, one sharing `full` or more counts fully. The anchors'
    weights never change. With a keyword index as the anchor, an embedding ranking
    filled with look-alike tools that the words of the request do not support stops
    outvoting it. `full=0` turns the weighting off.
    """

    top: int = 10
    full: float = 0.3
    anchors: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        if self.top < 1:
            raise ValueError("Agreement.top must be at least 1")
        if not 0.0 <= self.full <= 1.0:
            raise ValueError("Agreement.full must be between 0 and 1")
        if not self.anchors or min(self.anchors) < 0:
            raise ValueError("Agreement.anchors must name at least one list by its index")


def agreement_weights(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], agreement: Agreement
) -> list[float]:
    """`weights` for one query's `rankings` scaled as `agreement` says."""
    if agreement.full <= 0.0:
        return list(weights)
    top = agreement.top
    anchored: set[str] = set()
    for i in agreement.anchors:
        if i < len(rankings):
            anchored.update(rankings[i][:top])
    out: list[float] = []
    for i, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        if i in agreement.anchors or not ranking:
            out.append(weight)
            continue
        shared = sum(1 for name in ranking[:top] if name in anchored) / top
        out.append(weight * min(1.0, shared / agreement.full))
    return out


class HybridIndex:
    """Searches several indexes and fuses their rankings (reciprocal rank fusion).

    Each index is asked for its `depth` best names (at least `k`; a keyword index's
    pruned search costs less the fewer names it returns, but depth 20 cost the default
    hybrid 0.004-0.009 of recall@5 on BFCL and NESTFUL for a tenth of its CPU p99 at
    10,000 tools, so the default stays 50); a name scores
    `sum(weight / (rrf_k + rank))` over the rankings it appears in (rank from 1), and
    the best scores win (ties: the first index's order). A small `rrf_k` favours each
    index's first few names, which is what a search returning about five tools needs
    (chosen on half of the BFCL queries, see the benchmark). Typical use: a keyword
    index and an embedding index, which miss different tools. Building builds every
    index concurrently; searching queries them concurrently, an `EmbeddingIndex` first,
    so that the others' searches run while it embeds the query in a worker thread. A
    query that an index refuses (`QueryRejected`, e.g. a costly regex) is answered by
    the others; refused by all, it raises the first index's refusal.

    With `agreement` (an `Agreement`), the weights are set per query before the fusion:
    each non-anchor ranking counts as far as its first names agree with the anchors'
    (`agreement_weights`), so that a list that disagrees with the others cannot outvote
    them.
    """

    def __init__(
        self,
        *indexes: ToolIndex,
        weights: Sequence[float] | None = None,
        rrf_k: int = 5,
        depth: int = 50,
        agreement: Agreement | None = None,
    ) -> None:
        if not indexes:
            raise ValueError("HybridIndex needs at least one index")
        if weights is not None and len(weights) != len(indexes):
            raise ValueError("give one weight per index")
        self.indexes: tuple[ToolIndex, ...] = indexes
        self.weights: tuple[float, ...] = tuple(weights or (1.0,) * len(indexes))
        self.rrf_k = rrf_k
        self.depth = depth
        if agreement is not None and max(agreement.anchors) >= len(indexes):
            raise ValueError("Agreement.anchors names an index the HybridIndex does not have")
        self.agreement = agreement
        # Searches that wait on a worker thread (a model) start first, so that the
        # indexes searching on the event loop (keyword) run while the model works.
        self._waiting = tuple(i for i, index in enumerate(indexes) if _waits(index))

    def __repr__(self) -> str:
        return f"HybridIndex({', '.join(repr(i) for i in self.indexes)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new hybrid index whose parts are built over `definitions`, concurrently."""
        built: list[ToolIndex | None] = [None] * len(self.indexes)

        async def build_one(i: int) -> None:
            built[i] = await self.indexes[i].build(definitions)

        async with anyio.create_task_group() as group:
            for i in range(len(self.indexes)):
                group.start_soon(build_one, i)
        parts = tuple(b for b in built if b is not None)
        return HybridIndex(
            *parts,
            weights=self.weights,
            rrf_k=self.rrf_k,
            depth=self.depth,
            agreement=self.agreement,
        )

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names, by fused reciprocal rank."""
        if k < 1:
            return []
        rankings: list[list[str]] = [[] for _ in self.indexes]
        rejected: dict[int, QueryRejected] = {}
        depth = max(k, self.depth)

        async def search_one(i: int) -> None:
            try:
                rankings[i] = await self.indexes[i].search(query, depth)
            except QueryRejected as exc:  # the other indexes may still answer
                rejected[i] = exc

        async with anyio.create_task_group() as group:
            for i in self._waiting:
                group.start_soon(search_one, i)
            if self._waiting and len(self._waiting) < len(self.indexes):
                # Each turn of the loop runs every task ready at its start (asyncio in
                # order, trio in any order): after two, each waiting search has taken
                # its first step, which hands the query to the model's thread.
                await anyio.lowlevel.checkpoint()
                await anyio.lowlevel.checkpoint()
            for i in range(len(self.indexes)):
                if i not in self._waiting:
                    group.start_soon(search_one, i)
        if len(rejected) == len(self.indexes):
            raise rejected[min(rejected)]
        weights = self.weights
        if self.agreement is not None:
            weights = tuple(agreement_weights(rankings, weights, self.agreement))
        return fuse(rankings, weights, self.rrf_k)[:k]


def _waits(index: ToolIndex) -> bool:
    """Whether `index`'s search waits on something else than the event loop."""
    if isinstance(index, HybridIndex):
        return any(_waits(part) for part in index.indexes)
    return isinstance(index, EmbeddingIndex)


def fuse(rankings: Sequence[Sequence[str]], weights: Sequence[float], rrf_k: int) -> list[str]:
    """Names of all rankings ordered by weighted reciprocal rank fusion."""
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, name in enumerate(ranking, start=1):
            scores[name] = scores.get(name, 0.0) + weight / (rrf_k + rank)
    return sorted(scores, key=lambda n: -scores[n])
