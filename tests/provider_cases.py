"""The providers the contract suite (test_provider_contract.py) runs against: one
`ProviderCase` each. Adding a provider to the suite is adding one case to `CASES`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from advisorchain import ToolCall, Usage
from advisorchain.core.model import ChatModel
from advisorchain.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
    RetryPolicy,
)

FAST_RETRY = RetryPolicy(max_retries=2, backoff_base=0.001, backoff_max=0.002)


@dataclass(frozen=True)
class Answer:
    """What a model answers, for a case to write in its API's shapes: `text` (streamed
    as one delta per word), `calls` (arguments as compact JSON; streamed in two
    fragments each), `usage` (all four counts: the case writes them as its API does)."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(
        default_factory=lambda: Usage(input_tokens=20, output_tokens=7, cached_tokens=5, requests=1)
    )


@dataclass(frozen=True)
class ProviderCase:
    """One provider, as the contract suite sees it.

    - `model(client, api_key)`: the chat model under test, its requests going through
      `client`, with `FAST_RETRY` and its default base URL (so a missing key is an error);
      `api_key=None` reads `key_env`.
    - `reply(answer)`: the complete JSON response of the API for `answer`.
    - `stream(answer)`: the SSE body the API streams for `answer`.
    - `error(status, message)`: the API's JSON error body for a failed `status`.
    - `tool_results(body)`: the `(call id, text)` of every tool result in a request body.
    - `recorded`: pairs of fixture files (JSON response, SSE stream) that carry the same
      answer; the suite replays each stream at every byte boundary against its response.
    """

    name: str
    model: Callable[[httpx.AsyncClient, str | None], ChatModel]
    key_env: str
    reply: Callable[[Answer], dict[str, Any]]
    stream: Callable[[Answer], bytes]
    error: Callable[[int, str], dict[str, Any]]
    tool_results: Callable[[dict[str, Any]], list[tuple[str, str]]]
    recorded: tuple[tuple[str, str], ...] = ()


def sse(*events: dict[str, Any], named: bool = False, done: bool = False) -> bytes:
    """Events as an SSE body (`named`: with `event: <type>` lines; `done`: `[DONE]` last)."""
    lines = [
        (f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n" for e in events
    ]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def words(text: str) -> list[str]:
    """`text` in pieces of one word each (with the space that follows it)."""
    pieces = text.split(" ")
    return [p + " " for p in pieces[:-1]] + [pieces[-1]] if text else []


def halves(text: str) -> list[str]:
    return [text[: len(text) // 2], text[len(text) // 2 :]]


# --- OpenAI Chat Completions ------------------------------------------------------------


def _openai_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def _openai_reply(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in answer.calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if answer.calls else "stop",
            }
        ],
        "usage": _openai_usage(answer.usage),
    }


def _openai_stream(answer: Answer) -> bytes:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": word}) for word in words(answer.text)]
    for index, call in enumerate(answer.calls):
        first, second = halves(call.arguments)
        start = {"name": call.name, "arguments": first}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call.id, "type": "function", "function": start}
                    ]
                }
            )
        )
        chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": second}}]}))
    chunks.append(chunk({}, "tool_calls" if answer.calls else "stop"))
    chunks.append({**head, "choices": [], "usage": _openai_usage(answer.usage)})
    return sse(*chunks, done=True)


def _openai_tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


OPENAI = ProviderCase(
    name="openai",
    model=lambda client, key: OpenAIChatModel(
        "gpt-test", api_key=key, http_client=client, retry_policy=FAST_RETRY
    ),
    key_env="OPENAI_API_KEY",
    reply=_openai_reply,
    stream=_openai_stream,
    error=lambda status, message: {"error": {"message": message, "type": "error", "code": None}},
    tool_results=_openai_tool_results,
    recorded=(
        ("openai_completion_tool_calls.json", "openai_stream_tool_calls.sse"),
        ("openai_completion_reasoning_content.json", "openai_stream_reasoning_content.sse"),
        (
            "openai_completion_gemini_thought_signature.json",
            "openai_stream_gemini_thought_signature.sse",
        ),
    ),
)


# --- Anthropic Messages -----------------------------------------------------------------

_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _anthropic_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.output_tokens,
    }


def _anthropic_reply(answer: Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
        for c in answer.calls
    ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": "tool_use" if answer.calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(answer.usage),
    }


def _anthropic_stream(answer: Answer) -> bytes:
    usage = _anthropic_usage(answer.usage)
    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test"}
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**start, "content": [], "usage": {**usage, "output_tokens": 1}},
        }
    ]
    index = 0
    if answer.text:
        events.append(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        events += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
            for w in words(answer.text)
        ]
        events.append({"type": "content_block_stop", "index": 0})
        index = 1
    for call in answer.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events += [
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": part},
            }
            for part in halves(call.arguments)
        ]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if answer.calls else "end_turn"},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return sse(*events, named=True)


def _anthropic_tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for message in body["messages"]:
        for block in message["content"] if message["role"] == "user" else ():
            if block["type"] == "tool_result":
                content = block["content"]
                text = content if isinstance(content, str) else "".join(b["text"] for b in content)
                found.append((block["tool_use_id"], text))
    return found


ANTHROPIC = ProviderCase(
    name="anthropic",
    model=lambda client, key: AnthropicChatModel(
        "claude-test", api_key=key, http_client=client, retry_policy=FAST_RETRY
    ),
    key_env="ANTHROPIC_API_KEY",
    reply=_anthropic_reply,
    stream=_anthropic_stream,
    error=lambda status, message: {
        "type": "error",
        "error": {"type": _ANTHROPIC_ERRORS.get(status, "api_error"), "message": message},
    },
    tool_results=_anthropic_tool_results,
    recorded=(
        ("anthropic_message_tool_use.json", "anthropic_stream_tool_use.sse"),
        ("anthropic_message_thinking_tool_use.json", "anthropic_stream_thinking_tool_use.sse"),
        (
            "anthropic_message_thinking_omitted_tool_use.json",
            "anthropic_stream_thinking_omitted_tool_use.sse",
        ),
    ),
)


# --- OpenAI Responses -------------------------------------------------------------------


def _responses_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def _responses_output(answer: Answer) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if answer.text:
        text = {"type": "output_text", "text": answer.text, "annotations": []}
        output.append(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    output += [
        {
            "type": "function_call",
            "call_id": c.id,
            "name": c.name,
            "arguments": c.arguments,
            "status": "completed",
        }
        for c in answer.calls
    ]
    return output


def _responses_reply(answer: Answer, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-test",
        "output": _responses_output(answer) if status == "completed" else [],
        "usage": _responses_usage(answer.usage) if status == "completed" else None,
    }


def _responses_stream(answer: Answer) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _responses_reply(answer, "in_progress")}
    ]
    index = 0
    if answer.text:
        item = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events += [
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": word,
            }
            for word in words(answer.text)
        ]
        index = 1
    for call in answer.calls:
        item = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events += [
            {"type": "response.function_call_arguments.delta", "output_index": index, "delta": part}
            for part in halves(call.arguments)
        ]
        index += 1
    events.append({"type": "response.completed", "response": _responses_reply(answer)})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return sse(*events, named=True)


def _responses_tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (item["call_id"], item["output"])
        for item in body["input"]
        if item["type"] == "function_call_output"
    ]


OPENAI_RESPONSES = ProviderCase(
    name="openai-responses",
    model=lambda client, key: OpenAIResponsesChatModel(
        "gpt-test", api_key=key, http_client=client, retry_policy=FAST_RETRY
    ),
    key_env="OPENAI_API_KEY",
    reply=_responses_reply,
    stream=_responses_stream,
    error=lambda status, message: {
        "error": {"message": message, "type": "invalid_request_error", "code": None, "param": None}
    },
    tool_results=_responses_tool_results,
    recorded=(
        (
            "openai_responses_reasoning_tool_calls.json",
            "openai_responses_stream_reasoning_tool_calls.sse",
        ),
        ("openai_responses_text.json", "openai_responses_stream_text.sse"),
    ),
)


# --- Gemini -----------------------------------------------------------------------------

_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def _gemini_usage(usage: Usage) -> dict[str, Any]:
    return {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens - usage.reasoning_tokens,
        "thoughtsTokenCount": usage.reasoning_tokens,
        "cachedContentTokenCount": usage.cached_tokens,
        "totalTokenCount": usage.total_tokens,
    }


def _gemini_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-test", "responseId": "r1"}


def _gemini_calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {"functionCall": {"id": c.id, "name": c.name, "args": json.loads(c.arguments)}}
        for c in answer.calls
    ]


def _gemini_reply(answer: Answer) -> dict[str, Any]:
    parts = ([{"text": answer.text}] if answer.text else []) + _gemini_calls(answer)
    return {**_gemini_chunk(parts, "STOP"), "usageMetadata": _gemini_usage(answer.usage)}


def _gemini_stream(answer: Answer) -> bytes:
    chunks = [_gemini_chunk([{"text": word}]) for word in words(answer.text)]
    last = {
        **_gemini_chunk(_gemini_calls(answer), "STOP"),
        "usageMetadata": _gemini_usage(answer.usage),
    }
    return sse(*chunks, last)


def _gemini_tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (part["functionResponse"]["id"], part["functionResponse"]["response"]["output"])
        for content in body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]


GEMINI = ProviderCase(
    name="gemini",
    model=lambda client, key: GeminiChatModel(
        "gemini-test", api_key=key, http_client=client, retry_policy=FAST_RETRY
    ),
    key_env="GEMINI_API_KEY",
    reply=_gemini_reply,
    stream=_gemini_stream,
    error=lambda status, message: {
        "error": {
            "code": status,
            "message": message,
            "status": _GOOGLE_STATUS.get(status, "INTERNAL"),
        }
    },
    tool_results=_gemini_tool_results,
    recorded=(
        ("gemini_generate_thought_tool_calls.json", "gemini_stream_thought_tool_calls.sse"),
        ("gemini_generate_text.json", "gemini_stream_text.sse"),
    ),
)


CASES: list[ProviderCase] = [OPENAI, ANTHROPIC, OPENAI_RESPONSES, GEMINI]
"""Every provider the contract suite runs against."""
