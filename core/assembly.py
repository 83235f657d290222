"""Assemble streamed fragments into a complete assistant message."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import StreamInterruptedError
from .events import ReasoningDelta, TextDelta, ToolCallDelta
from .messages import AssistantMessage, ToolCall, new_call_id
from .parts import ReasoningPart, TextPart, assistant_content


class _Reasoning:
    __slots__ = ("pieces", "provider", "provider_data", "signature")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.signature: str | None = None
        self.provider: str | None = None
        self.provider_data: dict[str, Any] | None = None

    def part(self) -> ReasoningPart:
        return ReasoningPart(
            text="".join(self.pieces),
            signature=self.signature,
            provider=self.provider,
            provider_data=self.provider_data,
        )


def _merged(old: dict[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """`old` updated with `new`, mappings under one key merged (one level deep)."""
    merged = dict(old or {})
    for key, value in new.items():
        before = merged.get(key)
        if isinstance(before, Mapping) and isinstance(value, Mapping):
            merged[key] = {**before, **value}
        else:
            merged[key] = value
    return merged


class StreamAssembler:
    """Collects `TextDelta`, `ReasoningDelta` and `ToolCallDelta` events; `message()`
    builds the result.

    Providers use it to build the response their stream ends with; text and reasoning
    keep the order they came in, tool-call fragments are merged by `index`, in index
    order. `reasoning_detail` adds what a UI does not see (signature, opaque data).
    """

    __slots__ = ("_calls", "_content", "_reasoning", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        # In order: text pieces (str) and reasoning parts being assembled.
        self._content: list[str | _Reasoning] = []
        self._reasoning: dict[int, _Reasoning] = {}
        self._calls: dict[int, list[Any]] = {}

    def add(self, event: TextDelta | ReasoningDelta | ToolCallDelta) -> None:
        """Record one fragment."""
        if isinstance(event, TextDelta):
            self._text.append(event.text)
            if self._reasoning:
                self._content.append(event.text)
            return
        if isinstance(event, ReasoningDelta):
            self._reasoning_at(event.index).pieces.append(event.text)
            return
        slot = self._calls.get(event.index)
        if slot is None:
            slot = self._calls[event.index] = [None, None, "", None]
        if event.id and not slot[0]:
            slot[0] = event.id
        if event.name:
            slot[1] = event.name if not slot[1] or slot[1] == event.name else slot[1] + event.name
        slot[2] = (slot[2] or "") + event.arguments
        if event.provider_data:
            slot[3] = _merged(slot[3], event.provider_data)

    def reasoning_detail(
        self,
        index: int,
        *,
        signature: str | None = None,
        provider: str | None = None,
        provider_data: Mapping[str, Any] | None = None,
    ) -> None:
        """Record what reasoning part `index` carries besides its text (the signature is
        appended: providers may stream it in pieces)."""
        reasoning = self._reasoning_at(index)
        if signature:
            reasoning.signature = (reasoning.signature or "") + signature
        if provider:
            reasoning.provider = provider
        if provider_data:
            reasoning.provider_data = _merged(reasoning.provider_data, provider_data)

    def _reasoning_at(self, index: int) -> _Reasoning:
        reasoning = self._reasoning.get(index)
        if reasoning is None:
            if not self._reasoning and self._text:
                self._content.extend(self._text)  # text that came before any reasoning
            reasoning = self._reasoning[index] = _Reasoning()
            self._content.append(reasoning)
        return reasoning

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
            call_id, name, arguments, provider_data = self._calls[index]
            if not name:
                raise StreamInterruptedError(f"streamed tool call #{index} never got a name")
            calls.append(
                ToolCall(
                    id=call_id or new_call_id(),
                    name=name,
                    arguments=arguments or "{}",
                    provider_data=provider_data,
                )
            )
        if not self._reasoning:
            text = self.text
            return AssistantMessage(content=text or None, tool_calls=tuple(calls))
        content = assistant_content(
            TextPart(text=item) if isinstance(item, str) else item.part() for item in self._content
        )
        return AssistantMessage(content=content, tool_calls=tuple(calls))


__all__ = ["StreamAssembler"]
