"""`AnthropicChatModel`: Anthropic's Messages API.

Wire notes:
- System messages go to the top-level `system` field, joined by blank lines, wherever
  they stand in the transcript (the API has no system role).
- Messages of the same wire role in a row are merged into one message of content blocks:
  consecutive tool results become ONE user message of `tool_result` blocks (with
  `is_error`), followed by any user text.
- Tool-call arguments are sent as JSON objects (`tool_use.input`). Arguments that are not
  a JSON object (malformed JSON the model wrote) are not dropped: they are sent as
  `{"_raw_arguments": "<the text>"}`, so the model sees what it wrote next to the error.
- Empty text is never sent (the API rejects empty text blocks); an assistant message with
  neither text nor tool calls is left out.
- Usage: `input_tokens` counts all input, cache reads and writes included; cache reads are
  also reported as `cached_tokens` (`cached_input_tokens`), cache writes as
  `cache_write_tokens`; `output_tokens_details.thinking_tokens` as `reasoning_tokens`.
- Prompt caching: `cache_control` breakpoints on the tools, the system prompt (then sent
  as a list of text blocks), the history and the request's end (`anthropic_cache.py`).
- Tool-call arguments in the final response are compact JSON on both paths, so a call and
  a stream of the same answer give equal responses.
- Content parts: images are `image` blocks (base64 or URL source), documents `document`
  blocks (a PDF as base64, `text/plain` as text; the part's name is the title), in user
  messages and in `tool_result` content alike.
- Thinking: `thinking` blocks (with `signature`) and `redacted_thinking` blocks (with
  `data`) become `ReasoningPart`s of the answer (provider `"anthropic"`), in order; any
  other field of the block is kept in the part's `provider_data`. They are sent back
  unchanged, in their place before the text and the `tool_use` blocks, as the API
  requires within a tool loop. Streamed `thinking_delta`s are yielded as `ReasoningDelta`
  (never as text) and `signature_delta`s assembled into the part. Reasoning parts from
  another provider (or none) are not sent: their signatures mean nothing here.
- Server tool blocks (what the API ran itself: `server_tool_use` and its result, such as
  the `tool_search_tool_result` of tool search, `ToolSearchAdvisor(native=...)`) are no
  calls of ours: they are kept as they came in the message's
  `provider_data["anthropic"]["server_blocks"]`, each with the length of answer text
  before it, and sent back unchanged in their place on the next round, as the API needs
  them. A server tool's streamed input is assembled (at most `MAX_SERVER_INPUT_CHARS`).
- A stream is complete once `message_stop` (or a `stop_reason`) arrived, and nothing after
  `message_stop` is waited for; an `error` event (whatever its data) raises the matching
  `ProviderError`; unknown event types are ignored, as the API asks. Each `tool_use` block
  starts a new call, even at a content-block index already used.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any, Unpack

from ..core.arguments import ArgumentsError, parse_argument_object, parse_arguments
from ..core.assembly import StreamAssembler
from ..core.call_ids import unique_tool_calls
from ..core.errors import StreamInterruptedError
from ..core.events import ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ..core.messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage
from ..core.options import ChatOptions, OutputSchema
from ..core.parts import (
    ContentPart,
    DocumentPart,
    ImagePart,
    ReasoningPart,
    TextPart,
    assistant_content,
)
from ..core.response import ChatResponse
from ..core.usage import Usage
from ._structured import anthropic_output_config, anthropic_supports
from .anthropic_cache import PromptCache, place_breakpoints
from .anthropic_tool_search import ANTHROPIC_SEARCH_TOOLS, anthropic_tool_search
from .errors import BadRequestError, ProviderError
from .http.connection import Connection, ConnectionOptions, OfficialAPI
from .http.error_mapping import error_for_status, error_type_for_code
from .http.json_values import PARSE_ERRORS, json_dumps, json_excerpt, plain, token_count
from .http_model import HTTPChatModel
from .native_compaction import ANTHROPIC_BETAS, native_compaction
from .wire import WireCall, WireFormat, event_object, merge_extra

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_API = OfficialAPI(
    url=ANTHROPIC_BASE_URL,
    key_env="ANTHROPIC_API_KEY",
    url_env="ANTHROPIC_BASE_URL",
    key_everywhere=True,
)
"""Anthropic's own API; its key is read (and required) whatever the base URL."""
"""The official API's base URL."""

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent."""

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""The `tool_use.input` key that carries arguments which are not a JSON object."""

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

_ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicWire(WireFormat):
    """The Messages API wire format: `POST {base_url}/v1/messages`.

    The API requires `max_tokens`: `ChatOptions.max_tokens` when set, else `max_tokens`.
    `thinking` is sent as the body's `thinking` (extended thinking; see
    `AnthropicChatModel`); `prompt_cache` places `cache_control` breakpoints
    (`providers/anthropic_cache.py`), `None` places none.
    """

    provider = "anthropic"
    endpoint = "/v1/messages"
    native_tool_search = frozenset(ANTHROPIC_SEARCH_TOOLS)
    official = ANTHROPIC_API

    def __init__(
        self,
        *,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        prompt_cache: PromptCache | None = None,
    ) -> None:
        self.thinking = check_thinking(thinking, max_tokens)
        self.max_tokens = max_tokens
        self.prompt_cache = prompt_cache

    def __repr__(self) -> str:
        return (
            f"AnthropicWire(max_tokens={self.max_tokens!r}, thinking={self.thinking!r}, "
            f"prompt_cache={self.prompt_cache!r})"
        )

    def headers(self, call: WireCall, api_key: str | None) -> dict[str, str]:
        headers = {"x-api-key": api_key or "", "anthropic-version": ANTHROPIC_VERSION}
        if native_compaction(call.request.options, "anthropic") is not None:
            headers["anthropic-beta"] = ANTHROPIC_BETAS
        return headers

    def parse(self, payload: Any) -> ChatResponse:
        return message_response(payload)

    def stream_reader(self) -> _StreamState:
        return _StreamState()

    def body(self, call: WireCall) -> dict[str, Any]:
        request, options = call.request, call.request.options
        system, messages = wire_messages(request.messages)
        body: dict[str, Any] = {
            "model": call.model,
            "max_tokens": options.max_tokens or self.max_tokens,
            "messages": messages,
        }
        if self.thinking is not None:
            body["thinking"] = self._thinking_for(options, body["max_tokens"])
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {
                    "name": t.definition.name,
                    "description": t.definition.description,
                    "input_schema": plain(t.definition.parameters),
                }
                for t in request.tools
            ]
            choice = wire_tool_choice(options)
            if choice is not None:
                body["tool_choice"] = choice
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.stop:
            body["stop_sequences"] = list(options.stop)
        if call.stream:
            body["stream"] = True
        body = merge_extra(body, options.extra)
        native = native_compaction(options, "anthropic")  # CompactionAdvisor(native=...)
        if native is not None:
            body["context_management"] = native
        if options.output_schema is not None:
            output = anthropic_output_config(options.output_schema, body.get("output_config"))
            body["output_config"] = output
        if options.native_tool_search is not None:  # ToolSearchAdvisor(native=...)
            anthropic_tool_search(body, options.native_tool_search)
        if self.prompt_cache is not None:
            place_breakpoints(body, self.prompt_cache)
        return body

    def _thinking_for(self, options: ChatOptions, max_tokens: int) -> dict[str, Any]:
        """The `thinking` field, checked against this request's options: the API refuses
        forced tool use with thinking on, and a budget not below `max_tokens`."""
        assert self.thinking is not None
        thinking = dict(self.thinking)
        if thinking.get("type") == "disabled":
            return thinking
        if options.tool_choice not in (None, "auto", "none"):
            raise BadRequestError(
                f"anthropic: tool_choice {options.tool_choice!r} forces tool use, which the "
                "API refuses with thinking on: use 'auto' or 'none', or turn thinking off",
                provider="anthropic",
            )
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and budget >= max_tokens:
            raise BadRequestError(
                f"anthropic: the thinking budget ({budget} tokens) must be below max_tokens "
                f"({max_tokens})",
                provider="anthropic",
            )
        return thinking


THINKING_MIN_BUDGET = 1024
"""The smallest `budget_tokens` the API accepts."""


def check_thinking(thinking: Mapping[str, Any] | None, max_tokens: int) -> dict[str, Any] | None:
    """`thinking` as sent, after the checks the API would make; raises `ValueError`."""
    if thinking is None:
        return None
    if not isinstance(thinking, Mapping):
        raise ValueError(f"thinking must be a mapping such as {_THINKING_EXAMPLE}")
    value = dict(plain(thinking))
    kind = value.get("type")
    if kind not in ("enabled", "adaptive", "disabled"):
        raise ValueError(
            f"thinking type must be 'enabled', 'adaptive' or 'disabled', not {kind!r} "
            f"(e.g. {_THINKING_EXAMPLE})"
        )
    if kind == "enabled":
        budget = value.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise ValueError(f"thinking needs an integer budget_tokens (e.g. {_THINKING_EXAMPLE})")
        if not THINKING_MIN_BUDGET <= budget < max_tokens:
            raise ValueError(
                f"thinking budget_tokens must be at least {THINKING_MIN_BUDGET} and below "
                f"max_tokens ({max_tokens}), not {budget}"
            )
    return value


_THINKING_EXAMPLE = '{"type": "enabled", "budget_tokens": 2048}'


class AnthropicChatModel(HTTPChatModel):
    """A chat model behind `POST {base_url}/v1/messages` (`AnthropicWire`).

    How it connects is a `Connection` (`connection=`, and/or its fields as keywords,
    applied over it; `ANTHROPIC_API`): the API key is `api_key`, else `ANTHROPIC_API_KEY`
    (or the variable `api_key_env` names), read at the first call and required whatever
    the URL; the base URL is `base_url`, else `ANTHROPIC_BASE_URL`, else the official
    API. The API requires `max_tokens`: `ChatOptions.max_tokens` when set, else the
    `max_tokens` given here.
    `headers` are added to every request (for `anthropic-beta`, say).

    `thinking` turns on extended thinking for every request:
    `{"type": "enabled", "budget_tokens": N}` (N at least 1,024 and below `max_tokens`;
    checked here, raising `ValueError`), `{"type": "adaptive"}` for models that choose
    their own budget, optionally with `"display": "omitted"`. Thinking blocks come back as
    `ReasoningPart`s and are returned unchanged before `tool_use` on the next round. With
    thinking on, a forcing `tool_choice` (`"required"`, a tool's name) raises
    `BadRequestError` before anything is sent: the API refuses it.

    `prompt_cache` places `cache_control` breakpoints on the stable prefix of every
    request (tools, system, the history, the request's end: see
    `providers/anthropic_cache.py`); pass a `PromptCache` to choose them or set a `ttl`,
    `False` to place none. Cached tokens come back as `usage.cached_input_tokens`.

    Use it as an async context manager, or call `aclose()`, to close the HTTP client it
    creates; an injected `http_client` is left open.
    """

    wire: AnthropicWire

    def __init__(
        self,
        model: str,
        *,
        connection: Connection | None = None,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        prompt_cache: PromptCache | bool = True,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        if prompt_cache is True:
            prompt_cache = PromptCache()
        wire = AnthropicWire(
            max_tokens=max_tokens, thinking=thinking, prompt_cache=prompt_cache or None
        )
        super().__init__(model, wire=wire, connection=Connection.of(connection, options))

    @property
    def max_tokens(self) -> int:
        """`max_tokens` sent when `ChatOptions.max_tokens` is not set."""
        return self.wire.max_tokens

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """Whether the API can take `schema` as `output_config` (`providers._structured`)."""
        return anthropic_supports(schema)


def wire_tool_choice(options: ChatOptions) -> dict[str, Any] | None:
    """`tool_choice` for the options: auto/none/required(any)/a named tool, and parallelism."""
    choice = options.tool_choice
    if choice == "none":
        return {"type": "none"}
    if choice is None and options.parallel_tool_calls is not False:
        return None
    if choice is None or choice == "auto":
        wire: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        wire = {"type": "any"}
    else:
        wire = {"type": "tool", "name": choice}
    if options.parallel_tool_calls is False:
        wire["disable_parallel_tool_use"] = True
    return wire


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's raw argument text as a `tool_use.input` object (see the module's notes)."""
    value = parse_argument_object(arguments)
    return value if value is not None else {RAW_ARGUMENTS_KEY: arguments}


def wire_messages(messages: Iterable[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Core messages as the `system` text and the Messages API's `messages`."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, SystemMessage):
            system.append(message.content)
        elif isinstance(message, AssistantMessage):
            blocks = with_server_blocks(content_blocks(message.parts), message.provider_data)
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": tool_input(call.arguments),
                }
                for call in message.tool_calls
            )
            add("assistant", blocks)
        elif isinstance(message, ToolMessage):
            content = message.content
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id,
                        "content": content if isinstance(content, str) else content_blocks(content),
                        "is_error": message.is_error,
                    }
                ],
            )
        else:
            add("user", content_blocks(message.parts))
    return "\n\n".join(system), wire


def content_blocks(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    """Content parts as Messages API content blocks (empty text and foreign reasoning left out)."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append({"type": "image", "source": _image_source(part)})
        elif isinstance(part, DocumentPart):
            blocks.append(_document_block(part))
        else:
            block = thinking_block(part)
            if block is not None:
                blocks.append(block)
    return blocks


def _image_source(part: ImagePart) -> dict[str, Any]:
    if part.url is not None:
        return {"type": "url", "url": part.url}
    assert part.data is not None
    return {
        "type": "base64",
        "media_type": part.media_type,
        "data": base64.b64encode(part.data).decode("ascii"),
    }


def _document_block(part: DocumentPart) -> dict[str, Any]:
    source: dict[str, Any]
    if part.media_type == "text/plain":
        source = {
            "type": "text",
            "media_type": "text/plain",
            "data": part.data.decode("utf-8", "replace"),
        }
    else:
        source = {
            "type": "base64",
            "media_type": part.media_type,
            "data": base64.b64encode(part.data).decode("ascii"),
        }
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.name:
        block["title"] = part.name
    return block


def thinking_block(part: ReasoningPart) -> dict[str, Any] | None:
    """A reasoning part as the `thinking`/`redacted_thinking` block it was read from;
    `None` for reasoning another provider produced."""
    if part.provider != "anthropic":
        return None
    extra = dict(part.provider_data or {})
    if extra.get("type") == "redacted_thinking":
        return extra
    block: dict[str, Any] = {"type": "thinking", "thinking": part.text}
    if part.signature is not None:
        block["signature"] = part.signature
    block.update(extra)
    return block


def reasoning_part(block: Mapping[str, Any]) -> ReasoningPart:
    """A `thinking` or `redacted_thinking` block as a `ReasoningPart` (see `thinking_block`)."""
    if block.get("type") == "redacted_thinking":
        return ReasoningPart(provider="anthropic", provider_data=dict(block))
    extra = {k: v for k, v in block.items() if k not in _THINKING_KEYS}
    return ReasoningPart(
        text=block.get("thinking") or "",
        signature=block.get("signature") or None,
        provider="anthropic",
        provider_data=extra or None,
    )


_THINKING_KEYS = frozenset({"type", "thinking", "signature"})


def build_response(
    message: AssistantMessage,
    stop_reason: str | None,
    usage: Usage,
    *,
    response_id: str | None,
    model: str | None,
) -> ChatResponse:
    """The response both the call and the stream path end with: one place to normalize."""
    calls = tuple(
        call.model_copy(update={"arguments": _compact(call.arguments)})
        for call in message.tool_calls
    )
    if calls != message.tool_calls:
        message = message.model_copy(update={"tool_calls": calls})
    reason = _FINISH_REASONS.get(stop_reason or "", stop_reason or "stop")
    return ChatResponse(
        message=message, finish_reason=reason, usage=usage, id=response_id, model=model
    )


def _compact(arguments: str) -> str:
    try:
        return json_dumps(parse_arguments(arguments)) if arguments.strip() else arguments
    except ArgumentsError:
        return arguments


def wire_usage(payload: Any, base: Usage | None = None) -> Usage:
    """Messages API `usage` as core `Usage`; fields missing from `payload` keep `base`'s."""
    base = base or Usage(requests=1)
    if not isinstance(payload, Mapping):
        return base

    def field(name: str) -> int | None:
        value = payload.get(name)
        return token_count(value) if isinstance(value, (int, float)) else None

    fresh, output = field("input_tokens"), field("output_tokens")
    written, read = field("cache_creation_input_tokens"), field("cache_read_input_tokens")
    iterations = _iterations(payload.get("iterations"))
    if iterations is not None:  # server-side compaction: the top level omits its step
        fresh, written, read, output = iterations
    if fresh is None and written is None and read is None:
        input_tokens, cached = base.input_tokens, base.cached_tokens
        cache_write = base.cache_write_tokens
    else:
        input_tokens = (fresh or 0) + (written or 0) + (read or 0)
        cached, cache_write = read or 0, written or 0
    details = payload.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output if output is not None else base.output_tokens,
        cached_tokens=cached,
        requests=1,
        cache_write_tokens=cache_write,
        reasoning_tokens=token_count(thinking) if thinking is not None else base.reasoning_tokens,
    )


def _iterations(value: Any) -> tuple[int, int, int, int] | None:
    """The sums (input, cache written, cache read, output) over a `usage.iterations`
    list. With server-side compaction (`compact_20260112`) the top-level counts leave out
    the summarizing step; the iterations are every sampling step the request was billed
    for, so their sum is what it cost."""
    if not isinstance(value, list) or not value:
        return None
    sums = [0, 0, 0, 0]
    names = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    for step in value:
        if not isinstance(step, Mapping):
            return None
        for i, name in enumerate((*names, "output_tokens")):
            count = step.get(name)
            if isinstance(count, (int, float)):
                sums[i] += token_count(count)
    return sums[0], sums[1], sums[2], sums[3]


def message_response(payload: Mapping[str, Any]) -> ChatResponse:
    """A Messages API `message` object as a `ChatResponse`."""
    if payload.get("type") == "error":
        raise stream_error(payload)
    parts: list[TextPart | ReasoningPart] = []
    calls: list[ToolCall] = []
    server: list[dict[str, Any]] = []
    offset = 0  # characters of answer text so far
    for block in payload["content"]:
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=block["text"]))
            offset += len(block["text"])
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(reasoning_part(block))
        elif kind == "tool_use":
            calls.append(
                ToolCall(id=block["id"], name=block["name"], arguments=json_dumps(block["input"]))
            )
        elif isinstance(kind, str):
            server.append(server_block(block, offset))
    message = AssistantMessage(
        content=assistant_content(parts),
        tool_calls=unique_tool_calls(tuple(calls)),
        provider_data={"anthropic": {SERVER_BLOCKS_KEY: server}} if server else None,
    )
    return build_response(
        message,
        payload.get("stop_reason"),
        wire_usage(payload.get("usage")),
        response_id=payload.get("id"),
        model=payload.get("model"),
    )


def stream_error(payload: Mapping[str, Any]) -> ProviderError:
    """The typed error for an `error` event (or error body) of the Messages API."""
    error = payload.get("error")
    kind = error.get("type") if isinstance(error, Mapping) else None
    detail = error.get("message") if isinstance(error, Mapping) else None
    kind = kind if isinstance(kind, str) else None
    message = f"anthropic: {detail or 'error'} ({kind or 'unknown error type'})"
    status = _ERROR_STATUSES.get(kind or "")
    body = json_excerpt(payload)
    if status is None:
        retryable = error_type_for_code(kind)
        return (retryable or ProviderError)(message, body=body, provider="anthropic")
    return error_for_status(status, message, provider="anthropic", body=body)


SERVER_BLOCKS_KEY = "server_blocks"
"""The key, in an assistant message's `provider_data["anthropic"]`, of the content blocks
the API ran itself (module notes), each `{"offset": n, "block": {...}}`."""

MAX_SERVER_INPUT_CHARS = 1 << 20
"""How much streamed input JSON one server tool call may send (1 MiB)."""


def server_block(block: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """A block the API ran or answered itself (`server_tool_use`, its
    `tool_search_tool_result`, ...), kept as is with the answer-text `offset` it followed."""
    if not isinstance(block, Mapping):
        raise TypeError(f"a content block is a {type(block).__name__}, not an object")
    return {"offset": offset, "block": plain(block)}


def with_server_blocks(
    blocks: list[dict[str, Any]], data: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """An assistant message's content `blocks` with the server blocks its `provider_data`
    keeps put back where they came: each before the text that followed it (a text block
    is split at the block's offset), the rest after the last text. Offsets are clamped:
    an edited text never makes an invalid message."""
    ours = (data or {}).get("anthropic")
    kept = ours.get(SERVER_BLOCKS_KEY) if isinstance(ours, Mapping) else None
    server = [
        (entry["offset"], dict(entry["block"]))
        for entry in kept or ()
        if isinstance(entry, Mapping)
        and isinstance(entry.get("offset"), int)
        and isinstance(entry.get("block"), Mapping)
    ]
    if not server:
        return blocks
    out: list[dict[str, Any]] = []
    chars, i = 0, 0
    for block in blocks:
        if block.get("type") != "text":
            out.append(block)
            continue
        text, start = block["text"], 0
        while i < len(server) and server[i][0] - chars < len(text):
            cut = min(max(server[i][0] - chars, start), len(text))
            if cut > start:
                out.append({"type": "text", "text": text[start:cut]})
            start = cut
            out.append(server[i][1])
            i += 1
        if start < len(text):
            out.append({"type": "text", "text": text[start:]})
        chars += len(text)
    out.extend(block for _, block in server[i:])
    return out


class _StreamState:
    """What a Messages stream has delivered so far."""

    __slots__ = (
        "assembler",
        "blocks",
        "calls",
        "done",
        "id",
        "model",
        "reasoning",
        "server",
        "stop_reason",
        "text",
        "usage",
    )

    def __init__(self) -> None:
        self.assembler = StreamAssembler()
        self.blocks: dict[int, int] = {}  # content block index -> tool-call index
        self.reasoning: dict[int, int] = {}  # content block index -> reasoning part index
        self.calls = 0  # tool calls started (a repeated block index still starts a new one)
        self.done = False
        self.id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage = Usage(requests=1)
        self.text = 0  # characters of answer text so far
        # server blocks in order: (offset, block, its streamed input JSON pieces)
        self.server: list[tuple[int, dict[str, Any], list[str]]] = []

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        """Take one event's data; return the deltas it carries."""
        if self.done:
            return []
        payload = event_object(data, event, provider="anthropic")
        if payload.get("type") == "error" or event == "error":
            raise stream_error(payload)
        try:
            deltas = self._event(payload)
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"anthropic: unexpected stream event ({type(exc).__name__}: {exc})"
            ) from exc
        for delta in deltas:
            self.assembler.add(delta)
            if isinstance(delta, TextDelta):
                self.text += len(delta.text)
        return deltas

    def _event(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        kind = event.get("type")
        if kind == "message_start":
            message = event["message"]
            self.id = message.get("id")
            self.model = message.get("model")
            self.usage = wire_usage(message.get("usage"), self.usage)
        elif kind == "content_block_start":
            block = event["content_block"]
            if block.get("type") == "text" and block.get("text"):
                return [TextDelta(block["text"])]
            if block.get("type") == "tool_use":
                index = self.blocks[event["index"]] = self.calls
                self.calls += 1
                start = block.get("input")
                arguments = json_dumps(start) if start else ""
                return [ToolCallDelta(index, block["id"], block["name"], arguments)]
            if block.get("type") in ("thinking", "redacted_thinking"):
                return self._thinking_start(event["index"], block)
            if block.get("type") not in ("text", "tool_use", "thinking", "redacted_thinking"):
                # run (or answered) by the API, not a call of ours: kept for the next round
                self.blocks[event["index"]] = -1 - len(self.server)
                self.server.append((self.text, plain(block), []))
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta.get("type") == "text_delta" and delta["text"]:
                return [TextDelta(delta["text"])]
            if delta.get("type") == "input_json_delta" and delta["partial_json"]:
                if self.blocks[event["index"]] < 0:  # a server tool's input (tool search)
                    self._server_input(-1 - self.blocks[event["index"]], delta["partial_json"])
                    return []
                return [ToolCallDelta(self.blocks[event["index"]], arguments=delta["partial_json"])]
            if delta.get("type") == "compaction_delta" and self.blocks.get(event["index"], 0) < 0:
                self._compaction_delta(-1 - self.blocks[event["index"]], delta)
                return []
            if delta.get("type") == "thinking_delta" and delta["thinking"]:
                return [ReasoningDelta(delta["thinking"], self.reasoning[event["index"]])]
            if delta.get("type") == "signature_delta":
                index = self.reasoning[event["index"]]
                self.assembler.reasoning_detail(index, signature=delta["signature"])
        elif kind == "message_delta":
            self.stop_reason = event.get("delta", {}).get("stop_reason") or self.stop_reason
            self.usage = wire_usage(event.get("usage"), self.usage)
        elif kind == "message_stop":
            self.done = True
        return []

    def _server_input(self, index: int, piece: str) -> None:
        pieces = self.server[index][2]
        if not isinstance(piece, str):
            raise TypeError("partial_json is not a string")
        if sum(map(len, pieces)) + len(piece) > MAX_SERVER_INPUT_CHARS:
            raise StreamInterruptedError(
                f"anthropic: a server tool's input is over {MAX_SERVER_INPUT_CHARS} characters"
            )
        pieces.append(piece)

    def _compaction_delta(self, index: int, delta: Mapping[str, Any]) -> None:
        """A streamed `compaction` block's summary (and its opaque fields), assembled."""
        block = self.server[index][1]
        content = delta.get("content")
        if isinstance(content, str):
            block["content"] = (block.get("content") or "") + content
        for key, value in delta.items():
            if key not in ("type", "content") and value is not None:
                block[key] = value

    def _server_blocks(self) -> list[dict[str, Any]]:
        """The server blocks received, their streamed input assembled."""
        kept = []
        for offset, block, pieces in self.server:
            if pieces:
                block = {**block, "input": json.loads("".join(pieces))}
            kept.append({"offset": offset, "block": block})
        return kept

    def _thinking_start(self, block_index: int, block: Mapping[str, Any]) -> list[ModelDelta]:
        """Open a reasoning part for a `thinking`/`redacted_thinking` block."""
        index = self.reasoning[block_index] = len(self.reasoning)
        start = reasoning_part(block)
        self.assembler.reasoning_detail(
            index,
            signature=start.signature,
            provider=start.provider,
            provider_data=start.provider_data,
        )
        return [ReasoningDelta(start.text, index)] if start.text else []

    def response(self) -> ChatResponse:
        """The final response; raises if the stream ended before it was complete."""
        if not self.done and self.stop_reason is None:
            raise StreamInterruptedError("anthropic: the stream ended before its final event")
        try:
            message = self.assembler.message()
            if self.server:
                data = {"anthropic": {SERVER_BLOCKS_KEY: self._server_blocks()}}
                message = message.model_copy(update={"provider_data": data})
            return build_response(
                message,
                self.stop_reason,
                self.usage,
                response_id=self.id,
                model=self.model,
            )
        except StreamInterruptedError:
            raise
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"anthropic: the streamed response is invalid ({type(exc).__name__}: {exc})"
            ) from exc


__all__ = [
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_VERSION",
    "MAX_SERVER_INPUT_CHARS",
    "RAW_ARGUMENTS_KEY",
    "SERVER_BLOCKS_KEY",
    "THINKING_MIN_BUDGET",
    "AnthropicChatModel",
    "AnthropicWire",
    "build_response",
    "check_thinking",
    "content_blocks",
    "message_response",
    "reasoning_part",
    "server_block",
    "stream_error",
    "thinking_block",
    "tool_input",
    "wire_messages",
    "wire_tool_choice",
    "wire_usage",
    "with_server_blocks",
]
