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
        if type(self) is not ChatRequest:
            return replace(self, messages=messages)
        return self._copy("messages", messages)

    def appended(self, *messages: Message) -> ChatRequest:
        """A copy with `messages` appended to the transcript."""
        if type(self) is not ChatRequest:  # a subclass may check its fields in __init__
            return replace(self, messages=self.messages + messages)
        return self._copy("messages", self.messages + messages)

    def _copy(self, name: str, value: Any) -> ChatRequest:
        """What `replace(self, name=value)` makes of an exact `ChatRequest` (no checks in
        its `__init__`): a plain attribute copy that keeps the tools-by-name index unless
        the tools change (the tool loop's per-round copy, tool search's narrowed request).

        Speed, measured alone (`benchmarks.links_ab` against `replace`, one run, 7 Dec
        2026): 1.5% of the bare turn at the median (4% at the 10th percentile) and 5% of
        the full chain. Under the 5% rule of the bare turn, it is kept because without
        it and the other two kept copies (`ChatResponse.__init__`, `Tool.run`) the bare
        turn and the full chain were 12-14% slower than before the renovation, over its
        10% allowance (measured twice: docs/architecture.md, decision 29)."""
        copy = object.__new__(ChatRequest)
        values = copy.__dict__
        values.update(self.__dict__)
        values[name] = value
        if name == "tools":
            values.pop("_tools_by_name", None)
        return copy

    def with_tools(self, tools: tuple[Tool, ...]) -> ChatRequest:
        """A copy with another set of attached tools."""
        if type(self) is not ChatRequest:
            return replace(self, tools=tools)
        return self._copy("tools", tools)

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
