"""Temporal's limits: live deltas from the model activity with a retried attempt marked,
continue-as-new for long conversations, large payloads by reference, and a recorded
history that replays."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    tool,
)
from advisorchain.advisors import Approve
from advisorchain.core.model import WrapperModel
from advisorchain.providers import ScriptedChatModel

from durable_bank import bank_chain
from temporal_support import temporal_address

if os.environ.get("CI") != "true":
    pytest.importorskip("temporalio")

from temporalio.client import Client, WorkflowHistory  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner  # noqa: E402

from advisorchain.durable.temporal import (  # noqa: E402
    ConversationWorkflow,
    DurableOptions,
    FilePayloadStore,
    LiveDelta,
    TemporalConversation,
    create_worker,
    data_converter,
    deterministic_workflow_code,
)
from advisorchain.durable.temporal._workflow import register_chain  # noqa: E402

__all__ = ["temporal_address"]

pytestmark = pytest.mark.anyio
HISTORY = Path(__file__).parent / "fixtures" / "durable" / "temporal_history_v1.json"
HISTORY_QUEUE = "advisorchain-history-v1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FailsOnce(WrapperModel):
    """Streams a few deltas, then fails, on its first stream only."""

    failed = False

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._stream(request)

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        count = 0
        async for event in self.inner.stream(request):
            if not FailsOnce.failed and count == 3:
                FailsOnce.failed = True
                raise ConnectionError("the provider dropped the stream")
            count += 1
            yield event


def story_chain() -> Chain:
    return Chain(
        [ToolCallingAdvisor()],
        model=FailsOnce(ScriptedChatModel(lambda r: "Once upon a time, a worker died.")),
    )


async def test_live_deltas_mark_a_retried_attempt(temporal_address: str) -> None:
    FailsOnce.failed = False
    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    options = DurableOptions(retry=RetryPolicy(initial_interval=timedelta(milliseconds=50)))
    async with create_worker(client, queue, story_chain, options=options):
        conversation = TemporalConversation(client, f"c-{uuid.uuid4().hex}", task_queue=queue)
        await conversation.start()
        live_start = await conversation.offset()
        events = [e async for e in conversation.stream("tell me")]
        # the turn's events hold the successful attempt only, as in process
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert text == "Once upon a time, a worker died."
        assert FailsOnce.failed
        live: list[LiveDelta] = []
        async for item in conversation.live(from_offset=live_start):
            live.append(item)
            if (
                item.attempt == 2
                and "".join(
                    d.event.text for d in live if d.attempt == 2 and isinstance(d.event, TextDelta)
                )
                == text
            ):
                break
    first = [d for d in live if d.attempt == 1]
    assert [d.event.text for d in first if isinstance(d.event, TextDelta)] == [
        "Once",
        " upo",
        "n a ",
    ]
    marker = live[len(first)]
    assert marker.discarded and marker.attempt == 2 and marker.event is None
    # what a UI shows: drop the attempts before a discard marker of the same step
    shown: dict[str, list[str]] = {}
    for item in live:
        if item.discarded:
            shown[item.step] = []
        elif isinstance(item.event, TextDelta):
            shown.setdefault(item.step, []).append(item.event.text)
    assert ["".join(texts) for texts in shown.values()] == [text]


def counter_chain() -> Chain:
    @tool(read_only=True)
    def count(n: int) -> str:
        """Echo a number."""
        return str(n)

    def reply(request: ChatRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall.from_arguments("count", {"n": len(request.messages)})
        return f"counted {last.text}"

    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(reply), tools=[count])


async def test_long_conversations_continue_as_new(temporal_address: str) -> None:
    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    options = DurableOptions(turns_per_run=2)
    async with create_worker(client, queue, counter_chain, options=options):
        conversation = TemporalConversation(client, f"c-{uuid.uuid4().hex}", task_queue=queue)
        await conversation.start()
        first_run = (await conversation.handle.describe()).run_id
        answers = []
        for turn in range(5):
            if turn % 2:
                answers.append((await conversation.call(f"turn {turn}")).text)
            else:
                events = [e async for e in conversation.stream(f"turn {turn}")]
                last = events[-1]
                assert isinstance(last, ResponseCompleted)
                answers.append(last.response.text)
        transcript = await conversation.transcript()
        runs = {(await conversation.handle.describe()).run_id, first_run}
    assert answers == [f"counted {1 + 4 * i}" for i in range(5)]
    assert len(transcript) == 20  # nothing lost across runs
    assert len(runs) == 2  # the run continued as new


async def test_large_results_travel_by_reference(temporal_address: str, tmp_path: Path) -> None:
    big = "x" * (3 * 1024 * 1024)  # over Temporal's 2 MB payload limit

    def big_chain() -> Chain:
        @tool(read_only=True)
        def dump() -> str:
            """A large result."""
            return big

        model = ScriptedChatModel([ToolCall.from_arguments("dump", {}, id="d1"), "got it"])
        return Chain([ToolCallingAdvisor()], model=model, tools=[dump])

    converter = data_converter(FilePayloadStore(tmp_path / "payloads"))
    client = await Client.connect(temporal_address, data_converter=converter)
    queue = f"q-{uuid.uuid4().hex}"
    async with create_worker(client, queue, big_chain):
        conversation = TemporalConversation(client, f"c-{uuid.uuid4().hex}", task_queue=queue)
        await conversation.start()
        response = await conversation.call("dump it")
        history = await conversation.handle.fetch_history()
    assert response.text == "got it" and response.messages[1].text == big
    assert len(history.to_json()) < 1024 * 1024  # references, not the result
    assert any(p.stat().st_size > len(big) for p in (tmp_path / "payloads").iterdir())


async def record_history(address: str) -> str:
    """Run the bank's deferred turn and its approval; the workflow's history as JSON."""
    client = await Client.connect(address, data_converter=data_converter())
    conversation_id = f"history-{uuid.uuid4().hex}"
    async with create_worker(client, HISTORY_QUEUE, bank_chain):
        conversation = TemporalConversation(client, conversation_id, task_queue=HISTORY_QUEUE)
        await conversation.start()
        await conversation.call("Pay bob 5")
        await conversation.call(decisions={"c2": Approve()})
        await conversation.close()
        await conversation.handle.result()
        history = await conversation.handle.fetch_history()
    return history.to_json()


async def test_a_recorded_history_replays(temporal_address: str) -> None:
    """The history committed with this version (schema 1) replays on this code; run with
    ADVISORCHAIN_RECORD_HISTORY=1 to record it again."""
    if os.environ.get("ADVISORCHAIN_RECORD_HISTORY") == "1":
        HISTORY.parent.mkdir(parents=True, exist_ok=True)
        HISTORY.write_text(json.dumps(json.loads(await record_history(temporal_address)), indent=1))
    deterministic_workflow_code()
    register_chain(HISTORY_QUEUE, bank_chain, DurableOptions())
    replayer = Replayer(
        workflows=[ConversationWorkflow],
        data_converter=data_converter(),
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    recorded = WorkflowHistory.from_json("history-v1", HISTORY.read_text())
    result = await replayer.replay_workflow(recorded)
    assert result.replay_failure is None
    # and a history recorded now replays as well (this version against itself)
    fresh = WorkflowHistory.from_json("fresh", await record_history(temporal_address))
    assert (await replayer.replay_workflow(fresh)).replay_failure is None
