"""`GeminiChatModel`: the Gemini API (`generateContent`, `streamGenerateContent?alt=sse`).

`GeminiWire` is the wire format (`providers/wire.py`); `GeminiChatModel` is
`HTTPChatModel` with it and Google's defaults.

Wire notes:
- URL: `{base_url}/models/{model}:generateContent`, streamed
  `{base_url}/models/{model}:streamGenerateContent?alt=sse`. The API key goes in the
  `x-goog-api-key` header, never in the URL (where it would reach proxies and logs).
- Contents: system messages are joined into `systemInstruction`; user messages are `user`
  contents (`text`, images and documents as `inlineData`, an image URL as `fileData`);
  assistant messages are `model` contents: reasoning parts of this provider as thought
  parts (`thought: true`, with their `thoughtSignature`), the text, then one
  `functionCall` part per tool call. The tool results of one round are one `user`
  content of `functionResponse` parts, `{"output": text}` (`{"error": text}` for a failed
  tool), with images and documents in the response's `parts` (Gemini 3's multimodal
  function responses).
- Ids: a `functionCall.id` the API gave is the call's id and is sent back in the call and
  its `functionResponse`, as are the ids of calls from other providers' rounds; where the
  API gives none, the call gets a local id (`gemini_local_...`) that is never sent.
- Thought signatures are sent back unchanged, where they came: on a function call (kept
  in the call's `provider_data["gemini"]`), on a thought part (the `ReasoningPart`'s
  `signature`), or on the answer's text (the message's `provider_data["gemini"]`, sent on
  its last text part).
- Tools: `functionDeclarations`, each tool's JSON Schema translated by `gemini_schema`
  (`providers/gemini_schema.py`) to
  the OpenAPI subset `parameters` takes (see there for what is dropped), or sent as is in
  `parametersJsonSchema` with `schema_mode="json_schema"`. `tool_choice` is
  `toolConfig.functionCallingConfig` (`auto`: AUTO, `none`: NONE, `required`: ANY, a
  name: ANY with `allowedFunctionNames`); Gemini has no `parallel_tool_calls` switch,
  so that option is not sent.
- Options go to `generationConfig` (`temperature`, `topP`, `maxOutputTokens`,
  `stopSequences`, `thinkingConfig` from the `thinking` setting); `ChatOptions.extra` is
  merged into the body last, mappings one level deep (so `{"generationConfig": {...}}`
  adds to the generated one). Structured output: `response_format(schema)`.
- Answers: candidate 0 is read. Finish reasons: STOP is `stop` (`tool_calls` with
  function calls), MAX_TOKENS `length`, the safety family (SAFETY, RECITATION, BLOCKLIST,
  PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, ...) `content_filter`, others lower-cased. A
  prompt blocked before any candidate (`promptFeedback.blockReason`) is an empty answer
  with `content_filter`. Parts of other kinds (code execution, images) are kept in the
  message's `provider_data` and sent back after its text.
- Usage: input is `promptTokenCount` plus `toolUsePromptTokenCount`; output is
  `candidatesTokenCount` plus `thoughtsTokenCount` (thoughts are billed as output);
  `cachedContentTokenCount` is `cached_tokens`, `thoughtsTokenCount` `reasoning_tokens`.
- Errors: `{"error": {"code", "message", "status", "details"}}` in a failed response, a
  body or a stream chunk raises the `ProviderError` its body names (`error_type`: a bad
  key, 400 `INVALID_ARGUMENT` with the reason `API_KEY_INVALID`, is an
  `AuthenticationError`), else the one of its `code`.
- Streams: every event is a partial `GenerateContentResponse`; text and thought parts
  are `TextDelta`s and `ReasoningDelta`s, each `functionCall` part one complete
  `ToolCallDelta`. The Gemini API streams no partial call arguments (`partialArgs`,
  `willContinue` and `streamFunctionCallArguments` are Vertex AI's only, per the
  `google-genai` types); a call that comes in pieces raises a typed error naming them.
  There is no end marker: the stream is complete once a chunk carried a `finishReason`
  (or a blocked prompt); the final response is the chunks merged and read as a call's
  answer is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Unpack
from urllib.parse import quote

from ..core.arguments import ArgumentsError, parse_arguments
from ..core.errors import ChainConfigurationError, StreamInterruptedError
from ..core.events import ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ..core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    new_call_id,
)
from ..core.options import OutputSchema
from ..core.parts import (
    ContentPart,
    DocumentPart,
    ImagePart,
    ReasoningPart,
    TextPart,
    assistant_content,
)
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.usage import Usage
from .errors import AuthenticationError, ProviderError, ProviderUnavailableError, RateLimitError
from .gemini_schema import SchemaMode, function_declaration
from .http.connection import Connection, ConnectionOptions, OfficialAPI
from .http.error_mapping import error_for_status, error_message, error_type_for_code
from .http.json_values import PARSE_ERRORS, json_dumps, json_excerpt, plain, token_count
from .http_model import HTTPChatModel
from .wire import WireCall, WireFormat, event_object

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
GEMINI_API = OfficialAPI(url=GEMINI_BASE_URL, key_env="GEMINI_API_KEY")
"""Google's Gemini API (`v1beta`); no variable moves its URL."""
"""The Gemini API's base URL."""

PROVIDER = "gemini"
"""The key of this provider's `provider_data`, and the `provider` of its reasoning parts."""

LOCAL_ID_PREFIX = "gemini_local_"
"""How the ids given to calls the API sent without one begin: those are never sent."""

_FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "MODEL_ARMOR": "content_filter",
}

_TOOL_CHOICE = {"auto": "AUTO", "none": "NONE", "required": "ANY"}

AUTHENTICATION_REASONS = frozenset(
    {
        "API_KEY_INVALID",
        "API_KEY_SERVICE_BLOCKED",
        "API_KEY_HTTP_REFERRER_BLOCKED",
        "API_KEY_IP_ADDRESS_BLOCKED",
        "API_KEY_ANDROID_APP_BLOCKED",
        "API_KEY_IOS_APP_BLOCKED",
        "ACCESS_TOKEN_EXPIRED",
        "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
        "ACCESS_TOKEN_TYPE_UNSUPPORTED",
        "CREDENTIALS_MISSING",
        "CONSUMER_INVALID",
    }
)
"""`google.rpc.ErrorInfo` reasons (`google/api/error_reason.proto`) that mean the key or
token is at fault, whatever the status: a bad key is 400 `INVALID_ARGUMENT`."""

_STATUS_ERRORS: dict[str, type[ProviderError]] = {
    "UNAUTHENTICATED": AuthenticationError,
    "PERMISSION_DENIED": AuthenticationError,
    "RESOURCE_EXHAUSTED": RateLimitError,
    "UNAVAILABLE": ProviderUnavailableError,
    "DEADLINE_EXCEEDED": ProviderUnavailableError,
}


class GeminiWire(WireFormat):
    """The Gemini API's wire format (module notes).

    `schema_mode` says how tool schemas are sent (`"openapi"`: translated by
    `gemini_schema` into `parameters`; `"json_schema"`: as is, in `parametersJsonSchema`);
    `thinking` is `generationConfig.thinkingConfig` (`{"includeThoughts": True,
    "thinkingBudget": 1024}`, say).
    """

    provider = PROVIDER
    official = GEMINI_API

    def __init__(
        self, *, schema_mode: SchemaMode = "openapi", thinking: Mapping[str, Any] | None = None
    ) -> None:
        if schema_mode not in ("openapi", "json_schema"):
            raise ValueError("schema_mode must be 'openapi' or 'json_schema'")
        self.schema_mode: SchemaMode = schema_mode
        self.thinking = dict(thinking) if thinking else None

    def __repr__(self) -> str:
        return f"GeminiWire(schema_mode={self.schema_mode!r}, thinking={self.thinking!r})"

    def url(self, call: WireCall) -> str:
        return request_url(call.base_url, call.model, stream=call.stream)

    def headers(self, call: WireCall, api_key: str | None) -> dict[str, str]:
        return request_headers(api_key)

    def body(self, call: WireCall) -> dict[str, Any]:
        return request_body(call.request, schema_mode=self.schema_mode, thinking=self.thinking)

    def parse(self, payload: Any) -> ChatResponse:
        if not isinstance(payload, Mapping):
            raise TypeError("the response is not an object")
        return response_from_payload(payload)

    def stream_reader(self) -> GeminiStreamReader:
        return GeminiStreamReader()

    def error_type(self, status: int, payload: Any) -> type[ProviderError] | None:
        return error_type(payload)


class GeminiChatModel(HTTPChatModel):
    """A Gemini model behind the Gemini API (`GeminiWire`).

    How it connects is a `Connection` (`connection=`, and/or its fields as keywords,
    applied over it; `GEMINI_API`): `base_url` defaults to `GEMINI_BASE_URL` (the
    official API, `v1beta`). The key is
    `api_key`, else the variable `api_key_env` names (by default `GEMINI_API_KEY`, but
    not when `base_url` is passed explicitly), read at the first call and required by
    the official API; it is sent in the `x-goog-api-key` header only. `schema_mode` and
    `thinking` go to the wire format. Thought signatures come back with the calls,
    thoughts and text they belong to and are sent back unchanged on the next round.

    Use it as an async context manager, or call `aclose()`, to close the HTTP client it
    creates; an injected `http_client` is left open.
    """

    wire: GeminiWire

    def __init__(
        self,
        model: str,
        *,
        connection: Connection | None = None,
        schema_mode: SchemaMode = "openapi",
        thinking: Mapping[str, Any] | None = None,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(
            model,
            wire=GeminiWire(schema_mode=schema_mode, thinking=thinking),
            connection=Connection.of(connection, options),
        )

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """`generationConfig.responseJsonSchema`, on requests without tools only."""
        return not with_tools


# --- requests --------------------------------------------------------------------------


def model_path(model: str) -> str:
    """`models/{model}` with the model's name quoted (a leading `models/` is accepted)."""
    return "models/" + quote(model.removeprefix("models/"), safe="-._~")


def request_url(base_url: str, model: str, *, stream: bool) -> str:
    """The URL of one call or stream (no key in it: the key goes in `x-goog-api-key`)."""
    verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{base_url.rstrip('/')}/{model_path(model)}:{verb}"


def request_headers(api_key: str | None) -> dict[str, str]:
    """The key in `x-goog-api-key`; nothing without a key."""
    return {"x-goog-api-key": api_key} if api_key else {}


def request_body(
    request: ChatRequest,
    *,
    schema_mode: SchemaMode = "openapi",
    thinking: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one `generateContent` request for `request` (module notes)."""
    options = request.options
    system = [m.content for m in request.messages if isinstance(m, SystemMessage) and m.content]
    body: dict[str, Any] = {"contents": contents(request.messages)}
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    function_declaration(
                        t.definition.name,
                        t.definition.description,
                        t.definition.parameters,
                        mode=schema_mode,
                    )
                    for t in request.tools
                ]
            }
        ]
        if options.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _tool_choice(options.tool_choice)}
    config = _generation_config(request, thinking)
    if config:
        body["generationConfig"] = config
    for key, value in plain(options.extra).items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body


def _generation_config(request: ChatRequest, thinking: Mapping[str, Any] | None) -> dict[str, Any]:
    """`generationConfig`: sampling, limits, thinking and the response schema (refused
    beside tools: Gemini takes one only on requests without them)."""
    options = request.options
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.top_p is not None:
        config["topP"] = options.top_p
    if options.max_tokens is not None:
        config["maxOutputTokens"] = options.max_tokens
    if options.stop:
        config["stopSequences"] = list(options.stop)
    if thinking:
        config["thinkingConfig"] = plain(thinking)
    if options.output_schema is not None:
        if request.tools:
            raise ChainConfigurationError(
                "Gemini takes a response schema only on requests without tools; "
                "StructuredOutputAdvisor states the schema in the prompt instead"
            )
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = plain(options.output_schema.schema)
    return config


def _tool_choice(choice: str) -> dict[str, Any]:
    mode = _TOOL_CHOICE.get(choice)
    if mode is not None:
        return {"mode": mode}
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


def _ours(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = (data or {}).get(PROVIDER)
    return value if isinstance(value, Mapping) else {}


def contents(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Core messages (but system messages) as Gemini `contents` (module notes)."""
    wire: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolMessage) and responses:
            wire.append({"role": "user", "parts": responses})
            responses = []
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, AssistantMessage):
            wire.append({"role": "model", "parts": _model_parts(message)})
        elif isinstance(message, ToolMessage):
            responses.append(_function_response(message))
        else:
            content = message.content
            parts = [{"text": content}] if isinstance(content, str) else content_parts(content)
            wire.append({"role": "user", "parts": parts or [{"text": ""}]})
    if responses:
        wire.append({"role": "user", "parts": responses})
    return wire


def content_parts(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    """User content parts as Gemini parts (reasoning is left out)."""
    wire: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                wire.append({"text": part.text})
        elif isinstance(part, (ImagePart, DocumentPart)):
            wire.append(_media(part))
    return wire


def _media(part: ImagePart | DocumentPart) -> dict[str, Any]:
    if isinstance(part, ImagePart) and part.url is not None:
        data: dict[str, Any] = {"fileUri": part.url}
        if part.media_type:
            data["mimeType"] = part.media_type
        return {"fileData": data}
    url = part.data_url()
    return {"inlineData": {"mimeType": part.media_type, "data": url.partition(",")[2]}}


def _model_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    ours = _ours(message.provider_data)
    parts: list[dict[str, Any]] = []
    last_text = -1
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if part.provider != PROVIDER:
                continue
            thought: dict[str, Any] = {"text": part.text, "thought": True}
            if part.signature:
                thought["thoughtSignature"] = part.signature
            parts.append(thought)
        elif isinstance(part, TextPart) and part.text:
            last_text = len(parts)
            parts.append({"text": part.text})
    signature = ours.get("thoughtSignature")
    if isinstance(signature, str) and signature and last_text >= 0:
        parts[last_text]["thoughtSignature"] = signature
    for other in ours.get("parts") or ():
        if isinstance(other, Mapping):
            parts.append(dict(other))
    for call in message.tool_calls:
        call_data = _ours(call.provider_data)
        function: dict[str, Any] = {"name": call.name, "args": _arguments(call.arguments)}
        if not call.id.startswith(LOCAL_ID_PREFIX):
            function["id"] = call.id
        wire: dict[str, Any] = {"functionCall": function}
        if isinstance(call_data.get("thoughtSignature"), str):
            wire["thoughtSignature"] = call_data["thoughtSignature"]
        parts.append(wire)
    return parts or [{"text": ""}]


def _arguments(text: str) -> dict[str, Any]:
    """A call's argument text as the object Gemini takes; text that is not a JSON object
    (a malformed call, answered with an error already) is sent under `"arguments"`."""
    try:
        value = parse_arguments(text)
    except ArgumentsError:  # NaN, Infinity: Python reads them, the request could not hold them
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _function_response(message: ToolMessage) -> dict[str, Any]:
    key = "error" if message.is_error else "output"
    response: dict[str, Any] = {"name": message.name, "response": {key: message.text}}
    if not message.tool_call_id.startswith(LOCAL_ID_PREFIX):
        response["id"] = message.tool_call_id
    media = [p for p in message.parts if isinstance(p, (ImagePart, DocumentPart))]
    if media:
        response["parts"] = [_media(p) for p in media]
    return {"functionResponse": response}


# --- responses -------------------------------------------------------------------------


def error_type(payload: Any) -> type[ProviderError] | None:
    """The error class an `{"error": {"code", "status", "details"}}` body names, where its
    HTTP status alone would mislead: `AuthenticationError` for a `google.rpc.ErrorInfo`
    reason of `AUTHENTICATION_REASONS` (a bad key comes as 400 `INVALID_ARGUMENT`, reason
    `API_KEY_INVALID`) or the status `UNAUTHENTICATED` / `PERMISSION_DENIED`;
    `RateLimitError` for `RESOURCE_EXHAUSTED`; `ProviderUnavailableError` for
    `UNAVAILABLE` / `DEADLINE_EXCEEDED`. `None` otherwise: the HTTP status decides."""
    error = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(error, Mapping):
        return None
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and detail.get("reason") in AUTHENTICATION_REASONS:
            return AuthenticationError
    status = error.get("status")
    return _STATUS_ERRORS.get(status) if isinstance(status, str) else None


def payload_error(payload: Mapping[str, Any]) -> ProviderError:
    """The `ProviderError` of an `{"error": {"code", "message", "status"}}` body (in a
    response or a stream chunk): the class `error_type` names, else that of `code`."""
    error = payload.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    status = error.get("status") if isinstance(error, Mapping) else None
    message = f"{PROVIDER}: {error_message(payload) or 'error in the response'}"
    if isinstance(status, str) and status:
        message += f" ({status})"
    body = json_excerpt(payload)
    kind = error_type(payload)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        return error_for_status(code, message, provider=PROVIDER, body=body, kind=kind)
    if kind is None:
        kind = error_type_for_code(status, code)
    if kind is not None:
        return kind(message, body=body, provider=PROVIDER)
    return ProviderError(message, body=body, provider=PROVIDER)


def wire_usage(payload: Any) -> Usage:
    """`usageMetadata` as core `Usage` (module notes; a bad count is 0)."""
    if not isinstance(payload, Mapping):
        return Usage(requests=1)
    thoughts = token_count(payload.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=token_count(payload.get("promptTokenCount"))
        + token_count(payload.get("toolUsePromptTokenCount")),
        output_tokens=token_count(payload.get("candidatesTokenCount")) + thoughts,
        cached_tokens=token_count(payload.get("cachedContentTokenCount")),
        requests=1,
        reasoning_tokens=thoughts,
    )


def _kind(part: Mapping[str, Any]) -> str:
    if "functionCall" in part:
        return "call"
    if isinstance(part.get("text"), str):
        return "thought" if part.get("thought") else "text"
    return "other"


def merged_parts(parts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Parts with adjacent text (or thought) pieces joined, as a stream splits them: a
    piece joins the one before unless that one closed with a signature."""
    merged: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            raise TypeError(f"a part is a {type(part).__name__}, not an object")
        kind = _kind(part)
        last = merged[-1] if merged else None
        if (
            kind in ("text", "thought")
            and last is not None
            and _kind(last) == kind
            and "thoughtSignature" not in last
            and set(part) <= {"text", "thought", "thoughtSignature"}
        ):
            last["text"] += part["text"]
            if "thoughtSignature" in part:
                last["thoughtSignature"] = part["thoughtSignature"]
            continue
        merged.append(dict(part))
    return merged


def response_from_payload(payload: Mapping[str, Any]) -> ChatResponse:
    """A `GenerateContentResponse` as a `ChatResponse` (an error body raises)."""
    if payload.get("error") is not None:
        raise payload_error(payload)
    candidates = payload.get("candidates") or []
    usage = wire_usage(payload.get("usageMetadata"))
    response_id, model = _text(payload, "responseId"), _text(payload, "modelVersion")
    if not candidates:
        feedback = payload.get("promptFeedback") or {}
        if not feedback.get("blockReason"):
            raise ValueError("a response without candidates or a block reason")
        return ChatResponse(
            message=AssistantMessage(),
            finish_reason="content_filter",
            usage=usage,
            id=response_id,
            model=model,
        )
    candidate = candidates[0]
    message = _message(candidate.get("content") or {})
    reason = _finish_reason(candidate.get("finishReason"), bool(message.tool_calls))
    return ChatResponse(
        message=message, finish_reason=reason, usage=usage, id=response_id, model=model
    )


def _message(content: Mapping[str, Any]) -> AssistantMessage:
    """A candidate's content: thoughts, text and calls as the core's parts; a text's
    thought signature and the parts the core has no type for kept as provider data."""
    pieces: list[TextPart | ReasoningPart] = []
    calls: list[ToolCall] = []
    others: list[dict[str, Any]] = []
    ours: dict[str, Any] = {}
    for part in merged_parts(content.get("parts") or ()):
        kind = _kind(part)
        signature = part.get("thoughtSignature")
        if signature is not None and not isinstance(signature, str):
            raise TypeError(f"thoughtSignature is a {type(signature).__name__}, not a string")
        if kind == "thought":
            pieces.append(ReasoningPart(text=part["text"], signature=signature, provider=PROVIDER))
        elif kind == "text":
            pieces.append(TextPart(text=part["text"]))
            if signature:
                ours["thoughtSignature"] = signature
        elif kind == "call":
            calls.append(function_call(part))
        else:
            others.append(part)
    if others:
        ours["parts"] = others
    return AssistantMessage(
        content=assistant_content(pieces),
        tool_calls=tuple(calls),
        provider_data={PROVIDER: ours} if ours else None,
    )


def _finish_reason(wire_reason: object, with_calls: bool) -> str:
    reason = _FINISH_REASONS.get(wire_reason) if isinstance(wire_reason, str) else None
    if reason is None:
        reason = wire_reason.lower() if isinstance(wire_reason, str) else "stop"
    if with_calls and reason == "stop":
        reason = "tool_calls"
    return reason


def _text(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else None


def local_call_id() -> str:
    """A fresh id for a call the API sent without one (`LOCAL_ID_PREFIX`, never sent)."""
    return LOCAL_ID_PREFIX + new_call_id().removeprefix("call_")


def function_call(part: Mapping[str, Any]) -> ToolCall:
    """A `functionCall` part as a `ToolCall`: the API's id, else a local one; the part's
    thought signature is kept in `provider_data` and sent back with the call."""
    call = part["functionCall"]
    if call.get("partialArgs") is not None or call.get("willContinue"):
        raise ValueError(
            "a function call streamed in pieces (partialArgs / willContinue, which only "
            "Vertex AI sends, with streamFunctionCallArguments): not supported, leave "
            "toolConfig.functionCallingConfig.streamFunctionCallArguments unset"
        )
    name = call["name"]
    if not isinstance(name, str) or not name:
        raise TypeError("a function call without a name")
    args = call.get("args")
    if args is not None and not isinstance(args, dict):
        raise TypeError(f"args is a {type(args).__name__}, not an object")
    data: dict[str, Any] = {}
    wire_id = call.get("id")
    if wire_id is not None and not isinstance(wire_id, str):
        raise TypeError(f"id is a {type(wire_id).__name__}, not a string")
    if isinstance(part.get("thoughtSignature"), str):
        data["thoughtSignature"] = part["thoughtSignature"]
    return ToolCall(
        id=wire_id or local_call_id(),
        name=name,
        arguments=json_dumps(args or {}),
        provider_data={PROVIDER: data} if data else None,
    )


# --- streams ---------------------------------------------------------------------------


class GeminiStreamReader:
    """What a `streamGenerateContent?alt=sse` stream has delivered so far.

    `done` stays false (the API sends no end marker: the stream ends with its body);
    `response()` accepts the stream once a chunk carried a finish reason or a block.
    """

    __slots__ = ("_complete", "_ids", "_last", "_parts", "_payload", "_thought")

    def __init__(self) -> None:
        self._parts: list[dict[str, Any]] = []
        self._payload: dict[str, Any] = {}  # everything but the parts, last value wins
        self._complete = False
        self._ids: list[str] = []  # the ids the calls were streamed with, in order
        self._thought = -1  # the reasoning index of the current thought run
        self._last: dict[str, Any] | None = None  # the last text or thought part

    @property
    def done(self) -> bool:
        """Always false: a Gemini stream ends with its body."""
        return False

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        """Take one chunk; return the deltas it carries."""
        chunk = event_object(data, event, provider=PROVIDER)
        if chunk.get("error") is not None:
            raise payload_error(chunk)
        for key in ("responseId", "modelVersion", "usageMetadata", "promptFeedback"):
            if chunk.get(key) is not None:
                self._payload[key] = chunk[key]
        if (chunk.get("promptFeedback") or {}).get("blockReason"):
            self._complete = True
        deltas: list[ModelDelta] = []
        for candidate in chunk.get("candidates") or ():
            if candidate.get("index", 0) != 0:
                continue
            for part in (candidate.get("content") or {}).get("parts") or ():
                deltas.extend(self._part(part))
            if candidate.get("finishReason"):
                self._payload["finishReason"] = candidate["finishReason"]
                self._complete = True
        return deltas

    def _part(self, part: Any) -> list[ModelDelta]:
        if not isinstance(part, Mapping):
            raise TypeError(f"a part is a {type(part).__name__}, not an object")
        self._parts.append(dict(part))
        kind = _kind(part)
        if kind == "call":
            call = function_call(part)
            index = len(self._ids)
            self._ids.append(call.id)
            self._last = None
            return [
                ToolCallDelta(
                    index=index,
                    id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    provider_data=call.provider_data,
                )
            ]
        if kind == "other":
            self._last = None
            return []
        previous, self._last = self._last, dict(part)
        text = part["text"]
        if kind == "text":
            return [TextDelta(text)] if text else []
        if previous is None or _kind(previous) != "thought" or "thoughtSignature" in previous:
            self._thought += 1  # a new thought run, as merged_parts splits them
        return [ReasoningDelta(text, self._thought)] if text else []

    def response(self) -> ChatResponse:
        """The final response; raises if the stream ended before a finish reason."""
        if not self._complete:
            raise StreamInterruptedError(f"{PROVIDER}: the stream ended before a finish reason")
        payload: dict[str, Any] = {
            k: v for k, v in self._payload.items() if k not in ("finishReason",)
        }
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": self._parts}}
        if "finishReason" in self._payload:
            candidate["finishReason"] = self._payload["finishReason"]
        if self._parts or "finishReason" in self._payload:
            payload["candidates"] = [candidate]
        try:
            response = response_from_payload(payload)
        except ProviderError:
            raise
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"{PROVIDER}: the streamed response is invalid ({type(exc).__name__}: {exc})"
            ) from exc
        calls = response.message.tool_calls
        if [c.id for c in calls] == self._ids:
            return response
        # calls without an API id: keep the local ids the deltas announced
        calls = tuple(c.model_copy(update={"id": i}) for c, i in zip(calls, self._ids, strict=True))
        return response.with_message(response.message.model_copy(update={"tool_calls": calls}))


__all__ = [
    "AUTHENTICATION_REASONS",
    "GEMINI_BASE_URL",
    "LOCAL_ID_PREFIX",
    "PROVIDER",
    "GeminiChatModel",
    "GeminiStreamReader",
    "GeminiWire",
    "SchemaMode",
    "content_parts",
    "contents",
    "error_type",
    "function_call",
    "function_declaration",
    "local_call_id",
    "merged_parts",
    "model_path",
    "payload_error",
    "request_body",
    "request_headers",
    "request_url",
    "response_from_payload",
    "wire_usage",
]
