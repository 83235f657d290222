"""Issue 39: plain BM25 as a ranking, and the per-query agreement weighting of a fusion."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from advisorchain import ToolDefinition
from advisorchain.advisors import HybridIndex, KeywordIndex, ToolIndex
from advisorchain.advisors.tool_search import BM25Index, hybrid_index
from advisorchain.advisors.tool_search.hybrid import Agreement, agreement_weights

CATALOG = [
    ToolDefinition("hotel_search", "Search hotels in a city by check-in date.", {}),
    ToolDefinition("hotel_reserve", "Reserve a room in a hotel.", {}),
    ToolDefinition("flight_search", "Search flights between two airports.", {}),
    ToolDefinition("book_flight", "Book a flight ticket.", {}),
    ToolDefinition("weather", "Weather forecast for a city.", {}),
    ToolDefinition("currency", "Convert money between currencies.", {}),
]


class Fixed:
    """An index answering one ranking whatever the query (a model gone wrong)."""

    def __init__(self, ranking: list[str]) -> None:
        self.ranking = ranking

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return self

    async def search(self, query: str, k: int) -> list[str]:
        return self.ranking[:k]


@pytest.mark.anyio
async def test_bm25_index_is_okapi_bm25_over_the_whole_unstemmed_text() -> None:
    index = await BM25Index().build(CATALOG)
    assert (await index.search("hotels in Rome", 3))[0] == "hotel_search"
    # unstemmed: "reserving" is not "reserve"; the name's split words are read
    assert await index.search("reserving", 3) == []
    assert (await index.search("reserve", 3))[0] == "hotel_reserve"
    assert await index.search("", 3) == []
    assert await index.search("hotel", 0) == []
    # the tool with the shorter text wins a tie of term counts (length normalization)
    ranked = await index.search("flight", 6)
    assert ranked == ["book_flight", "flight_search"]
    assert await (await BM25Index().build([])).search("hotel", 3) == []
    with pytest.raises(ValueError):
        BM25Index(b=2.0)


@pytest.mark.anyio
async def test_a_large_catalog_builds_in_a_worker_thread_with_the_same_ranking() -> None:
    large = [ToolDefinition(f"{d.name}_{i}", d.description, {}) for i in range(40) for d in CATALOG]
    index = await BM25Index().build(large)
    assert (await index.search("weather forecast", 1))[0].startswith("weather_")


def test_agreement_scales_a_list_by_its_overlap_with_the_anchors() -> None:
    keyword = ["a", "b", "c", "d"]
    agreeing = ["b", "a", "x", "y"]
    disagreeing = ["x", "y", "z", "w"]
    half = ["a", "x", "y", "z"]
    rule = Agreement(top=4, full=0.5, anchors=(0,))
    assert agreement_weights([keyword, agreeing], [1.0, 1.0], rule) == [1.0, 1.0]
    assert agreement_weights([keyword, disagreeing], [1.0, 2.0], rule) == [1.0, 0.0]
    assert agreement_weights([keyword, half], [1.0, 1.0], rule) == [1.0, 0.5]
    assert agreement_weights([keyword, []], [1.0, 1.0], rule) == [1.0, 1.0]
    off = Agreement(full=0.0)
    assert agreement_weights([keyword, disagreeing], [1.0, 1.0], off) == [1.0, 1.0]
    for bad in ({"top": 0}, {"full": 1.5}, {"anchors": ()}, {"anchors": (-1,)}):
        with pytest.raises(ValueError):
            Agreement(**bad)
    with pytest.raises(ValueError, match="anchors"):
        HybridIndex(KeywordIndex(), agreement=Agreement(anchors=(1,)))


@pytest.mark.anyio
async def test_an_embedding_list_of_look_alikes_cannot_outvote_the_words() -> None:
    """The list agrees with the keyword ranking on nothing: without the weighting its
    look-alikes take the first places, with it the fusion keeps the keyword order."""
    look_alikes = Fixed(["book_flight", "flight_search", "weather", "currency"])
    query = "reserve a hotel room"
    plain = await HybridIndex(KeywordIndex(), look_alikes, weights=(1.0, 1.2)).build(CATALOG)
    assert (await plain.search(query, 2))[0] == "book_flight"
    agreeing = await HybridIndex(
        KeywordIndex(), look_alikes, weights=(1.0, 1.2), agreement=Agreement(top=2, full=0.5)
    ).build(CATALOG)
    keyword = await (await KeywordIndex().build(CATALOG)).search(query, 2)
    assert await agreeing.search(query, 2) == keyword
    assert keyword[0] == "hotel_reserve"
    # the default composition has the weighting too
    default = await hybrid_index(look_alikes).build(CATALOG)
    assert (await default.search(query, 1)) == ["hotel_reserve"]


@pytest.mark.anyio
async def test_an_agreeing_list_keeps_its_full_weight() -> None:
    helpful = Fixed(["hotel_reserve", "hotel_search"])
    built = await HybridIndex(KeywordIndex(), helpful, agreement=Agreement(top=2, full=0.5)).build(
        CATALOG
    )
    unweighted = await HybridIndex(KeywordIndex(), helpful).build(CATALOG)
    query = "hotels in a city"
    assert await built.search(query, 3) == await unweighted.search(query, 3)


@pytest.mark.anyio
async def test_bm25_rankings_are_the_same_with_and_without_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("numpy")
    from advisorchain.advisors.tool_search import bm25

    large = [
        ToolDefinition(f"{d.name}_{i}", f"{d.description} {'city ' * (i % 3)}", {})
        for i in range(30)
        for d in CATALOG
    ]
    with_numpy = await BM25Index().build(large)
    monkeypatch.setattr(bm25, "_numpy", lambda: None)
    without = await BM25Index().build(large)
    assert isinstance(without, BM25Index) and without._numpy is None
    for query in ("hotel in a city", "flight ticket", "weather forecast city", "nothing", "a"):
        for k in (1, 5, 50, 500):
            assert await with_numpy.search(query, k) == await without.search(query, k)
