"""`LlamaCppChatModel`: a GGUF model run in-process on the CPU with llama-cpp-python.

Needs the `local` extra. Inference runs in worker threads, so the event loop never
blocks; a stream pulls one chunk per worker-thread call, which works the same on asyncio
and trio and stops generating as soon as the consumer stops reading. One inference runs
at a time per loaded model. Tool calls the model writes as text (Qwen's `<tool_call>`)
become real tool calls (see `core.text_tool_calls`). Chat templates read text only:
an image or a document, in a user message or a tool result, is sent as a stand-in line
(`[image 1 (image/png): not shown: tool results take text only here]`, as
`OpenAIChatModel(tool_media="omit")` writes it), never dropped without a word.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread

from ..core.arguments import parse_argument_object
from ..core.assembly import StreamAssembler
from ..core.errors import ChainConfigurationError
from ..core.events import ResponseCompleted, StreamEvent, TextDelta, ToolCallDelta
from ..core.extras import install_hint
from ..core.loop_lock import LoopLock
from ..core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    new_call_id,
)
from ..core.options import OutputSchema
from ..core.parts import DocumentPart, ImagePart, stand_in_text
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.text_tool_calls import (
    apply_text_tool_calls,
    parse_text_tool_call_stream,
    tool_names_for,
)
from ..core.usage import Usage
from ._structured import llamacpp_response_format

DEFAULT_MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
_DONE = object()


@dataclass(frozen=True, slots=True)
class LlamaCallTimings:
    """What one model call cost llama.cpp, from its own performance counters.

    `prompt_tokens` is the whole prompt; `prompt_tokens_evaluated` the part llama.cpp
    actually evaluated (the rest was a prefix still in its KV cache from the previous
    call). `floor_seconds` is the time those evaluations take at the measured speeds,
    without any overhead: prompt evaluation plus generation.
    """

    prompt_tokens: int
    prompt_tokens_evaluated: int
    prompt_seconds: float
    generated_tokens: int
    generation_seconds: float

    @property
    def reused_tokens(self) -> int:
        """Prompt tokens taken from the KV cache instead of evaluated."""
        return max(0, self.prompt_tokens - self.prompt_tokens_evaluated)

    @property
    def floor_seconds(self) -> float:
        """Prompt evaluation plus generation time, as llama.cpp measured them."""
        return self.prompt_seconds + self.generation_seconds


class LlamaCppChatModel:
    """A local GGUF model behind the `ChatModel` protocol (llama-cpp-python, in-process).

    `model_path` defaults to an embedded model chosen by `local_model`: `"0.5b"`
    (Qwen2.5-Coder-0.5B-Instruct, the `local` extra) or `"1.5b"` (Qwen2.5-Coder-1.5B-Instruct,
    the `local-1.5b` extra), assembled from its weight packages and verified on first use
    (`providers.local.weights.LOCAL_MODELS`). The model is loaded lazily, on
    the first call or on `await load()`. The chat template embedded in the GGUF file
    formats the prompt and the tools. A named `tool_choice` makes llama.cpp return a
    grammar-constrained structured call; otherwise tool calls written as text are
    parsed (`text_tool_calls=False` turns that off), calls to tools that are not attached
    included (`unknown_tool_calls=True`, the default): the tool loop answers those with
    "unknown tool; available: ...", so an invented call never becomes the answer.
    `llama_options` go to `llama_cpp.Llama(...)`; `llama` injects an already built
    `Llama`-like object.

    llama.cpp reuses the longest prefix of the previous call's prompt still in its KV
    cache, so a prompt that only grows is evaluated only where it is new. To keep that
    prefix valid, `tool_choice="none"` keeps the tool definitions in the prompt and stops
    generation at `tool_call_stop` (the tag a call would start with), so no call can be
    written; `tools_when_none="drop"` removes the definitions instead (a shorter prompt,
    evaluated again from the system message on). `last_timings` holds llama.cpp's own
    count of the prompt tokens evaluated and reused, and the seconds spent, of the
    latest call (`usage.cached_tokens` carries the reused count too). A call with another
    prompt (a retry without tools, a side call) would evict that prefix; the states after
    recent calls are kept (`prompt_cache_bytes`, 256 MB by default, 0 turns it off; only
    llama.cpp's KV cells in use, ~12 KB per token on the 0.5B), and a call starts from the
    kept state that shares the longest prefix with its prompt.

    Usage is exact for `call`; for `stream` llama.cpp reports none, so it is counted
    from the streamed chunks and the context length (approximate). A stream stops
    generating at the next token once its consumer stops; a cancelled `call` waits for
    its generation to end (llama.cpp cannot be interrupted), so keep `max_tokens` small.
    """

    provider_name = "llama.cpp"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        model_name: str | None = None,
        local_model: str = "0.5b",
        n_ctx: int = 4096,
        n_threads: int | None = None,
        text_tool_calls: bool = True,
        unknown_tool_calls: bool = True,
        tools_when_none: Literal["keep", "drop"] = "keep",
        tool_call_stop: Sequence[str] = ("<tool_call>",),
        llama_options: Mapping[str, Any] | None = None,
        prompt_cache_bytes: int = 256 << 20,
        llama: Any = None,
    ) -> None:
        if tools_when_none not in ("keep", "drop"):
            raise ValueError("tools_when_none must be 'keep' or 'drop'")
        from .local.weights import LOCAL_MODELS

        if local_model not in LOCAL_MODELS:
            raise ValueError(
                f"unknown local_model {local_model!r}; known: {', '.join(LOCAL_MODELS)}"
            )
        self.local_model = local_model
        self.model_path = Path(model_path) if model_path is not None else None
        if model_name is None:
            default = Path(LOCAL_MODELS[local_model].file_name).stem
            model_name = self.model_path.stem if self.model_path else default
        self.model_name = model_name
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.text_tool_calls = text_tool_calls
        self.unknown_tool_calls = unknown_tool_calls
        self.tools_when_none = tools_when_none
        self.tool_call_stop = tuple(tool_call_stop)
        self.last_timings: LlamaCallTimings | None = None
        self.llama_options = dict(llama_options or {})
        if prompt_cache_bytes < 0:
            raise ValueError("prompt_cache_bytes must be 0 (off) or more")
        self.prompt_cache_bytes = prompt_cache_bytes
        self.load_seconds: float | None = None
        self._llama = llama
        self._exclusive = LoopLock()  # one inference at a time

    def __repr__(self) -> str:
        return f"LlamaCppChatModel(model_name={self.model_name!r})"

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """A schema becomes a grammar over the whole output: only without tools."""
        return not with_tools

    # -- loading ----------------------------------------------------------------------------

    async def load(self) -> Any:
        """Load the model now (in a worker thread) unless it is loaded; returns the `Llama`."""
        async with self._exclusive():
            return await self._loaded()

    async def _loaded(self) -> Any:
        if self._llama is None:
            started = time.perf_counter()
            self._llama = await anyio.to_thread.run_sync(self._build)
            self.load_seconds = time.perf_counter() - started
        return self._llama

    def _build(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ImportError(
                "LlamaCppChatModel needs llama-cpp-python: " + install_hint("local")
            ) from exc
        path = self.model_path
        if path is None:
            from .local.weights import ensure_local_model

            path = ensure_local_model(name=self.local_model)
        from .local.preflight import ensure_preflight

        ensure_preflight(Path(path), self.n_threads)  # a SIGILL kills a child, not this process
        options: dict[str, Any] = {"n_ctx": self.n_ctx, "verbose": False}
        if self.n_threads is not None:
            options["n_threads"] = self.n_threads
        options.update(self.llama_options)
        llama = Llama(model_path=str(path), **options)
        if self.prompt_cache_bytes:
            from ._llama_state import keep_prompt_states

            keep_prompt_states(llama, self.prompt_cache_bytes)
        return llama

    # -- the ChatModel protocol ---------------------------------------------------------------

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer `request` in one piece."""
        kwargs = self._arguments(request)
        async with self._exclusive():
            llama = await self._loaded()
            before = _perf(llama)
            data = await anyio.to_thread.run_sync(partial(llama.create_chat_completion, **kwargs))
            prompt_tokens = int((data.get("usage") or {}).get("prompt_tokens", 0))
            self.last_timings = _timings(before, _perf(llama), prompt_tokens)
        response = _with_cached(_response(data, self.model_name), self.last_timings)
        if self.text_tool_calls:
            response = apply_text_tool_calls(
                response, tool_names_for(request), any_name=self.unknown_tool_calls
            )
        return response

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer `request` as a stream of events, token by token."""
        events = self._stream(request)
        names = tool_names_for(request)
        if self.text_tool_calls and names:
            return parse_text_tool_call_stream(events, names, any_name=self.unknown_tool_calls)
        return events

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        kwargs = self._arguments(request)
        assembler = StreamAssembler()
        finish_reason = "stop"
        response_id: str | None = None
        chunks_with_output = 0
        async with self._exclusive():
            llama = await self._loaded()
            before = _perf(llama)
            chunks: Iterator[dict[str, Any]] = await anyio.to_thread.run_sync(
                partial(llama.create_chat_completion, stream=True, **kwargs)
            )
            try:
                while True:
                    chunk = await anyio.to_thread.run_sync(next, chunks, _DONE)
                    if chunk is _DONE:
                        break
                    assert isinstance(chunk, dict)
                    response_id = response_id or chunk.get("id")
                    choice = (chunk.get("choices") or [{}])[0]
                    events = _chunk_events(choice.get("delta") or {})
                    if events:
                        chunks_with_output += 1
                    for event in events:
                        assembler.add(event)
                        yield event
                    finish_reason = choice.get("finish_reason") or finish_reason
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_close, chunks)
            context_tokens = int(getattr(llama, "n_tokens", 0) or 0)
            prompt_tokens = max(0, context_tokens - chunks_with_output)
            self.last_timings = _timings(before, _perf(llama), prompt_tokens)
        message = assembler.message()
        timings = self.last_timings
        usage = Usage(
            input_tokens=prompt_tokens,
            output_tokens=chunks_with_output,
            cached_tokens=timings.reused_tokens if timings is not None else 0,
            requests=1,
        )
        yield ResponseCompleted(
            ChatResponse(
                message=message,
                finish_reason="tool_calls" if message.tool_calls else finish_reason,
                usage=usage,
                model=self.model_name,
                id=response_id,
            )
        )

    # -- translation ------------------------------------------------------------------------

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        options = request.options
        kwargs: dict[str, Any] = {"messages": [_message(m) for m in request.messages]}
        choice = options.tool_choice
        stop = list(options.stop or ())
        keep = choice != "none" or self.tools_when_none == "keep"
        if request.tools and keep:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": _plain(t.definition.parameters),
                    },
                }
                for t in request.tools
            ]
            if choice == "none":
                stop.extend(s for s in self.tool_call_stop if s not in stop)
            if choice == "required" and len(request.tools) == 1:
                choice = request.tools[0].name
            if choice not in (None, "auto", "required", "none"):
                if request.find_tool(choice) is None:
                    raise ChainConfigurationError(
                        f"tool_choice names {choice!r}, which is not attached to the request"
                    )
                kwargs["tool_choice"] = {"type": "function", "function": {"name": choice}}
        for name in ("temperature", "top_p", "max_tokens"):
            value = getattr(options, name)
            if value is not None:
                kwargs[name] = value
        if stop:
            kwargs["stop"] = stop
        if options.output_schema is not None:
            with_tools = "tools" in kwargs
            kwargs["response_format"] = llamacpp_response_format(
                options.output_schema, with_tools=with_tools
            )
        kwargs.update(options.extra)
        return kwargs


def _message(message: Message) -> dict[str, Any]:
    # Local chat templates read text only: parts are sent as their text, media as stand-ins.
    if isinstance(message, SystemMessage):
        return {"role": message.role, "content": message.text}
    if isinstance(message, UserMessage):
        return {"role": message.role, "content": text_with_stand_ins(message, USER_MEDIA)}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "name": message.name,
            "content": text_with_stand_ins(message, TOOL_MEDIA),
        }
    data: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments_value(call)},
            }
            for call in message.tool_calls
        ]
    return data


TOOL_MEDIA = "not shown: tool results take text only here"
"""What an image or document in a tool result becomes (as `OpenAIChatModel` with
`tool_media="omit"` writes it)."""

USER_MEDIA = "not shown: this model takes text only"
"""What an image or document in a user message becomes."""


def text_with_stand_ins(message: UserMessage | ToolMessage, why: str) -> str:
    """The message's text for a text-only chat template: its text parts, and for each
    image or document a stand-in line, `[image 1 (image/png): <why>]`, so that neither
    the model nor the reader of the transcript takes it for nothing. Content without
    media is its text, as before."""
    content = message.content
    if isinstance(content, str) or not any(
        isinstance(p, (ImagePart, DocumentPart)) for p in content
    ):
        return message.text
    return stand_in_text(content, why)


def _arguments_value(call: ToolCall) -> Any:
    # Chat templates render arguments with `tojson`: a dict reads as the JSON the model wrote.
    value = parse_argument_object(call.arguments)
    return value if value is not None else call.arguments


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def _chunk_events(delta: Mapping[str, Any]) -> list[TextDelta | ToolCallDelta]:
    events: list[TextDelta | ToolCallDelta] = []
    if delta.get("content"):
        events.append(TextDelta(str(delta["content"])))
    for position, call in enumerate(delta.get("tool_calls") or ()):
        function = call.get("function") or {}
        events.append(
            ToolCallDelta(
                index=int(call.get("index", position)),
                id=call.get("id"),
                name=function.get("name"),
                arguments=function.get("arguments") or "",
            )
        )
    return events


def _response(data: Mapping[str, Any], model_name: str) -> ChatResponse:
    choice = data["choices"][0]
    raw = choice.get("message") or {}
    calls = tuple(
        ToolCall(
            id=call.get("id") or new_call_id(),
            name=call["function"]["name"],
            arguments=call["function"].get("arguments") or "{}",
        )
        for call in raw.get("tool_calls") or ()
    )
    usage = data.get("usage") or {}
    return ChatResponse(
        message=AssistantMessage(content=raw.get("content") or None, tool_calls=calls),
        finish_reason="tool_calls" if calls else (choice.get("finish_reason") or "stop"),
        usage=Usage(
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            requests=1,
        ),
        model=model_name,
        id=data.get("id"),
    )


def _perf(llama: Any) -> tuple[float, float, int, int] | None:
    """llama.cpp's cumulative counters: prompt ms, generation ms, prompt and generated tokens."""
    try:
        import llama_cpp

        data = llama_cpp.llama_perf_context(llama._ctx.ctx)
    except Exception:  # an injected stand-in, or a build without the perf API
        return None
    return float(data.t_p_eval_ms), float(data.t_eval_ms), int(data.n_p_eval), int(data.n_eval)


def _timings(
    before: tuple[float, float, int, int] | None,
    after: tuple[float, float, int, int] | None,
    prompt_tokens: int,
) -> LlamaCallTimings | None:
    if before is None or after is None:
        return None
    return LlamaCallTimings(
        prompt_tokens=prompt_tokens,
        prompt_tokens_evaluated=after[2] - before[2],
        prompt_seconds=(after[0] - before[0]) / 1000,
        generated_tokens=after[3] - before[3],
        generation_seconds=(after[1] - before[1]) / 1000,
    )


def _with_cached(response: ChatResponse, timings: LlamaCallTimings | None) -> ChatResponse:
    if timings is None:
        return response
    usage = response.usage
    cached = Usage(usage.input_tokens, usage.output_tokens, timings.reused_tokens, usage.requests)
    return replace(response, usage=cached)


def _close(chunks: Iterator[Any]) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


__all__ = ["DEFAULT_MODEL_NAME", "LlamaCallTimings", "LlamaCppChatModel"]
