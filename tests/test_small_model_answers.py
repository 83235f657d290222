"""What `SmallModelAdvisor` lets reach the user, and what it shows the model (issue 38).

Only an answer reaches the user: a tool call written to a tool that is not attached is an
error the model reads, an approved action reads as done, a failed one as not done, no
exception class names; nothing it adds pushes toward an action; earlier turns keep their
tool calls and results in the chat template's own form. On `call` and `stream`.
"""

from __future__ import annotations

from typing import Literal

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    CallbackApprover,
    SmallModelAdvisor,
)
from advisorchain.advisors.small_model import (
    ANSWER_INSTRUCTION,
    CONTINUE_INSTRUCTION,
    DONE,
    DONE_INSTRUCTION,
    LOOKUP_FAILED_INSTRUCTION,
    NOT_DONE_INSTRUCTION,
    RESULTS_HEADING,
    UNKNOWN_TOOL_INSTRUCTION,
    not_done_reason,
)
from advisorchain.core.messages import Message
from advisorchain.providers import Reply, ScriptedChatModel, TextToolCallModel

Path = Literal["call", "stream"]
PATHS: list[Path] = ["call", "stream"]
INVENTED = '{"name": "get_opening_hours", "arguments": {"city": "Berlin"}}'


@tool
def get_order_status(order_id: str) -> str:
    """Look up one order."""
    return f"Order {order_id} shipped with DHL."


@tool
def check_cancellation(order_id: str) -> str:
    """Check whether an order can be cancelled. Changes nothing."""
    return f"Order {order_id} can be cancelled."


@tool(requires_approval=True)
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return f"Order {order_id} is cancelled."


async def _run(chain: Chain, messages: str | list[Message], path: Path) -> tuple[ChatResponse, str]:
    if path == "call":
        return await chain.call(messages), ""
    streamed: list[str] = []
    response: ChatResponse | None = None
    async for event in chain.stream(messages):
        if isinstance(event, TextDelta):
            streamed.append(event.text)
        elif isinstance(event, ResponseCompleted):
            response = event.response
    assert response is not None
    return response, "".join(streamed)


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_call_to_an_invented_tool_is_an_error_the_model_reads(path: Path) -> None:
    """Seen on both models: `{"name": "get_opening_hours", ...}` printed as the answer."""
    scripted = ScriptedChatModel(
        [INVENTED, ToolCall.from_arguments("get_order_status", {"order_id": "A-1"}), "Shipped."]
    )
    model = TextToolCallModel(scripted, any_name=True)
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(system_prefix=None)],
        model=model,
        tools=[get_order_status],
    )
    response, streamed = await _run(chain, "When does the Berlin store open?", path)
    assert response.text == "Shipped."
    assert "get_opening_hours" not in streamed and "{" not in streamed
    shown = scripted.requests[1].messages[-1].text
    assert 'get_opening_hours(city="Berlin") FAILED, NOT DONE: unknown tool' in shown
    assert "Available tools: get_order_status" in shown
    assert shown.endswith(UNKNOWN_TOOL_INSTRUCTION)
    # The round of the invented tool is not counted: the model may still call a real one,
    assert scripted.requests[1].options.tool_choice is None
    # and the round after it is counted as usual.
    assert scripted.requests[2].options.tool_choice == "none"


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_an_invented_call_written_when_tools_are_off_is_never_the_answer(
    path: Path,
) -> None:
    model = ScriptedChatModel(
        [
            ToolCall.from_arguments("get_order_status", {"order_id": "A-1"}),
            "{" + INVENTED + "}",
            "It shipped with DHL.",
        ]
    )
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor()], model=model, tools=[get_order_status]
    )
    response, streamed = await _run(chain, "Where is A-1?", path)
    assert response.text == "It shipped with DHL."
    assert "get_opening_hours" not in streamed and "}" not in streamed
    assert len(model.requests) == 3 and not model.requests[2].tools


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_an_approved_action_reads_as_done(path: Path) -> None:
    approver = CallbackApprover(lambda request: [Approve()])
    model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel_order", {"order_id": "A-2"}), "A-2 is cancelled."]
    )
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(approver), SmallModelAdvisor()],
        model=model,
        tools=[cancel_order],
    )
    await _run(chain, "Cancel A-2", path)
    shown = model.requests[1].messages[-1].text
    assert f'- cancel_order(order_id="A-2") {DONE}: Order A-2 is cancelled.' in shown
    assert shown.endswith(f"{ANSWER_INSTRUCTION} {DONE_INSTRUCTION}")
    assert NOT_DONE_INSTRUCTION not in shown


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_after_a_look_nothing_pushes_toward_an_action(path: Path) -> None:
    """Seen on the 1.5B: asked to change an address, it checked a cancellation, read
    "Now call the tool that does what I asked", and cancelled the order."""
    model = ScriptedChatModel(
        [ToolCall.from_arguments("check_cancellation", {"order_id": "A-2"}), "Nothing changed."]
    )
    chain = Chain(
        [
            ToolCallingAdvisor(),
            SmallModelAdvisor(uncounted_tools=("check_cancellation",)),
        ],
        model=model,
        tools=[check_cancellation, cancel_order],
    )
    await _run(chain, "Change the address of A-2 to Baker Street.", path)
    shown = model.requests[1].messages[-1].text
    assert shown.endswith(CONTINUE_INSTRUCTION)
    added = shown.splitlines()[-1]
    assert "cancel" not in added.lower() and "now call" not in added.lower()


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_repeated_uncounted_call_counts_and_the_model_answers(path: Path) -> None:
    """Seen on the 0.5B: asked to change an address, it called the uncounted check with the
    same arguments again and again until the loop's per-tool limit ended the turn with an
    error. The second identical call counts as the round, so the next call answers."""
    check = ToolCall.from_arguments("check_cancellation", {"order_id": "A-2"})
    model = ScriptedChatModel([check, check, "I cannot change addresses; nothing was changed."])
    chain = Chain(
        [
            ToolCallingAdvisor(max_calls_per_tool=3),
            SmallModelAdvisor(uncounted_tools=("check_cancellation",)),
        ],
        model=model,
        tools=[check_cancellation, cancel_order],
    )
    response, streamed = await _run(chain, "Change the address of A-2 to Baker Street.", path)
    assert [r.options.tool_choice for r in model.requests] == [None, None, "none"]
    assert response.text == "I cannot change addresses; nothing was changed."
    assert streamed in ("", response.text)
    # a different check (other arguments) is still free: the loop goes on
    other = ToolCall.from_arguments("check_cancellation", {"order_id": "A-3"})
    model = ScriptedChatModel([check, other, "Both checked."])
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(uncounted_tools=("check_cancellation",))],
        model=model,
        tools=[check_cancellation, cancel_order],
    )
    await _run(chain, "Can A-2 or A-3 be cancelled?", path)
    assert [r.options.tool_choice for r in model.requests] == [None, None, None]


def test_every_instruction_names_no_tool_and_no_action() -> None:
    for text in (
        ANSWER_INSTRUCTION,
        DONE_INSTRUCTION,
        NOT_DONE_INSTRUCTION,
        CONTINUE_INSTRUCTION,
        UNKNOWN_TOOL_INSTRUCTION,
        LOOKUP_FAILED_INSTRUCTION,
    ):
        lowered = text.lower()
        assert "now call" not in lowered and "_" not in lowered
        for verb in ("cancel", "change", "update", "redeem", "buy", "remove"):
            assert verb not in lowered


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("Error: OrderNotFound: no order 'A-4' for you", "no order 'A-4' for you"),
        ("Error: CancellationRefused: order A-1 is shipped", "order A-1 is shipped"),
        ("Error: ValueError: bad", "bad"),
        ("Error: demo.orders.OrderNotFound: no order", "no order"),
        ("Error: not executed, the call was rejected: no", "the call was rejected: no"),
        ("Error: Note: a plain sentence", "Note: a plain sentence"),
        ("Error: unknown tool 'x'. Available tools: a.", "unknown tool 'x'. Available tools: a."),
    ],
)
def test_reasons_carry_no_exception_class_names(content: str, reason: str) -> None:
    assert not_done_reason(content) == reason


def _history() -> list[Message]:
    call = ToolCall(id="c1", name="get_order_status", arguments='{"order_id": "A-1"}')
    return [
        UserMessage(content="Where is A-1?"),
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(tool_call_id="c1", name="get_order_status", content="Order A-1 shipped."),
        AssistantMessage(content="A-1 shipped."),
        UserMessage(content="And A-2?"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_earlier_turns_keep_their_tool_calls_for_the_chat_template(path: Path) -> None:
    """Shown as a user message then an answer, earlier tool rounds taught the model to
    answer later questions from the conversation: 1 of 6 right after the first turn."""

    def reply(request: ChatRequest) -> Reply:
        if request.options.tool_choice == "none":
            return "A-2 shipped."
        return ToolCall.from_arguments("get_order_status", {"order_id": "A-2"})

    model = ScriptedChatModel(reply)
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(system_prefix=None)],
        model=model,
        tools=[get_order_status],
    )
    await _run(chain, _history(), path)
    first = model.requests[0].messages
    assert [m.role for m in first] == ["user", "assistant", "tool", "assistant", "user"]
    assert not any(m.text.startswith(RESULTS_HEADING) for m in first)
    # the current turn's results are still shown as text
    answering = model.requests[1].messages
    assert [m.role for m in answering][:5] == ["user", "assistant", "tool", "assistant", "user"]
    assert answering[-1].text.startswith(RESULTS_HEADING)
    assert 'get_order_status(order_id="A-2") returned' in answering[-1].text

    model = ScriptedChatModel(reply)
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(system_prefix=None, history="text")],
        model=model,
        tools=[get_order_status],
    )
    await _run(chain, _history(), path)
    roles = [m.role for m in model.requests[0].messages]
    assert roles == ["user", "user", "assistant", "user"]  # the former rendering, on request


def test_history_option_is_checked() -> None:
    with pytest.raises(ValueError, match="history"):
        SmallModelAdvisor(history="json")  # type: ignore[arg-type]


@tool(read_only=True)
def get_delivery_photo(order_id: str) -> str:
    """The courier's photo of a delivered parcel."""
    raise LookupError("no photo for this order")


@tool(read_only=True)
def get_order(order_id: str) -> str:
    """Look up one order: carrier, status."""
    return f"Order {order_id} shipped with DHL."


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_failed_look_up_leaves_the_model_another_tool(path: Path) -> None:
    """Seen on the 0.5B: asked for the carrier, it called the delivery-photo tool tool
    search had attached, and answered with the failure line."""
    model = ScriptedChatModel(
        [
            ToolCall.from_arguments("get_delivery_photo", {"order_id": "A-1"}),
            ToolCall.from_arguments("get_order", {"order_id": "A-1"}),
            "DHL.",
        ]
    )
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(system_prefix=None)],
        model=model,
        tools=[get_delivery_photo, get_order],
    )
    response, _ = await _run(chain, "Which carrier has my order A-1?", path)
    assert response.text == "DHL."
    second = model.requests[1]
    assert second.options.tool_choice is None  # the failed look-up round was free
    assert second.messages[-1].text.endswith(LOOKUP_FAILED_INSTRUCTION)
    third = model.requests[2]
    assert third.options.tool_choice == "none"
    # answering: both rounds in one message, the failed one as not done
    shown = third.messages[-1].text
    assert 'get_delivery_photo(order_id="A-1") FAILED, NOT DONE: no photo' in shown
    assert 'get_order(order_id="A-1") returned: Order A-1 shipped with DHL.' in shown


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_failed_change_is_not_tried_again(path: Path) -> None:
    @tool(requires_approval=True)
    def cancel(order_id: str) -> str:
        """Cancel an order."""
        raise RuntimeError("order A-1 has shipped")

    approver = CallbackApprover(lambda request: [Approve()])
    model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel", {"order_id": "A-1"}), "It has shipped."]
    )
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(approver), SmallModelAdvisor()],
        model=model,
        tools=[cancel],
    )
    await _run(chain, "Cancel A-1", path)
    assert model.requests[1].options.tool_choice == "none"
    assert model.requests[1].messages[-1].text.endswith(NOT_DONE_INSTRUCTION)
