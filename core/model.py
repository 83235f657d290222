"""The `ChatModel` protocol (the innermost step of every chain), the capabilities a model
may declare, and `WrapperModel`, the base of models that wrap another one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .events import StreamEvent
from .request import ChatRequest
from .response import ChatResponse

if TYPE_CHECKING:
    from .options import NativeSearchVariant, OutputSchema


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a `ChatRequest`: providers, test doubles, and `Chain` itself.

    `stream` yields `TextDelta`, `ReasoningDelta` and `ToolCallDelta` events as they
    arrive and ends with exactly one `ResponseCompleted`. A model may also declare the
    capabilities of `ModelCapabilities`; read them with `model_name(model)`,
    `provider_name(model)`, `supports_output_schema(model, ...)` and
    `supports_native_tool_search(model, variant)`, which answer for a
    model that declares none.
    """

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer `request` in one piece."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer `request` as a stream of events."""
        ...


class ModelCapabilities(Protocol):
    """What a `ChatModel` may declare about itself, each optional:

    - `model_name` / `provider_name`: what logging and tracing report.
    - `supports_output_schema(schema, *, with_tools)`: whether the model constrains its
      answer to a JSON schema natively (`ChatOptions.output_schema`), alone or beside
      tools; `StructuredOutputAdvisor(mode="auto")` asks it.
    - `supports_native_tool_search(variant)`: whether the provider searches a deferred
      tool catalog itself (`ChatOptions.native_tool_search`); `ToolSearchAdvisor(native=...)`
      asks it when it is placed in a chain.
    - `aclose()`: release connections.
    """

    model_name: str | None
    provider_name: str | None

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """Whether the model answers in `schema` natively."""
        ...

    def supports_native_tool_search(self, variant: NativeSearchVariant) -> bool:
        """Whether the provider searches a deferred catalog with `variant` itself."""
        ...

    async def aclose(self) -> None:
        """Release what the model holds open."""
        ...


def model_name(model: object) -> str | None:
    """The model's declared name, or `None`."""
    value = getattr(model, "model_name", None)
    return value if isinstance(value, str) else None


def provider_name(model: object) -> str | None:
    """The model's declared provider name, or `None`."""
    value = getattr(model, "provider_name", None)
    return value if isinstance(value, str) else None


def supports_output_schema(model: object, schema: OutputSchema, *, with_tools: bool) -> bool:
    """Whether the model declares native output-schema support for `schema` (`False` when
    it declares nothing)."""
    supports = getattr(model, "supports_output_schema", None)
    if not callable(supports):
        return False
    return bool(supports(schema, with_tools=with_tools))


def supports_native_tool_search(model: object, variant: NativeSearchVariant) -> bool:
    """Whether the model declares that its provider searches a deferred tool catalog with
    `variant` (`False` when it declares nothing)."""
    supports = getattr(model, "supports_native_tool_search", None)
    if not callable(supports):
        return False
    return bool(supports(variant))


class WrapperModel:
    """A `ChatModel` around another one (`inner`) that declares the inner model's
    capabilities as its own: its name, provider, native output-schema and tool-search
    support and `aclose`. Subclasses override `call` and `stream` (by default they pass through)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    @property
    def model_name(self) -> str | None:
        """The inner model's name."""
        return model_name(self.inner)

    @property
    def provider_name(self) -> str | None:
        """The inner model's provider name."""
        return provider_name(self.inner)

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """What the inner model declares."""
        return supports_output_schema(self.inner, schema, with_tools=with_tools)

    def supports_native_tool_search(self, variant: NativeSearchVariant) -> bool:
        """What the inner model declares."""
        return supports_native_tool_search(self.inner, variant)

    async def aclose(self) -> None:
        """Close the inner model, if it can be closed."""
        aclose = getattr(self.inner, "aclose", None)
        if aclose is not None:
            await aclose()

    async def call(self, request: ChatRequest) -> ChatResponse:
        """The inner model's answer."""
        return await self.inner.call(request)

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The inner model's stream."""
        return self.inner.stream(request)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


__all__ = [
    "ChatModel",
    "ModelCapabilities",
    "WrapperModel",
    "model_name",
    "provider_name",
    "supports_native_tool_search",
    "supports_output_schema",
]
