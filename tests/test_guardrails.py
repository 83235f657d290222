"""GuardrailAdvisor: input and output checks trip on `call` and `stream` alike; on a stream
the answer's text is held back until its checks pass (LangChain #35011: streaming
bypassed the guardrails)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import cast

import pytest

from advisorchain import (
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolProgress,
    UserMessage,
    chain_tool,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    DeferredApprover,
    GuardrailAdvisor,
    GuardrailTripped,
    InMemoryApprovalStore,
    model_judge,
)
from advisorchain.providers import ScriptedChatModel


def no_card_numbers(text: str) -> str | None:
    return "a card number" if "4242" in text else None


async def no_competitors(text: str) -> str | None:
    return "names a competitor" if "AcmeCorp" in text else None


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


async def run(chain: Chain, prompt: str, path: str) -> tuple[str, list[StreamEvent]]:
    """The answer's text, and on `stream` every event the caller received."""
    if path == "call":
        return (await chain.call(prompt)).text, []
    events = [event async for event in chain.stream(prompt)]
    completed = events[-1]
    assert isinstance(completed, ResponseCompleted)
    return completed.response.text, events


def streamed_text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


PATHS = pytest.mark.parametrize("path", ["call", "stream"])


@pytest.mark.anyio
@PATHS
async def test_a_tripped_input_check_raises_and_the_model_is_never_called(path: str) -> None:
    model = ScriptedChatModel(["never"])
    chain = Chain([GuardrailAdvisor(input_checks=[no_card_numbers])], model=model)
    with pytest.raises(GuardrailTripped) as caught:
        await run(chain, "my card is 4242 4242 4242 4242", path)
    assert (caught.value.stage, caught.value.check) == ("input", "no_card_numbers")
    assert caught.value.reason == "a card number"
    assert "4242" not in str(caught.value)
    assert model.requests == []


@pytest.mark.anyio
@PATHS
async def test_a_tripped_input_check_can_answer_instead(path: str) -> None:
    model = ScriptedChatModel(["never"])
    guard = GuardrailAdvisor(
        input_checks=[no_card_numbers], on_trip="replace", replacement="Please do not."
    )
    text, events = await run(Chain([guard], model=model), "card 4242", path)
    assert text == "Please do not."
    assert model.requests == []
    if path == "stream":
        assert streamed_text(events) == "Please do not."
        completed = events[-1]
        assert isinstance(completed, ResponseCompleted)
        assert completed.response.finish_reason == "content_filter"


@pytest.mark.anyio
@PATHS
async def test_a_tripped_output_check_raises_and_no_text_reached_the_stream(path: str) -> None:
    chain = Chain(
        [GuardrailAdvisor(output_checks=[no_competitors])],
        model=ScriptedChatModel(["Try AcmeCorp, they are cheaper."]),
    )
    received: list[StreamEvent] = []
    with pytest.raises(GuardrailTripped) as caught:
        if path == "call":
            await chain.call("where to buy?")
        else:
            async for event in chain.stream("where to buy?"):
                received.append(event)
    assert (caught.value.stage, caught.value.reason) == ("output", "names a competitor")
    assert received == []  # the answer's text was held back, then dropped


@pytest.mark.anyio
@PATHS
async def test_a_tripped_output_check_can_replace_the_answer(path: str) -> None:
    guard = GuardrailAdvisor(output_checks=[no_competitors], on_trip="replace")
    chain = Chain([guard], model=ScriptedChatModel(["Try AcmeCorp, they are cheaper."]))
    text, events = await run(chain, "where to buy?", path)
    assert text == "Sorry, I can't help with that."
    if path == "stream":
        assert streamed_text(events) == "Sorry, I can't help with that."
        assert "AcmeCorp" not in repr(events)


@pytest.mark.anyio
@PATHS
async def test_passing_checks_let_the_turn_through_with_its_tools(path: str) -> None:
    guard = GuardrailAdvisor(input_checks=[no_card_numbers], output_checks=[no_competitors])
    chain = Chain(
        [guard, ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("lookup", {"order_id": "7"}, id="c1"), "Order 7 shipped."]
        ),
        tools=[lookup],
    )
    text, events = await run(chain, "where is order 7?", path)
    assert text == "Order 7 shipped."
    if path == "stream":
        assert streamed_text(events) == "Order 7 shipped."
        kinds = [type(e).__name__ for e in events]
        # tool events flow at once; the held text comes after them, then the response
        assert kinds.index("ToolCallStarted") < kinds.index("TextDelta")
        assert kinds[-1] == "ResponseCompleted"


@pytest.mark.anyio
async def test_on_a_stream_the_text_waits_for_the_verdict() -> None:
    """Events flow before the answer is checked; the text only after the check passed."""
    order: list[str] = []

    def check(text: str) -> str | None:
        order.append("checked")
        return None

    class Model(ScriptedChatModel):
        async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
            upstream = cast(AsyncGenerator[StreamEvent, None], super().stream(request))
            async with aclosing(upstream) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        order.append("model yielded text")
                    yield event

    chain = Chain([GuardrailAdvisor(output_checks=[check])], model=Model(["a fine answer"]))
    async for event in chain.stream("hi"):
        if isinstance(event, TextDelta):
            order.append("caller got text")
    assert order.index("checked") < order.index("caller got text")
    assert order.index("model yielded text") < order.index("checked")


@pytest.mark.anyio
async def test_a_sub_agents_text_is_held_too() -> None:
    inner = Chain(model=ScriptedChatModel(["AcmeCorp is the answer"]))
    guard = GuardrailAdvisor(output_checks=[no_competitors])
    outer = Chain(
        [guard, ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("ask", {"task": "who?"}, id="c1"), "AcmeCorp it is."]
        ),
        tools=[chain_tool(inner, "ask", "Ask the expert.")],
    )
    received: list[StreamEvent] = []
    with pytest.raises(GuardrailTripped):
        async for event in outer.stream("who?"):
            received.append(event)
    progress_text = [
        e for e in received if isinstance(e, ToolProgress) and isinstance(e.event, TextDelta)
    ]
    assert progress_text == []
    assert any(isinstance(e, ToolCallStarted) for e in received)


@pytest.mark.anyio
@PATHS
async def test_a_model_judge_trips_with_its_reason(path: str) -> None:
    judge_model = ScriptedChatModel(["FAIL: promises a refund", "PASS"])
    judge = model_judge(judge_model, "Never promise refunds.", name="no_promises")
    chain = Chain(
        [GuardrailAdvisor(output_checks=[judge])],
        model=ScriptedChatModel(["You will get a full refund.", "We will look into it."]),
    )
    with pytest.raises(GuardrailTripped) as caught:
        await run(chain, "refund?", path)
    assert (caught.value.check, caught.value.reason) == ("no_promises", "promises a refund")
    sent = judge_model.requests[0].messages
    assert "Never promise refunds." in sent[0].text
    assert sent[1].text == "You will get a full refund."
    text, _ = await run(chain, "refund?", path)
    assert text == "We will look into it."


@pytest.mark.anyio
async def test_a_judge_that_answers_otherwise_trips_fail_closed() -> None:
    judge = model_judge(ScriptedChatModel(["Looks fine to me!"]), "Be nice.")
    verdict = judge("hello")
    assert inspect.isawaitable(verdict)
    assert await verdict == "the judge's answer was neither PASS nor FAIL"


@pytest.mark.anyio
@PATHS
async def test_a_check_that_raises_trips(path: str) -> None:
    def broken(text: str) -> str | None:
        raise RuntimeError("secret detail")

    chain = Chain([GuardrailAdvisor(input_checks=[broken])], model=ScriptedChatModel(["x"]))
    with pytest.raises(GuardrailTripped, match=r"the check failed \(RuntimeError\)") as caught:
        await run(chain, "hi", path)
    assert "secret detail" not in str(caught.value)


@pytest.mark.anyio
async def test_a_resumed_turn_is_not_checked_again_and_pending_turns_pass() -> None:
    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded order {order_id}"

    seen: list[str] = []

    def record(text: str) -> str | None:
        seen.append(text)
        return None

    store = InMemoryApprovalStore()
    chain = Chain(
        [
            GuardrailAdvisor(input_checks=[record], output_checks=[record]),
            ToolCallingAdvisor(),
            ApprovalAdvisor(DeferredApprover(), store=store),
        ],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("refund", {"order_id": "7"}, id="c1"), "Refunded."]
        ),
        tools=[refund],
    )
    response = await chain.call("refund 7")
    assert response.finish_reason == "deferred"
    assert seen == ["refund 7"]  # the waiting turn's answer is tool calls: not checked
    transcript = [UserMessage(content="refund 7"), *response.messages]
    resumed = await chain.call(transcript, decisions={"c1": Approve()})
    assert resumed.text == "Refunded."
    assert seen == ["refund 7", "Refunded."]


def test_it_refuses_a_place_inside_the_tool_loop_and_bad_arguments() -> None:
    with pytest.raises(ChainConfigurationError, match="before the tool loop"):
        Chain(
            [ToolCallingAdvisor(), GuardrailAdvisor(input_checks=[no_card_numbers])],
            model=ScriptedChatModel([]),
        )
    with pytest.raises(ValueError, match="needs input_checks or output_checks"):
        GuardrailAdvisor()
    with pytest.raises(TypeError, match="guardrail check 0 must be a callable"):
        GuardrailAdvisor(input_checks=["no cards"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="on_trip"):
        GuardrailAdvisor(input_checks=[no_card_numbers], on_trip="log")  # type: ignore[arg-type]


@pytest.mark.anyio
@PATHS
async def test_a_replaced_answer_drops_the_structured_output_read_from_it(path: str) -> None:
    from pydantic import BaseModel

    from advisorchain.advisors import StructuredOutputAdvisor

    class Deal(BaseModel):
        vendor: str

    guard = GuardrailAdvisor(output_checks=[no_competitors], on_trip="replace")
    chain = Chain(
        [guard, StructuredOutputAdvisor(Deal)],
        model=ScriptedChatModel(['{"vendor": "AcmeCorp"}']),
    )
    if path == "call":
        response = await chain.call("best vendor?")
    else:
        events = [e async for e in chain.stream("best vendor?")]
        completed = events[-1]
        assert isinstance(completed, ResponseCompleted)
        response = completed.response
    assert response.text == "Sorry, I can't help with that."
    assert response.output is None
