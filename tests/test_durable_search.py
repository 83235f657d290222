"""Tool search over an embedding index on the durable engines (issue 33): the embeddings
are the step `advisorchain.embeddings.embed`, done by the worker's embedding function
(behind its `EmbeddingCache`); workflow code embeds nothing. On the seam
(`LocalStepRunner`), on Temporal (the activities in the workflow's history) and on DBOS
(its recorded steps), on call and stream."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
)
from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    SplitQueryIndex,
    ToolSearchAdvisor,
    hybrid_index,
)
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.durable import steps
from advisorchain.durable.search import durable_index, embedder_key, search_embedders
from advisorchain.durable.steps import (
    STEP_EMBED,
    STEP_MODEL_CALL,
    STEP_MODEL_STREAM,
    STEP_TOOL_CALL,
    DurableEmbedder,
    EmbedInput,
    EmbedOutput,
    LocalStepRunner,
    P,
    StepExecutor,
    StepLimitExceeded,
    StepPayload,
    durable_chain,
    pack_vectors,
    unpack_vectors,
)
from advisorchain.providers import ScriptedChatModel

from temporal_support import temporal_address

__all__ = ["temporal_address"]

pytestmark = pytest.mark.anyio
PATHS = pytest.mark.parametrize("path", ["call", "stream"])
IN_STEP: ContextVar[str | None] = ContextVar("IN_STEP", default=None)
"""The step running now, in this process (set by `Recording`)."""
TOPICS = ("weather", "email", "price", "order", "refund", "stock", "invoice", "calendar")


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK and DBOS run on asyncio only."""
    return "asyncio"


class Recording(LocalStepRunner):
    """Runs steps in process and records their names, `IN_STEP` set while each runs."""

    def __init__(self, executor: StepExecutor) -> None:
        super().__init__(executor)
        self.steps: list[str] = []

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        self.steps.append(name)
        token = IN_STEP.set(name)
        try:
            return await super().run_step(name, payload, result_type)
        finally:
            IN_STEP.reset(token)


class Embedder:
    """A bag-of-topics embedding function recording the texts it embedded and where:
    `where()` says whether a call runs inside a step (`IN_STEP` here, an activity or a
    DBOS step on the engines)."""

    def __init__(self, where: Callable[[], object] = IN_STEP.get) -> None:
        self.where = where
        self.calls: list[tuple[object, int]] = []

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append((self.where(), len(texts)))
        return [[t.lower().count(w) + 0.01 * i for i, w in enumerate(TOPICS)] for t in texts]


def catalog() -> list[Tool]:
    def answer(arguments: dict[str, Any], context: Any) -> str:
        return f"{context.tool_name}: done"

    schema = {"type": "object", "properties": {"about": {"type": "string"}}}
    return [Tool(f"{w}_tool", f"Everything about {w}: {w} {w}.", schema, answer) for w in TOPICS]


SCRIPT: list[Any] = [
    ToolCall.from_arguments("search_tools", {"query": "weather"}, id="s1"),
    ToolCall.from_arguments("weather_tool", {"about": "Rome"}, id="c1"),
    "Sunny in Rome.",
]


def search_chain(
    model: ScriptedChatModel, embed: Embedder, cache: EmbeddingCache | None = None
) -> Chain:
    search = ToolSearchAdvisor(EmbeddingIndex(embed, cache=cache), min_tools=4, max_results=2)
    return Chain([ToolCallingAdvisor(), search], model=model, tools=catalog())


async def run_turn(path: str, runner: Any, prompt: str, **kw: Any) -> ChatResponse:
    """One turn on `runner` (a chain, a `TemporalConversation` or a `DBOSRunner`)."""
    if path == "call":
        response: ChatResponse = await runner.call(prompt, **kw)
        return response
    events: list[StreamEvent] = [e async for e in runner.stream(prompt, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


@PATHS
async def test_tool_search_embeds_through_steps(path: str, tmp_path: Path) -> None:
    expected = await run_turn(path, search_chain(ScriptedChatModel(SCRIPT), Embedder()), "hi")
    assert "weather_tool" in expected.messages[1].text

    embed = Embedder()
    cache = EmbeddingCache(tmp_path / "vectors.db", model="topics")
    worker = search_chain(ScriptedChatModel(SCRIPT), embed, cache)
    runner = Recording(StepExecutor.from_chain(worker))
    unused = Embedder()
    workflow_side = durable_chain(search_chain(ScriptedChatModel([]), unused), runner, run_id="r")
    got = await run_turn(path, workflow_side, "hi")

    assert got.messages == expected.messages
    model = STEP_MODEL_CALL if path == "call" else STEP_MODEL_STREAM
    assert runner.steps == [model, STEP_EMBED, STEP_EMBED, model, STEP_TOOL_CALL, model]
    assert unused.calls == []
    assert embed.calls == [(STEP_EMBED, len(TOPICS)), (STEP_EMBED, 1)]  # the catalog, the query

    # Another run (a new conversation) reads the catalog's vectors from the worker's cache.
    again = durable_chain(search_chain(ScriptedChatModel([]), unused), runner, run_id="r2")
    runner.executor.models[steps.DEFAULT_MODEL] = ScriptedChatModel(SCRIPT)
    assert (await run_turn(path, again, "hi")).messages == expected.messages
    assert embed.calls[2:] == [(STEP_EMBED, 1)]


def test_every_embedding_index_gets_its_keys_on_both_sides() -> None:
    first, second, third = Embedder(), Embedder(), Embedder()
    index = HybridIndex(
        KeywordIndex(),
        EmbeddingIndex(first, query_embed=second),
        SplitQueryIndex(EmbeddingIndex(third)),
    )
    advisors = [ToolSearchAdvisor(index)]
    worker = search_embedders(advisors)
    assert worker == {
        "embeddings": first,
        "embeddings-queries": second,
        "embeddings-1": third,
        "embeddings-1-queries": third,
    }
    runner = LocalStepRunner(StepExecutor(models={}))
    rebuilt = durable_index(index, lambda key: DurableEmbedder(runner, key=key), iter(range(9)))
    assert isinstance(rebuilt, HybridIndex)
    keyword, embedding, split = rebuilt.indexes
    assert keyword is index.indexes[0]
    assert isinstance(embedding, EmbeddingIndex) and embedding.cache is None
    documents, queries = embedding.embed, embedding.query_embed
    assert isinstance(documents, DurableEmbedder) and isinstance(queries, DurableEmbedder)
    assert (documents.key, queries.key) == (embedder_key(0), embedder_key(0, queries=True))
    assert isinstance(split, SplitQueryIndex) and isinstance(split.index, EmbeddingIndex)
    inner = split.index.embed
    assert isinstance(inner, DurableEmbedder) and inner.key == "embeddings-1"


def test_what_would_embed_in_workflow_code_is_refused() -> None:
    class Source:
        async def examples(self, definitions: Any) -> dict[str, tuple[str, ...]]:
            return {}

    runner = LocalStepRunner(StepExecutor(models={}))
    writer = ToolSearchAdvisor(EmbeddingIndex(Embedder(), examples=Source()))
    chain = Chain([ToolCallingAdvisor(), writer], model=ScriptedChatModel([]))
    with pytest.raises(ChainConfigurationError, match="examples"):
        durable_chain(chain, runner, run_id="r")

    class Mine(ToolSearchAdvisor):
        pass

    chain = Chain([ToolCallingAdvisor(), Mine(EmbeddingIndex(Embedder()))], model=chain.model)
    with pytest.raises(ChainConfigurationError, match="Mine"):
        durable_chain(chain, runner, run_id="r")
    keyword = Mine(KeywordIndex())
    chain = Chain([ToolCallingAdvisor(), keyword], model=chain.model)
    assert durable_chain(chain, runner, run_id="r").advisors[1] is keyword


async def test_an_embedding_step_holds_a_bounded_number_of_texts() -> None:
    embed = Embedder()
    runner = Recording(StepExecutor(models={}, embedders={"e": embed}))
    vectors = await DurableEmbedder(runner, key="e")([f"text {i}" for i in range(70)])
    assert len(vectors) == 70 and [n for _, n in embed.calls] == [32, 32, 6]
    assert vectors[0] == pytest.approx([0.01 * i for i in range(len(TOPICS))])
    with pytest.raises(ValueError, match="at most 32"):
        EmbedInput(embedder="e", texts=("x",) * 33)


def test_an_embedders_answer_past_the_bounds_is_refused() -> None:
    assert unpack_vectors(pack_vectors([[1.0, 2.5], [0.0, -1.0]], 2)) == [[1.0, 2.5], [0.0, -1.0]]
    bad: list[tuple[list[list[float]], int, str]] = [
        ([[1.0]], 2, "1 vectors for 2 texts"),
        ([[1.0], [1.0, 2.0]], 2, "different sizes"),
        ([[math.nan]], 1, "finite"),
        ([[math.inf]], 1, "finite"),
        ([[1e39]], 1, "finite"),
        ([[0.0] * (steps.MAX_EMBED_DIMENSION + 1)], 1, "vectors of 4097 values"),
        ([[]], 1, "vectors of 0 values"),
    ]
    for vectors, texts, why in bad:
        with pytest.raises(StepLimitExceeded, match=why):
            pack_vectors(vectors, texts)
    with pytest.raises(ValueError, match="packed float32"):
        EmbedOutput(dimension=2, vectors=("AAAA",))
    with pytest.raises(ValueError, match="less than or equal"):
        EmbedOutput(dimension=steps.MAX_EMBED_DIMENSION + 1, vectors=())


# -- the engines ------------------------------------------------------------------------------


def in_activity() -> object:
    from temporalio import activity, workflow

    return "activity" if activity.in_activity() else "workflow" if workflow.in_workflow() else None


@PATHS
async def test_tool_search_embeds_in_activities_on_temporal(
    path: str, temporal_address: str, tmp_path: Path
) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("temporalio")
    from temporalio.client import Client

    from advisorchain.durable.temporal import TemporalConversation, create_worker, data_converter

    embed = Embedder(in_activity)
    cache = EmbeddingCache(tmp_path / "vectors.db", model="topics")
    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    conversation = TemporalConversation(client, f"search-{uuid.uuid4().hex}", task_queue=queue)
    async with create_worker(client, queue, lambda: search_chain(
            ScriptedChatModel(SCRIPT), embed, cache)):  # fmt: skip
        await conversation.start()
        response = await run_turn(path, conversation, "hi")
        history = await conversation.handle.fetch_history()

    assert response.text == "Sunny in Rome." and "weather_tool" in response.messages[1].text
    assert embed.calls == [("activity", len(TOPICS)), ("activity", 1)]
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled.count(STEP_EMBED) == 2


async def test_a_hybrid_index_builds_in_workflow_code_on_temporal(
    temporal_address: str,
) -> None:
    """`hybrid_index` builds its keyword indexes with `anyio.to_thread`, which a Temporal
    workflow's event loop cannot serve: in workflow code it runs on the calling thread."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("temporalio")
    import anyio
    from temporalio.client import Client

    from advisorchain.durable.temporal import TemporalConversation, create_worker, data_converter

    embed = Embedder(in_activity)

    def factory() -> Chain:
        search = ToolSearchAdvisor(hybrid_index(EmbeddingIndex(embed)), min_tools=4)
        return Chain([ToolCallingAdvisor(), search], model=ScriptedChatModel(SCRIPT),
                     tools=catalog())  # fmt: skip

    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    conversation = TemporalConversation(client, f"hybrid-{uuid.uuid4().hex}", task_queue=queue)
    async with create_worker(client, queue, factory):
        await conversation.start()
        with anyio.fail_after(60):
            response = await conversation.call("hi")
    assert response.text == "Sunny in Rome." and "weather_tool" in response.messages[1].text
    assert [where for where, _ in embed.calls] == ["activity", "activity"]


@PATHS
async def test_tool_search_embeds_in_steps_on_dbos(path: str, tmp_path: Path) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("dbos")
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSRunner
    from advisorchain.durable.ledger import MemoryLedger

    def where() -> object:
        return "step" if DBOS.step_id is not None else "workflow"

    embed = Embedder(where)
    database = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS(config={"name": "search", "system_database_url": database, "log_level": "WARNING",
                 "notification_listener_polling_interval_sec": 0.02})  # fmt: skip
    try:
        runner = DBOSRunner(search_chain(ScriptedChatModel(SCRIPT), embed), ledger=MemoryLedger(),
                            name=f"s{uuid.uuid4().hex[:8]}", polling_interval=0.02)  # fmt: skip
        DBOS.launch()
        response = await run_turn(path, runner, "hi")
        (turn,) = await DBOS.list_workflows_async(name=runner.workflow_name)
        recorded = [
            s["function_name"] for s in await DBOS.list_workflow_steps_async(turn.workflow_id)
        ]
    finally:
        DBOS.destroy(destroy_registry=True)
    assert response.text == "Sunny in Rome."
    assert embed.calls == [("step", len(TOPICS)), ("step", 1)]
    assert recorded.count(STEP_EMBED) == 2, recorded
