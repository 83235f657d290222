"""`TextToolCallModel`: a `ChatModel` wrapper whose tool calls written as text become real ones.

The parsing is `core.text_tool_calls` (shared with `SmallModelAdvisor`); this module only
applies it around a model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..core.events import StreamEvent
from ..core.model import ChatModel, WrapperModel
from ..core.options import OutputSchema
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.text_tool_calls import (
    apply_text_tool_calls,
    parse_text_tool_call_stream,
    tool_names_for,
)

__all__ = ["TextToolCallModel"]


class TextToolCallModel(WrapperModel):
    """Wraps a `ChatModel` so that tool calls it writes as text become real tool calls.

    Names of tools attached to the request are recognized (with `any_name`, any name, so
    that a call to a tool that is not attached reaches the tool loop, which reports it to
    the model, instead of the user); nothing is parsed when `tool_choice` is `"none"`.
    Structured tool calls from the model pass through.
    """

    def __init__(self, model: ChatModel, *, any_name: bool = False) -> None:
        super().__init__(model)
        self.model = model
        self.any_name = any_name

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """Never: a native schema would keep the model from writing tool calls as text."""
        return False

    def __repr__(self) -> str:
        return f"TextToolCallModel({self.model!r})"

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Call the wrapped model and parse its text for tool calls."""
        response = await self.model.call(request)
        return apply_text_tool_calls(response, tool_names_for(request), any_name=self.any_name)

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream the wrapped model, holding back and parsing text that is a tool call."""
        names = tool_names_for(request)
        if not names:
            return self.model.stream(request)
        events = self.model.stream(request)
        return parse_text_tool_call_stream(events, names, any_name=self.any_name)
