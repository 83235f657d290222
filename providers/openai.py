"""`OpenAIChatModel`: the Chat Completions API, from OpenAI or any compatible server.

Wire notes:
- An assistant message with tool calls and no text is sent with `"content": ""`, never
  `null` (llama.cpp's server rejects `null`).
- Tool results are `role: tool` messages with `tool_call_id`. Chat Completions has no
  error flag, so a failed tool's message is sent as is: its text says it failed.
- `tool_choice` and `parallel_tool_calls` are only sent with tools (the API rejects them
  otherwise); `ChatOptions.extra` is merged into the body last, so it can override.
- Some servers (Ollama) report `finish_reason: "stop"` for an answer with tool calls;
  that is normalized to `"tool_calls"`.
- A stream is complete once `data: [DONE]` or a `finish_reason` arrived (some servers omit
  `[DONE]`); the usage chunk that follows the finish reason is read when it comes.
- Only choice 0 is read; a `refusal` is reported as the answer's text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import httpx

from ..core.assembly import StreamAssembler
from ..core.call_ids import unique_tool_calls
from ..core.errors import StreamInterruptedError
from ..core.events import TextDelta, ToolCallDelta
from ..core.messages import AssistantMessage, Message, ToolCall, ToolMessage, new_call_id
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.usage import Usage
from .errors import ProviderError
from .http import (
    RetryPolicy,
    error_for_status,
    error_message,
    plain,
)
from .http_model import HTTPChatModel

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""The official API's base URL."""

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "eos": "stop",
    "eos_token": "stop",
}


class OpenAIChatModel(HTTPChatModel):
    """A chat model behind `POST {base_url}/chat/completions`.

    `base_url` defaults to `OPENAI_BASE_URL` from the environment, else the official
    API. The API key is `api_key`, else the variable named by `api_key_env`, read at the
    first call. `api_key_env` defaults to `OPENAI_API_KEY`, except when `base_url` is
    passed explicitly: then no variable is read unless named, so an OpenAI key is never
    sent to another server by accident. A key is required by the official API and when
    `api_key_env` is named; other servers (vLLM, llama.cpp, Ollama) get no key if none is set.

    `max_tokens_param` is the body field for `ChatOptions.max_tokens`: by default
    `max_completion_tokens` for the official API (its reasoning models reject the other)
    and `max_tokens` for other servers. `stream_usage=False` leaves out
    `stream_options`, for servers that reject it. `headers` are added to every request.

    Use it as an async context manager, or call `aclose()`, to close the HTTP client it
    creates; an injected `http_client` is left open.
    """

    provider_name = "openai"
    endpoint = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        stream_usage: bool = True,
    ) -> None:
        key_required = api_key_env is not None
        if base_url is None:
            base_url = os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
            api_key_env = api_key_env or "OPENAI_API_KEY"
        official = base_url.rstrip("/") == OPENAI_BASE_URL
        if official:
            api_key_env = api_key_env or "OPENAI_API_KEY"
            key_required = True
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            key_required=key_required,
            http_client=http_client,
            timeout=timeout,
            max_retries=max_retries,
            retry_policy=retry_policy,
            headers=headers,
        )
        self._max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if official else "max_tokens"
        )
        self._stream_usage = stream_usage

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _parse(self, payload: Any) -> ChatResponse:
        return completion_response(payload)

    def _stream_state(self) -> _StreamState:
        return _StreamState()

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        options = request.options
        body: dict[str, Any] = {
            "model": options.model or self.model_name,
            "messages": wire_messages(request.messages),
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.definition.name,
                        "description": t.definition.description,
                        "parameters": plain(t.definition.parameters),
                    },
                }
                for t in request.tools
            ]
            if options.tool_choice is not None:
                body["tool_choice"] = wire_tool_choice(options.tool_choice)
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.max_tokens is not None:
            body[self._max_tokens_param] = options.max_tokens
        if options.stop:
            body["stop"] = list(options.stop)
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(plain(options.extra))
        return body


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as they are; a tool's name as a named function choice."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def wire_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Core messages as Chat Completions messages."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            wire.append(item)
        elif isinstance(message, ToolMessage):
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


def build_response(
    message: AssistantMessage,
    finish_reason: str | None,
    usage: Usage,
    *,
    response_id: str | None,
    model: str | None,
) -> ChatResponse:
    """The response both the call and the stream path end with: one place to normalize."""
    reason = _FINISH_REASONS.get(finish_reason or "", finish_reason or "stop")
    if message.tool_calls and reason == "stop":
        reason = "tool_calls"
    return ChatResponse(
        message=message, finish_reason=reason, usage=usage, id=response_id, model=model
    )


def wire_usage(payload: Any) -> Usage:
    """Chat Completions `usage` as core `Usage` (cached tokens are part of the input)."""
    if not isinstance(payload, Mapping):
        return Usage(requests=1)
    details = payload.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=int(payload.get("prompt_tokens") or 0),
        output_tokens=int(payload.get("completion_tokens") or 0),
        cached_tokens=int(cached or 0),
        requests=1,
    )


def completion_response(payload: Mapping[str, Any]) -> ChatResponse:
    """A `chat.completion` object as a `ChatResponse`."""
    if "error" in payload and "choices" not in payload:
        raise _payload_error(payload)
    choice = payload["choices"][0]
    wire = choice.get("message") or {}
    content = wire.get("content")
    if content is None and isinstance(wire.get("refusal"), str):
        content = wire["refusal"]
    calls = unique_tool_calls(
        tuple(
            ToolCall(
                id=call.get("id") or new_call_id(),
                name=call["function"]["name"],
                arguments=call["function"].get("arguments") or "{}",
            )
            for call in wire.get("tool_calls") or ()
        )
    )
    message = AssistantMessage(content=content or None, tool_calls=calls)
    reason = choice.get("finish_reason")
    if reason is None and wire.get("refusal"):
        reason = "content_filter"
    return build_response(
        message,
        reason,
        wire_usage(payload.get("usage")),
        response_id=payload.get("id"),
        model=payload.get("model"),
    )


def _payload_error(payload: Mapping[str, Any]) -> ProviderError:
    error = payload.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    message = f"openai: {error_message(payload) or 'error in the response'}"
    if isinstance(code, int) and 400 <= code < 600:
        return error_for_status(code, message, provider="openai", body=json.dumps(payload))
    return ProviderError(message, body=json.dumps(payload), provider="openai")


class _StreamState:
    """What a Chat Completions stream has delivered so far."""

    __slots__ = ("assembler", "done", "finish_reason", "id", "model", "usage")

    def __init__(self) -> None:
        self.assembler = StreamAssembler()
        self.done = False
        self.finish_reason: str | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.usage = Usage(requests=1)

    def receive(self, data: str) -> list[TextDelta | ToolCallDelta]:
        """Take one event's data; return the deltas it carries."""
        if self.done:
            return []
        if data.strip() == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise StreamInterruptedError(f"openai: malformed JSON in the stream: {exc}") from exc
        if not isinstance(chunk, dict):
            raise StreamInterruptedError("openai: a stream event is not a JSON object")
        if "error" in chunk:
            raise _payload_error(chunk)
        try:
            return self._chunk(chunk)
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise StreamInterruptedError(
                f"openai: unexpected stream chunk ({type(exc).__name__}: {exc})"
            ) from exc

    def _chunk(self, chunk: Mapping[str, Any]) -> list[TextDelta | ToolCallDelta]:
        self.id = self.id or chunk.get("id")
        self.model = self.model or chunk.get("model")
        if chunk.get("usage"):
            self.usage = wire_usage(chunk["usage"])
        deltas: list[TextDelta | ToolCallDelta] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text is None and isinstance(delta.get("refusal"), str):
                text = delta["refusal"]
            if text:
                deltas.append(TextDelta(text))
            deltas.extend(_tool_deltas(delta.get("tool_calls") or ()))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        for item in deltas:
            self.assembler.add(item)
        return deltas

    def response(self) -> ChatResponse:
        """The final response; raises if the stream ended before it was complete."""
        if not self.done and self.finish_reason is None:
            raise StreamInterruptedError("openai: the stream ended before its final event")
        return build_response(
            self.assembler.message(),
            self.finish_reason,
            self.usage,
            response_id=self.id,
            model=self.model,
        )


def _tool_deltas(calls: Sequence[Mapping[str, Any]]) -> list[ToolCallDelta]:
    deltas = []
    for position, call in enumerate(calls):
        function = call.get("function") or {}
        index = call.get("index")
        deltas.append(
            ToolCallDelta(
                index=index if isinstance(index, int) else position,
                id=call.get("id") or None,
                name=function.get("name") or None,
                arguments=function.get("arguments") or "",
            )
        )
    return deltas
