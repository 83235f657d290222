"""Content parts through the code that reads message text: logs, traces, text tool calls,
the local provider."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    DocumentPart,
    ImagePart,
    LoggingAdvisor,
    Message,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors._observe import messages_json, output_json
from advisorchain.core.text_tool_calls import with_text_calls
from advisorchain.providers import ScriptedChatModel
from advisorchain.providers.llamacpp import _message

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(48))
B64 = base64.b64encode(PNG).decode("ascii")


def test_observed_messages_describe_parts_without_their_bytes() -> None:
    messages: list[Message] = [
        UserMessage(
            content=(
                TextPart(text="look"),
                ImagePart(data=PNG),
                ImagePart(url="https://example.com/a.png"),
                DocumentPart(data=PNG, name="x.pdf"),
            )
        ),
        ToolMessage(
            tool_call_id="c", name="t", content=(TextPart(text="seen"), ImagePart(data=PNG))
        ),
    ]
    written = messages_json(messages, 100)
    assert B64 not in written
    assert json.loads(written) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "look"},
                {"type": "blob", "modality": "image", "mime_type": "image/png"},
                {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
                {"type": "blob", "modality": "document", "mime_type": "application/pdf"},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "response": "seen"}]},
    ]
    answer = AssistantMessage(
        content=(ReasoningPart(text="because", signature="SIG"), TextPart(text="yes"))
    )
    output = json.loads(output_json(answer, "stop", 100))
    assert output[0]["parts"] == [
        {"type": "reasoning", "content": "because"},
        {"type": "text", "content": "yes"},
    ]
    assert "SIG" not in output_json(answer, "stop", 100)


@tool
def camera() -> list[object]:
    """A snapshot."""
    return ["snapshot taken", ImagePart(data=PNG)]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_logging_with_content_logs_the_text_of_parts_not_the_bytes(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="advisorchain")
    model = ScriptedChatModel([ToolCall.from_arguments("camera", {}), "A cat."])
    chain = Chain(
        [LoggingAdvisor(include_content=True), ToolCallingAdvisor()], model=model, tools=[camera]
    )
    prompt = [UserMessage(content=(TextPart(text="what is it?"), ImagePart(data=PNG)))]
    if mode == "call":
        await chain.call(prompt)
    else:
        [e async for e in chain.stream(prompt)]
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "snapshot taken" in logged and "what is it?" in logged
    assert B64 not in logged


def test_text_tool_calls_keep_the_reasoning() -> None:
    reasoning = ReasoningPart(text="I will call it.", provider="openai")
    message = AssistantMessage(
        content=(reasoning, TextPart(text='<tool_call>{"name": "camera"}</tool_call>')),
        provider_data={"openai": {"x": 1}},
    )
    call = ToolCall(id="c1", name="camera")
    rewritten = with_text_calls(ChatResponse(message=message), "", (call,)).message
    assert rewritten.content == (reasoning,)
    assert rewritten.tool_calls == (call,)
    assert rewritten.provider_data == {"openai": {"x": 1}}


def test_the_local_provider_sends_the_text_of_parts() -> None:
    user = UserMessage(
        content=(TextPart(text="describe "), ImagePart(data=PNG), TextPart(text="it"))
    )
    assert _message(user) == {
        "role": "user",
        "content": "describe \n[image 1 (image/png): not shown: this model takes text only]\nit",
    }
    answer = AssistantMessage(content=(ReasoningPart(text="hmm"), TextPart(text="A cat.")))
    assert _message(answer)["content"] == "A cat."
    result = ToolMessage(
        tool_call_id="c", name="t", content=(TextPart(text="r"), ImagePart(data=PNG))
    )
    assert _message(result)["content"] == (
        "r\n[image 1 (image/png): not shown: tool results take text only here]"
    )
