"""The shapes small models really write their tool calls in, parsed on both paths.

Bare JSON, a fenced ```json block, Qwen's `<tool_call>` tag and the doubled-brace form
`{{"name": ...}}`: each is a call (to an attached tool; with `any_name`, to any tool),
leaves no residue in the text, and parses the same however the stream is chunked.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    UserMessage,
    tool,
)
from advisorchain.core.events import StreamEvent
from advisorchain.core.text_tool_calls import (
    TextToolCallParser,
    apply_text_tool_calls,
    parse_text_tool_call_stream,
    parse_text_tool_calls,
)
from advisorchain.providers import ScriptedChatModel, TextToolCallModel

NAMES = frozenset({"get_order_status", "get_customer_orders"})
CALL = '{"name": "get_order_status", "arguments": {"order_id": "A-1001"}}'
INVENTED = '{"name": "get_opening_hours", "arguments": {"city": "Berlin"}}'


def shapes(body: str) -> list[str]:
    """`body` (a call object) in each shape small models write."""
    return [
        body,
        f"```json\n{body}\n```",
        f"```\n{body}\n```",
        f"<tool_call>\n{body}\n</tool_call>",
        "{" + body + "}",
        "{ " + body + " }",
    ]


def _chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _parse(chunks: list[str], *, any_name: bool = False) -> tuple[str, list[tuple[str, object]]]:
    parser = TextToolCallParser(NAMES, any_name=any_name)
    pieces: list[str | ToolCall] = []
    for chunk in chunks:
        pieces.extend(parser.feed(chunk))
    pieces.extend(parser.finish())
    text = "".join(p for p in pieces if isinstance(p, str))
    calls = [(p.name, json.loads(p.arguments)) for p in pieces if isinstance(p, ToolCall)]
    return text, calls


@pytest.mark.parametrize("shape", shapes(CALL))
def test_every_shape_is_one_call_and_leaves_no_residue(shape: str) -> None:
    text = f"Let me look.\n{shape}\n"
    parsed = parse_text_tool_calls(text, NAMES)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
        ("get_order_status", {"order_id": "A-1001"})
    ]
    assert parsed.text.strip() == "Let me look."
    assert not any(mark in parsed.text for mark in ("{", "}", "`", "<"))


def test_the_doubled_brace_form_is_one_call_not_a_call_and_a_brace() -> None:
    parsed = parse_text_tool_calls("{{" + CALL[1:-1] + "}}", NAMES)
    assert [c.name for c in parsed.calls] == ["get_order_status"]
    assert parsed.text == ""


def test_doubled_braces_around_something_else_stay_text() -> None:
    for text in ('{{"a": 1}}', '{{"name": "Ada", "age": 3}}', "{{ not json }}"):
        parsed = parse_text_tool_calls(text, NAMES)
        assert parsed.calls == ()
        assert parsed.text == text


@pytest.mark.parametrize("shape", shapes(INVENTED))
def test_a_call_to_a_tool_not_attached_is_a_call_with_any_name(shape: str) -> None:
    assert parse_text_tool_calls(shape, NAMES).calls == ()  # the default: attached only
    parsed = parse_text_tool_calls(shape, NAMES, any_name=True)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
        ("get_opening_hours", {"city": "Berlin"})
    ]
    assert parsed.text.strip() == ""


def test_any_name_still_needs_the_shape_of_a_call() -> None:
    for text in (
        '{"name": "Ada", "age": 3}',  # not a call's keys
        '{"name": "Ada Lovelace"}',  # no arguments: a person, not a call
        '{"name": "two words", "arguments": {}}',  # not a tool name
        '{"name": 3, "arguments": {}}',
    ):
        assert parse_text_tool_calls(text, NAMES, any_name=True).calls == (), text


@settings(max_examples=150, deadline=None)
@given(
    shape=st.sampled_from(shapes(CALL) + shapes(INVENTED)),
    before=st.sampled_from(["", "Sure. ", "Checking {braces} first: "]),
    after=st.sampled_from(["", " Done.", "\n}"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    any_name=st.booleans(),
)
def test_any_chunking_gives_what_the_whole_text_gives(
    shape: str, before: str, after: str, cuts: list[int], any_name: bool
) -> None:
    text = before + shape + after
    whole = _parse([text], any_name=any_name)
    assert _parse(_chunked(text, cuts), any_name=any_name) == whole
    invented = "get_opening_hours" in shape
    if invented and not any_name:
        assert whole[1] == []
        assert whole[0] == text  # not a call to an attached tool: all of it stays text
    else:
        assert len(whole[1]) == 1
        assert whole[0] == before + after  # nothing of the call is left


@tool
def get_order_status(order_id: str) -> str:
    """Look up one order."""
    return order_id


async def _events(text: str, cuts: list[int]) -> list[StreamEvent]:
    async def source() -> object:
        for chunk in _chunked(text, cuts):
            yield TextDelta(chunk)
        yield ResponseCompleted(ChatResponse(message=AssistantMessage(content=text)))

    return [e async for e in parse_text_tool_call_stream(source(), NAMES, any_name=True)]  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("shape", shapes(CALL) + shapes(INVENTED))
async def test_call_and_stream_agree_and_no_call_text_is_streamed(shape: str) -> None:
    text = f"One moment. {shape}"
    called = apply_text_tool_calls(
        ChatResponse(message=AssistantMessage(content=text)), NAMES, any_name=True
    )
    events = await _events(text, [3, 15, 16, 40])
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    completed = events[-1]
    assert isinstance(completed, ResponseCompleted)
    assert streamed.strip() == "One moment."
    assert completed.response.text == called.text == "One moment."
    assert [c.name for c in completed.response.message.tool_calls] == [
        c.name for c in called.message.tool_calls
    ]
    assert len(called.message.tool_calls) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_text_tool_call_model_with_any_name(path: str) -> None:
    model = TextToolCallModel(ScriptedChatModel(["{" + INVENTED + "}"] * 2), any_name=True)
    request = ChatRequest(
        messages=(UserMessage(content="What are your opening hours?"),), tools=(get_order_status,)
    )
    if path == "call":
        response = await model.call(request)
    else:
        events = [e async for e in model.stream(request)]
        assert not any(isinstance(e, TextDelta) and e.text.strip() for e in events)
        last = events[-1]
        assert isinstance(last, ResponseCompleted)
        response = last.response
    assert [c.name for c in response.message.tool_calls] == ["get_opening_hours"]
    assert response.text == ""
