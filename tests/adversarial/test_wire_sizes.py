"""Every number a server sends that could size an allocation or a loop: stream indices
(tool calls, content blocks, output items, content parts, summary parts, candidates),
sequence numbers, counts. Each is replaced, in an otherwise valid stream, by huge,
negative, fractional, boolean, textual and 5,000-digit values. The outcome must be a
response or a typed error, with memory bounded by the stream's own size (never by the
number): a `content_index` of 2**62 must not pad a list to that length."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from advisorchain import (
    AdvisorChainError,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    UserMessage,
)
from advisorchain.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
)

from .support import dump_findings
from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))

HOSTILE_NUMBERS: dict[str, Any] = {
    "200k": 200_000,
    "2**62": 2**62,
    "2**64": 2**64,
    "-1": -1,
    "-(2**62)": -(2**62),
    "1.5": 1.5,
    "1e308": 1e308,
    "true": True,
    "null": None,
    "text": "3",
    "5000 digits": "RAW:" + "9" * 5000,
}
"""What a hostile or broken server can put where a small count belongs. `RAW:` values are
written into the JSON as they are (Python's `json` refuses to parse an integer of more
than 4,300 digits)."""

MAX_PEAK_BYTES = 8 * 1024 * 1024
"""Reading one short stream never needs more, whatever a number in it says."""


def _data(event: dict[str, Any]) -> str:
    data = json.dumps(event)
    if '"RAW:' in data:  # the digits as a JSON number, not a string
        head, _, rest = data.partition('"RAW:')
        digits, _, tail = rest.partition('"')
        data = head + digits + tail
    return data


def _sse(events: list[dict[str, Any]], named: bool) -> bytes:
    lines = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        lines.append(f"{head}data: {_data(event)}\n\n")
    return "".join(lines).encode()


def openai_stream(field: str, n: Any) -> bytes:
    call: dict[str, Any] = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "f", "arguments": "{}"}
    choice: dict[str, Any] = {"index": 0, "delta": {"tool_calls": [call]}}
    if field == "tool_calls.index":
        call["index"] = n
    else:
        choice["index"] = n
    chunks = [
        {"id": "c", "choices": [choice]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    return _sse(chunks, named=False) + b"data: [DONE]\n\n"


def anthropic_stream(field: str, n: Any) -> bytes:
    block = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    if field == "text block index":
        block = {"type": "text", "text": ""}
    delta = (
        {"type": "input_json_delta", "partial_json": "{}"}
        if block["type"] == "tool_use"
        else {"type": "text_delta", "text": "hi"}
    )
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}},
        {"type": "content_block_start", "index": n, "content_block": block},
        {"type": "content_block_delta", "index": n, "delta": delta},
        {"type": "content_block_stop", "index": n},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return _sse(events, named=True)


def responses_stream(field: str, n: Any) -> bytes:
    indices = {"output_index": 0, "content_index": 0, "summary_index": 0}
    indices[field] = n
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "r"}},
        {
            "type": "response.output_item.added",
            "output_index": indices["output_index"],
            "item": {"type": "message", "id": "i1", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "i1",
            "output_index": indices["output_index"],
            "content_index": indices["content_index"],
            "delta": "hi",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "r1",
            "output_index": 1,
            "summary_index": indices["summary_index"],
            "delta": "thinking",
        },
        {
            "type": "response.completed",
            "sequence_number": n if field == "sequence_number" else 5,
            "response": {"id": "r", "status": "completed", "output": [], "usage": {}},
        },
    ]
    return _sse(events, named=True)


def gemini_stream(field: str, n: Any) -> bytes:
    chunk = {
        "candidates": [
            {
                "index": n,
                "content": {"parts": [{"text": "hi"}, {"functionCall": {"name": "f", "args": {}}}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": n},
    }
    return _sse([chunk], named=False)


def _openai(reply: httpx.Response) -> Any:
    return OpenAIChatModel("m", api_key="k", http_client=Recorder(reply).client())


def _anthropic(reply: httpx.Response) -> Any:
    return AnthropicChatModel("c", api_key="k", http_client=Recorder(reply).client())


def _responses(reply: httpx.Response) -> Any:
    client = Recorder(reply).client()
    return OpenAIResponsesChatModel("m", api_key="k", base_url="http://gw/v1", http_client=client)


def _gemini(reply: httpx.Response) -> Any:
    return GeminiChatModel("g", api_key="k", http_client=Recorder(reply).client())


WIRES: dict[str, tuple[Callable[[str, Any], bytes], Callable[[httpx.Response], Any], list[str]]] = {
    "openai": (openai_stream, _openai, ["tool_calls.index", "choices.index"]),
    "anthropic": (anthropic_stream, _anthropic, ["tool block index", "text block index"]),
    "responses": (
        responses_stream,
        _responses,
        ["output_index", "content_index", "summary_index", "sequence_number"],
    ),
    "gemini": (gemini_stream, _gemini, ["candidates.index"]),
}


async def _outcome(model: Any) -> ChatResponse | AdvisorChainError:
    try:
        final = None
        async for event in model.stream(REQUEST):
            final = event
        assert isinstance(final, ResponseCompleted)
        return final.response
    except AdvisorChainError as exc:
        return exc


def _run(stream: bytes, make: Callable[[httpx.Response], Any]) -> tuple[str | None, int]:
    """What went wrong reading `stream` (None: nothing), and the peak memory it took."""
    tracemalloc.start()
    try:
        outcome = anyio.run(_outcome, make(sse_response(stream)))
    except Exception as exc:  # noqa: BLE001 - what the suite looks for
        return type(exc).__name__, tracemalloc.get_traced_memory()[1]
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if isinstance(outcome, ChatResponse) and len(outcome.message.parts) > 8:
        return f"{len(outcome.message.parts)} parts", peak
    return None, peak


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_number_the_server_sends_never_sizes_memory(wire: str) -> None:
    build, make, fields = WIRES[wire]
    for field in fields:  # each template reads as a valid stream with small numbers
        assert _run(build(field, 0), make)[0] is None, field
    found: dict[str, str] = {}
    cases = 0
    for field in fields:
        for name, n in HOSTILE_NUMBERS.items():
            cases += 1
            failure, peak = _run(build(field, n), make)
            if failure is None and peak > MAX_PEAK_BYTES:
                failure = f"peak {peak // 1024} KiB"
            if failure is not None:
                found[f"{field}={name}"] = failure
    dump_findings(f"sizes {wire}", found, cases)
    assert found == {}, found
