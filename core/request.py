"""`ChatRequest`: everything one model call needs, and what the chain's links share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .messages import Message, UserMessage
from .options import ChatOptions

if TYPE_CHECKING:
    from .deferred import Decision
    from .tools import Tool

_NO_VALUES: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """An immutable request travelling through the chain; links pass on changed copies.

    - `messages`: the transcript so far.
    - `tools`: the tools attached to this request: executable, not only described.
    - `tool_context`: values for tools only; never serialized to a provider.
    - `context`: one mutable map shared by every hook of every round of a turn, so links
      can cooperate (approval decisions, counters, the turn's span). Never sent anywhere.
    - `decisions`: on a resumed turn, the decisions for the calls its transcript's last
      round waits on, by call id (`chain.call(..., decisions=...)`, `core/deferred.py`);
      the tool loop settles them first. `None` on every other request; never sent to a
      model.
    """

    messages: tuple[Message, ...]
    options: ChatOptions = field(default_factory=ChatOptions)
    tools: tuple[Tool, ...] = ()
    tool_context: Mapping[str, Any] = field(default_factory=lambda: _NO_VALUES)
    conversation_id: str | None = None
    context: dict[str, Any] = field(default_factory=dict, compare=False)
    decisions: Mapping[str, Decision] | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return (
            f"ChatRequest(messages={len(self.messages)}, tools={[t.name for t in self.tools]}, "
            f"options={self.options!r}, tool_context_keys={sorted(self.tool_context)})"
        )

    @cached_property
    def _tools_by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}

    def find_tool(self, name: str) -> Tool | None:
        """The attached tool called `name`, or `None`."""
        return self._tools_by_name.get(name)

    def with_messages(self, messages: tuple[Message, ...]) -> ChatRequest:
        """A copy with another transcript."""
        return replace(self, messages=messages)

    def appended(self, *messages: Message) -> ChatRequest:
        """A copy with `messages` appended to the transcript."""
        return replace(self, messages=self.messages + messages)

    def with_tools(self, tools: tuple[Tool, ...]) -> ChatRequest:
        """A copy with another set of attached tools."""
        return replace(self, tools=tools)

    def with_options(self, options: ChatOptions | None = None, **values: Any) -> ChatRequest:
        """A copy whose options are these merged with `options` and `values`."""
        return replace(self, options=self.options.merged(options, **values))

    @property
    def last_user_index(self) -> int:
        """Index of the last user message, or -1: where the current turn starts."""
        for i in range(len(self.messages) - 1, -1, -1):
            if isinstance(self.messages[i], UserMessage):
                return i
        return -1


__all__ = ["ChatRequest"]
