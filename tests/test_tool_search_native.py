"""ToolSearchAdvisor(native=...): Anthropic's tool search tool, replayed from its docs."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from advisorchain import (
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ResponseCompleted,
    Tool,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
)
from advisorchain.advisors import ToolSearchAdvisor
from advisorchain.providers import (
    AnthropicChatModel,
    BadRequestError,
    FallbackModel,
    NativeToolSearch,
    OpenAIChatModel,
    ScriptedChatModel,
    TextToolCallModel,
)
from advisorchain.providers.anthropic_tool_search import anthropic_tool_search

from provider_support import (
    FAST_RETRY,
    HTTPX_ABANDONED_GENERATORS,
    Recorder,
    fixture,
    fixture_json,
    sse_response,
)

pytestmark = HTTPX_ABANDONED_GENERATORS


def catalog(calls: list[dict[str, Any]]) -> list[Tool]:
    """The two tools of the docs' example, wire schemas as there."""
    wire = json.loads(fixture("anthropic_tool_search_tools.json"))

    def handler(arguments: dict[str, Any], context: Any) -> str:
        calls.append(arguments)
        return "62°F, fog"

    return [Tool(t["name"], t["description"], t["input_schema"], handler) for t in wire[1:]]


def final_message() -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": "It is 62°F and foggy."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1200, "output_tokens": 12},
        },
    )


def final_stream() -> httpx.Response:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"id": "msg_2", "model": "claude-opus-4-6", "usage": {"input_tokens": 9}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "It is 62°F and foggy."},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return sse_response(data.encode())


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_the_provider_searches_a_deferred_catalog_sent_whole_every_round(
    stream: bool,
) -> None:
    if stream:
        recorder = Recorder(
            sse_response(fixture("anthropic_stream_tool_search.sse")), final_stream()
        )
    else:
        recorder = Recorder(
            httpx.Response(200, json=fixture_json("anthropic_message_tool_search.json")),
            final_message(),
        )
    model = AnthropicChatModel(
        "claude-opus-4-6",
        api_key="k",
        http_client=recorder.client(),
        retry_policy=FAST_RETRY,
        prompt_cache=False,
    )
    calls: list[dict[str, Any]] = []
    advisor = ToolSearchAdvisor(native="bm25", min_tools=2)
    chain = Chain([ToolCallingAdvisor(), advisor], model=model, tools=catalog(calls))
    if stream:
        events = [e async for e in chain.stream("What is the weather in San Francisco?")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    else:
        response = await chain.call("What is the weather in San Francisco?")

    assert response.message.text == "It is 62°F and foggy."
    assert calls == [{"location": "San Francisco", "unit": "fahrenheit"}]
    first, second = recorder.bodies
    assert first["tools"] == json.loads(fixture("anthropic_tool_search_tools.json"))
    assert second["tools"] == first["tools"]  # the same prefix on every round
    assert "native_tool_search" not in first and "advisorchain_tool_search" not in first
    assert "search_tools" not in json.dumps(first)  # no local search tool, no note
    assert "system" not in first
    result = response.messages[1]
    assert isinstance(result, ToolMessage) and result.name == "get_weather"


def test_pinned_tools_and_a_named_tool_choice_are_not_deferred() -> None:
    tools = catalog([])
    advisor = ToolSearchAdvisor(native="regex", min_tools=1, pinned=["search_files"])
    request = ChatRequest(
        messages=(UserMessage(content="hi"),), tools=(advisor.search_tool, *tools)
    )
    narrowed = advisor.narrow(request)
    assert [t.name for t in narrowed.tools] == ["get_weather", "search_files"]
    assert narrowed.options.native_tool_search == NativeToolSearch(
        variant="regex", deferred=("get_weather",)
    )
    assert not narrowed.options.extra  # a typed option, no hidden channel
    chosen = advisor.narrow(request.with_options(tool_choice="get_weather"))
    assert chosen.options.native_tool_search is not None
    assert chosen.options.native_tool_search.deferred == ()
    few = ToolSearchAdvisor(native="bm25", min_tools=5)
    small = few.narrow(request.with_tools((few.search_tool, *tools)))
    assert small.options.native_tool_search is None and len(small.tools) == 2


def test_the_anthropic_mapping() -> None:
    body = {"tools": [{"name": "a"}, {"name": "b"}]}
    search = NativeToolSearch(variant="regex", deferred=("b",))
    assert anthropic_tool_search(body, search) == {
        "tools": [
            {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
            {"name": "a"},
            {"name": "b", "defer_loading": True},
        ]
    }
    with pytest.raises(ValueError, match="variant"):
        NativeToolSearch(variant="vector")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="deferred"):
        NativeToolSearch(variant="bm25", deferred=(1,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="native"):
        ToolSearchAdvisor(native="vector")  # type: ignore[arg-type]


def test_models_declare_native_tool_search_and_wrappers_pass_it_on() -> None:
    anthropic = AnthropicChatModel("claude-opus-4-6", api_key="k")
    openai = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    assert anthropic.supports_native_tool_search("bm25")
    assert anthropic.supports_native_tool_search("regex")
    assert not openai.supports_native_tool_search("bm25")
    assert TextToolCallModel(anthropic).supports_native_tool_search("bm25")
    assert FallbackModel([anthropic, anthropic]).supports_native_tool_search("regex")
    assert not FallbackModel([anthropic, openai]).supports_native_tool_search("regex")


@pytest.mark.parametrize(
    "model",
    [
        ScriptedChatModel(["ok"]),
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"),
    ],
    ids=["no-capability", "openai"],
)
def test_a_chain_refuses_native_search_on_a_model_without_it(model: Any) -> None:
    with pytest.raises(ChainConfigurationError, match="supports_native_tool_search"):
        Chain([ToolCallingAdvisor(), ToolSearchAdvisor(native="bm25")], model=model)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_a_provider_without_tool_search_refuses_the_option_before_sending(
    stream: bool,
) -> None:
    recorder = Recorder(httpx.Response(200, json={}))
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", http_client=recorder.client())
    request = ChatRequest(messages=(UserMessage(content="hi"),)).with_options(
        native_tool_search=NativeToolSearch(variant="bm25", deferred=("a",))
    )
    with pytest.raises(BadRequestError, match="tool search"):
        if stream:
            async for _ in model.stream(request):
                pass
        else:
            await model.call(request)
    assert recorder.bodies == []
