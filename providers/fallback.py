"""`FallbackModel`: a chat model that tries the next model when one is unavailable."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, TypeAlias

from opentelemetry import trace

from ..core.errors import AdvisorChainError, ChainConfigurationError
from ..core.events import ResponseCompleted, StreamEvent
from ..core.manager import EFFECTS
from ..core.messages import ToolCall
from ..core.model import (
    ChatModel,
    WrapperModel,
    supports_native_tool_search,
    supports_output_schema,
)
from ..core.options import NativeSearchVariant, OutputSchema
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from .errors import ProviderUnavailableError, RateLimitError

logger = logging.getLogger("advisorchain.fallback")

FallbackOn: TypeAlias = (
    type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
)
"""When to try the next model: exception types, or a predicate on the exception."""

DEFAULT_FALLBACK_ON: tuple[type[BaseException], ...] = (ProviderUnavailableError, RateLimitError)
"""Unavailable (HTTP 5xx, 408, unreachable), timed out (`ProviderTimeoutError` is a
`ProviderUnavailableError`), and rate limited (429, after the provider's own retries)."""

FALLBACK_RECORDS = "advisorchain.fallback"
"""`request.context` key: the list of `FallbackRecord`s of the turn's model calls."""

MODEL_ATTRIBUTE = "advisorchain.fallback.model"
INDEX_ATTRIBUTE = "advisorchain.fallback.index"
PROVIDER_ATTRIBUTE = "advisorchain.fallback.provider"


class FallbackAfterEffectsError(AdvisorChainError):
    """A model failed with a fallback error after tool calls with possible effects ran in
    its attempt (a `Chain` used as a model ran them): the next model is not tried, since
    it would start the turn again and run them again.

    `calls` are those calls, in the order they started (tools neither `read_only` nor
    `idempotent`); `model` and `index` name the model that failed; the failure itself is
    `__cause__`. The message names the tools and call ids, never the arguments.
    """

    def __init__(
        self, message: str, *, calls: tuple[ToolCall, ...], model: str | None, index: int
    ) -> None:
        super().__init__(message)
        self.calls = calls
        self.model = model
        self.index = index


class FallbackRecord(NamedTuple):
    """Which model answered one model call: its position in the list (0: the primary),
    its names, and the exception type names of the models that failed before it."""

    position: int
    model: str | None
    provider: str | None
    failures: tuple[str, ...] = ()


class FallbackModel(WrapperModel):
    """Tries each model in turn until one answers (a `ChatModel`, so it goes in a `Chain`).

    Control flow: `call` sends the request unchanged to the first model; if it raises an
    error that `on` matches (by default: unavailable, timeout, rate limit, 5xx), it
    sends the same request to the next one, and so on; the last model's error, or any
    error `on` does not match, is raised (with a note naming the models that failed
    before). `stream` does the same, but only while nothing has reached the caller: once
    a model's stream yielded its first event, a failure of that stream is raised, never
    answered by another model (the caller would get two answers mixed).

    A model that ran tools before it failed (a `Chain` with a tool loop used as a model)
    is never followed by the next one if a call of a tool that is neither `read_only`
    nor `idempotent` started in its attempt: the next model would start the turn over
    and run it again. `call` and `stream` raise `FallbackAfterEffectsError` instead
    (the calls that ran, the failure as its cause). Calls of read-only and idempotent
    tools do not prevent fallback: running them again has no further effect. (The
    manager appends such calls to `request.context[EFFECTS]`, which this model reads.)

    Which model answered: the response's `model` is the answering model's (its own, or
    its `model_name` when it reports none); a `FallbackRecord` is appended to the list
    at `request.context[FALLBACK_RECORDS]` (one per model call of the turn, so links and
    callers that pass a `ChatRequest` can read it); the `advisorchain.fallback` logger
    records each failure that falls back (WARNING) and each answer by a fallback model
    (INFO); and the current span (a `TracingAdvisor`'s model-call span) gets the
    attributes `advisorchain.fallback.model`, `.provider` and `.index`, plus one
    `advisorchain.fallback` event per failed model.

    `model_name` and `provider_name` are the primary's (what a chain reports before a
    call). Every model gets the same request: leave `options.model` unset and give each
    model its own model name.
    """

    def __init__(
        self, models: Sequence[ChatModel], *, on: FallbackOn = DEFAULT_FALLBACK_ON
    ) -> None:
        self.models: tuple[ChatModel, ...] = tuple(models)
        if not self.models:
            raise ChainConfigurationError("FallbackModel needs at least one model")
        for model in self.models:
            if not isinstance(model, ChatModel):
                raise ChainConfigurationError(f"not a chat model: {model!r}")
        self.on = on
        if isinstance(on, type) or isinstance(on, tuple):
            types = on if isinstance(on, tuple) else (on,)
            if not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
                raise ChainConfigurationError("on= takes exception types or a predicate")
            self._matches: Callable[[BaseException], bool] = lambda exc: isinstance(exc, types)
        elif callable(on):
            self._matches = on
        else:
            raise ChainConfigurationError("on= takes exception types or a predicate")
        self._names = [_names(m) for m in self.models]
        super().__init__(self.models[0])

    @property
    def model_name(self) -> str | None:
        """The primary model's name."""
        return self._names[0][0]

    @property
    def provider_name(self) -> str | None:
        """The primary model's provider name."""
        return self._names[0][1]

    def __repr__(self) -> str:
        return f"FallbackModel({list(self.models)!r})"

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """Whether every model honours `schema`: any of them may be the one to answer."""
        return all(supports_output_schema(m, schema, with_tools=with_tools) for m in self.models)

    def supports_native_tool_search(self, variant: NativeSearchVariant) -> bool:
        """Whether every model searches with `variant`: any of them may be the one to answer."""
        return all(supports_native_tool_search(m, variant) for m in self.models)

    async def aclose(self) -> None:
        """Close every model that can be closed."""
        for model in self.models:
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer with the first model that does not fail with a fallback error."""
        failures: list[BaseException] = []
        last = len(self.models) - 1
        effects = _effects(request)
        for index, model in enumerate(self.models):
            before = len(effects)
            try:
                response = await model.call(request)
            except Exception as exc:
                if index == last or not self._matches(exc):
                    _note(exc, failures, self._names)
                    raise
                if len(effects) > before:
                    raise self._after_effects(index, exc, effects[before:]) from exc
                self._failed(index, exc)
                failures.append(exc)
                continue
            return self._answered(request, index, response, failures)
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream the first model that does not fail before its first event."""
        failures: list[BaseException] = []
        last = len(self.models) - 1
        effects = _effects(request)
        for index, model in enumerate(self.models):
            started = False
            before = len(effects)
            try:
                async with closing_stream(model.stream(request)) as events:
                    async for event in events:
                        started = True
                        if isinstance(event, ResponseCompleted):
                            event = ResponseCompleted(
                                self._answered(request, index, event.response, failures)
                            )
                        yield event
                return
            except Exception as exc:
                if len(effects) > before and index < last and self._matches(exc):
                    raise self._after_effects(index, exc, effects[before:]) from exc
                if started or index == last or not self._matches(exc):
                    _note(exc, failures, self._names)
                    raise
                self._failed(index, exc)
                failures.append(exc)

    def _after_effects(
        self, index: int, exc: BaseException, calls: list[ToolCall]
    ) -> FallbackAfterEffectsError:
        model = self._names[index][0]
        ran = ", ".join(f"{c.name} (call {c.id})" for c in calls[:10])
        more = f" and {len(calls) - 10} more" if len(calls) > 10 else ""
        logger.warning(
            "model %s (#%d) failed (%s) after tool calls with effects ran; not falling back",
            model,
            index,
            type(exc).__qualname__,
            extra={"event": "fallback_refused", "model": model, "index": index},
        )
        return FallbackAfterEffectsError(
            f"model {model or '#' + str(index)} failed ({type(exc).__qualname__}) after "
            f"tool calls with effects ran: {ran}{more}; the next model is not tried, it "
            "would run them again",
            calls=tuple(calls),
            model=model,
            index=index,
        )

    def _failed(self, index: int, exc: BaseException) -> None:
        model, provider = self._names[index]
        following = self._names[index + 1][0]
        kind = type(exc).__qualname__
        logger.warning(
            "model %s (#%d) failed (%s); trying %s",
            model,
            index,
            kind,
            following,
            extra={"event": "fallback", "model": model, "index": index, "error_type": kind},
        )
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(
                "advisorchain.fallback",
                {INDEX_ATTRIBUTE: index, MODEL_ATTRIBUTE: model or "", "error.type": kind},
            )

    def _answered(
        self,
        request: ChatRequest,
        index: int,
        response: ChatResponse,
        failures: list[BaseException],
    ) -> ChatResponse:
        model, provider = self._names[index]
        answered_by = response.model or model
        if response.model is None and model is not None:
            response = replace(response, model=model)
        failed = tuple([type(f).__qualname__ for f in failures]) if failures else ()
        record = FallbackRecord(index, answered_by, provider, failed)
        records = request.context.get(FALLBACK_RECORDS)
        if records is None:
            request.context[FALLBACK_RECORDS] = [record]
        else:
            records.append(record)
        if index:
            logger.info(
                "answered by fallback model %s (#%d)",
                answered_by,
                index,
                extra={"event": "fallback_answer", "model": answered_by, "index": index},
            )
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(INDEX_ATTRIBUTE, index)
            if answered_by:
                span.set_attribute(MODEL_ATTRIBUTE, answered_by)
            if provider:
                span.set_attribute(PROVIDER_ATTRIBUTE, provider)
        return response


def _effects(request: ChatRequest) -> list[ToolCall]:
    """The turn's list of calls that started with possible effects (made if need be)."""
    effects: list[ToolCall] | None = request.context.get(EFFECTS)
    if effects is None:
        effects = request.context[EFFECTS] = []
    return effects


def _names(model: Any) -> tuple[str | None, str | None]:
    name = getattr(model, "model_name", None)
    provider = getattr(model, "provider_name", None)
    return (
        name if isinstance(name, str) and name else None,
        provider if isinstance(provider, str) and provider else None,
    )


def _note(
    exc: BaseException,
    failures: list[BaseException],
    names: list[tuple[str | None, str | None]],
) -> None:
    if failures:
        tried = ", ".join(
            f"{names[i][0] or '#' + str(i)} ({type(f).__qualname__})"
            for i, f in enumerate(failures)
        )
        exc.add_note(f"FallbackModel: failed before: {tried}")


__all__ = [
    "DEFAULT_FALLBACK_ON",
    "FALLBACK_RECORDS",
    "INDEX_ATTRIBUTE",
    "MODEL_ATTRIBUTE",
    "PROVIDER_ATTRIBUTE",
    "FallbackAfterEffectsError",
    "FallbackModel",
    "FallbackOn",
    "FallbackRecord",
]
