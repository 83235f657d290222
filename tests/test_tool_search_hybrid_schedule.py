"""`HybridIndex` starts the embedding search first, so keyword searches overlap its model."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain import ToolDefinition
from advisorchain.advisors import EmbeddingIndex, HybridIndex, KeywordIndex
from advisorchain.advisors.tool_search import embedding
from advisorchain.advisors.tool_search.embedding import EmbeddingFunction
from advisorchain.advisors.tool_search.hybrid import fuse
from advisorchain.advisors.tool_search.index import QueryRejected, ToolIndex

CATALOG = [
    ToolDefinition("get_weather", "Current weather and forecast for a city.", {}),
    ToolDefinition("send_email", "Send an email message to a recipient.", {}),
    ToolDefinition("book_hotel", "Book a hotel room in a city.", {}),
    ToolDefinition("convert_currency", "Convert an amount between currencies.", {}),
    ToolDefinition("translate_text", "Translate text between languages.", {}),
]


def _vectors(texts: Sequence[str]) -> list[list[float]]:
    return [[t.lower().count(c) + 0.01 for c in "aeioustnrl"] for t in texts]


def _letters(log: None = None) -> EmbeddingFunction:
    async def embed(texts: Sequence[str]) -> list[list[float]]:
        return _vectors(texts)

    return embed


class Recorded:
    """A keyword-like index searching on the event loop: it notes whether the model's
    thread had started its query when this search ran (waiting for it, bounded)."""

    def __init__(self, index: ToolIndex, started: threading.Event, seen: list[bool]) -> None:
        self.index, self.started, self.seen = index, started, seen

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return Recorded(await self.index.build(definitions), self.started, self.seen)

    async def search(self, query: str, k: int) -> list[str]:
        # Blocks the event loop: only a model already handed its work can start.
        self.seen.append(self.started.wait(timeout=10))
        return await self.index.search(query, k)


@pytest.mark.anyio
async def test_keyword_searches_run_while_the_model_embeds_the_query() -> None:
    started = threading.Event()

    def model(texts: list[str]) -> list[list[float]]:  # in the worker thread
        started.set()
        return _vectors(texts)

    async def embed(texts: Sequence[str]) -> Any:
        return await embedding._in_thread(model, list(texts))

    seen: list[bool] = []
    hybrid = HybridIndex(
        Recorded(KeywordIndex(), started, seen),
        EmbeddingIndex(embed, query_cache=0),
        Recorded(KeywordIndex(weights=(1.0, 0.0, 0.0)), started, seen),
    )
    built = await hybrid.build(CATALOG)
    started.clear()  # set by the definitions' embedding
    assert await built.search("weather in a city", 1) == ["get_weather"]
    # In index order the first keyword search would run before the model had the query.
    assert seen == [True, True]


@pytest.mark.anyio
async def test_the_rankings_are_those_of_the_indexes_searched_in_turn() -> None:
    parts: list[ToolIndex] = [
        KeywordIndex(),
        EmbeddingIndex(_letters()),
        KeywordIndex(weights=(1.0, 0.0, 0.0)),
    ]
    weights = (1.0, 1.0, 0.25)
    built = await HybridIndex(*parts, weights=weights).build(CATALOG)
    assert isinstance(built, HybridIndex)
    for query in ("weather in a city", "send email", "hotel room", "money in other currency"):
        rankings = [await part.search(query, 50) for part in built.indexes]
        assert await built.search(query, 4) == fuse(rankings, weights, 5)[:4]


class Refusing(EmbeddingIndex):
    """An embedding index that refuses every query."""

    async def search(self, query: str, k: int) -> list[str]:
        raise QueryRejected("the embedding refuses")


class RefusingFirst:
    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return self

    async def search(self, query: str, k: int) -> list[str]:
        raise QueryRejected("the first index refuses")


@pytest.mark.anyio
async def test_refused_by_all_raises_the_first_index_refusal_whatever_ran_first() -> None:
    hybrid = HybridIndex(RefusingFirst(), Refusing(_letters()))
    with pytest.raises(QueryRejected, match="the first index refuses"):
        await hybrid.search("anything", 3)
    keyword = await KeywordIndex().build(CATALOG)
    nested = HybridIndex(keyword, HybridIndex(Refusing(_letters())))
    assert await nested.search("send email", 1) == ["send_email"]  # the others still answer


class Asked:
    """An index that notes the `k` each search asks it for."""

    def __init__(self, index: ToolIndex, asked: list[int]) -> None:
        self.index, self.asked = index, asked

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return Asked(await self.index.build(definitions), self.asked)

    async def search(self, query: str, k: int) -> list[str]:
        self.asked.append(k)
        return await self.index.search(query, k)


@pytest.mark.anyio
@pytest.mark.parametrize(("depth", "expected"), [(None, [50, 50, 60, 60]), (20, [20, 20, 60, 60])])
async def test_each_index_is_asked_for_depth_names(depth: int | None, expected: list[int]) -> None:
    asked: list[int] = []
    indexes = (Asked(KeywordIndex(), asked), Asked(EmbeddingIndex(_letters()), asked))
    hybrid = HybridIndex(*indexes) if depth is None else HybridIndex(*indexes, depth=depth)
    built = await hybrid.build(CATALOG)
    await built.search("weather in a city", 5)
    await built.search("weather in a city", 60)  # more than the depth: k itself
    assert asked == expected
