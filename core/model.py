"""The `ChatModel` protocol: the innermost step of every chain."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from .events import StreamEvent
from .request import ChatRequest
from .response import ChatResponse


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a `ChatRequest`: providers, test doubles, and `Chain` itself.

    `stream` yields `TextDelta`, `ReasoningDelta` and `ToolCallDelta` events as they
    arrive and ends with exactly one `ResponseCompleted`. A model may also expose `model_name` and
    `provider_name` attributes, which logging and tracing report.
    """

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer `request` in one piece."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer `request` as a stream of events."""
        ...
