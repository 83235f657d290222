"""`ToolResultsAsText`: show a small model its tool results as a user message."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.events import StreamEvent
from ..core.messages import AssistantMessage, Message, ToolMessage, UserMessage
from ..core.request import ChatRequest
from ..core.response import ChatResponse


class ToolResultsAsText(Advisor):
    """Rewrites each tool round of the transcript into one user message, for small models.

    A 0.5B model that sees its own `<tool_call>` followed by `<tool_response>` tends to
    repeat the call instead of answering. Shown as "you called X, it returned Y", the
    same results get answered. Only the copy sent to the model changes: the turn's
    messages, and what the caller stores, keep the real tool calls and results.
    Control flow: wraps each model call, never short-circuits or loops.
    """

    def _rewritten(self, request: ChatRequest) -> ChatRequest:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return request
        messages: list[Message] = []
        results: list[str] = []
        for message in request.messages:
            if isinstance(message, AssistantMessage) and message.tool_calls:
                continue
            if isinstance(message, ToolMessage):
                failed = " (failed)" if message.is_error else ""
                results.append(f"{message.name}{failed}: {message.text}")
                continue
            if results:
                messages.append(_results_message(results))
                results = []
            messages.append(message)
        if results:
            messages.append(_results_message(results))
        return request.with_messages(tuple(messages))

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(self._rewritten(request))

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        async for event in next(self._rewritten(request)):
            yield event


def _results_message(results: list[str]) -> UserMessage:
    return UserMessage(
        content="Results:\n"
        + "\n".join(results)
        + "\nUse these results to answer my question in one or two plain sentences."
    )
