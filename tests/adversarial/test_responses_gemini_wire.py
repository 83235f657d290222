"""What a Responses server or the Gemini API may send, read by `providers/openai_responses.py`
and `providers/gemini.py` through `HTTPChatModel`: any event, chunk or body gives a typed
error or a valid result, never another exception."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AdvisorChainError,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    UserMessage,
)
from advisorchain.providers import GeminiChatModel, OpenAIResponsesChatModel

from .strategies import json_values
from .support import PROPERTY
from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))

items = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "reasoning", "function_call", "web_search_call"])},
    optional={
        "id": json_values,
        "call_id": json_values,
        "name": json_values,
        "arguments": json_values,
        "summary": json_values,
        "content": json_values
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["output_text", "refusal"])},
                optional={"text": json_values, "refusal": json_values},
            ),
            max_size=2,
        ),
    },
)
responses = st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(["completed", "incomplete", "failed"]) | json_values,
        "output": json_values | st.lists(items | json_values, max_size=3),
        "usage": json_values,
        "error": json_values,
        "incomplete_details": json_values,
    },
)
responses_events = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "response.created",
                "response.output_item.added",
                "response.output_item.done",
                "response.output_text.delta",
                "response.refusal.delta",
                "response.function_call_arguments.delta",
                "response.reasoning_summary_text.delta",
                "response.reasoning_text.delta",
                "response.completed",
                "response.incomplete",
                "response.failed",
                "error",
            ]
        )
    },
    optional={
        "output_index": st.integers(-1, 3) | json_values,
        "content_index": st.integers(0, 2) | json_values,
        "summary_index": st.integers(0, 2) | json_values,
        "item_id": json_values,
        "delta": st.text(max_size=8) | json_values,
        "item": items | json_values,
        "response": responses | json_values,
        "code": json_values,
        "message": json_values,
    },
)

parts = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=8) | json_values,
        "thought": json_values,
        "thoughtSignature": json_values,
        "functionCall": json_values
        | st.fixed_dictionaries(
            {}, optional={"id": json_values, "name": json_values, "args": json_values}
        ),
    },
)
gemini_chunks = st.fixed_dictionaries(
    {},
    optional={
        "candidates": json_values
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": json_values,
                    "finishReason": st.sampled_from(["STOP", "SAFETY"]) | json_values,
                    "content": json_values
                    | st.fixed_dictionaries(
                        {}, optional={"parts": json_values | st.lists(parts, max_size=3)}
                    ),
                },
            ),
            max_size=2,
        ),
        "usageMetadata": json_values,
        "promptFeedback": json_values,
        "error": json_values,
    },
)


def body(events: list[Any], named: bool) -> bytes:
    lines = []
    for event in events:
        name = event.get("type") if named and isinstance(event, dict) else None
        head = f"event: {name}\n" if isinstance(name, str) else ""
        lines.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(lines).encode()


async def _outcome(model: Any, stream: bool) -> ChatResponse | AdvisorChainError:
    try:
        if not stream:
            response: ChatResponse = await model.call(REQUEST)
            return response
        final = None
        async for event in model.stream(REQUEST):
            final = event
        assert isinstance(final, ResponseCompleted)
        return final.response
    except AdvisorChainError as exc:
        return exc


def responses_model(reply: httpx.Response) -> OpenAIResponsesChatModel:
    client = Recorder(reply).client()
    return OpenAIResponsesChatModel("m", api_key="k", base_url="http://gw/v1", http_client=client)


def gemini_model(reply: httpx.Response) -> GeminiChatModel:
    return GeminiChatModel("g", api_key="k", http_client=Recorder(reply).client())


@PROPERTY
@given(st.lists(responses_events | json_values, max_size=8))
def test_responses_any_events_give_a_response_or_a_typed_error(events: list[Any]) -> None:
    model = responses_model(sse_response(body(events, named=True)))
    assert isinstance(anyio.run(_outcome, model, True), (ChatResponse, AdvisorChainError))


@PROPERTY
@given(responses | json_values)
def test_responses_any_body_gives_a_response_or_a_typed_error(payload: Any) -> None:
    model = responses_model(httpx.Response(200, content=json.dumps(payload).encode()))
    assert isinstance(anyio.run(_outcome, model, False), (ChatResponse, AdvisorChainError))


@PROPERTY
@given(st.lists(gemini_chunks | json_values, max_size=6))
def test_gemini_any_chunks_give_a_response_or_a_typed_error(chunks: list[Any]) -> None:
    model = gemini_model(sse_response(body(chunks, named=False)))
    assert isinstance(anyio.run(_outcome, model, True), (ChatResponse, AdvisorChainError))


@PROPERTY
@given(gemini_chunks | json_values)
def test_gemini_any_body_gives_a_response_or_a_typed_error(payload: Any) -> None:
    model = gemini_model(httpx.Response(200, content=json.dumps(payload).encode()))
    assert isinstance(anyio.run(_outcome, model, False), (ChatResponse, AdvisorChainError))
