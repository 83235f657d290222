"""Content parts: building messages from them, `.text`, persistence, tool results, streams."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import ValidationError

from advisorchain import (
    AssistantMessage,
    Chain,
    DocumentPart,
    ImagePart,
    ReasoningDelta,
    ReasoningPart,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    TextPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    dump_messages,
    load_messages,
    tool,
)
from advisorchain.providers import ScriptedChatModel, StreamAssembler

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PDF = b"%PDF-1.4\n" + bytes(range(256))


def test_user_message_takes_parts_and_keeps_plain_text() -> None:
    # a list is accepted too, and stored as a tuple (the type says tuple: the list is the test)
    message = UserMessage(
        content=[TextPart(text="What is "), ImagePart(data=PNG), TextPart(text="this?")]  # type: ignore[arg-type]
    )
    assert isinstance(message.content, tuple)
    assert message.text == "What is this?"
    assert [type(p).__name__ for p in message.parts] == ["TextPart", "ImagePart", "TextPart"]
    plain = UserMessage(content="hello")
    assert plain.content == "hello"
    assert plain.text == "hello"
    assert plain.parts == (TextPart(text="hello"),)


def test_every_message_type_has_text() -> None:
    reasoning = ReasoningPart(text="hidden thoughts", signature="sig", provider="anthropic")
    answer = AssistantMessage(content=(reasoning, TextPart(text="Four.")))
    assert answer.text == "Four."  # never the reasoning
    assert answer.reasoning == (reasoning,)
    assert AssistantMessage().text == ""
    assert AssistantMessage(content="hi").reasoning == ()
    assert SystemMessage(content="be brief").text == "be brief"
    result = ToolMessage(
        tool_call_id="c", name="chart", content=(TextPart(text="chart:"), ImagePart(data=PNG))
    )
    assert result.text == "chart:"


def test_image_part_checks_its_source() -> None:
    assert ImagePart(data=PNG).media_type == "image/png"
    assert ImagePart(data=b"\xff\xd8\xff\xe0rest").media_type == "image/jpeg"
    assert ImagePart(url="https://example.com/cat.png").media_type is None
    with pytest.raises(ValidationError, match="exactly one of data= and url="):
        ImagePart(data=PNG, url="https://example.com/cat.png")
    with pytest.raises(ValidationError, match="exactly one of data= and url="):
        ImagePart()
    with pytest.raises(ValidationError, match="needs media_type"):
        ImagePart(data=b"not an image")
    assert ImagePart(data=b"raw", media_type="image/heic").media_type == "image/heic"
    with pytest.raises(ValidationError, match="must be base64"):
        ImagePart(data="not base64!", media_type="image/png")  # type: ignore[arg-type]
    # base64 text is accepted and decoded, though the field's type says bytes
    assert ImagePart(data=base64.b64encode(PNG).decode()).data == PNG  # type: ignore[arg-type]


def test_a_data_url_is_read_into_bytes() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode("ascii")
    part = ImagePart(url=url)
    assert (part.data, part.media_type, part.url) == (PNG, "image/png", None)
    assert part.data_url() == url
    with pytest.raises(ValidationError, match="must be base64 with a media type"):
        ImagePart(url="data:,plain%20text")


def test_parts_are_checked_per_role() -> None:
    with pytest.raises(ValidationError):
        UserMessage(content=[ReasoningPart(text="no")])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        AssistantMessage(content=(ImagePart(data=PNG),))  # type: ignore[arg-type]


def test_data_url() -> None:
    assert ImagePart(data=PNG).data_url() == "data:image/png;base64," + base64.b64encode(
        PNG
    ).decode("ascii")
    assert ImagePart(url="https://x.test/a.png").data_url() == "https://x.test/a.png"
    assert DocumentPart(data=PDF).data_url().startswith("data:application/pdf;base64,JVBER")


RICH: list[Any] = [
    SystemMessage(content="sys"),
    UserMessage(
        content=(
            TextPart(text="Summarize both"),
            ImagePart(data=PNG),
            ImagePart(url="https://example.com/cat.png"),
            DocumentPart(data=PDF, name="report.pdf"),
        )
    ),
    AssistantMessage(
        content=(
            ReasoningPart(
                text="I should look it up.", signature="EqQBCgIYAhIM", provider="anthropic"
            ),
            ReasoningPart(
                provider="anthropic",
                provider_data={"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"},
            ),
            TextPart(text="Looking."),
        ),
        tool_calls=(
            ToolCall(
                id="c1",
                name="chart",
                arguments="{}",
                provider_data={"openai": {"extra_content": {"google": {"thought_signature": "x"}}}},
            ),
        ),
        provider_data={"acme": {"turn": 3, "nested": [None, {"k": None}]}},
    ),
    ToolMessage(
        tool_call_id="c1", name="chart", content=(TextPart(text="the chart"), ImagePart(data=PNG))
    ),
    AssistantMessage(content="done"),
]


def test_dump_and_load_round_trip_parts_with_bytes_as_base64() -> None:
    data = dump_messages(RICH)
    raw = json.loads(data)
    image = raw[1]["content"][1]
    assert image == {
        "type": "image",
        "data": base64.b64encode(PNG).decode("ascii"),
        "media_type": "image/png",
        "url": None,
    }
    assert raw[1]["content"][3]["data"] == base64.b64encode(PDF).decode("ascii")
    loaded = load_messages(data)
    assert list(loaded) == RICH
    assert loaded[1].parts[1].data == PNG  # type: ignore[union-attr]
    # opaque data comes back exactly, None values included
    assert loaded[2].provider_data == {"acme": {"turn": 3, "nested": [None, {"k": None}]}}  # type: ignore[union-attr]


V01_ROWS = b"""[
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "weather in Paris?"},
  {"role": "assistant", "content": null,
   "tool_calls": [{"id": "call_1", "name": "weather", "arguments": "{\\"city\\":\\"Paris\\"}"}]},
  {"role": "tool", "tool_call_id": "call_1", "name": "weather", "content": "18C",
   "is_error": false},
  {"role": "assistant", "content": "18C in Paris.", "tool_calls": []}
]"""
"""Messages as 0.1's `dump_messages` wrote them (plain string content, no new fields)."""


def test_rows_written_by_0_1_still_load() -> None:
    loaded = load_messages(V01_ROWS)
    assert loaded == (
        SystemMessage(content="You are terse."),
        UserMessage(content="weather in Paris?"),
        AssistantMessage(
            tool_calls=(ToolCall(id="call_1", name="weather", arguments='{"city":"Paris"}'),)
        ),
        ToolMessage(tool_call_id="call_1", name="weather", content="18C"),
        AssistantMessage(content="18C in Paris."),
    )
    assert [m.text for m in loaded] == [
        "You are terse.",
        "weather in Paris?",
        "",
        "18C",
        "18C in Paris.",
    ]
    assert isinstance(loaded[3].content, str)
    assert loaded[2].tool_calls[0].provider_data is None


def test_assembler_keeps_reasoning_apart_and_in_order() -> None:
    assembler = StreamAssembler()
    assembler.add(ReasoningDelta("Let me ", 0))
    assembler.add(ReasoningDelta("think.", 0))
    assembler.reasoning_detail(0, signature="sig-", provider="anthropic")
    assembler.reasoning_detail(0, signature="nature")
    assembler.reasoning_detail(1, provider="anthropic", provider_data={"type": "redacted_thinking"})
    assembler.add(TextDelta("Hello"))
    assembler.add(TextDelta(" there"))
    assembler.add(ToolCallDelta(0, "c1", "chart", "{}", provider_data={"openai": {"a": 1}}))
    assert assembler.text == "Hello there"
    message = assembler.message()
    assert message.content == (
        ReasoningPart(text="Let me think.", signature="sig-nature", provider="anthropic"),
        ReasoningPart(provider="anthropic", provider_data={"type": "redacted_thinking"}),
        TextPart(text="Hello there"),
    )
    assert message.tool_calls == (
        ToolCall(id="c1", name="chart", arguments="{}", provider_data={"openai": {"a": 1}}),
    )


def test_assembler_without_reasoning_builds_plain_text() -> None:
    assembler = StreamAssembler()
    assembler.add(TextDelta("a"))
    assembler.add(TextDelta("b"))
    assert assembler.message() == AssistantMessage(content="ab")


@tool
def chart(city: str) -> ImagePart:
    """Draw the weather chart of a city."""
    return ImagePart(data=PNG)


@tool
def report(city: str) -> list[Any]:
    """A report on a city: text and a PDF."""
    return ["Report for " + city, DocumentPart(data=PDF, name=f"{city}.pdf")]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (ImagePart(data=PNG), (ImagePart(data=PNG),)),
        (["caption", ImagePart(data=PNG)], (TextPart(text="caption"), ImagePart(data=PNG))),
        (["just", "strings"], '["just","strings"]'),
        ([], "[]"),
        ([ImagePart(data=PNG), 3], None),  # a list that is not only parts and text: JSON
    ],
)
def test_tool_results_become_parts(value: Any, expected: Any) -> None:
    tool_ = Tool("t", "a tool", handler=lambda arguments, context: value)
    converted = tool_.convert_result(value)
    if expected is None:
        assert isinstance(converted, str)
    else:
        assert converted == expected


def test_a_converter_may_return_parts() -> None:
    tool_ = Tool("t", "a tool", result_converter=lambda value: [ImagePart(data=value)])
    assert tool_.convert_result(PNG) == (ImagePart(data=PNG),)
    bad = Tool("t", "a tool", result_converter=lambda value: [object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="neither text nor content parts"):
        bad.convert_result(1)


def _tool_turn() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            AssistantMessage(
                content=(
                    ReasoningPart(text="Need a chart.", signature="s1"),
                    TextPart(text="One moment."),
                ),
                tool_calls=(
                    ToolCall.from_arguments("chart", {"city": "Paris"}, id="c1"),
                    ToolCall.from_arguments("report", {"city": "Paris"}, id="c2"),
                ),
            ),
            "Here it is.",
        ],
        chunk_size=4,
    )


@pytest.mark.anyio
async def test_a_tool_returning_parts_answers_with_parts_call_and_stream() -> None:
    called = await Chain([ToolCallingAdvisor()], model=_tool_turn(), tools=[chart, report]).call(
        "chart?"
    )
    events = [
        e
        async for e in Chain(
            [ToolCallingAdvisor()], model=_tool_turn(), tools=[chart, report]
        ).stream("chart?")
    ]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.messages == called.messages
    first, image, document, answer = called.messages
    assert isinstance(image, ToolMessage) and isinstance(document, ToolMessage)
    assert image.content == (ImagePart(data=PNG),)
    assert document.content == (
        TextPart(text="Report for Paris"),
        DocumentPart(data=PDF, name="Paris.pdf"),
    )
    assert isinstance(first, AssistantMessage)
    assert first.reasoning == (ReasoningPart(text="Need a chart.", signature="s1"),)
    # reasoning streams as ReasoningDelta only, never as text
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert text == "One moment.Here it is."
    assert reasoning == "Need a chart."
    # each call's end comes when it happens (in the order the calls finished)
    finished = {e.call.name: e for e in events if isinstance(e, ToolCallFinished)}
    assert finished["chart"].result.content == (ImagePart(data=PNG),)
    assert called.text == "Here it is."
