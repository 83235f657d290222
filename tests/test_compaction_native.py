"""Provider-native context management: each provider sends its own request field, keeps
the compaction item its API returns and sends it back; no other provider sees either."""

from __future__ import annotations

import json
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
    anthropic_compact_instructions="Keep every order number.",
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
            {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": 150_000},
                "instructions": "Keep every order number.",
            },
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


# --- the shapes, checked against the official SDKs' types ----------------------------------


def _typed_dict(value: Any, cls: Any) -> None:
    """`value` validates as the SDK's TypedDict `cls` and has no key `cls` lacks."""
    import typing

    pydantic = pytest.importorskip("pydantic")
    pydantic.TypeAdapter(cls).validate_python(value)
    assert set(value) <= set(typing.get_type_hints(cls)), (set(value), cls)


def _response_event_classes() -> dict[str, Any]:
    import typing

    responses = pytest.importorskip("openai.types.responses")
    union = typing.get_args(typing.get_args(responses.ResponseStreamEvent)[0])
    return {typing.get_args(c.model_fields["type"].annotation)[0]: c for c in union}


def test_openai_compaction_fixture_validates_against_the_sdk_types() -> None:
    responses = pytest.importorskip("openai.types.responses")
    recorded = fixture_json("openai_responses_compaction.json")
    parsed = responses.Response.model_validate(recorded)
    assert isinstance(parsed.output[0], responses.ResponseCompactionItem)
    classes = _response_event_classes()
    item = recorded["output"][0]
    for kind in ("response.output_item.added", "response.output_item.done"):
        event = {"type": kind, "output_index": 0, "sequence_number": 1, "item": item}
        assert isinstance(
            classes[kind].model_validate(event).item, responses.ResponseCompactionItem
        )


def test_openai_compaction_shapes_can_fail_sdk_validation() -> None:
    responses = pytest.importorskip("openai.types.responses")
    pydantic = pytest.importorskip("pydantic")
    broken = fixture_json("openai_responses_compaction.json")["output"][0]
    del broken["encrypted_content"]
    with pytest.raises(pydantic.ValidationError):
        responses.ResponseCompactionItem.model_validate(broken)
    with pytest.raises(AssertionError):
        _typed_dict({"type": "compaction", "threshold": 5}, _context_management_class())


def _context_management_class() -> Any:
    pytest.importorskip("openai")
    from openai.types.responses import response_create_params

    return response_create_params.ContextManagement


def test_openai_compaction_request_validates_against_the_sdk_params() -> None:
    pytest.importorskip("openai")
    from openai.types.responses import ResponseCompactionItemParamParam, response_create_params

    marked = NATIVE.apply(ChatRequest(messages=tuple(follow_up(_openai_answer()))))
    body = OpenAIResponsesWire().body(call(marked, stream=True))
    _typed_dict(body, response_create_params.ResponseCreateParamsStreaming)
    for entry in body["context_management"]:
        _typed_dict(entry, _context_management_class())
    (item,) = [i for i in body["input"] if i.get("type") == "compaction"]
    _typed_dict(item, ResponseCompactionItemParamParam)


def _openai_answer() -> ChatResponse:
    return response_from_payload(fixture_json("openai_responses_compaction.json"))


# The Anthropic SDK is no dependency here: the fields of its TypedDicts (anthropic-sdk-python,
# src/anthropic/types/beta/: beta_clear_tool_uses_20250919_edit_param.py,
# beta_compact_20260112_edit_param.py, beta_compaction_block_param.py, and the
# input_tokens / tool_uses trigger, keep and clear_at_least params), written out.
ANTHROPIC_EDIT_FIELDS = {
    "clear_tool_uses_20250919": {
        "type",
        "clear_at_least",
        "clear_tool_inputs",
        "exclude_tools",
        "keep",
        "trigger",
    },
    "compact_20260112": {"type", "instructions", "pause_after_compaction", "trigger"},
}
ANTHROPIC_COMPACTION_BLOCK_FIELDS = {"type", "cache_control", "content", "encrypted_content"}


def _count(value: Any, kind: str) -> None:
    assert set(value) == {"type", "value"} and value["type"] == kind
    assert isinstance(value["value"], int) and not isinstance(value["value"], bool)


def test_anthropic_edits_have_the_sdk_fields() -> None:
    body = AnthropicWire().body(call(marked_request()))
    edits = body["context_management"]["edits"]
    assert set(body["context_management"]) == {"edits"}
    assert [e["type"] for e in edits] == ["clear_tool_uses_20250919", "compact_20260112"]
    for edit in edits:
        assert set(edit) <= ANTHROPIC_EDIT_FIELDS[edit["type"]], edit
        _count(edit["trigger"], "input_tokens")
    clear, compact = edits
    _count(clear["keep"], "tool_uses")
    _count(clear["clear_at_least"], "input_tokens")
    assert all(isinstance(name, str) for name in clear["exclude_tools"])
    assert compact["instructions"] == "Keep every order number."


def test_the_anthropic_compaction_block_sent_back_has_the_sdk_fields() -> None:
    for response in (
        message_response(fixture_json("anthropic_message_compaction.json")),
        replay(fixture("anthropic_stream_compaction.sse")).response(),
    ):
        _, wire = anthropic.wire_messages(follow_up(response))
        (block,) = [b for b in wire[1]["content"] if b["type"] == "compaction"]
        assert set(block) <= ANTHROPIC_COMPACTION_BLOCK_FIELDS
        assert block["content"] and isinstance(block["content"], str)
        assert (
            block["encrypted_content"] == "EpwBCioIDxgCEAEYASJAb3BhcXVlLWNvbXBhY3Rpb24tWsO8cmljaA=="
        )


def test_a_failed_anthropic_compaction_round_trips_with_null_content() -> None:
    """A compaction that failed has `content: null`; the API takes it back as a no-op
    (an empty string it refuses)."""
    recorded = fixture_json("anthropic_message_compaction.json")
    recorded["content"][0] = {"type": "compaction", "content": None, "encrypted_content": None}
    response = message_response(recorded)
    _, wire = anthropic.wire_messages(follow_up(response))
    assert wire[1]["content"][0] == {
        "type": "compaction",
        "content": None,
        "encrypted_content": None,
    }
    stream = fixture("anthropic_stream_compaction.sse").decode()
    start = stream.index("event: content_block_delta")
    stream = stream[:start] + stream[stream.index("event: content_block_stop") :]
    _, wire = anthropic.wire_messages(follow_up(replay(stream.encode()).response()))
    assert wire[1]["content"][0] == {
        "type": "compaction",
        "content": None,
        "encrypted_content": None,
    }


def test_anthropic_usage_counts_the_compaction_step() -> None:
    """The top-level usage of a compacting request leaves out the summarizing step;
    `usage.iterations` has it, on both paths."""
    answered = message_response(fixture_json("anthropic_message_compaction.json"))
    assert (answered.usage.input_tokens, answered.usage.output_tokens) == (203_000, 4_700)
    iterations = fixture_json("anthropic_message_compaction.json")["usage"]["iterations"]
    stream = fixture("anthropic_stream_compaction.sse").decode()
    delta = '"usage": {"output_tokens": 1200}'
    assert delta in stream
    stream = stream.replace(
        delta, f'"usage": {{"output_tokens": 1200, "iterations": {json.dumps(iterations)}}}'
    )
    streamed = replay(stream.encode()).response()
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (203_000, 4_700)
    plain = replay(fixture("anthropic_stream_compaction.sse")).response()
    assert (plain.usage.input_tokens, plain.usage.output_tokens) == (23_000, 1_200)
