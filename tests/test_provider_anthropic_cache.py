"""Anthropic prompt caching: `cache_control` breakpoints on the stable prefix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    ChatOptions,
    ChatRequest,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from advisorchain.providers import AnthropicChatModel
from advisorchain.providers.anthropic_cache import PromptCache, place_breakpoints

from provider_support import Recorder, get_time, get_weather, sse_response

pytestmark = pytest.mark.anyio

MARK = {"type": "ephemeral"}


CALL = ToolCall(id="toolu_1", name="get_weather", arguments='{"city":"Paris"}')
CONVERSATION = ChatRequest(
    messages=(
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris?"),
        AssistantMessage(content="Checking.", tool_calls=(CALL,)),
        ToolMessage(tool_call_id="toolu_1", name="get_weather", content="sunny"),
        AssistantMessage(content="Sunny."),
        UserMessage(content="And the time?"),
    ),
    tools=(get_weather, get_time),
)

ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "Noon."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 2},
}
STREAM = b"".join(
    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
    for e in (
        {"type": "message_start", "message": {**ANSWER, "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Noon."},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    )
)


def marked(body: dict[str, Any]) -> list[str]:
    """Where the marks are, as `tools[i]`, `system[i]`, `messages[i][j]`."""
    found = [f"tools[{i}]" for i, t in enumerate(body.get("tools", ())) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list):
            found += [f"messages[{i}][{j}]" for j, b in enumerate(content) if "cache_control" in b]
    return found


async def send(request: ChatRequest, stream: bool = False, **kwargs: Any) -> dict[str, Any]:
    recorder = Recorder(sse_response(STREAM) if stream else httpx.Response(200, json=ANSWER))
    model = AnthropicChatModel("claude-test", api_key="k", http_client=recorder.client(), **kwargs)
    if stream:
        async for _ in model.stream(request):
            pass
    else:
        await model.call(request)
    return recorder.bodies[0]


@pytest.mark.parametrize("stream", [False, True])
async def test_marks_go_on_tools_system_history_and_the_request_end(stream: bool) -> None:
    body = await send(CONVERSATION, stream)
    # wire messages: user, assistant(text, tool_use), user(tool_result), assistant, user
    assert marked(body) == ["tools[1]", "system[0]", "messages[3][0]", "messages[4][0]"]
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": MARK}]
    assert body["tools"][1]["cache_control"] == MARK
    assert body["messages"][3] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sunny.", "cache_control": MARK}],
    }
    assert body["messages"][4]["content"] == [
        {"type": "text", "text": "And the time?", "cache_control": MARK}
    ]


async def test_in_a_tool_round_the_request_end_is_the_last_tool_result() -> None:
    request = ChatRequest(messages=CONVERSATION.messages[:4], tools=CONVERSATION.tools)
    body = await send(request)
    # the latest user turn is the first message: no history before it
    assert marked(body) == ["tools[1]", "system[0]", "messages[2][0]"]
    assert body["messages"][2]["content"][0]["type"] == "tool_result"


async def test_thinking_blocks_are_never_marked() -> None:
    thought = ReasoningPart(text="hmm", signature="sig-" + "x" * 40, provider="anthropic")
    redacted = ReasoningPart(
        provider="anthropic", provider_data={"type": "redacted_thinking", "data": "abc"}
    )
    request = ChatRequest(
        messages=(
            UserMessage(content="Hi"),
            AssistantMessage(content=(TextPart(text="Hello."), thought, redacted)),
            UserMessage(content="Again?"),
        )
    )
    body = await send(request)
    assert marked(body) == ["messages[1][0]", "messages[2][0]"]
    only_thinking = ChatRequest(
        messages=(
            UserMessage(content="Hi"),
            AssistantMessage(content=(thought,)),
            *request.messages[2:],
        )
    )
    assert marked(await send(only_thinking)) == ["messages[2][0]"]


async def test_prompt_cache_false_places_no_mark_and_keeps_system_a_string() -> None:
    body = await send(CONVERSATION, prompt_cache=False)
    assert marked(body) == [] and body["system"] == "Be brief."
    assert "cache_control" not in json.dumps(body)


async def test_a_plan_chooses_the_marks_and_their_ttl() -> None:
    body = await send(CONVERSATION, prompt_cache=PromptCache(tools=False, history=False, ttl="1h"))
    assert marked(body) == ["system[0]", "messages[4][0]"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


async def test_marks_already_in_the_body_count_against_the_limit_of_four() -> None:
    mine = {"type": "ephemeral", "ttl": "1h"}
    system = [
        {"type": "text", "text": "a", "cache_control": mine},
        {"type": "text", "text": "b", "cache_control": mine},
    ]
    request = CONVERSATION.with_options(extra={"system": system})
    body = await send(request)
    assert marked(body) == ["tools[1]", "system[0]", "system[1]", "messages[3][0]"]
    assert body["system"][1]["cache_control"] == mine  # not replaced


def test_place_breakpoints_leaves_odd_bodies_alone() -> None:
    bodies: list[dict[str, Any]] = [
        {},
        {"messages": []},
        {"messages": [{"role": "user", "content": ""}]},
    ]
    for body in bodies:
        assert "cache_control" not in json.dumps(place_breakpoints(body, PromptCache()))


def test_a_deferred_tool_is_never_marked() -> None:
    loaded = {"name": "a", "description": "", "input_schema": {"type": "object"}}
    deferred = {**loaded, "name": "b", "defer_loading": True}
    body = place_breakpoints({"tools": [loaded, deferred], "messages": []}, PromptCache())
    assert body["tools"][0].get("cache_control") == MARK
    assert "cache_control" not in body["tools"][1]


async def test_options_extra_overriding_tools_is_still_marked() -> None:
    extra = {"tools": [{"name": "x", "description": "", "input_schema": {"type": "object"}}]}
    body = await send(CONVERSATION.with_options(extra=extra))
    assert body["tools"] == [{**extra["tools"][0], "cache_control": MARK}]
    assert ChatOptions(extra=extra).extra["tools"][0] == extra["tools"][0]  # not changed
    assert "cache_control" not in extra["tools"][0]


def test_the_marks_make_most_of_a_scripted_conversation_a_cache_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under Anthropic's documented rules (simulated in benchmarks/prompt_cache.py), the
    default marks let every request after the first read its predecessor's prefix."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))
    from benchmarks import prompt_cache

    on, off, openai, responses, gemini = prompt_cache.run()
    assert on["requests"] == off["requests"] == 12
    assert on["cached_fraction"] > 0.7 and on["billed_input_fraction"] < 0.5
    assert off["cached_input_tokens"] == off["cache_write_tokens"] == 0
    # OpenAI (both APIs) and Gemini cache by themselves: the same usage field reports it
    for automatic in (openai, responses, gemini):
        assert automatic["requests"] == 12
        assert automatic["cached_fraction"] > 0.7
        assert automatic["cache_write_tokens"] == 0
    assert "| anthropic, prompt_cache on (default) | 6 | 12 |" in prompt_cache.render([on])
