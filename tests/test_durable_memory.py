"""Memory on the durable engines (issue 33 item 1): a chain with `MemoryAdvisor(store)`
loads a conversation through the step `advisorchain.memory.load` and saves each turn
through `advisorchain.memory.save`, on Temporal (activities) and on DBOS (steps); the
store lives on the worker."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    Message,
    ResponseCompleted,
    StreamEvent,
    ToolCall,
    ToolCallingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, Approve, MemoryAdvisor
from advisorchain.advisors.approval import DeferredApprover, InMemoryApprovalStore
from advisorchain.advisors.memory import InMemoryChatMemoryStore
from advisorchain.core.request import ChatRequest
from advisorchain.providers import ScriptedChatModel

from temporal_support import temporal_address

__all__ = ["temporal_address"]

pytestmark = pytest.mark.anyio
PATHS = pytest.mark.parametrize("path", ["call", "stream"])
VARIANTS = pytest.mark.parametrize("variant", ["plain", "window", "continued"])
"""`plain`: `MemoryAdvisor(store)`; `window`: with `max_messages=2`; `continued`: the
store holds the conversation's beginning before the first durable turn."""

FIRST = "price of A1?"
SECOND = "what did I ask?"
TURN_ONE = [
    ("user", FIRST),
    ("assistant", ""),
    ("tool", "A1: 3"),
    ("assistant", "A1 costs 3."),
]
TURN_TWO = [("user", SECOND), ("assistant", "You asked about A1.")]


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK and DBOS run on asyncio only."""
    return "asyncio"


def _seen(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


class RecordingStore(InMemoryChatMemoryStore):
    """The worker's store, recording what each load returned and each append wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[list[tuple[str, str]]] = []
        self.appends: list[list[tuple[str, str]]] = []

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        found = await super().load(conversation_id)
        self.loads.append(_seen(found))
        return found

    async def load_tail(self, conversation_id: str, last: int) -> tuple[Message, ...]:
        found = await super().load_tail(conversation_id, last)
        self.loads.append(_seen(found))
        return found

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.appends.append(_seen(messages))
        await super().append(conversation_id, messages)


class Worker:
    """The worker's side of the test: its store and every model request it answered."""

    def __init__(self, variant: str = "plain") -> None:
        self.variant = variant
        self.store = RecordingStore()
        self.requests: list[list[tuple[str, str]]] = []

    async def seed(self, conversation_id: str) -> None:
        """For `continued`: the conversation began elsewhere (in process, an earlier
        workflow) and its store holds that beginning."""
        if self.variant == "continued":
            begun: list[Message] = [UserMessage(content="hi"), AssistantMessage(content="hello")]
            await InMemoryChatMemoryStore.append(self.store, conversation_id, begun)

    def reply(self, request: ChatRequest) -> str | ToolCall:
        self.requests.append(_seen(request.messages))
        last = request.messages[-1]
        if last.role == "tool":
            return "A1 costs 3."
        if last.text == FIRST:
            return ToolCall.from_arguments("lookup", {"sku": "A1"}, id="c1")
        return "You asked about A1."

    def factory(self) -> Chain:
        """The chain: memory before the tool loop, one read-only tool."""

        @tool(read_only=True)
        def lookup(sku: str) -> str:
            """Price of a sku."""
            return f"{sku}: 3"

        window = 2 if self.variant == "window" else None
        return Chain(
            [MemoryAdvisor(self.store, max_messages=window), ToolCallingAdvisor()],
            model=ScriptedChatModel(self.reply),
            tools=[lookup],
        )

    async def check(self, conversation_id: str) -> None:
        """Two turns: the second request holds the first turn, loaded from the store;
        each turn saved once."""
        begun = [("user", "hi"), ("assistant", "hello")] if self.variant == "continued" else []
        loaded = [*begun, *TURN_ONE]
        assert len(self.store.loads) == 2 and self.store.loads[1] == loaded
        assert self.store.appends == [TURN_ONE, TURN_TWO]
        if self.variant == "window":  # the last 2 messages, cut where no call loses results
            loaded = [("assistant", "A1 costs 3.")]
        assert self.requests[0] == [*begun, ("user", FIRST)]
        assert self.requests[-1] == [*loaded, ("user", SECOND)]
        stored = await InMemoryChatMemoryStore.load(self.store, conversation_id)
        assert _seen(stored) == [*begun, *TURN_ONE, *TURN_TWO]


async def run_turn(path: str, runner: Any, prompt: str, **kw: Any) -> ChatResponse:
    """One turn on `runner` (a `TemporalConversation` or a `DBOSRunner`), by `path`."""
    if path == "call":
        response: ChatResponse = await runner.call(prompt, **kw)
        return response
    events: list[StreamEvent] = [e async for e in runner.stream(prompt, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


@VARIANTS
@PATHS
async def test_memory_loads_and_saves_through_temporal_activities(
    path: str, variant: str, temporal_address: str
) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("temporalio")
    from temporalio.client import Client

    from advisorchain.durable.temporal import TemporalConversation, create_worker, data_converter

    worker = Worker(variant)
    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    async with create_worker(client, queue, worker.factory):
        conversation = TemporalConversation(client, f"conv-{uuid.uuid4().hex}", task_queue=queue)
        await worker.seed(conversation.id)
        await conversation.start()
        first = await run_turn(path, conversation, FIRST)
        assert _seen(first.messages) == TURN_ONE[1:]
        second = await run_turn(path, conversation, SECOND)
        assert second.text == "You asked about A1."
        assert _seen(await conversation.transcript()) == [*TURN_ONE, *TURN_TWO]
    await worker.check(conversation.id)


@asynccontextmanager
async def dbos_runner(folder: Path, chain: Callable[[], Chain]) -> AsyncIterator[Any]:
    """A DBOS app on a SQLite system database in `folder`, running `chain`'s turns."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("dbos")
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSRunner
    from advisorchain.durable.ledger import MemoryLedger

    DBOS(
        config={
            "name": "memory",
            "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
            "notification_listener_polling_interval_sec": 0.02,
            "log_level": "WARNING",
        }
    )
    try:
        runner = DBOSRunner(
            chain(), ledger=MemoryLedger(), name=f"m{uuid.uuid4().hex[:8]}", polling_interval=0.02
        )
        DBOS.launch()
        yield runner
    finally:
        DBOS.destroy(destroy_registry=True)


@VARIANTS
@PATHS
async def test_memory_loads_and_saves_through_dbos_steps(
    path: str, variant: str, tmp_path: Path
) -> None:
    worker = Worker(variant)
    await worker.seed("c")
    async with dbos_runner(tmp_path, worker.factory) as runner:
        first = await run_turn(path, runner, FIRST, conversation_id="c")
        assert _seen(first.messages) == TURN_ONE[1:]
        second = await run_turn(path, runner, SECOND, conversation_id="c")
        assert second.text == "You asked about A1."
    await worker.check("c")


def pay_worker(store: RecordingStore) -> Callable[[], Chain]:
    """A chain whose one tool waits for an approval, with memory in `store`."""

    def reply(request: ChatRequest) -> str | ToolCall:
        if request.messages[-1].role == "tool":
            return "paid."
        return ToolCall.from_arguments("pay", {"amount": 5}, id="p1")

    def factory() -> Chain:
        @tool(requires_approval=True)
        def pay(amount: int) -> str:
            """Pay."""
            return f"paid {amount}"

        return Chain(
            [
                MemoryAdvisor(store),
                ToolCallingAdvisor(),
                ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore()),
            ],
            model=ScriptedChatModel(reply),
            tools=[pay],
        )

    return factory


async def in_process_approval() -> list[tuple[str, str]]:
    """What memory stores in process for a deferred turn and its resume."""
    store = RecordingStore()
    chain = pay_worker(store)()
    first = await chain.call("pay 5", conversation_id="c")
    assert first.finish_reason == "deferred"
    done = await chain.call(decisions={"p1": Approve()}, conversation_id="c")
    assert done.text == "paid."
    return _seen(await InMemoryChatMemoryStore.load(store, "c"))


async def test_a_deferred_turn_resumes_from_memory_on_temporal(temporal_address: str) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("temporalio")
    from temporalio.client import Client

    from advisorchain.durable.temporal import TemporalConversation, create_worker, data_converter

    expected = await in_process_approval()
    store = RecordingStore()
    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    async with create_worker(client, queue, pay_worker(store)):
        conversation = TemporalConversation(client, f"conv-{uuid.uuid4().hex}", task_queue=queue)
        await conversation.start()
        first = await conversation.call("pay 5")
        assert first.finish_reason == "deferred"
        done = await conversation.call(decisions={"p1": Approve()})
        assert done.text == "paid."
    assert _seen(await InMemoryChatMemoryStore.load(store, conversation.id)) == expected
    assert len(store.appends) == 2


async def test_a_deferred_turn_resumes_with_memory_on_dbos(tmp_path: Path) -> None:
    expected = await in_process_approval()
    store = RecordingStore()
    async with dbos_runner(tmp_path, pay_worker(store)) as runner:
        turn = await runner.start("pay 5", conversation_id="c")
        waiting = await runner.waiting(turn)
        assert waiting is not None
        await runner.decide(turn, {"p1": Approve()}, shown=waiting.calls)
        done = await runner.result(turn)
        assert done.text == "paid."
    assert _seen(await InMemoryChatMemoryStore.load(store, "c")) == expected
    assert len(store.appends) == 2
