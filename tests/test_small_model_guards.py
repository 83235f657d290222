"""Only an answer reaches the user from a small model (issue 38, demo-finish).

An answer that echoes the tool-results rendering or writes a tool-call line is cleaned (or
re-asked when nothing else was left); a sentence claiming an action no tool call of the
turn did is replaced; `look_first` looks up what the question names before the model is
asked, in every turn. On `call` and `stream`, the stream over many chunkings.
"""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from advisorchain.advisors import ApprovalAdvisor, Approve, CallbackApprover, Reject
from advisorchain.advisors.small_model import (
    ANSWER_HOLD_LIMIT,
    ANSWER_INSTRUCTION,
    NO_ANSWER,
    NOTHING_DONE,
    REASK_INSTRUCTION,
    RESULTS_HEADING,
    AnswerCleaner,
    SmallModelAdvisor,
)
from advisorchain.core.messages import Message
from advisorchain.demo.lookups import named_orders
from advisorchain.providers import ScriptedChatModel

Path = Literal["call", "stream"]
PATHS: list[Path] = ["call", "stream"]
ECHO = '- get_order_status(order_id="A-1") returned: Order A-1 shipped with DHL.\n'


@tool(read_only=True)
def get_order_status(order_id: str) -> str:
    """Look up one order."""
    return f"Order {order_id} shipped with DHL."


@tool(read_only=True)
def get_cancelled_order(order_id: str) -> str:
    """Look up one cancelled order."""
    return f"Order {order_id} is cancelled."


@tool(requires_approval=True)
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return f"Order {order_id} is now cancelled."


def _status(order_id: str = "A-1") -> ToolCall:
    return ToolCall.from_arguments("get_order_status", {"order_id": order_id})


async def _run(chain: Chain, messages: str | list[Message], path: Path) -> tuple[ChatResponse, str]:
    if path == "call":
        response = await chain.call(messages)
        return response, response.text
    streamed: list[str] = []
    completed: ChatResponse | None = None
    async for event in chain.stream(messages):
        if isinstance(event, TextDelta):
            streamed.append(event.text)
        elif isinstance(event, ResponseCompleted):
            completed = event.response
    assert completed is not None
    return completed, "".join(streamed)


def _chain(model: ScriptedChatModel, *advisors: object, **small: object) -> Chain:
    return Chain(
        [ToolCallingAdvisor(), *advisors, SmallModelAdvisor(system_prefix=None, **small)],  # type: ignore[list-item, arg-type]
        model=model,
        tools=[get_order_status, get_cancelled_order, cancel_order],
    )


# -- echo of the results rendering -------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("chunk", [1, 3, 7, 500])
async def test_an_echo_of_the_results_never_reaches_the_user(path: Path, chunk: int) -> None:
    """Seen on the 0.5B: the answer began with `get_order_status(...) returned: ...`."""
    model = ScriptedChatModel(
        [_status(), f"{RESULTS_HEADING}\n{ECHO}{ANSWER_INSTRUCTION}\nYour order A-1 shipped."],
        chunk_size=chunk,
    )
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == "Your order A-1 shipped."
    assert shown == response.text
    assert len(model.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_tool_call_line_in_the_answer_is_dropped(path: Path) -> None:
    model = ScriptedChatModel([_status(), 'get_order_status(order_id="A-1")\nIt shipped.'])
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown == "It shipped."


BROKEN_JSON_CALLS = [
    '{"name": "start_return", "arguments": {"order_id": "A-1003", "text": "Free text"}]}',
    '{{"name": "get_opening_hours", "arguments": {"city": "Berlin"}}}',
    '{"name": "list_payment_methods", "arguments": {"type": "object", "properties": {"type"',
    '```json\n{"name": "book_flight",\n "arguments": {"to": "Paris. Tomorrow. "}}\n```',
    '<tool_call>\n{"function": "track", "arguments": {"id": 1}',
    '* {"tool": "x", "arguments": {}}',
]
"""Calls written as JSON that the text tool-call parser cannot take (not valid JSON, a tool
that is not attached, cut off): seen from the 0.5B as whole answers."""


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("written", BROKEN_JSON_CALLS)
@pytest.mark.parametrize("chunk", [1, 5, 500])
async def test_a_call_written_as_json_is_never_the_answer(
    path: Path, written: str, chunk: int
) -> None:
    model = ScriptedChatModel(
        [_status(), f"{written}\nYour order A-1 shipped.", written], chunk_size=chunk
    )
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown
    assert '"name"' not in shown and '"arguments"' not in shown and '"function"' not in shown
    assert shown.endswith("Your order A-1 shipped.")
    # nothing but such a call: asked once more, and the same again is no answer
    model = ScriptedChatModel([_status(), *[written] * 3], chunk_size=chunk)
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown == NO_ANSWER
    assert model.requests[-1].messages[-1].text.endswith(REASK_INSTRUCTION)


def test_json_in_a_sentence_of_prose_and_data_with_a_name_are_kept() -> None:
    for text in (
        'Send {"name": "Ada"} as the body. It works.',
        '{"name": "Ada Lovelace", "email": "a***@e***.com"}',
    ):
        assert AnswerCleaner().clean(text) == text


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("chunk", [1, 4, 500])
async def test_an_answer_that_is_only_echoed_results_answers_with_them(
    path: Path, chunk: int
) -> None:
    """Seen on the 0.5B: "Which orders do I have?" answered by echoing the look-up's
    results line; dropping it and asking again made it answer "You have no orders". What
    the results say is the answer, in the tools' own words, without asking again."""
    failed = '- cancel_order(order_id="A-2") FAILED, NOT DONE: order A-2 is shipped\n'
    model = ScriptedChatModel(
        [_status(), f"{RESULTS_HEADING}\n{ECHO}{failed}{ANSWER_INSTRUCTION}"], chunk_size=chunk
    )
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown
    assert shown == "Order A-1 shipped with DHL.\nNot done: order A-2 is shipped"
    assert len(model.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_an_answer_that_is_only_an_echo_is_asked_again(path: Path) -> None:
    """An echo that holds no result (the heading, an instruction, a bare call)."""
    echo = f'{RESULTS_HEADING}\nget_order_status(order_id="A-1")\n{ANSWER_INSTRUCTION}'
    model = ScriptedChatModel([_status(), echo, "It shipped with DHL."])
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown == "It shipped with DHL."
    again = model.requests[2]
    assert not again.tools
    assert again.messages[-1].text.endswith(REASK_INSTRUCTION)
    assert response.usage.requests == 3


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_an_echo_asked_again_that_echoes_again_is_no_answer(path: Path) -> None:
    echo = f"{RESULTS_HEADING}\n{ANSWER_INSTRUCTION}"
    model = ScriptedChatModel([_status(), echo, echo])
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown == NO_ANSWER


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_clean_answers_off_lets_the_echo_through(path: Path) -> None:
    model = ScriptedChatModel([_status(), ECHO + "It shipped."])
    response, _ = await _run(_chain(model, clean_answers=False), "Where is A-1?", path)
    assert response.text.startswith("- get_order_status")


# -- claims of an action no call did --------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_claimed_action_without_a_call_never_reaches_the_user(path: Path) -> None:
    """Seen: "The order A-1002 has been cancelled" with no tool called."""
    model = ScriptedChatModel(["Your order A-2 has been cancelled. Anything else?"], chunk_size=5)
    response, shown = await _run(_chain(model), "Cancel A-2.", path)
    assert "has been cancelled" not in shown
    assert response.text == shown == f"{NOTHING_DONE} Anything else?"


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_claim_after_a_rejected_action_is_replaced(path: Path) -> None:
    approver = CallbackApprover(lambda request: [Reject("no")])
    model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel_order", {"order_id": "A-2"}), "I've cancelled A-2."]
    )
    response, shown = await _run(_chain(model, ApprovalAdvisor(approver)), "Cancel A-2.", path)
    assert response.text == shown == NOTHING_DONE + " "


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_claim_after_the_approved_action_is_kept(path: Path) -> None:
    approver = CallbackApprover(lambda request: [Approve()])
    model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel_order", {"order_id": "A-2"}), "A-2 has been cancelled."]
    )
    response, shown = await _run(_chain(model, ApprovalAdvisor(approver)), "Cancel A-2.", path)
    assert response.text == shown == "A-2 has been cancelled."


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_state_a_look_up_stated_may_be_repeated(path: Path) -> None:
    model = ScriptedChatModel(
        [
            ToolCall.from_arguments("get_cancelled_order", {"order_id": "A-2"}),
            "A-2 has been cancelled; it is not refunded.",
        ]
    )
    response, shown = await _run(_chain(model), "Is A-2 cancelled?", path)
    assert response.text == shown == "A-2 has been cancelled; it is not refunded."


def test_negations_are_not_claims() -> None:
    for text in (
        "A-2 has not been cancelled.",
        "I could not change the address.",
        "It cannot be refunded.",
        "Nothing was changed.",
    ):
        cleaner = AnswerCleaner(backed=lambda sentence: False)
        assert cleaner.clean(text) == text and not cleaner.claimed, text


# -- chunkings ---------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "Your order A-1 shipped. ",
        "It costs 89.90 EUR.",
        "\n",
        ECHO,
        RESULTS_HEADING,
        "It has been cancelled! ",
        "I have updated it? ",
        "It was not changed. ",
        "word " * 30 + "end.",
        "x" * (ANSWER_HOLD_LIMIT - 3) + ".",
        "y" * (ANSWER_HOLD_LIMIT + 20) + ".",
        *BROKEN_JSON_CALLS,
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(_PIECES, max_size=8).map(" ".join),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_the_cleaned_text_is_the_same_over_every_chunking(text: str, cuts: list[int]) -> None:
    whole = AnswerCleaner(["get_order_status"], backed=lambda s: "updated" in s).clean(text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    cleaner = AnswerCleaner(["get_order_status"], backed=lambda s: "updated" in s)
    streamed = "".join(cleaner.feed(p) for p in pieces) + cleaner.finish()
    assert streamed == whole
    assert "returned:" not in whole and "has been cancelled" not in whole
    assert '"arguments"' not in whole


def test_at_most_the_sentence_being_written_is_held_back() -> None:
    cleaner = AnswerCleaner(["get_order_status"])
    assert cleaner.feed("Your order shipped. It arrives") == "Your order shipped. "
    assert cleaner.feed(" Friday") == ""
    assert cleaner.feed("y" * ANSWER_HOLD_LIMIT) != ""  # bounded: released at the limit
    assert cleaner.finish() != ""


# -- look-ups before the model is asked ---------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_look_first_looks_up_in_a_later_turn_too(path: Path) -> None:
    """The multi-turn failure: history taught the model to answer A-1003 from A-1001's turn."""
    history: list[Message] = [
        UserMessage(content="Where is A-1001?"),
        AssistantMessage(tool_calls=(_status("A-1001"),)),
        ToolMessage(
            tool_call_id=_status("A-1001").id,
            name="get_order_status",
            content="Order A-1001 shipped.",
        ),
        AssistantMessage(content="A-1001 shipped."),
        UserMessage(content="And where is A-1003?"),
    ]
    model = ScriptedChatModel(["A-1003 shipped with DHL."])
    response, _ = await _run(_chain(model, look_first=named_orders), history, path)
    assert response.text == "A-1003 shipped with DHL."
    (asked,) = model.requests
    shown = asked.messages[-1].text
    assert 'get_order_status(order_id="A-1003") returned: Order A-1003 shipped with DHL.' in shown
    # the look-up made for the model is not counted as its round
    assert asked.options.tool_choice is None


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_look_first_leaves_a_request_for_a_change_to_the_model(path: Path) -> None:
    model = ScriptedChatModel(["Which order?"])
    await _run(_chain(model, look_first=named_orders), "Please cancel A-1002.", path)
    (asked,) = model.requests
    assert asked.messages[-1].text == "Please cancel A-1002."


def test_named_orders_reads_ids_and_skips_changes() -> None:
    def ask(text: str) -> list[str]:
        request = ChatRequest(messages=(UserMessage(content=text),))
        return [c.arguments for c in named_orders(request)]

    assert ask("Is a-1002 cancelled? and A-1003?") == [
        '{"order_id":"A-1002"}',
        '{"order_id":"A-1003"}',
    ]
    assert ask("Cancel A-1002") == []
    assert ask("Which orders do I have?") == []


@tool(read_only=True)
def get_invoice(order_id: str) -> str:
    """The invoice of an order (fails: a look-up the model never asked for)."""
    raise LookupError(f"no invoice for {order_id}")


def _status_and_invoice(request: ChatRequest) -> list[ToolCall]:
    ids = [c.arguments for c in named_orders(request)]
    return [
        *named_orders(request),
        *(ToolCall(id=f"inv{i}", name="get_invoice", arguments=a) for i, a in enumerate(ids)),
    ]


def _invoice_chain(model: ScriptedChatModel, native: bool = False) -> Chain:
    return Chain(
        [
            ToolCallingAdvisor(),
            SmallModelAdvisor(
                system_prefix=None, look_first=_status_and_invoice, results_as_text=not native
            ),
        ],
        model=model,
        tools=[get_order_status, get_invoice],
    )


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("native", [False, True])
async def test_a_failed_look_up_beside_one_that_worked_is_not_shown(
    path: Path, native: bool
) -> None:
    """Read "FAILED, NOT DONE" for a look-up it never asked for, a small model answered
    that nothing could be done; the transcript keeps the failed call all the same."""
    model = ScriptedChatModel(["A-1001 shipped with DHL."])
    response, _ = await _run(_invoice_chain(model, native), "Where is A-1001?", path)
    (asked,) = model.requests
    shown = "\n".join(m.text for m in asked.messages)
    assert "Order A-1001 shipped with DHL." in shown
    assert "invoice" not in shown
    assert all(
        "get_invoice" not in [c.name for c in m.tool_calls]
        for m in asked.messages
        if isinstance(m, AssistantMessage)
    )
    kept = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert [m.name for m in kept] == ["get_order_status", "get_invoice"]
    assert kept[1].is_error


@tool(read_only=True)
def get_missing_status(order_id: str) -> str:
    """Look up an order nobody has."""
    raise LookupError(f"no order {order_id}")


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_look_ups_that_all_failed_are_shown(path: Path) -> None:
    """Another customer's order: the failure is the answer, so the model reads it."""

    def look(request: ChatRequest) -> list[ToolCall]:
        return [
            ToolCall.from_arguments("get_missing_status", {"order_id": "B-2"}),
            ToolCall(id="inv", name="get_invoice", arguments='{"order_id":"B-2"}'),
        ]

    model = ScriptedChatModel(["There is no order B-2."])
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(system_prefix=None, look_first=look)],
        model=model,
        tools=[get_missing_status, get_invoice],
    )
    await _run(chain, "Where is B-2?", path)
    (asked,) = model.requests
    assert "no order B-2" in asked.messages[-1].text
    assert "no invoice for B-2" in asked.messages[-1].text


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "reason",
    [
        "invalid arguments for 'prepare_cancellation': required: unexpected argument",
        "Invalid arguments for 'cancel_order': order_id: field required",
        "unknown tool 'book_flight'. Available tools: get_order_status, cancel_order",
    ],
)
async def test_an_echoed_failure_of_the_call_itself_reads_nothing_done(
    path: Path, reason: str
) -> None:
    """Seen on the 0.5B: "Not done: invalid arguments for 'prepare_cancellation': ..." as
    the customer's answer; the reason was written for the model to correct its call."""
    failed = f'- cancel_order(order_id="A-2") FAILED, NOT DONE: {reason}\n'
    model = ScriptedChatModel([_status(), f"{RESULTS_HEADING}\n{failed}{ANSWER_INSTRUCTION}"])
    response, shown = await _run(_chain(model), "Where is A-1?", path)
    assert response.text == shown == NOTHING_DONE
