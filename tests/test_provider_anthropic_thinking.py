"""Anthropic extended thinking: the `thinking` option, its checks, and thinking blocks
returned unchanged before `tool_use` across every round of a tool loop."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from advisorchain import (
    Chain,
    ChatOptions,
    ChatRequest,
    ReasoningDelta,
    ResponseCompleted,
    ToolCallingAdvisor,
    Usage,
    UserMessage,
)
from advisorchain.providers import AnthropicChatModel, BadRequestError

from provider_support import (
    FAST_RETRY,
    HTTPX_ABANDONED_GENERATORS,
    Recorder,
    fixture,
    fixture_json,
    get_time,
    get_weather,
    sse_response,
)

pytestmark = [HTTPX_ABANDONED_GENERATORS, pytest.mark.anyio]

THINKING = {"type": "enabled", "budget_tokens": 2048}
ROUND_ONE = "anthropic_message_thinking_tool_use.json", "anthropic_stream_thinking_tool_use.sse"
ROUND_TWO = (
    "anthropic_message_thinking_omitted_tool_use.json",
    "anthropic_stream_thinking_omitted_tool_use.sse",
)


def model_for(recorder: Recorder, **kwargs: Any) -> AnthropicChatModel:
    kwargs.setdefault("thinking", THINKING)
    return AnthropicChatModel(
        "claude-test",
        api_key="sk-ant-test",
        http_client=recorder.client(),
        retry_policy=FAST_RETRY,
        prompt_cache=False,
        **kwargs,
    )


def recorded(pair: tuple[str, str], stream: bool) -> httpx.Response:
    if stream:
        return sse_response(fixture(pair[1]))
    return httpx.Response(200, json=fixture_json(pair[0]))


def final_text(text: str, stream: bool) -> httpx.Response:
    message = {
        "id": "msg_3",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 30, "output_tokens": 4},
    }
    if not stream:
        return httpx.Response(200, json=message)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 4},
        },
        {"type": "message_stop"},
    ]
    return sse_response(
        b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    )


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_thinking_blocks_go_back_unchanged_before_tool_use_in_every_round(mode: str) -> None:
    stream = mode == "stream"
    recorder = Recorder(
        recorded(ROUND_ONE, stream), recorded(ROUND_TWO, stream), final_text("Sunny, noon.", stream)
    )
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[get_weather, get_time])
    if stream:
        events = [e async for e in chain.stream("Weather, then the time, in Zürich?")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
        reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        assert reasoning == fixture_json(ROUND_ONE[0])["content"][0]["thinking"]
    else:
        response = await chain.call("Weather, then the time, in Zürich?")
    assert response.text == "Sunny, noon."
    assert [body["thinking"] for body in recorder.bodies] == [THINKING] * 3
    third = recorder.bodies[2]["messages"]
    first_blocks = fixture_json(ROUND_ONE[0])["content"]
    second_blocks = fixture_json(ROUND_TWO[0])["content"]
    assert third[1] == {"role": "assistant", "content": first_blocks}
    assert [b["type"] for b in third[2]["content"]] == ["tool_result"]
    assert third[3] == {"role": "assistant", "content": second_blocks}
    assert second_blocks[0] == {"type": "thinking", "thinking": "", "signature": ANY_SIGNATURE}
    assert third[4]["content"][0]["tool_use_id"] == "toolu_01Tm3ZyQ8r1mZ9kLxA2bC4dE"
    # usage: cache reads and writes and thinking tokens of round two are counted
    assert response.usage.reasoning_tokens == 87
    assert response.usage.cached_input_tokens == 1290
    assert response.usage.cache_write_tokens == 152


class _AnySignature:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and len(other) > 40


ANY_SIGNATURE: Any = _AnySignature()


@pytest.mark.parametrize("stream", [False, True])
async def test_omitted_thinking_keeps_its_signature_and_thinking_tokens(stream: bool) -> None:
    recorder = Recorder(recorded(ROUND_TWO, stream))
    model = model_for(recorder)
    request = ChatRequest(messages=(UserMessage(content="Time?"),))
    if stream:
        events = [e async for e in model.stream(request)]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    else:
        response = await model.call(request)
    (part,) = response.message.reasoning
    signature = fixture_json(ROUND_TWO[0])["content"][0]["signature"]
    assert (part.text, part.signature, part.provider) == ("", signature, "anthropic")
    assert response.usage == Usage(1538, 118, 1290, 1, cache_write_tokens=152, reasoning_tokens=87)


@pytest.mark.parametrize(
    "thinking",
    [
        {"type": "adaptive"},
        {"type": "adaptive", "display": "omitted"},
        {"type": "enabled", "budget_tokens": 1024, "display": "summarized"},
        {"type": "disabled"},
    ],
)
async def test_the_thinking_option_is_sent_as_given(thinking: dict[str, Any]) -> None:
    recorder = Recorder(final_text("ok", False))
    await model_for(recorder, thinking=thinking).call(
        ChatRequest(messages=(UserMessage(content="Hi"),))
    )
    assert recorder.bodies[0]["thinking"] == thinking


async def test_without_the_option_no_thinking_is_sent_and_extra_can_still_set_it() -> None:
    recorder = Recorder(final_text("ok", False), final_text("ok", False))
    model = model_for(recorder, thinking=None)
    await model.call(ChatRequest(messages=(UserMessage(content="Hi"),)))
    extra = {"thinking": {"type": "enabled", "budget_tokens": 4000}}
    await model.call(
        ChatRequest(messages=(UserMessage(content="Hi"),), options=ChatOptions(extra=extra))
    )
    assert "thinking" not in recorder.bodies[0]
    assert recorder.bodies[1]["thinking"] == extra["thinking"]


@pytest.mark.parametrize(
    ("thinking", "match"),
    [
        ({"type": "enabled"}, "integer budget_tokens"),
        ({"type": "enabled", "budget_tokens": "2048"}, "integer budget_tokens"),
        ({"type": "enabled", "budget_tokens": 1000}, "at least 1024"),
        ({"type": "enabled", "budget_tokens": 4096}, r"below max_tokens \(4096\)"),
        ({"type": "on"}, "'enabled', 'adaptive' or 'disabled'"),
        ("enabled", "must be a mapping"),
    ],
)
def test_a_thinking_option_the_api_would_refuse_is_a_value_error(thinking: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AnthropicChatModel("claude-test", api_key="k", thinking=thinking)


@pytest.mark.parametrize("choice", ["required", "get_weather"])
async def test_forced_tool_use_with_thinking_is_refused_before_sending(choice: str) -> None:
    recorder = Recorder()
    request = ChatRequest(
        messages=(UserMessage(content="Hi"),),
        tools=(get_weather,),
        options=ChatOptions(tool_choice=choice),
    )
    with pytest.raises(BadRequestError, match="forces tool use"):
        await model_for(recorder).call(request)
    with pytest.raises(BadRequestError, match="forces tool use"):
        async for _ in model_for(recorder).stream(request):
            pass
    assert recorder.requests == []


async def test_auto_and_none_tool_choice_and_disabled_thinking_are_sent() -> None:
    recorder = Recorder(*(final_text("ok", False) for _ in range(3)))
    for choice, thinking in (("auto", THINKING), ("none", THINKING), ("required", None)):
        request = ChatRequest(
            messages=(UserMessage(content="Hi"),),
            tools=(get_weather,),
            options=ChatOptions(tool_choice=choice),
        )
        await model_for(recorder, thinking=thinking).call(request)
    assert [b.get("thinking") for b in recorder.bodies] == [THINKING, THINKING, None]


async def test_a_max_tokens_option_not_above_the_budget_is_refused_before_sending() -> None:
    recorder = Recorder()
    request = ChatRequest(
        messages=(UserMessage(content="Hi"),), options=ChatOptions(max_tokens=2048)
    )
    with pytest.raises(BadRequestError, match=r"budget \(2048 tokens\) must be below max_tokens"):
        await model_for(recorder).call(request)
    assert recorder.requests == []
