"""Provider-native context management: each provider sends its own request field, keeps
the compaction item its API returns and sends it back; no other provider sees either."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import Chain, ToolCallingAdvisor
from advisorchain.advisors.compaction import CompactionAdvisor, NativeCompaction, Trigger
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.core.events import ResponseCompleted
from advisorchain.core.messages import Message, UserMessage
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.providers import ScriptedChatModel, anthropic, gemini, openai, openai_responses
from advisorchain.providers.anthropic import AnthropicWire, _StreamState, message_response
from advisorchain.providers.gemini import GeminiWire
from advisorchain.providers.native_compaction import ANTHROPIC_BETAS
from advisorchain.providers.openai import OpenAIChatWire
from advisorchain.providers.openai_responses import OpenAIResponsesWire, response_from_payload
from advisorchain.providers.sse import SSEDecoder
from advisorchain.providers.wire import WireCall

from provider_support import cuts, fixture, fixture_json

NATIVE_COMPACTION_KEY = "advisorchain_compaction"
"""The `extra` key 0.3 marked requests with: a typed option now, never in a body."""

NATIVE = NativeCompaction(
    openai_compact_threshold=200_000,
    anthropic_clear_tool_uses=100_000,
    anthropic_keep_tool_uses=3,
    anthropic_clear_at_least=20_000,
    anthropic_compact_trigger=150_000,
)


def marked_request() -> ChatRequest:
    return NATIVE.apply(ChatRequest(messages=(UserMessage(content="hi"),)))


def call(request: ChatRequest, *, stream: bool = False) -> WireCall:
    return WireCall(request=request, model="m", base_url="http://127.0.0.1", stream=stream)


def test_anthropic_gets_context_management_and_the_beta_header() -> None:
    wire = AnthropicWire()
    body = wire.body(call(marked_request()))
    assert NATIVE_COMPACTION_KEY not in body
    assert body["context_management"] == {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 100_000},
                "keep": {"type": "tool_uses", "value": 3},
                "clear_at_least": {"type": "input_tokens", "value": 20_000},
                "exclude_tools": ["search_tools"],
            },
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150_000}},
        ]
    }
    assert wire.headers(call(marked_request()), "k")["anthropic-beta"] == ANTHROPIC_BETAS
    plain = ChatRequest(messages=(UserMessage(content="hi"),))
    assert "anthropic-beta" not in wire.headers(call(plain), "k")
    assert "context_management" not in wire.body(call(plain))


def test_openai_responses_gets_its_compaction_setting() -> None:
    body = OpenAIResponsesWire().body(call(marked_request()))
    assert NATIVE_COMPACTION_KEY not in body
    assert body["context_management"] == [{"type": "compaction", "compact_threshold": 200_000}]


@pytest.mark.parametrize("wire", [OpenAIChatWire(), GeminiWire()])
def test_other_providers_never_send_the_mark(wire: Any) -> None:
    """What a fallback to another provider sends: neither the mark nor a foreign field."""
    body = wire.body(call(marked_request()))
    assert NATIVE_COMPACTION_KEY not in body
    assert "context_management" not in body


def test_only_the_asked_provider_gets_a_field() -> None:
    only_openai = NativeCompaction(openai_compact_threshold=1000).apply(
        ChatRequest(messages=(UserMessage(content="hi"),))
    )
    body = AnthropicWire().body(call(only_openai))
    assert "context_management" not in body and NATIVE_COMPACTION_KEY not in body
    assert "anthropic-beta" not in AnthropicWire().headers(call(only_openai), "k")


def test_native_configuration_errors() -> None:
    with pytest.raises(ChainConfigurationError):
        NativeCompaction(anthropic_compact_trigger=1000)
    with pytest.raises(ChainConfigurationError):
        NativeCompaction(openai_compact_threshold=0)


def replay(data: bytes) -> _StreamState:
    state, decoder = _StreamState(), SSEDecoder()
    for event in [*decoder.feed(data), *decoder.close()]:
        state.receive(event.data, event.event)
    return state


def follow_up(response: ChatResponse) -> list[Message]:
    return [UserMessage(content="plan it"), response.message, UserMessage(content="and then?")]


def test_the_anthropic_compaction_block_goes_back_to_anthropic_only() -> None:
    recorded = fixture_json("anthropic_message_compaction.json")
    response = message_response(recorded)
    assert response.text.startswith("For the trip to Zürich")
    _, wire = anthropic.wire_messages(follow_up(response))
    assert wire[1]["content"] == recorded["content"]  # the block, unchanged, in its place
    # a fallback to another provider: the block is not sent (it means nothing there)
    assert "Zürich in May" not in str(openai.wire_messages(follow_up(response)))
    assert "Zürich in May" not in str(gemini.contents(follow_up(response)))
    assert "Zürich in May" not in str(openai_responses.input_items(follow_up(response)))


def test_the_streamed_anthropic_compaction_block_is_assembled() -> None:
    expected = message_response(fixture_json("anthropic_message_compaction.json"))
    data = fixture("anthropic_stream_compaction.sse")
    for chunks in cuts(data, steps=(1, 64)):
        state, decoder = _StreamState(), SSEDecoder()
        for chunk in chunks:
            for event in decoder.feed(chunk):
                state.receive(event.data, event.event)
        for event in decoder.close():
            state.receive(event.data, event.event)
        response = state.response()
        assert response.message == expected.message


def test_the_openai_compaction_item_goes_back_to_openai_responses_only() -> None:
    recorded = fixture_json("openai_responses_compaction.json")
    response = response_from_payload(recorded)
    items = openai_responses.input_items(follow_up(response))
    assert recorded["output"][0] in items  # the opaque item, sent back unchanged
    assert items.index(recorded["output"][0]) < len(items) - 1
    secret = recorded["output"][0]["encrypted_content"]
    _, anthropic_wire = anthropic.wire_messages(follow_up(response))
    assert secret not in str(anthropic_wire)
    assert secret not in str(openai.wire_messages(follow_up(response)))
    assert secret not in str(gemini.contents(follow_up(response)))


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_the_advisor_marks_every_model_request(streaming: bool) -> None:
    model = ScriptedChatModel(["ok"])
    summarizer = ScriptedChatModel(["unused"], model_name="s")
    compaction = CompactionAdvisor(summarizer, trigger=Trigger(messages=100), native=NATIVE)
    chain = Chain([ToolCallingAdvisor(), compaction], model=model)
    if streaming:
        async for event in chain.stream("hi"):
            assert not isinstance(event, ResponseCompleted) or event.response.text == "ok"
    else:
        await chain.call("hi")
    assert model.requests[-1].options.native_compaction == NATIVE.mark()
    assert NATIVE_COMPACTION_KEY not in model.requests[-1].options.extra


def test_a_streamed_openai_compaction_item_is_kept() -> None:
    """The item arrives as `response.output_item.added`/`done`; `response.completed`
    carries no output here, so the reader keeps what the items said."""
    import json

    from advisorchain.providers.openai_responses import ResponsesStreamReader

    recorded = fixture_json("openai_responses_compaction.json")
    compaction_item, message_item = recorded["output"]
    text = message_item["content"][0]["text"]
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": compaction_item},
        {"type": "response.output_item.done", "output_index": 0, "item": compaction_item},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message_item, "content": [], "status": "in_progress"},
        },
        {
            "type": "response.output_text.delta",
            "output_index": 1,
            "content_index": 0,
            "delta": text,
        },
        {"type": "response.output_item.done", "output_index": 1, "item": message_item},
        {"type": "response.completed", "response": {**recorded, "output": []}},
    ]
    reader = ResponsesStreamReader()
    for event in events:
        reader.receive(json.dumps(event), event["type"])
    response = reader.response()
    assert response.text == text
    items = openai_responses.input_items(follow_up(response))
    assert compaction_item in items
