"""`ScriptedChatModel`: a chat model that answers from a script, for tests and demos."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from operator import attrgetter
from typing import Literal, TypeAlias, TypeGuard

from ..core.assembly import StreamAssembler
from ..core.errors import AdvisorChainError
from ..core.events import ReasoningDelta, ResponseCompleted, StreamEvent, TextDelta, ToolCallDelta
from ..core.messages import AssistantMessage, Message, ToolCall
from ..core.options import OutputSchema
from ..core.parts import ReasoningPart, TextPart
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.usage import Usage

Reply: TypeAlias = str | AssistantMessage | ChatResponse | ToolCall | Sequence[ToolCall] | Exception
"""One scripted answer: text, a message, a whole response, tool call(s), or an error to raise."""

ReplyFunction: TypeAlias = Callable[[ChatRequest], Reply | Awaitable[Reply]]


class ScriptExhaustedError(AdvisorChainError):
    """A `ScriptedChatModel` was called more often than it has scripted replies."""


_PLAIN_REPLIES = (str, list, tuple, ToolCall, AssistantMessage, ChatResponse)
"""Replies that are never awaitable (checked before the slower `inspect.isawaitable`)."""
_text = attrgetter("text")


class ScriptedChatModel:
    """Answers each call with the next scripted reply, or with `script(request)`.

    Every request received is kept in `requests`, so tests can inspect exactly what a
    provider would have been sent. `stream` splits text and tool-call arguments into
    fragments of `chunk_size` characters, so the assembly path is exercised; a sequence
    of sizes cuts each text into fragments of those sizes in turn (the last size repeats),
    to stream a text in chosen chunks. Usage is estimated at four characters a token.

    `output_schema` says whether it claims to honour `ChatOptions.output_schema` (as a
    provider that constrains its output would): `False` (the default, like a model
    that cannot, so `StructuredOutputAdvisor` states the schema in the prompt), `True`,
    or `"without_tools"` (only on requests without tools, like llama.cpp). It never
    constrains its script; tests read what was asked in `requests[i].options`.
    """

    provider_name = "scripted"

    def __init__(
        self,
        script: Iterable[Reply] | ReplyFunction,
        *,
        model_name: str = "scripted",
        chunk_size: int | Sequence[int] = 4,
        output_schema: bool | Literal["without_tools"] = False,
    ) -> None:
        if isinstance(script, (str, bytes)):
            raise TypeError(
                f"script must be a list of replies (or a function of the request); for one "
                f"reply write ScriptedChatModel([{script!r:.40}])"
            )
        if callable(script) and not isinstance(script, (list, tuple)):
            self._function: ReplyFunction | None = script
            self._replies: list[Reply] = []
        else:
            self._function = None
            self._replies = list(script)
        self.model_name = model_name
        if isinstance(chunk_size, int):
            self.chunk_size: int | tuple[int, ...] = max(1, chunk_size)
        else:
            self.chunk_size = tuple(chunk_size)
            if not self.chunk_size or min(self.chunk_size) < 1:
                raise ValueError("chunk_size must be a positive size or a non-empty list of them")
        self.requests: list[ChatRequest] = []
        self.output_schema = output_schema

    def __repr__(self) -> str:
        return f"ScriptedChatModel(model_name={self.model_name!r})"

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """What `output_schema` says (the schema itself is never refused)."""
        if self.output_schema == "without_tools":
            return not with_tools
        return bool(self.output_schema)

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._replies)

    async def _next_response(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self._function is not None:
            reply = self._function(request)
            if not isinstance(reply, _PLAIN_REPLIES) and inspect.isawaitable(reply):
                reply = await reply
        elif self._replies:
            reply = self._replies.pop(0)
        else:
            raise ScriptExhaustedError(
                f"{self.model_name}: no scripted reply left for call #{len(self.requests)}"
            )
        return self._response(reply, request.messages)

    def _response(
        self, reply: Reply | Awaitable[Reply], messages: Sequence[Message]
    ) -> ChatResponse:
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ChatResponse):
            return reply
        if isinstance(reply, str):
            message = AssistantMessage(content=reply)
        elif isinstance(reply, AssistantMessage):
            message = reply
        elif isinstance(reply, ToolCall):
            message = AssistantMessage(tool_calls=(reply,))
        elif isinstance(reply, Sequence) and _all_calls(reply):
            message = AssistantMessage(tool_calls=tuple(reply))
        else:
            raise TypeError(f"cannot use {reply!r} as a scripted reply")
        return ChatResponse(
            message=message,
            finish_reason="tool_calls" if message.tool_calls else "stop",
            usage=_estimate_usage(messages, message),
            model=self.model_name,
        )

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer with the next scripted reply."""
        return await self._next_response(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer with the next scripted reply, in small fragments."""
        response = await self._next_response(request)
        message = response.message
        assembler = StreamAssembler()
        reasoning = 0
        for part in message.parts:
            if isinstance(part, ReasoningPart):
                assembler.reasoning_detail(
                    reasoning,
                    signature=part.signature,
                    provider=part.provider,
                    provider_data=part.provider_data,
                )
            text = part.text if isinstance(part, (TextPart, ReasoningPart)) else ""
            for piece in self._pieces(text):
                delta: TextDelta | ReasoningDelta = (
                    TextDelta(piece)
                    if isinstance(part, TextPart)
                    else ReasoningDelta(piece, reasoning)
                )
                assembler.add(delta)
                yield delta
            reasoning += isinstance(part, ReasoningPart)
        for index, call in enumerate(message.tool_calls):
            fragments = self._pieces(call.arguments)
            first = ToolCallDelta(index, call.id, call.name, fragments[0] if fragments else "")
            assembler.add(first)
            yield first
            for fragment in fragments[1:]:
                delta_call = ToolCallDelta(index, arguments=fragment)
                assembler.add(delta_call)
                yield delta_call
        streamed = assembler.message()
        yield ResponseCompleted(
            ChatResponse(
                message=streamed,
                finish_reason=response.finish_reason,
                usage=response.usage,
                model=response.model,
                id=response.id,
            )
        )

    def _pieces(self, text: str) -> list[str]:
        size = self.chunk_size
        if isinstance(size, int):
            return [text[s : s + size] for s in range(0, len(text), size)]
        pieces: list[str] = []
        start = 0
        while start < len(text):
            step = size[min(len(pieces), len(size) - 1)]
            pieces.append(text[start : start + step])
            start += step
        return pieces


def _all_calls(reply: Sequence[object]) -> TypeGuard[Sequence[ToolCall]]:
    for c in reply:
        if not isinstance(c, ToolCall):
            return False
    return True


def _estimate_usage(messages: Sequence[Message], answer: AssistantMessage) -> Usage:
    try:  # every message type has a `text`
        prompt_chars = sum(map(len, map(_text, messages)))
    except AttributeError:
        prompt_chars = sum(len(getattr(m, "text", None) or "") for m in messages)
    answer_chars = len(answer.text)
    for c in answer.tool_calls:
        answer_chars += len(c.name) + len(c.arguments)
    return Usage(
        input_tokens=max(1, prompt_chars // 4), output_tokens=max(1, answer_chars // 4), requests=1
    )


__all__ = ["Reply", "ReplyFunction", "ScriptExhaustedError", "ScriptedChatModel"]
