from __future__ import annotations

import json

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    tool,
)
from advisorchain.core.text_tool_calls import (
    TextToolCallParser,
    apply_text_tool_calls,
    parse_text_tool_calls,
)
from advisorchain.providers import ScriptedChatModel, TextToolCallModel

NAMES = {"get_order_status", "cancel_order"}

QWEN = (
    "Let me check.\n<tool_call>\n"
    '{"name": "get_order_status", "arguments": {"order_id": "A-1001"}}\n</tool_call>'
)
SAMPLES = [
    QWEN,
    "No tools needed: the answer is 42.",
    '<tool_call>\n{"name": "get_order_status", "arguments": {"order_id": "A-1"}}',
    '```json\n{"name": "cancel_order", "arguments": {"order_id": "B-2"}}\n```\nDone.',
    '{"name": "get_order_status", "parameters": {"order_id": "C-3"}}',
    'Two: <tool_call>[{"name": "get_order_status", "arguments": {"order_id": "D-4"}}, '
    '{"name": "cancel_order", "arguments": "{\\"order_id\\": \\"D-4\\"}"}]</tool_call> ok',
    '<tool_call>{"type": "function", "function": {"name": "cancel_order", '
    '"arguments": {"order_id": "E-5"}}}</tool_call>',
    'Data: {"order": 1, "items": [{"sku": "x"}]} and {"name": "Ada", "age": 3}.',
    '```python\nprint({"name": "get_order_status", "arguments": {}})\n<tool_call>\n```\nafter',
    '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
    "a < b and `code` and ``x`` then <b>bold</b> { not json",
    "```\nplain fence\n``` and a tail `",
    '{"name": "get_order_status", "arguments": {"order_id": "F-6", "note": "a } brace \\" q"}}',
]


def _summary(text: str, calls: tuple[ToolCall, ...] | list[ToolCall]) -> tuple[str, list[object]]:
    return text, [(c.name, json.loads(c.arguments)) for c in calls]


def _parse_in_chunks(text: str, chunks: list[str]) -> tuple[str, list[object]]:
    parser = TextToolCallParser(NAMES)
    pieces: list[str | ToolCall] = []
    for chunk in chunks:
        pieces.extend(parser.feed(chunk))
    pieces.extend(parser.finish())
    assert "".join(chunks) == text
    return _summary(
        "".join(p for p in pieces if isinstance(p, str)),
        [p for p in pieces if isinstance(p, ToolCall)],
    )


def test_qwen_tool_call_tag() -> None:
    parsed = parse_text_tool_calls(QWEN, NAMES)
    assert parsed.text == "Let me check.\n"
    assert _summary("", parsed.calls)[1] == [("get_order_status", {"order_id": "A-1001"})]
    assert parsed.calls[0].id.startswith("call_")


@pytest.mark.parametrize(
    ("text", "expected_text", "expected_calls"),
    [
        (SAMPLES[2], "", [("get_order_status", {"order_id": "A-1"})]),
        (SAMPLES[3], "\nDone.", [("cancel_order", {"order_id": "B-2"})]),
        (SAMPLES[4], "", [("get_order_status", {"order_id": "C-3"})]),
        (
            SAMPLES[5],
            "Two:  ok",
            [("get_order_status", {"order_id": "D-4"}), ("cancel_order", {"order_id": "D-4"})],
        ),
        (SAMPLES[6], "", [("cancel_order", {"order_id": "E-5"})]),
        (SAMPLES[12], "", [("get_order_status", {"order_id": "F-6", "note": 'a } brace " q'})]),
    ],
    ids=["unclosed-tag", "json-fence", "bare-parameters", "list", "function-wrapper", "braces"],
)
def test_forms(text: str, expected_text: str, expected_calls: list[object]) -> None:
    parsed = parse_text_tool_calls(text, NAMES)
    assert _summary(parsed.text, parsed.calls) == (expected_text, expected_calls)


@pytest.mark.parametrize("text", SAMPLES[7:12], ids=["data", "code", "unknown", "marks", "fence"])
def test_text_that_is_not_a_call_stays_text(text: str) -> None:
    parsed = parse_text_tool_calls(text, NAMES)
    assert parsed.text == text
    assert parsed.calls == ()


def test_only_attached_tools_are_parsed() -> None:
    parsed = parse_text_tool_calls(QWEN, {"cancel_order"})
    assert parsed.calls == ()
    assert parsed.text == QWEN


def test_bad_json_arguments_are_kept_for_the_loop_to_report() -> None:
    text = '<tool_call>{"name": "cancel_order", "arguments": "{order_id: A"}</tool_call>'
    (call,) = parse_text_tool_calls(text, NAMES).calls
    assert call.arguments == "{order_id: A"


@pytest.mark.parametrize("text", SAMPLES)
def test_streaming_split_at_every_position_matches_whole(text: str) -> None:
    whole = _parse_in_chunks(text, [text])
    for cut in range(1, len(text)):
        assert _parse_in_chunks(text, [text[:cut], text[cut:]]) == whole, cut
    assert _parse_in_chunks(text, list(text)) == whole


def test_streaming_holds_back_only_what_may_become_a_call() -> None:
    parser = TextToolCallParser(NAMES)

    def feed(text: str) -> str:
        pieces = parser.feed(text)
        assert all(isinstance(p, str) for p in pieces)
        return "".join(str(p) for p in pieces)

    assert feed("Hello {") == "Hello "
    assert feed('"na') == ""
    assert feed('nny": 1}') == '{"nanny": 1}'
    assert feed("x <tool") == "x "
    assert feed("tip> `") == "<tooltip> "
    assert feed("`") == ""
    assert feed("`python\n") == "```python\n"
    assert feed("{}```") == "{}```"
    assert parser.finish() == []


def test_streamed_call_text_never_reaches_the_user() -> None:
    parser = TextToolCallParser(NAMES)
    pieces: list[str | ToolCall] = []
    for ch in QWEN:
        pieces.extend(parser.feed(ch))
    pieces.extend(parser.finish())
    assert "".join(p for p in pieces if isinstance(p, str)) == "Let me check.\n"
    assert [type(p) for p in pieces if not isinstance(p, str)] == [ToolCall]


def test_apply_to_a_response() -> None:
    response = ChatResponse(message=AssistantMessage(content="  \n" + SAMPLES[2]))
    applied = apply_text_tool_calls(response, NAMES)
    assert applied.finish_reason == "tool_calls"
    assert applied.message.content is None
    assert applied.messages == (applied.message,)
    assert [c.name for c in applied.tool_calls] == ["get_order_status"]
    plain = ChatResponse(message=AssistantMessage(content="hi"))
    assert apply_text_tool_calls(plain, NAMES) is plain


_executed: list[str] = []


@tool
def get_order_status(order_id: str) -> str:
    """The status of an order."""
    _executed.append(order_id)
    return "shipped"


@pytest.mark.anyio
async def test_wrapped_model_in_a_chain_streams_without_the_call_text() -> None:
    _executed.clear()
    inner = ScriptedChatModel([QWEN, "It has shipped."], chunk_size=3)
    chain = Chain([ToolCallingAdvisor()], model=TextToolCallModel(inner), tools=[get_order_status])
    events = [e async for e in chain.stream("Where is A-1001?")]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me check.\nIt has shipped."
    assert [e.call.name for e in events if isinstance(e, ToolCallStarted)] == ["get_order_status"]
    assert [e.outcome for e in events if isinstance(e, ToolCallFinished)] == ["ok"]
    assert _executed == ["A-1001"]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    first = final.response.messages[0]
    assert isinstance(first, AssistantMessage)
    assert first.content == "Let me check."
    assert "<tool_call>" not in repr(inner.requests[1].messages)


@pytest.mark.anyio
async def test_wrapped_model_call_and_tool_choice_none() -> None:
    _executed.clear()
    inner = ScriptedChatModel([QWEN, "Shipped.", QWEN])
    model = TextToolCallModel(inner)
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[get_order_status])
    response = await chain.call("Where is A-1001?")
    assert response.text == "Shipped."
    assert _executed == ["A-1001"]
    untouched = await chain.call("Where?", tool_choice="none")
    assert untouched.text == QWEN
    assert model.model_name == "scripted"
    assert model.provider_name == "scripted"


@pytest.mark.anyio
async def test_stream_adapter_numbers_text_calls_after_structured_ones() -> None:
    structured = ToolCall.from_arguments("cancel_order", {"order_id": "Z-1"}, id="call_s")
    inner = ScriptedChatModel([AssistantMessage(content=QWEN, tool_calls=(structured,))])
    model = TextToolCallModel(inner)
    chain = Chain(model=model, tools=[get_order_status])
    events = [e async for e in model.stream(chain.request("?"))]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert {d.index for d in deltas if d.name == "get_order_status"} == {1}
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert [c.name for c in final.response.tool_calls] == ["cancel_order", "get_order_status"]
    assert final.response.tool_calls[0].id == "call_s"
