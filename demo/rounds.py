"""`AnswerAfterRounds`: after a few tool rounds, the model must answer in text."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.events import StreamEvent
from ..core.messages import AssistantMessage
from ..core.request import ChatRequest
from ..core.response import ChatResponse


class AnswerAfterRounds(Advisor):
    """Sets `tool_choice="none"` on model calls once the turn has had `max_rounds` tool rounds.

    Small models sometimes call the same tool again and again; this bounds a turn to
    `max_rounds + 1` model calls and makes the last one an answer. Place it after the
    `ToolCallingAdvisor` (its `call`/`stream` then see each round) and before the links
    that should know tools are off (tool search). Never short-circuits or loops.
    """

    def __init__(self, max_rounds: int = 3) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.max_rounds = max_rounds

    def _adjusted(self, request: ChatRequest) -> ChatRequest:
        rounds = sum(
            1
            for m in request.messages[request.last_user_index + 1 :]
            if isinstance(m, AssistantMessage) and m.tool_calls
        )
        return request.with_options(tool_choice="none") if rounds >= self.max_rounds else request

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(self._adjusted(request))

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async for event in next(self._adjusted(request)):
            yield event
