"""Durable turns on Temporal: one chain, run in process and on Temporal, gives the same
transcript, events and usage; turns and decisions are validated updates; deferred calls
wait in the workflow; the stream reconnects from an offset."""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, Protocol

import pytest

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, Approve, Reject
from advisorchain.advisors.approval import DeferredApprover, InMemoryApprovalStore
from advisorchain.durable.steps import event_to_json
from advisorchain.providers import ScriptedChatModel

from temporal_support import temporal_address

if os.environ.get("CI") != "true":
    pytest.importorskip("temporalio")

from temporalio.client import Client, WorkflowUpdateFailedError  # noqa: E402

from advisorchain.durable.temporal import (  # noqa: E402
    DurableOptions,
    TemporalConversation,
    create_worker,
    data_converter,
)

__all__ = ["temporal_address"]

pytestmark = pytest.mark.anyio
ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
PATHS = pytest.mark.parametrize("path", ["call", "stream"])


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK runs on asyncio only."""
    return "asyncio"


SCRIPT: list[Any] = [
    ToolCall.from_arguments("lookup", {"sku": "A1"}, id="c1"),
    [
        ToolCall.from_arguments("lookup", {"sku": "B2"}, id="c2"),
        ToolCall.from_arguments("broken", {}, id="c3"),
    ],
    "A1 and B2 cost 3 each.",
]


def shop_chain() -> Chain:
    """The chain every runner runs: three rounds, a read-only tool and one that fails."""

    @tool(read_only=True)
    def lookup(sku: str) -> str:
        """Price of a sku."""
        return f"{sku}: 3"

    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("no stock service")

    return Chain(
        [ToolCallingAdvisor()], model=ScriptedChatModel(list(SCRIPT)), tools=[lookup, broken]
    )


class Runner(Protocol):
    async def call(self, prompt: Any = (), *, decisions: Any = None) -> ChatResponse: ...
    def stream(self, prompt: Any = (), *, decisions: Any = None) -> AsyncIterator[StreamEvent]: ...


@asynccontextmanager
async def temporal_runner(
    address: str, factory: Callable[[], Chain], **options: Any
) -> AsyncIterator[TemporalConversation]:
    client = await Client.connect(address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    worker = create_worker(client, queue, factory, options=DurableOptions(**options))
    async with worker:
        conversation = TemporalConversation(client, f"conv-{uuid.uuid4().hex}", task_queue=queue)
        await conversation.start()
        yield conversation


@asynccontextmanager
async def in_process(factory: Callable[[], Chain]) -> AsyncIterator[Runner]:
    class Local:
        def __init__(self) -> None:
            self.chain = factory()
            self.messages: list[Any] = []

        async def call(self, prompt: Any = (), **kw: Any) -> ChatResponse:
            new = [UserMessage(content=prompt)] if isinstance(prompt, str) else []
            response = await self.chain.call([*self.messages, *new], **kw)
            self.messages += [*new, *response.messages]
            return response

        async def stream(self, prompt: Any = (), **kw: Any) -> AsyncIterator[StreamEvent]:
            new = [UserMessage(content=prompt)] if isinstance(prompt, str) else []
            async for event in self.chain.stream([*self.messages, *new], **kw):
                if isinstance(event, ResponseCompleted):
                    self.messages += [*new, *event.response.messages]
                yield event

    yield Local()


RUNNER_NAMES = ("in_process", "temporal")
RUNNERS = pytest.mark.parametrize("runner", RUNNER_NAMES)
ONE_CHAIN_RUNNERS = ("in_process", "temporal", "dbos")
"""The runners of the one-chain test (issue 33 item 3)."""


@asynccontextmanager
async def dbos_runner(factory: Callable[[], Chain]) -> AsyncIterator[Runner]:
    """The chain on DBOS (a SQLite system database in a temporary folder), one turn a
    workflow."""
    dbos = pytest.importorskip("dbos")
    from advisorchain.durable.dbos import DBOSRunner
    from advisorchain.durable.ledger import MemoryLedger

    with tempfile.TemporaryDirectory() as folder:
        dbos.DBOS(
            config={
                "name": "runners",
                "system_database_url": f"sqlite:///{folder}/dbos.sqlite",
                "notification_listener_polling_interval_sec": 0.02,
                "log_level": "WARNING",
            }
        )
        runner = DBOSRunner(
            factory(), ledger=MemoryLedger(), name=f"r{uuid.uuid4().hex[:8]}", polling_interval=0.02
        )
        dbos.DBOS.launch()
        try:
            yield runner
        finally:
            dbos.DBOS.destroy(destroy_registry=True)


@asynccontextmanager
async def open_runner(
    runner: str, address: str, factory: Callable[[], Chain], **options: Any
) -> AsyncIterator[Runner]:
    if runner == "in_process":
        async with in_process(factory) as local:
            yield local
    elif runner == "dbos":
        async with dbos_runner(factory) as on_dbos:
            yield on_dbos
    else:
        async with temporal_runner(address, factory, **options) as durable:
            yield durable


async def run_turn(
    path: str, runner: Runner, prompt: Any = (), **kw: Any
) -> tuple[ChatResponse, list[Any]]:
    if path == "call":
        return await runner.call(prompt, **kw), []
    events = [e async for e in runner.stream(prompt, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, _in_call_order([_normal(e) for e in events])


def _in_call_order(events: list[Any]) -> list[Any]:
    """`events` with each run of `tool_call_finished` in call-id order: a round's calls run
    concurrently, so which finishes first is timing, on any runner."""
    ordered: list[Any] = []
    finished: list[Any] = []
    for values in [*events, None]:
        if values is not None and values["type"] == "tool_call_finished":
            finished.append(values)
            continue
        ordered += sorted(finished, key=lambda v: v["call"]["id"])
        finished = []
        if values is not None:
            ordered.append(values)
    return ordered


def _normal(event: StreamEvent) -> Any:
    values = event_to_json(event)
    if isinstance(event, ToolCallFinished):
        values["duration"] = 0
    return values


@PATHS
async def test_one_chain_same_transcript_events_usage_on_every_runner(
    path: str, temporal_address: str
) -> None:
    results = {}
    runners: tuple[str, ...] = ONE_CHAIN_RUNNERS
    for runner in runners:
        async with open_runner(runner, temporal_address, shop_chain) as opened:
            results[runner] = await run_turn(path, opened, "prices of A1 and B2?")
    expected, expected_events = results["in_process"]
    for durable in runners[1:]:
        got, events = results[durable]
        assert got.messages == expected.messages, durable
        assert got.usage == expected.usage and got.usage.requests == 3, durable
        assert got.finish_reason == expected.finish_reason == "stop", durable
        assert events == expected_events, durable
        assert got.messages[4].text == "Error: ValueError: no stock service", durable


def pay_chain(effects: list[int] | None = None) -> Callable[[], Chain]:
    def factory() -> Chain:
        @tool(requires_approval=True)
        def pay(amount: int) -> str:
            """Pay."""
            if effects is not None:
                effects.append(amount)
            return f"paid {amount}"

        model = ScriptedChatModel(
            [
                ToolCall.from_arguments("pay", {"amount": 5}, id="p1"),
                "paid.",
                ToolCall.from_arguments("pay", {"amount": 9}, id="p2"),
                "not paid.",
            ]
        )
        return Chain(
            [
                ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore()),
                ToolCallingAdvisor(),
            ],
            model=model,
            tools=[pay],
        )

    return factory


@PATHS
@RUNNERS
async def test_approval_through_an_update(path: str, runner: str, temporal_address: str) -> None:
    effects: list[int] = []
    async with open_runner(runner, temporal_address, pay_chain(effects)) as opened:
        first, _ = await run_turn(path, opened, "pay 5")
        assert first.finish_reason == "deferred" and [d.id for d in first.deferred] == ["p1"]
        assert effects == []
        second, _ = await run_turn(path, opened, decisions={"p1": Approve()})
        assert effects == [5] and second.text == "paid."
        assert second.messages[0].text == "paid 5"
        third, _ = await run_turn(path, opened, "pay 9")
        fourth, _ = await run_turn(path, opened, decisions={"p2": Reject("no")})
        assert effects == [5] and fourth.text == "not paid."
        assert "rejected" in fourth.messages[0].text


async def test_updates_refuse_duplicate_stale_and_mismatched_turns(temporal_address: str) -> None:
    async with temporal_runner(temporal_address, pay_chain()) as conversation:
        await conversation.call("pay 5", turn_id="t1")
        # a turn while calls wait, a duplicate id, decisions for ids that do not wait
        with pytest.raises(WorkflowUpdateFailedError) as waiting:
            await conversation.call("hello", turn_id="t2")
        assert "wait for decisions" in str(waiting.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as duplicate:
            await conversation.call(decisions={"p1": Approve()}, turn_id="t1")
        assert "duplicate turn" in str(duplicate.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as unknown:
            await conversation.call(decisions={"nope": Approve()})
        assert "not a call that waits" in str(unknown.value.cause)
        # decisions bound to other arguments than the workflow's waiting call
        bound = conversation.fingerprints["p1"]
        conversation.fingerprints["p1"] = "pay:" + "0" * 64
        with pytest.raises(WorkflowUpdateFailedError) as changed:
            await conversation.call(decisions={"p1": Approve()})
        assert "other arguments" in str(changed.value.cause)
        assert conversation.fingerprints["p1"] == bound  # read again after the refusal
        done = await conversation.call(decisions={"p1": Approve()})
        assert done.text == "paid."
        # a stale caller: another handle ran a turn since this one looked
        other = TemporalConversation(
            conversation.client, conversation.id, task_queue=conversation.task_queue
        )
        await other.refresh()
        await other.call("pay 9")
        with pytest.raises(WorkflowUpdateFailedError) as stale:
            await conversation.call("again")
        assert "stale turn" in str(stale.value.cause)
        transcript = await conversation.transcript()
        assert [m.role for m in transcript][:4] == ["user", "assistant", "tool", "assistant"]


async def test_start_knows_a_new_conversation_and_reads_a_running_one(
    temporal_address: str,
) -> None:
    async with temporal_runner(temporal_address, pay_chain()) as conversation:
        assert (conversation.turns, conversation.fingerprints) == (0, {})  # started: no query
        await conversation.call("pay 5")
        attached = TemporalConversation(
            conversation.client, conversation.id, task_queue=conversation.task_queue
        )
        await attached.start()  # attaches to the running workflow and reads its state
        assert attached.turns == 1 and attached.fingerprints == conversation.fingerprints
        done = await attached.call(decisions={"p1": Approve()})
        assert done.text == "paid."


def test_the_payload_converter_shares_its_type_adapters() -> None:
    from temporalio.api.common.v1 import Payload

    from advisorchain.durable.temporal import ConversationInput, SharedPayloadConverter

    first, second = SharedPayloadConverter(), SharedPayloadConverter()
    assert first.converters[b"json/plain"] is second.converters[b"json/plain"]
    value = ConversationInput(chain="c", applied=["t1"], turns=2)
    (payload,) = first.to_payloads([value])
    assert isinstance(payload, Payload)
    assert second.from_payloads([payload], [ConversationInput]) == [value]


async def test_deferred_calls_expire_on_a_durable_timer(temporal_address: str) -> None:
    async with temporal_runner(
        temporal_address, pay_chain(), decision_timeout=timedelta(seconds=1)
    ) as conversation:
        first = await conversation.call("pay 5")
        assert first.finish_reason == "deferred"
        for _ in range(100):
            await conversation.refresh()
            if not conversation.fingerprints:
                break
            await __import__("anyio").sleep(0.1)
        transcript = await conversation.transcript()
        assert "the decision expired" in transcript[2].text
        assert transcript[-1].text == "paid."


async def test_stream_reconnects_from_an_offset(temporal_address: str) -> None:
    async with temporal_runner(temporal_address, shop_chain) as conversation:
        start = await conversation.offset()
        events = [e async for e in conversation.stream("prices?")]
        seen = []
        async for item in conversation.events(from_offset=start):
            seen.append(item)
            if isinstance(item.event, ResponseCompleted):
                break
        assert [_normal(s.event) for s in seen] == [_normal(e) for e in events]
        # a client that read up to some event reconnects after it and misses nothing
        middle = seen[len(seen) // 2]
        rest = []
        async for item in conversation.events(from_offset=middle.offset + 1):
            rest.append(item)
            if isinstance(item.event, ResponseCompleted):
                break
        assert rest == seen[len(seen) // 2 + 1 :]
        assert json.dumps(_normal(rest[-1].event))


async def test_a_called_turn_publishes_its_response_completed(temporal_address: str) -> None:
    async with temporal_runner(temporal_address, shop_chain) as conversation:
        response = await conversation.call("prices?")
        async for item in conversation.events(from_offset=0):
            assert isinstance(item.event, ResponseCompleted) and item.turn == 1
            assert _normal(item.event) == _normal(ResponseCompleted(response))
            break


async def test_tracing_exports_each_span_once_across_replays(temporal_address: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from advisorchain.advisors import TracingAdvisor
    from advisorchain.durable.temporal import ReplaySafeSpanProcessor

    def traced(replay_safe: bool) -> tuple[InMemorySpanExporter, Callable[[], Chain]]:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        processor = SimpleSpanProcessor(exporter)
        provider.add_span_processor(
            ReplaySafeSpanProcessor(processor) if replay_safe else processor
        )

        def factory() -> Chain:
            shop = shop_chain()
            return Chain(
                [TracingAdvisor(provider), *shop.advisors], model=shop.model, tools=shop.tools
            )

        return exporter, factory

    local, local_factory = traced(False)
    await local_factory().call("prices?")
    expected = sorted(s.name for s in local.get_finished_spans())
    client = await Client.connect(temporal_address, data_converter=data_converter())
    for replay_safe in (True, False):
        exporter, factory = traced(replay_safe)
        queue = f"q-{uuid.uuid4().hex}"
        # no workflow cache: every workflow task replays the history from its start
        async with create_worker(client, queue, factory, max_cached_workflows=0):
            conversation = TemporalConversation(client, f"c-{uuid.uuid4().hex}", task_queue=queue)
            await conversation.start()
            await conversation.call("prices?")
        names = sorted(s.name for s in exporter.get_finished_spans())
        if replay_safe:
            assert names == expected
        else:  # what the processor prevents: spans exported again on each replay
            assert len(names) > len(expected)


async def test_the_benchmark_turn_takes_three_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(ROOT)
    from benchmarks.durable import Measured, bench_chain, table

    response = await bench_chain().call("prices?")
    assert response.usage.requests == 3
    assert [m.role for m in response.messages] == ["assistant", "tool"] * 2 + ["assistant"]
    rates = {1: 2.0}
    text = table(
        {
            "in process": Measured(1.0, 2.0),
            "Temporal, hand-written floor": Measured(4.0, 8.0),
            "Temporal, advisorchain: turns/s": rates,
            "Temporal, hand-written floor: turns/s": rates,
        }
    )
    assert "| in process | 1.00 | 2.00 | 0.25x |" in text


def test_the_benchmark_compares_an_earlier_tree_only_when_there_is_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.syspath_prepend(ROOT)
    from benchmarks.durable import _rotated, packages

    assert [suffix for _, suffix in packages(None)] == [""]
    with pytest.raises(SystemExit, match="advisorchain_prev"):
        packages(tmp_path)
    assert _rotated(["a", "b", "c"], 4) == ["b", "c", "a"]


async def test_the_benchmark_peers_turn_and_a_missing_one_is_a_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(ROOT)
    from benchmarks.durable import ANSWER, PEER_TURNS, Measured, pydantic_ai_on_temporal, table

    rates = {1: 2.0}
    text = table(
        {
            "Temporal, hand-written floor": Measured(4.0, 8.0, ["m", "t", "m", "t", "m"]),
            "Temporal, OpenAI Agents SDK": "not installed",
            "Temporal, hand-written floor: turns/s": rates,
        }
    )
    assert "| Temporal, hand-written floor | 4.00 | 8.00 | 1.00x | 5 |" in text
    assert "| Temporal, OpenAI Agents SDK | not installed | | | |" in text
    pytest.importorskip("pydantic_ai.durable_exec.temporal")  # the `bench` extra
    assert pydantic_ai_on_temporal() is not None
    # outside a workflow the durability capability is transparent: the scripted rounds alone
    assert await PEER_TURNS["pai.Turn"]("prices?") == ANSWER
