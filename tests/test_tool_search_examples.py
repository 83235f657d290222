"""Example requests per tool: the keyword field, the embedding mix, the writer, the cache."""

from __future__ import annotations

import math
import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from test_tool_search_advisor import make_tools
from test_tool_search_keyword import VOCABULARY, catalog

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolDefinition,
    ToolMessage,
)
from advisorchain.advisors import ToolSearchAdvisor
from advisorchain.advisors.tool_search import (
    BM25Index,
    EmbeddingIndex,
    ExampleCache,
    ExampleWriter,
    HybridIndex,
    KeywordIndex,
    RegexIndex,
    default_index,
    defaults,
    hybrid_index,
)
from advisorchain.advisors.tool_search._fts5_terms import TOKENIZE
from advisorchain.advisors.tool_search.examples import (
    MAX_EXAMPLE_CHARS,
    MAX_EXAMPLES,
    cleaned_examples,
    example_prompt,
    examples_for,
    parse_examples,
)
from advisorchain.advisors.tool_search.index import document
from advisorchain.advisors.tool_search.keyword import query_words
from advisorchain.providers.scripted import ScriptedChatModel

FORECAST = ToolDefinition("get_forecast", "Returns conditions for a place.", {})
MAIL = ToolDefinition("send_mail", "Sends a message.", {})
EXAMPLES = {"get_forecast": ["Will it rain in Paris tomorrow?", "Do I need an umbrella"]}


def test_a_tool_is_found_through_the_words_of_its_examples_only() -> None:
    plain = KeywordIndex().build_sync([FORECAST, MAIL])
    assert plain.search_sync("umbrella tomorrow", 5) == []
    with_examples = KeywordIndex(examples=EXAMPLES).build_sync([FORECAST, MAIL])
    assert with_examples.search_sync("umbrella tomorrow", 5) == ["get_forecast"]
    assert with_examples.search_sync("raining", 5) == ["get_forecast"]  # stemmed as FTS5 does


@pytest.mark.anyio
async def test_the_async_build_reads_examples_from_a_mapping_or_a_source() -> None:
    model = ScriptedChatModel(["Will it rain tomorrow?\nDo I need an umbrella?", "Mail Bob"])
    writer = ExampleWriter(model, cache=None)
    for examples in (EXAMPLES, writer):
        built = await KeywordIndex(examples=examples).build([FORECAST, MAIL])
        assert await built.search("umbrella", 5) == ["get_forecast"]
    with pytest.raises(TypeError, match="use build"):
        KeywordIndex(examples=writer).build_sync([FORECAST])


class Fts5FourColumns:
    """The reference: FTS5 with the examples as a fourth column, ordered by bm25()."""

    def __init__(self, tools: list[ToolDefinition], examples: dict[str, list[str]]) -> None:
        self.names = [d.name for d in tools]
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE t USING fts5(name, description, params, examples, "
            f"tokenize='{TOKENIZE}')"
        )
        self.db.executemany(
            "INSERT INTO t (rowid, name, description, params, examples) VALUES (?, ?, ?, ?, ?)",
            ((i, *document(d), " ".join(examples.get(d.name, ()))) for i, d in enumerate(tools)),
        )

    def search(self, query: str, k: int, weights: Sequence[float]) -> list[str]:
        expression = " OR ".join('"' + w.replace('"', '""') + '"' for w in query_words(query))
        rows = self.db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, ?, ?, ?, ?), rowid LIMIT ?",
            (expression, *weights, k),
        ).fetchall()
        return [self.names[r[0]] for r in rows]


@pytest.mark.parametrize("weight", [0.5, 0.3, 2.0])  # in units, added one by one, in units
def test_examples_score_as_a_fourth_fts5_column(weight: float) -> None:
    tools = catalog(200, seed=4)
    rng = random.Random(9)
    examples = {
        d.name: [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 8))) + "?" for _ in range(2)]
        for d in tools
        if rng.random() < 0.7
    }
    reference = Fts5FourColumns(tools, examples)
    built = KeywordIndex(examples=examples, examples_weight=weight).build_sync(tools)
    for _ in range(40):
        query = " ".join(rng.choices(VOCABULARY, k=rng.randint(1, 12)))
        for k in (1, 5, 30):
            assert built.search_sync(query, k) == reference.search(query, k, (2, 1, 0.5, weight))


def test_examples_are_cleaned_and_bounded() -> None:
    long = "x" * 10_000
    given: dict[str, object] = {
        "get_forecast": [" Rain\n\x00 tomorrow? ", 42, "Rain tomorrow?", long]
        + [f"q{i}" for i in range(20)],
        "send_mail": "Mail Bob",  # a bare string is one example
        "not_in_the_catalog": ["ignored"],
    }
    cleaned = cleaned_examples(given, [FORECAST, MAIL])  # type: ignore[arg-type]
    forecast = cleaned["get_forecast"]
    assert forecast[:3] == ("Rain tomorrow?", "x" * MAX_EXAMPLE_CHARS, "q0")
    assert len(forecast) == MAX_EXAMPLES
    assert cleaned["send_mail"] == ("Mail Bob",)
    assert set(cleaned) == {"get_forecast", "send_mail"}


@pytest.mark.anyio
async def test_examples_of_another_kind_are_refused() -> None:
    with pytest.raises(TypeError, match="ExampleSource"):
        await examples_for(["not", "a", "mapping"], [FORECAST])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ExampleSource"):
        KeywordIndex(examples=42)  # type: ignore[arg-type]
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="examples_weight"):
            KeywordIndex(examples=EXAMPLES, examples_weight=bad)
        with pytest.raises(ValueError, match="examples_weight"):
            EmbeddingIndex(_bag_of_words, examples=EXAMPLES, examples_weight=bad)
    with pytest.raises(ValueError, match="per_tool"):
        ExampleWriter(ScriptedChatModel([]), per_tool=0)


WORDS = sorted({*VOCABULARY, *"rain umbrella tomorrow paris place conditions".split()})


async def _bag_of_words(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic embedding: word counts over a small vocabulary, plus a small bias."""
    vectors = []
    for text in texts:
        found = [w.strip("?.,!:()").lower() for w in text.split()]
        vectors.append([0.1, *(float(found.count(w)) for w in WORDS)])
    return vectors


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(_unit(a), _unit(b), strict=True))


@pytest.mark.anyio
async def test_an_embedding_scores_text_cosine_plus_a_share_of_the_examples_mean() -> None:
    tools = [FORECAST, MAIL, ToolDefinition("list_files", "List files.", {})]
    examples = {"get_forecast": ["rain tomorrow in paris", "umbrella"], "send_mail": ["email"]}
    weight = 0.25
    index = EmbeddingIndex(_bag_of_words).with_examples(examples, weight)
    built = await index.build(tools)
    assert isinstance(built, EmbeddingIndex)
    query = "umbrella for rain"
    (raw,) = await _bag_of_words([query])
    scores = built.similarities(_unit(raw))
    texts = await _bag_of_words([t for t in _texts(tools)])
    for tool, text, score in zip(tools, texts, scores, strict=True):
        own = examples.get(tool.name)
        if own:
            vectors = await _bag_of_words(own)
            share = sum(_cosine(raw, v) for v in vectors) / len(vectors)
        else:
            share = _cosine(raw, text)  # the text stands in for absent examples
        assert score == pytest.approx(_cosine(raw, text) + weight * share, abs=1e-6)  # float32
    plain = await EmbeddingIndex(_bag_of_words).build(tools)
    assert await built.search(query, 1) == ["get_forecast"]
    assert await plain.search(query, 1) != ["get_forecast"]


def _texts(tools: Sequence[ToolDefinition]) -> list[str]:
    from advisorchain.advisors.tool_search.index import document_text

    return [document_text(d) for d in tools]


def _answers(request: ChatRequest) -> str:
    prompt = request.messages[0].text
    name = prompt.splitlines()[0].removeprefix("Tool name: ")
    return f"1. How do I use {name}?\n2) {name} for my account please\nNotes:\n- ok"


@pytest.mark.anyio
async def test_a_writer_asks_once_per_tool_and_a_new_process_reads_its_cache(
    tmp_path: Path,
) -> None:
    path = tmp_path / "examples.sqlite3"
    model = ScriptedChatModel(_answers, model_name="m")
    writer = ExampleWriter(model, cache=ExampleCache(path, model="m"))
    found = await writer.examples([FORECAST, MAIL])
    assert found == {
        "get_forecast": ("How do I use get_forecast?", "get_forecast for my account please"),
        "send_mail": ("How do I use send_mail?", "send_mail for my account please"),
    }
    assert writer.asked == 2
    request = model.requests[0]
    assert request.options.temperature == 0.0 and request.options.max_tokens == 60
    assert request.messages[0].text == example_prompt(FORECAST, 2)
    assert await writer.examples([FORECAST, MAIL]) == found and writer.asked == 2

    # A new process: a new writer over the same file asks only for the changed tool.
    changed = ToolDefinition("send_mail", "Sends an email with attachments.", {})
    again = ExampleWriter(ScriptedChatModel(_answers), cache=ExampleCache(path, model="m"))
    assert (await again.examples([FORECAST, changed]))["get_forecast"] == found["get_forecast"]
    assert again.asked == 1
    other = ExampleWriter(ScriptedChatModel(_answers), cache=ExampleCache(path, model="other"))
    await other.examples([FORECAST])
    assert other.asked == 1  # another model's examples are not this one's


@pytest.mark.anyio
async def test_a_failing_model_raises_and_the_next_call_resumes_after_what_was_written(
    tmp_path: Path,
) -> None:
    cache = ExampleCache(tmp_path / "e.sqlite3", model="m")
    failing = ScriptedChatModel(["Rain tomorrow in Paris?", RuntimeError("model down")])
    with pytest.raises(RuntimeError, match="model down"):
        await ExampleWriter(failing, cache=cache).examples([FORECAST, MAIL])
    resumed = ExampleWriter(ScriptedChatModel(["Mail Bob the report"]), cache=cache)
    found = await resumed.examples([FORECAST, MAIL])
    assert found == {
        "get_forecast": ("Rain tomorrow in Paris?",),
        "send_mail": ("Mail Bob the report",),
    }
    assert resumed.asked == 1


def test_a_hostile_answer_is_bounded() -> None:
    answer = ("\n".join(["A" * 50_000, *(f"request number {i}" for i in range(1000))])) * 10
    parsed = parse_examples(answer, 3)
    assert len(parsed) <= 3 and all(len(p) <= MAX_EXAMPLE_CHARS for p in parsed)
    assert parse_examples("Here are two requests:\n\n- ok\n'Book a table for two'", 2) == (
        "Book a table for two",
    )


def test_an_unusable_cache_file_only_costs_the_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = ExampleCache(blocker / "e.sqlite3", model="m")
    cache.put_many({"p": ["x"]})
    assert cache.get_many(["p"]) == {}
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not sqlite" * 100)
    assert ExampleCache(garbage, model="m").get_many(["p"]) == {}


@pytest.mark.anyio
async def test_a_hybrid_gives_both_indexes_the_examples_and_the_model_is_asked_once() -> None:
    tools = [FORECAST, MAIL, ToolDefinition("list_files", "List files.", {})]
    model = ScriptedChatModel(_answers)
    writer = ExampleWriter(model, cache=None)
    built = await hybrid_index(EmbeddingIndex(_bag_of_words), examples=writer).build(tools)
    assert writer.asked == len(tools)
    assert isinstance(built, HybridIndex)
    keyword, embedding, names, plain = built.indexes
    assert isinstance(keyword, KeywordIndex) and keyword.examples is writer
    assert isinstance(embedding, EmbeddingIndex) and embedding.examples is writer
    assert isinstance(names, KeywordIndex) and names.examples is None
    assert isinstance(plain, BM25Index)  # reads the definitions alone
    assert (await built.search("my account please", 1)) in (["get_forecast"], ["send_mail"])
    with pytest.raises(TypeError, match="with_examples"):
        hybrid_index(RegexIndex(), examples=EXAMPLES)


def test_the_default_index_takes_examples_with_and_without_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(defaults, "embeddings_available", lambda: False)
    keyword = default_index(examples=EXAMPLES)
    assert isinstance(keyword, KeywordIndex) and keyword.examples is EXAMPLES
    monkeypatch.setattr(defaults, "embeddings_available", lambda: True)
    monkeypatch.setattr(defaults, "minilm_index", lambda: EmbeddingIndex(_bag_of_words))
    hybrid = default_index(examples=EXAMPLES)
    assert isinstance(hybrid, HybridIndex)
    assert [getattr(i, "examples", None) for i in hybrid.indexes] == [
        EXAMPLES,
        EXAMPLES,
        None,
        None,
    ]


def _search_for_an_umbrella(request: ChatRequest) -> AssistantMessage | str:
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if not results:
        query = {"query": "do I need an umbrella"}
        return AssistantMessage(tool_calls=(ToolCall.from_arguments("search_tools", query),))
    return "found: " + results[0].text.splitlines()[0].split(":")[0]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_the_advisor_finds_a_tool_by_its_examples_on_both_paths(path: str) -> None:
    examples = {"get_weather": ["Do I need an umbrella today?"]}
    chain = Chain(
        [ToolCallingAdvisor(), ToolSearchAdvisor(index=KeywordIndex(examples=examples))],
        model=ScriptedChatModel(_search_for_an_umbrella),
        tools=make_tools(),
    )
    if path == "call":
        text = (await chain.call("Umbrella?")).text
    else:
        events = [e async for e in chain.stream("Umbrella?")]
        assert isinstance(events[-1], ResponseCompleted)
        text = events[-1].response.text
    assert text == "found: get_weather"


@pytest.mark.anyio
async def test_the_local_model_writes_requests_a_keyword_index_finds_its_tool_by(
    local_model_path: Path, tmp_path: Path, anyio_backend: str
) -> None:
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for the real model")
    from advisorchain.providers.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(local_model_path, n_ctx=1024, n_threads=1)
    tool = ToolDefinition(
        "get_stock_price",
        "Latest trading price of a stock, by its ticker symbol.",
        {"type": "object", "properties": {"ticker": {"type": "string"}}},
    )
    cache = ExampleCache(tmp_path / "e.sqlite3", model=model.model_name)
    found = await ExampleWriter(model, cache=cache).examples([tool])
    written = found["get_stock_price"]
    assert 1 <= len(written) <= 2 and all(8 <= len(w) <= MAX_EXAMPLE_CHARS for w in written)
    again = ExampleWriter(model, cache=ExampleCache(tmp_path / "e.sqlite3", model=model.model_name))
    assert await again.examples([tool]) == found and again.asked == 0


@pytest.mark.anyio
async def test_a_writer_asks_up_to_concurrency_calls_at_once_and_stops_on_a_failure() -> None:
    tools = [ToolDefinition(f"tool_{i}", f"Does thing number {i}.", {}) for i in range(12)]
    running: list[int] = [0]
    most: list[int] = [0]

    async def answer(request: ChatRequest) -> str:
        running[0] += 1
        most[0] = max(most[0], running[0])
        await anyio.sleep(0.01)
        running[0] -= 1
        return _answers(request)

    writer = ExampleWriter(ScriptedChatModel(answer), cache=None, concurrency=3)
    found = await writer.examples(tools)
    assert most[0] == 3 and writer.asked == 12
    sequential = await ExampleWriter(ScriptedChatModel(_answers), cache=None).examples(tools)
    assert found == sequential

    calls: list[int] = [0]

    async def failing(request: ChatRequest) -> str:
        calls[0] += 1
        await anyio.sleep(0.01)
        if calls[0] == 2:
            raise RuntimeError("model down")
        return _answers(request)

    broken = ExampleWriter(ScriptedChatModel(failing), cache=None, concurrency=2)
    with pytest.raises(RuntimeError, match="model down"):
        await broken.examples(tools)
    assert calls[0] <= 3  # the calls under way end; no new one starts
    with pytest.raises(ValueError, match="concurrency"):
        ExampleWriter(ScriptedChatModel([]), concurrency=0)
