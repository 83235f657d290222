"""The brief's chain, every link at once: logging, the loop, approval and tool search."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ResponseCompleted,
    Tool,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    DeferredApprover,
    LoggingAdvisor,
    SQLiteApprovalStore,
    ToolSearchAdvisor,
)
from advisorchain.providers import ScriptedChatModel

refunds: list[str] = []


@tool(requires_approval=True)
def refund_payment(payment_id: str, amount: float) -> str:
    """Refund a customer payment (money leaves the company)."""
    refunds.append(payment_id)
    return f"refunded {amount} on {payment_id}"


def filler_tools(n: int) -> list[Tool]:
    def make(i: int) -> Tool:
        def handler(arguments: dict[str, Any], context: Any) -> str:
            return "ok"

        return Tool(
            f"inventory_report_{i}", f"Inventory report number {i} for a warehouse.", None, handler
        )

    return [make(i) for i in range(n)]


def script(request: ChatRequest) -> Any:
    """Search first, then refund once the definition is visible, then answer."""
    names = {t.name for t in request.tools}
    last = request.messages[-1]
    if isinstance(last, ToolMessage) and last.name == "refund_payment":
        return f"Done: {last.content}"
    if "refund_payment" in names:
        return ToolCall.from_arguments(
            "refund_payment", {"payment_id": "P-9", "amount": 12.5}, id="r1"
        )
    assert names == {"search_tools"}, names
    return ToolCall.from_arguments("search_tools", {"query": "refund a payment"}, id="s1")


def canonical(approval: ApprovalAdvisor, model: ScriptedChatModel, logger: logging.Logger) -> Chain:
    return Chain(
        [LoggingAdvisor(logger), ToolCallingAdvisor(), approval, ToolSearchAdvisor()],
        model=model,
        tools=[*filler_tools(30), refund_payment],
    )


@pytest.mark.anyio
async def test_search_then_approved_call_through_every_link(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refunds.clear()
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> list[Approve]:
        asked.append(request)
        return [Approve() for _ in request.calls]

    logger = logging.getLogger("test.canonical")
    model = ScriptedChatModel(script)
    chain = canonical(ApprovalAdvisor(CallbackApprover(approve)), model, logger)
    with caplog.at_level(logging.INFO, logger="test.canonical"):
        response = await chain.call("Refund payment P-9", tool_context={"secret": "s3cr3t"})
    assert response.text == "Done: refunded 12.5 on P-9"
    assert refunds == ["P-9"]
    assert [c.tool_name for c in asked[0].calls] == ["refund_payment"]
    assert len(model.requests) == 3
    assert len(model.requests[0].tools) == 1  # only the search tool
    events = [getattr(r, "event", None) for r in caplog.records]
    assert events.count("model_call") == 3 and events.count("tool_call") == 2
    assert all("s3cr3t" not in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_deferred_approval_resumes_with_the_discovered_tools(
    tmp_path: Path, streamed: bool
) -> None:
    refunds.clear()
    logger = logging.getLogger("test.canonical")
    store = SQLiteApprovalStore(tmp_path / "approvals.db")
    first = canonical(
        ApprovalAdvisor(DeferredApprover(), store=store), ScriptedChatModel(script), logger
    )
    pending = await first.call("Refund payment P-9")
    assert pending.finish_reason == "deferred" and [d.id for d in pending.deferred] == ["r1"]
    transcript = [UserMessage(content="Refund payment P-9"), *pending.messages]
    assert refunds == []

    model = ScriptedChatModel(script)
    second = canonical(
        ApprovalAdvisor(DeferredApprover(), store=SQLiteApprovalStore(tmp_path / "approvals.db")),
        model,
        logger,
    )
    if streamed:
        events = [e async for e in second.stream(transcript, decisions={"r1": Approve()})]
        assert any(isinstance(e, ToolCallFinished) and e.call.id == "r1" for e in events)
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    else:
        response = await second.call(transcript, decisions={"r1": Approve()})
    assert response.text == "Done: refunded 12.5 on P-9"
    assert refunds == ["P-9"]
    # the tool found before the suspension is still visible after the resume
    assert "refund_payment" in {t.name for t in model.requests[0].tools}
