"""Model options: the provider-neutral knobs of one model call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""`"auto"`, `"none"`, `"required"`, or the name of the one tool the model must call."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Options of a model call. `None` means "the provider's default".

    `extra` is passed through to the provider's request body unchanged, for options
    this library does not model.
    """

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def merged(self, overrides: ChatOptions | None = None, **values: Any) -> ChatOptions:
        """Return these options with the non-`None` fields of `overrides` and `values` applied."""
        updates: dict[str, Any] = {}
        if overrides is not None:
            for f in fields(overrides):
                value = getattr(overrides, f.name)
                if f.name == "extra":
                    if value:
                        updates["extra"] = {**self.extra, **value}
                elif value is not None:
                    updates[f.name] = value
        unknown = set(values) - _OPTION_NAMES
        if unknown:
            raise TypeError(f"unknown chat option(s): {', '.join(sorted(unknown))}")
        for name, value in values.items():
            if value is None:
                continue
            if name == "extra":
                updates["extra"] = {**updates.get("extra", self.extra), **value}
            elif name == "stop" and isinstance(value, str):
                updates["stop"] = (value,)
            else:
                updates[name] = tuple(value) if name == "stop" else value
        return replace(self, **updates) if updates else self


_OPTION_NAMES = frozenset(f.name for f in fields(ChatOptions))
