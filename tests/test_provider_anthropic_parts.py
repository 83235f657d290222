"""Anthropic: content parts in requests, thinking blocks in answers and back in the loop."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    DocumentPart,
    ImagePart,
    ReasoningDelta,
    ReasoningPart,
    ResponseCompleted,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.providers import AnthropicChatModel

from provider_support import (
    FAST_RETRY,
    HTTPX_ABANDONED_GENERATORS,
    Recorder,
    cuts,
    fixture,
    fixture_json,
    get_weather,
    sse_response,
)

pytestmark = HTTPX_ABANDONED_GENERATORS

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
PDF = b"%PDF-1.4\n" + bytes(range(64))
B64_PNG = base64.b64encode(PNG).decode("ascii")
B64_PDF = base64.b64encode(PDF).decode("ascii")

THINKING = fixture_json("anthropic_message_thinking_tool_use.json")["content"][0]
REDACTED = fixture_json("anthropic_message_thinking_tool_use.json")["content"][1]


def model_for(recorder: Recorder) -> AnthropicChatModel:
    return AnthropicChatModel(
        "claude-test",
        api_key="sk-ant-test",
        http_client=recorder.client(),
        retry_policy=FAST_RETRY,
        prompt_cache=False,  # its marks are tested in test_provider_anthropic_cache.py
    )


def answer(text: str = "Done.") -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 2},
        },
    )


def answer_stream(text: str = "Done.") -> httpx.Response:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_2", "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    return sse_response([f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events])


def reply(call: httpx.Response, stream: httpx.Response) -> Any:
    def handler(req: httpx.Request) -> httpx.Response:
        return stream if json.loads(req.content).get("stream") else call

    return handler


# --- requests -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_user_images_and_documents_are_blocks() -> None:
    recorder = Recorder(answer())
    message = UserMessage(
        content=(
            TextPart(text="Compare these"),
            ImagePart(data=PNG),
            ImagePart(url="https://example.com/cat.jpg"),
            DocumentPart(data=PDF, name="report.pdf"),
            DocumentPart(data=b"plain notes", media_type="text/plain"),
            TextPart(text=""),
        )
    )
    await model_for(recorder).call(ChatRequest(messages=(message,)))
    assert recorder.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": B64_PDF},
                    "title": "report.pdf",
                },
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "plain notes"},
                },
            ],
        }
    ]


@pytest.mark.anyio
async def test_tool_results_carry_images_and_foreign_reasoning_is_not_sent() -> None:
    recorder = Recorder(answer())
    messages = (
        UserMessage(content="chart?"),
        AssistantMessage(
            content=(
                ReasoningPart(text="from elsewhere", signature="x", provider="openai"),
                TextPart(text="Drawing."),
            ),
            tool_calls=(ToolCall(id="t1", name="chart", arguments="{}"),),
        ),
        ToolMessage(
            tool_call_id="t1",
            name="chart",
            content=(TextPart(text="Chart:"), ImagePart(data=PNG)),
        ),
    )
    await model_for(recorder).call(ChatRequest(messages=messages))
    sent = recorder.bodies[0]["messages"]
    assert sent[1]["content"] == [
        {"type": "text", "text": "Drawing."},
        {"type": "tool_use", "id": "t1", "name": "chart", "input": {}},
    ]
    assert sent[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [
                {"type": "text", "text": "Chart:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG},
                },
            ],
            "is_error": False,
        }
    ]


# --- answers --------------------------------------------------------------------------

EXPECTED_REASONING = (
    ReasoningPart(text=THINKING["thinking"], signature=THINKING["signature"], provider="anthropic"),
    ReasoningPart(provider="anthropic", provider_data=REDACTED),
)


@pytest.mark.anyio
async def test_call_reads_thinking_and_redacted_thinking_in_order() -> None:
    recorder = Recorder(
        httpx.Response(200, json=fixture_json("anthropic_message_thinking_tool_use.json"))
    )
    response = await model_for(recorder).call(ChatRequest(messages=(UserMessage(content="?"),)))
    assert response.message.content == EXPECTED_REASONING
    assert response.text == ""
    assert response.tool_calls == (
        ToolCall(
            id="toolu_01CswdEQBMshySk6Y9DFKrfq", name="get_weather", arguments='{"city":"Zürich"}'
        ),
    )


@pytest.mark.anyio
async def test_stream_yields_reasoning_deltas_and_the_same_response_as_call() -> None:
    data = fixture("anthropic_stream_thinking_tool_use.sse")
    called = await model_for(
        Recorder(httpx.Response(200, json=fixture_json("anthropic_message_thinking_tool_use.json")))
    ).call(ChatRequest(messages=(UserMessage(content="?"),)))
    for chunks in cuts(data, steps=(1, 13)):
        model = model_for(Recorder(sse_response(chunks)))
        events = [e async for e in model.stream(ChatRequest(messages=(UserMessage(content="?"),)))]
        assert not any(isinstance(e, TextDelta) for e in events)  # thinking is never text
        reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        assert reasoning == THINKING["thinking"]
        assert {e.index for e in events if isinstance(e, ReasoningDelta)} == {0}
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        assert final.response.message == called.message
        assert final.response.finish_reason == "tool_calls"


def test_unsigned_thinking_start_and_extra_fields_round_trip() -> None:
    from advisorchain.providers.anthropic import reasoning_part, thinking_block

    block = {"type": "thinking", "thinking": "t", "signature": "s", "future_field": [1, None]}
    assert thinking_block(reasoning_part(block)) == block
    assert thinking_block(reasoning_part(REDACTED)) == REDACTED
    assert thinking_block(ReasoningPart(text="mine")) is None


# --- the tool loop --------------------------------------------------------------------


@tool
def chart(city: str) -> list[Any]:
    """A chart of the weather in a city."""
    return [f"Chart of {city}", ImagePart(data=PNG)]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_thinking_goes_back_unchanged_before_tool_use_in_the_next_round(mode: str) -> None:
    recorder = Recorder(
        reply(
            httpx.Response(200, json=fixture_json("anthropic_message_thinking_tool_use.json")),
            sse_response(fixture("anthropic_stream_thinking_tool_use.sse")),
        ),
        reply(answer("Sunny."), answer_stream("Sunny.")),
    )
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[get_weather])
    if mode == "call":
        response = await chain.call("Weather in Zürich?")
        reasoning_text = None
    else:
        events = [e async for e in chain.stream("Weather in Zürich?")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
        reasoning_text = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sunny."
    assert response.text == "Sunny."
    if reasoning_text is not None:
        assert reasoning_text == THINKING["thinking"]
    second = recorder.bodies[1]["messages"]
    assert second[1] == {
        "role": "assistant",
        "content": [
            THINKING,
            REDACTED,
            {
                "type": "tool_use",
                "id": "toolu_01CswdEQBMshySk6Y9DFKrfq",
                "name": "get_weather",
                "input": {"city": "Zürich"},
            },
        ],
    }
    assert second[2]["content"][0]["tool_use_id"] == "toolu_01CswdEQBMshySk6Y9DFKrfq"
    first = response.messages[0]
    assert isinstance(first, AssistantMessage) and first.reasoning == EXPECTED_REASONING


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_tool_returning_an_image_reaches_the_model_as_an_image(mode: str) -> None:
    tool_use = httpx.Response(
        200,
        json={
            "id": "m1",
            "type": "message",
            "model": "claude-test",
            "content": [
                {"type": "tool_use", "id": "tu1", "name": "chart", "input": {"city": "Bern"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    )
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "tu1", "name": "chart", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Bern"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    tool_use_stream = sse_response(
        [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    )
    recorder = Recorder(
        reply(tool_use, tool_use_stream), reply(answer("A chart."), answer_stream("A chart."))
    )
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[chart])
    if mode == "call":
        await chain.call("chart?")
    else:
        [e async for e in chain.stream("chart?")]
    result = recorder.bodies[1]["messages"][2]["content"][0]
    assert result["content"] == [
        {"type": "text", "text": "Chart of Bern"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG}},
    ]
