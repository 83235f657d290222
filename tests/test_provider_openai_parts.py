"""OpenAI Chat Completions: content parts, tool-result media, reasoning, provider data."""

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
from advisorchain.providers import OpenAIChatModel

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
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode("ascii")
PDF_URL = "data:application/pdf;base64," + base64.b64encode(PDF).decode("ascii")


def model_for(recorder: Recorder, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-test",
        api_key="sk-test",
        http_client=recorder.client(),
        retry_policy=FAST_RETRY,
        **kwargs,
    )


def answer(text: str = "Done.") -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c2",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        },
    )


def answer_stream(text: str = "Done.") -> httpx.Response:
    chunk = {
        "id": "c2",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}],
    }
    return sse_response([f"data: {json.dumps(chunk)}\n\n".encode(), b"data: [DONE]\n\n"])


def reply(call: httpx.Response, stream: httpx.Response) -> Any:
    def handler(req: httpx.Request) -> httpx.Response:
        return stream if json.loads(req.content).get("stream") else call

    return handler


# --- requests -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_user_images_and_pdfs_are_image_url_and_file_parts() -> None:
    recorder = Recorder(answer())
    message = UserMessage(
        content=(
            TextPart(text="What is in these?"),
            ImagePart(data=PNG),
            ImagePart(url="https://example.com/cat.jpg"),
            DocumentPart(data=PDF, name="report.pdf"),
            DocumentPart(data=PDF),
            TextPart(text=""),
        )
    )
    await model_for(recorder).call(ChatRequest(messages=(message,)))
    assert recorder.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}},
                {"type": "file", "file": {"filename": "document.pdf", "file_data": PDF_URL}},
            ],
        }
    ]


def _round_with_an_image() -> tuple[Any, ...]:
    return (
        UserMessage(content="chart and time?"),
        AssistantMessage(
            tool_calls=(
                ToolCall(id="t1", name="chart", arguments="{}"),
                ToolCall(id="t2", name="clock", arguments="{}"),
            )
        ),
        ToolMessage(
            tool_call_id="t1",
            name="chart",
            content=(TextPart(text="Here:"), ImagePart(data=PNG), DocumentPart(data=PDF)),
        ),
        ToolMessage(tool_call_id="t2", name="clock", content="12:00"),
    )


@pytest.mark.anyio
async def test_tool_result_media_go_in_a_user_message_after_the_round() -> None:
    recorder = Recorder(answer())
    await model_for(recorder).call(ChatRequest(messages=_round_with_an_image()))
    sent = recorder.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "Here:\n[image 1 (image/png): attached in the next user message]\n"
        "[document 1 (application/pdf): attached in the next user message]",
    }
    assert sent[3]["content"] == "12:00"
    assert sent[4] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Attached by the result of chart (call t1):"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "file", "file": {"filename": "document.pdf", "file_data": PDF_URL}},
        ],
    }


@pytest.mark.anyio
async def test_tool_media_omit_sends_a_stand_in_only() -> None:
    recorder = Recorder(answer())
    model = model_for(recorder, tool_media="omit")
    await model.call(ChatRequest(messages=_round_with_an_image()))
    sent = recorder.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[2]["content"] == (
        "Here:\n[image 1 (image/png): not shown: tool results take text only here]\n"
        "[document 1 (application/pdf): not shown: tool results take text only here]"
    )
    with pytest.raises(ValueError, match="tool_media"):
        OpenAIChatModel("m", base_url="http://localhost:1/v1", tool_media="inline")  # type: ignore[arg-type]


@tool
def chart(city: str) -> ImagePart:
    """A weather chart of a city."""
    return ImagePart(data=PNG)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_tool_returning_an_image_through_the_chain(mode: str) -> None:
    call = {
        "id": "t1",
        "type": "function",
        "function": {"name": "chart", "arguments": '{"city":"Bern"}'},
    }
    completion = httpx.Response(
        200,
        json={
            "id": "c1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
        },
    )
    chunk = {
        "id": "c1",
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, **call}]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    stream = sse_response([f"data: {json.dumps(chunk)}\n\n".encode(), b"data: [DONE]\n\n"])
    recorder = Recorder(
        reply(completion, stream), reply(answer("A chart."), answer_stream("A chart."))
    )
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[chart])
    if mode == "call":
        await chain.call("chart?")
    else:
        [e async for e in chain.stream("chart?")]
    sent = recorder.bodies[1]["messages"]
    assert sent[2]["content"] == "[image 1 (image/png): attached in the next user message]"
    assert sent[3]["content"][1] == {"type": "image_url", "image_url": {"url": PNG_URL}}


# --- reasoning_content ----------------------------------------------------------------

REASONING = fixture_json("openai_completion_reasoning_content.json")["choices"][0]["message"][
    "reasoning_content"
]


@pytest.mark.anyio
async def test_reasoning_content_is_a_reasoning_part_on_both_paths() -> None:
    called = await model_for(
        Recorder(httpx.Response(200, json=fixture_json("openai_completion_reasoning_content.json")))
    ).call(ChatRequest(messages=(UserMessage(content="9.11 or 9.8?"),)))
    assert called.message.content == (
        ReasoningPart(text=REASONING, provider="openai"),
        TextPart(text="9.8 is larger."),
    )
    assert called.text == "9.8 is larger."
    for chunks in cuts(fixture("openai_stream_reasoning_content.sse"), steps=(1, 29)):
        model = model_for(Recorder(sse_response(chunks)))
        events = [e async for e in model.stream(ChatRequest(messages=(UserMessage(content="?"),)))]
        assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == REASONING
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "9.8 is larger."
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        assert final.response.message == called.message


@pytest.mark.anyio
async def test_reasoning_is_not_sent_back() -> None:
    recorder = Recorder(answer())
    previous = AssistantMessage(
        content=(ReasoningPart(text="secret chain", provider="openai"), TextPart(text="9.8."))
    )
    await model_for(recorder).call(
        ChatRequest(messages=(UserMessage(content="?"), previous, UserMessage(content="why?")))
    )
    assert recorder.bodies[0]["messages"][1] == {"role": "assistant", "content": "9.8."}


# --- provider data: Gemini's thought signature on a tool call -------------------------

SIGNATURE = fixture_json("openai_completion_gemini_thought_signature.json")["choices"][0][
    "message"
]["tool_calls"][0]["extra_content"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_thought_signature_on_a_tool_call_goes_back_unchanged(mode: str) -> None:
    recorder = Recorder(
        reply(
            httpx.Response(
                200, json=fixture_json("openai_completion_gemini_thought_signature.json")
            ),
            sse_response(fixture("openai_stream_gemini_thought_signature.sse")),
        ),
        reply(answer("Sunny."), answer_stream("Sunny.")),
    )
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[get_weather])
    if mode == "call":
        response = await chain.call("Weather in Zürich?")
    else:
        final = [e async for e in chain.stream("Weather in Zürich?")][-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    assert response.text == "Sunny."
    first = response.messages[0]
    assert isinstance(first, AssistantMessage)
    assert first.tool_calls[0].provider_data == {"openai": {"extra_content": SIGNATURE}}
    assert recorder.bodies[1]["messages"][1]["tool_calls"] == [
        {
            "id": "function-call-15911418283523436538",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Zürich"}'},
            "extra_content": SIGNATURE,
        }
    ]


@pytest.mark.anyio
async def test_other_providers_data_is_not_sent() -> None:
    recorder = Recorder(answer())
    previous = AssistantMessage(
        content="ok",
        tool_calls=(
            ToolCall(id="t1", name="x", arguments="{}", provider_data={"anthropic": {"a": 1}}),
        ),
        provider_data={"gemini": {"b": 2}, "openai": {"annotations": []}},
    )
    messages = (
        UserMessage(content="?"),
        previous,
        ToolMessage(tool_call_id="t1", name="x", content="r"),
    )
    await model_for(recorder).call(ChatRequest(messages=messages))
    assert recorder.bodies[0]["messages"][1] == {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        ],
        "annotations": [],
    }
