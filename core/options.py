"""Model options: the provider-neutral knobs of one model call."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from .checks import require_number

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""`"auto"`, `"none"`, `"required"`, or the name of the one tool the model must call."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSchema:
    """The JSON schema the answer's text must match: `ChatOptions.output_schema`.

    `name` (1 to 64 letters, digits, `_` or `-`) and `schema` (a JSON schema) are sent to
    providers that constrain their output to a schema; `strict` asks for strict adherence
    where the API offers it (the provider makes the schema strict-compatible, or sends it
    non-strict when it cannot be). A provider that cannot honour it says so through its
    `supports_output_schema(schema, with_tools=...)` method, or lacks that method: then
    `StructuredOutputAdvisor` states the schema in the prompt instead of setting it.
    """

    name: str
    schema: Mapping[str, Any]
    strict: bool = True
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _SCHEMA_NAME.fullmatch(self.name):
            raise ValueError(
                f"an output schema's name must be 1 to 64 letters, digits, '_' or '-': "
                f"{self.name!r}"
            )
        if not isinstance(self.schema, Mapping):
            raise TypeError("an output schema's schema must be a JSON schema object")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (for stores that persist options)."""
        values: dict[str, Any] = {
            "name": self.name,
            "schema": dict(self.schema),
            "strict": self.strict,
        }
        if self.description is not None:
            values["description"] = self.description
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> OutputSchema:
        """The `OutputSchema` that `to_dict` produced `values` from."""
        return cls(
            name=values["name"],
            schema=values["schema"],
            strict=bool(values.get("strict", True)),
            description=values.get("description"),
        )


NativeSearchVariant: TypeAlias = Literal["bm25", "regex"]
"""A provider's tool-search variants: natural-language (BM25) or Python regex queries."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeToolSearch:
    """Ask the provider to search the tool catalog itself: `ChatOptions.native_tool_search`.

    Every attached tool is sent; those named in `deferred` are sent deferred (the provider
    loads them only when its own search, of `variant`, finds them). Set by
    `ToolSearchAdvisor(native=...)`. A model declares the variants it honours with
    `supports_native_tool_search(variant)` (`core.model`); an HTTP model whose wire format
    has no tool search refuses the option with `BadRequestError` before sending anything.
    """

    variant: NativeSearchVariant
    deferred: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.variant not in ("bm25", "regex"):
            raise ValueError(
                f'native tool search variant must be "bm25" or "regex": {self.variant!r}'
            )
        deferred = tuple(self.deferred)
        if not all(isinstance(name, str) for name in deferred):
            raise TypeError("native tool search's deferred must be tool names (strings)")
        object.__setattr__(self, "deferred", deferred)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Options of a model call. `None` means "the provider's default".

    `output_schema` asks the model for an answer whose text is JSON matching a schema
    (`OutputSchema`; set by `StructuredOutputAdvisor` when the model supports it).
    `native_tool_search` asks the provider to search a deferred tool catalog itself
    (`NativeToolSearch`; set by `ToolSearchAdvisor(native=...)`). `native_compaction`
    maps a provider's name to what it sends for its own context management (set by
    `CompactionAdvisor(native=...)`; each provider reads its own entry only). `extra` is passed
    through to the provider's request body unchanged, for options this library does not
    model.
    """

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    output_schema: OutputSchema | None = None
    native_tool_search: NativeToolSearch | None = None
    native_compaction: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        # What a provider would answer with an HTTP 400 much later, refused here.
        if self.temperature is not None or self.top_p is not None:
            require_number(self.temperature, "temperature", minimum=0, optional=True)
            require_number(self.top_p, "top_p", minimum=0, optional=True)
        if self.max_tokens is not None:
            require_number(self.max_tokens, "max_tokens", minimum=1, integer=True)

    def merged(self, overrides: ChatOptions | None = None, **values: Any) -> ChatOptions:
        """Return these options with the non-`None` fields of `overrides` and `values` applied."""
        if overrides is None and not values:  # nothing to merge (twice per chain call)
            return self
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


__all__ = ["ChatOptions", "OutputSchema", "ToolChoice"]
