"""Assemble streamed fragments into a complete assistant message."""

from __future__ import annotations

from .errors import StreamInterruptedError
from .events import TextDelta, ToolCallDelta
from .messages import AssistantMessage, ToolCall, new_call_id


class StreamAssembler:
    """Collects `TextDelta` and `ToolCallDelta` events; `message()` builds the result.

    Providers use it to build the response their stream ends with; tool-call fragments
    are merged by `index`, in index order.
    """

    __slots__ = ("_calls", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, list[str | None]] = {}

    def add(self, event: TextDelta | ToolCallDelta) -> None:
        """Record one fragment."""
        if isinstance(event, TextDelta):
            self._text.append(event.text)
            return
        slot = self._calls.get(event.index)
        if slot is None:
            slot = self._calls[event.index] = [None, None, ""]
        if event.id and not slot[0]:
            slot[0] = event.id
        if event.name:
            slot[1] = event.name if not slot[1] or slot[1] == event.name else slot[1] + event.name
        slot[2] = (slot[2] or "") + event.arguments

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._text)

    @property
    def has_tool_calls(self) -> bool:
        """Whether any tool-call fragment was received."""
        return bool(self._calls)

    def message(self) -> AssistantMessage:
        """The assistant message made of every fragment received."""
        calls = []
        for index in sorted(self._calls):
            call_id, name, arguments = self._calls[index]
            if not name:
                raise StreamInterruptedError(f"streamed tool call #{index} never got a name")
            calls.append(
                ToolCall(id=call_id or new_call_id(), name=name, arguments=arguments or "{}")
            )
        text = self.text
        return AssistantMessage(content=text or None, tool_calls=tuple(calls))
