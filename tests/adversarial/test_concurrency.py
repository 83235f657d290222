"""1,000 conversations at once through every link: LoggingAdvisor, TracingAdvisor,
MemoryAdvisor, ToolCallingAdvisor, ApprovalAdvisor (auto-approving CallbackApprover) and
ToolSearchAdvisor, around one shared ScriptedChatModel. Each conversation searches for its
tool, has the call approved, runs it and answers; every answer, tool context, approval,
memory and trace must be its own (no cross-talk), on the call and the stream path."""

from __future__ import annotations

import logging
import re
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    Chain,
    ChatRequest,
    LoggingAdvisor,
    ResponseCompleted,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    ToolMessage,
    TracingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    ToolSearchAdvisor,
)
from advisorchain.providers import ScriptedChatModel

CONVERSATIONS = 1000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def filler_tools(n: int) -> list[Tool]:
    def make(i: int) -> Tool:
        def handler(arguments: dict[str, Any], context: Any) -> str:
            return "ok"

        return Tool(
            f"inventory_report_{i}", f"Inventory report {i} for a warehouse.", None, handler
        )

    return [make(i) for i in range(n)]


class Collect(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


QUESTION = re.compile(r"question (\d+)")


def script(request: ChatRequest) -> Any:
    """Search, then call the account tool for this conversation's number, then answer."""
    first = next(m for m in request.messages if isinstance(m, UserMessage))
    match = QUESTION.search(first.text)
    assert match is not None
    n = match.group(1)
    last = request.messages[-1]
    if isinstance(last, ToolMessage) and last.name == "account_balance":
        return f"answer {n}: {last.content}"
    if "account_balance" in {t.name for t in request.tools}:
        # the same call id in every conversation: approvals must not mix them up
        return ToolCall.from_arguments("account_balance", {"account": f"acct-{n}"}, id="call_1")
    return ToolCall.from_arguments("search_tools", {"query": "account balance"}, id="search_1")


@pytest.mark.anyio
async def test_a_thousand_conversations_through_every_link_stay_apart() -> None:
    seen: dict[str, list[tuple[str, str]]] = {}
    approvals: list[tuple[str | None, str]] = []

    @tool(requires_approval=True)
    async def account_balance(account: str, context: ToolContext) -> str:
        """The balance of a customer's bank account."""
        user = context["user"]
        seen.setdefault(user, []).append((account, context.call_id))
        await anyio.lowlevel.checkpoint()  # let the other conversations run in between
        return f"{user} has 100 on {account}"

    def approve(request: ApprovalRequest) -> list[Approve]:
        approvals.extend(
            (request.conversation_id, str(c.arguments["account"])) for c in request.calls
        )
        return [Approve() for _ in request.calls]

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("adversarial.concurrency")
    handler = Collect(records)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    store = InMemoryChatMemoryStore()
    chain = Chain(
        [
            LoggingAdvisor(logger),
            TracingAdvisor(tracer_provider=tracer_provider),
            MemoryAdvisor(store),
            ToolCallingAdvisor(),
            ApprovalAdvisor(CallbackApprover(approve)),
            ToolSearchAdvisor(min_tools=10),
        ],
        model=ScriptedChatModel(script),
        tools=[*filler_tools(20), account_balance],
    )
    answers: dict[int, str] = {}

    async def conversation(n: int) -> None:
        prompt = f"question {n}: what is my balance?"
        options: dict[str, Any] = {
            "conversation_id": f"conv-{n}",
            "tool_context": {"user": f"user-{n}"},
        }
        if n % 2:
            events = [e async for e in chain.stream(prompt, **options)]
            final = events[-1]
            assert isinstance(final, ResponseCompleted)
            answers[n] = final.response.text
        else:
            answers[n] = (await chain.call(prompt, **options)).text

    try:
        with anyio.fail_after(300):  # a deadlock fails instead of hanging the suite
            async with anyio.create_task_group() as group:
                for n in range(CONVERSATIONS):
                    group.start_soon(conversation, n)
    finally:
        logger.removeHandler(handler)
        tracer_provider.shutdown()

    assert answers == {n: f"answer {n}: user-{n} has 100 on acct-{n}" for n in range(CONVERSATIONS)}
    assert seen == {f"user-{n}": [(f"acct-{n}", "call_1")] for n in range(CONVERSATIONS)}
    assert sorted(approvals) == sorted((f"conv-{n}", f"acct-{n}") for n in range(CONVERSATIONS))
    for n in (0, 1, 499, 998, 999):
        history = await store.load(f"conv-{n}")
        assert history[0] == UserMessage(content=f"question {n}: what is my balance?")
        assert history[-1].content == f"answer {n}: user-{n} has 100 on acct-{n}"
        assert all(f"acct-{m}" not in str(history) for m in (n + 1, n - 1))
    turns = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert len(turns) == CONVERSATIONS
    assert len({s.context.trace_id for s in turns}) == CONVERSATIONS
    model_calls = [r for r in records if getattr(r, "event", None) == "model_call"]
    assert len(model_calls) == 3 * CONVERSATIONS
